//! Shape and dtype inference for the nn family: Conv, ConvTranspose, Col2Im, Gemm, MatMul,
//! MaxPool, AveragePool, GlobalAveragePool and Resize.
//!
//! The checks are the ones the reference kernels (concord-cpu `ops/conv.rs`, `gemm.rs`,
//! `pool.rs`, `resize.rs`) make, applied to whatever dims are known; the window arithmetic
//! mirrors concord-cpu's `ops/spatial.rs`, and the cpu crate's tests compare the two. A dim
//! that cannot be computed is [`Dim::Unknown`], except where the output provably equals the
//! input extent (a stride-1 "same" window, a scale of exactly 1), which keeps its name.

use super::movement::MAX_OPERAND_RANK;
use super::{expect_dtype, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::{AutoPad, Conv, ConvTranspose, Gemm, Op, Pool};
use crate::shape::{broadcast_sym, format_sym, Dim, SymShape};
use crate::tensor::Tensor;

const FLOAT: [DType; 4] = DType::FLOATS;
const MAX_POOL_TYPES: [DType; 6] = [
    DType::F64,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I8,
    DType::U8,
];

pub(super) fn infer(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    if let Op::CausalConvWithState { .. } = op {
        return super::attention::causal_conv_with_state(inputs, num_outputs);
    }
    if let Op::MaxPool(attrs) = op {
        // Y, and optionally the Indices (i64, Y's shape).
        if num_outputs == 1 || num_outputs == 2 {
            let y = pool("MaxPool", attrs, inputs)?;
            let indices = OutputFact::new(DType::I64, y.shape.clone());
            return Ok([y, indices].into_iter().take(num_outputs).collect());
        }
    }
    if num_outputs != 1 {
        return Err(OpError::Unsupported(format!(
            "{} has {} output{}, the node declares {num_outputs}",
            op.name(),
            if matches!(op, Op::MaxPool(_)) {
                "one or two"
            } else {
                "one"
            },
            if matches!(op, Op::MaxPool(_)) {
                "s"
            } else {
                ""
            },
        )));
    }
    let fact = match op {
        Op::Conv(attrs) => conv(attrs, inputs)?,
        Op::ConvTranspose(attrs) => conv_transpose(attrs, inputs)?,
        Op::MaxUnpool {
            kernel_shape,
            pads,
            strides,
        } => max_unpool(kernel_shape, pads, strides, inputs)?,
        Op::Col2Im {
            dilations,
            pads,
            strides,
        } => col2im(dilations, pads, strides, inputs)?,
        Op::Gemm(attrs) => gemm(attrs, inputs)?,
        Op::MatMul => matmul(inputs)?,
        Op::MaxPool(attrs) => pool("MaxPool", attrs, inputs)?,
        Op::AveragePool(attrs) => pool("AveragePool", attrs, inputs)?,
        Op::GlobalAveragePool | Op::GlobalMaxPool | Op::GlobalLpPool { .. } => {
            global_average_pool(inputs)?
        }
        Op::LpPool(attrs, _) => pool("LpPool", attrs, inputs)?,
        Op::Resize(attrs) => resize(attrs, inputs)?,
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not in the nn family",
                other.name()
            )))
        }
    };
    Ok(vec![fact])
}

