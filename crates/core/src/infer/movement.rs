//! Shape inference for the data-movement ops (Concat, Split, Slice, Gather, Reshape,
//! Flatten, Transpose, Squeeze, Unsqueeze, Shape, Cast, Identity, Dropout, Constant, Pad,
//! Expand).
//!
//! These are the ops of PyTorch's shape sub-graphs, so their inference is what lets
//! constant folding finish: operands such as Reshape's `shape` or Slice's `starts` arrive
//! in [`ValueFact::value`] when they are constants, and are then used to compute exact
//! output shapes, passing named dims through where the op keeps them. When an operand is
//! not constant the output still gets its rank, with [`Dim::Unknown`] where an extent
//! depends on the operand; [`OpError::NotConstant`] is reserved for the cases where even
//! the rank cannot be known.

use super::{expect_dtype, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::Op;
use crate::shape::{broadcast_sym, format_sym, normalize_axis, Dim, SymShape};

pub(super) fn infer(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let single = match op {
        Op::Concat { axis } => concat(*axis, inputs)?,
        Op::Split {
            axis,
            num_outputs: attr,
        } => return split(*axis, *attr, inputs, num_outputs),
        Op::Slice => slice(inputs)?,
        Op::Gather { axis } => gather(*axis, inputs)?,
        Op::Reshape { allowzero } => reshape(*allowzero, inputs)?,
        Op::Flatten { axis } => flatten(*axis, inputs)?,
        Op::Transpose { perm } => transpose(perm.as_deref(), inputs)?,
        Op::Squeeze => squeeze(inputs)?,
        Op::Unsqueeze => unsqueeze(inputs)?,
        Op::Shape { start, end } => shape(*start, *end, inputs)?,
        Op::Cast { to } => {
            let input = required(inputs, 0, "input")?;
            OutputFact::new(*to, input.shape.to_vec())
        }
        Op::Identity => {
            let input = required(inputs, 0, "input")?;
            OutputFact::new(input.dtype, input.shape.to_vec())
        }
        Op::Dropout => return dropout(inputs, num_outputs),
        Op::Constant { value } => OutputFact::new(value.dtype(), value.shape().to_sym()),
        Op::Pad { .. } => pad(inputs)?,
        Op::Expand => expand(inputs)?,
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a data-movement op",
                other.name()
            )))
        }
    };
    Ok(vec![single])
}

/// Concat: same dtype and rank everywhere; dims off the axis must agree, and the axis
/// extent is the sum when every part's is fixed.
fn concat(axis: i64, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let first = required(inputs, 0, "inputs")?;
    let rank = first.shape.len();
    let axis = normalize_axis(axis, rank)?;
    let mut out: SymShape = first.shape.to_vec();
    let mut axis_parts = Vec::with_capacity(inputs.len());
    for i in 0..inputs.len() {
        let part = required(inputs, i, "inputs")?;
        expect_dtype(&part, i, "inputs", &[first.dtype])?;
        if part.shape.len() != rank {
            return Err(OpError::Shape(format!(
                "Concat: input {i} has shape {}, which has a different rank from input 0's {}",
                format_sym(part.shape),
                format_sym(first.shape)
            )));
        }
        for (k, (o, d)) in out.iter_mut().zip(part.shape).enumerate() {
            if k == axis {
                continue;
            }
            *o = match (&*o, d) {
                (Dim::Fixed(a), Dim::Fixed(b)) if a != b => {
                    return Err(OpError::Shape(format!(
                        "Concat on axis {axis}: input {i} has shape {}, which does not match \
                         input 0's shape {} on axis {k}",
                        format_sym(part.shape),
                        format_sym(first.shape)
                    )))
                }
                // The extents must be equal at run time, so the better-known one holds.
                (Dim::Fixed(a), _) | (_, Dim::Fixed(a)) => Dim::Fixed(*a),
                (Dim::Named(a), _) | (_, Dim::Named(a)) => Dim::Named(a.clone()),
                _ => Dim::Unknown,
            };
        }
        axis_parts.push(part.shape[axis].clone());
    }
    out[axis] = sum_dims(&axis_parts);
    Ok(OutputFact::new(first.dtype, out))
}

