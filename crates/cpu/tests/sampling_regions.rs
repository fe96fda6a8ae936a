//! Reference kernels for RoiAlign, MaxRoiPool and DeformConv: hand-computed values for each
//! mode, coordinate convention, rounding and padding rule, and their inference. The ONNX
//! node tests (RoiAlign, DeformConv) and the golden cases from onnxruntime (RoiAlign,
//! MaxRoiPool) check larger inputs.
//!
//! Most cases read X = 4·y + x on a 4×4 plane: bilinear interpolation of a plane that is
//! linear in its coordinates is exact, so a sample at (y, x) inside it reads 4·y + x.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::op::{DeformConv, RoiAlign, RoiAlignMode, RoiCoordinates};
use concord_core::{Op, OpError, Tensor};
use concord_cpu::run_op;

fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
    match Tensor::from_f32(dims.to_vec(), v.to_vec()) {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    run_op(op, inputs, 1).map(|mut v| v.remove(0))
}

fn one(op: &Op, inputs: &[Option<&Tensor>]) -> Tensor {
    match run(op, inputs) {
        Ok(t) => t,
        Err(e) => panic!("{op:?}: {e}"),
    }
}

fn check(t: &Tensor, dims: &[usize], values: &[f64]) {
    assert_eq!(t.dims(), dims, "shape");
    assert_eq!(t.to_f64_vec(), values, "values");
}

/// X (1, 1, 4, 4) = 4·y + x + `shift`.
fn plane(shift: f32) -> Tensor {
    let v: Vec<f32> = (0..16).map(|i| i as f32 + shift).collect();
    f32s(&[1, 1, 4, 4], &v)
}

fn roi_align(
    mode: RoiAlignMode,
    coordinates: RoiCoordinates,
    out: [usize; 2],
    sampling_ratio: usize,
    spatial_scale: f32,
) -> Op {
    Op::RoiAlign(RoiAlign {
        mode,
        coordinates,
        output_height: out[0],
        output_width: out[1],
        sampling_ratio,
        spatial_scale,
    })
}

#[test]
fn roi_align_coordinate_modes() {
    let x = plane(0.0);
    let zero = Tensor::vec_i64(vec![0]);
    // Region [x1, y1, x2, y2] = [0, 0, 2, 2], 2×2 bins of 1, one sample each at the bin
    // centre. output_half_pixel: centres at 0.5 and 1.5, so 4·0.5 + 0.5 = 2.5, 3.5, 6.5, 7.5.
    let rois = f32s(&[1, 4], &[0.0, 0.0, 2.0, 2.0]);
    let op = |c| roi_align(RoiAlignMode::Avg, c, [2, 2], 1, 1.0);
    check(
        &one(
            &op(RoiCoordinates::OutputHalfPixel),
            &[Some(&x), Some(&rois), Some(&zero)],
        ),
        &[1, 1, 2, 2],
        &[2.5, 3.5, 6.5, 7.5],
    );
    // half_pixel shifts the region by -0.5: centres at 0 and 1, reading 0, 1, 4, 5.
    check(
        &one(
            &op(RoiCoordinates::HalfPixel),
            &[Some(&x), Some(&rois), Some(&zero)],
        ),
        &[1, 1, 2, 2],
        &[0.0, 1.0, 4.0, 5.0],
    );
    // spatial_scale 0.5 maps [0, 0, 4, 4] onto the same region.
    let wide = f32s(&[1, 4], &[0.0, 0.0, 4.0, 4.0]);
    let scaled = roi_align(
        RoiAlignMode::Avg,
        RoiCoordinates::OutputHalfPixel,
        [2, 2],
        1,
        0.5,
    );
    check(
        &one(&scaled, &[Some(&x), Some(&wide), Some(&zero)]),
        &[1, 1, 2, 2],
        &[2.5, 3.5, 6.5, 7.5],
    );
    // output_half_pixel widens a malformed region to 1×1; half_pixel keeps it empty, with no
    // samples, so its bin is 0.
    let point = f32s(&[1, 4], &[1.0, 1.0, 1.0, 1.0]);
    let op = |c| roi_align(RoiAlignMode::Avg, c, [1, 1], 0, 1.0);
    // One sample at (1.5, 1.5): 7.5.
    check(
        &one(
            &op(RoiCoordinates::OutputHalfPixel),
            &[Some(&x), Some(&point), Some(&zero)],
        ),
        &[1, 1, 1, 1],
        &[7.5],
    );
    check(
        &one(
            &op(RoiCoordinates::HalfPixel),
            &[Some(&x), Some(&point), Some(&zero)],
        ),
        &[1, 1, 1, 1],
        &[0.0],
    );
}