pub(super) fn conv(attrs: &Conv, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    let w = required(inputs, 1, "W")?;
    let b = optional(inputs, 2);
    expect_dtype(&x, 0, "X", &FLOAT)?;
    expect_same_dtype(&w, 1, "W", x.dtype)?;
    if let Some(b) = &b {
        expect_same_dtype(b, 2, "B", x.dtype)?;
    }
    let (xs, ws) = (x.shape, w.shape);
    if xs.len() < 3 {
        return Err(OpError::Shape(format!(
            "Conv needs X of rank 3 or more (N, C, spatial…), got X {}",
            format_sym(xs)
        )));
    }
    if ws.len() != xs.len() {
        return Err(OpError::Shape(format!(
            "Conv: W {} has rank {} but X {} has rank {}; W must be (M, C/group, kernel…) \
             with one kernel extent per spatial axis of X",
            format_sym(ws),
            ws.len(),
            format_sym(xs),
            xs.len()
        )));
    }
    let group = attrs.group;
    if group == 0 {
        return Err(OpError::Attribute {
            name: "group",
            detail: "is 0; it must be at least 1".into(),
        });
    }
    if let (Dim::Fixed(c), Dim::Fixed(wc)) = (&xs[1], &ws[1]) {
        if wc.checked_mul(group) != Some(*c) {
            return Err(OpError::Shape(format!(
                "Conv: X {} has {c} channels but W {} with group {group} expects \
                 W[1]·group = {wc}·{group} channels",
                format_sym(xs),
                format_sym(ws)
            )));
        }
    }
    if let Dim::Fixed(m) = &ws[0] {
        if m % group != 0 {
            return Err(OpError::Shape(format!(
                "Conv: W {} has {m} output channels, which group {group} does not divide",
                format_sym(ws)
            )));
        }
    }
    if let Some(b) = &b {
        let matches = match (b.shape, &ws[0]) {
            ([Dim::Fixed(len)], Dim::Fixed(m)) => len == m,
            ([_], _) => true,
            _ => false,
        };
        if !matches {
            return Err(OpError::Shape(format!(
                "Conv: B {} must be 1-D with one value per output channel of W {}",
                format_sym(b.shape),
                format_sym(ws)
            )));
        }
    }
    let w_kernel: Vec<Option<usize>> = ws[2..].iter().map(fixed).collect();
    let kernel = if attrs.kernel_shape.is_empty() {
        w_kernel
    } else {
        let consistent = attrs.kernel_shape.len() == w_kernel.len()
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
                    format_sym(ws)
                ),
            });
        }
        attrs.kernel_shape.iter().map(|&k| Some(k)).collect()
    };
    let spatial = window_output(
        &xs[2..],
        &kernel,
        &WindowAttrs {
            auto_pad: attrs.auto_pad,
            strides: &attrs.strides,
            dilations: &attrs.dilations,
            pads: &attrs.pads,
            ceil_mode: false,
        },
    )?;
    let mut shape = vec![xs[0].clone(), ws[0].clone()];
    shape.extend(spatial);
    Ok(OutputFact::new(x.dtype, shape))
}

/// ConvTranspose: X (N, C, D…), W (C, M/group, k…), B (M)? → (N, M, D'…). The spatial
/// extents come from [`ConvTranspose::plan`], the reference's own rule, where X's extents
/// and the kernel are known (or `output_shape` gives them).
fn conv_transpose(
    attrs: &ConvTranspose,
    inputs: &[Option<ValueFact>],
) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    let w = required(inputs, 1, "W")?;
    let b = optional(inputs, 2);
    expect_dtype(&x, 0, "X", &FLOAT)?;
    expect_same_dtype(&w, 1, "W", x.dtype)?;
    if let Some(b) = &b {
        expect_same_dtype(b, 2, "B", x.dtype)?;
    }
    let (xs, ws) = (x.shape, w.shape);
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(OpError::Shape(format!(
            "ConvTranspose needs X (N, C, spatial…) of rank 3 or more and W (C, M/group, \
             kernel…) of the same rank, got X {} and W {}",
            format_sym(xs),
            format_sym(ws)
        )));
    }
    let group = attrs.conv.group;
    if group == 0 {
        return Err(OpError::Attribute {
            name: "group",
            detail: "is 0; it must be at least 1".into(),
        });
    }
    if let (Dim::Fixed(c), Dim::Fixed(wc)) = (&xs[1], &ws[0]) {
        if c != wc || c % group != 0 {
            return Err(OpError::Shape(format!(
                "ConvTranspose: X {} has {c} channels, W {} has {wc} input channels and group \
                 is {group}; they must be equal and divisible by group",
                format_sym(xs),
                format_sym(ws)
            )));
        }
    }
    let m = match &ws[1] {
        Dim::Fixed(per_group) => Dim::Fixed(per_group.checked_mul(group).ok_or_else(|| {
            OpError::Shape(format!(
                "ConvTranspose: W {} times group {group} overflows",
                format_sym(ws)
            ))
        })?),
        other if group == 1 => other.clone(),
        _ => Dim::Unknown,
    };
    if let Some(b) = &b {
        let matches = match (b.shape, &m) {
            ([Dim::Fixed(len)], Dim::Fixed(m)) => len == m,
            ([_], _) => true,
            _ => false,
        };
        if !matches {
            return Err(OpError::Shape(format!(
                "ConvTranspose: B {} must be 1-D with one value per output channel (W[1]·group \
                 for W {} and group {group})",
                format_sym(b.shape),
                format_sym(ws)
            )));
        }
    }
    let w_kernel: Option<Vec<usize>> = ws[2..].iter().map(fixed).collect();
    let kernel = match (w_kernel, attrs.conv.kernel_shape.is_empty()) {
        (Some(k), false) if k != attrs.conv.kernel_shape => {
            return Err(OpError::Attribute {
                name: "kernel_shape",
                detail: format!(
                    "{:?} does not match the spatial extents of W {}",
                    attrs.conv.kernel_shape,
                    format_sym(ws)
                ),
            })
        }
        (Some(k), _) => Some(k),
        (None, false) => Some(attrs.conv.kernel_shape.clone()),
        (None, true) => None,
    };
    let input: Option<Vec<usize>> = xs[2..].iter().map(fixed).collect();
    let spatial: Vec<Dim> = match (input, kernel) {
        (Some(input), Some(kernel)) => attrs
            .plan(&input, &kernel)?
            .iter()
            .map(|a| Dim::Fixed(a.output))
            .collect(),
        _ => {
            let n = xs.len() - 2;
            let given = attrs.output_shape.len();
            if given == n || given == n + 2 {
                attrs.output_shape[given - n..]
                    .iter()
                    .map(|&d| Dim::Fixed(d))
                    .collect()
            } else {
                vec![Dim::Unknown; n]
            }
        }
    };
    let mut shape = vec![xs[0].clone(), m];
    shape.extend(spatial);
    Ok(OutputFact::new(x.dtype, shape))
}