/// Split: fixed part sizes when `split` is constant or the axis extent is fixed.
fn split(
    axis: i64,
    attr_num_outputs: usize,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let data = required(inputs, 0, "input")?;
    if attr_num_outputs != 0 && attr_num_outputs != num_outputs {
        return Err(OpError::Attribute {
            name: "num_outputs",
            detail: format!(
                "num_outputs is {attr_num_outputs} but the node declares {num_outputs} outputs"
            ),
        });
    }
    if num_outputs == 0 {
        return Err(OpError::Attribute {
            name: "num_outputs",
            detail: "Split needs at least one output".into(),
        });
    }
    let axis = normalize_axis(axis, data.shape.len())?;
    let extent = &data.shape[axis];
    let sizes: Vec<Dim> = match optional(inputs, 1) {
        Some(split) => match const_ints(&split, 1, "split")? {
            Some(sizes) => {
                if sizes.len() != num_outputs {
                    return Err(OpError::Shape(format!(
                        "Split's split input {sizes:?} has {} sizes but the node declares \
                         {num_outputs} outputs",
                        sizes.len()
                    )));
                }
                let fixed = sizes
                    .iter()
                    .map(|&s| usize::try_from(s))
                    .collect::<Result<Vec<usize>, _>>()
                    .map_err(|_| {
                        OpError::Shape(format!("Split's split input {sizes:?} has a negative size"))
                    })?;
                if let Dim::Fixed(e) = extent {
                    if fixed.iter().try_fold(0usize, |a, &s| a.checked_add(s)) != Some(*e) {
                        return Err(OpError::Shape(format!(
                            "Split's split input {sizes:?} does not sum to the axis extent {e}"
                        )));
                    }
                }
                fixed.into_iter().map(Dim::Fixed).collect()
            }
            None => vec![Dim::Unknown; num_outputs],
        },
        None => match extent {
            Dim::Fixed(e) => {
                let chunk = e.div_ceil(num_outputs);
                let last = e.checked_sub(chunk * (num_outputs - 1)).ok_or_else(|| {
                    OpError::Shape(format!(
                        "an axis of extent {e} cannot be split into {num_outputs} parts of \
                         {chunk} with a smaller last part"
                    ))
                })?;
                let mut sizes = vec![Dim::Fixed(chunk); num_outputs - 1];
                sizes.push(Dim::Fixed(last));
                sizes
            }
            other if num_outputs == 1 => vec![other.clone()],
            _ => vec![Dim::Unknown; num_outputs],
        },
    };
    Ok(sizes
        .into_iter()
        .map(|size| {
            let mut shape = data.shape.to_vec();
            shape[axis] = size;
            OutputFact::new(data.dtype, shape)
        })
        .collect())
}

/// Slice: exact extents when every bound operand is constant; otherwise the rank is kept
/// and the sliced axes (all of them, when `axes` is not known either) become unknown.
fn slice(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    let rank = data.shape.len();
    let starts_f = required(inputs, 1, "starts")?;
    let ends_f = required(inputs, 2, "ends")?;
    let starts = const_ints(&starts_f, 1, "starts")?;
    let ends = const_ints(&ends_f, 2, "ends")?;
    let axes = match optional(inputs, 3) {
        Some(f) => const_ints(&f, 3, "axes")?.map(Some),
        None => Some(None),
    };
    let steps = match optional(inputs, 4) {
        Some(f) => const_ints(&f, 4, "steps")?.map(Some),
        None => Some(None),
    };
    // The number of sliced axes, from whichever operand tells it.
    let count = match starts.as_ref() {
        Some(s) => Some(s.len()),
        None => fixed_len(&starts_f)?,
    };
    let axes: Option<Vec<usize>> = match axes {
        Some(Some(a)) => Some(axes_in_rank(&a, rank)?),
        Some(None) => match count {
            Some(n) if n > rank => {
                return Err(OpError::Shape(format!(
                    "Slice without axes slices the first {n} axes, but the input has rank {rank}"
                )))
            }
            n => n.map(|n| (0..n).collect()),
        },
        None => None,
    };
    let mut out = data.shape.to_vec();
    let (Some(axes_v), Some(starts), Some(ends), Some(steps)) = (axes.clone(), starts, ends, steps)
    else {
        match axes {
            Some(axes) => axes.iter().for_each(|&a| out[a] = Dim::Unknown),
            None => out.iter_mut().for_each(|d| *d = Dim::Unknown),
        }
        return Ok(OutputFact::new(data.dtype, out));
    };
    let axes = axes_v;
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(OpError::Shape(format!(
            "Slice's starts, ends, axes and steps must have one entry per sliced axis, got \
             {}, {}, {} and {}",
            starts.len(),
            ends.len(),
            axes.len(),
            steps.len()
        )));
    }
    for (i, &axis) in axes.iter().enumerate() {
        out[axis] = slice_extent(&out[axis], starts[i], ends[i], steps[i])?;
    }
    Ok(OutputFact::new(data.dtype, out))
}

