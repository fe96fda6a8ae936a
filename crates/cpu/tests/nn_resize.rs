//! Resize kernel tests: small hand-computed examples for nearest and linear modes under
//! each coordinate transformation and nearest rounding mode (tf_crop_and_resize's roi and
//! extrapolation included), `scales` and `sizes` targets, and the typed errors for bad
//! operands.

mod nn_support;

use concord_core::op::{CoordinateTransform, NearestMode, Resize, ResizeMode};
use concord_core::{DType, Op, OpError, Tensor};
use nn_support::{check, check_error, f16s, f32s, i64s, ok, run, Tolerance};

fn resize(mode: ResizeMode, transform: CoordinateTransform, nearest: NearestMode) -> Op {
    Op::Resize(Resize {
        mode,
        coordinate_transformation_mode: transform,
        nearest_mode: nearest,
        ..Resize::default()
    })
}

fn linear(transform: CoordinateTransform) -> Op {
    resize(ResizeMode::Linear, transform, NearestMode::RoundPreferFloor)
}

fn nearest(transform: CoordinateTransform, mode: NearestMode) -> Op {
    resize(ResizeMode::Nearest, transform, mode)
}

/// Runs Resize with a `scales` input.
fn with_scales(op: &Op, x: &Tensor, scales: &[f32]) -> Tensor {
    let s = f32s(&[scales.len()], scales);
    ok(op, &[Some(x), None, Some(&s)])
}

/// Runs Resize with a `sizes` input.
fn with_sizes(op: &Op, x: &Tensor, sizes: &[i64]) -> Tensor {
    let s = i64s(&[sizes.len()], sizes);
    ok(op, &[Some(x), None, None, Some(&s)])
}

#[test]
fn nearest_half_pixel_doubling_repeats_each_pixel() {
    // Defaults: half_pixel, round_prefer_floor. Output o maps to o/2 − 0.25:
    // −0.25, 0.25, 0.75, 1.25 → 0, 0, 1, 1.
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let op = Op::Resize(Resize::default());
    let y = with_scales(&op, &x, &[1., 1., 2., 2.]);
    #[rustfmt::skip]
    let want = [
        1., 1., 2., 2.,
        1., 1., 2., 2.,
        3., 3., 4., 4.,
        3., 3., 4., 4.,
    ];
    check(&y, DType::F32, &[1, 1, 4, 4], &want, Tolerance::Exact);
}

#[test]
fn nearest_asymmetric_under_each_rounding_mode() {
    // [1, 2, 3] scaled by 1.5 → floor(4.5) = 4 outputs at o / 1.5 = 0, 0.67, 1.33, 2.
    let x = f32s(&[1, 1, 1, 3], &[1., 2., 3.]);
    let scales = [1., 1., 1., 1.5];
    let cases = [
        (NearestMode::Floor, [1., 1., 2., 3.]),
        (NearestMode::Ceil, [1., 2., 3., 3.]),
        (NearestMode::RoundPreferFloor, [1., 2., 2., 3.]),
        (NearestMode::RoundPreferCeil, [1., 2., 2., 3.]),
    ];
    for (mode, want) in cases {
        let y = with_scales(&nearest(CoordinateTransform::Asymmetric, mode), &x, &scales);
        check(&y, DType::F32, &[1, 1, 1, 4], &want, Tolerance::Exact);
    }
}

#[test]
fn nearest_round_prefer_floor_and_ceil_split_exact_halves() {
    // [1, 2] doubled, asymmetric: o / 2 = 0, 0.5, 1, 1.5; the halves go down or up
    // (and 2 clamps to the last input).
    let x = f32s(&[1, 1, 1, 2], &[1., 2.]);
    let scales = [1., 1., 1., 2.];
    let floor = nearest(
        CoordinateTransform::Asymmetric,
        NearestMode::RoundPreferFloor,
    );
    let y = with_scales(&floor, &x, &scales);
    check(
        &y,
        DType::F32,
        &[1, 1, 1, 4],
        &[1., 1., 2., 2.],
        Tolerance::Exact,
    );
    let ceil = nearest(
        CoordinateTransform::Asymmetric,
        NearestMode::RoundPreferCeil,
    );
    let y = with_scales(&ceil, &x, &scales);
    check(
        &y,
        DType::F32,
        &[1, 1, 1, 4],
        &[1., 2., 2., 2.],
        Tolerance::Exact,
    );
}