/// MaxUnpool: Y has `output_shape`'s value where it is known, else the window's default
/// extents around X's batch and channel axes.
fn max_unpool(
    kernel_shape: &[usize],
    pads: &[usize],
    strides: &[usize],
    inputs: &[Option<ValueFact>],
) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    let i = required(inputs, 1, "I")?;
    expect_dtype(&x, 0, "X", &FLOAT)?;
    expect_dtype(&i, 1, "I", &[DType::I64])?;
    let xs = x.shape;
    if xs.len() < 3 || kernel_shape.len() != xs.len() - 2 {
        return Err(OpError::Shape(format!(
            "MaxUnpool needs X (N, C, spatial…) of rank 3 or more with one kernel_shape value \
             per spatial axis, got X {} and kernel_shape {kernel_shape:?}",
            format_sym(xs)
        )));
    }
    if let Some(shape) = optional(inputs, 2) {
        expect_dtype(&shape, 2, "output_shape", &[DType::I64])?;
        if let Some(dims) = shape.value.and_then(Tensor::to_i64_vec) {
            if dims.len() != xs.len() || dims.iter().any(|&d| d < 0) {
                return Err(OpError::Shape(format!(
                    "MaxUnpool: output_shape {dims:?} must hold {} non-negative extents, one \
                     per axis of X {}",
                    xs.len(),
                    format_sym(xs)
                )));
            }
            return Ok(OutputFact::new(
                x.dtype,
                dims.iter().map(|&d| Dim::Fixed(d as usize)).collect(),
            ));
        }
        return Ok(OutputFact::new(x.dtype, vec![Dim::Unknown; xs.len()]));
    }
    let mut shape = xs[..2].to_vec();
    match xs[2..].iter().map(fixed).collect::<Option<Vec<usize>>>() {
        Some(input) => shape.extend(
            crate::op::max_unpool_extents(&input, kernel_shape, pads, strides)?
                .into_iter()
                .map(Dim::Fixed),
        ),
        None => shape.extend(std::iter::repeat(Dim::Unknown).take(xs.len() - 2)),
    }
    Ok(OutputFact::new(x.dtype, shape))
}

