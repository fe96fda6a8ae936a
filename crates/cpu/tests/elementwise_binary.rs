//! Reference kernels for the broadcasting binary ops (Add, Sub, Mul, Div, Pow, Mod, Equal,
//! PRelu): hand-computed values, broadcasting in every direction, i64 exactness and typed
//! errors.

mod elementwise_support;

use concord_core::op::Binary;
use concord_core::{DType, Op};
use elementwise_support::{
    bools, check_bool, check_err, check_float, check_i64, f16s, f32s, i64s, ok, run, Failure,
    Tolerance::{Exact, RoundedOnce},
};

#[test]
fn add_broadcasts_column_against_row() {
    let a = f32s(&[2, 1], &[10.0, 20.0]);
    let b = f32s(&[1, 3], &[1.0, 2.0, 3.0]);
    let y = ok(&Op::Binary(Binary::Add), &[&a, &b]);
    check_float(
        &y,
        DType::F32,
        &[2, 3],
        &[11.0, 12.0, 13.0, 21.0, 22.0, 23.0],
        Exact,
    );
    // The same pair the other way round gives the same values.
    let y = ok(&Op::Binary(Binary::Add), &[&b, &a]);
    check_float(
        &y,
        DType::F32,
        &[2, 3],
        &[11.0, 12.0, 13.0, 21.0, 22.0, 23.0],
        Exact,
    );
}

#[test]
fn sub_broadcasts_lower_rank_operand_on_either_side() {
    let m = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let v = f32s(&[3], &[1.0, 1.0, 2.0]);
    let y = ok(&Op::Binary(Binary::Sub), &[&m, &v]);
    check_float(
        &y,
        DType::F32,
        &[2, 3],
        &[0.0, 1.0, 1.0, 3.0, 4.0, 4.0],
        Exact,
    );
    let y = ok(&Op::Binary(Binary::Sub), &[&v, &m]);
    check_float(
        &y,
        DType::F32,
        &[2, 3],
        &[0.0, -1.0, -1.0, -3.0, -4.0, -4.0],
        Exact,
    );
}

#[test]
fn rank0_scalars_broadcast_and_stay_rank0() {
    let s = f32s(&[], &[2.0]);
    let m = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    check_float(
        &ok(&Op::Binary(Binary::Mul), &[&s, &m]),
        DType::F32,
        &[2, 2],
        &[2.0, 4.0, 6.0, 8.0],
        Exact,
    );
    check_float(
        &ok(&Op::Binary(Binary::Div), &[&m, &s]),
        DType::F32,
        &[2, 2],
        &[0.5, 1.0, 1.5, 2.0],
        Exact,
    );
    let t = f32s(&[], &[3.0]);
    check_float(
        &ok(&Op::Binary(Binary::Mul), &[&s, &t]),
        DType::F32,
        &[],
        &[6.0],
        Exact,
    );
    // Rank 0 against a one-element rank-1 tensor gives rank 1.
    let one = f32s(&[1], &[5.0]);
    check_float(
        &ok(&Op::Binary(Binary::Add), &[&s, &one]),
        DType::F32,
        &[1],
        &[7.0],
        Exact,
    );
}

#[test]
fn broadcasting_middle_and_leading_axes() {
    // [2,1,2] against [3,1]: output [2,3,2]; a[i,0,k] + b[j,0].
    let a = f32s(&[2, 1, 2], &[0.0, 1.0, 10.0, 11.0]);
    let b = f32s(&[3, 1], &[100.0, 200.0, 300.0]);
    let want = [
        100.0, 101.0, 200.0, 201.0, 300.0, 301.0, 110.0, 111.0, 210.0, 211.0, 310.0, 311.0,
    ];
    check_float(
        &ok(&Op::Binary(Binary::Add), &[&a, &b]),
        DType::F32,
        &[2, 3, 2],
        &want,
        Exact,
    );
}

#[test]
fn incompatible_shapes_are_a_shape_error_naming_both() {
    let a = f32s(&[2, 3], &[0.0; 6]);
    let b = f32s(&[2], &[0.0; 2]);
    check_err(
        run(&Op::Binary(Binary::Add), &[&a, &b]),
        Failure::Shape,
        "[2, 3]",
    );
    check_err(
        run(&Op::Binary(Binary::Add), &[&a, &b]),
        Failure::Shape,
        "input 1 (B) [2]",
    );
    let empty = f32s(&[0], &[]);
    check_err(
        run(&Op::Binary(Binary::Mul), &[&empty, &b]),
        Failure::Shape,
        "[0]",
    );
}

