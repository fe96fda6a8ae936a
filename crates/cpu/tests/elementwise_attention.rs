//! Reference kernels for Attention and RotaryEmbedding: hand-computed values for the
//! masking, head grouping, cache and rotation rules, and typed errors on bad operands. The
//! ONNX node tests and the onnxruntime golden cases check them on larger inputs.

mod elementwise_support;

use concord_core::infer::infer_on_tensors;
use concord_core::{DType, Op, OpError, Tensor};
use concord_cpu::run_op;
use elementwise_support::{
    bools, check_err, check_float, check_inference_agrees, f32s, i64s, ok, run, run_opt, Failure,
    Tolerance::{Exact, RoundedOnce},
};

fn attention() -> Op {
    attention_with(false, None, None, 0)
}

fn attention_with(
    is_causal: bool,
    q_num_heads: Option<usize>,
    kv_num_heads: Option<usize>,
    qk_matmul_output_mode: i64,
) -> Op {
    Op::Attention {
        is_causal,
        kv_num_heads,
        q_num_heads,
        qk_matmul_output_mode,
        scale: None,
        softcap: 0.0,
        softmax_precision: None,
        left_window_size: -1,
        right_window_size: -1,
    }
}

fn rotary(interleaved: bool, num_heads: Option<usize>, dim: usize) -> Op {
    Op::RotaryEmbedding {
        interleaved,
        num_heads,
        rotary_embedding_dim: dim,
    }
}

#[test]
fn attention_with_equal_scores_averages_the_values() {
    // K rows all zero: every score is 0, so Y is the mean of V's rows.
    let q = f32s(&[1, 1, 2, 2], &[1.0, 2.0, -3.0, 0.5]);
    let k = f32s(&[1, 1, 3, 2], &[0.0; 6]);
    let v = f32s(&[1, 1, 3, 1], &[1.0, 2.0, 6.0]);
    let y = ok(&attention(), &[&q, &k, &v]);
    check_float(&y, DType::F32, &[1, 1, 2, 1], &[3.0, 3.0], RoundedOnce);
}