#[test]
fn nearest_from_sizes_uses_out_over_in_as_the_scale() {
    // [1, 2] to 3 outputs: scale 1.5, half_pixel (o + 0.5) / 1.5 − 0.5 = −0.17, 0.5, 1.17.
    let x = f32s(&[1, 1, 1, 2], &[1., 2.]);
    let floor = nearest(
        CoordinateTransform::HalfPixel,
        NearestMode::RoundPreferFloor,
    );
    let y = with_sizes(&floor, &x, &[1, 1, 1, 3]);
    check(
        &y,
        DType::F32,
        &[1, 1, 1, 3],
        &[1., 1., 2.],
        Tolerance::Exact,
    );
    let ceil = nearest(CoordinateTransform::HalfPixel, NearestMode::RoundPreferCeil);
    let y = with_sizes(&ceil, &x, &[1, 1, 1, 3]);
    check(
        &y,
        DType::F32,
        &[1, 1, 1, 3],
        &[1., 2., 2.],
        Tolerance::Exact,
    );
}

#[test]
fn nearest_downsampling_picks_rounded_centres() {
    // 4x4 (1..16) to 2x2, half_pixel: o maps to 2o + 0.5 → 0 (tie, prefer floor) and 2.
    let x = f32s(
        &[1, 1, 4, 4],
        &(1..=16).map(|v| v as f32).collect::<Vec<_>>(),
    );
    let op = Op::Resize(Resize::default());
    let y = with_sizes(&op, &x, &[1, 1, 2, 2]);
    check(
        &y,
        DType::F32,
        &[1, 1, 2, 2],
        &[1., 3., 9., 11.],
        Tolerance::Exact,
    );
}

#[test]
fn bilinear_half_pixel_doubling() {
    // Input plane 1 + x + 2y; half_pixel maps outputs to −0.25, 0.25, 0.75, 1.25, clamped to
    // [0, 1], so each axis samples at 0, 0.25, 0.75, 1 and the value is 1 + fx + 2·fy.
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let y = with_scales(
        &linear(CoordinateTransform::HalfPixel),
        &x,
        &[1., 1., 2., 2.],
    );
    #[rustfmt::skip]
    let want = [
        1.0, 1.25, 1.75, 2.0,
        1.5, 1.75, 2.25, 2.5,
        2.5, 2.75, 3.25, 3.5,
        3.0, 3.25, 3.75, 4.0,
    ];
    check(&y, DType::F32, &[1, 1, 4, 4], &want, Tolerance::Exact);
}

#[test]
fn linear_under_each_coordinate_transform() {
    // [1, 3] (the line 1 + 2i) to 4 outputs along the last axis.
    let x = f32s(&[1, 1, 1, 2], &[1., 3.]);
    let scales = [1., 1., 1., 2.];
    // asymmetric: o / 2 = 0, 0.5, 1, 1.5 → clamped to 1.
    let y = with_scales(&linear(CoordinateTransform::Asymmetric), &x, &scales);
    check(
        &y,
        DType::F32,
        &[1, 1, 1, 4],
        &[1., 2., 3., 3.],
        Tolerance::Exact,
    );
    // half_pixel and pytorch_half_pixel agree when the output is longer than 1.
    for transform in [
        CoordinateTransform::HalfPixel,
        CoordinateTransform::PytorchHalfPixel,
    ] {
        let y = with_scales(&linear(transform), &x, &scales);
        check(
            &y,
            DType::F32,
            &[1, 1, 1, 4],
            &[1., 1.5, 2.5, 3.],
            Tolerance::Exact,
        );
    }
    // align_corners: o · (2 − 1) / (4 − 1) = 0, 1/3, 2/3, 1.
    let y = with_scales(&linear(CoordinateTransform::AlignCorners), &x, &scales);
    check(
        &y,
        DType::F32,
        &[1, 1, 1, 4],
        &[1., 5. / 3., 7. / 3., 3.],
        Tolerance::RoundedOnce,
    );
}

