//! Inference for the Sampling family: GridSample, AffineGrid, RoiAlign, MaxRoiPool and
//! DeformConv.

use super::nn::{expect_same_dtype, fixed, window_output, WindowAttrs};
use super::{expect_dtype, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::{AutoPad, DeformConv, Op, RoiAlign};
use crate::shape::{format_sym, Dim, SymShape};

/// The one output of `op`; [`super::infer_op`] checks the node declares one.
pub(super) fn infer(op: &Op, inputs: &[Option<ValueFact>]) -> Result<Vec<OutputFact>, OpError> {
    let fact = match op {
        Op::GridSample { .. } => grid_sample(inputs)?,
        Op::AffineGrid { .. } => affine_grid(inputs)?,
        Op::RoiAlign(attrs) => roi_align(attrs, inputs)?,
        Op::MaxRoiPool { pooled_shape, .. } => max_roi_pool(*pooled_shape, inputs)?,
        Op::DeformConv(attrs) => deform_conv(attrs, inputs)?,
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a sampling op",
                other.name()
            )))
        }
    };
    Ok(vec![fact])
}

/// The one extent two facts must share: fixed ones must agree.
fn agree(a: &Dim, b: &Dim, what: impl FnOnce() -> String) -> Result<Dim, OpError> {
    match (a, b) {
        (Dim::Fixed(x), Dim::Fixed(y)) if x != y => Err(OpError::Shape(what())),
        (Dim::Fixed(_), _) => Ok(a.clone()),
        (_, Dim::Fixed(_)) => Ok(b.clone()),
        _ => Ok(a.clone()),
    }
}

/// GridSample: Y is (N, C, H1…Hr) for X (N, C, D1…Dr) and grid (N, H1…Hr, r).
fn grid_sample(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    let grid = required(inputs, 1, "grid")?;
    expect_dtype(&x, 0, "X", &DType::FLOATS)?;
    expect_dtype(&grid, 1, "grid", &DType::FLOATS)?;
    let bad = || {
        format!(
            "GridSample needs X (N, C, D1…Dr) and grid (N, H1…Hr, r) with r ≥ 1, got X {} and \
             grid {}",
            format_sym(x.shape),
            format_sym(grid.shape)
        )
    };
    let rank = x.shape.len();
    if rank < 3 || grid.shape.len() != rank {
        return Err(OpError::Shape(bad()));
    }
    if let Dim::Fixed(r) = grid.shape[rank - 1] {
        if r != rank - 2 {
            return Err(OpError::Shape(bad()));
        }
    }
    let mut out: SymShape = vec![agree(&x.shape[0], &grid.shape[0], bad)?, x.shape[1].clone()];
    out.extend(grid.shape[1..rank - 1].iter().cloned());
    Ok(OutputFact::new(x.dtype, out))
}

/// AffineGrid: grid (N, H, W, 2) or (N, D, H, W, 3) from theta (N, r, r+1) and size
/// [N, C, spatial…]. The spatial extents come from size's values: known when it is a
/// constant, unknown (of known rank) when it is a runtime input.
fn affine_grid(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let theta = required(inputs, 0, "theta")?;
    let size = required(inputs, 1, "size")?;
    expect_dtype(&theta, 0, "theta", &DType::FLOATS)?;
    expect_dtype(&size, 1, "size", &[DType::I64])?;
    let bad = || {
        format!(
            "AffineGrid needs theta (N, 2, 3) with size [N, C, H, W], or theta (N, 3, 4) with \
             size [N, C, D, H, W], got theta {} and size {}",
            format_sym(theta.shape),
            format_sym(size.shape)
        )
    };
    if theta.shape.len() != 3 || size.shape.len() != 1 {
        return Err(OpError::Shape(bad()));
    }
    // The spatial rank r, from size's length or else theta's extents.
    let r = match (&size.shape[0], &theta.shape[1], &theta.shape[2]) {
        (Dim::Fixed(n), _, _) => n.checked_sub(2).ok_or_else(|| OpError::Shape(bad()))?,
        (_, Dim::Fixed(r), _) => *r,
        (_, _, Dim::Fixed(c)) => c.checked_sub(1).ok_or_else(|| OpError::Shape(bad()))?,
        _ => {
            return Err(OpError::NotConstant {
                index: 1,
                name: "size",
            })
        }
    };
    if !(r == 2 || r == 3) {
        return Err(OpError::Shape(bad()));
    }
    for (d, want) in [(&theta.shape[1], r), (&theta.shape[2], r + 1)] {
        if matches!(d, Dim::Fixed(e) if *e != want) {
            return Err(OpError::Shape(bad()));
        }
    }
    let values = size.value.and_then(|t| t.to_i64_vec());
    let mut out: SymShape = Vec::with_capacity(r + 2);
    match values {
        Some(v) => {
            if v.len() != r + 2 || v.iter().any(|&e| e < 0) {
                return Err(OpError::Shape(format!("{}: size is {v:?}", bad())));
            }
            let n = Dim::Fixed(v[0] as usize);
            out.push(agree(&theta.shape[0], &n, bad)?);
            out.extend(v[2..].iter().map(|&e| Dim::Fixed(e as usize)));
        }
        None => {
            out.push(theta.shape[0].clone());
            out.extend((0..r).map(|_| Dim::Unknown));
        }
    }
    out.push(Dim::Fixed(r));
    Ok(OutputFact::new(theta.dtype, out))
}