/// The extent of one sliced axis. A symbolic extent passes through only for the whole-axis
/// slices exporters write (0..INT64_MAX forward, -1..INT64_MIN backward).
fn slice_extent(dim: &Dim, start: i64, end: i64, step: i64) -> Result<Dim, OpError> {
    if step == 0 {
        return Err(OpError::Shape("Slice's steps must not be 0".into()));
    }
    let d = match dim {
        Dim::Fixed(d) => *d as i128,
        other => {
            let whole = (step == 1 && start == 0 && end == i64::MAX)
                || (step == -1 && start == -1 && end == i64::MIN);
            return Ok(if whole { other.clone() } else { Dim::Unknown });
        }
    };
    // i128 so that INT64_MIN / INT64_MAX bounds and steps cannot overflow.
    let wrap = |v: i64| if v < 0 { v as i128 + d } else { v as i128 };
    let (s, e, step) = (wrap(start), wrap(end), step as i128);
    let len = if step > 0 {
        let (s, e) = (s.max(0).min(d), e.max(0).min(d));
        if e > s {
            (e - s - 1) / step + 1
        } else {
            0
        }
    } else {
        let (s, e) = (s.max(0).min(d - 1), e.max(-1).min(d - 1));
        if s > e {
            (s - e - 1) / (-step) + 1
        } else {
            0
        }
    };
    // The length never exceeds `d`, which came from a usize.
    Ok(Dim::Fixed(usize::try_from(len).unwrap_or(0)))
}

/// Gather: data[..axis] ++ indices.shape ++ data[axis+1..]. Constant indices are checked
/// against a fixed axis extent here, so a bad index fails when the net is built.
fn gather(axis: i64, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    let indices = required(inputs, 1, "indices")?;
    expect_dtype(&indices, 1, "indices", &[DType::I64])?;
    let axis = normalize_axis(axis, data.shape.len())?;
    if let (Dim::Fixed(extent), Some(values)) = (&data.shape[axis], indices.value) {
        let e = *extent as i64;
        for (pos, &i) in values.as_i64().unwrap_or(&[]).iter().enumerate() {
            if i < -e || i >= e {
                return Err(OpError::Shape(format!(
                    "Gather index {i} (element {pos} of indices) is out of range for axis \
                     {axis} of extent {extent}"
                )));
            }
        }
    }
    let mut out = data.shape[..axis].to_vec();
    out.extend_from_slice(indices.shape);
    out.extend_from_slice(&data.shape[axis + 1..]);
    Ok(OutputFact::new(data.dtype, out))
}

