//! Reshape, Flatten, Squeeze, Unsqueeze and Shape kernels on hand-computed examples:
//! 0 / -1 / allowzero, negative and boundary axes, size-1 and empty dims, and errors that
//! name both shapes.

mod movement_support;

use concord_core::{Op, OpError, Tensor};
use movement_support::*;

fn iota(dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    i64s(dims, &(0..n as i64).collect::<Vec<_>>())
}

fn reshape(x: &Tensor, shape: &[i64], allowzero: bool) -> Result<Tensor, OpError> {
    run(&Op::Reshape { allowzero }, &[Some(x), Some(&ints(shape))])
}

#[test]
fn reshape_infers_minus_one() {
    let x = iota(&[2, 3, 4]);
    let got = reshape(&x, &[4, -1], false).expect("reshape");
    assert_same(&got, &iota(&[4, 6]));
    let got = reshape(&x, &[-1], false).expect("reshape");
    assert_same(&got, &iota(&[24]));
}

#[test]
fn reshape_zero_copies_the_input_dim() {
    let x = iota(&[2, 3, 4]);
    assert_same(
        &reshape(&x, &[0, -1], false).expect("reshape"),
        &iota(&[2, 12]),
    );
    assert_same(
        &reshape(&x, &[0, 0, -1], false).expect("reshape"),
        &iota(&[2, 3, 4]),
    );
    assert_same(
        &reshape(&x, &[-1, 0, 2], false).expect("reshape"),
        &iota(&[4, 3, 2]),
    );
}

#[test]
fn reshape_allowzero_keeps_zero_literal() {
    let empty = f32s(&[0, 3], &[]);
    let got = reshape(&empty, &[3, 0], true).expect("reshape");
    assert_same(&got, &f32s(&[3, 0], &[]));
    // Without allowzero the 0 copies input dim 1 (3), and 9 elements cannot come from 0.
    let e = reshape(&empty, &[3, 0], false).expect_err("[3, 3] from 0 elements");
    assert_mentions(&e, &["[0, 3]", "[3, 0]"]);
    // A copied 0 makes any target with the same zero fit, but leaves -1 ambiguous.
    let got = reshape(&empty, &[0, 4], false).expect("reshape");
    assert_same(&got, &f32s(&[0, 4], &[]));
    let e = reshape(&empty, &[0, -1], false).expect_err("-1 next to a 0");
    assert_mentions(&e, &["ambiguous"]);
    // allowzero forbids mixing 0 and -1.
    let e = reshape(&empty, &[0, -1], true).expect_err("0 with -1");
    assert_mentions(&e, &["allowzero"]);
}

#[test]
fn reshape_keeps_bits_of_every_dtype() {
    let b = bools(&[2, 2], &[true, false, false, true]);
    assert_same(
        &reshape(&b, &[4], false).expect("reshape"),
        &bools(&[4], &[true, false, false, true]),
    );
    let h = f16s(&[1, 2], &[0.1, -0.0]);
    assert_same(
        &reshape(&h, &[2, 1], false).expect("reshape"),
        &f16s(&[2, 1], &[0.1, -0.0]),
    );
}

#[test]
fn reshape_errors_name_both_shapes() {
    let x = f32s(&[2, 3], &[0.0; 6]);
    let e = reshape(&x, &[4], false).expect_err("6 elements into 4");
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
    assert_mentions(&e, &["[2, 3]", "[4]"]);
    let e = reshape(&x, &[-1, -1], false).expect_err("two -1");
    assert_mentions(&e, &["[2, 3]", "[-1, -1]", "more than one"]);
    let e = reshape(&x, &[4, -1], false).expect_err("6 not divisible by 4");
    assert_mentions(&e, &["[2, 3]", "[4, -1]"]);
    let e = reshape(&x, &[-2, 3], false).expect_err("-2");
    assert_mentions(&e, &["-2", "not a valid dim"]);
    // Below -1 no dim is valid (ONNX: -1 is the only negative value), even where the element
    // count could not tell: an empty input into [-2, 0] under allowzero has 0 elements on
    // both sides.
    let empty = f32s(&[0, 3], &[]);
    let e = reshape(&empty, &[-2, 0], true).expect_err("-2 with a literal 0");
    assert_mentions(&e, &["-2", "not a valid dim"]);
    let e = reshape(&x, &[6, 1, 0], false).expect_err("0 past the input rank");
    assert_mentions(&e, &["position 2", "does not exist"]);
    let e = run(
        &Op::Reshape { allowzero: false },
        &[Some(&x), Some(&i64s(&[1, 2], &[3, 2]))],
    )
    .expect_err("2-D shape");
    assert_mentions(&e, &["shape", "1-D"]);
}

#[test]
fn flatten_at_every_axis() {
    let x = iota(&[2, 3, 4]);
    let flatten = |axis| ok(&Op::Flatten { axis }, &[&x]);
    assert_same(&flatten(0), &iota(&[1, 24]));
    assert_same(&flatten(1), &iota(&[2, 12]));
    assert_same(&flatten(3), &iota(&[24, 1]));
    assert_same(&flatten(-1), &iota(&[6, 4]));
    assert_same(&flatten(-3), &iota(&[1, 24]));
    let e = err(&Op::Flatten { axis: 4 }, &[&x]);
    assert!(
        matches!(e, OpError::Attribute { name: "axis", .. }),
        "{e:?}"
    );
    let e = err(&Op::Flatten { axis: -4 }, &[&x]);
    assert!(
        matches!(e, OpError::Attribute { name: "axis", .. }),
        "{e:?}"
    );
    // An empty dim makes an empty side.
    let empty = f32s(&[2, 0, 3], &[]);
    assert_same(
        &ok(&Op::Flatten { axis: 2 }, &[&empty]),
        &f32s(&[0, 3], &[]),
    );
}