/// Col2Im: input (N, C·∏block, L), image_shape and block_shape (1-D i64 of r extents) →
/// (N, C, image_shape…). The extents come from the two shape operands' values: known when
/// they are constants, unknown (of the rank image_shape's length gives) otherwise; where
/// everything is known, [`crate::op::col2im_plan`] (the reference's own rule) checks that
/// L is the number of sliding blocks.
fn col2im(
    dilations: &[usize],
    pads: &[usize],
    strides: &[usize],
    inputs: &[Option<ValueFact>],
) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "input")?;
    let image = required(inputs, 1, "image_shape")?;
    let block = required(inputs, 2, "block_shape")?;
    expect_dtype(&x, 0, "input", &DType::ALL)?;
    expect_dtype(&image, 1, "image_shape", &[DType::I64])?;
    expect_dtype(&block, 2, "block_shape", &[DType::I64])?;
    let xs = x.shape;
    if xs.len() != 3 || image.shape.len() != 1 || block.shape.len() != 1 {
        return Err(OpError::Shape(format!(
            "Col2Im needs input (N, C·∏block_shape, L) and 1-D image_shape and block_shape, got \
             input {}, image_shape {} and block_shape {}",
            format_sym(xs),
            format_sym(image.shape),
            format_sym(block.shape)
        )));
    }
    let extents = |fact: &ValueFact, what: &str| -> Result<Option<Vec<usize>>, OpError> {
        let Some(values) = fact.value.and_then(Tensor::to_i64_vec) else {
            return Ok(None);
        };
        values
            .iter()
            .map(|&v| usize::try_from(v).ok().filter(|&v| v >= 1))
            .collect::<Option<Vec<usize>>>()
            .map(Some)
            .ok_or_else(|| {
                OpError::Shape(format!(
                    "Col2Im: {what} {values:?} must hold positive extents"
                ))
            })
    };
    let image_values = extents(&image, "image_shape")?;
    let block_values = extents(&block, "block_shape")?;
    let rank = match (&image_values, &image.shape[0], &block.shape[0]) {
        (Some(v), _, _) => v.len(),
        // Only an operand's length is known: it sizes the output's unknown dims, so it is
        // capped like every rank an operand gives.
        (None, Dim::Fixed(r), _) | (None, _, Dim::Fixed(r)) if *r > MAX_OPERAND_RANK => {
            return Err(OpError::Shape(format!(
                "Col2Im: image_shape {} and block_shape {} give a rank of {r}, over the \
                 {MAX_OPERAND_RANK} a rank may have",
                format_sym(image.shape),
                format_sym(block.shape)
            )))
        }
        (None, Dim::Fixed(r), _) | (None, _, Dim::Fixed(r)) => *r,
        _ => {
            return Err(OpError::NotConstant {
                index: 1,
                name: "image_shape",
            })
        }
    };
    let channels = match (&block_values, &xs[1]) {
        (Some(block), Dim::Fixed(rows)) => {
            let size = block.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
            match size {
                Some(size) if rows % size == 0 => Dim::Fixed(rows / size),
                _ => {
                    return Err(OpError::Shape(format!(
                        "Col2Im: input {} has {rows} rows, not a multiple of the block size \
                         ∏{block:?}",
                        format_sym(xs)
                    )))
                }
            }
        }
        _ => Dim::Unknown,
    };
    if let (Some(image), Some(block)) = (&image_values, &block_values) {
        let axes = crate::op::col2im_plan(image, block, dilations, pads, strides)?;
        let blocks = axes
            .iter()
            .try_fold(1usize, |a, axis| a.checked_mul(axis.input));
        if let (Dim::Fixed(len), Some(blocks)) = (&xs[2], blocks) {
            if *len != blocks {
                return Err(OpError::Shape(format!(
                    "Col2Im: input {} has {len} columns, but image_shape {image:?} and \
                     block_shape {block:?} make {blocks} sliding blocks",
                    format_sym(xs)
                )));
            }
        }
    }
    let mut shape = vec![xs[0].clone(), channels];
    match image_values {
        Some(v) => shape.extend(v.into_iter().map(Dim::Fixed)),
        None => shape.extend(std::iter::repeat(Dim::Unknown).take(rank)),
    }
    Ok(OutputFact::new(x.dtype, shape))
}