/// Reshape: with a constant `shape`, 0 copies the input dim (named ones included) unless
/// `allowzero`, and -1 is solved symbolically by cancelling the dims both sides share.
/// Without it, the rank is the length of the `shape` operand.
fn reshape(allowzero: bool, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    let shape_f = required(inputs, 1, "shape")?;
    let Some(spec) = const_ints(&shape_f, 1, "shape")? else {
        let n = fixed_len(&shape_f)?.ok_or(OpError::NotConstant {
            index: 1,
            name: "shape",
        })?;
        return Ok(OutputFact::new(data.dtype, vec![Dim::Unknown; n]));
    };
    let input = data.shape;
    let mismatch = |why: &str| {
        OpError::Shape(format!(
            "cannot reshape {} into [{}]: {why}",
            format_sym(input),
            crate::text::list(&spec, crate::text::LIST_ITEMS),
        ))
    };
    if spec.iter().filter(|&&d| d == -1).count() > 1 {
        return Err(mismatch("more than one dim is -1"));
    }
    if allowzero && spec.contains(&0) && spec.contains(&-1) {
        return Err(mismatch("with allowzero, 0 and -1 cannot both appear"));
    }

    // `copied[i]` marks input dims that reappear unchanged in the output through a 0, so
    // they cancel out of the element-count balance.
    let mut copied = vec![false; input.len()];
    let mut out: Vec<Option<Dim>> = Vec::with_capacity(spec.len());
    for (i, &d) in spec.iter().enumerate() {
        out.push(match d {
            -1 => None,
            0 if !allowzero => {
                let dim = input.get(i).ok_or_else(|| {
                    mismatch(&format!(
                        "0 at position {i} copies an input dim that does not exist"
                    ))
                })?;
                copied[i] = true;
                Some(dim.clone())
            }
            d if d < -1 => return Err(mismatch(&format!("{d} is not a valid dim"))),
            d => Some(Dim::Fixed(d as usize)),
        });
    }

    // What is left of the input's element count after cancelling the copied dims: a fixed
    // product and the symbolic dims left over, balanced against the output's literals.
    let mut in_fixed: u128 = 1;
    let mut in_symbols: Vec<&Dim> = Vec::new();
    for (dim, _) in input.iter().zip(&copied).filter(|(_, &c)| !c) {
        match dim {
            Dim::Fixed(n) => in_fixed = in_fixed.saturating_mul(*n as u128),
            other => in_symbols.push(other),
        }
    }
    // Every output dim that is not a copy is a literal from `spec`, so fixed.
    let out_fixed: u128 = out
        .iter()
        .zip(&spec)
        .filter(|(_, &d)| d != 0 || allowzero)
        .filter_map(|(dim, _)| match dim {
            Some(Dim::Fixed(n)) => Some(*n as u128),
            _ => None,
        })
        .fold(1u128, |acc, n| acc.saturating_mul(n));
    let inferred = if out.contains(&None) {
        // With another dim 0 the element count says nothing about -1; the kernel refuses
        // it, so inference does too.
        if out.iter().flatten().any(|d| *d == Dim::Fixed(0)) {
            return Err(mismatch("-1 is ambiguous when another dim is 0"));
        }
        if in_symbols.is_empty() {
            if in_fixed % out_fixed != 0 {
                return Err(mismatch(&format!(
                    "{in_fixed} elements cannot be arranged with the other dims' product \
                     {out_fixed}"
                )));
            }
            Dim::Fixed(
                usize::try_from(in_fixed / out_fixed)
                    .map_err(|_| mismatch("the inferred dim is too large"))?,
            )
        } else if in_symbols.len() == 1
            && in_fixed == out_fixed
            && matches!(in_symbols.first(), Some(Dim::Named(_)))
        {
            in_symbols
                .first()
                .map(|d| (*d).clone())
                .unwrap_or(Dim::Unknown)
        } else {
            Dim::Unknown
        }
    } else {
        // Without -1 a mismatch is certain only when the input is fully known (a copied
        // symbolic dim could be 0 at run time and make any target fit).
        let in_total = fixed_product(input.iter().map(Some));
        let out_total = fixed_product(out.iter().map(|d| d.as_ref()));
        if let (Some(i), Some(o)) = (in_total, out_total) {
            if i != o {
                return Err(mismatch(&format!(
                    "the input has {i} elements, the target {o}"
                )));
            }
        }
        Dim::Unknown
    };
    let dims = out
        .into_iter()
        .map(|d| d.unwrap_or_else(|| inferred.clone()))
        .collect();
    Ok(OutputFact::new(data.dtype, dims))
}

/// Flatten: [prod(dims[..axis]), prod(dims[axis..])], axis in [-rank, rank].
fn flatten(axis: i64, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "input")?;
    let rank = data.shape.len() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a > rank {
        return Err(OpError::Attribute {
            name: "axis",
            detail: format!("Flatten axis {axis} is out of range for rank {rank}"),
        });
    }
    let (outer, inner) = data.shape.split_at(a as usize);
    Ok(OutputFact::new(
        data.dtype,
        vec![product_dims(outer), product_dims(inner)],
    ))
}

/// Transpose: output axis i is input axis perm[i]; no perm reverses.
fn transpose(perm: Option<&[i64]>, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    let rank = data.shape.len();
    let Some(perm) = perm else {
        let reversed = data.shape.iter().rev().cloned().collect();
        return Ok(OutputFact::new(data.dtype, reversed));
    };
    let bad = || OpError::Attribute {
        name: "perm",
        detail: format!("{perm:?} is not a permutation of the {rank} axes 0..{rank}"),
    };
    if perm.len() != rank {
        return Err(bad());
    }
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(rank);
    for &p in perm {
        let p = usize::try_from(p).map_err(|_| bad())?;
        match seen.get_mut(p) {
            Some(s) if !*s => *s = true,
            _ => return Err(bad()),
        }
        out.push(data.shape[p].clone());
    }
    Ok(OutputFact::new(data.dtype, out))
}

