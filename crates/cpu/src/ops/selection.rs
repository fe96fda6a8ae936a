//! The data-dependent selections of the indexing family: NonMaxSuppression and Unique,
//! whose output extents are known only once the values are.
//!
//! NonMaxSuppression follows onnxruntime where the ONNX spec leaves room: candidates are
//! taken in descending score order with ties going to the lower box index, a box is
//! suppressed when its IoU with a selected box is strictly greater than the threshold, a
//! score must be strictly greater than score_threshold, and the IoU is computed in f32
//! from the corners (or centre ± half extents) exactly as onnxruntime does, so threshold
//! decisions agree bit for bit. A NaN score is never greater than a score_threshold, so
//! with one it is dropped (as in onnxruntime); without one, NaN-score candidates come after
//! every number, in index order. onnxruntime 1.23 has no order there: its priority queue
//! compares with `<`, which NaN breaks, and a NaN among the scores can put a lower score
//! before a higher one ([0.9, NaN, 0.5, NaN, 0.7] selects 4, 0, 2, 1, 3), so the spec's
//! descending order of the real scores is what is kept. Unique compares floats by value (-0 equals 0; NaNs are
//! equal to each other and sort after every number) and integers exactly; Y's elements are
//! copied from X unchanged.

use super::{optional, required};
use concord_core::{DType, OpError, Shape, Tensor, TensorData};
use std::cmp::Ordering;

/// Whether boxes `a` and `c` (x_min, x_max, y_min, y_max) overlap with an IoU strictly
/// above `threshold`, in f32, step for step as onnxruntime's NMS computes it, early returns
/// included. Those returns decide nothing the last comparison would not: `threshold` is at
/// least 0 (checked), and where one fires the IoU is 0, negative or NaN (a one-axis gap gives
/// an intersection of at most 0; an area or intersection of 0 is an underflow, with an
/// intersection at most the smaller area; the union is then above 0). So each `||` with `&&`
/// (cargo-mutants) is equivalent, excluded in .cargo/mutants.toml. Only the first return's
/// two-axis case matters, a negative times a negative, and `&&` keeps it.
fn iou_above(a: [f32; 4], c: [f32; 4], threshold: f32) -> bool {
    let (ix_min, ix_max) = (a[0].max(c[0]), a[1].min(c[1]));
    let (iy_min, iy_max) = (a[2].max(c[2]), a[3].min(c[3]));
    if ix_max <= ix_min || iy_max <= iy_min {
        return false;
    }
    let intersection = (ix_max - ix_min) * (iy_max - iy_min);
    let area_a = (a[1] - a[0]) * (a[3] - a[2]);
    let area_c = (c[1] - c[0]) * (c[3] - c[2]);
    let union = area_a + area_c - intersection;
    if intersection <= 0.0 || area_a <= 0.0 || area_c <= 0.0 || union <= 0.0 {
        return false;
    }
    intersection / union > threshold
}

/// NonMaxSuppression's selected_indices: (batch, class, box) rows, batch-major, then class,
/// then selection order.
pub(crate) fn non_max_suppression(
    center_point_box: bool,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    const OP: &str = "NonMaxSuppression";
    let boxes = required(inputs, 0, "boxes")?;
    let scores = required(inputs, 1, "scores")?;
    let (Some(box_data), Some(score_data)) = (boxes.as_f32(), scores.as_f32()) else {
        return Err(OpError::DType {
            index: usize::from(boxes.dtype() == DType::F32),
            name: if boxes.dtype() == DType::F32 {
                "scores"
            } else {
                "boxes"
            },
            expected: "f32".into(),
            actual: if boxes.dtype() == DType::F32 {
                scores.dtype()
            } else {
                boxes.dtype()
            },
        });
    };
    let (b, s) = (boxes.dims(), scores.dims());
    if b.len() != 3 || s.len() != 3 || b[2] != 4 || b[0] != s[0] || b[1] != s[2] {
        return Err(OpError::Shape(format!(
            "{OP}: boxes {} must be (batches, spatial, 4) and scores {} (batches, classes, \
             spatial) with the same batches and spatial",
            boxes.shape(),
            scores.shape()
        )));
    }
    let (batches, spatial, classes) = (b[0], b[1], s[1]);
    let scalar_f32 = |index: usize, name: &'static str| -> Result<Option<f32>, OpError> {
        match optional(inputs, index) {
            None => Ok(None),
            Some(t) => match t.as_f32() {
                Some([v]) => Ok(Some(*v)),
                _ => Err(OpError::Shape(format!(
                    "{OP}: {name} must be one f32 value, got {} {}",
                    t.dtype(),
                    t.shape()
                ))),
            },
        }
    };
    let max_per_class = match optional(inputs, 2) {
        None => 0,
        Some(t) => match t.as_i64() {
            // A negative limit selects nothing, as 0 does.
            Some([v]) => usize::try_from(*v).unwrap_or(0),
            _ => {
                return Err(OpError::Shape(format!(
                    "{OP}: max_output_boxes_per_class must be one i64 value, got {} {}",
                    t.dtype(),
                    t.shape()
                )))
            }
        },
    };
    let iou_threshold = scalar_f32(3, "iou_threshold")?.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&iou_threshold) {
        // onnxruntime refuses a threshold outside [0, 1].
        return Err(OpError::Shape(format!(
            "{OP}: iou_threshold {iou_threshold} must lie in [0, 1]"
        )));
    }
    let score_threshold = scalar_f32(4, "score_threshold")?;
    let corners = |index: usize| -> [f32; 4] {
        let v = &box_data[index * 4..index * 4 + 4];
        if center_point_box {
            let (half_w, half_h) = (v[2] / 2.0, v[3] / 2.0);
            [v[0] - half_w, v[0] + half_w, v[1] - half_h, v[1] + half_h]
        } else {
            // [y1, x1, y2, x2], any diagonal pair: as x_min, x_max, y_min, y_max.
            [
                v[1].min(v[3]),
                v[1].max(v[3]),
                v[0].min(v[2]),
                v[0].max(v[2]),
            ]
        }
    };
    let mut rows: Vec<i64> = Vec::new();
    if max_per_class > 0 {
        for batch in 0..batches {
            for class in 0..classes {
                let base = (batch * classes + class) * spatial;
                let class_scores = &score_data[base..base + spatial];
                let mut candidates: Vec<usize> = (0..spatial)
                    .filter(|&i| score_threshold.map_or(true, |t| class_scores[i] > t))
                    .collect();
                // Highest score first, ties to the lower index (a stable sort keeps them),
                // NaN after every number: a total order, which the sort requires.
                candidates.sort_by(|&i, &j| descending_nan_last(class_scores[i], class_scores[j]));
                let mut selected: Vec<(usize, [f32; 4])> = Vec::new();
                for i in candidates {
                    let corners_i = corners(batch * spatial + i);
                    if selected
                        .iter()
                        .all(|&(_, c)| !iou_above(corners_i, c, iou_threshold))
                    {
                        selected.push((i, corners_i));
                        if selected.len() == max_per_class {
                            break;
                        }
                    }
                }
                for (i, _) in selected {
                    rows.extend([batch as i64, class as i64, i as i64]);
                }
            }
        }
    }
    let count = rows.len() / 3;
    Tensor::from_parts(Shape::new([count, 3]), TensorData::I64(rows))
}