/// RoiAlign: Y (R, C, output_height, output_width) for X (N, C, H, W), rois (R, 4) and
/// batch_indices (R).
fn roi_align(attrs: &RoiAlign, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    let rois = required(inputs, 1, "rois")?;
    let indices = required(inputs, 2, "batch_indices")?;
    expect_dtype(&x, 0, "X", &DType::FLOATS)?;
    expect_same_dtype(&rois, 1, "rois", x.dtype)?;
    expect_dtype(&indices, 2, "batch_indices", &[DType::I64])?;
    let bad = || {
        format!(
            "RoiAlign needs X (N, C, H, W), rois (R, 4) and batch_indices (R), got X {}, rois \
             {} and batch_indices {}",
            format_sym(x.shape),
            format_sym(rois.shape),
            format_sym(indices.shape)
        )
    };
    let corners_ok = matches!(
        rois.shape.get(1),
        Some(Dim::Fixed(4) | Dim::Named(_) | Dim::Unknown)
    );
    if x.shape.len() != 4 || rois.shape.len() != 2 || indices.shape.len() != 1 || !corners_ok {
        return Err(OpError::Shape(bad()));
    }
    let regions = agree(&rois.shape[0], &indices.shape[0], bad)?;
    Ok(OutputFact::new(
        x.dtype,
        vec![
            regions,
            x.shape[1].clone(),
            Dim::Fixed(attrs.output_height),
            Dim::Fixed(attrs.output_width),
        ],
    ))
}

/// MaxRoiPool: Y (R, C, pooled height, pooled width) for X (N, C, H, W) and rois (R, 5).
fn max_roi_pool(pooled: [usize; 2], inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    let rois = required(inputs, 1, "rois")?;
    expect_dtype(&x, 0, "X", &DType::FLOATS)?;
    expect_same_dtype(&rois, 1, "rois", x.dtype)?;
    let columns_ok = matches!(
        rois.shape.get(1),
        Some(Dim::Fixed(5) | Dim::Named(_) | Dim::Unknown)
    );
    if x.shape.len() != 4 || rois.shape.len() != 2 || !columns_ok {
        return Err(OpError::Shape(format!(
            "MaxRoiPool needs X (N, C, H, W) and rois (R, 5) of [batch index, x1, y1, x2, y2], \
             got X {} and rois {}",
            format_sym(x.shape),
            format_sym(rois.shape)
        )));
    }
    Ok(OutputFact::new(
        x.dtype,
        vec![
            rois.shape[0].clone(),
            x.shape[1].clone(),
            Dim::Fixed(pooled[0]),
            Dim::Fixed(pooled[1]),
        ],
    ))
}