/// Squeeze: removes the listed axes, or every axis of extent 1 when `axes` is omitted,
/// which needs every extent to be known.
fn squeeze(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    let rank = data.shape.len();
    let axes: Vec<usize> = match optional(inputs, 1) {
        Some(axes_f) => match const_axes(&axes_f, 1, "axes")? {
            Some(axes) => axes_in_rank(&axes, rank)?,
            None => {
                let n =
                    axes_count(&axes_f)?
                        .filter(|&n| n <= rank)
                        .ok_or(OpError::NotConstant {
                            index: 1,
                            name: "axes",
                        })?;
                return Ok(OutputFact::new(data.dtype, vec![Dim::Unknown; rank - n]));
            }
        },
        None => {
            if data.shape.iter().any(|d| !matches!(d, Dim::Fixed(_))) {
                // Whether a dim not known yet is 1 decides the output rank. Folding may
                // still make the dims known; if not, the net cannot be built.
                return Err(OpError::NeedsFolding(format!(
                    "Squeeze without axes of data {}: which axes have extent 1, and so the \
                     output's rank, depends on dims not known when the net is built (give \
                     `axes`)",
                    format_sym(data.shape)
                )));
            }
            (0..rank)
                .filter(|&a| data.shape[a] == Dim::Fixed(1))
                .collect()
        }
    };
    for &a in &axes {
        if let Dim::Fixed(d) = data.shape[a] {
            if d != 1 {
                return Err(OpError::Shape(format!(
                    "Squeeze axis {a} of shape {} has extent {d}, not 1",
                    format_sym(data.shape)
                )));
            }
        }
    }
    let kept = (0..rank)
        .filter(|a| !axes.contains(a))
        .map(|a| data.shape[a].clone())
        .collect();
    Ok(OutputFact::new(data.dtype, kept))
}

/// Unsqueeze: inserts extent-1 axes at the listed output positions.
fn unsqueeze(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    let axes_f = required(inputs, 1, "axes")?;
    let rank = data.shape.len();
    let Some(axes) = const_axes(&axes_f, 1, "axes")? else {
        let n = axes_count(&axes_f)?.ok_or(OpError::NotConstant {
            index: 1,
            name: "axes",
        })?;
        // Where the axes go is unknown, but when every input dim is 1 (a scalar, as in
        // PyTorch's `Unsqueeze(Gather(Shape(x)))`) every output dim is 1 wherever they go.
        let all_ones = data.shape.iter().all(|d| *d == Dim::Fixed(1));
        let dim = if all_ones {
            Dim::Fixed(1)
        } else {
            Dim::Unknown
        };
        return Ok(OutputFact::new(data.dtype, vec![dim; rank + n]));
    };
    let out_rank = rank + axes.len();
    let axes = axes_in_rank(&axes, out_rank)?;
    let mut rest = data.shape.iter();
    let dims = (0..out_rank)
        .map(|a| {
            if axes.contains(&a) {
                Dim::Fixed(1)
            } else {
                // There are exactly `rank` non-inserted positions, so this never runs dry.
                rest.next().cloned().unwrap_or(Dim::Unknown)
            }
        })
        .collect();
    Ok(OutputFact::new(data.dtype, dims))
}

/// Shape: a 1-D i64 with one entry per selected axis (opset-15 clamping of start and end).
fn shape(
    start: i64,
    end: Option<i64>,
    inputs: &[Option<ValueFact>],
) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    let count = crate::shape::shape_range(data.shape.len(), start, end).len();
    Ok(OutputFact::new(DType::I64, vec![Dim::Fixed(count)]))
}

/// Dropout (inference): output like the input, optional bool mask of the same shape.
fn dropout(inputs: &[Option<ValueFact>], num_outputs: usize) -> Result<Vec<OutputFact>, OpError> {
    let data = required(inputs, 0, "data")?;
    if let Some(training) = optional(inputs, 2) {
        expect_dtype(&training, 2, "training_mode", &[DType::Bool])?;
        if training
            .value
            .and_then(|t| t.as_bool())
            .and_then(|v| v.first())
            == Some(&true)
        {
            return Err(OpError::Unsupported(
                "Dropout with training_mode = true is not supported: only inference is".into(),
            ));
        }
    }
    let output = OutputFact::new(data.dtype, data.shape.to_vec());
    match num_outputs {
        1 => Ok(vec![output]),
        2 => Ok(vec![
            output,
            OutputFact::new(DType::Bool, data.shape.to_vec()),
        ]),
        n => Err(OpError::Shape(format!(
            "Dropout has an output and an optional mask, the node declares {n} outputs"
        ))),
    }
}

