//! Reference kernels for the unary ops and activations, Clip and Where: hand-computed
//! values, NaN/Inf propagation, i64 forms, f16 round trips and typed errors.

mod elementwise_support;

use concord_core::op::Unary;
use concord_core::{DType, Op, Tensor};
use elementwise_support::{
    bools, check_bool, check_err, check_float, check_i64, f16s, f32s, i64s, ok, run, run_opt,
    Failure,
    Tolerance::{Exact, RoundedOnce},
};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

fn unary_f32(op: &Op, values: &[f32]) -> Tensor {
    ok(op, &[&f32s(&[values.len()], values)])
}

#[test]
fn sqrt_and_exp() {
    let y = unary_f32(
        &Op::Unary(Unary::Sqrt),
        &[4.0, 2.0, -1.0, f32::INFINITY, f32::NAN, -0.0],
    );
    check_float(
        &y,
        DType::F32,
        &[6],
        &[2.0, std::f64::consts::SQRT_2, NAN, INF, NAN, -0.0],
        RoundedOnce,
    );
    // exp(100) ≈ 2.7e43 overflows f32 (max ≈ 3.4e38).
    let y = unary_f32(
        &Op::Unary(Unary::Exp),
        &[0.0, 1.0, f32::NEG_INFINITY, 100.0, f32::NAN],
    );
    check_float(
        &y,
        DType::F32,
        &[5],
        &[1.0, std::f64::consts::E, 0.0, INF, NAN],
        RoundedOnce,
    );
}

#[test]
fn neg_and_abs_on_floats_and_i64() {
    let y = unary_f32(
        &Op::Unary(Unary::Neg),
        &[1.5, -2.0, f32::INFINITY, f32::NAN],
    );
    check_float(&y, DType::F32, &[4], &[-1.5, 2.0, -INF, NAN], Exact);
    let y = unary_f32(
        &Op::Unary(Unary::Abs),
        &[-2.0, 3.0, f32::NEG_INFINITY, f32::NAN],
    );
    check_float(&y, DType::F32, &[4], &[2.0, 3.0, INF, NAN], Exact);
    // i64::MIN has no negation in i64 and wraps to itself, as numpy's does.
    let x = i64s(&[3], &[i64::MIN, 5, -i64::MAX]);
    check_i64(
        &ok(&Op::Unary(Unary::Neg), &[&x]),
        &[3],
        &[i64::MIN, -5, i64::MAX],
    );
    check_i64(
        &ok(&Op::Unary(Unary::Abs), &[&x]),
        &[3],
        &[i64::MIN, 5, i64::MAX],
    );
}

#[test]
fn erf_matches_table_values() {
    // erf(0.5), erf(1), erf(3) from Abramowitz & Stegun table 7.1.
    let y = unary_f32(
        &Op::Unary(Unary::Erf),
        &[0.0, 0.5, -1.0, 3.0, f32::INFINITY, f32::NAN],
    );
    let want = [
        0.0,
        0.5204998778130465,
        -0.8427007929497149,
        0.9999779095030014,
        1.0,
        NAN,
    ];
    check_float(&y, DType::F32, &[6], &want, RoundedOnce);
    let y = ok(&Op::Unary(Unary::Erf), &[&f16s(&[2], &[1.0, -2.0])]);
    check_float(
        &y,
        DType::F16,
        &[2],
        &[0.8427007929497149, -0.9953222650189527],
        RoundedOnce,
    );
}

#[test]
fn relu_keeps_nan_and_zeroes_negatives() {
    let y = unary_f32(
        &Op::Unary(Unary::Relu),
        &[-1.0, 0.0, 2.0, f32::NAN, f32::NEG_INFINITY, f32::INFINITY],
    );
    check_float(&y, DType::F32, &[6], &[0.0, 0.0, 2.0, NAN, 0.0, INF], Exact);
    check_i64(
        &ok(&Op::Unary(Unary::Relu), &[&i64s(&[3], &[-3, 0, 7])]),
        &[3],
        &[0, 0, 7],
    );
}

