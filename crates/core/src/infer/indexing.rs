//! Shape and dtype inference for the indexing family: ConstantOfShape, Range, Tile, CumSum,
//! GatherElements, GatherND, ScatterElements, ScatterND, OneHot, Trilu, NonZero, Size,
//! DepthToSpace, SpaceToDepth, EyeLike, TopK, CastLike, Compress, NonMaxSuppression,
//! Unique, TensorScatter and TfIdfVectorizer.
//!
//! Where an output extent depends on an operand's value (Range, ConstantOfShape, Tile,
//! OneHot's depth, TopK's k) it is exact when that operand is a constant and
//! [`Dim::Unknown`] otherwise; where it depends on the data (NonZero, Compress,
//! NonMaxSuppression, Unique) it is unknown until the reference computes it.

use super::{expect_dtype, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::Op;
use crate::shape::{format_sym, normalize_axis, Dim, SymShape};

const INDEX: [DType; 2] = [DType::I64, DType::I32];

pub(super) fn infer(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let single = match op {
        Op::ConstantOfShape { value } => {
            let shape = required(inputs, 0, "input")?;
            expect_dtype(&shape, 0, "input", &[DType::I64])?;
            let dims = match shape.value.and_then(|t| t.to_i64_vec()) {
                Some(v) => dims_of(&v, "ConstantOfShape", "input")?,
                // Only the operand's length is known: that many unknown dims, the length
                // capped like every rank an operand gives.
                None => match super::movement::fixed_len(&shape)? {
                    Some(n) => vec![Dim::Unknown; n],
                    None => {
                        return Err(OpError::NotConstant {
                            index: 0,
                            name: "input",
                        })
                    }
                },
            };
            OutputFact::new(value.dtype(), dims)
        }
        Op::Range => {
            let start = required(inputs, 0, "start")?;
            for (i, name) in [(1, "limit"), (2, "delta")] {
                let t = required(inputs, i, name)?;
                expect_dtype(&t, i, name, &[start.dtype])?;
            }
            let value = |i: usize| inputs.get(i).copied().flatten().and_then(|f| f.value);
            let len = match (value(0), value(1), value(2)) {
                (Some(s), Some(l), Some(d)) => {
                    let one = |t: &crate::tensor::Tensor| t.to_f64_vec().first().copied();
                    match (one(s), one(l), one(d)) {
                        (Some(s), Some(l), Some(d)) if d != 0.0 => {
                            Dim::Fixed(((l - s) / d).ceil().max(0.0) as usize)
                        }
                        _ => Dim::Unknown,
                    }
                }
                _ => Dim::Unknown,
            };
            OutputFact::new(start.dtype, vec![len])
        }
        Op::Tile => {
            let x = required(inputs, 0, "input")?;
            let repeats = required(inputs, 1, "repeats")?;
            expect_dtype(&repeats, 1, "repeats", &[DType::I64])?;
            let dims = match repeats.value.and_then(|t| t.to_i64_vec()) {
                Some(r) => {
                    if r.len() != x.shape.len() {
                        return Err(OpError::Shape(format!(
                            "Tile: input 1 (repeats) has {} entries, input 0 has rank {}",
                            r.len(),
                            x.shape.len()
                        )));
                    }
                    x.shape
                        .iter()
                        .zip(&r)
                        .map(|(d, &k)| match (d, usize::try_from(k)) {
                            (_, Ok(1)) => Ok(d.clone()),
                            (Dim::Fixed(n), Ok(k)) => Ok(Dim::Fixed(n * k)),
                            (_, Ok(_)) => Ok(Dim::Unknown),
                            (_, Err(_)) => Err(OpError::Shape(format!(
                                "Tile: repeats {r:?} has a negative entry"
                            ))),
                        })
                        .collect::<Result<SymShape, _>>()?
                }
                None => vec![Dim::Unknown; x.shape.len()],
            };
            OutputFact::new(x.dtype, dims)
        }
        Op::CumSum { .. } | Op::CumProd { .. } => {
            let x = required(inputs, 0, "x")?;
            let axis = required(inputs, 1, "axis")?;
            expect_dtype(&axis, 1, "axis", &INDEX)?;
            OutputFact::new(x.dtype, x.shape.to_vec())
        }
        Op::GatherElements { axis } => {
            let data = required(inputs, 0, "data")?;
            let indices = required(inputs, 1, "indices")?;
            expect_dtype(&indices, 1, "indices", &INDEX)?;
            same_rank("GatherElements", &data, &indices)?;
            normalize_axis(*axis, data.shape.len())?;
            OutputFact::new(data.dtype, indices.shape.to_vec())
        }
        Op::GatherND { batch_dims } => gather_nd(*batch_dims, inputs)?,
        Op::ScatterElements { axis, .. } => {
            let data = required(inputs, 0, "data")?;
            let indices = required(inputs, 1, "indices")?;
            let updates = required(inputs, 2, "updates")?;
            expect_dtype(&indices, 1, "indices", &INDEX)?;
            expect_dtype(&updates, 2, "updates", &[data.dtype])?;
            same_rank("ScatterElements", &data, &indices)?;
            normalize_axis(*axis, data.shape.len())?;
            OutputFact::new(data.dtype, data.shape.to_vec())
        }
        Op::ScatterND { .. } => {
            let data = required(inputs, 0, "data")?;
            let indices = required(inputs, 1, "indices")?;
            let updates = required(inputs, 2, "updates")?;
            expect_dtype(&indices, 1, "indices", &[DType::I64])?;
            expect_dtype(&updates, 2, "updates", &[data.dtype])?;
            OutputFact::new(data.dtype, data.shape.to_vec())
        }
        Op::OneHot { axis } => {
            let indices = required(inputs, 0, "indices")?;
            let depth = required(inputs, 1, "depth")?;
            let values = required(inputs, 2, "values")?;
            let rank = indices.shape.len() + 1;
            let axis = normalize_axis(*axis, rank)?;
            let d = depth
                .value
                .and_then(|t| t.to_f64_vec().first().copied())
                .map_or(Dim::Unknown, |d| Dim::Fixed(d.max(0.0) as usize));
            let mut dims = indices.shape.to_vec();
            dims.insert(axis, d);
            OutputFact::new(values.dtype, dims)
        }
        Op::Trilu { .. } => {
            let x = required(inputs, 0, "input")?;
            if x.shape.len() < 2 {
                return Err(OpError::Shape(format!(
                    "Trilu needs a tensor of rank 2 or more, got {}",
                    format_sym(x.shape)
                )));
            }
            if let Some(k) = optional(inputs, 1) {
                expect_dtype(&k, 1, "k", &[DType::I64])?;
            }
            OutputFact::new(x.dtype, x.shape.to_vec())
        }
        Op::NonZero => {
            let x = required(inputs, 0, "X")?;
            OutputFact::new(DType::I64, vec![Dim::Fixed(x.shape.len()), Dim::Unknown])
        }
        Op::Size => {
            required(inputs, 0, "data")?;
            OutputFact::new(DType::I64, Vec::new())
        }
        Op::DepthToSpace { blocksize, .. } => {
            space_depth("DepthToSpace", *blocksize, true, inputs)?
        }
        Op::SpaceToDepth { blocksize, .. } => {
            space_depth("SpaceToDepth", *blocksize, false, inputs)?
        }
        Op::EyeLike { dtype, .. } => {
            let x = required(inputs, 0, "input")?;
            if x.shape.len() != 2 {
                return Err(OpError::Shape(format!(
                    "EyeLike needs a 2-D input, got {}",
                    format_sym(x.shape)
                )));
            }
            OutputFact::new(dtype.unwrap_or(x.dtype), x.shape.to_vec())
        }
        Op::TopK { axis, .. } => {
            let x = required(inputs, 0, "X")?;
            let k = required(inputs, 1, "K")?;
            expect_dtype(&k, 1, "K", &[DType::I64])?;
            let axis = normalize_axis(*axis, x.shape.len())?;
            let mut dims = x.shape.to_vec();
            dims[axis] = k
                .value
                .and_then(|t| t.to_i64_vec())
                .and_then(|v| v.first().copied())
                .and_then(|k| usize::try_from(k).ok())
                .map_or(Dim::Unknown, Dim::Fixed);
            let values = OutputFact::new(x.dtype, dims.clone());
            let indices = OutputFact::new(DType::I64, dims);
            return Ok(vec![values, indices]
                .into_iter()
                .take(num_outputs.max(1))
                .collect());
        }
        Op::BitCast { to } => {
            let x = required(inputs, 0, "input")?;
            if x.dtype.size_in_bytes() != to.size_in_bytes() {
                return Err(OpError::Attribute {
                    name: "to",
                    detail: format!(
                        "BitCast needs one width: input is {} ({} bytes), `to` is {} ({} bytes)",
                        x.dtype,
                        x.dtype.size_in_bytes(),
                        to,
                        to.size_in_bytes()
                    ),
                });
            }
            OutputFact::new(*to, x.shape.to_vec())
        }
        Op::CastLike => {
            let x = required(inputs, 0, "input")?;
            let like = required(inputs, 1, "target_type")?;
            OutputFact::new(like.dtype, x.shape.to_vec())
        }
        Op::Compress { axis } => {
            let x = required(inputs, 0, "input")?;
            let cond = required(inputs, 1, "condition")?;
            expect_dtype(&cond, 1, "condition", &[DType::Bool])?;
            match axis {
                None => OutputFact::new(x.dtype, vec![Dim::Unknown]),
                Some(axis) => {
                    let axis = normalize_axis(*axis, x.shape.len())?;
                    let mut dims = x.shape.to_vec();
                    dims[axis] = Dim::Unknown;
                    OutputFact::new(x.dtype, dims)
                }
            }
        }
        Op::CenterCropPad { axes } => {
            let x = required(inputs, 0, "input_data")?;
            let shape = required(inputs, 1, "shape")?;
            expect_dtype(&shape, 1, "shape", &INDEX)?;
            let rank = x.shape.len();
            let axes: Vec<usize> = match axes {
                None => (0..rank).collect(),
                Some(a) => crate::shape::normalize_axes(a, rank)?,
            };
            let mut dims = x.shape.to_vec();
            match shape.value.and_then(|t| t.to_i64_vec()) {
                Some(v) if v.len() == axes.len() => {
                    for (&axis, d) in axes.iter().zip(dims_of(&v, "CenterCropPad", "shape")?) {
                        dims[axis] = d;
                    }
                }
                Some(v) => {
                    return Err(OpError::Shape(format!(
                        "CenterCropPad: shape {v:?} has {} values for {} axes",
                        v.len(),
                        axes.len()
                    )))
                }
                None => axes.iter().for_each(|&a| dims[a] = Dim::Unknown),
            }
            OutputFact::new(x.dtype, dims)
        }
        Op::ReverseSequence { .. } => {
            let x = required(inputs, 0, "input")?;
            let lens = required(inputs, 1, "sequence_lens")?;
            expect_dtype(&lens, 1, "sequence_lens", &[DType::I64])?;
            OutputFact::new(x.dtype, x.shape.to_vec())
        }
        Op::NonMaxSuppression { .. } => {
            let boxes = required(inputs, 0, "boxes")?;
            let scores = required(inputs, 1, "scores")?;
            expect_dtype(&boxes, 0, "boxes", &[DType::F32])?;
            expect_dtype(&scores, 1, "scores", &[DType::F32])?;
            if boxes.shape.len() != 3 || scores.shape.len() != 3 {
                return Err(OpError::Shape(format!(
                    "NonMaxSuppression needs boxes (batches, spatial, 4) and scores (batches, \
                     classes, spatial), got {} and {}",
                    format_sym(boxes.shape),
                    format_sym(scores.shape)
                )));
            }
            if let Some(m) = optional(inputs, 2) {
                expect_dtype(&m, 2, "max_output_boxes_per_class", &[DType::I64])?;
            }
            for (index, name) in [(3, "iou_threshold"), (4, "score_threshold")] {
                if let Some(t) = optional(inputs, index) {
                    expect_dtype(&t, index, name, &[DType::F32])?;
                }
            }
            // How many boxes survive depends on the scores and overlaps.
            OutputFact::new(DType::I64, vec![Dim::Unknown, Dim::Fixed(3)])
        }
        Op::Unique { axis, .. } => {
            let x = required(inputs, 0, "X")?;
            if !(1..=4).contains(&num_outputs) {
                return Err(OpError::Unsupported(format!(
                    "Unique has 1 to 4 outputs, the node declares {num_outputs}"
                )));
            }
            // How many elements are unique depends on the data.
            let y = match axis {
                None => vec![Dim::Unknown],
                Some(axis) => {
                    let axis = normalize_axis(*axis, x.shape.len())?;
                    let mut dims = x.shape.to_vec();
                    dims[axis] = Dim::Unknown;
                    dims
                }
            };
            let inverse = match axis {
                None => x
                    .shape
                    .iter()
                    .try_fold(1usize, |n, d| match d {
                        Dim::Fixed(k) => n.checked_mul(*k),
                        _ => None,
                    })
                    .map_or(Dim::Unknown, Dim::Fixed),
                Some(axis) => x.shape[normalize_axis(*axis, x.shape.len())?].clone(),
            };
            let outputs = [
                OutputFact::new(x.dtype, y),
                OutputFact::new(DType::I64, vec![Dim::Unknown]),
                OutputFact::new(DType::I64, vec![inverse]),
                OutputFact::new(DType::I64, vec![Dim::Unknown]),
            ];
            return Ok(outputs.into_iter().take(num_outputs).collect());
        }
        Op::TensorScatter { axis, .. } => tensor_scatter(*axis, inputs)?,
        Op::TfIdfVectorizer(t) => {
            let x = required(inputs, 0, "X")?;
            expect_dtype(&x, 0, "X", &INDEX)?;
            let k = Dim::Fixed(t.output_size());
            let dims = match x.shape {
                [_] => vec![k],
                [n, _] => vec![n.clone(), k],
                _ => {
                    return Err(OpError::Shape(format!(
                        "TfIdfVectorizer needs X (C) or (N, C), got {}",
                        format_sym(x.shape)
                    )))
                }
            };
            OutputFact::new(DType::F32, dims)
        }
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not an indexing op",
                other.name()
            )))
        }
    };
    Ok(vec![single])
}