#[test]
fn pytorch_half_pixel_maps_a_single_output_to_zero() {
    // [1, 2, 3, 4] to one output: pytorch_half_pixel reads coordinate 0; half_pixel reads
    // (0.5 / 0.25) − 0.5 = 1.5, halfway between 2 and 3.
    let x = f32s(&[1, 1, 1, 4], &[1., 2., 3., 4.]);
    let y = with_sizes(
        &linear(CoordinateTransform::PytorchHalfPixel),
        &x,
        &[1, 1, 1, 1],
    );
    check(&y, DType::F32, &[1, 1, 1, 1], &[1.], Tolerance::Exact);
    let y = with_sizes(&linear(CoordinateTransform::HalfPixel), &x, &[1, 1, 1, 1]);
    check(&y, DType::F32, &[1, 1, 1, 1], &[2.5], Tolerance::Exact);
}

#[test]
fn half_pixel_symmetric_recentres_a_truncated_output() {
    // [1, 4, 7] (the line 1 + 3i) scaled by 1.5: 4 outputs instead of 4.5, so the grid is
    // shifted by 1.5·(1 − 4/4.5) = 1/6: coordinates 0, 2/3, 4/3, 2 → values 1, 3, 5, 7.
    // The coordinates are computed in f32 (as onnxruntime does), a few f32 roundings off.
    let x = f32s(&[1, 1, 1, 3], &[1., 4., 7.]);
    let op = linear(CoordinateTransform::HalfPixelSymmetric);
    let y = with_scales(&op, &x, &[1., 1., 1., 1.5]);
    assert_eq!(y.dims(), [1, 1, 1, 4]);
    let got = y.to_f64_vec();
    for (g, w) in got.iter().zip([1., 3., 5., 7.]) {
        assert!((g - w).abs() < 1e-5, "got {got:?}");
    }
}

#[test]
fn empty_scales_with_sizes_is_the_opset_11_form() {
    let x = f32s(&[1, 1, 1, 2], &[1., 2.]);
    let empty = f32s(&[0], &[]);
    let sizes = i64s(&[4], &[1, 1, 1, 4]);
    let op = Op::Resize(Resize::default());
    let y = ok(&op, &[Some(&x), None, Some(&empty), Some(&sizes)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 1, 4],
        &[1., 1., 2., 2.],
        Tolerance::Exact,
    );
}

#[test]
fn f16_input_gives_f16_output() {
    let x = f16s(&[1, 1, 1, 2], &[1., 3.]);
    let y = with_scales(
        &linear(CoordinateTransform::HalfPixel),
        &x,
        &[1., 1., 1., 2.],
    );
    check(
        &y,
        DType::F16,
        &[1, 1, 1, 4],
        &[1., 1.5, 2.5, 3.],
        Tolerance::Exact,
    );
}

/// X of shape [1, 1, 3, 5] with x[r, c] = 100·r + 10·c, so a blend is easy to check.
fn grid_3x5() -> Tensor {
    let values: Vec<f32> = (0..3)
        .flat_map(|r| (0..5).map(move |c| (100 * r + 10 * c) as f32))
        .collect();
    f32s(&[1, 1, 3, 5], &values)
}

/// Runs Resize with a `roi` and a `sizes` input.
fn crop(op: &Op, x: &Tensor, roi: &[f32], sizes: &[i64]) -> Result<Tensor, OpError> {
    let r = f32s(&[roi.len()], roi);
    let s = i64s(&[sizes.len()], sizes);
    run(op, &[Some(x), Some(&r), None, Some(&s)])
}

