//! Reference kernels for the ops of opsets 26 to 28 — CumProd, BitCast, SwiGLU,
//! LinearAttention and CausalConvWithState — and BitShift's signed forms (28), against
//! values worked out by hand in the comments, the spec's own examples and IEEE-754 bit
//! patterns; the ONNX node tests check the cases ONNX ships. Each output's type is also
//! checked against inference on the same operands.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::infer::infer_on_tensors;
use concord_core::op::{Binary, LinearAttentionRule};
use concord_core::{DType, Op, OpError, Tensor};
use concord_cpu::run_op;

fn tensor(result: Result<Tensor, concord_core::Error>) -> Tensor {
    match result {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

/// Runs `op`, checking every output against inference on the same operands.
fn run(op: &Op, inputs: &[Option<&Tensor>], outputs: usize) -> Result<Vec<Tensor>, OpError> {
    let out = run_op(op, inputs, outputs)?;
    let inferred = infer_on_tensors(op, inputs, outputs)?;
    assert_eq!(out.len(), inferred.len(), "{op:?}: output count");
    for (t, fact) in out.iter().zip(&inferred) {
        assert_eq!(fact.dtype, t.dtype(), "{op:?}: inferred dtype");
        assert_eq!(fact.shape, t.shape().to_sym(), "{op:?}: inferred shape");
    }
    Ok(out)
}

fn first(op: &Op, inputs: &[Option<&Tensor>]) -> Tensor {
    match run(op, inputs, 1) {
        Ok(mut t) => t.remove(0),
        Err(e) => panic!("{op:?}: {e}"),
    }
}

fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
    tensor(Tensor::from_vec(dims.to_vec(), v.to_vec()))
}

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "length: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol,
            "element {i}: got {g}, want {w} ({got:?})"
        );
    }
}

#[test]
fn cum_prod_follows_the_spec_examples() {
    // The spec's example: x = [1, 2, 3] along axis 0.
    let x = f32s(&[3], &[1.0, 2.0, 3.0]);
    let axis = Tensor::scalar_i64(0);
    let case = |exclusive, reverse| {
        first(
            &Op::CumProd { exclusive, reverse },
            &[Some(&x), Some(&axis)],
        )
        .to_f64_vec()
    };
    assert_eq!(case(false, false), [1.0, 2.0, 6.0]);
    assert_eq!(case(true, false), [1.0, 1.0, 2.0]);
    assert_eq!(case(false, true), [6.0, 6.0, 3.0]);
    assert_eq!(case(true, true), [6.0, 3.0, 1.0]);
}

#[test]
fn cum_prod_runs_along_a_negative_axis_and_wraps_integers() {
    // [[1, 2, 3], [4, 5, 6]] along axis -1: [[1, 2, 6], [4, 20, 120]].
    let x = tensor(Tensor::from_vec(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6]));
    let axis = Tensor::scalar_i64(-1);
    let y = first(
        &Op::CumProd {
            exclusive: false,
            reverse: false,
        },
        &[Some(&x), Some(&axis)],
    );
    assert_eq!(y.dtype(), DType::I32);
    assert_eq!(y.to_i64_vec(), Some(vec![1, 2, 6, 4, 20, 120]));
    // 65536 · 65536 = 2^32 wraps to 0 in i32, as two's complement arithmetic does.
    let big = tensor(Tensor::from_vec(vec![2], vec![65536i32, 65536]));
    let y = first(
        &Op::CumProd {
            exclusive: false,
            reverse: false,
        },
        &[Some(&big), Some(&Tensor::scalar_i64(0))],
    );
    assert_eq!(y.to_i64_vec(), Some(vec![65536, 0]));
}