#[test]
fn sigmoid_and_tanh_saturate_without_overflow() {
    // σ(1) = 1 / (1 + e^-1) = 0.7310585786300049.
    let y = unary_f32(
        &Op::Unary(Unary::Sigmoid),
        &[0.0, 1.0, -1000.0, 1000.0, f32::NAN],
    );
    check_float(
        &y,
        DType::F32,
        &[5],
        &[0.5, 0.7310585786300049, 0.0, 1.0, NAN],
        RoundedOnce,
    );
    let y = unary_f32(
        &Op::Unary(Unary::Tanh),
        &[0.0, 0.5, -20.0, f32::INFINITY, f32::NAN],
    );
    check_float(
        &y,
        DType::F32,
        &[5],
        &[0.0, 0.46211715726000974, -1.0, 1.0, NAN],
        RoundedOnce,
    );
}

#[test]
fn hard_swish_follows_its_formula() {
    // x · max(0, min(1, x/6 + 1/2)): zero below -3, identity above 3.
    let y = unary_f32(
        &Op::Unary(Unary::HardSwish),
        &[-4.0, -3.0, -1.0, 0.0, 1.0, 3.0, 4.0, f32::NAN],
    );
    let want = [0.0, 0.0, -1.0 / 3.0, 0.0, 2.0 / 3.0, 3.0, 4.0, NAN];
    check_float(&y, DType::F32, &[8], &want, RoundedOnce);
}

#[test]
fn leaky_relu_and_hard_sigmoid_use_their_attributes() {
    let y = ok(
        &Op::Unary(Unary::LeakyRelu { alpha: 0.5 }),
        &[&f32s(&[4], &[-2.0, 0.0, 3.0, f32::NAN])],
    );
    check_float(&y, DType::F32, &[4], &[-1.0, 0.0, 3.0, NAN], Exact);
    // max(0, min(1, 0.25·x + 0.5)).
    let op = Op::Unary(Unary::HardSigmoid {
        alpha: 0.25,
        beta: 0.5,
    });
    let y = ok(&op, &[&f32s(&[5], &[-3.0, 0.0, 1.0, 3.0, f32::NAN])]);
    check_float(&y, DType::F32, &[5], &[0.0, 0.5, 0.75, 1.0, NAN], Exact);
}

#[test]
fn unary_ops_keep_shape_for_rank0_and_empty_inputs() {
    let y = ok(&Op::Unary(Unary::Exp), &[&f32s(&[], &[0.0])]);
    check_float(&y, DType::F32, &[], &[1.0], Exact);
    let y = ok(&Op::Unary(Unary::Relu), &[&f32s(&[0, 3], &[])]);
    check_float(&y, DType::F32, &[0, 3], &[], Exact);
}

#[test]
fn f16_activations_round_trip() {
    let y = ok(&Op::Unary(Unary::Sigmoid), &[&f16s(&[2], &[0.0, 2.0])]);
    // σ(2) = 0.8807970779778823.
    check_float(
        &y,
        DType::F16,
        &[2],
        &[0.5, 0.8807970779778823],
        RoundedOnce,
    );
    let y = ok(&Op::Unary(Unary::Neg), &[&f16s(&[1], &[65504.0])]);
    check_float(&y, DType::F16, &[1], &[-65504.0], Exact);
}

#[test]
fn unary_dtype_errors_name_the_input() {
    check_err(
        run(&Op::Unary(Unary::Sqrt), &[&i64s(&[1], &[4])]),
        Failure::DType { index: 0 },
        "i64",
    );
    check_err(
        run(&Op::Unary(Unary::Sigmoid), &[&bools(&[1], &[true])]),
        Failure::DType { index: 0 },
        "X",
    );
    check_err(
        run(&Op::Unary(Unary::Abs), &[&bools(&[1], &[true])]),
        Failure::DType { index: 0 },
        "bool",
    );
    check_err(
        run_opt(&Op::Unary(Unary::Tanh), &[None]),
        Failure::Missing { index: 0 },
        "X",
    );
}

#[test]
fn clip_with_both_bounds() {
    let x = f32s(&[4], &[-2.0, 0.5, 3.0, f32::NAN]);
    let lo = f32s(&[], &[0.0]);
    let hi = f32s(&[], &[1.0]);
    let y = ok(&Op::Clip, &[&x, &lo, &hi]);
    check_float(&y, DType::F32, &[4], &[0.0, 0.5, 1.0, NAN], Exact);
}