#[test]
fn attention_scores_are_scaled_by_one_over_root_head_size() {
    // Head size 4, q·k = 4 for key 0 and 0 for key 1: weights σ(4/2) and σ(-2).
    let q = f32s(&[1, 1, 1, 4], &[1.0; 4]);
    let k = f32s(&[1, 1, 2, 4], &[1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    let v = f32s(&[1, 1, 2, 1], &[1.0, 0.0]);
    let y = ok(&attention(), &[&q, &k, &v]);
    let w = 1.0 / (1.0 + (-2.0f64).exp());
    check_float(&y, DType::F32, &[1, 1, 1, 1], &[w], RoundedOnce);
}

#[test]
fn large_scores_do_not_overflow_the_softmax() {
    // Head size 1, scale 1: q·k = 1600 and 1560. exp(1600) overflows f64, so the softmax
    // must subtract the row's maximum: the weights are 1 / (1 + e^−40) and e^−40 / (1 +
    // e^−40), and Y = that first weight (V = 1, 0), which is 1 in f32.
    let q = f32s(&[1, 1, 1, 1], &[40.0]);
    let k = f32s(&[1, 1, 2, 1], &[40.0, 39.0]);
    let v = f32s(&[1, 1, 2, 1], &[1.0, 0.0]);
    let mut op = attention();
    if let Op::Attention { scale, .. } = &mut op {
        *scale = Some(1.0);
    }
    let y = ok(&op, &[&q, &k, &v]);
    let w = 1.0 / (1.0 + (-40.0f64).exp());
    check_float(&y, DType::F32, &[1, 1, 1, 1], &[w], RoundedOnce);
}

#[test]
fn causal_bool_and_short_masks_exclude_keys() {
    let q = f32s(&[1, 1, 2, 1], &[0.0, 0.0]);
    let k = f32s(&[1, 1, 2, 1], &[0.0, 0.0]);
    let v = f32s(&[1, 1, 2, 1], &[1.0, 3.0]);
    // Causal: query 0 sees key 0 only, query 1 both.
    let causal = attention_with(true, None, None, 0);
    let y = ok(&causal, &[&q, &k, &v]);
    check_float(&y, DType::F32, &[1, 1, 2, 1], &[1.0, 2.0], RoundedOnce);
    // A bool mask keeps the true keys.
    let mask = bools(&[2, 2], &[false, true, true, true]);
    let y = ok(&attention(), &[&q, &k, &v, &mask]);
    check_float(&y, DType::F32, &[1, 1, 2, 1], &[3.0, 2.0], RoundedOnce);
    // A mask shorter than the keys masks out the keys past its end.
    let short = f32s(&[1], &[0.0]);
    let y = ok(&attention(), &[&q, &k, &v, &short]);
    check_float(&y, DType::F32, &[1, 1, 2, 1], &[1.0, 1.0], Exact);
}

#[test]
fn sliding_windows_and_offsets_follow_onnx_1_23() -> Result<(), OpError> {
    // Zero scores: each query averages the V rows it may attend. Three keys (V 1, 2, 6).
    let q = f32s(&[1, 1, 3, 1], &[0.0; 3]);
    let k = f32s(&[1, 1, 3, 1], &[0.0; 3]);
    let v = f32s(&[1, 1, 3, 1], &[1.0, 2.0, 6.0]);
    let window = |left, right, is_causal| Op::Attention {
        is_causal,
        kv_num_heads: None,
        q_num_heads: None,
        qk_matmul_output_mode: 0,
        scale: None,
        softcap: 0.0,
        softmax_precision: None,
        left_window_size: left,
        right_window_size: right,
    };
    // left 1, right 0: query i sees keys i - 1 and i: 1, (1 + 2)/2, (2 + 6)/2.
    let y = ok(&window(1, 0, false), &[&q, &k, &v]);
    check_float(&y, DType::F32, &[1, 1, 3, 1], &[1.0, 1.5, 4.0], RoundedOnce);
    // left 0, right 1: keys i and i + 1: (1 + 2)/2, (2 + 6)/2, 6.
    let y = ok(&window(0, 1, false), &[&q, &k, &v]);
    check_float(&y, DType::F32, &[1, 1, 3, 1], &[1.5, 4.0, 6.0], RoundedOnce);
    // An external cache: nonpad_kv_seqlen 3 with one query puts it at position 2 (offset
    // 3 - 1), so causal attention sees all three keys, and a left window of 1 keys 1 and 2.
    let q1 = f32s(&[1, 1, 1, 1], &[0.0]);
    let nonpad = i64s(&[1], &[3]);
    let with_nonpad = |op: &Op| {
        run_opt(
            op,
            &[
                Some(&q1),
                Some(&k),
                Some(&v),
                None,
                None,
                None,
                Some(&nonpad),
            ],
        )
    };
    let y = with_nonpad(&attention_with(true, None, None, 0))?;
    check_float(&y, DType::F32, &[1, 1, 1, 1], &[3.0], RoundedOnce);
    let y = with_nonpad(&window(1, -1, true))?;
    check_float(&y, DType::F32, &[1, 1, 1, 1], &[4.0], RoundedOnce);
    Ok(())
}

#[test]
fn a_fully_masked_row_is_zeros_and_softcap_comes_before_the_mask() {
    let q = f32s(&[1, 1, 2, 1], &[0.0, 0.0]);
    let k = f32s(&[1, 1, 2, 1], &[0.0, 0.0]);
    let v = f32s(&[1, 1, 2, 1], &[1.0, 3.0]);
    // Query 0 may attend no key: its row is zeros, not NaN; query 1 averages both.
    let mask = bools(&[2, 2], &[false, false, true, true]);
    let y = ok(&attention(), &[&q, &k, &v, &mask]);
    check_float(&y, DType::F32, &[1, 1, 2, 1], &[0.0, 2.0], Exact);
    // With a softcap, a -inf mask entry stays -inf (the cap applies to the scores first;
    // capping after the mask would turn it into -softcap and leak weight to the key).
    let capped = Op::Attention {
        is_causal: false,
        kv_num_heads: None,
        q_num_heads: None,
        qk_matmul_output_mode: 0,
        scale: None,
        softcap: 2.0,
        softmax_precision: None,
        left_window_size: -1,
        right_window_size: -1,
    };
    let minus_inf = f32s(&[2, 2], &[0.0, f32::NEG_INFINITY, 0.0, 0.0]);
    let y = ok(&capped, &[&q, &k, &v, &minus_inf]);
    check_float(&y, DType::F32, &[1, 1, 2, 1], &[1.0, 2.0], RoundedOnce);
}

#[test]
fn grouped_query_heads_share_kv_heads_and_3d_round_trips() {
    // 3-D: 2 query heads (head size 1) over 1 kv head; zero scores average V.
    let op = attention_with(false, Some(2), Some(1), 0);
    let q = f32s(&[1, 1, 2], &[5.0, -5.0]);
    let k = f32s(&[1, 2, 1], &[0.0, 0.0]);
    let v = f32s(&[1, 2, 1], &[2.0, 4.0]);
    let y = ok(&op, &[&q, &k, &v]);
    check_float(&y, DType::F32, &[1, 1, 2], &[3.0, 3.0], RoundedOnce);
    check_inference_agrees(&op, &[Some(&q), Some(&k), Some(&v)], &[]);
}

#[test]
fn past_cache_is_concatenated_and_all_outputs_are_returned() -> Result<(), OpError> {
    let q = f32s(&[1, 1, 1, 1], &[0.0]);
    let k = f32s(&[1, 1, 1, 1], &[7.0]);
    let v = f32s(&[1, 1, 1, 1], &[4.0]);
    let pk = f32s(&[1, 1, 1, 1], &[-7.0]);
    let pv = f32s(&[1, 1, 1, 1], &[2.0]);
    let op = attention_with(false, None, None, 3);
    let inputs = [Some(&q), Some(&k), Some(&v), None, Some(&pk), Some(&pv)];
    let out = run_op(&op, &inputs, 4)?;
    assert_eq!(out.len(), 4);
    check_float(&out[0], DType::F32, &[1, 1, 1, 1], &[3.0], RoundedOnce);
    check_float(&out[1], DType::F32, &[1, 1, 2, 1], &[-7.0, 7.0], Exact);
    check_float(&out[2], DType::F32, &[1, 1, 2, 1], &[2.0, 4.0], Exact);
    check_float(&out[3], DType::F32, &[1, 1, 1, 2], &[0.5, 0.5], RoundedOnce);
    // Inference predicts all four outputs' shapes.
    let inferred = infer_on_tensors(&op, &inputs, 4)?;
    assert_eq!(inferred.len(), 4);
    for (fact, t) in inferred.iter().zip(&out) {
        assert_eq!(fact.shape, t.shape().to_sym());
        assert_eq!(fact.dtype, t.dtype());
    }
    Ok(())
}

#[test]
fn attention_rejects_bad_operands_with_typed_errors() {
    let q = f32s(&[1, 2, 1, 2], &[0.0; 4]);
    let k3 = f32s(&[1, 1, 2], &[0.0; 2]);
    check_err(run(&attention(), &[&q, &k3, &k3]), Failure::Shape, "rank");
    // 3 query heads cannot share 2 kv heads.
    let q3 = f32s(&[1, 3, 1, 2], &[0.0; 6]);
    let k2 = f32s(&[1, 2, 1, 2], &[0.0; 4]);
    check_err(
        run(&attention(), &[&q3, &k2, &k2]),
        Failure::Shape,
        "Attention",
    );
    // 3-D without head counts, and with 0 of them (the loader refuses 0; an Op built by
    // hand must too, without dividing by zero).
    check_err(
        run(&attention(), &[&k3, &k3, &k3]),
        Failure::Attribute,
        "q_num_heads",
    );
    check_err(
        run(
            &attention_with(false, Some(0), Some(1), 0),
            &[&k3, &k3, &k3],
        ),
        Failure::Attribute,
        "q_num_heads",
    );
    // A mask that does not broadcast, and an i64 one.
    let k = f32s(&[1, 2, 1, 2], &[0.0; 4]);
    let mask = f32s(&[3, 1], &[0.0; 3]);
    check_err(
        run(&attention(), &[&q, &k, &k, &mask]),
        Failure::Shape,
        "attn_mask",
    );
    let mask = i64s(&[1], &[0]);
    check_err(
        run(&attention(), &[&q, &k, &k, &mask]),
        Failure::DType { index: 3 },
        "attn_mask",
    );
    // A mask of rank 0 or 5.
    for dims in [&[][..], &[1, 1, 1, 1, 1][..]] {
        let mask = f32s(dims, &[0.0]);
        check_err(
            run(&attention(), &[&q, &k, &k, &mask]),
            Failure::Shape,
            "rank 1 to 4",
        );
    }
    // A past cache of another batch, another number of kv heads or another head size than
    // the new keys (1, 2, _, 2), each alone.
    for dims in [[2, 2, 1, 2], [1, 1, 1, 2], [1, 2, 1, 3]] {
        let past = f32s(&dims, &vec![0.0; dims.iter().product()]);
        check_err(
            run_opt(
                &attention(),
                &[Some(&q), Some(&k), Some(&k), None, Some(&past), Some(&past)],
            ),
            Failure::Shape,
            "does not match",
        );
    }
    // Each condition of K and V fitting Q alone: V of another batch, head count or sequence
    // length; K of another head size (V's may differ); K and V with no heads.
    let cases: [([usize; 4], [usize; 4]); 5] = [
        ([1, 2, 1, 2], [2, 2, 1, 2]),
        ([1, 2, 1, 2], [1, 1, 1, 2]),
        ([1, 2, 1, 2], [1, 2, 2, 2]),
        ([1, 2, 1, 3], [1, 2, 1, 2]),
        ([1, 0, 1, 2], [1, 0, 1, 2]),
    ];
    for (kd, vd) in cases {
        let k = f32s(&kd, &vec![0.0; kd.iter().product()]);
        let v = f32s(&vd, &vec![0.0; vd.iter().product()]);
        check_err(
            run(&attention(), &[&q, &k, &v]),
            Failure::Shape,
            "do not fit",
        );
    }
    // V of another rank than Q and K.
    let v3 = f32s(&[1, 1, 2], &[0.0; 2]);
    check_err(
        run(&attention(), &[&q, &k, &v3]),
        Failure::Shape,
        "one rank",
    );
    // K, V and the caches must have Q's dtype.
    let k_i64 = i64s(&[1, 2, 1, 2], &[0; 4]);
    check_err(
        run(&attention(), &[&q, &k_i64, &k]),
        Failure::DType { index: 1 },
        "K",
    );
    check_err(
        run_opt(
            &attention(),
            &[Some(&q), Some(&k), Some(&k), None, Some(&k_i64), Some(&k)],
        ),
        Failure::DType { index: 4 },
        "past_key",
    );
    // past_key without past_value.
    check_err(
        run_opt(
            &attention(),
            &[Some(&q), Some(&k), Some(&k), None, Some(&k)],
        ),
        Failure::Shape,
        "past_value",
    );
}

#[test]
fn rotary_embedding_rotates_half_pairs_by_position() {
    // Position 0: cos 0, sin 1 (a quarter turn); position 1: the identity.
    let cos = f32s(&[2, 1], &[0.0, 1.0]);
    let sin = f32s(&[2, 1], &[1.0, 0.0]);
    let x = f32s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let pos = i64s(&[1, 2], &[0, 1]);
    let y = ok(&rotary(false, None, 0), &[&x, &cos, &sin, &pos]);
    // (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos).
    check_float(&y, DType::F32, &[1, 1, 2, 2], &[-2.0, 1.0, 3.0, 4.0], Exact);
}

#[test]
fn rotary_embedding_interleaved_partial_and_3d() {
    // 3-D, 1 head of size 4, rotating the first 2 values as an interleaved pair; the
    // caches per token (no position_ids).
    let x = f32s(&[1, 1, 4], &[1.0, 2.0, 3.0, 4.0]);
    let cos = f32s(&[1, 1, 1], &[0.0]);
    let sin = f32s(&[1, 1, 1], &[-1.0]);
    let op = rotary(true, Some(1), 2);
    let y = ok(&op, &[&x, &cos, &sin]);
    check_float(&y, DType::F32, &[1, 1, 4], &[2.0, -1.0, 3.0, 4.0], Exact);
    check_inference_agrees(&op, &[Some(&x), Some(&cos), Some(&sin)], &[]);
}

#[test]
fn rotary_embedding_rejects_bad_operands_with_typed_errors() {
    let x = f32s(&[1, 1, 1, 4], &[0.0; 4]);
    let cache = f32s(&[2, 2], &[0.0; 4]);
    let pos = i64s(&[1, 1], &[2]);
    check_err(
        run(&rotary(false, None, 0), &[&x, &cache, &cache, &pos]),
        Failure::Shape,
        "position id 2",
    );
    check_err(
        run(&rotary(false, None, 3), &[&x, &cache, &cache, &pos]),
        Failure::Shape,
        "even",
    );
    let x3 = f32s(&[1, 1, 4], &[0.0; 4]);
    check_err(
        run(&rotary(false, None, 0), &[&x3, &cache, &cache]),
        Failure::Attribute,
        "num_heads",
    );
    // With position_ids, caches of another width than half the rotary dimension (2).
    let wide = f32s(&[2, 3], &[0.0; 6]);
    let first = i64s(&[1, 1], &[0]);
    check_err(
        run(&rotary(false, None, 0), &[&x, &wide, &wide, &first]),
        Failure::Shape,
        "(max position + 1, 2)",
    );
    // 0 heads is refused as no heads is (an Op built by hand; the loader refuses it).
    check_err(
        run(&rotary(false, Some(0), 0), &[&x3, &cache, &cache]),
        Failure::Attribute,
        "num_heads",
    );
    let bad: Tensor = f32s(&[1, 1, 3], &[0.0; 3]);
    check_err(
        run(&rotary(false, None, 0), &[&x, &bad, &bad]),
        Failure::Shape,
        "(1, 1, 2)",
    );
}