#[test]
fn bit_cast_keeps_the_bits() {
    // IEEE-754: 1.0f32 is 0x3F80_0000, -2.0f32 is 0xC000_0000.
    let x = f32s(&[2], &[1.0, -2.0]);
    let y = first(&Op::BitCast { to: DType::I32 }, &[Some(&x)]);
    assert_eq!(y.dtype(), DType::I32);
    assert_eq!(
        y.to_i64_vec(),
        Some(vec![0x3F80_0000, i64::from(0xC000_0000u32 as i32)])
    );
    // And back: the bits read as f32 again are the values.
    let back = first(&Op::BitCast { to: DType::F32 }, &[Some(&y)]);
    assert!(back.bit_identical(&x));
    // i8 -1 is the byte 0xFF, 255 as u8.
    let b = tensor(Tensor::from_vec(vec![2], vec![-1i8, 5]));
    let u = first(&Op::BitCast { to: DType::U8 }, &[Some(&b)]);
    assert_eq!(u.to_i64_vec(), Some(vec![255, 5]));
}

#[test]
fn bit_cast_refuses_another_width() {
    let x = f32s(&[1], &[1.0]);
    match run(&Op::BitCast { to: DType::I64 }, &[Some(&x)], 1) {
        Err(OpError::Attribute { name: "to", detail }) => {
            assert!(detail.contains("f32") && detail.contains("i64"), "{detail}")
        }
        other => panic!("expected an attribute error naming both dtypes, got {other:?}"),
    }
}

#[test]
fn swiglu_gates_b_by_the_swish_of_a() {
    // Swish(0) = 0; Swish(a) for large a is a; with alpha = 1 and a = ln 3,
    // sigmoid(ln 3) = 3/4, so the gate is 0.75 · ln 3.
    let ln3 = 3f64.ln();
    let a = f32s(&[3], &[0.0, 40.0, ln3 as f32]);
    let b = f32s(&[3], &[5.0, 2.0, 4.0]);
    let y = first(&Op::SwiGLU { alpha: 1.0 }, &[Some(&a), Some(&b)]).to_f64_vec();
    close(&y, &[0.0, 80.0, 0.75 * f64::from(ln3 as f32) * 4.0], 1e-6);
    // alpha = 2 with a = ln(3)/2: sigmoid(ln 3) = 3/4 again.
    let a = f32s(&[1], &[(ln3 / 2.0) as f32]);
    let b = f32s(&[1], &[1.0]);
    let y = first(&Op::SwiGLU { alpha: 2.0 }, &[Some(&a), Some(&b)]).to_f64_vec();
    close(&y, &[0.75 * f64::from((ln3 / 2.0) as f32)], 1e-6);
}

#[test]
fn swiglu_refuses_broadcasting() {
    let a = f32s(&[2], &[1.0, 2.0]);
    let b = f32s(&[1], &[1.0]);
    assert!(matches!(
        run(&Op::SwiGLU { alpha: 1.0 }, &[Some(&a), Some(&b)], 1),
        Err(OpError::Shape(m)) if m.contains("one shape")
    ));
}

fn linear_attention(rule: LinearAttentionRule, scale: f32) -> Op {
    Op::LinearAttention {
        kv_num_heads: 1,
        q_num_heads: 1,
        scale,
        update_rule: rule,
    }
}