#[test]
fn tf_crop_and_resize_samples_inside_the_roi() {
    // ONNX: x = start·(in − 1) + o·(end − start)·(in − 1) / (out − 1).
    // Rows, roi [0.5, 1] of 3 → 2: x = 1 + o·0.5·2 / 1 = 1, 2.
    // Columns, roi [0.125, 0.625] of 5 → 3: x = 0.5 + o·0.5·4 / 2 = 0.5, 1.5, 2.5, halfway
    // between columns, so 10·x = 5, 15, 25 on top of 100·row. Every coordinate and weight
    // is exact in f32, so the result is exact.
    let roi = [0., 0., 0.5, 0.125, 1., 1., 1., 0.625];
    let want = [105., 115., 125., 205., 215., 225.];
    let y = crop(
        &linear(CoordinateTransform::TfCropAndResize),
        &grid_3x5(),
        &roi,
        &[1, 1, 2, 3],
    )
    .expect("linear crop");
    check(&y, DType::F32, &[1, 1, 2, 3], &want, Tolerance::Exact);
    // The same crop with `axes` = [3, 2]: roi lists starts then ends in the axes' order.
    let op = Op::Resize(Resize {
        mode: ResizeMode::Linear,
        coordinate_transformation_mode: CoordinateTransform::TfCropAndResize,
        axes: Some(vec![3, 2]),
        ..Resize::default()
    });
    let y = crop(&op, &grid_3x5(), &[0.125, 0.5, 0.625, 1.], &[3, 2]).expect("axes crop");
    check(&y, DType::F32, &[1, 1, 2, 3], &want, Tolerance::Exact);
    // Without a roi every axis is whole (onnxruntime's reading): the one row samples the
    // middle, 0.5·(0 + 1)·2 = 1, and columns x = 0, 2, 4.
    let s = i64s(&[4], &[1, 1, 1, 3]);
    let y = ok(
        &linear(CoordinateTransform::TfCropAndResize),
        &[Some(&grid_3x5()), None, None, Some(&s)],
    );
    check(
        &y,
        DType::F32,
        &[1, 1, 1, 3],
        &[100., 120., 140.],
        Tolerance::Exact,
    );
}

#[test]
fn tf_crop_and_resize_extrapolates_outside_the_input_in_every_mode() {
    // Rows, roi [−0.5, 1] of 3 → 2: x = −1 + o·1.5·2 = −1 (outside), 2.
    // Columns, roi [0.5, 1.5] of 5 → 3: x = 2 + o·1·4 / 2 = 2, 4, 6 (outside).
    // Inside coordinates are whole numbers, which every mode samples exactly (cubic's
    // weights at a whole coordinate are 0, 1, 0, 0), so row 2 gives 220, 240 and the rest
    // is extrapolation_value.
    let roi = [0., 0., -0.5, 0.5, 1., 1., 1., 1.5];
    let want = [-7., -7., -7., 220., 240., -7.];
    for mode in [ResizeMode::Nearest, ResizeMode::Linear, ResizeMode::Cubic] {
        let op = Op::Resize(Resize {
            mode,
            coordinate_transformation_mode: CoordinateTransform::TfCropAndResize,
            extrapolation_value: -7.0,
            ..Resize::default()
        });
        let y = crop(&op, &grid_3x5(), &roi, &[1, 1, 2, 3]).expect("crop");
        check(&y, DType::F32, &[1, 1, 2, 3], &want, Tolerance::Exact);
    }
}

#[test]
fn tf_crop_and_resize_roi_errors() {
    let op = linear(CoordinateTransform::TfCropAndResize);
    check_error(
        crop(&op, &grid_3x5(), &[0., 0., 0., 1., 1., 1.], &[1, 1, 2, 3]),
        |e| matches!(e, OpError::Shape(_)),
        &["roi", "6"],
    );
    let ints = i64s(&[8], &[0, 0, 0, 0, 1, 1, 1, 1]);
    let s = i64s(&[4], &[1, 1, 2, 3]);
    check_error(
        run(&op, &[Some(&grid_3x5()), Some(&ints), None, Some(&s)]),
        |e| matches!(e, OpError::DType { index: 1, .. }),
        &[],
    );
}