#[test]
fn roi_align_adaptive_grid_and_edges() {
    // Region [0, 0, 4, 4] in 2×2 bins of 2: the adaptive grid is ceil(4 / 2) = 2 samples per
    // axis, at 0.5, 1.5 (first bin) and 2.5, 3.5 (second). 3.5 lies past the last element
    // (3), so it reads row or column 3: the second bin's mean coordinate is (2.5 + 3) / 2 =
    // 2.75. Bins: 4·1 + 1 = 5, 4·1 + 2.75 = 6.75, 4·2.75 + 1 = 12, 4·2.75 + 2.75 = 13.75.
    let x = plane(0.0);
    let zero = Tensor::vec_i64(vec![0]);
    let rois = f32s(&[1, 4], &[0.0, 0.0, 4.0, 4.0]);
    let op = roi_align(
        RoiAlignMode::Avg,
        RoiCoordinates::OutputHalfPixel,
        [2, 2],
        0,
        1.0,
    );
    check(
        &one(&op, &[Some(&x), Some(&rois), Some(&zero)]),
        &[1, 1, 2, 2],
        &[5.0, 6.75, 12.0, 13.75],
    );
    // A region wholly past [-1, H] × [-1, W] reads nothing.
    let away = f32s(&[1, 4], &[10.0, 10.0, 12.0, 12.0]);
    check(
        &one(&op, &[Some(&x), Some(&away), Some(&zero)]),
        &[1, 1, 2, 2],
        &[0.0; 4],
    );
    // Samples within [-1, 0) read the first row and column: region [-1, -1, 0, 0] in one bin
    // sampled at (-0.5, -0.5), which clamps to (0, 0).
    let corner = f32s(&[1, 4], &[-1.0, -1.0, 0.0, 0.0]);
    let op = roi_align(
        RoiAlignMode::Avg,
        RoiCoordinates::OutputHalfPixel,
        [1, 1],
        1,
        1.0,
    );
    let shifted = plane(1.0);
    check(
        &one(&op, &[Some(&shifted), Some(&corner), Some(&zero)]),
        &[1, 1, 1, 1],
        &[1.0],
    );
    // A region of negative width (half_pixel does not widen it) has no samples, and so no
    // rows of samples either, however tall it is: every bin is 0, at once, not after
    // walking an adaptive grid of 10^30 rows of nothing.
    let op = roi_align(RoiAlignMode::Avg, RoiCoordinates::HalfPixel, [2, 2], 0, 1.0);
    for rois in [[3.0, 0.0, 1.0, 1e30], [0.0, 3.0, 1e30, 1.0]] {
        let rois = f32s(&[1, 4], &rois);
        check(
            &one(&op, &[Some(&x), Some(&rois), Some(&zero)]),
            &[1, 1, 2, 2],
            &[0.0; 4],
        );
    }
}

#[test]
fn roi_align_max_takes_the_largest_weighted_corner() {
    // Region [0, 0, 1, 1], one bin, one sample at (0.5, 0.5): its corners 0, 1, 4, 5 each
    // weigh 0.25, so the terms are 0, 0.25, 1, 1.25 and max mode gives 1.25, as onnxruntime
    // and the node data have it (the interpolated sample itself would be 2.5).
    let x = plane(0.0);
    let zero = Tensor::vec_i64(vec![0]);
    let rois = f32s(&[1, 4], &[0.0, 0.0, 1.0, 1.0]);
    let op = |ratio| {
        roi_align(
            RoiAlignMode::Max,
            RoiCoordinates::OutputHalfPixel,
            [1, 1],
            ratio,
            1.0,
        )
    };
    check(
        &one(&op(1), &[Some(&x), Some(&rois), Some(&zero)]),
        &[1, 1, 1, 1],
        &[1.25],
    );
    // Two samples per axis, at 0.25 and 0.75: the sample (0.75, 0.75) weighs corner 5 by
    // 0.75 · 0.75, giving 2.8125, the largest term of the four samples' sixteen.
    check(
        &one(&op(2), &[Some(&x), Some(&rois), Some(&zero)]),
        &[1, 1, 1, 1],
        &[2.8125],
    );
}

