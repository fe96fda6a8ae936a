//! Reference kernels for GridSample and AffineGrid: hand-computed values for each mode and
//! padding, the grid's coordinate order (x first, innermost axis), round-half-to-even
//! nearest, Keys' cubic weights, and AffineGrid's base coordinates. The ONNX node tests
//! check larger inputs.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::op::{GridPadding, GridSampleMode};
use concord_core::{Op, Tensor};
use concord_cpu::run_op;

fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
    match Tensor::from_f32(dims.to_vec(), v.to_vec()) {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn one(op: &Op, inputs: &[&Tensor]) -> Tensor {
    let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
    match run_op(op, &inputs, 1) {
        Ok(mut v) if v.len() == 1 => v.remove(0),
        other => panic!("{op:?}: {other:?}"),
    }
}

fn check(t: &Tensor, dims: &[usize], values: &[f64]) {
    assert_eq!(t.dims(), dims, "shape");
    assert_eq!(t.to_f64_vec(), values, "values");
}

fn gs(mode: GridSampleMode, padding_mode: GridPadding, align_corners: bool) -> Op {
    Op::GridSample {
        mode,
        padding_mode,
        align_corners,
    }
}

#[test]
fn grid_sample_linear_reads_x_first() {
    // X = [[1, 2], [3, 4]]. With align_corners, -1 and 1 are the centres of the end
    // elements: (0, 0) is the middle (mean 2.5), (-1, -1) the top left, (1, -1) the top
    // right (x is the column, the first grid coordinate).
    let x = f32s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let grid = f32s(&[1, 1, 3, 2], &[0.0, 0.0, -1.0, -1.0, 1.0, -1.0]);
    let op = gs(GridSampleMode::Linear, GridPadding::Zeros, true);
    check(&one(&op, &[&x, &grid]), &[1, 1, 1, 3], &[2.5, 1.0, 2.0]);
}

#[test]
fn grid_sample_padding_modes() {
    // Without align_corners, (-1, -1) is the outer corner, position (-0.5, -0.5): half way
    // between element (0, 0) and the padding on both axes.
    let x = f32s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let grid = f32s(&[1, 1, 1, 2], &[-1.0, -1.0]);
    let run = |p| one(&gs(GridSampleMode::Linear, p, false), &[&x, &grid]);
    // Zeros: a quarter of element (0, 0).
    check(&run(GridPadding::Zeros), &[1, 1, 1, 1], &[0.25]);
    // Border: the position clamps to (0, 0).
    check(&run(GridPadding::Border), &[1, 1, 1, 1], &[1.0]);
    // Reflection: the taps at -1 reflect about -0.5 onto 0.
    check(&run(GridPadding::Reflection), &[1, 1, 1, 1], &[1.0]);
    // Beyond the range: position x = 3 reflects about 1.5 onto 0; y = -0.5 is row 0.
    let far = f32s(&[1, 1, 1, 2], &[2.5, -0.5]);
    let op = gs(GridSampleMode::Nearest, GridPadding::Reflection, false);
    check(&one(&op, &[&x, &far]), &[1, 1, 1, 1], &[1.0]);
}

#[test]
fn grid_sample_nearest_rounds_half_to_even() {
    // Four columns without align_corners: x = ((g + 1) * 4 - 1) / 2, so g = 0, -0.5, 0.5
    // are the positions 1.5, 0.5, 2.5, which round to 2, 0, 2.
    let x = f32s(&[1, 1, 1, 4], &[10.0, 20.0, 30.0, 40.0]);
    let grid = f32s(&[1, 1, 3, 2], &[0.0, 0.0, -0.5, 0.0, 0.5, 0.0]);
    let op = gs(GridSampleMode::Nearest, GridPadding::Zeros, false);
    check(&one(&op, &[&x, &grid]), &[1, 1, 1, 3], &[30.0, 10.0, 30.0]);
}

#[test]
fn grid_sample_cubic_uses_keys_weights() {
    // Half way between columns 1 and 2 (g = 0, four columns, no align_corners), Keys'
    // kernel with a = -0.75 weighs columns 0…3 by -0.09375, 0.59375, 0.59375, -0.09375:
    // -0.09375 + 2 * 0.59375 + 4 * 0.59375 - 8 * 0.09375 = 2.71875. The one row sits at an
    // integer position, where the weights are 0, 1, 0, 0.
    let x = f32s(&[1, 1, 1, 4], &[1.0, 2.0, 4.0, 8.0]);
    let grid = f32s(&[1, 1, 1, 2], &[0.0, 0.0]);
    let op = gs(GridSampleMode::Cubic, GridPadding::Zeros, false);
    check(&one(&op, &[&x, &grid]), &[1, 1, 1, 1], &[2.71875]);
    // The same row as 5-D X (one depth): cubic works in any rank (onnxruntime 1.23.2 refuses
    // it on 5-D X, so no golden case checks this), the depth and row at 0 with weights
    // 0, 1, 0, 0.
    let x = f32s(&[1, 1, 1, 1, 4], &[1.0, 2.0, 4.0, 8.0]);
    let grid = f32s(&[1, 1, 1, 1, 3], &[0.0, 0.0, 0.0]);
    check(&one(&op, &[&x, &grid]), &[1, 1, 1, 1, 1], &[2.71875]);
}

#[test]
fn grid_sample_cubic_border_pads_the_taps_not_the_position() {
    // Five columns with align_corners: x = 2 * (g + 1), so g = -1.25 and 1.25 are the
    // positions -0.5 and 4.5, outside X. The position stays where it is (fraction 0.5) and
    // only the taps are clamped: columns -2, -1, 0, 1 read 10, 10, 10, 20, weighed -0.09375,
    // 0.59375, 0.59375, -0.09375, giving 9.0625; columns 3…6 read 40, 50, 50, 50, giving
    // 50.9375. onnxruntime 1.23.2 gives both values; clamping the position to 0 first (as
    // the ONNX reference does) would give 10 and 50. The one row's weights are 0, 1, 0, 0.
    let x = f32s(&[1, 1, 1, 5], &[10.0, 20.0, 30.0, 40.0, 50.0]);
    let grid = f32s(&[1, 1, 2, 2], &[-1.25, 0.0, 1.25, 0.0]);
    let op = gs(GridSampleMode::Cubic, GridPadding::Border, true);
    check(&one(&op, &[&x, &grid]), &[1, 1, 1, 2], &[9.0625, 50.9375]);
}

#[test]
fn grid_sample_volumetric() {
    // X (1, 1, 2, 2, 2) holds d * 4 + h * 2 + w. The grid's coordinates are (x, y, z) =
    // (w, h, d): the centre averages to 3.5; (1, -1, 1) is w 1, h 0, d 1, element 5.
    let x = f32s(&[1, 1, 2, 2, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let grid = f32s(&[1, 1, 1, 2, 3], &[0.0, 0.0, 0.0, 1.0, -1.0, 1.0]);
    let op = gs(GridSampleMode::Linear, GridPadding::Zeros, true);
    check(&one(&op, &[&x, &grid]), &[1, 1, 1, 1, 2], &[3.5, 5.0]);
}

#[test]
fn grid_sample_refuses_mismatched_shapes() {
    let x = f32s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    // A 3-D grid coordinate for 2-D X.
    let grid = f32s(&[1, 1, 1, 3], &[0.0, 0.0, 0.0]);
    let op = gs(GridSampleMode::Linear, GridPadding::Zeros, false);
    assert!(run_op(&op, &[Some(&x), Some(&grid)], 1).is_err());
}

#[test]
fn affine_grid_2d_and_3d() {
    // theta maps (x, y, 1) to (2x + 1, -y). With align_corners, three columns sit at
    // x = -1, 0, 1 and two rows at y = -1, 1.
    let theta = f32s(&[1, 2, 3], &[2.0, 0.0, 1.0, 0.0, -1.0, 0.0]);
    let size = Tensor::vec_i64(vec![1, 1, 2, 3]);
    let op = Op::AffineGrid {
        align_corners: true,
    };
    check(
        &one(&op, &[&theta, &size]),
        &[1, 2, 3, 2],
        &[
            -1.0, 1.0, 1.0, 1.0, 3.0, 1.0, -1.0, -1.0, 1.0, -1.0, 3.0, -1.0,
        ],
    );
    // 3-D without align_corners: one depth and one row sit at 0, two columns at -0.5 and
    // 0.5; theta translates x by 0.5 and z by 0.25.
    let theta = f32s(
        &[1, 3, 4],
        &[1.0, 0.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.25],
    );
    let size = Tensor::vec_i64(vec![1, 1, 1, 1, 2]);
    let op = Op::AffineGrid {
        align_corners: false,
    };
    check(
        &one(&op, &[&theta, &size]),
        &[1, 1, 1, 2, 3],
        &[0.0, 0.0, 0.25, 1.0, 0.0, 0.25],
    );
    // size's N must be theta's.
    let wrong = Tensor::vec_i64(vec![2, 1, 1, 1, 2]);
    assert!(run_op(&op, &[Some(&theta), Some(&wrong)], 1).is_err());
    // An empty extent gives an empty grid; a negative one, or four spatial axes (with a
    // theta of the matching (N, 4, 5) shape), is refused.
    let empty = Tensor::vec_i64(vec![1, 1, 1, 0, 2]);
    check(&one(&op, &[&theta, &empty]), &[1, 1, 0, 2, 3], &[]);
    let refused = [
        (theta.clone(), vec![1, 1, 1, -1, 2]),
        (f32s(&[1, 4, 5], &[0.0; 20]), vec![1, 1, 1, 1, 1, 1]),
    ];
    for (theta, size) in refused {
        let got = run_op(
            &op,
            &[Some(&theta), Some(&Tensor::vec_i64(size.clone()))],
            1,
        );
        assert!(
            matches!(&got, Err(concord_core::OpError::Shape(m)) if m.contains("AffineGrid needs")),
            "{size:?}: {got:?}"
        );
    }
}

#[test]
fn inference_matches_the_kernels() {
    use concord_core::infer::{infer_op, ValueFact};
    use concord_core::{DType, Dim};
    let fixed = |d: &[usize]| d.iter().map(|&e| Dim::Fixed(e)).collect::<Vec<_>>();
    fn fact<'a>(
        dtype: concord_core::DType,
        shape: &'a [concord_core::Dim],
        value: Option<&'a Tensor>,
    ) -> Option<ValueFact<'a>> {
        Some(ValueFact {
            dtype,
            shape,
            value,
        })
    }
    let dims = |op: &Op, inputs: &[Option<ValueFact>]| match infer_op(op, inputs, 1) {
        Ok(mut v) => v.remove(0).shape,
        Err(e) => panic!("{op:?}: {e}"),
    };

    // GridSample: (N, C) from X, the output extents from grid; a named N passes through.
    let x_shape = vec![
        Dim::Named("n".into()),
        Dim::Fixed(3),
        Dim::Fixed(5),
        Dim::Fixed(6),
    ];
    let g_shape = vec![
        Dim::Named("n".into()),
        Dim::Fixed(2),
        Dim::Fixed(4),
        Dim::Fixed(2),
    ];
    let op = gs(GridSampleMode::Cubic, GridPadding::Border, false);
    let inputs = [
        fact(DType::F32, &x_shape, None),
        fact(DType::F32, &g_shape, None),
    ];
    let mut want = vec![Dim::Named("n".into()), Dim::Fixed(3)];
    want.extend(fixed(&[2, 4]));
    assert_eq!(dims(&op, &inputs), want);
    // A grid whose last extent is not X's spatial rank is refused.
    let bad = fixed(&[1, 2, 4, 3]);
    let inputs = [
        fact(DType::F32, &x_shape, None),
        fact(DType::F32, &bad, None),
    ];
    assert!(infer_op(&op, &inputs, 1).is_err());

    // AffineGrid with a constant size: every extent known, and equal to the kernel's.
    let theta = f32s(&[2, 2, 3], &[0.0; 12]);
    let size = Tensor::vec_i64(vec![2, 1, 4, 5]);
    let op = Op::AffineGrid {
        align_corners: false,
    };
    let theta_shape = fixed(&[2, 2, 3]);
    let size_shape = fixed(&[4]);
    let inputs = [
        fact(DType::F32, &theta_shape, None),
        fact(DType::I64, &size_shape, Some(&size)),
    ];
    let kernel = one(&op, &[&theta, &size]);
    assert_eq!(dims(&op, &inputs), fixed(kernel.dims()));
    assert_eq!(kernel.dims(), &[2, 4, 5, 2]);
    // A runtime size: N from theta, the spatial extents unknown, the rank from size's length.
    let inputs = [
        fact(DType::F32, &theta_shape, None),
        fact(DType::I64, &size_shape, None),
    ];
    assert_eq!(
        dims(&op, &inputs),
        vec![Dim::Fixed(2), Dim::Unknown, Dim::Unknown, Dim::Fixed(2)]
    );
}

#[test]
fn grid_sample_takes_one_spatial_axis_and_checks_shapes() {
    // r = 1: X (1, 1, 3), grid (1, 2, 1). With align_corners the position is (n + 1)/2 · 2:
    // −1 → 0 (10), 0.5 → 1.5 (halfway between 20 and 30).
    let x = f32s(&[1, 1, 3], &[10.0, 20.0, 30.0]);
    let grid = f32s(&[1, 2, 1], &[-1.0, 0.5]);
    let op = gs(GridSampleMode::Linear, GridPadding::Zeros, true);
    check(&one(&op, &[&x, &grid]), &[1, 1, 2], &[10.0, 25.0]);
    // Each condition alone: X without a spatial axis, a grid of another rank than X's, of
    // another batch, or whose last extent is not the number of spatial axes.
    let cases: [(&[usize], &[usize]); 4] = [
        (&[1, 3], &[1, 0]),
        (&[1, 1, 3], &[1, 2]),
        (&[1, 1, 3], &[2, 2, 1]),
        (&[1, 1, 3], &[1, 2, 2]),
    ];
    for (xd, gd) in cases {
        let x = f32s(xd, &vec![1.0; xd.iter().product()]);
        let grid = f32s(gd, &vec![0.0; gd.iter().product()]);
        let got = run_op(&op, &[Some(&x), Some(&grid)], 1);
        assert!(
            matches!(&got, Err(concord_core::OpError::Shape(m)) if m.contains("GridSample needs")),
            "{xd:?}, {gd:?}: {got:?}"
        );
    }
}