#[test]
fn clip_with_only_max_or_no_bounds() {
    let x = f32s(&[4], &[-2.0, 0.5, 3.0, f32::NAN]);
    let hi = f32s(&[1], &[1.0]);
    let y = run_opt(&Op::Clip, &[Some(&x), None, Some(&hi)]).expect("Clip with only max");
    check_float(&y, DType::F32, &[4], &[-2.0, 0.5, 1.0, NAN], Exact);
    let y = run_opt(&Op::Clip, &[Some(&x)]).expect("Clip without bounds");
    check_float(&y, DType::F32, &[4], &[-2.0, 0.5, 3.0, NAN], Exact);
}

#[test]
fn clip_with_min_above_max_gives_max() {
    let x = f32s(&[3], &[-5.0, 1.5, 5.0]);
    let y = ok(&Op::Clip, &[&x, &f32s(&[], &[2.0]), &f32s(&[], &[1.0])]);
    check_float(&y, DType::F32, &[3], &[1.0, 1.0, 1.0], Exact);
}

#[test]
fn clip_on_i64_and_f16() {
    let x = i64s(&[3], &[-5, 5, 10]);
    let y = ok(&Op::Clip, &[&x, &i64s(&[], &[-1]), &i64s(&[1], &[7])]);
    check_i64(&y, &[3], &[-1, 5, 7]);
    let y = ok(&Op::Clip, &[&f16s(&[2], &[-1.0, 0.3]), &f16s(&[], &[0.0])]);
    check_float(&y, DType::F16, &[2], &[0.0, 0.3], Exact);
}

#[test]
fn clip_rejects_non_scalar_or_mistyped_bounds() {
    let x = f32s(&[2], &[0.0, 1.0]);
    check_err(
        run(&Op::Clip, &[&x, &f32s(&[2], &[0.0, 1.0])]),
        Failure::Shape,
        "input 1 (min)",
    );
    check_err(
        run(&Op::Clip, &[&x, &i64s(&[], &[0])]),
        Failure::DType { index: 1 },
        "f32",
    );
    let y = run_opt(&Op::Clip, &[Some(&x), None, Some(&f32s(&[0], &[]))]);
    check_err(y, Failure::Shape, "input 2 (max)");
    check_err(
        run(&Op::Clip, &[&bools(&[1], &[true])]),
        Failure::DType { index: 0 },
        "bool",
    );
}

#[test]
fn where_broadcasts_three_ways() {
    let cond = bools(&[2], &[true, false]);
    let x = f32s(&[2, 1], &[1.0, 2.0]);
    let y = f32s(&[], &[9.0]);
    let out = ok(&Op::Where, &[&cond, &x, &y]);
    check_float(&out, DType::F32, &[2, 2], &[1.0, 9.0, 2.0, 9.0], Exact);
    let out = ok(
        &Op::Where,
        &[
            &bools(&[2, 1], &[false, true]),
            &i64s(&[3], &[1, 2, 3]),
            &i64s(&[], &[0]),
        ],
    );
    check_i64(&out, &[2, 3], &[0, 0, 0, 1, 2, 3]);
    let out = ok(
        &Op::Where,
        &[
            &bools(&[], &[true]),
            &bools(&[1], &[false]),
            &bools(&[2], &[true, true]),
        ],
    );
    check_bool(&out, &[2], &[false, false]);
    let out = ok(
        &Op::Where,
        &[&bools(&[0], &[]), &f16s(&[1], &[1.0]), &f16s(&[], &[2.0])],
    );
    check_float(&out, DType::F16, &[0], &[], Exact);
}

#[test]
fn where_errors_are_typed() {
    let x = f32s(&[2], &[1.0, 2.0]);
    check_err(
        run(&Op::Where, &[&x, &x, &x]),
        Failure::DType { index: 0 },
        "condition",
    );
    let c = bools(&[2], &[true, false]);
    check_err(
        run(&Op::Where, &[&c, &x, &i64s(&[2], &[1, 2])]),
        Failure::DType { index: 2 },
        "Y",
    );
    check_err(
        run(&Op::Where, &[&bools(&[3], &[true; 3]), &x, &x]),
        Failure::Shape,
        "input 0 (condition) [3]",
    );
}