#[test]
fn empty_tensors_broadcast_to_empty_outputs() {
    let e = f32s(&[0, 3], &[]);
    let row = f32s(&[1, 3], &[1.0, 2.0, 3.0]);
    check_float(
        &ok(&Op::Binary(Binary::Add), &[&e, &row]),
        DType::F32,
        &[0, 3],
        &[],
        Exact,
    );
    let s = f32s(&[], &[1.0]);
    check_float(
        &ok(&Op::Binary(Binary::Sub), &[&s, &f32s(&[0], &[])]),
        DType::F32,
        &[0],
        &[],
        Exact,
    );
    let ie = i64s(&[0], &[]);
    check_i64(
        &ok(&Op::Binary(Binary::Div), &[&ie, &i64s(&[1], &[0])]),
        &[0],
        &[],
    );
}

#[test]
fn float_specials_follow_ieee() {
    let inf = f64::INFINITY;
    let a = f32s(&[4], &[f32::INFINITY, f32::NAN, 1.0, -1.0]);
    let b = f32s(&[4], &[f32::INFINITY, 1.0, 0.0, 0.0]);
    check_float(
        &ok(&Op::Binary(Binary::Sub), &[&a, &b]),
        DType::F32,
        &[4],
        &[f64::NAN, f64::NAN, 1.0, -1.0],
        Exact,
    );
    check_float(
        &ok(&Op::Binary(Binary::Div), &[&a, &b]),
        DType::F32,
        &[4],
        &[f64::NAN, f64::NAN, inf, -inf],
        Exact,
    );
    // 3e38 · 10 overflows f32 even though it is finite in f64: rounding once gives inf.
    let big = f32s(&[1], &[3e38]);
    let ten = f32s(&[1], &[10.0]);
    check_float(
        &ok(&Op::Binary(Binary::Mul), &[&big, &ten]),
        DType::F32,
        &[1],
        &[inf],
        Exact,
    );
}

#[test]
fn f16_inputs_give_f16_rounded_once() {
    // 1 + f16(0.0005) = 1.00050020…; the f16 spacing at 1 is 2^-10, so it rounds up to
    // 1 + 2^-10 = 1.0009765625.
    let a = f16s(&[2], &[1.0, 60000.0]);
    let b = f16s(&[2], &[0.0005, 60000.0]);
    let y = ok(&Op::Binary(Binary::Add), &[&a, &b]);
    // 60000 + 60000 exceeds the largest f16 (65504) and becomes inf.
    check_float(&y, DType::F16, &[2], &[1.0009765625, f64::INFINITY], Exact);
    let y = ok(
        &Op::Binary(Binary::Div),
        &[&f16s(&[1], &[1.0]), &f16s(&[1], &[3.0])],
    );
    check_float(&y, DType::F16, &[1], &[1.0 / 3.0], RoundedOnce);
}

#[test]
fn i64_arithmetic_is_exact_beyond_f64_precision() {
    // 2^53 + 1 is not representable in f64; computing through f64 would lose the 1.
    let big = 9_007_199_254_740_993i64;
    let a = i64s(&[3], &[big, big, -7]);
    let b = i64s(&[3], &[1, -big, 2]);
    check_i64(
        &ok(&Op::Binary(Binary::Add), &[&a, &b]),
        &[3],
        &[big + 1, 0, -5],
    );
    check_i64(
        &ok(&Op::Binary(Binary::Sub), &[&a, &b]),
        &[3],
        &[big - 1, 2 * big, -9],
    );
    check_i64(
        &ok(
            &Op::Binary(Binary::Mul),
            &[&i64s(&[1], &[3_037_000_499]), &i64s(&[1], &[3_037_000_499])],
        ),
        &[1],
        &[9_223_372_030_926_249_001],
    );
    // Overflow wraps (two's complement), as numpy's int64 does.
    check_i64(
        &ok(
            &Op::Binary(Binary::Add),
            &[&i64s(&[1], &[i64::MAX]), &i64s(&[1], &[1])],
        ),
        &[1],
        &[i64::MIN],
    );
}