/// Pad: each padded axis grows by begin + end (negative pads crop). The shape does not
/// depend on the mode, so every mode is inferred; executors refuse the modes they lack.
fn pad(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    let pads_f = required(inputs, 1, "pads")?;
    let rank = data.shape.len();
    if let Some(value) = optional(inputs, 2) {
        expect_dtype(&value, 2, "constant_value", &[data.dtype])?;
    }
    let pads = const_ints(&pads_f, 1, "pads")?;
    let axes: Option<Vec<usize>> = match optional(inputs, 3) {
        Some(f) => const_ints(&f, 3, "axes")?
            .map(|a| axes_in_rank(&a, rank))
            .transpose()?,
        None => Some((0..rank).collect()),
    };
    let mut out = data.shape.to_vec();
    let (Some(pads), Some(axes)) = (pads, axes.clone()) else {
        match axes {
            Some(axes) => axes.iter().for_each(|&a| out[a] = Dim::Unknown),
            None => out.iter_mut().for_each(|d| *d = Dim::Unknown),
        }
        return Ok(OutputFact::new(data.dtype, out));
    };
    if pads.len() != 2 * axes.len() {
        return Err(OpError::Shape(format!(
            "Pad's pads {pads:?} must have 2 entries per padded axis ({} axes)",
            axes.len()
        )));
    }
    for (i, &axis) in axes.iter().enumerate() {
        let (b, e) = (pads[i], pads[i + axes.len()]);
        out[axis] = match &out[axis] {
            Dim::Fixed(d) => {
                let extent = *d as i128 + b as i128 + e as i128;
                Dim::Fixed(usize::try_from(extent).map_err(|_| {
                    OpError::Shape(format!(
                        "Pad's pads {pads:?} leave axis {axis} of shape {} with extent {extent}",
                        format_sym(data.shape)
                    ))
                })?)
            }
            other if b == 0 && e == 0 => other.clone(),
            _ => Dim::Unknown,
        };
    }
    Ok(OutputFact::new(data.dtype, out))
}

/// Expand: bidirectional broadcast of the input shape with the `shape` operand.
fn expand(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "input")?;
    let shape_f = required(inputs, 1, "shape")?;
    let Some(spec) = const_ints(&shape_f, 1, "shape")? else {
        let n = fixed_len(&shape_f)?.ok_or(OpError::NotConstant {
            index: 1,
            name: "shape",
        })?;
        // An input extent other than 1 survives any valid target; the rest are unknown.
        let rank = n.max(data.shape.len());
        let offset = rank - data.shape.len();
        let dims = (0..rank)
            .map(|k| match k.checked_sub(offset).map(|i| &data.shape[i]) {
                Some(Dim::Fixed(d)) if *d != 1 => Dim::Fixed(*d),
                _ => Dim::Unknown,
            })
            .collect();
        return Ok(OutputFact::new(data.dtype, dims));
    };
    let target = spec
        .iter()
        .map(|&d| usize::try_from(d).map(Dim::Fixed))
        .collect::<Result<SymShape, _>>()
        .map_err(|_| OpError::Shape(format!("Expand's shape {spec:?} has a negative dim")))?;
    let out = broadcast_sym(&[data.shape, &target])?;
    Ok(OutputFact::new(data.dtype, out))
}

/// Checks an i64 1-D operand and returns its values when it is a constant.
fn const_ints(
    fact: &ValueFact,
    index: usize,
    name: &'static str,
) -> Result<Option<Vec<i64>>, OpError> {
    expect_dtype(fact, index, name, &[DType::I64])?;
    if fact.shape.len() != 1 {
        return Err(OpError::Shape(format!(
            "input {index} ({name}) must be a 1-D i64 tensor, got shape {}",
            format_sym(fact.shape)
        )));
    }
    Ok(fact.value.and_then(|t| t.to_i64_vec()))
}