fn gemm(attrs: &Gemm, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let a = required(inputs, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    let c = optional(inputs, 2);
    expect_dtype(&a, 0, "A", &FLOAT)?;
    expect_same_dtype(&b, 1, "B", a.dtype)?;
    if let Some(c) = &c {
        expect_same_dtype(c, 2, "C", a.dtype)?;
    }
    let (as_, bs) = (a.shape, b.shape);
    if as_.len() != 2 || bs.len() != 2 {
        return Err(OpError::Shape(format!(
            "Gemm needs 2-D A and B, got A {} and B {}",
            format_sym(as_),
            format_sym(bs)
        )));
    }
    let (m, ka) = if attrs.trans_a {
        (&as_[1], &as_[0])
    } else {
        (&as_[0], &as_[1])
    };
    let (kb, n) = if attrs.trans_b {
        (&bs[1], &bs[0])
    } else {
        (&bs[0], &bs[1])
    };
    if let (Dim::Fixed(ka), Dim::Fixed(kb)) = (ka, kb) {
        if ka != kb {
            return Err(OpError::Shape(format!(
                "Gemm: op(A) has {ka} columns (A {}, transA={}) but op(B) has {kb} rows \
                 (B {}, transB={}); the inner dimensions must match",
                format_sym(as_),
                attrs.trans_a,
                format_sym(bs),
                attrs.trans_b
            )));
        }
    }
    if let Some(c) = &c {
        let fits = |d: &Dim, want: &Dim| match (d, want) {
            (Dim::Fixed(1), _) => true,
            (Dim::Fixed(d), Dim::Fixed(w)) => d == w,
            _ => true,
        };
        let ok = match c.shape {
            [] => true,
            [cn] => fits(cn, n),
            [cm, cn] => fits(cm, m) && fits(cn, n),
            _ => false,
        };
        if !ok {
            return Err(OpError::Shape(format!(
                "Gemm: C {} does not broadcast to the output ({m}, {n})",
                format_sym(c.shape)
            )));
        }
    }
    Ok(OutputFact::new(a.dtype, vec![m.clone(), n.clone()]))
}

pub(super) fn matmul(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let a = required(inputs, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    expect_dtype(&a, 0, "A", &FLOAT)?;
    expect_same_dtype(&b, 1, "B", a.dtype)?;
    let rank_error = || {
        OpError::Shape(format!(
            "MatMul needs operands of rank 1 or more, got A {} and B {}",
            format_sym(a.shape),
            format_sym(b.shape)
        ))
    };
    // A 1-D A is a row vector and a 1-D B a column vector; the added axes are dropped.
    let (a_batch, m, ka) = match a.shape {
        [k] => (&[][..], None, k),
        [batch @ .., m, k] => (batch, Some(m), k),
        [] => return Err(rank_error()),
    };
    let (b_batch, kb, n) = match b.shape {
        [k] => (&[][..], k, None),
        [batch @ .., k, n] => (batch, k, Some(n)),
        [] => return Err(rank_error()),
    };
    if let (Dim::Fixed(ka), Dim::Fixed(kb)) = (ka, kb) {
        if ka != kb {
            return Err(OpError::Shape(format!(
                "MatMul: A {} has {ka} columns but B {} has {kb} rows",
                format_sym(a.shape),
                format_sym(b.shape)
            )));
        }
    }
    let mut shape = broadcast_sym(&[a_batch, b_batch]).map_err(|e| {
        OpError::Shape(format!(
            "MatMul: batch axes of A {} and B {} do not broadcast: {e}",
            format_sym(a.shape),
            format_sym(b.shape)
        ))
    })?;
    shape.extend(m.cloned());
    shape.extend(n.cloned());
    Ok(OutputFact::new(a.dtype, shape))
}

fn pool(op: &str, attrs: &Pool, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    if op == "MaxPool" {
        // MaxPool takes int8 and uint8 too (opset 12).
        expect_dtype(&x, 0, "X", &MAX_POOL_TYPES)?;
    } else {
        expect_dtype(&x, 0, "X", &FLOAT)?;
    }
    let xs = x.shape;
    if xs.len() < 3 {
        return Err(OpError::Shape(format!(
            "{op} needs X of rank 3 or more (N, C, spatial…), got X {}",
            format_sym(xs)
        )));
    }
    if attrs.kernel_shape.len() != xs.len() - 2 {
        return Err(OpError::Attribute {
            name: "kernel_shape",
            detail: format!(
                "{:?} has {} values but X {} has {} spatial axes",
                attrs.kernel_shape,
                attrs.kernel_shape.len(),
                format_sym(xs),
                xs.len() - 2
            ),
        });
    }
    let kernel: Vec<Option<usize>> = attrs.kernel_shape.iter().map(|&k| Some(k)).collect();
    let spatial = window_output(
        &xs[2..],
        &kernel,
        &WindowAttrs {
            auto_pad: attrs.auto_pad,
            strides: &attrs.strides,
            dilations: &attrs.dilations,
            pads: &attrs.pads,
            ceil_mode: attrs.ceil_mode,
        },
    )?;
    let mut shape = xs[..2].to_vec();
    shape.extend(spatial);
    Ok(OutputFact::new(x.dtype, shape))
}

fn global_average_pool(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_dtype(&x, 0, "X", &FLOAT)?;
    if x.shape.len() < 2 {
        return Err(OpError::Shape(format!(
            "GlobalAveragePool needs X of rank 2 or more (N, C, spatial…), got X {}",
            format_sym(x.shape)
        )));
    }
    if x.shape[2..].contains(&Dim::Fixed(0)) {
        return Err(OpError::Shape(format!(
            "GlobalAveragePool: X {} has an empty spatial axis, so there is nothing to average",
            format_sym(x.shape)
        )));
    }
    let mut shape = x.shape[..2].to_vec();
    shape.extend(std::iter::repeat(Dim::Fixed(1)).take(x.shape.len() - 2));
    Ok(OutputFact::new(x.dtype, shape))
}

fn resize(attrs: &crate::op::Resize, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_dtype(&x, 0, "X", &FLOAT)?;
    let rank = x.shape.len();
    // An empty tensor in the scales slot is the opset-11 way of saying "use sizes".
    let scales = given(optional(inputs, 2));
    let sizes = given(optional(inputs, 3));
    // Which axes the target names, and how many values it must hold.
    let axes: Vec<usize> = match &attrs.axes {
        None => (0..rank).collect(),
        Some(axes) => crate::shape::normalize_axes(axes, rank).map_err(|e| OpError::Attribute {
            name: "axes",
            detail: format!("Resize: axes {axes:?} for X {}: {e}", format_sym(x.shape)),
        })?,
    };
    let expected = axes.len();
    // tf_crop_and_resize reads a start and an end per resized axis from roi (absent or
    // empty: whole axes); the output extents do not depend on it (see concord-cpu's
    // Resize kernel for why).
    if attrs.coordinate_transformation_mode == crate::op::CoordinateTransform::TfCropAndResize {
        if let Some(roi) = given(optional(inputs, 1)) {
            expect_dtype(&roi, 1, "roi", &FLOAT)?;
            match roi.shape {
                [Dim::Fixed(len)] if *len != 2 * expected => {
                    return Err(OpError::Shape(format!(
                        "Resize: roi has {len} values; it needs a start and an end for each \
                         of the {expected} resized axes of X {}, {}",
                        format_sym(x.shape),
                        2 * expected
                    )))
                }
                [_] => {}
                other => {
                    return Err(OpError::Shape(format!(
                        "Resize: roi must be 1-D, got shape {}",
                        format_sym(other)
                    )))
                }
            }
        }
    }
    let fixed_dims: Option<Vec<usize>> = x.shape.iter().map(fixed).collect();
    // Unknown where an axis is resized, the input's dim where it is not.
    let resized_unknown = || -> SymShape {
        x.shape
            .iter()
            .enumerate()
            .map(|(i, d)| {
                if axes.contains(&i) {
                    Dim::Unknown
                } else {
                    d.clone()
                }
            })
            .collect()
    };
    let shape = match (scales, sizes) {
        (Some(s), None) => {
            expect_dtype(&s, 2, "scales", &FLOAT)?;
            expect_length(&s, "scales", expected, x.shape)?;
            match s.value {
                None => resized_unknown(),
                Some(t) => {
                    let scales: Vec<f32> = t.to_f64_vec().into_iter().map(|v| v as f32).collect();
                    expect_value_length(scales.len(), "scales", expected, x.shape)?;
                    let mut shape = x.shape.to_vec();
                    for (&axis, &sc) in axes.iter().zip(&scales) {
                        if !(sc.is_finite() && sc > 0.0) {
                            return Err(OpError::Shape(format!(
                                "Resize: scales {scales:?} must all be finite and greater than 0"
                            )));
                        }
                        // The same f32 product as the reference kernel (and onnxruntime).
                        shape[axis] = match &x.shape[axis] {
                            Dim::Fixed(d) => Dim::Fixed((*d as f32 * sc).floor() as usize),
                            other if sc == 1.0 => other.clone(),
                            _ => Dim::Unknown,
                        };
                    }
                    shape
                }
            }
        }
        (None, Some(s)) => {
            expect_dtype(&s, 3, "sizes", &[DType::I64])?;
            expect_length(&s, "sizes", expected, x.shape)?;
            match (s.value.and_then(Tensor::to_i64_vec), fixed_dims) {
                (None, _) => resized_unknown(),
                // The reference's own rule, where every extent is known.
                (Some(sizes), Some(dims)) => attrs
                    .plan(&dims, None, Some(&sizes))?
                    .into_iter()
                    .map(|(d, _)| Dim::Fixed(d))
                    .collect(),
                (Some(sizes), None) => {
                    expect_value_length(sizes.len(), "sizes", expected, x.shape)?;
                    if attrs.keep_aspect_ratio != crate::op::AspectRatioPolicy::Stretch {
                        resized_unknown()
                    } else {
                        let mut shape = x.shape.to_vec();
                        for (&axis, &sz) in axes.iter().zip(&sizes) {
                            let out = usize::try_from(sz).map_err(|_| {
                                OpError::Shape(format!(
                                    "Resize: sizes {sizes:?} must not be negative"
                                ))
                            })?;
                            shape[axis] = Dim::Fixed(out);
                        }
                        shape
                    }
                }
            }
        }
        (Some(_), Some(_)) => {
            return Err(OpError::Shape(
                "Resize takes exactly one of scales and sizes, and both were given".into(),
            ))
        }
        (None, None) => {
            return Err(OpError::Shape(
                "Resize needs one of scales (input 2) or sizes (input 3); neither was given".into(),
            ))
        }
    };
    Ok(OutputFact::new(x.dtype, shape))
}

/// A Resize `scales` or `sizes` operand that is present and not the empty placeholder.
fn given(fact: Option<ValueFact<'_>>) -> Option<ValueFact<'_>> {
    fact.filter(|f| !(f.shape == [Dim::Fixed(0)] || f.value.is_some_and(Tensor::is_empty)))
}

/// The window attributes shared by Conv and the pools (kernel extents passed separately,
/// since Conv may only know them from a symbolic W).
pub(super) struct WindowAttrs<'a> {
    pub auto_pad: AutoPad,
    pub strides: &'a [usize],
    pub dilations: &'a [usize],
    pub pads: &'a [usize],
    pub ceil_mode: bool,
}

/// The output extent of each spatial axis of a sliding window; the same arithmetic and the
/// same attribute checks as concord-cpu's `ops/spatial.rs`.
pub(super) fn window_output(
    input: &[Dim],
    kernel: &[Option<usize>],
    attrs: &WindowAttrs,
) -> Result<SymShape, OpError> {
    let n = input.len();
    let per_axis = |name: &'static str, values: &[usize]| {
        if values.is_empty() {
            return Ok(vec![1; n]);
        }
        if values.len() != n {
            return Err(OpError::Attribute {
                name,
                detail: format!(
                    "has {} values {values:?}, expected one per spatial axis ({n})",
                    values.len()
                ),
            });
        }
        if values.contains(&0) {
            return Err(OpError::Attribute {
                name,
                detail: format!("values {values:?} must all be at least 1"),
            });
        }
        Ok(values.to_vec())
    };
    if kernel.contains(&Some(0)) {
        return Err(OpError::Attribute {
            name: "kernel_shape",
            detail: format!("values {kernel:?} must all be at least 1"),
        });
    }
    let strides = per_axis("strides", attrs.strides)?;
    let dilations = per_axis("dilations", attrs.dilations)?;
    let pads = if attrs.pads.is_empty() {
        vec![0; 2 * n]
    } else if attrs.pads.len() == 2 * n {
        attrs.pads.to_vec()
    } else {
        return Err(OpError::Attribute {
            name: "pads",
            detail: format!(
                "has {} values {:?}, expected {} (begin and end for each of {n} spatial axes)",
                attrs.pads.len(),
                attrs.pads,
                2 * n
            ),
        });
    };

    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (s, d) = (strides[i], dilations[i]);
        if input[i] == Dim::Fixed(0) {
            return Err(OpError::Shape(format!(
                "spatial axis {i} of the input has extent 0; only the batch axis may be empty"
            )));
        }
        let too_big = || {
            OpError::Shape(format!(
                "spatial axis {i}: kernel, dilation {d}, stride {s} and pads overflow"
            ))
        };
        let dilated = match kernel[i] {
            Some(k) => Some(
                (k - 1)
                    .checked_mul(d)
                    .and_then(|v| v.checked_add(1))
                    .ok_or_else(too_big)?,
            ),
            None => None,
        };
        let (pb, pe) = match attrs.auto_pad {
            AutoPad::NotSet => (pads[i], pads[i + n]),
            _ => (0, 0),
        };
        let dim = match (attrs.auto_pad, &input[i], dilated) {
            (AutoPad::SameUpper | AutoPad::SameLower, Dim::Fixed(len), _) => {
                Dim::Fixed(len.div_ceil(s))
            }
            (AutoPad::SameUpper | AutoPad::SameLower, other, _) if s == 1 => other.clone(),
            (AutoPad::NotSet | AutoPad::Valid, Dim::Fixed(len), Some(dilated)) => {
                let padded = len
                    .checked_add(pb)
                    .and_then(|v| v.checked_add(pe))
                    .ok_or_else(too_big)?;
                if padded < dilated {
                    return Err(OpError::Shape(format!(
                        "spatial axis {i}: input extent {len} plus pads {pb}+{pe} is smaller \
                         than the dilated kernel extent {dilated} (dilation {d})"
                    )));
                }
                let span = padded - dilated;
                if attrs.ceil_mode {
                    let mut output = span.div_ceil(s) + 1;
                    // The last window must start inside the input or the begin padding.
                    if (output - 1) * s >= len + pb {
                        output -= 1;
                    }
                    Dim::Fixed(output)
                } else {
                    Dim::Fixed(span / s + 1)
                }
            }
            // Stride 1 with pads that add back exactly what the kernel takes away keeps the
            // input extent, whatever it is.
            (AutoPad::NotSet | AutoPad::Valid, other, Some(dilated))
                if s == 1 && pb + pe + 1 == dilated =>
            {
                other.clone()
            }
            _ => Dim::Unknown,
        };
        out.push(dim);
    }
    Ok(out)
}