/// A shape operand's values as dims, refusing negative ones.
fn dims_of(values: &[i64], op: &str, name: &str) -> Result<SymShape, OpError> {
    values
        .iter()
        .map(|&d| usize::try_from(d).map(Dim::Fixed))
        .collect::<Result<SymShape, _>>()
        .map_err(|_| OpError::Shape(format!("{op}: {name} {values:?} has a negative dim")))
}

fn same_rank(op: &str, data: &ValueFact, indices: &ValueFact) -> Result<(), OpError> {
    if data.shape.len() != indices.shape.len() {
        return Err(OpError::Shape(format!(
            "{op}: input 1 (indices) {} must have the rank of input 0 (data) {}",
            format_sym(indices.shape),
            format_sym(data.shape)
        )));
    }
    Ok(())
}

/// GatherND: indices [b…, i…, q] select slices of data [b…, q dims, rest…]; the output is
/// [b…, i…, rest…].
fn gather_nd(batch_dims: i64, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    let indices = required(inputs, 1, "indices")?;
    expect_dtype(&indices, 1, "indices", &[DType::I64])?;
    let b = usize::try_from(batch_dims).map_err(|_| OpError::Attribute {
        name: "batch_dims",
        detail: format!("must be non-negative, got {batch_dims}"),
    })?;
    let Some(Dim::Fixed(q)) = indices.shape.last() else {
        return Err(OpError::Shape(format!(
            "GatherND: the last dim of input 1 (indices) {} must be known",
            format_sym(indices.shape)
        )));
    };
    if indices.shape.is_empty() || b >= indices.shape.len() || b + q > data.shape.len() {
        return Err(OpError::Shape(format!(
            "GatherND: indices {} with batch_dims {b} do not fit data {}",
            format_sym(indices.shape),
            format_sym(data.shape)
        )));
    }
    let mut dims: SymShape = indices.shape[..indices.shape.len() - 1].to_vec();
    dims.extend_from_slice(&data.shape[b + q..]);
    Ok(OutputFact::new(data.dtype, dims))
}