fn f64s(dims: &[usize], values: &[f64]) -> Tensor {
    Tensor::from_vec(dims, values.to_vec()).expect("test tensor shape matches its data")
}

#[test]
fn relu_of_minus_zero_is_plus_zero_and_of_large_integers_exact() {
    // y = max(0, x); IEEE 754-2019's maximum orders -0 below +0, so max(+0, -0) is +0.
    let y = unary_f32(&Op::Unary(Unary::Relu), &[-0.0, 0.0]);
    let bits: Vec<u64> = y.to_f64_vec().iter().map(|v| v.to_bits()).collect();
    assert_eq!(bits, [0.0f64.to_bits(); 2], "Relu(-0), Relu(+0): {y:?}");
    // Integers stay exact past f64's 2^53: max(0, 2^53 + 1) = 2^53 + 1.
    let big = (1i64 << 53) + 1;
    check_i64(
        &ok(
            &Op::Unary(Unary::Relu),
            &[&i64s(&[3], &[big, -big, i64::MAX])],
        ),
        &[3],
        &[big, 0, i64::MAX],
    );
}

#[test]
fn activations_at_their_thresholds_take_the_branch_the_definition_gives() {
    // Each ONNX definition splits at a threshold; a NaN attribute shows which branch a
    // value at it takes, since only the branch that uses the attribute gives NaN.
    // LeakyRelu: alpha·x for x < 0, x for x >= 0, so x = 0 gives 0.
    let y = unary_f32(
        &Op::Unary(Unary::LeakyRelu { alpha: f32::NAN }),
        &[0.0, -1.0],
    );
    check_float(&y, DType::F32, &[2], &[0.0, NAN], Exact);
    // Elu: alpha·(e^x - 1) for x < 0, x for x >= 0.
    let y = unary_f32(
        &Op::Unary(Unary::Elu { alpha: f32::NAN }),
        &[0.0, -1.0, 2.0],
    );
    check_float(&y, DType::F32, &[3], &[0.0, NAN, 2.0], Exact);
    // Selu: gamma·(alpha·e^x - alpha) for x <= 0, gamma·x for x > 0, so x = 0 gives NaN.
    let op = Op::Unary(Unary::Selu {
        alpha: f32::NAN,
        gamma: 2.0,
    });
    let y = unary_f32(&op, &[0.0, 1.5]);
    check_float(&y, DType::F32, &[2], &[NAN, 3.0], Exact);
    // ThresholdedRelu: x for x > alpha, 0 otherwise; x = alpha gives 0.
    let y = unary_f32(
        &Op::Unary(Unary::ThresholdedRelu { alpha: 1.5 }),
        &[1.5, 1.75, -2.0],
    );
    check_float(&y, DType::F32, &[3], &[0.0, 1.75, 0.0], Exact);
    // Shrink: x + bias for x < -lambd, x - bias for x > lambd, 0 otherwise; ±lambd give 0.
    let op = Op::Unary(Unary::Shrink {
        bias: 0.25,
        lambd: 1.5,
    });
    let y = unary_f32(&op, &[-1.5, 1.5, -2.0, 2.0, 0.5]);
    check_float(&y, DType::F32, &[5], &[0.0, 0.0, -1.75, 1.75, 0.0], Exact);
}

#[test]
fn softplus_of_large_inputs_neither_overflows_nor_loses_its_tail() {
    // ln(1 + e^x) = x + ln(1 + e^-x), and ln(1 + t) = t - t²/2 + … with t = e^-x: for
    // x = 1000, e^1000 overflows f64 but the value is 1000 (t = e^-1000 is below f64's
    // least subnormal); for x = 31, t = e^-31 ≈ 3.4e-14 is about ten f64 ulps of 31, and
    // t²/2 ≈ 6e-28 is far below one.
    let y = ok(
        &Op::Unary(Unary::Softplus),
        &[&f64s(&[3], &[1000.0, 31.0, -1000.0])],
    );
    let want = [1000.0, 31.0 + (-31.0f64).exp(), 0.0];
    check_float(&y, DType::F64, &[3], &want, RoundedOnce);
}