/// DeformConv: Y (N, M, O1…Or) for X (N, C, D1…Dr), W (M, C/group, k1…kr), offset (N,
/// offset_group·∏k·r, O1…Or), B (M)? and mask (N, offset_group·∏k, O1…Or)?; O is Conv's
/// output extent, and offset's (and mask's) spatial extents must be it.
fn deform_conv(attrs: &DeformConv, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    let w = required(inputs, 1, "W")?;
    let offset = required(inputs, 2, "offset")?;
    let bias = optional(inputs, 3);
    let mask = optional(inputs, 4);
    expect_dtype(&x, 0, "X", &DType::FLOATS)?;
    expect_same_dtype(&w, 1, "W", x.dtype)?;
    expect_same_dtype(&offset, 2, "offset", x.dtype)?;
    if let Some(b) = &bias {
        expect_same_dtype(b, 3, "B", x.dtype)?;
    }
    if let Some(m) = &mask {
        expect_same_dtype(m, 4, "mask", x.dtype)?;
    }
    let rank = x.shape.len();
    let bad = |detail: &str| {
        format!(
            "DeformConv needs X (N, C, D1…Dr), W (M, C/group, k1…kr), offset (N, \
             offset_group·∏k·r, O1…Or), B (M) and mask (N, offset_group·∏k, O1…Or), got X {}, \
             W {}, offset {}{}{}: {detail}",
            format_sym(x.shape),
            format_sym(w.shape),
            format_sym(offset.shape),
            bias.map_or(String::new(), |b| format!(", B {}", format_sym(b.shape))),
            mask.map_or(String::new(), |m| format!(", mask {}", format_sym(m.shape))),
        )
    };
    if rank < 3 || w.shape.len() != rank || offset.shape.len() != rank {
        return Err(OpError::Shape(bad(
            "X, W and offset must have one rank, 3 or more",
        )));
    }
    if mask.is_some_and(|m| m.shape.len() != rank) {
        return Err(OpError::Shape(bad("mask must have X's rank")));
    }
    if bias.is_some_and(|b| b.shape.len() != 1) {
        return Err(OpError::Shape(bad("B must be 1-D")));
    }
    for (name, value) in [("group", attrs.group), ("offset_group", attrs.offset_group)] {
        if value == 0 {
            return Err(OpError::Attribute {
                name,
                detail: "is 0; it must be at least 1".into(),
            });
        }
    }
    let r = rank - 2;
    let w_kernel: Vec<Option<usize>> = w.shape[2..].iter().map(fixed).collect();
    let kernel: Vec<Option<usize>> = if attrs.kernel_shape.is_empty() {
        w_kernel
    } else {
        let consistent = attrs.kernel_shape.len() == r
            && attrs
                .kernel_shape
                .iter()
                .zip(&w_kernel)
                .all(|(&k, w)| w.map_or(true, |w| w == k));
        if !consistent {
            return Err(OpError::Attribute {
                name: "kernel_shape",
                detail: format!(
                    "{:?} does not match the spatial extents of W {}",
                    attrs.kernel_shape,
                    format_sym(w.shape)
                ),
            });
        }
        attrs.kernel_shape.iter().map(|&k| Some(k)).collect()
    };
    if let (Dim::Fixed(c), Dim::Fixed(wc)) = (&x.shape[1], &w.shape[1]) {
        if wc.checked_mul(attrs.group) != Some(*c) || c % attrs.offset_group != 0 {
            return Err(OpError::Shape(bad(&format!(
                "X's {c} channels must be W[1]·group = {wc}·{} and divisible by offset_group {}",
                attrs.group, attrs.offset_group
            ))));
        }
    }
    if let Dim::Fixed(m) = &w.shape[0] {
        if m % attrs.group != 0 {
            return Err(OpError::Shape(bad(&format!(
                "group {} does not divide M = {m}",
                attrs.group
            ))));
        }
        if bias.is_some_and(|b| matches!(b.shape[0], Dim::Fixed(len) if len != *m)) {
            return Err(OpError::Shape(bad("B needs one value per output channel")));
        }
    }
    // Offset and mask channels: offset_group·∏k·r and offset_group·∏k, where k is known.
    let taps = kernel
        .iter()
        .try_fold(attrs.offset_group, |a, k| k.and_then(|k| a.checked_mul(k)));
    if let Some(taps) = taps {
        let want = taps
            .checked_mul(r)
            .ok_or_else(|| OpError::Shape(bad("the kernel is too large")))?;
        if matches!(offset.shape[1], Dim::Fixed(c) if c != want) {
            return Err(OpError::Shape(bad(&format!(
                "offset needs {want} channels"
            ))));
        }
        if mask.is_some_and(|m| matches!(m.shape[1], Dim::Fixed(c) if c != taps)) {
            return Err(OpError::Shape(bad(&format!("mask needs {taps} channels"))));
        }
    }
    let spatial = window_output(
        &x.shape[2..],
        &kernel,
        &WindowAttrs {
            auto_pad: AutoPad::NotSet,
            strides: &attrs.strides,
            dilations: &attrs.dilations,
            pads: &attrs.pads,
            ceil_mode: false,
        },
    )?;
    let mut batch = agree(&x.shape[0], &offset.shape[0], || bad("batch sizes differ"))?;
    let mut out = Vec::with_capacity(rank);
    for (i, conv) in spatial.iter().enumerate() {
        let mut dim = agree(conv, &offset.shape[2 + i], || {
            bad("offset's spatial extents must be Conv's output extents")
        })?;
        if let Some(m) = &mask {
            dim = agree(&dim, &m.shape[2 + i], || {
                bad("mask's spatial extents must be offset's")
            })?;
        }
        out.push(dim);
    }
    if let Some(m) = &mask {
        batch = agree(&batch, &m.shape[0], || bad("batch sizes differ"))?;
    }
    let mut shape = vec![batch, w.shape[0].clone()];
    shape.extend(out);
    Ok(OutputFact::new(x.dtype, shape))
}
