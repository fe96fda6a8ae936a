//! Cast, Identity, Dropout and Constant kernels: rounding of f32 → f16 (ties to even,
//! overflow, subnormals), truncation to i64, i8 and u8 and its refusals at both ends of each
//! range, integer-to-integer wrapping, bool conversions, and the inference-only behaviour of
//! Dropout.

mod movement_support;

use concord_core::{DType, Op, OpError, Tensor};
use half::f16;
use movement_support::*;

fn cast(to: DType, x: &Tensor) -> Result<Tensor, OpError> {
    run(&Op::Cast { to }, &[Some(x)])
}

fn f16_bits(t: &Tensor) -> Vec<u16> {
    t.as_f16()
        .expect("an f16 tensor")
        .iter()
        .map(|h| h.to_bits())
        .collect()
}

#[test]
fn f32_to_f16_rounds_to_nearest_even() {
    let ulp = f32::powi(2.0, -10); // f16 spacing in [1, 2)
    let x = f32s(
        &[8],
        &[
            1.0 + ulp / 2.0,             // tie between 1 (even) and 1 + ulp: 1
            1.0 + 3.0 * ulp / 2.0,       // tie between 1 + ulp and 1 + 2ulp (even): 1 + 2ulp
            1.0 + ulp / 2.0 + ulp / 8.0, // above the tie: 1 + ulp
            65519.0,                     // below the 65504 / 65536 midpoint: 65504
            65520.0,                     // the midpoint rounds to the even "65536": +inf
            f32::powi(2.0, -25),         // half the smallest subnormal, tie to even: 0
            3.0 * f32::powi(2.0, -25),   // 1.5 subnormal units, tie to even: 2 units
            -0.0,
        ],
    );
    let got = cast(DType::F16, &x).expect("cast");
    assert_eq!(
        f16_bits(&got),
        vec![0x3C00, 0x3C02, 0x3C01, 0x7BFF, 0x7C00, 0x0000, 0x0002, 0x8000]
    );
}

#[test]
fn f16_to_f32_is_exact() {
    let h = Tensor::from_f16([2], vec![f16::from_bits(0x3555), f16::from_bits(0x0001)])
        .expect("tensor");
    let got = cast(DType::F32, &h).expect("cast");
    // 0x3555 = 1.0101010101b × 2^-2 = 1365 / 4096; 0x0001 = 2^-24.
    assert_same(&got, &f32s(&[2], &[1365.0 / 4096.0, f32::powi(2.0, -24)]));
}

#[test]
fn float_to_i64_truncates_toward_zero() {
    let x = f32s(&[6], &[1.9, -1.9, -0.5, 3.0, -0.0, f32::powi(2.0, 50)]);
    let got = cast(DType::I64, &x).expect("cast");
    assert_same(&got, &i64s(&[6], &[1, -1, 0, 3, 0, 1 << 50]));
    let h = f16s(&[2], &[-2.75, 65504.0]);
    assert_same(
        &cast(DType::I64, &h).expect("cast"),
        &i64s(&[2], &[-2, 65504]),
    );
    // -2^63 is the smallest i64 and exactly representable in f32.
    let low = f32s(&[1], &[-9_223_372_036_854_775_808.0]);
    assert_same(
        &cast(DType::I64, &low).expect("cast"),
        &i64s(&[1], &[i64::MIN]),
    );
}

#[test]
fn float_to_i64_refuses_values_without_an_i64() {
    for bad in [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e19,
        9_223_372_036_854_775_808.0,
    ] {
        let x = f32s(&[2], &[0.0, bad]);
        let e = cast(DType::I64, &x).expect_err("no i64 value");
        assert!(matches!(e, OpError::Unsupported(_)), "{bad}: {e:?}");
        assert_mentions(&e, &["element 1"]);
    }
}

#[test]
fn casts_to_bool_test_for_nonzero() {
    let x = f32s(&[4], &[0.0, -0.0, 0.5, f32::NAN]);
    assert_same(
        &cast(DType::Bool, &x).expect("cast"),
        &bools(&[4], &[false, false, true, true]),
    );
    let h = f16s(&[2], &[0.0, -3.0]);
    assert_same(
        &cast(DType::Bool, &h).expect("cast"),
        &bools(&[2], &[false, true]),
    );
    let i = i64s(&[3], &[0, -7, 1]);
    assert_same(
        &cast(DType::Bool, &i).expect("cast"),
        &bools(&[3], &[false, true, true]),
    );
}

#[test]
fn casts_from_bool_and_i64() {
    let b = bools(&[2], &[true, false]);
    assert_same(&cast(DType::I64, &b).expect("cast"), &i64s(&[2], &[1, 0]));
    assert_same(
        &cast(DType::F32, &b).expect("cast"),
        &f32s(&[2], &[1.0, 0.0]),
    );
    assert_same(
        &cast(DType::F16, &b).expect("cast"),
        &f16s(&[2], &[1.0, 0.0]),
    );
    // 2^24 + 1 is a tie between 2^24 (even) and 2^24 + 2 in f32.
    let i = i64s(&[3], &[16_777_217, -3, 70_000]);
    assert_same(
        &cast(DType::F32, &i).expect("cast"),
        &f32s(&[3], &[16_777_216.0, -3.0, 70_000.0]),
    );
    // 2^24 + 1 and 70000 are past f16's largest finite value (65504): +inf.
    assert_eq!(
        f16_bits(&cast(DType::F16, &i).expect("cast")),
        vec![0x7C00, 0xC200, 0x7C00]
    );
}