/// Checks that input `index` has the dtype of input 0.
pub(super) fn expect_same_dtype(
    fact: &ValueFact,
    index: usize,
    name: &'static str,
    expected: DType,
) -> Result<(), OpError> {
    if fact.dtype == expected {
        Ok(())
    } else {
        Err(OpError::DType {
            index,
            name,
            expected: format!("{expected} (the dtype of input 0)"),
            actual: fact.dtype,
        })
    }
}

/// Checks a 1-D operand that must hold one value per axis of X, where its length is known.
fn expect_length(fact: &ValueFact, name: &str, rank: usize, x: &[Dim]) -> Result<(), OpError> {
    match fact.shape {
        [Dim::Fixed(len)] => expect_value_length(*len, name, rank, x),
        [_] => Ok(()),
        other => Err(OpError::Shape(format!(
            "Resize: {name} must be 1-D, got shape {}",
            format_sym(other)
        ))),
    }
}

fn expect_value_length(len: usize, name: &str, rank: usize, x: &[Dim]) -> Result<(), OpError> {
    if len == rank {
        Ok(())
    } else {
        Err(OpError::Shape(format!(
            "Resize: {name} has {len} values but X {} has rank {rank}",
            format_sym(x)
        )))
    }
}

pub(super) fn fixed(d: &Dim) -> Option<usize> {
    match d {
        Dim::Fixed(n) => Some(*n),
        _ => None,
    }
}