#[test]
fn roi_align_reads_the_batch_entry_each_region_names() {
    // Two batch entries, the second 100 more than the first; two channels, the second 16
    // more. Region 0 reads entry 1, region 1 entry 0.
    let v: Vec<f32> = (0..64)
        .map(|i| (i % 16) as f32 + 16.0 * ((i / 16) % 2) as f32 + 100.0 * (i / 32) as f32)
        .collect();
    let x = f32s(&[2, 2, 4, 4], &v);
    let rois = f32s(&[2, 4], &[0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]);
    let indices = Tensor::vec_i64(vec![1, 0]);
    let op = roi_align(
        RoiAlignMode::Avg,
        RoiCoordinates::OutputHalfPixel,
        [1, 1],
        1,
        1.0,
    );
    // The sample (0.5, 0.5) reads 2.5 from the first channel of entry 0.
    check(
        &one(&op, &[Some(&x), Some(&rois), Some(&indices)]),
        &[2, 2, 1, 1],
        &[102.5, 118.5, 2.5, 18.5],
    );
    // A batch index outside X, and mismatched region counts, are refused.
    let outside = Tensor::vec_i64(vec![2, 0]);
    assert!(matches!(
        run(&op, &[Some(&x), Some(&rois), Some(&outside)]),
        Err(OpError::Shape(m)) if m.contains("batch_indices[0] is 2")
    ));
    let short = Tensor::vec_i64(vec![0]);
    assert!(matches!(
        run(&op, &[Some(&x), Some(&rois), Some(&short)]),
        Err(OpError::Shape(_))
    ));
    // rois must have X's dtype.
    let f64_rois = match Tensor::from_vec(vec![2, 4], vec![0.0f64; 8]) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    assert!(matches!(
        run(&op, &[Some(&x), Some(&f64_rois), Some(&indices)]),
        Err(OpError::DType { index: 1, .. })
    ));
    // An X with no rows or no columns has nothing to sample, whichever is empty.
    for dims in [[2, 2, 0, 4], [2, 2, 4, 0]] {
        let empty = f32s(&dims, &[]);
        let got = run(&op, &[Some(&empty), Some(&rois), Some(&indices)]);
        assert!(
            matches!(&got, Err(OpError::Shape(m)) if m.contains("H and W must be at least 1")),
            "{dims:?}: {got:?}"
        );
    }
}

fn max_roi_pool(pooled: [usize; 2], spatial_scale: f32) -> Op {
    Op::MaxRoiPool {
        pooled_shape: pooled,
        spatial_scale,
    }
}

#[test]
fn max_roi_pool_takes_the_true_maximum_of_each_bin() {
    // X = 4·y + x − 20, every value negative. Region [batch 0, x1 0, y1 0, x2 3, y2 3] is
    // 4×4, in 2×2 bins of rows and columns {0, 1} and {2, 3}; each bin's maximum is its
    // bottom-right element. (onnxruntime starts a bin at FLT_MIN and would give 1.2e-38.)
    let x = plane(-20.0);
    let rois = f32s(&[1, 5], &[0.0, 0.0, 0.0, 3.0, 3.0]);
    check(
        &one(&max_roi_pool([2, 2], 1.0), &[Some(&x), Some(&rois)]),
        &[1, 1, 2, 2],
        &[-15.0, -13.0, -7.0, -5.0],
    );
    // Three rows in two bins: floor(0·3/2) = 0 to ceil(3/2) = 2, and floor(3/2) = 1 to 3;
    // the bins share row 1. Region [0, 0, 0, 0, 2] is column 0, rows 0 to 2.
    let column = f32s(&[1, 5], &[0.0, 0.0, 0.0, 0.0, 2.0]);
    check(
        &one(&max_roi_pool([2, 1], 1.0), &[Some(&x), Some(&column)]),
        &[1, 1, 2, 1],
        &[-16.0, -12.0],
    );
}

