//! Slice and Gather kernels on hand-computed examples: negative and clamped bounds,
//! INT64 sentinels, negative steps, empty dims, 2-D and negative Gather indices, and typed
//! errors that name the offending index or operand.

mod movement_support;

use concord_core::{Op, OpError, Tensor};
use movement_support::*;

fn slice(
    data: &Tensor,
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<Tensor, OpError> {
    let (s, e) = (ints(starts), ints(ends));
    let a = axes.map(ints);
    let st = steps.map(ints);
    run(
        &Op::Slice,
        &[Some(data), Some(&s), Some(&e), a.as_ref(), st.as_ref()],
    )
}

fn range10() -> Tensor {
    i64s(&[10], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
}

#[test]
fn slice_with_axes_and_steps() {
    // [[1,2,3,4],[5,6,7,8]][1:2, 0:3:2] = [[5,7]].
    let x = f32s(&[2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let got = slice(&x, &[1, 0], &[2, 3], Some(&[0, 1]), Some(&[1, 2])).expect("slice");
    assert_same(&got, &f32s(&[1, 2], &[5.0, 7.0]));
}

#[test]
fn slice_defaults_axes_to_the_leading_ones() {
    // [[1,2,3,4],[5,6,7,8]][0:1] keeps axis 1 whole.
    let x = i64s(&[2, 4], &[1, 2, 3, 4, 5, 6, 7, 8]);
    let got = slice(&x, &[0], &[1], None, None).expect("slice");
    assert_same(&got, &i64s(&[1, 4], &[1, 2, 3, 4]));
}

#[test]
fn slice_counts_negative_bounds_and_axes_from_the_back() {
    let x = i64s(&[2, 4], &[1, 2, 3, 4, 5, 6, 7, 8]);
    // x[:, -3:-1]
    let got = slice(&x, &[-3], &[-1], Some(&[-1]), None).expect("slice");
    assert_same(&got, &i64s(&[2, 2], &[2, 3, 6, 7]));
}

#[test]
fn slice_clamps_out_of_range_bounds() {
    let x = range10();
    assert_same(&slice(&x, &[-100], &[100], None, None).expect("slice"), &x);
    assert_same(
        &slice(&x, &[1], &[i64::MAX], None, None).expect("slice"),
        &i64s(&[9], &[1, 2, 3, 4, 5, 6, 7, 8, 9]),
    );
    assert_same(
        &slice(&x, &[i64::MIN], &[2], None, None).expect("slice"),
        &i64s(&[2], &[0, 1]),
    );
    // Start past the end, or end before start, gives an empty result.
    assert_same(
        &slice(&x, &[10], &[20], None, None).expect("slice"),
        &i64s(&[0], &[]),
    );
    assert_same(
        &slice(&x, &[5], &[3], None, None).expect("slice"),
        &i64s(&[0], &[]),
    );
}

#[test]
fn slice_with_negative_steps() {
    let x = range10();
    // x[::-1] as exporters write it: start -1, end INT64_MIN.
    assert_same(
        &slice(&x, &[-1], &[i64::MIN], None, Some(&[-1])).expect("slice"),
        &i64s(&[10], &[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]),
    );
    // x[8:1:-3] = [8, 5, 2].
    assert_same(
        &slice(&x, &[8], &[1], None, Some(&[-3])).expect("slice"),
        &i64s(&[3], &[8, 5, 2]),
    );
    // x[20:0:-4]: start clamps to 9, so 9, 5, 1.
    assert_same(
        &slice(&x, &[20], &[0], None, Some(&[-4])).expect("slice"),
        &i64s(&[3], &[9, 5, 1]),
    );
    // x[2:5:-1] is empty.
    assert_same(
        &slice(&x, &[2], &[5], None, Some(&[-1])).expect("slice"),
        &i64s(&[0], &[]),
    );
    // Reversing both axes of [[1,2,3],[4,5,6]].
    let m = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let got = slice(
        &m,
        &[-1, -1],
        &[i64::MIN, i64::MIN],
        Some(&[0, 1]),
        Some(&[-1, -1]),
    )
    .expect("slice");
    assert_same(&got, &f32s(&[2, 3], &[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]));
}

#[test]
fn slice_with_extreme_steps_takes_one_element() {
    // x[1::INT64_MAX, :] and x[1::INT64_MIN, :] on [[0,1],[2,3],[4,5]]: only row 1.
    let x = i64s(&[3, 2], &[0, 1, 2, 3, 4, 5]);
    for step in [i64::MAX, i64::MIN] {
        let end = if step > 0 { i64::MAX } else { i64::MIN };
        let got = slice(&x, &[1], &[end], Some(&[0]), Some(&[step])).expect("slice");
        assert_same(&got, &i64s(&[1, 2], &[2, 3]));
    }
}

#[test]
fn slice_with_an_empty_range_and_a_step_beyond_one() {
    // Where the bounds meet, Python's x[4:4:2], x[4:4:-2] and x[12:15:3] (both clamped to
    // 10) are empty: no element is taken, whatever the step.
    let x = range10();
    for (start, end, step) in [(4, 4, 2), (4, 4, -2), (12, 15, 3), (-1, -1, -3)] {
        let got = slice(&x, &[start], &[end], None, Some(&[step])).expect("slice");
        assert_same(&got, &i64s(&[0], &[]));
    }
}

#[test]
fn slice_handles_empty_dims() {
    let x = f32s(&[0, 3], &[]);
    let got = slice(&x, &[0], &[2], Some(&[1]), None).expect("slice");
    assert_same(&got, &f32s(&[0, 2], &[]));
    let got = slice(&x, &[-1], &[i64::MIN], Some(&[0]), Some(&[-1])).expect("slice");
    assert_same(&got, &f32s(&[0, 3], &[]));
}

#[test]
fn slice_rejects_bad_operands() {
    let x = range10();
    let e = slice(&x, &[0], &[5], None, Some(&[0])).expect_err("step 0");
    assert_mentions(&e, &["steps", "0"]);
    let m = i64s(&[2, 2], &[0; 4]);
    let e = slice(&m, &[0, 0], &[1, 1], Some(&[1, -1]), None).expect_err("repeated axis");
    assert!(
        matches!(e, OpError::Attribute { name: "axes", .. }),
        "{e:?}"
    );
    let e = slice(&m, &[0, 0], &[1], None, None).expect_err("length mismatch");
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
    // Each list checked on its own, the others matching starts.
    for (axes, steps) in [(Some(&[0, 1][..]), None), (None, Some(&[1, 1][..]))] {
        let e = slice(&m, &[0], &[1], axes, steps).expect_err("one list too long");
        assert_mentions(&e, &["one entry per sliced axis"]);
    }
    let e = slice(&m, &[0], &[1], Some(&[2]), None).expect_err("axis out of range");
    assert!(
        matches!(e, OpError::Attribute { name: "axes", .. }),
        "{e:?}"
    );
    let bad_starts = f32s(&[1], &[0.0]);
    let e = run(
        &Op::Slice,
        &[Some(&x), Some(&bad_starts), Some(&ints(&[1]))],
    )
    .expect_err("f32 starts");
    assert!(
        matches!(
            e,
            OpError::DType {
                index: 1,
                name: "starts",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn gather_rows() {
    // [[1,2],[3,4],[5,6]] rows 0 and 2.
    let x = f32s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let got = ok(&Op::Gather { axis: 0 }, &[&x, &ints(&[0, 2])]);
    assert_same(&got, &f32s(&[2, 2], &[1.0, 2.0, 5.0, 6.0]));
}

#[test]
fn gather_on_axis_1_with_2d_indices() {
    // ONNX's gather_1 example: data [[1,2,3],[4,5,6],[7,8,9]], indices [[0,2]], axis 1
    // gives shape [3, 1, 2]: [[[1,3]],[[4,6]],[[7,9]]].
    let x = i64s(&[3, 3], &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let idx = i64s(&[1, 2], &[0, 2]);
    let got = ok(&Op::Gather { axis: 1 }, &[&x, &idx]);
    assert_same(&got, &i64s(&[3, 1, 2], &[1, 3, 4, 6, 7, 9]));
    assert_same(&ok(&Op::Gather { axis: -1 }, &[&x, &idx]), &got);
}

#[test]
fn gather_with_negative_indices() {
    // arange(10)[[0, -9, -10]] = [0, 1, 0].
    let got = ok(&Op::Gather { axis: 0 }, &[&range10(), &ints(&[0, -9, -10])]);
    assert_same(&got, &i64s(&[3], &[0, 1, 0]));
    // Axis 1, 2-D indices mixing signs: [[10,11,12],[13,14,15]] with [[-1,0],[1,-3]].
    let x = f16s(&[2, 3], &[10.0, 11.0, 12.0, 13.0, 14.0, 15.0]);
    let idx = i64s(&[2, 2], &[-1, 0, 1, -3]);
    let got = ok(&Op::Gather { axis: 1 }, &[&x, &idx]);
    let want = f16s(
        &[2, 2, 2],
        &[12.0, 10.0, 11.0, 10.0, 15.0, 13.0, 14.0, 13.0],
    );
    assert_same(&got, &want);
}

#[test]
fn gather_with_a_scalar_index_drops_the_axis() {
    // Shape -> Gather(0) -> scalar, the first step of PyTorch's shape chains.
    let shape = ints(&[2, 3, 4, 5]);
    let got = ok(&Op::Gather { axis: 0 }, &[&shape, &Tensor::scalar_i64(0)]);
    assert_same(&got, &Tensor::scalar_i64(2));
    let x = bools(&[3, 2], &[true, false, false, true, true, true]);
    let got = ok(&Op::Gather { axis: 0 }, &[&x, &Tensor::scalar_i64(1)]);
    assert_same(&got, &bools(&[2], &[false, true]));
}

#[test]
fn gather_with_empty_indices() {
    let x = f32s(&[3, 2], &[0.0; 6]);
    let got = ok(&Op::Gather { axis: 0 }, &[&x, &i64s(&[0], &[])]);
    assert_same(&got, &f32s(&[0, 2], &[]));
}

#[test]
fn gather_out_of_range_names_the_index_and_bound() {
    let x = f32s(&[2, 3], &[0.0; 6]);
    let e = err(&Op::Gather { axis: 1 }, &[&x, &ints(&[0, 3])]);
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
    assert_mentions(&e, &["index 3", "extent 3", "element 1"]);
    let e = err(&Op::Gather { axis: 1 }, &[&x, &ints(&[-4])]);
    assert_mentions(&e, &["index -4", "extent 3"]);
    let e = err(&Op::Gather { axis: 0 }, &[&x, &f32s(&[1], &[0.0])]);
    assert!(
        matches!(
            e,
            OpError::DType {
                index: 1,
                name: "indices",
                ..
            }
        ),
        "{e:?}"
    );
    let e = err(&Op::Gather { axis: 2 }, &[&x, &ints(&[0])]);
    assert!(
        matches!(e, OpError::Attribute { name: "axis", .. }),
        "{e:?}"
    );
}
