//! Pooling over regions of interest: RoiAlign (bilinear samples on a grid in each bin) and
//! MaxRoiPool (the maximum over each bin, corners rounded to whole elements), computed in
//! f64 and rounded once when stored.
//!
//! RoiAlign follows onnxruntime 1.23.2, whose kernel the ONNX reference implementation was
//! ported from, and which reproduces the node tests' data. In particular `mode = max` is
//! the largest *weighted corner term* w·x over the four corners of every sample, not the
//! largest bilinear-interpolated sample: onnxruntime computes it that way (and logs a
//! warning at session creation that this "summation for max mode … is incorrect and will be
//! fixed"), the ONNX reference does the same, and `test_roialign_mode_max` expects it. A
//! sample outside [-1, H] × [-1, W] reads nothing: its four weights are 0, so it adds 0 to
//! an average and offers 0·x to a max.
//!
//! MaxRoiPool follows onnxruntime's bins (Caffe's ROI pooling) with two differences, both
//! where onnxruntime is inexact: the bin edges floor(i·h/p) and ceil((i+1)·h/p) are
//! computed exactly in integers, where onnxruntime multiplies by an f32 bin size (which can
//! land a product on the far side of an integer), and a bin's value is the true maximum,
//! where onnxruntime starts each bin at f32's smallest positive normal (`FLT_MIN`), so a
//! bin of negative values gives 1.2e-38 there. In both ops a NaN among the values a maximum
//! compares is that maximum.

use super::elementwise::nan_max;
use super::gemm::expect_same_dtype;
use super::spatial::checked_product;
use super::{expect_float, i64_operand, required};
use concord_core::deadline::Ticker;
use concord_core::op::{RoiAlign, RoiAlignMode, RoiCoordinates};
use concord_core::{Deadline, MemoryBudget, OpError, Shape, Tensor};

/// One bilinear sample: four (flat position in the H×W plane, weight) corners.
type Sample = [(usize, f64); 4];

/// Runs RoiAlign on X (N, C, H, W), rois (R, 4) of [x1, y1, x2, y2] and batch_indices (R).
/// A bin may hold millions of samples on a few output elements, so the bin loops check
/// `deadline`.
pub(crate) fn roi_align(
    attrs: &RoiAlign,
    inputs: &[Option<&Tensor>],
    budget: MemoryBudget,
    deadline: Option<Deadline>,
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let rois = required(inputs, 1, "rois")?;
    let indices = required(inputs, 2, "batch_indices")?;
    expect_float(x, 0, "X")?;
    expect_same_dtype(rois, 1, "rois", x.dtype())?;
    let batch_indices = i64_operand(indices, 2, "batch_indices")?;
    let (n, c, h, w) = match *x.dims() {
        [n, c, h, w] => (n, c, h, w),
        _ => return Err(roi_align_shapes(x, rois, indices)),
    };
    let regions = match *rois.dims() {
        [r, 4] if indices.dims() == [r] => r,
        _ => return Err(roi_align_shapes(x, rois, indices)),
    };
    let (oh, ow) = (attrs.output_height, attrs.output_width);
    let out_shape = vec![regions, c, oh, ow];
    let out_len = checked_product(&out_shape, "RoiAlign output shape")?;
    if out_len == 0 {
        return Tensor::from_f64(x.dtype(), Shape::new(out_shape), Vec::new());
    }
    if h == 0 || w == 0 {
        return Err(OpError::Shape(format!(
            "RoiAlign samples X {}, whose H and W must be at least 1",
            x.shape()
        )));
    }
    let plane = h * w;
    let xs = x.to_f64_vec();
    let boxes = rois.to_f64_vec();
    let scale = f64::from(attrs.spatial_scale);
    let mut out = vec![0.0f64; out_len];
    let mut ticker = Ticker::new(deadline);
    for (r, (corners, &batch)) in boxes.chunks_exact(4).zip(&batch_indices).enumerate() {
        let b = usize::try_from(batch)
            .ok()
            .filter(|&b| b < n)
            .ok_or_else(|| {
                OpError::Shape(format!(
                    "RoiAlign: batch_indices[{r}] is {batch}, but X {} has {n} batch entries",
                    x.shape()
                ))
            })?;
        let bins = region_samples(attrs, corners, scale, (h, w), budget, r, &mut ticker)?;
        for ch in 0..c {
            let image = &xs[(b * c + ch) * plane..(b * c + ch + 1) * plane];
            let at = (r * c + ch) * oh * ow;
            for (bin, (samples, count)) in bins.iter().enumerate() {
                ticker.tick(|| format!("RoiAlign's bin {bin} of region {r}, channel {ch}"))?;
                let terms = samples
                    .iter()
                    .map(|s| s.map(|(pos, weight)| weight * image[pos]));
                out[at + bin] = match attrs.mode {
                    RoiAlignMode::Avg => {
                        terms.map(|t| t.iter().sum::<f64>()).sum::<f64>() / *count as f64
                    }
                    // The largest weighted corner term, as onnxruntime and the node data have
                    // it (see the file's comment); no sample at all gives 0.
                    RoiAlignMode::Max => terms
                        .map(|t| t.into_iter().fold(f64::NEG_INFINITY, nan_max))
                        .reduce(nan_max)
                        .unwrap_or(0.0),
                };
            }
        }
    }
    Tensor::from_f64(x.dtype(), Shape::new(out_shape), out)
}