#[test]
fn max_roi_pool_rounds_corners_and_clips() {
    let x = plane(-20.0);
    // Corners round half away from zero: x1 0.4 → 0, y1 0.5 → 1, x2 2.5 → 3, y2 1.49 → 1.
    // One row (1), four columns in two bins: {0, 1} and {2, 3}.
    let rois = f32s(&[1, 5], &[0.0, 0.4, 0.5, 2.5, 1.49]);
    check(
        &one(&max_roi_pool([1, 2], 1.0), &[Some(&x), Some(&rois)]),
        &[1, 1, 1, 2],
        &[-15.0, -13.0],
    );
    // spatial_scale 0.5 halves [0, 0, 6, 6] to [0, 0, 3, 3]: the whole plane, max -5.
    let wide = f32s(&[1, 5], &[0.0, 0.0, 0.0, 6.0, 6.0]);
    check(
        &one(&max_roi_pool([1, 1], 0.5), &[Some(&x), Some(&wide)]),
        &[1, 1, 1, 1],
        &[-5.0],
    );
    // A region past X clips to nothing: its bins are 0.
    let away = f32s(&[1, 5], &[0.0, 5.0, 5.0, 7.0, 7.0]);
    check(
        &one(&max_roi_pool([1, 1], 1.0), &[Some(&x), Some(&away)]),
        &[1, 1, 1, 1],
        &[0.0],
    );
}

#[test]
fn max_roi_pool_batch_index_truncates_and_is_checked() {
    // Two batch entries; the second is the first plus 100. Batch index 1.7 truncates to 1.
    let v: Vec<f32> = (0..32)
        .map(|i| (i % 16) as f32 + 100.0 * (i / 16) as f32)
        .collect();
    let x = f32s(&[2, 1, 4, 4], &v);
    let rois = f32s(&[1, 5], &[1.7, 0.0, 0.0, 1.0, 1.0]);
    check(
        &one(&max_roi_pool([1, 1], 1.0), &[Some(&x), Some(&rois)]),
        &[1, 1, 1, 1],
        &[105.0],
    );
    for bad in [2.0, -1.0, f32::NAN] {
        let rois = f32s(&[1, 5], &[bad, 0.0, 0.0, 1.0, 1.0]);
        assert!(matches!(
            run(&max_roi_pool([1, 1], 1.0), &[Some(&x), Some(&rois)]),
            Err(OpError::Shape(m)) if m.contains("batch index")
        ));
    }
    // rois needs five columns.
    let four = f32s(&[1, 4], &[0.0, 0.0, 1.0, 1.0]);
    assert!(matches!(
        run(&max_roi_pool([1, 1], 1.0), &[Some(&x), Some(&four)]),
        Err(OpError::Shape(_))
    ));
}

fn deform(kernel: &[usize]) -> DeformConv {
    DeformConv {
        kernel_shape: kernel.to_vec(),
        ..DeformConv::default()
    }
}