#[test]
fn linear_attention_accumulates_outer_products() {
    // One head, d_k = d_v = 2, two tokens, scale 1.
    // t0: k = (1, 0), v = (2, 3): S = [[2, 3], [0, 0]]; q = (1, 1): o = (2, 3).
    // t1: k = (0, 1), v = (4, 5): S = [[2, 3], [4, 5]]; q = (1, 0): o = (2, 3).
    let q = f32s(&[1, 2, 2], &[1.0, 1.0, 1.0, 0.0]);
    let k = f32s(&[1, 2, 2], &[1.0, 0.0, 0.0, 1.0]);
    let v = f32s(&[1, 2, 2], &[2.0, 3.0, 4.0, 5.0]);
    let out = match run(
        &linear_attention(LinearAttentionRule::Linear, 1.0),
        &[Some(&q), Some(&k), Some(&v)],
        2,
    ) {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(out[0].to_f64_vec(), [2.0, 3.0, 2.0, 3.0]);
    assert_eq!(out[1].dims(), [1, 1, 2, 2]);
    assert_eq!(out[1].to_f64_vec(), [2.0, 3.0, 4.0, 5.0]);
    // The default scale (0) is 1 / sqrt(d_k) = 1 / sqrt 2.
    let scaled = first(
        &linear_attention(LinearAttentionRule::Linear, 0.0),
        &[Some(&q), Some(&k), Some(&v)],
    );
    let r = 0.5f64.sqrt();
    close(
        &scaled.to_f64_vec(),
        &[2.0 * r, 3.0 * r, 2.0 * r, 3.0 * r],
        1e-6,
    );
}

#[test]
fn linear_attention_gated_delta_decays_then_corrects() {
    // One token, d_k = d_v = 1, past S = 2, decay g = ln(1/2) (S becomes 1), beta = 1/2,
    // k = 1, v = 5: v' = 1/2 · (5 − 1 · 1) = 2, S = 1 + 1 · 2 = 3; q = 1, scale 1: o = 3.
    let one = f32s(&[1, 1, 1], &[1.0]);
    let v = f32s(&[1, 1, 1], &[5.0]);
    let past = f32s(&[1, 1, 1, 1], &[2.0]);
    let decay = f32s(&[1, 1, 1], &[0.5f32.ln()]);
    let beta = f32s(&[1, 1, 1], &[0.5]);
    let out = match run(
        &linear_attention(LinearAttentionRule::GatedDelta, 1.0),
        &[
            Some(&one),
            Some(&one),
            Some(&v),
            Some(&past),
            Some(&decay),
            Some(&beta),
        ],
        2,
    ) {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    };
    close(&out[0].to_f64_vec(), &[3.0], 1e-6);
    close(&out[1].to_f64_vec(), &[3.0], 1e-6);
    // The gated rules need decay, the delta rules beta; the others refuse them.
    assert!(matches!(
        run(
            &linear_attention(LinearAttentionRule::GatedDelta, 1.0),
            &[Some(&one), Some(&one), Some(&v)],
            1
        ),
        Err(OpError::MissingInput { index: 4, .. })
    ));
    assert!(matches!(
        run(
            &linear_attention(LinearAttentionRule::Linear, 1.0),
            &[Some(&one), Some(&one), Some(&v), None, Some(&decay)],
            1
        ),
        Err(OpError::Shape(m)) if m.contains("decay")
    ));
}

#[test]
fn linear_attention_refuses_inconsistent_heads_and_shapes() {
    let t = f32s(&[1, 2, 2], &[1.0, 0.0, 0.0, 1.0]);
    let heads = |kv_num_heads, q_num_heads| Op::LinearAttention {
        kv_num_heads,
        q_num_heads,
        scale: 1.0,
        update_rule: LinearAttentionRule::Linear,
    };
    // No kv heads (the loader refuses it; an Op built by hand must too, without dividing by
    // zero), and no query heads to split the query's last extent into.
    let got = run(&heads(0, 1), &[Some(&t), Some(&t), Some(&t)], 1);
    assert!(
        matches!(
            &got,
            Err(OpError::Attribute {
                name: "kv_num_heads",
                ..
            })
        ),
        "{got:?}"
    );
    let got = run(&heads(1, 0), &[Some(&t), Some(&t), Some(&t)], 1);
    assert!(
        matches!(&got, Err(OpError::Shape(m)) if m.contains("query must be 3-D")),
        "{got:?}"
    );
    // A value of another sequence length than query and key (whose agree).
    let long = f32s(&[1, 3, 2], &[0.0; 6]);
    let got = run(&heads(1, 1), &[Some(&t), Some(&t), Some(&long)], 1);
    assert!(
        matches!(&got, Err(OpError::Shape(m)) if m.contains("do not agree")),
        "{got:?}"
    );
    // A decay of another batch, with a last extent of one per head or one per key dim:
    // neither (1, 2, 1) nor (1, 2, 2).
    let gated = linear_attention(LinearAttentionRule::Gated, 1.0);
    for per in [1, 2] {
        let decay = f32s(&[2, 2, per], &vec![0.0; 4 * per]);
        let got = run(
            &gated,
            &[Some(&t), Some(&t), Some(&t), None, Some(&decay)],
            1,
        );
        assert!(
            matches!(&got, Err(OpError::Shape(m)) if m.contains("decay must be")),
            "{per}: {got:?}"
        );
    }
    // A beta of another batch, with one value per head (and so one for all): not (1, 2, 1).
    let delta = linear_attention(LinearAttentionRule::Delta, 1.0);
    let beta = f32s(&[2, 2, 1], &[0.5; 4]);
    let got = run(
        &delta,
        &[Some(&t), Some(&t), Some(&t), None, None, Some(&beta)],
        1,
    );
    assert!(
        matches!(&got, Err(OpError::Shape(m)) if m.contains("beta must be")),
        "{got:?}"
    );
}

#[test]
fn causal_conv_with_state_carries_the_last_inputs() {
    // One channel, k = 3, weight (1, 2, 3), past state (10, 20), input (1, 2):
    // padded = 10 20 1 2; outputs 1·10 + 2·20 + 3·1 = 53 and 1·20 + 2·1 + 3·2 = 28;
    // present state = the last two padded values, (1, 2).
    let x = f32s(&[1, 1, 2], &[1.0, 2.0]);
    let w = f32s(&[1, 1, 3], &[1.0, 2.0, 3.0]);
    let past = f32s(&[1, 1, 2], &[10.0, 20.0]);
    let op = Op::CausalConvWithState { silu: false };
    let out = match run(&op, &[Some(&x), Some(&w), None, Some(&past)], 2) {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(out[0].to_f64_vec(), [53.0, 28.0]);
    assert_eq!(out[1].to_f64_vec(), [1.0, 2.0]);
    // Without a past state the padding is zeros: 3·1 = 3 and 2·1 + 3·2 = 8; with bias 1
    // and SiLU, y = s · sigmoid(s) for s = 4 and 9.
    let bias = f32s(&[1], &[1.0]);
    let silu = Op::CausalConvWithState { silu: true };
    let y = first(&silu, &[Some(&x), Some(&w), Some(&bias)]).to_f64_vec();
    let s = |v: f64| v / (1.0 + (-v).exp());
    close(&y, &[s(4.0), s(9.0)], 1e-5);
    // A weight of another channel count is refused with the shape it needs.
    let wrong = f32s(&[2, 1, 3], &[0.0; 6]);
    assert!(matches!(
        run(&op, &[Some(&x), Some(&wrong)], 1),
        Err(OpError::Shape(m)) if m.contains("weight")
    ));
}

#[test]
fn bit_shift_on_signed_integers() {
    let shift = |left: bool, x: Vec<i8>, y: Vec<i8>| {
        let x = tensor(Tensor::from_vec(vec![x.len()], x));
        let y = tensor(Tensor::from_vec(vec![y.len()], y));
        first(
            &Op::Binary(Binary::BitShift { left }),
            &[Some(&x), Some(&y)],
        )
        .to_i64_vec()
    };
    // Right shifts are arithmetic: -8 >> 1 = -4. Shifting by 8 or more, or by a negative
    // amount, leaves the sign's fill: -1 for a negative value, 0 otherwise.
    assert_eq!(
        shift(false, vec![-8, 8, -8, 8, -3], vec![1, 1, 8, 9, -1]),
        Some(vec![-4, 4, -1, 0, -1])
    );
    // Zero shifted right by 8 or more, or by a negative amount, is the fill of a
    // non-negative value: 0.
    assert_eq!(shift(false, vec![0, 0], vec![8, -1]), Some(vec![0, 0]));
    // Left shifts drop what passes the sign bit: 64 << 1 = 128 wraps to -128, 3 << 7 =
    // 384 keeps its low byte 0x80 = -128; out-of-range shifts give 0.
    assert_eq!(
        shift(true, vec![64, 3, -1, 5], vec![1, 7, 8, -2]),
        Some(vec![-128, -128, 0, 0])
    );
}