/// DepthToSpace (`to_space`) and SpaceToDepth on (N, C, H, W).
fn space_depth(
    op: &str,
    blocksize: usize,
    to_space: bool,
    inputs: &[Option<ValueFact>],
) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "input")?;
    if x.shape.len() != 4 || blocksize == 0 {
        return Err(OpError::Shape(format!(
            "{op} needs a 4-D (N, C, H, W) input and a positive blocksize, got {} and {blocksize}",
            format_sym(x.shape)
        )));
    }
    // A blocksize from the model may be anything: an extent it scales past usize is an
    // error, not an overflow.
    let too_large = |what: String| {
        OpError::Shape(format!(
            "{op}: {what} with blocksize {blocksize} overflows a 64-bit extent"
        ))
    };
    let b2 = blocksize
        .checked_mul(blocksize)
        .ok_or_else(|| too_large("blocksize²".to_string()))?;
    let scale = |d: &Dim, up: bool| match d {
        Dim::Fixed(n) if up => n
            .checked_mul(blocksize)
            .map(Dim::Fixed)
            .ok_or_else(|| too_large(format!("extent {n}"))),
        Dim::Fixed(n) if n % blocksize == 0 => Ok(Dim::Fixed(n / blocksize)),
        Dim::Fixed(n) => Err(OpError::Shape(format!(
            "{op}: extent {n} is not a multiple of blocksize {blocksize}"
        ))),
        _ => Ok(Dim::Unknown),
    };
    let c = match &x.shape[1] {
        Dim::Fixed(c) if to_space && c % b2 != 0 => {
            return Err(OpError::Shape(format!(
                "{op}: channels {c} are not a multiple of blocksize² {b2}"
            )))
        }
        Dim::Fixed(c) if to_space => Dim::Fixed(c / b2),
        Dim::Fixed(c) => Dim::Fixed(
            c.checked_mul(b2)
                .ok_or_else(|| too_large(format!("channels {c}")))?,
        ),
        _ => Dim::Unknown,
    };
    let dims = vec![
        x.shape[0].clone(),
        c,
        scale(&x.shape[2], to_space)?,
        scale(&x.shape[3], to_space)?,
    ];
    Ok(OutputFact::new(x.dtype, dims))
}