#[test]
fn deform_conv_moves_taps_by_their_offsets() {
    // X = 0…8 on a 3×3 plane, W = ones 2×2, no pads: with zero offsets each output is the
    // sum of its 2×2 window: 0+1+3+4 = 8, 12, 20, 24.
    let x = f32s(
        &[1, 1, 3, 3],
        &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
    );
    let w = f32s(&[1, 1, 2, 2], &[1.0; 4]);
    let op = Op::DeformConv(deform(&[2, 2]));
    // offset (1, 2·2·2, 2, 2): channel (tap·2 + axis), axis 0 = h, 1 = w.
    let mut offsets = vec![0.0f32; 32];
    let zero = f32s(&[1, 8, 2, 2], &offsets);
    check(
        &one(&op, &[Some(&x), Some(&w), Some(&zero)]),
        &[1, 1, 2, 2],
        &[8.0, 12.0, 20.0, 24.0],
    );
    // Tap (0, 0) at output (0, 0) moves down 0.5: it reads (0.5, 0), half of 0 and 3, so
    // 8 + 1.5 = 9.5. Tap (1, 0) at output (0, 1) moves left 0.25: (1, 0.75) reads
    // 0.25·3 + 0.75·4 = 3.75 for 4, so 12 − 0.25 = 11.75.
    let at = |channel: usize, oy: usize, ox: usize| (channel * 2 + oy) * 2 + ox;
    offsets[at(0, 0, 0)] = 0.5;
    offsets[at(2 * 2 + 1, 0, 1)] = -0.25;
    let moved = f32s(&[1, 8, 2, 2], &offsets);
    check(
        &one(&op, &[Some(&x), Some(&w), Some(&moved)]),
        &[1, 1, 2, 2],
        &[9.5, 11.75, 20.0, 24.0],
    );
    // A mask scales each tap at each output; a bias adds. Tap (1, 1) at output (1, 1)
    // (X = 8) at 0.5: 24 − 4 = 20, plus the bias 1 everywhere.
    let mut mask = vec![1.0f32; 16];
    mask[(3 * 2 + 1) * 2 + 1] = 0.5;
    let mask = f32s(&[1, 4, 2, 2], &mask);
    let bias = f32s(&[1], &[1.0]);
    check(
        &one(
            &op,
            &[Some(&x), Some(&w), Some(&moved), Some(&bias), Some(&mask)],
        ),
        &[1, 1, 2, 2],
        &[10.5, 12.75, 21.0, 21.0],
    );
}

#[test]
fn deform_conv_accumulation_keeps_the_offsets() {
    // The figures of the moved-taps case with W = -1: K = 1 channel · 4 taps · 4 corners,
    // and Σ|terms| is DeformConv of |X| and |W| at the same (signed) offsets: 9.5, 11.75,
    // 20, 24. Taking |offset| would move the second tap right instead, to 12.25.
    let x = f32s(
        &[1, 1, 3, 3],
        &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
    );
    let w = f32s(&[1, 1, 2, 2], &[-1.0; 4]);
    let mut offsets = vec![0.0f32; 32];
    offsets[0] = 0.5;
    offsets[(5 * 2) * 2 + 1] = -0.25;
    let offsets = f32s(&[1, 8, 2, 2], &offsets);
    let op = Op::DeformConv(deform(&[2, 2]));
    let figures = concord_cpu::accumulation(&op, &[Some(&x), Some(&w), Some(&offsets)]);
    let figures = match figures {
        Ok(Some(f)) => f,
        other => panic!("{other:?}"),
    };
    assert_eq!(figures.k, 16);
    assert_eq!(figures.magnitude, vec![9.5, 11.75, 20.0, 24.0]);
}

#[test]
fn deform_conv_taps_outside_x_read_zero() {
    // With pads 1 the 2×2 window at output (0, 0) starts at (-1, -1). Moving its tap (1, 1)
    // (which reads X[0, 0] = 10) by (-0.5, +1) puts it at (-0.5, 1): half of row -1
    // (padding, 0) and half of X[0, 1] = 11, so 5.5 instead of 10.
    let x = f32s(&[1, 1, 2, 2], &[10.0, 11.0, 12.0, 13.0]);
    let w = f32s(&[1, 1, 2, 2], &[1.0; 4]);
    let op = Op::DeformConv(DeformConv {
        pads: vec![1, 1, 1, 1],
        ..deform(&[2, 2])
    });
    let mut offsets = vec![0.0f32; 8 * 9];
    // Channel (tap 3)·2 + axis, output (0, 0) of 3×3.
    offsets[(3 * 2) * 9] = -0.5;
    offsets[(3 * 2 + 1) * 9] = 1.0;
    let offsets = f32s(&[1, 8, 3, 3], &offsets);
    let y = one(&op, &[Some(&x), Some(&w), Some(&offsets)]);
    assert_eq!(y.dims(), &[1, 1, 3, 3]);
    // Output (0, 0) is 5.5; the centre (1, 1) sums all four elements: 46.
    assert_eq!(y.to_f64_vec()[0], 5.5);
    assert_eq!(y.to_f64_vec()[4], 46.0);
}

