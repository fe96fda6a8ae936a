//! Transpose, Pad and Expand kernels on hand-computed examples: default and explicit
//! permutations, negative (cropping) pads, the axes input, fill values of each dtype,
//! broadcasting in both directions, and typed errors.

mod movement_support;

use concord_core::op::PadMode;
use concord_core::{Op, OpError, Tensor};
use movement_support::*;

fn pad(
    x: &Tensor,
    pads: &[i64],
    value: Option<&Tensor>,
    axes: Option<&[i64]>,
) -> Result<Tensor, OpError> {
    let p = ints(pads);
    let a = axes.map(ints);
    run(
        &Op::Pad {
            mode: PadMode::Constant,
        },
        &[Some(x), Some(&p), value, a.as_ref()],
    )
}

#[test]
fn transpose_reverses_by_default() {
    // [[1,2,3],[4,5,6]]ᵀ = [[1,4],[2,5],[3,6]].
    let x = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let got = ok(&Op::Transpose { perm: None }, &[&x]);
    assert_same(&got, &f32s(&[3, 2], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
}

#[test]
fn transpose_with_a_permutation() {
    // x[i][0][k] = 3i + k; out[k][i][0] = x[i][0][k].
    let x = i64s(&[2, 1, 3], &[0, 1, 2, 3, 4, 5]);
    let got = ok(
        &Op::Transpose {
            perm: Some(vec![2, 0, 1]),
        },
        &[&x],
    );
    assert_same(&got, &i64s(&[3, 2, 1], &[0, 3, 1, 4, 2, 5]));
    let id = ok(
        &Op::Transpose {
            perm: Some(vec![0, 1, 2]),
        },
        &[&x],
    );
    assert_same(&id, &x);
    // Bits survive, NaN payload included.
    let nan = f32::from_bits(0x7fa0_0003);
    let y = f32s(&[2, 1], &[nan, -0.0]);
    let got = ok(&Op::Transpose { perm: None }, &[&y]);
    assert_same(&got, &f32s(&[1, 2], &[nan, -0.0]));
}

#[test]
fn transpose_handles_empty_and_scalar() {
    let e = f32s(&[0, 2], &[]);
    assert_same(
        &ok(&Op::Transpose { perm: None }, &[&e]),
        &f32s(&[2, 0], &[]),
    );
    let s = Tensor::scalar_i64(4);
    assert_same(&ok(&Op::Transpose { perm: None }, &[&s]), &s);
}

#[test]
fn transpose_rejects_non_permutations() {
    let x = f32s(&[2, 3], &[0.0; 6]);
    for perm in [vec![0, 0], vec![0], vec![0, 2], vec![1, -1], vec![0, 1, 2]] {
        let e = err(
            &Op::Transpose {
                perm: Some(perm.clone()),
            },
            &[&x],
        );
        assert!(
            matches!(e, OpError::Attribute { name: "perm", .. }),
            "{perm:?}: {e:?}"
        );
    }
}

#[test]
fn pad_with_zeros_by_default() {
    // pads = [begin0, begin1, end0, end1] = [1, 0, 0, 1] on [[1,2],[3,4]].
    let x = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let got = pad(&x, &[1, 0, 0, 1], None, None).expect("pad");
    let want = f32s(&[3, 3], &[0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 3.0, 4.0, 0.0]);
    assert_same(&got, &want);
}

#[test]
fn pad_with_a_constant_value() {
    let x = i64s(&[2], &[1, 2]);
    let got = pad(&x, &[2, 1], Some(&Tensor::scalar_i64(9)), None).expect("pad");
    assert_same(&got, &i64s(&[5], &[9, 9, 1, 2, 9]));
    let b = bools(&[1], &[true]);
    assert_same(
        &pad(&b, &[1, 1], None, None).expect("pad"),
        &bools(&[3], &[false, true, false]),
    );
    let h = f16s(&[1], &[1.0]);
    let fill = f16s(&[1], &[0.5]);
    assert_same(
        &pad(&h, &[0, 1], Some(&fill), None).expect("pad"),
        &f16s(&[2], &[1.0, 0.5]),
    );
}

#[test]
fn negative_pads_crop() {
    let x = i64s(&[5], &[1, 2, 3, 4, 5]);
    assert_same(
        &pad(&x, &[-1, 2], None, None).expect("pad"),
        &i64s(&[6], &[2, 3, 4, 5, 0, 0]),
    );
    // Drop the first row and the last column of a 3x3.
    let m = i64s(&[3, 3], &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_same(
        &pad(&m, &[-1, 0, 0, -1], None, None).expect("pad"),
        &i64s(&[2, 2], &[4, 5, 7, 8]),
    );
    // Crop one side and pad the other on the same axis.
    assert_same(
        &pad(&m, &[0, -2, 0, 1], Some(&Tensor::scalar_i64(-1)), None).expect("pad"),
        &i64s(&[3, 2], &[3, -1, 6, -1, 9, -1]),
    );
    // Extreme pads that cancel out: begin INT64_MIN, end INT64_MAX on 2 elements leaves
    // one element, which reads the fill (its source would be far past the input).
    let two = i64s(&[2], &[1, 2]);
    assert_same(
        &pad(&two, &[i64::MIN, i64::MAX], None, None).expect("pad"),
        &i64s(&[1], &[0]),
    );
    // Cropping everything leaves an empty axis.
    assert_same(
        &pad(&x, &[-3, -2], None, None).expect("pad"),
        &i64s(&[0], &[]),
    );
}

#[test]
fn pad_on_listed_axes() {
    let x = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let got = pad(&x, &[1, 1], None, Some(&[-1])).expect("pad");
    let want = f32s(&[2, 5], &[0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 4.0, 5.0, 6.0, 0.0]);
    assert_same(&got, &want);
}

#[test]
fn pad_rejects_bad_operands() {
    let x = f32s(&[2, 2], &[0.0; 4]);
    let e = pad(&x, &[1, 1], None, None).expect_err("2 pads for 2 axes");
    assert_mentions(&e, &["pads", "2 axes"]);
    let e = pad(&x, &[-3, 0, 0, 0], None, None).expect_err("extent -1");
    assert_mentions(&e, &["axis 0", "-1"]);
    let e = pad(&x, &[1, 1, 1, 1], Some(&Tensor::scalar_i64(1)), None).expect_err("i64 fill");
    assert!(
        matches!(
            e,
            OpError::DType {
                index: 2,
                name: "constant_value",
                ..
            }
        ),
        "{e:?}"
    );
    let e = pad(&x, &[1, 1], None, Some(&[2])).expect_err("axis 2 of rank 2");
    assert!(
        matches!(e, OpError::Attribute { name: "axes", .. }),
        "{e:?}"
    );
}

#[test]
fn pad_modes_follow_numpy() {
    // Expected values are numpy's: np.pad([1, 2, 3], (2, 2), mode).
    let x = f32s(&[3], &[1.0, 2.0, 3.0]);
    for (mode, want) in [
        (PadMode::Reflect, [3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]),
        (PadMode::Edge, [1.0, 1.0, 1.0, 2.0, 3.0, 3.0, 3.0]),
        (PadMode::Wrap, [2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0]),
    ] {
        let y = ok(&Op::Pad { mode }, &[&x, &ints(&[2, 2])]);
        assert_eq!(y.as_f32(), Some(&want[..]), "{mode:?}");
    }
    // One element is its own mirror image, edge and period: np.pad([7], (2, 3), mode) is
    // six 7s in every mode (reflect's period 2·(len − 1) would be 0 here).
    let one = f32s(&[1], &[7.0]);
    for mode in [PadMode::Reflect, PadMode::Edge, PadMode::Wrap] {
        let y = ok(&Op::Pad { mode }, &[&one, &ints(&[2, 3])]);
        assert_eq!(y.as_f32(), Some(&[7.0; 6][..]), "{mode:?}");
    }
    // An empty axis has nothing to repeat.
    let empty = f32s(&[0], &[]);
    let e = err(
        &Op::Pad {
            mode: PadMode::Edge,
        },
        &[&empty, &ints(&[1, 1])],
    );
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
}

#[test]
fn expand_to_a_larger_shape() {
    // ONNX's expand_dim_changed: [[1],[2],[3]] to [2, 1, 6] gives [2, 3, 6].
    let x = f32s(&[3, 1], &[1.0, 2.0, 3.0]);
    let got = ok(&Op::Expand, &[&x, &ints(&[2, 1, 6])]);
    let mut want = Vec::new();
    for _ in 0..2 {
        for v in [1.0, 2.0, 3.0] {
            want.extend([v; 6]);
        }
    }
    assert_same(&got, &f32s(&[2, 3, 6], &want));
}

#[test]
fn expand_broadcasts_in_both_directions() {
    // Input [1, 3] against target [2, 1]: each side supplies the other's 1.
    let x = i64s(&[1, 3], &[1, 2, 3]);
    let got = ok(&Op::Expand, &[&x, &ints(&[2, 1])]);
    assert_same(&got, &i64s(&[2, 3], &[1, 2, 3, 1, 2, 3]));
    // A shorter target of ones keeps the input as it is.
    let y = bools(&[2, 1], &[true, false]);
    assert_same(&ok(&Op::Expand, &[&y, &ints(&[1])]), &y);
    // A scalar fills the target.
    let s = Tensor::scalar_i64(7);
    assert_same(
        &ok(&Op::Expand, &[&s, &ints(&[2, 2])]),
        &i64s(&[2, 2], &[7; 4]),
    );
    // Broadcasting 1 against 0 gives an empty result.
    let z = f32s(&[1, 2], &[1.0, 2.0]);
    assert_same(&ok(&Op::Expand, &[&z, &ints(&[0, 1])]), &f32s(&[0, 2], &[]));
}

#[test]
fn expand_rejects_incompatible_shapes() {
    let x = f32s(&[2, 3], &[0.0; 6]);
    let e = err(&Op::Expand, &[&x, &ints(&[4])]);
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
    assert_mentions(&e, &["[2, 3]", "[4]"]);
    let e = err(&Op::Expand, &[&x, &ints(&[-1, 3])]);
    assert_mentions(&e, &["negative"]);
}