/// Squeeze's and Unsqueeze's `axes`: checked to be i64 and 1-D or a scalar (one axis),
/// with its values when it is a constant. The spec says 1-D; onnxruntime and the ONNX
/// reference implementation both take a scalar too, and ONNX's own function expansions
/// (AffineGrid's) write one, so Concord reads it as they do.
fn const_axes(
    fact: &ValueFact,
    index: usize,
    name: &'static str,
) -> Result<Option<Vec<i64>>, OpError> {
    expect_dtype(fact, index, name, &[DType::I64])?;
    if fact.shape.len() > 1 {
        return Err(OpError::Shape(format!(
            "input {index} ({name}) must be a 1-D i64 tensor or a scalar, got shape {}",
            format_sym(fact.shape)
        )));
    }
    Ok(fact.value.and_then(|t| t.to_i64_vec()))
}

/// How many axes an `axes` operand (1-D or a scalar) holds, when known.
fn axes_count(fact: &ValueFact) -> Result<Option<usize>, OpError> {
    match fact.shape {
        [] => Ok(Some(1)),
        _ => fixed_len(fact),
    }
}

/// The most elements a non-constant 1-D operand that becomes a rank or an axis count
/// (Reshape's and Expand's `shape`, Slice's `starts`, Squeeze's and Unsqueeze's `axes`,
/// ConstantOfShape's `input`, Col2Im's `image_shape` and `block_shape`) may declare: its length sizes the inferred output's dims before any value is known, so a
/// declared extent of 2^31 must be an error, not a vector of 2^31 dims.
pub const MAX_OPERAND_RANK: usize = 1 << 12;

/// The length of a 1-D operand, when fixed; an error over [`MAX_OPERAND_RANK`].
pub(super) fn fixed_len(fact: &ValueFact) -> Result<Option<usize>, OpError> {
    match fact.shape {
        [Dim::Fixed(n)] if *n > MAX_OPERAND_RANK => Err(OpError::Shape(format!(
            "a 1-D operand that gives a rank or an axis count declares {n} elements, over \
             the {MAX_OPERAND_RANK} a rank may have"
        ))),
        [Dim::Fixed(n)] => Ok(Some(*n)),
        _ => Ok(None),
    }
}

/// Normalises possibly-negative axes against `rank`, rejecting repeats.
fn axes_in_rank(axes: &[i64], rank: usize) -> Result<Vec<usize>, OpError> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(a, rank).map_err(|_| OpError::Attribute {
            name: "axes",
            detail: format!("axis {a} is out of range for rank {rank}"),
        })?;
        if out.contains(&n) {
            return Err(OpError::Attribute {
                name: "axes",
                detail: format!("axis {a} is repeated in {axes:?}"),
            });
        }
        out.push(n);
    }
    Ok(out)
}

/// The product of dims: fixed when all are (or any is 0), the single symbolic dim when the
/// others multiply to 1, unknown otherwise.
fn product_dims(dims: &[Dim]) -> Dim {
    let mut fixed: usize = 1;
    let mut symbols = Vec::new();
    for d in dims {
        match d {
            Dim::Fixed(0) => return Dim::Fixed(0),
            Dim::Fixed(n) => fixed = fixed.saturating_mul(*n),
            other => symbols.push(other),
        }
    }
    match symbols.as_slice() {
        [] => Dim::Fixed(fixed),
        [one] if fixed == 1 => (*one).clone(),
        _ => Dim::Unknown,
    }
}

/// The product of dims when every one is present and fixed.
fn fixed_product<'a>(dims: impl Iterator<Item = Option<&'a Dim>>) -> Option<u128> {
    let mut product: u128 = 1;
    for d in dims {
        match d {
            Some(Dim::Fixed(n)) => product = product.saturating_mul(*n as u128),
            _ => return None,
        }
    }
    Some(product)
}

/// The sum of dims: fixed when all are, the single symbolic dim when the others are 0,
/// unknown otherwise.
fn sum_dims(dims: &[Dim]) -> Dim {
    let mut fixed: usize = 0;
    let mut symbols = Vec::new();
    for d in dims {
        match d {
            Dim::Fixed(n) => fixed = fixed.saturating_add(*n),
            other => symbols.push(other),
        }
    }
    match symbols.as_slice() {
        [] => Dim::Fixed(fixed),
        [one] if fixed == 0 => (*one).clone(),
        _ => Dim::Unknown,
    }
}