#[test]
fn deform_conv_groups_and_offset_groups() {
    // Two channels in two groups (1×1 kernels, W = 2 and 3) and two offset groups: channel
    // 0's tap moves right by 1 (reading the next column, 0 past the edge); channel 1's
    // stays.
    let x = f32s(&[1, 2, 1, 2], &[1.0, 2.0, 5.0, 7.0]);
    let w = f32s(&[2, 1, 1, 1], &[2.0, 3.0]);
    let op = Op::DeformConv(DeformConv {
        group: 2,
        offset_group: 2,
        ..deform(&[1, 1])
    });
    // offset (1, 2·1·2, 1, 2): offset group 0's (h, w), then group 1's.
    let offsets = f32s(&[1, 4, 1, 2], &[0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    check(
        &one(&op, &[Some(&x), Some(&w), Some(&offsets)]),
        &[1, 2, 1, 2],
        &[4.0, 0.0, 15.0, 21.0],
    );
}

#[test]
fn deform_conv_matches_a_direct_loop_across_batches_and_offset_groups() {
    // Unit stride and dilation, then 2 for both.
    deform_conv_against_a_direct_loop(1, 1);
    deform_conv_against_a_direct_loop(2, 2);
}

fn deform_conv_against_a_direct_loop(stride: usize, dilation: usize) {
    // Two batch entries, four input and four output channels in two groups, two offset
    // groups, a 2×2 kernel with pads 1, a mask and a bias. The offsets are whole numbers,
    // so each tap reads one element of X (or the padding's 0), and every value is a small
    // dyadic number: the sums are exact. The expected values come from the definition, one
    // output element at a time: y[b, m, oy, ox] = bias[m] + Σ over the group's channels c
    // and taps t = (kh, kw) of W[m, c, t] · mask[b, g(c), t, oy, ox] · X[b, c, s·oy − 1 +
    // d·kh + Δh, s·ox − 1 + d·kw + Δw], with (Δh, Δw) = offset[b, g(c), t, ·, oy, ox], g(c)
    // the offset group of c, s the stride and d the dilation.
    let (n, c, m, h, w) = (2usize, 4usize, 4usize, 4usize, 4usize);
    let (kh, kw, pad) = (2usize, 2usize, 1usize);
    let (groups, offset_groups) = (2usize, 2usize);
    let out = |len: usize, k: usize| (len + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
    let (oh, ow) = (out(h, kh), out(w, kw));
    let taps = kh * kw;
    // A fixed sequence of small whole numbers, different for every tensor.
    let ints = |len: usize, seed: usize, span: usize| -> Vec<i64> {
        (0..len)
            .map(|i| ((i * 7 + seed * 13 + i * i * 3) % span) as i64)
            .collect()
    };
    let x: Vec<f32> = ints(n * c * h * w, 1, 17)
        .iter()
        .map(|&v| v as f32 - 8.0)
        .collect();
    let cg = c / groups;
    let wv: Vec<f32> = ints(m * cg * taps, 2, 5)
        .iter()
        .map(|&v| v as f32 - 2.0)
        .collect();
    let offsets: Vec<f32> = ints(n * offset_groups * taps * 2 * oh * ow, 3, 3)
        .iter()
        .map(|&v| v as f32 - 1.0)
        .collect();
    let mask: Vec<f32> = ints(n * offset_groups * taps * oh * ow, 4, 3)
        .iter()
        .map(|&v| [0.5, 1.0, 2.0][v as usize])
        .collect();
    let bias = [0.25f32, -1.0, 0.5, 2.0];
    let op = Op::DeformConv(DeformConv {
        group: groups,
        offset_group: offset_groups,
        pads: vec![pad; 4],
        strides: vec![stride; 2],
        dilations: vec![dilation; 2],
        ..deform(&[kh, kw])
    });
    let inputs = [
        f32s(&[n, c, h, w], &x),
        f32s(&[m, cg, kh, kw], &wv),
        f32s(&[n, offset_groups * taps * 2, oh, ow], &offsets),
        f32s(&[m], &bias),
        f32s(&[n, offset_groups * taps, oh, ow], &mask),
    ];
    let y = one(&op, &inputs.iter().map(Some).collect::<Vec<_>>());
    let mut want = Vec::new();
    for b in 0..n {
        for mo in 0..m {
            let g = mo / (m / groups);
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut sum = f64::from(bias[mo]);
                    for cl in 0..cg {
                        let ch = g * cg + cl;
                        let og = ch / (c / offset_groups);
                        for t in 0..taps {
                            let (ty, tx) = (t / kw, t % kw);
                            let off = |axis: usize| {
                                offsets[(((b * offset_groups + og) * taps + t) * 2 + axis)
                                    * oh
                                    * ow
                                    + oy * ow
                                    + ox] as i64
                            };
                            let iy = (stride * oy + dilation * ty) as i64 - pad as i64 + off(0);
                            let ix = (stride * ox + dilation * tx) as i64 - pad as i64 + off(1);
                            if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                                continue;
                            }
                            let xv = x[((b * c + ch) * h + iy as usize) * w + ix as usize];
                            let scale = mask
                                [((b * offset_groups + og) * taps + t) * oh * ow + oy * ow + ox];
                            sum += f64::from(wv[(mo * cg + cl) * taps + t])
                                * f64::from(scale)
                                * f64::from(xv);
                        }
                    }
                    want.push(sum);
                }
            }
        }
    }
    check(&y, &[n, m, oh, ow], &want);
}