/// NonMaxSuppression's candidate order of two scores: the higher first, NaN after every
/// number (-∞ included), equal scores (and -0 and 0, and two NaNs) equal.
fn descending_nan_last(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        // Neither is NaN, so `partial_cmp` always answers; Equal is never taken.
        (false, false) => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
        (a_nan, b_nan) => a_nan.cmp(&b_nan),
    }
}

/// The values of one tensor, compared as Unique compares them.
enum Keys {
    Float(Vec<f64>),
    Exact(Vec<i128>),
}

impl Keys {
    fn cmp(&self, i: usize, j: usize) -> Ordering {
        match self {
            Keys::Exact(v) => v[i].cmp(&v[j]),
            Keys::Float(v) => {
                let (a, b) = (v[i], v[j]);
                a.partial_cmp(&b)
                    .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
            }
        }
    }
}

/// Unique: Y, indices, inverse_indices, counts (the first `num_outputs` of them).
pub(crate) fn unique(
    axis: Option<i64>,
    sorted: bool,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let x = required(inputs, 0, "X")?;
    let dims = x.dims();
    // Slices along `axis` (every element, one slice each, when there is none): `outer`
    // blocks of `n` slices of `inner` elements.
    let (outer, n, inner, axis) = match axis {
        None => (1, x.len(), 1, None),
        Some(a) => {
            let a = concord_core::shape::normalize_axis(a, dims.len())?;
            // An empty X compares no elements: its slices are all equal and empty.
            let (outer, inner) = super::walk_extents(dims, a);
            (outer, dims[a], inner, Some(a))
        }
    };
    let keys = match x.to_i128_vec() {
        Some(v) => Keys::Exact(v),
        None => Keys::Float(x.to_f64_vec()),
    };
    let element = |slice: usize, k: usize| (k / inner) * n * inner + slice * inner + k % inner;
    let compare = |s: usize, t: usize| -> Ordering {
        (0..outer * inner)
            .map(|k| keys.cmp(element(s, k), element(t, k)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    // Slices in ascending order, equal ones by first occurrence (the sort is stable).
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&s, &t| compare(s, t));
    // Groups of equal slices: (first occurrence, count), in ascending order.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut group_of = vec![0usize; n];
    for (pos, &s) in order.iter().enumerate() {
        let new_group = pos == 0 || compare(order[pos - 1], s).is_ne();
        if new_group {
            groups.push((s, 0));
        }
        let g = groups.len() - 1;
        groups[g].1 += 1;
        group_of[s] = g;
    }
    // Y's order: ascending, or by first occurrence.
    let mut rank: Vec<usize> = (0..groups.len()).collect();
    if !sorted {
        rank.sort_by_key(|&g| groups[g].0);
    }
    let mut place = vec![0usize; groups.len()];
    for (p, &g) in rank.iter().enumerate() {
        place[g] = p;
    }
    let unique = rank.len();
    let mut sources = Vec::with_capacity(outer * unique * inner);
    for o in 0..outer {
        for &g in &rank {
            let s = groups[g].0;
            sources.extend((0..inner).map(|i| o * n * inner + s * inner + i));
        }
    }
    let y_dims = match axis {
        None => vec![unique],
        Some(a) => {
            let mut d = dims.to_vec();
            d[a] = unique;
            d
        }
    };
    let y = Tensor::from_parts(Shape::new(y_dims), x.data().gather(&sources)?)?;
    let list = |v: Vec<i64>| Tensor::from_parts(Shape::new([v.len()]), TensorData::I64(v));
    let indices = list(rank.iter().map(|&g| groups[g].0 as i64).collect())?;
    let inverse = list(group_of.iter().map(|&g| place[g] as i64).collect())?;
    let counts = list(rank.iter().map(|&g| groups[g].1 as i64).collect())?;
    Ok([y, indices, inverse, counts]
        .into_iter()
        .take(num_outputs)
        .collect())
}