fn roi_align_shapes(x: &Tensor, rois: &Tensor, indices: &Tensor) -> OpError {
    OpError::Shape(format!(
        "RoiAlign needs X (N, C, H, W), rois (R, 4) and batch_indices (R), got X {}, rois {} and \
         batch_indices {}",
        x.shape(),
        rois.shape(),
        indices.shape()
    ))
}

/// The samples of every bin of one region (`r`), row-major over the bins, each bin with the
/// count its average divides by (samples on its grid, at least 1); an error when they do not
/// fit in the memory budget (an adaptive grid over a huge region, a huge sampling_ratio).
fn region_samples(
    attrs: &RoiAlign,
    corners: &[f64],
    scale: f64,
    (h, w): (usize, usize),
    budget: MemoryBudget,
    r: usize,
    ticker: &mut Ticker,
) -> Result<Vec<(Vec<Sample>, usize)>, OpError> {
    let shift = match attrs.coordinates {
        RoiCoordinates::HalfPixel => 0.5,
        RoiCoordinates::OutputHalfPixel => 0.0,
    };
    let (start_w, start_h) = (corners[0] * scale - shift, corners[1] * scale - shift);
    let (end_w, end_h) = (corners[2] * scale - shift, corners[3] * scale - shift);
    let (mut roi_w, mut roi_h) = (end_w - start_w, end_h - start_h);
    if attrs.coordinates == RoiCoordinates::OutputHalfPixel {
        // Malformed regions become 1×1 (opset 10's behaviour, kept by output_half_pixel).
        roi_w = roi_w.max(1.0);
        roi_h = roi_h.max(1.0);
    }
    let (oh, ow) = (attrs.output_height, attrs.output_width);
    let (bin_h, bin_w) = (roi_h / oh as f64, roi_w / ow as f64);
    // The grid of samples per bin: the ratio, or adaptive ceil(extent / bins). A region of
    // negative extent (half_pixel does not widen it) has no samples, and its bins are 0.
    let grid = |ratio: usize, extent: f64, bins: usize| {
        if ratio > 0 {
            ratio
        } else {
            // `as` takes NaN and negative extents to 0 samples and saturates a huge one,
            // which the budget below then refuses.
            (extent / bins as f64).ceil() as usize
        }
    };
    let mut grid_h = grid(attrs.sampling_ratio, roi_h, oh);
    let mut grid_w = grid(attrs.sampling_ratio, roi_w, ow);
    if grid_h == 0 || grid_w == 0 {
        // No samples: the other axis's grid, however large (a saturated adaptive one),
        // must not be walked for nothing.
        (grid_h, grid_w) = (0, 0);
    }
    // Every sample of the region is held at once: their bytes are checked against the
    // budget before any is made.
    let per_bin = grid_h.checked_mul(grid_w);
    let total = oh.checked_mul(ow).and_then(|b| per_bin?.checked_mul(b));
    let bytes = total
        .and_then(|t| t.checked_mul(std::mem::size_of::<Sample>()))
        .map(|b| b as u64);
    budget.check_bytes(bytes, || {
        format!(
            "RoiAlign's samples of region {r} ({corners:?}, sampling_ratio {}, {oh}x{ow} bins)",
            attrs.sampling_ratio
        )
    })?;
    let per_bin = per_bin.unwrap_or(0);
    let count = per_bin.max(1);
    let mut bins = Vec::with_capacity(oh * ow);
    for ph in 0..oh {
        for pw in 0..ow {
            ticker.tick(|| format!("RoiAlign's samples of bin ({ph}, {pw}) of region {r}"))?;
            let mut samples = Vec::with_capacity(per_bin);
            for iy in 0..grid_h {
                let y = start_h + ph as f64 * bin_h + (iy as f64 + 0.5) * bin_h / grid_h as f64;
                for ix in 0..grid_w {
                    let x = start_w + pw as f64 * bin_w + (ix as f64 + 0.5) * bin_w / grid_w as f64;
                    samples.push(bilinear(y, x, h, w));
                }
            }
            bins.push((samples, count));
        }
    }
    Ok(bins)
}