#[test]
fn deform_conv_without_output_channels_is_empty() {
    // W with no output channel: an empty (1, 0, 2, 2) output, no error.
    let x = f32s(&[1, 1, 3, 3], &[1.0; 9]);
    let w = f32s(&[0, 1, 2, 2], &[]);
    let offsets = f32s(&[1, 8, 2, 2], &[0.0; 32]);
    let op = Op::DeformConv(deform(&[2, 2]));
    check(
        &one(&op, &[Some(&x), Some(&w), Some(&offsets)]),
        &[1, 0, 2, 2],
        &[],
    );
}

#[test]
fn deform_conv_in_one_dimension() {
    // X = 1, 2, 3, 4, W = ones of 2: outputs 3, 5, 7; tap 1 of output 2 moves by 0.5 to
    // 3.5, half of 4 and half of the padding: 3 + 2 = 5.
    let x = f32s(&[1, 1, 4], &[1.0, 2.0, 3.0, 4.0]);
    let w = f32s(&[1, 1, 2], &[1.0, 1.0]);
    let op = Op::DeformConv(DeformConv::default());
    let offsets = f32s(&[1, 2, 3], &[0.0, 0.0, 0.0, 0.0, 0.0, 0.5]);
    check(
        &one(&op, &[Some(&x), Some(&w), Some(&offsets)]),
        &[1, 1, 3],
        &[3.0, 5.0, 5.0],
    );
}

#[test]
fn deform_conv_refuses_inconsistent_operands() {
    let x = f32s(&[1, 1, 3, 3], &[0.0; 9]);
    let w = f32s(&[1, 1, 2, 2], &[1.0; 4]);
    let op = Op::DeformConv(deform(&[2, 2]));
    // Four offset channels where 2·2·2 = 8 are needed.
    let offsets = f32s(&[1, 4, 2, 2], &[0.0; 16]);
    assert!(matches!(
        run(&op, &[Some(&x), Some(&w), Some(&offsets)]),
        Err(OpError::Shape(m)) if m.contains("offset must be")
    ));
    // Offsets for a 3×3 output where Conv gives 2×2.
    let offsets = f32s(&[1, 8, 3, 3], &[0.0; 72]);
    assert!(run(&op, &[Some(&x), Some(&w), Some(&offsets)]).is_err());
    // A mask of the wrong channel count.
    let offsets = f32s(&[1, 8, 2, 2], &[0.0; 32]);
    let mask = f32s(&[1, 8, 2, 2], &[1.0; 32]);
    assert!(matches!(
        run(&op, &[Some(&x), Some(&w), Some(&offsets), None, Some(&mask)]),
        Err(OpError::Shape(m)) if m.contains("mask must be")
    ));
    // offset_group must divide the channels.
    let two = Op::DeformConv(DeformConv {
        offset_group: 2,
        ..deform(&[2, 2])
    });
    assert!(run(&two, &[Some(&x), Some(&w), Some(&offsets)]).is_err());
}