#[test]
fn i64_division_truncates_toward_zero() {
    let a = i64s(&[5], &[-7, 7, -7, 7, i64::MIN]);
    let b = i64s(&[5], &[2, -2, -2, 2, -1]);
    // i64::MIN / -1 overflows and wraps back to i64::MIN.
    check_i64(
        &ok(&Op::Binary(Binary::Div), &[&a, &b]),
        &[5],
        &[-3, -3, 3, 3, i64::MIN],
    );
}

#[test]
fn i64_division_by_zero_is_an_error_not_a_panic() {
    let a = i64s(&[2], &[1, 2]);
    let b = i64s(&[2], &[1, 0]);
    check_err(
        run(&Op::Binary(Binary::Div), &[&a, &b]),
        Failure::Arithmetic,
        "division by zero",
    );
    check_err(
        run(&Op::Binary(Binary::Mod { fmod: false }), &[&a, &b]),
        Failure::Arithmetic,
        "division by zero",
    );
    check_err(
        run(&Op::Binary(Binary::Mod { fmod: true }), &[&a, &b]),
        Failure::Arithmetic,
        "division by zero",
    );
}

#[test]
fn integer_mod_takes_the_divisors_sign() {
    let a = i64s(&[6], &[-7, 7, -7, 7, -6, 6]);
    let b = i64s(&[6], &[3, -3, -3, 3, 3, -3]);
    // Python: -7 % 3 == 2, 7 % -3 == -2, -7 % -3 == -1, 7 % 3 == 1, -6 % 3 == 0, 6 % -3 == 0.
    check_i64(
        &ok(&Op::Binary(Binary::Mod { fmod: false }), &[&a, &b]),
        &[6],
        &[2, -2, -1, 1, 0, 0],
    );
    // C fmod keeps the dividend's sign: fmod(-7, 3) == -1, fmod(7, -3) == 1.
    check_i64(
        &ok(&Op::Binary(Binary::Mod { fmod: true }), &[&a, &b]),
        &[6],
        &[-1, 1, -1, 1, 0, 0],
    );
    // i64::MIN % -1 would trap in hardware; the remainder is 0.
    let m = ok(
        &Op::Binary(Binary::Mod { fmod: false }),
        &[&i64s(&[1], &[i64::MIN]), &i64s(&[1], &[-1])],
    );
    check_i64(&m, &[1], &[0]);
}

#[test]
fn float_mod_is_c_fmod() {
    let a = f32s(&[6], &[-7.5, 5.5, 1.0, f32::INFINITY, 3.0, -0.0]);
    let b = f32s(&[6], &[2.0, -2.0, 0.0, 2.0, f32::INFINITY, 1.0]);
    let y = ok(&Op::Binary(Binary::Mod { fmod: true }), &[&a, &b]);
    check_float(
        &y,
        DType::F32,
        &[6],
        &[-1.5, 1.5, f64::NAN, f64::NAN, 3.0, -0.0],
        Exact,
    );
    assert!(
        y.as_f32().is_some_and(|v| v[5].is_sign_negative()),
        "fmod(-0, 1) keeps the sign"
    );
    let y = ok(
        &Op::Binary(Binary::Mod { fmod: true }),
        &[&f16s(&[1], &[-7.0]), &f16s(&[1], &[3.0])],
    );
    check_float(&y, DType::F16, &[1], &[-1.0], Exact);
}

#[test]
fn float_mod_without_fmod_is_the_floored_remainder() {
    // Opset 28's fmod=0 on floats: x - floor(x / y) * y, with the divisor's sign. Worked by
    // hand (and as Python's `%` gives): -7.5 % 2 == 0.5, 5.5 % -2 == -0.5, 4 % -2 == -0.0,
    // 3 % inf == 3, -3 % inf == inf (the divisor), 1 % 0 == nan, inf % 2 == nan,
    // -0.0 % 1 == +0.0 (a zero takes the divisor's sign).
    let a = f32s(&[8], &[-7.5, 5.5, 4.0, 3.0, -3.0, 1.0, f32::INFINITY, -0.0]);
    let b = f32s(
        &[8],
        &[2.0, -2.0, -2.0, f32::INFINITY, f32::INFINITY, 0.0, 2.0, 1.0],
    );
    let y = ok(&Op::Binary(Binary::Mod { fmod: false }), &[&a, &b]);
    check_float(
        &y,
        DType::F32,
        &[8],
        &[0.5, -0.5, -0.0, 3.0, f64::INFINITY, f64::NAN, f64::NAN, 0.0],
        Exact,
    );
    let v = y.as_f32().expect("an f32 result");
    assert!(
        v[2].is_sign_negative(),
        "4 mod -2 is -0, the divisor's sign"
    );
    assert!(
        v[7].is_sign_positive(),
        "-0 mod 1 is +0, the divisor's sign"
    );
}