/// The four corners of a bilinear sample at (y, x) of an H×W plane: positions within
/// [-1, 0) read the first row or column, positions within (H − 1, H] the last; further out
/// the sample reads nothing (four zero weights).
fn bilinear(y: f64, x: f64, h: usize, w: usize) -> Sample {
    if !(y >= -1.0 && y <= h as f64 && x >= -1.0 && x <= w as f64) {
        return [(0, 0.0); 4];
    }
    // One axis: the low and high index and the high index's weight.
    let axis = |v: f64, len: usize| {
        let v = v.max(0.0);
        // v is within [0, len], so the truncation is exact and in range.
        let low = v as usize;
        if low + 1 >= len {
            (len - 1, len - 1, 0.0)
        } else {
            (low, low + 1, v - low as f64)
        }
    };
    let (y0, y1, ly) = axis(y, h);
    let (x0, x1, lx) = axis(x, w);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    [
        (y0 * w + x0, hy * hx),
        (y0 * w + x1, hy * lx),
        (y1 * w + x0, ly * hx),
        (y1 * w + x1, ly * lx),
    ]
}

/// Runs MaxRoiPool on X (N, C, H, W) and rois (R, 5) of [batch index, x1, y1, x2, y2].
pub(crate) fn max_roi_pool(
    pooled: [usize; 2],
    spatial_scale: f32,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let rois = required(inputs, 1, "rois")?;
    expect_float(x, 0, "X")?;
    expect_same_dtype(rois, 1, "rois", x.dtype())?;
    let ((n, c, h, w), regions) = match (x.dims(), rois.dims()) {
        (&[n, c, h, w], &[r, 5]) => ((n, c, h, w), r),
        _ => {
            return Err(OpError::Shape(format!(
                "MaxRoiPool needs X (N, C, H, W) and rois (R, 5) of [batch index, x1, y1, x2, \
                 y2], got X {} and rois {}",
                x.shape(),
                rois.shape()
            )))
        }
    };
    let [ph_count, pw_count] = pooled;
    let out_shape = vec![regions, c, ph_count, pw_count];
    let out_len = checked_product(&out_shape, "MaxRoiPool output shape")?;
    let plane = h * w;
    let xs = x.to_f64_vec();
    let boxes = rois.to_f64_vec();
    let scale = f64::from(spatial_scale);
    let mut out = vec![0.0f64; out_len];
    for (r, roi) in boxes.chunks_exact(5).enumerate() {
        let bad = |what: &str| {
            OpError::Shape(format!(
                "MaxRoiPool: rois[{r}] = {roi:?} has {what} (X is {})",
                x.shape()
            ))
        };
        // The batch index truncates towards zero, as onnxruntime casts it.
        let batch = roi[0].trunc();
        if !(batch >= 0.0 && batch < n as f64) {
            return Err(bad("a batch index outside X's batch"));
        }
        let b = batch as usize;
        // Corners round half away from zero after scaling; i128 holds every difference of
        // two saturated i64 values.
        let corner = |v: f64| -> Result<i128, OpError> {
            let scaled = (v * scale).round();
            if scaled.is_finite() {
                Ok(i128::from(scaled as i64))
            } else {
                Err(bad("a corner that is not finite after scaling"))
            }
        };
        let (start_w, start_h) = (corner(roi[1])?, corner(roi[2])?);
        let (end_w, end_h) = (corner(roi[3])?, corner(roi[4])?);
        // Malformed regions are 1×1.
        let roi_h = (end_h - start_h + 1).max(1);
        let roi_w = (end_w - start_w + 1).max(1);
        // Bin i spans floor(i·extent/bins) to ceil((i+1)·extent/bins) from the start,
        // clipped to X.
        // Saturating arithmetic: only edges beyond any real extent saturate, and those clip.
        let edges = |i: usize, extent: i128, bins: usize, start: i128, len: usize| {
            let (i, bins) = (i as i128, bins as i128);
            let lo = i.saturating_mul(extent) / bins;
            let hi = (i + 1).saturating_mul(extent).saturating_add(bins - 1) / bins;
            let (lo, hi) = (lo.saturating_add(start), hi.saturating_add(start));
            let clip = |v: i128| v.clamp(0, len as i128) as usize;
            (clip(lo), clip(hi))
        };
        for ch in 0..c {
            let image = &xs[(b * c + ch) * plane..(b * c + ch + 1) * plane];
            for ph in 0..ph_count {
                let (h0, h1) = edges(ph, roi_h, ph_count, start_h, h);
                for pw in 0..pw_count {
                    let (w0, w1) = edges(pw, roi_w, pw_count, start_w, w);
                    let value = (h0..h1)
                        .flat_map(|y| (w0..w1).map(move |x| image[y * w + x]))
                        .reduce(nan_max)
                        // An empty bin (wholly outside X) is 0.
                        .unwrap_or(0.0);
                    out[((r * c + ch) * ph_count + ph) * pw_count + pw] = value;
                }
            }
        }
    }
    Tensor::from_f64(x.dtype(), Shape::new(out_shape), out)
}