#[test]
fn inference_matches_the_kernels() {
    use concord_core::infer::infer_on_tensors;
    use concord_core::infer::{infer_op, ValueFact};
    use concord_core::{DType, Dim};
    let fixed = |d: &[usize]| d.iter().map(|&e| Dim::Fixed(e)).collect::<Vec<Dim>>();
    let infer = |op: &Op, inputs: &[Option<&Tensor>]| match infer_on_tensors(op, inputs, 1) {
        Ok(mut v) => v.remove(0).shape,
        Err(e) => panic!("{op:?}: {e}"),
    };

    // RoiAlign and MaxRoiPool: R from rois, C from X, the bins from the attributes.
    let x = f32s(&[2, 3, 4, 4], &[0.0; 96]);
    let rois = f32s(&[5, 4], &[0.0; 20]);
    let indices = Tensor::vec_i64(vec![0; 5]);
    let op = roi_align(RoiAlignMode::Max, RoiCoordinates::HalfPixel, [2, 3], 2, 1.0);
    let inputs = [Some(&x), Some(&rois), Some(&indices)];
    assert_eq!(infer(&op, &inputs), fixed(one(&op, &inputs).dims()));
    assert_eq!(one(&op, &inputs).dims(), &[5, 3, 2, 3]);
    let rois5 = f32s(&[2, 5], &[0.0; 10]);
    let op = max_roi_pool([3, 1], 1.0);
    let inputs = [Some(&x), Some(&rois5)];
    assert_eq!(infer(&op, &inputs), fixed(&[2, 3, 3, 1]));
    assert_eq!(one(&op, &inputs).dims(), &[2, 3, 3, 1]);

    // A named region count passes through RoiAlign; rois and batch_indices must agree.
    let x_shape = fixed(&[1, 3, 4, 4]);
    let r_shape = [Dim::Named("r".into()), Dim::Fixed(4)];
    let i_shape = [Dim::Named("r".into())];
    let fact = |dtype, shape| {
        Some(ValueFact {
            dtype,
            shape,
            value: None,
        })
    };
    let op = roi_align(RoiAlignMode::Avg, RoiCoordinates::HalfPixel, [1, 1], 0, 1.0);
    let facts = [
        fact(DType::F32, &x_shape[..]),
        fact(DType::F32, &r_shape[..]),
        fact(DType::I64, &i_shape[..]),
    ];
    let out = infer_op(&op, &facts, 1).map(|mut v| v.remove(0).shape);
    assert_eq!(
        out.ok(),
        Some(vec![
            Dim::Named("r".into()),
            Dim::Fixed(3),
            Dim::Fixed(1),
            Dim::Fixed(1)
        ])
    );
    let two = fixed(&[2]);
    let three_by_four = fixed(&[3, 4]);
    let facts = [
        fact(DType::F32, &x_shape[..]),
        fact(DType::F32, &three_by_four[..]),
        fact(DType::I64, &two[..]),
    ];
    assert!(infer_op(&op, &facts, 1).is_err());

    // DeformConv: Conv's output extents, which offset must have.
    let x = f32s(&[1, 4, 5, 6], &[0.0; 120]);
    let w = f32s(&[6, 2, 3, 2], &[0.0; 72]);
    let op = Op::DeformConv(DeformConv {
        group: 2,
        offset_group: 4,
        strides: vec![2, 1],
        pads: vec![1, 0, 1, 0],
        ..DeformConv::default()
    });
    // Output extents: (5 + 2 − 3) / 2 + 1 = 3 and (6 − 2) / 1 + 1 = 5.
    let offsets = f32s(&[1, 4 * 6 * 2, 3, 5], &[0.0; 720]);
    let inputs = [Some(&x), Some(&w), Some(&offsets)];
    assert_eq!(infer(&op, &inputs), fixed(&[1, 6, 3, 5]));
    assert_eq!(one(&op, &inputs).dims(), &[1, 6, 3, 5]);
    let wrong = f32s(&[1, 48, 3, 4], &[0.0; 576]);
    assert!(infer_on_tensors(&op, &[Some(&x), Some(&w), Some(&wrong)], 1).is_err());
}