#[test]
fn pow_mixes_base_and_exponent_dtypes_keeping_the_base() {
    let y = ok(
        &Op::Binary(Binary::Pow),
        &[&f32s(&[2], &[2.0, 3.0]), &i64s(&[], &[3])],
    );
    check_float(&y, DType::F32, &[2], &[8.0, 27.0], Exact);
    let y = ok(
        &Op::Binary(Binary::Pow),
        &[
            &f32s(&[3], &[2.0, -8.0, 0.0]),
            &f32s(&[3], &[0.5, 1.0 / 3.0, -1.0]),
        ],
    );
    check_float(
        &y,
        DType::F32,
        &[3],
        &[std::f64::consts::SQRT_2, f64::NAN, f64::INFINITY],
        RoundedOnce,
    );
    // An i64 base with a float exponent stays i64: 4^0.5 = 2, 10^-1 = 0.1 truncates to 0.
    let y = ok(
        &Op::Binary(Binary::Pow),
        &[&i64s(&[2], &[4, 10]), &f32s(&[2], &[0.5, -1.0])],
    );
    check_i64(&y, &[2], &[2, 0]);
    let y = ok(
        &Op::Binary(Binary::Pow),
        &[&f16s(&[1], &[3.0]), &f32s(&[1], &[2.0])],
    );
    check_float(&y, DType::F16, &[1], &[9.0], Exact);
}

#[test]
fn integer_pow_is_exact() {
    let base = i64s(&[6], &[2, 3, -2, 3, 1, -1]);
    let exp = i64s(&[6], &[62, 0, 3, -1, -5, -3]);
    // 2^62 = 4611686018427387904; a negative power truncates toward zero except for ±1.
    check_i64(
        &ok(&Op::Binary(Binary::Pow), &[&base, &exp]),
        &[6],
        &[4_611_686_018_427_387_904, 1, -8, 0, 1, -1],
    );
    // 3^39 = 4052555153018976267 is exact in i64 but not in f64.
    check_i64(
        &ok(
            &Op::Binary(Binary::Pow),
            &[&i64s(&[1], &[3]), &i64s(&[1], &[39])],
        ),
        &[1],
        &[4_052_555_153_018_976_267],
    );
    check_err(
        run(
            &Op::Binary(Binary::Pow),
            &[&i64s(&[1], &[0]), &i64s(&[1], &[-1])],
        ),
        Failure::Arithmetic,
        "negative power",
    );
}

#[test]
fn equal_compares_values_of_every_dtype() {
    let a = f32s(&[3], &[1.0, f32::NAN, 0.0]);
    let b = f32s(&[3], &[1.0, f32::NAN, -0.0]);
    check_bool(
        &ok(&Op::Binary(Binary::Equal), &[&a, &b]),
        &[3],
        &[true, false, true],
    );
    // 2^53 and 2^53 + 1 are equal as f64 but not as i64.
    let a = i64s(&[2], &[9_007_199_254_740_992, 5]);
    let b = i64s(&[2], &[9_007_199_254_740_993, 5]);
    check_bool(
        &ok(&Op::Binary(Binary::Equal), &[&a, &b]),
        &[2],
        &[false, true],
    );
    let a = bools(&[2, 1], &[true, false]);
    let b = bools(&[2], &[true, false]);
    check_bool(
        &ok(&Op::Binary(Binary::Equal), &[&a, &b]),
        &[2, 2],
        &[true, false, false, true],
    );
    let a = f16s(&[], &[0.5]);
    let b = f16s(&[2], &[0.5, 0.25]);
    check_bool(
        &ok(&Op::Binary(Binary::Equal), &[&a, &b]),
        &[2],
        &[true, false],
    );
}