#[test]
fn scales_and_sizes_errors() {
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let op = Op::Resize(Resize::default());
    let s = f32s(&[4], &[1., 1., 2., 2.]);
    let z = i64s(&[4], &[1, 1, 4, 4]);
    check_error(
        run(&op, &[Some(&x), None, Some(&s), Some(&z)]),
        |e| matches!(e, OpError::Shape(_)),
        &["both"],
    );
    check_error(
        run(&op, &[Some(&x)]),
        |e| matches!(e, OpError::Shape(_)),
        &["scales", "sizes"],
    );
    let short = f32s(&[2], &[2., 2.]);
    check_error(
        run(&op, &[Some(&x), None, Some(&short)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[1, 1, 2, 2]"],
    );
    let negative = f32s(&[4], &[1., 1., -2., 2.]);
    check_error(
        run(&op, &[Some(&x), None, Some(&negative)]),
        |e| matches!(e, OpError::Shape(_)),
        &["greater than 0"],
    );
    let float_sizes = f32s(&[4], &[1., 1., 4., 4.]);
    check_error(
        run(&op, &[Some(&x), None, None, Some(&float_sizes)]),
        |e| matches!(e, OpError::DType { index: 3, .. }),
        &[],
    );
    let huge = i64s(&[4], &[1, 1, 1 << 40, 1 << 40]);
    check_error(
        run(&op, &[Some(&x), None, None, Some(&huge)]),
        // 2^80 elements: refused by the memory budget before any allocation, naming the shape.
        |e| matches!(e, OpError::MemoryBudget { .. }),
        &["1099511627776"],
    );
    let xi = i64s(&[1, 1, 1, 2], &[1, 2]);
    check_error(
        run(&op, &[Some(&xi), None, Some(&s)]),
        |e| matches!(e, OpError::DType { index: 0, .. }),
        &[],
    );
}

#[test]
fn an_output_as_long_as_its_input_is_still_resampled_when_the_coordinates_move() {
    // tf_crop_and_resize, roi [0.125, 0.875] of 4 → 4: x = 0.375 + o·0.75·3 / 3 = 0.375,
    // 1.125, 1.875, 2.625, none of them a whole index. On the ramp 8·i, linear gives 8·x.
    let x = f32s(&[4], &[0., 8., 16., 24.]);
    let y = crop(
        &linear(CoordinateTransform::TfCropAndResize),
        &x,
        &[0.125, 0.875],
        &[4],
    )
    .expect("crop");
    check(&y, DType::F32, &[4], &[3., 9., 15., 21.], Tolerance::Exact);
    // roi [0.0625, 1.0625] of 5 → 5: x = 0.25 + o, each a quarter past its own index (the
    // last past the input, so extrapolated: 0). Every tap starts at its own index and is
    // still no copy: linear gives 8·x on the ramp; cubic (A = −0.75, weights −0.10546875,
    // 0.87890625, 0.26171875, −0.03515625 at r = 1/4, edges repeated) gives 1.53125,
    // 10.375, 18.375, 26.65625, as the ONNX reference implementation does.
    let x = f32s(&[5], &[0., 8., 16., 24., 32.]);
    for (mode, want) in [
        (ResizeMode::Linear, [2., 10., 18., 26., 0.]),
        (ResizeMode::Cubic, [1.53125, 10.375, 18.375, 26.65625, 0.]),
    ] {
        let op = resize(
            mode,
            CoordinateTransform::TfCropAndResize,
            NearestMode::RoundPreferFloor,
        );
        let y = crop(&op, &x, &[0.0625, 1.0625], &[5]).expect("crop");
        check(&y, DType::F32, &[5], &want, Tolerance::Exact);
    }
}

#[test]
fn extrapolation_over_an_empty_tensor_writes_nothing() {
    // Axis 0 reaches outside the input (roi [−0.5, 1.5]: x = −0.5 for the first output), but
    // axis 1 is empty, so the output [3, 0] has no element to fill.
    let x = f32s(&[2, 0], &[]);
    let op = Op::Resize(Resize {
        mode: ResizeMode::Linear,
        coordinate_transformation_mode: CoordinateTransform::TfCropAndResize,
        extrapolation_value: -7.0,
        ..Resize::default()
    });
    let y = crop(&op, &x, &[-0.5, 0., 1.5, 1.], &[3, 0]).expect("empty crop");
    check(&y, DType::F32, &[3, 0], &[], Tolerance::Exact);
}

#[test]
fn an_axis_at_scale_1_is_left_alone() {
    // Scale 1 resizes nothing, in any mode, antialias or not: an infinity stays one, as
    // onnxruntime leaves the axes it does not resize (linear and cubic taps at whole
    // coordinates, or an antialias window, weigh the neighbours by 0, and 0·inf is NaN).
    let x = f32s(&[3], &[1., f32::INFINITY, 3.]);
    for (mode, antialias) in [
        (ResizeMode::Linear, false),
        (ResizeMode::Linear, true),
        (ResizeMode::Cubic, false),
        (ResizeMode::Cubic, true),
    ] {
        let op = Op::Resize(Resize {
            mode,
            antialias,
            ..Resize::default()
        });
        let y = with_scales(&op, &x, &[1.]);
        let want = [1., f64::INFINITY, 3.];
        check(&y, DType::F32, &[3], &want, Tolerance::Exact);
        if mode == ResizeMode::Cubic {
            continue;
        }
        // The same along an axis left alone beside one that is doubled: half_pixel x =
        // o/2 − 0.25 gives the edge, then 3/4·a + 1/4·b, 1/4·a + 3/4·b, the edge.
        let rows = f32s(&[3, 2], &[1., 5., f32::INFINITY, 9., 3., 7.]);
        let y = with_scales(&op, &rows, &[1., 2.]);
        #[rustfmt::skip]
        let want = [
            1., 2., 4., 5.,
            f64::INFINITY, f64::INFINITY, f64::INFINITY, 9.,
            3., 4., 6., 7.,
        ];
        check(&y, DType::F32, &[3, 4], &want, Tolerance::Exact);
    }
}

#[test]
fn antialiased_halving_of_one_axis() {
    // Linear with antialias at scale 1/2: the triangle widened to a support of 2 around
    // x = 2·o + 0.5 (half_pixel) weighs inputs 2·o − 1 ..= 2·o + 2 by 1/4, 3/4, 3/4, 1/4
    // (normalised: 1/8, 3/8, 3/8, 1/8), an index past an edge counting as the edge:
    // o = 0: 1/2·0 + 3/8·8 + 1/8·16 = 5; o = 1: 1/8·8 + 3/8·16 + 1/2·24 = 19 (the ONNX
    // reference implementation gives the same). One axis, so a sign or an offset the
    // window sum got wrong is not undone by the next axis.
    let op = Op::Resize(Resize {
        mode: ResizeMode::Linear,
        antialias: true,
        ..Resize::default()
    });
    let x = f32s(&[2, 4], &[0., 8., 16., 24., 1., 1., 1., 1.]);
    let y = with_scales(&op, &x, &[1., 0.5]);
    check(
        &y,
        DType::F32,
        &[2, 2],
        &[5., 19., 1., 1.],
        Tolerance::Exact,
    );
}

#[test]
fn cubic_doubling_of_one_axis() {
    // Cubic (A = −0.75), half_pixel doubling: x = o/2 − 0.25, so r is 3/4 (even o) or 1/4
    // (odd o), and the four weights (Keys) are −0.10546875, 0.87890625, 0.26171875,
    // −0.03515625 for r = 1/4 and the same reversed for r = 3/4; neighbours past an edge
    // repeat it. On [0, 64, 0, 128] that gives −6.75, 16.75, 56.25, 51.75, 3.25, 22.25,
    // 96.75, 141.5, all exact (the ONNX reference implementation gives the same), and a
    // constant stays constant. A 1-D input, so that no second axis (cubic taps an axis at
    // scale 1 too, with weights 0, 1, 0, 0) undoes a sign the tap sum got wrong.
    let op = Op::Resize(Resize {
        mode: ResizeMode::Cubic,
        ..Resize::default()
    });
    let x = f32s(&[4], &[0., 64., 0., 128.]);
    let y = with_scales(&op, &x, &[2.]);
    let want = [-6.75, 16.75, 56.25, 51.75, 3.25, 22.25, 96.75, 141.5];
    check(&y, DType::F32, &[8], &want, Tolerance::Exact);
    let y = with_scales(&op, &f32s(&[4], &[1., 1., 1., 1.]), &[2.]);
    check(&y, DType::F32, &[8], &[1.; 8], Tolerance::Exact);
}