/// TensorScatter's sequence axis for caches of rank `rank`: `axis` may count from the end,
/// and may not be 0, the batch axis that `write_indices` runs along. The one rule for
/// inference and the reference.
pub fn tensor_scatter_axis(axis: i64, rank: usize) -> Result<usize, OpError> {
    match normalize_axis(axis, rank) {
        Ok(a) if a >= 1 => Ok(a),
        _ => Err(OpError::Attribute {
            name: "axis",
            detail: format!(
                "TensorScatter's axis {axis} must name an axis after the batch axis of caches \
                 of rank {rank}"
            ),
        }),
    }
}

/// TensorScatter: the present cache is the past one's type; the update must match it on
/// every axis but the sequence axis, where it may be shorter.
fn tensor_scatter(axis: i64, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let past = required(inputs, 0, "past_cache")?;
    let update = required(inputs, 1, "update")?;
    expect_dtype(&update, 1, "update", &[past.dtype])?;
    if let Some(w) = optional(inputs, 2) {
        expect_dtype(&w, 2, "write_indices", &[DType::I64])?;
        if w.shape.len() != 1 {
            return Err(OpError::Shape(format!(
                "TensorScatter needs write_indices (batch), got {}",
                format_sym(w.shape)
            )));
        }
    }
    let bad = || {
        OpError::Shape(format!(
            "TensorScatter needs update {} to match past_cache {} on every axis but the \
             sequence axis {axis}, and to be no longer there",
            format_sym(update.shape),
            format_sym(past.shape)
        ))
    };
    if past.shape.len() != update.shape.len() {
        return Err(bad());
    }
    let seq = tensor_scatter_axis(axis, past.shape.len())?;
    for (i, (p, u)) in past.shape.iter().zip(update.shape).enumerate() {
        match (p, u) {
            (Dim::Fixed(p), Dim::Fixed(u)) if (i == seq && u > p) || (i != seq && u != p) => {
                return Err(bad())
            }
            _ => {}
        }
    }
    Ok(OutputFact::new(past.dtype, past.shape.to_vec()))
}