#[test]
fn dtype_mismatches_are_typed_errors() {
    let f = f32s(&[1], &[1.0]);
    let h = f16s(&[1], &[1.0]);
    let i = i64s(&[1], &[1]);
    let b = bools(&[1], &[true]);
    check_err(
        run(&Op::Binary(Binary::Add), &[&f, &h]),
        Failure::DType { index: 1 },
        "f16",
    );
    check_err(
        run(&Op::Binary(Binary::Mul), &[&i, &f]),
        Failure::DType { index: 1 },
        "i64",
    );
    check_err(
        run(&Op::Binary(Binary::Equal), &[&f, &i]),
        Failure::DType { index: 1 },
        "B",
    );
    check_err(
        run(&Op::Binary(Binary::Add), &[&b, &b]),
        Failure::DType { index: 0 },
        "bool",
    );
    check_err(
        run(&Op::Binary(Binary::Pow), &[&f, &b]),
        Failure::DType { index: 1 },
        "bool",
    );
    check_err(
        run(&Op::Binary(Binary::Sub), &[&f]),
        Failure::Missing { index: 1 },
        "B",
    );
}

/// PRelu is slope·x for x < 0 and x for x ≥ 0 (the ONNX definition), the slope
/// broadcasting to X: [-2, -0.5, 0, 3] under slope 0.25 gives [-0.5, -0.125, 0, 3]. At
/// x = 0 the slope is not used, so an infinite or NaN slope still gives 0. onnxruntime 1.23
/// and the ONNX reference implementation compute `x > 0 ? x : x·slope` and give NaN there
/// (0·inf, 0·NaN); the kernel follows the definition.
#[test]
fn prelu_scales_negative_inputs_only() {
    let x = f32s(&[4], &[-2.0, -0.5, 0.0, 3.0]);
    let slope = f32s(&[1], &[0.25]);
    check_float(
        &ok(&Op::Binary(Binary::PRelu), &[&x, &slope]),
        DType::F32,
        &[4],
        &[-0.5, -0.125, 0.0, 3.0],
        Exact,
    );
    let zeros = f32s(&[2], &[0.0, 0.0]);
    let slopes = f32s(&[2], &[f32::INFINITY, f32::NAN]);
    check_float(
        &ok(&Op::Binary(Binary::PRelu), &[&zeros, &slopes]),
        DType::F32,
        &[2],
        &[0.0, 0.0],
        Exact,
    );
}

/// Integer PRelu: slope·x for x < 0, x otherwise (the ONNX definition), exactly in i64:
/// [-3, 0, 4, -2^40] under slope 3 gives [-9, 0, 4, -3·2^40].
#[test]
fn integer_prelu_scales_negative_inputs_only() {
    let x = i64s(&[4], &[-3, 0, 4, -(1 << 40)]);
    let slope = i64s(&[1], &[3]);
    check_i64(
        &ok(&Op::Binary(Binary::PRelu), &[&x, &slope]),
        &[4],
        &[-9, 0, 4, -3 * (1 << 40)],
    );
}

/// -1 to a negative power is 1 / (-1)^|n|: 1 for an even n, -1 for an odd one, exactly
/// in integers: exponents -1, -2, -3, -4 give -1, 1, -1, 1.
#[test]
fn integer_minus_one_to_negative_powers_alternates() {
    let base = i64s(&[1], &[-1]);
    let exp = i64s(&[4], &[-1, -2, -3, -4]);
    check_i64(
        &ok(&Op::Binary(Binary::Pow), &[&base, &exp]),
        &[4],
        &[-1, 1, -1, 1],
    );
}

/// Outputs over the memory budget are refused before the kernel runs, naming them: one
/// output as "an output of …", several as "outputs …", and for a computing kernel the f64
/// working copy it holds beside them (4 + 8 bytes an element of an f32 Add; a Split only
/// moves elements, so 4).
#[test]
fn outputs_over_the_budget_are_named() {
    use concord_core::{MemoryBudget, OpError};
    let a = f32s(&[10], &[1.0; 10]);
    let got = concord_cpu::run_op_within(
        &Op::Binary(Binary::Add),
        &[Some(&a), Some(&a)],
        1,
        MemoryBudget::new(100),
    );
    assert!(
        matches!(&got, Err(OpError::MemoryBudget { what, bytes: Some(120), limit: 100 })
            if what == "an output of f32 [10] with the f64 working copy the reference computes it in"),
        "{got:?}"
    );
    let split = Op::Split {
        axis: 0,
        num_outputs: 2,
    };
    let got = concord_cpu::run_op_within(&split, &[Some(&a)], 2, MemoryBudget::new(30));
    assert!(
        matches!(&got, Err(OpError::MemoryBudget { what, bytes: Some(40), limit: 30 })
            if what == "outputs f32 [5], f32 [5]"),
        "{got:?}"
    );
}