#[test]
fn float_to_narrow_integers_keeps_both_ends_of_the_range() {
    // i8 holds -128..=127 and u8 0..=255 (two's complement and unsigned 8-bit widths), so
    // the ends convert exactly, as do values that truncate toward zero onto them; -0.9
    // truncates to -0, which is 0 in u8.
    let x = f32s(&[4], &[-128.0, 127.0, -128.9, 127.9]);
    assert_same(
        &cast(DType::I8, &x).expect("cast"),
        &Tensor::from_vec([4], vec![-128i8, 127, -128, 127]).expect("tensor"),
    );
    let x = f32s(&[3], &[0.0, 255.0, -0.9]);
    assert_same(
        &cast(DType::U8, &x).expect("cast"),
        &Tensor::from_vec([3], vec![0u8, 255, 0]).expect("tensor"),
    );
}

#[test]
fn float_to_narrow_integers_refuses_one_past_either_end() {
    // One past either end of i8 (-129, 128) or u8 (-1, 256) has no value of that type; ONNX
    // leaves the result undefined and the reference refuses it (see ops/movement/cast.rs).
    for (to, bad) in [
        (DType::I8, -129.0),
        (DType::I8, 128.0),
        (DType::U8, -1.0),
        (DType::U8, 256.0),
    ] {
        let x = f32s(&[2], &[0.0, bad]);
        let e = cast(to, &x).expect_err("no value in the type");
        assert!(matches!(e, OpError::Unsupported(_)), "{to} {bad}: {e:?}");
        assert_mentions(&e, &["element 1"]);
    }
}

#[test]
fn integer_to_narrower_integer_wraps() {
    // Integer to integer keeps the low bits (numpy's astype, two's complement): 300 mod 256
    // = 44; -1 is 0xFF = 255 in u8; 200 is 0xC8 = 200 - 256 = -56 in i8; 65_536 + 7 = 7 in
    // u16 (65_536 is one full turn of 16 bits).
    let i = i64s(&[2], &[300, -1]);
    assert_same(
        &cast(DType::U8, &i).expect("cast"),
        &Tensor::from_vec([2], vec![44u8, 255]).expect("tensor"),
    );
    let i = i64s(&[1], &[200]);
    assert_same(
        &cast(DType::I8, &i).expect("cast"),
        &Tensor::from_vec([1], vec![-56i8]).expect("tensor"),
    );
    let i = i64s(&[1], &[65_543]);
    assert_same(
        &cast(DType::U16, &i).expect("cast"),
        &Tensor::from_vec([1], vec![7u16]).expect("tensor"),
    );
}

#[test]
fn cast_to_the_same_type_keeps_bits() {
    let nan = f32::from_bits(0x7fc0_1234);
    let x = f32s(&[2], &[nan, -0.0]);
    assert_same(&cast(DType::F32, &x).expect("cast"), &x);
    let e = f32s(&[0, 3], &[]);
    assert_same(&cast(DType::I64, &e).expect("cast"), &i64s(&[0, 3], &[]));
}

#[test]
fn identity_and_constant_copy_exactly() {
    let nan = f32::from_bits(0x7fc0_0042);
    let x = f32s(&[1, 2], &[nan, 1.5]);
    assert_same(&ok(&Op::Identity, &[&x]), &x);
    let value = i64s(&[2, 2], &[1, 2, 3, 4]);
    let got = run(
        &Op::Constant {
            value: value.clone(),
        },
        &[],
    )
    .expect("constant");
    assert_same(&got, &value);
}

#[test]
fn dropout_is_the_identity_in_inference() {
    let x = f16s(&[2, 2], &[1.0, -2.0, 3.0, 0.5]);
    let ratio = Tensor::scalar_f32(0.9);
    assert_same(&ok(&Op::Dropout, &[&x, &ratio]), &x);
    let off = Tensor::from_bool(Vec::<usize>::new(), vec![false]).expect("scalar");
    assert_same(&ok(&Op::Dropout, &[&x, &ratio, &off]), &x);
    // The optional mask output is all true.
    let outs = run_n(&Op::Dropout, &[Some(&x)], 2).expect("dropout with mask");
    assert_same(&outs[0], &x);
    assert_same(&outs[1], &bools(&[2, 2], &[true; 4]));
}

#[test]
fn dropout_in_training_mode_is_unsupported() {
    let x = f32s(&[2], &[1.0, 2.0]);
    let on = Tensor::from_bool(Vec::<usize>::new(), vec![true]).expect("scalar");
    let e = err(&Op::Dropout, &[&x, &Tensor::scalar_f32(0.5), &on]);
    assert!(matches!(e, OpError::Unsupported(_)), "{e:?}");
    assert_mentions(&e, &["training_mode"]);
}