#[test]
fn squeeze_without_axes_drops_every_unit_dim() {
    let x = iota(&[1, 3, 1, 2]);
    assert_same(
        &run(&Op::Squeeze, &[Some(&x)]).expect("squeeze"),
        &iota(&[3, 2]),
    );
    let one = f32s(&[1, 1], &[7.0]);
    assert_same(
        &run(&Op::Squeeze, &[Some(&one)]).expect("squeeze"),
        &Tensor::scalar_f32(7.0),
    );
}

#[test]
fn squeeze_listed_axes() {
    let x = iota(&[1, 3, 1, 2]);
    assert_same(&ok(&Op::Squeeze, &[&x, &ints(&[0])]), &iota(&[3, 1, 2]));
    assert_same(&ok(&Op::Squeeze, &[&x, &ints(&[-2])]), &iota(&[1, 3, 2]));
    assert_same(&ok(&Op::Squeeze, &[&x, &ints(&[2, 0])]), &iota(&[3, 2]));
    let e = err(&Op::Squeeze, &[&x, &ints(&[1])]);
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
    assert_mentions(&e, &["axis 1", "extent 3"]);
    let e = err(&Op::Squeeze, &[&x, &ints(&[0, -4])]);
    assert!(
        matches!(e, OpError::Attribute { name: "axes", .. }),
        "{e:?}"
    );
    let e = err(&Op::Squeeze, &[&x, &ints(&[4])]);
    assert!(
        matches!(e, OpError::Attribute { name: "axes", .. }),
        "{e:?}"
    );
}

#[test]
fn unsqueeze_inserts_unit_dims_at_output_positions() {
    let x = iota(&[3, 4]);
    let unsqueeze = |axes: &[i64]| ok(&Op::Unsqueeze, &[&x, &ints(axes)]);
    assert_same(&unsqueeze(&[0]), &iota(&[1, 3, 4]));
    assert_same(&unsqueeze(&[-1]), &iota(&[3, 4, 1]));
    assert_same(&unsqueeze(&[0, 3]), &iota(&[1, 3, 4, 1]));
    // Order does not matter; positions are in the output.
    assert_same(&unsqueeze(&[3, 0]), &iota(&[1, 3, 4, 1]));
    assert_same(&unsqueeze(&[2, 0]), &iota(&[1, 3, 1, 4]));
    assert_same(&unsqueeze(&[-1, -2]), &iota(&[3, 4, 1, 1]));
    // A scalar becomes a 1-element vector (the shape-chain step after Gather).
    let s = Tensor::scalar_i64(2);
    assert_same(&ok(&Op::Unsqueeze, &[&s, &ints(&[0])]), &ints(&[2]));
    // Axes as a scalar name one axis, as onnxruntime and ONNX's reference read them
    // (AffineGrid's function expansion writes Unsqueeze(x, -1) with a scalar -1).
    let last = Tensor::scalar_i64(-1);
    assert_same(&ok(&Op::Unsqueeze, &[&x, &last]), &iota(&[3, 4, 1]));
    assert_same(
        &ok(&Op::Squeeze, &[&iota(&[3, 4, 1]), &last]),
        &iota(&[3, 4]),
    );
    let matrix = Tensor::from_i64([1, 1], vec![0]).expect("[1, 1] axes");
    let e = err(&Op::Unsqueeze, &[&x, &matrix]);
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");

    let e = err(&Op::Unsqueeze, &[&x, &ints(&[0, 0])]);
    assert!(
        matches!(e, OpError::Attribute { name: "axes", .. }),
        "{e:?}"
    );
    let e = err(&Op::Unsqueeze, &[&x, &ints(&[3])]);
    assert!(
        matches!(e, OpError::Attribute { name: "axes", .. }),
        "{e:?}"
    );
    let e = run(&Op::Unsqueeze, &[Some(&x)]).expect_err("axes required");
    assert!(matches!(e, OpError::MissingInput { index: 1, .. }), "{e:?}");
}

#[test]
fn shape_with_start_and_end() {
    let x = f32s(&[2, 3, 4, 5], &[0.0; 120]);
    let shape = |start, end| ok(&Op::Shape { start, end }, &[&x]);
    assert_same(&shape(0, None), &ints(&[2, 3, 4, 5]));
    assert_same(&shape(1, None), &ints(&[3, 4, 5]));
    assert_same(&shape(-1, None), &ints(&[5]));
    assert_same(&shape(0, Some(-1)), &ints(&[2, 3, 4]));
    assert_same(&shape(-10, Some(2)), &ints(&[2, 3]));
    assert_same(&shape(1, Some(10)), &ints(&[3, 4, 5]));
    assert_same(&shape(10, None), &ints(&[]));
    assert_same(&shape(2, Some(1)), &ints(&[]));
    let scalar = Tensor::scalar_f32(1.0);
    assert_same(
        &ok(
            &Op::Shape {
                start: 0,
                end: None,
            },
            &[&scalar],
        ),
        &ints(&[]),
    );
    let empty = bools(&[0, 7], &[]);
    assert_same(
        &ok(
            &Op::Shape {
                start: 0,
                end: None,
            },
            &[&empty],
        ),
        &ints(&[0, 7]),
    );
}
