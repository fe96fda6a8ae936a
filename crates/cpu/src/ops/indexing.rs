//! Indexing kernels: ConstantOfShape, Range, Tile, CumSum, CumProd, BitCast, GatherElements, GatherND,
//! ScatterElements, ScatterND, OneHot, Trilu, NonZero, Size, DepthToSpace, SpaceToDepth,
//! EyeLike, TopK, CastLike, Compress and TensorScatter; NonMaxSuppression and Unique route
//! to `selection.rs`, TfIdfVectorizer to `ngram.rs`.
//!
//! Elements move bit-exactly (through [`TensorData::gather`]); the ones that compute (CumSum,
//! the scatter reductions, Range) do so in f64 for floats and exactly in i128 for integers,
//! rounding once. Every index read from data is checked against its axis (negative ones
//! count from the end, as ONNX says) and an index out of range is an error naming it.

use super::movement::cast::cast;
use super::{optional, required};
use concord_core::op::{Op, ScatterReduction};
use concord_core::shape::normalize_axis;
use concord_core::{DType, OpError, Shape, Tensor, TensorData};

/// Runs one indexing op, returning its outputs.
pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let one = |t: Result<Tensor, OpError>| t.map(|t| vec![t]);
    match op {
        Op::ConstantOfShape { value } => one(constant_of_shape(value, inputs)),
        Op::Range => one(range(inputs)),
        Op::Tile => one(tile(inputs)),
        Op::CumSum { exclusive, reverse } => {
            one(cumulative(Running::Sum, *exclusive, *reverse, inputs))
        }
        Op::CumProd { exclusive, reverse } => {
            one(cumulative(Running::Product, *exclusive, *reverse, inputs))
        }
        Op::BitCast { to } => one(bit_cast(*to, inputs)),
        Op::GatherElements { axis } => one(gather_elements(*axis, inputs)),
        Op::GatherND { batch_dims } => one(gather_nd(*batch_dims, inputs)),
        Op::ScatterElements { axis, reduction } => one(scatter_elements(*axis, *reduction, inputs)),
        Op::ScatterND { reduction } => one(scatter_nd(*reduction, inputs)),
        Op::OneHot { axis } => one(one_hot(*axis, inputs)),
        Op::Trilu { upper } => one(trilu(*upper, inputs)),
        Op::NonZero => one(non_zero(inputs)),
        Op::Size => {
            let data = required(inputs, 0, "data")?;
            Ok(vec![Tensor::scalar_i64(data.len() as i64)])
        }
        Op::DepthToSpace { blocksize, crd } => one(depth_to_space(*blocksize, *crd, inputs)),
        Op::SpaceToDepth { blocksize, crd } => one(space_to_depth(*blocksize, *crd, inputs)),
        Op::EyeLike { dtype, k } => one(eye_like(*dtype, *k, inputs)),
        Op::TopK {
            axis,
            largest,
            sorted,
        } => top_k(*axis, *largest, *sorted, inputs, num_outputs),
        Op::CastLike => {
            let like = required(inputs, 1, "target_type")?;
            one(cast(like.dtype(), inputs))
        }
        Op::Compress { axis } => one(compress(*axis, inputs)),
        Op::CenterCropPad { axes } => one(center_crop_pad(axes.as_deref(), inputs)),
        Op::ReverseSequence {
            batch_axis,
            time_axis,
        } => one(reverse_sequence(*batch_axis, *time_axis, inputs)),
        Op::NonMaxSuppression { center_point_box } => one(super::selection::non_max_suppression(
            *center_point_box,
            inputs,
        )),
        Op::Unique { axis, sorted } => {
            super::selection::unique(*axis, *sorted, inputs, num_outputs)
        }
        Op::TensorScatter { axis, circular } => one(tensor_scatter(*axis, *circular, inputs)),
        Op::TfIdfVectorizer(t) => one(super::ngram::tf_idf_vectorizer(t, inputs)),
        other => Err(super::not_in_family(other)),
    }
}

/// The row-major strides of `dims` (the shape's own rule).
fn strides(dims: &[usize]) -> Vec<usize> {
    Shape::from(dims).strides()
}

/// Every coordinate of `dims` in row-major order, passed to `f` with its flat index.
fn for_each_coord(
    dims: &[usize],
    mut f: impl FnMut(usize, &[usize]) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let n = numel(dims)?;
    let mut coord = vec![0usize; dims.len()];
    for flat in 0..n {
        f(flat, &coord)?;
        for k in (0..dims.len()).rev() {
            coord[k] += 1;
            if coord[k] < dims[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    Ok(())
}

fn numel(dims: &[usize]) -> Result<usize, OpError> {
    Shape::from(dims)
        .checked_numel()
        .ok_or_else(|| OpError::Shape(format!("shape {} is too large", Shape::from(dims))))
}

/// An index operand's values (int32 or int64).
fn indices_of(t: &Tensor, index: usize, name: &'static str) -> Result<Vec<i64>, OpError> {
    t.to_i64_vec().ok_or(OpError::DType {
        index,
        name,
        expected: "i64 or i32".into(),
        actual: t.dtype(),
    })
}

/// A scalar (one-element) operand as f64.
fn scalar(t: &Tensor, index: usize, name: &'static str) -> Result<f64, OpError> {
    if t.len() != 1 {
        return Err(OpError::Shape(format!(
            "input {index} ({name}) must hold one element, it has shape {}",
            t.shape()
        )));
    }
    Ok(t.to_f64_vec()[0])
}

/// Resolves an index into an axis of extent `len`, negative counting from the end.
fn resolve_index(i: i64, len: usize, op: &str, what: &str) -> Result<usize, OpError> {
    let len_i = len as i64;
    let r = if i < 0 { i + len_i } else { i };
    if (0..len_i).contains(&r) {
        Ok(r as usize)
    } else {
        Err(OpError::Shape(format!(
            "{op}: {what} {i} is out of range for an axis of extent {len}"
        )))
    }
}

fn constant_of_shape(value: &Tensor, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let shape = required(inputs, 0, "input")?;
    let spec = indices_of(shape, 0, "input")?;
    let dims = spec
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            OpError::Shape(format!(
                "ConstantOfShape: shape {spec:?} has a negative dim"
            ))
        })?;
    let n = numel(&dims)?;
    let data = value.data().gather(&vec![0; n])?;
    Tensor::from_parts(Shape(dims), data)
}

/// Range: ceil((limit - start) / delta) elements start, start + delta, …; integers exactly.
fn range(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let start = required(inputs, 0, "start")?;
    let limit = required(inputs, 1, "limit")?;
    let delta = required(inputs, 2, "delta")?;
    let dtype = start.dtype();
    for (i, name, t) in [(1, "limit", limit), (2, "delta", delta)] {
        if t.dtype() != dtype {
            return Err(OpError::DType {
                index: i,
                name,
                expected: format!("{dtype} (the dtype of start)"),
                actual: t.dtype(),
            });
        }
    }
    let (s, l, d) = (
        scalar(start, 0, "start")?,
        scalar(limit, 1, "limit")?,
        scalar(delta, 2, "delta")?,
    );
    if d == 0.0 {
        return Err(OpError::Shape("Range: delta is 0".into()));
    }
    let count = ((l - s) / d).ceil().max(0.0);
    // At most u32::MAX elements, whatever the memory budget (the cast saturates, so an
    // infinite count is refused too). A conversion, not a comparison with 2^32: moving that
    // bound by one element is no behaviour a test could pin without materialising 2^32
    // elements.
    let Ok(count) = u32::try_from(count as u64) else {
        return Err(OpError::Shape(format!(
            "Range from {s} to {l} by {d} has {count} elements, more than Concord materialises"
        )));
    };
    let count = count as usize;
    if let (Some(s), Some(d)) = (start.to_i128_vec(), delta.to_i128_vec()) {
        let values = (0..count as i128).map(|i| s[0] + i * d[0]).collect();
        return Tensor::from_i128(dtype, Shape::new([count]), values);
    }
    // ONNX defines each element as start + i * delta (not a running sum).
    let values = (0..count).map(|i| s + i as f64 * d).collect();
    Tensor::from_f64(dtype, Shape::new([count]), values)
}

fn tile(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    let repeats = indices_of(required(inputs, 1, "repeats")?, 1, "repeats")?;
    if repeats.len() != x.rank() {
        return Err(OpError::Shape(format!(
            "Tile: input 1 (repeats) has {} entries, input 0 has rank {}",
            repeats.len(),
            x.rank()
        )));
    }
    let reps = repeats
        .iter()
        .map(|&r| usize::try_from(r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| OpError::Shape(format!("Tile: repeats {repeats:?} has a negative entry")))?;
    let in_dims = x.dims();
    let out_dims: Vec<usize> = in_dims.iter().zip(&reps).map(|(d, r)| d * r).collect();
    let in_strides = strides(in_dims);
    let mut sources = Vec::with_capacity(numel(&out_dims)?);
    for_each_coord(&out_dims, |_, c| {
        sources.push(
            c.iter()
                .enumerate()
                .map(|(k, &ck)| (ck % in_dims[k]) * in_strides[k])
                .sum(),
        );
        Ok(())
    })?;
    Tensor::from_parts(Shape(out_dims), x.data().gather(&sources)?)
}

/// Which running combination CumSum and CumProd compute.
#[derive(Clone, Copy)]
enum Running {
    Sum,
    Product,
}

/// CumSum and CumProd: the running sum or product along `axis`, from its end when
/// `reverse`, each output leaving out its own element when `exclusive` (the first is then
/// the identity, 0 or 1). Integers combine exactly, wrapping at their width; floats in f64,
/// rounded once per output.
fn cumulative(
    running: Running,
    exclusive: bool,
    reverse: bool,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let name = match running {
        Running::Sum => "CumSum",
        Running::Product => "CumProd",
    };
    let x = required(inputs, 0, "x")?;
    let axis_t = required(inputs, 1, "axis")?;
    let axis = indices_of(axis_t, 1, "axis")?;
    let [axis] = axis.as_slice() else {
        return Err(OpError::Shape(format!(
            "{name}: input 1 (axis) must hold one element, it has shape {}",
            axis_t.shape()
        )));
    };
    let axis = normalize_axis(*axis, x.rank())?;
    let dims = x.dims();
    // The output is sized by the input's length; an empty input walks nothing.
    let (outer, inner) = super::walk_extents(dims, axis);
    let n = dims[axis];
    let order: Vec<usize> = if reverse {
        (0..n).rev().collect()
    } else {
        (0..n).collect()
    };
    macro_rules! scan {
        ($values:expr, $zero:expr, $add:expr) => {{
            let values = $values;
            let mut out = vec![$zero; values.len()];
            for o in 0..outer {
                for i in 0..inner {
                    let mut acc = $zero;
                    for &k in &order {
                        let at = (o * n + k) * inner + i;
                        if exclusive {
                            out[at] = acc;
                            acc = $add(acc, values[at]);
                        } else {
                            acc = $add(acc, values[at]);
                            out[at] = acc;
                        }
                    }
                }
            }
            out
        }};
    }
    if let Some(v) = x.to_i128_vec() {
        // Wrapping modulo 2^128 keeps the low 64 bits (every width here) exact.
        let out = match running {
            Running::Sum => scan!(v, 0i128, i128::wrapping_add),
            Running::Product => scan!(v, 1i128, i128::wrapping_mul),
        };
        return Tensor::from_i128(x.dtype(), x.shape().clone(), out);
    }
    let out = match running {
        Running::Sum => scan!(x.to_f64_vec(), 0.0f64, |a: f64, b: f64| a + b),
        Running::Product => scan!(x.to_f64_vec(), 1.0f64, |a: f64, b: f64| a * b),
    };
    Tensor::from_f64(x.dtype(), x.shape().clone(), out)
}

/// BitCast: the input's little-endian bytes read as `to`, which has the input's width. A
/// bool is one byte; Concord's bools are 0 or 1, so a byte other than those read as bool
/// becomes true (1), where numpy would keep the byte.
fn bit_cast(to: DType, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    if x.dtype().size_in_bytes() != to.size_in_bytes() {
        return Err(OpError::Attribute {
            name: "to",
            detail: format!(
                "BitCast needs one width: input is {} ({} bytes), `to` is {} ({} bytes)",
                x.dtype(),
                x.dtype().size_in_bytes(),
                to,
                to.size_in_bytes()
            ),
        });
    }
    let bytes = x.data().to_le_bytes();
    let data = TensorData::from_le_bytes(to, &bytes).ok_or_else(|| {
        OpError::Shape(format!(
            "BitCast: {} bytes are not a whole number of {to} elements",
            bytes.len()
        ))
    })?;
    Tensor::from_parts(x.shape().clone(), data)
}

/// For every element of `indices_t`, the flat offset in `data` it addresses: its own
/// coordinates, with the one on `axis` replaced by the index (GatherElements reads there,
/// ScatterElements writes there).
fn element_offsets(
    op: &str,
    axis: i64,
    data: &Tensor,
    indices_t: &Tensor,
    indices: &[i64],
) -> Result<Vec<usize>, OpError> {
    let axis = normalize_axis(axis, data.rank())?;
    let d_strides = strides(data.dims());
    let mut offsets = Vec::with_capacity(indices.len());
    for_each_coord(indices_t.dims(), |flat, c| {
        let mut offset = 0;
        for (k, &ck) in c.iter().enumerate() {
            let ck = if k == axis {
                resolve_index(indices[flat], data.dims()[k], op, "index")?
            } else if ck < data.dims()[k] {
                ck
            } else {
                return Err(OpError::Shape(format!(
                    "{op}: indices {} exceed data {} off the axis",
                    indices_t.shape(),
                    data.shape()
                )));
            };
            offset += ck * d_strides[k];
        }
        offsets.push(offset);
        Ok(())
    })?;
    Ok(offsets)
}

fn gather_elements(axis: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let indices_t = required(inputs, 1, "indices")?;
    let indices = indices_of(indices_t, 1, "indices")?;
    if data.rank() != indices_t.rank() {
        return Err(OpError::Shape(format!(
            "GatherElements: indices {} must have the rank of data {}",
            indices_t.shape(),
            data.shape()
        )));
    }
    let sources = element_offsets("GatherElements", axis, data, indices_t, &indices)?;
    Tensor::from_parts(indices_t.shape().clone(), data.data().gather(&sources)?)
}

/// The flat offsets and slice size GatherND and ScatterND address: for every index tuple
/// (with the batch prefix), the offset of the slice it names in data.
fn nd_offsets(
    op: &str,
    data: &Tensor,
    indices_t: &Tensor,
    batch_dims: usize,
) -> Result<(Vec<usize>, usize, Vec<usize>), OpError> {
    let indices = indices_of(indices_t, 1, "indices")?;
    let idims = indices_t.dims();
    let ddims = data.dims();
    let q = idims.last().copied().unwrap_or(0);
    if idims.is_empty() || batch_dims >= idims.len() || batch_dims + q > ddims.len() {
        return Err(OpError::Shape(format!(
            "{op}: indices {} with batch_dims {batch_dims} do not fit data {}",
            indices_t.shape(),
            data.shape()
        )));
    }
    if idims[..batch_dims] != ddims[..batch_dims] {
        return Err(OpError::Shape(format!(
            "{op}: the batch dims of indices {} and data {} differ",
            indices_t.shape(),
            data.shape()
        )));
    }
    let slice = numel(&ddims[batch_dims + q..])?;
    let d_strides = strides(ddims);
    let tuples = match indices.len().checked_div(q) {
        Some(t) => t,
        // q = 0: every index tuple is empty and names the whole of data.
        None => numel(&idims[..idims.len() - 1])?,
    };
    let per_batch = tuples / numel(&idims[..batch_dims])?.max(1);
    let mut offsets = Vec::with_capacity(tuples);
    for t in 0..tuples {
        let batch = t / per_batch.max(1);
        // The batch coordinate's offset in data.
        let mut offset = 0;
        let mut rem = batch;
        for k in (0..batch_dims).rev() {
            offset += (rem % ddims[k]) * d_strides[k];
            rem /= ddims[k];
        }
        for j in 0..q {
            let k = batch_dims + j;
            offset += resolve_index(indices[t * q + j], ddims[k], op, "index")? * d_strides[k];
        }
        offsets.push(offset);
    }
    let mut out_dims = idims[..idims.len() - 1].to_vec();
    out_dims.extend_from_slice(&ddims[batch_dims + q..]);
    Ok((offsets, slice, out_dims))
}

fn gather_nd(batch_dims: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let indices_t = required(inputs, 1, "indices")?;
    let b = usize::try_from(batch_dims)
        .map_err(|_| OpError::Shape(format!("GatherND: batch_dims {batch_dims} is negative")))?;
    let (offsets, slice, out_dims) = nd_offsets("GatherND", data, indices_t, b)?;
    let sources: Vec<usize> = offsets
        .iter()
        .flat_map(|&o| (0..slice).map(move |i| o + i))
        .collect();
    Tensor::from_parts(Shape(out_dims), data.data().gather(&sources)?)
}

/// Applies `updates[u]` to `out[targets[u]]` with `reduction`, in update order (so a
/// repeated target without reduction keeps the last update, as the ONNX reference does).
/// Bools reduce as the ONNX reference implementation's numpy does on bools: add and max are
/// or, mul and min are and (the exact integer path, 0 and 1 read back as `!= 0`).
fn scatter(
    data: &Tensor,
    targets: &[usize],
    updates: &Tensor,
    reduction: ScatterReduction,
) -> Result<Tensor, OpError> {
    if updates.dtype() != data.dtype() {
        return Err(OpError::DType {
            index: 2,
            name: "updates",
            expected: data.dtype().name().into(),
            actual: updates.dtype(),
        });
    }
    if targets.len() != updates.len() {
        return Err(OpError::Shape(format!(
            "scatter: {} updates for {} targets",
            updates.len(),
            targets.len()
        )));
    }
    if reduction == ScatterReduction::None {
        let mut sources: Vec<Option<usize>> = (0..data.len()).map(Some).collect();
        // Updates are read from a second buffer: the concatenation [data, updates].
        for (u, &t) in targets.iter().enumerate() {
            let slot = sources
                .get_mut(t)
                .ok_or_else(|| OpError::Shape(format!("scatter target {t} out of range")))?;
            *slot = Some(data.len() + u);
        }
        let both = TensorData::concat(data.dtype(), &[data.data(), updates.data()])?;
        let sources: Vec<usize> = sources.into_iter().map(|s| s.unwrap_or(0)).collect();
        return Tensor::from_parts(data.shape().clone(), both.gather(&sources)?);
    }
    if let (Some(mut out), Some(up)) = (data.to_i128_vec(), updates.to_i128_vec()) {
        for (&t, &u) in targets.iter().zip(&up) {
            let slot = out
                .get_mut(t)
                .ok_or_else(|| OpError::Shape(format!("scatter target {t} out of range")))?;
            *slot = match reduction {
                ScatterReduction::Add => slot.wrapping_add(u),
                ScatterReduction::Mul => slot.wrapping_mul(u),
                ScatterReduction::Max => (*slot).max(u),
                ScatterReduction::Min => (*slot).min(u),
                ScatterReduction::None => u,
            };
        }
        return Tensor::from_i128(data.dtype(), data.shape().clone(), out);
    }
    let mut out = data.to_f64_vec();
    for (&t, u) in targets.iter().zip(updates.to_f64_vec()) {
        let slot = out
            .get_mut(t)
            .ok_or_else(|| OpError::Shape(format!("scatter target {t} out of range")))?;
        *slot = match reduction {
            ScatterReduction::Add => *slot + u,
            ScatterReduction::Mul => *slot * u,
            ScatterReduction::Max => slot.max(u),
            ScatterReduction::Min => slot.min(u),
            ScatterReduction::None => u,
        };
    }
    Tensor::from_f64(data.dtype(), data.shape().clone(), out)
}

fn scatter_elements(
    axis: i64,
    reduction: ScatterReduction,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let indices_t = required(inputs, 1, "indices")?;
    let updates = required(inputs, 2, "updates")?;
    let indices = indices_of(indices_t, 1, "indices")?;
    if indices_t.shape() != updates.shape() || indices_t.rank() != data.rank() {
        return Err(OpError::Shape(format!(
            "ScatterElements: indices {} and updates {} must have one shape, of data {}'s rank",
            indices_t.shape(),
            updates.shape(),
            data.shape()
        )));
    }
    let targets = element_offsets("ScatterElements", axis, data, indices_t, &indices)?;
    scatter(data, &targets, updates, reduction)
}

fn scatter_nd(reduction: ScatterReduction, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let data = required(inputs, 0, "data")?;
    let indices_t = required(inputs, 1, "indices")?;
    let updates = required(inputs, 2, "updates")?;
    let (offsets, slice, update_dims) = nd_offsets("ScatterND", data, indices_t, 0)?;
    if updates.dims() != update_dims.as_slice() {
        return Err(OpError::Shape(format!(
            "ScatterND: updates {} must have shape {}",
            updates.shape(),
            Shape(update_dims)
        )));
    }
    let targets: Vec<usize> = offsets
        .iter()
        .flat_map(|&o| (0..slice).map(move |i| o + i))
        .collect();
    scatter(data, &targets, updates, reduction)
}

fn one_hot(axis: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let indices_t = required(inputs, 0, "indices")?;
    let depth = scalar(required(inputs, 1, "depth")?, 1, "depth")?;
    let values = required(inputs, 2, "values")?;
    if values.len() != 2 {
        return Err(OpError::Shape(format!(
            "OneHot: input 2 (values) must hold [off, on], it has shape {}",
            values.shape()
        )));
    }
    if !(depth >= 1.0 && depth <= (1u64 << 32) as f64) {
        return Err(OpError::Shape(format!(
            "OneHot: depth {depth} is not a positive size"
        )));
    }
    let depth = depth as usize;
    let idx: Vec<f64> = indices_t.to_f64_vec();
    let rank = indices_t.rank() + 1;
    let axis = normalize_axis(axis, rank)?;
    let mut out_dims = indices_t.dims().to_vec();
    out_dims.insert(axis, depth);
    let i_strides = strides(indices_t.dims());
    let mut sources = Vec::with_capacity(numel(&out_dims)?);
    for_each_coord(&out_dims, |_, c| {
        let mut flat = 0;
        for (k, &ck) in c.iter().enumerate().filter(|(k, _)| *k != axis) {
            // `k > axis` and `k >= axis` agree here: the filter has taken k == axis out
            // (the `>=` mutant is excluded in .cargo/mutants.toml for that reason).
            let j = if k > axis { k - 1 } else { k };
            flat += ck * i_strides[j];
        }
        // Indices are truncated toward zero; negative ones count from the end; out-of-range
        // ones select no class (every element off), as the spec says.
        let i = idx[flat].trunc() as i64;
        let i = if i < 0 { i + depth as i64 } else { i };
        sources.push(usize::from(i == c[axis] as i64));
        Ok(())
    })?;
    Tensor::from_parts(Shape(out_dims), values.data().gather(&sources)?)
}

fn trilu(upper: bool, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    let k = match optional(inputs, 1) {
        Some(t) => scalar(t, 1, "k")? as i64,
        None => 0,
    };
    if x.rank() < 2 {
        return Err(OpError::Shape(format!(
            "Trilu needs rank 2 or more, got {}",
            x.shape()
        )));
    }
    let dims = x.dims();
    let (rows, cols) = (dims[dims.len() - 2], dims[dims.len() - 1]);
    let zero = TensorData::zeros(x.dtype(), 1);
    let mut sources = Vec::with_capacity(x.len());
    for flat in 0..x.len() {
        let col = (flat % cols) as i64;
        let row = ((flat / cols) % rows.max(1)) as i64;
        let keep = if upper {
            col - row >= k
        } else {
            col - row <= k
        };
        sources.push(keep.then_some(flat));
    }
    Tensor::from_parts(x.shape().clone(), x.data().gather_or_fill(&sources, &zero)?)
}

fn non_zero(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let values = x.to_f64_vec();
    let mut coords: Vec<Vec<i64>> = vec![Vec::new(); x.rank()];
    for_each_coord(x.dims(), |flat, c| {
        if values[flat] != 0.0 {
            for (k, &ck) in c.iter().enumerate() {
                coords[k].push(ck as i64);
            }
        }
        Ok(())
    })?;
    let count = coords.first().map_or(
        usize::from(x.rank() == 0 && values.first().is_some_and(|v| *v != 0.0)),
        Vec::len,
    );
    let data: Vec<i64> = coords.into_iter().flatten().collect();
    Tensor::from_parts(Shape::new([x.rank(), count]), TensorData::I64(data))
}

fn depth_to_space(
    blocksize: usize,
    crd: bool,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    let (n, c, h, w) = nchw(x, "DepthToSpace")?;
    let b = blocksize;
    // The blocksize comes from the model: products past usize are errors, not overflows.
    let scaled = [b.checked_mul(b), h.checked_mul(b), w.checked_mul(b)];
    let [Some(b2), Some(oh), Some(ow)] = scaled else {
        return Err(OpError::Shape(format!(
            "DepthToSpace: blocksize {b} scales {h}x{w} past a 64-bit extent"
        )));
    };
    if b == 0 || c % b2 != 0 {
        return Err(OpError::Shape(format!(
            "DepthToSpace: channels {c} are not a multiple of blocksize² ({b}²)"
        )));
    }
    let oc = c / b2;
    let out_dims = vec![n, oc, oh, ow];
    let mut sources = Vec::with_capacity(x.len());
    for_each_coord(&out_dims, |_, o| {
        let (ni, ci, y, xx) = (o[0], o[1], o[2], o[3]);
        let (hi, bh, wi, bw) = (y / b, y % b, xx / b, xx % b);
        // DCR: depth is (bh, bw, c); CRD: (c, bh, bw).
        let ic = if crd {
            (ci * b + bh) * b + bw
        } else {
            (bh * b + bw) * oc + ci
        };
        sources.push(((ni * c + ic) * h + hi) * w + wi);
        Ok(())
    })?;
    Tensor::from_parts(Shape(out_dims), x.data().gather(&sources)?)
}

fn space_to_depth(
    blocksize: usize,
    crd: bool,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    let (n, c, h, w) = nchw(x, "SpaceToDepth")?;
    let b = blocksize;
    if b == 0 || h % b != 0 || w % b != 0 {
        return Err(OpError::Shape(format!(
            "SpaceToDepth: spatial dims {h}x{w} are not multiples of blocksize {b}"
        )));
    }
    let Some(oc) = b.checked_mul(b).and_then(|b2| c.checked_mul(b2)) else {
        return Err(OpError::Shape(format!(
            "SpaceToDepth: {c} channels times blocksize² ({b}²) pass a 64-bit extent"
        )));
    };
    let out_dims = vec![n, oc, h / b, w / b];
    let mut sources = Vec::with_capacity(x.len());
    for_each_coord(&out_dims, |_, o| {
        let (ni, oc, hi, wi) = (o[0], o[1], o[2], o[3]);
        // The inverse of DepthToSpace in the same mode. DCR: depth is (bh, bw, c);
        // CRD: (c, bh, bw).
        let (bh, bw, ci) = if crd {
            ((oc / b) % b, oc % b, oc / (b * b))
        } else {
            (oc / (b * c), (oc / c) % b, oc % c)
        };
        sources.push(((ni * c + ci) * h + hi * b + bh) * w + wi * b + bw);
        Ok(())
    })?;
    Tensor::from_parts(Shape(out_dims), x.data().gather(&sources)?)
}

fn nchw(x: &Tensor, op: &str) -> Result<(usize, usize, usize, usize), OpError> {
    match *x.dims() {
        [n, c, h, w] => Ok((n, c, h, w)),
        _ => Err(OpError::Shape(format!(
            "{op} needs a 4-D (N, C, H, W) input, got {}",
            x.shape()
        ))),
    }
}

fn eye_like(dtype: Option<DType>, k: i64, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    let [rows, cols] = *x.dims() else {
        return Err(OpError::Shape(format!(
            "EyeLike needs a 2-D input, got {}",
            x.shape()
        )));
    };
    let dtype = dtype.unwrap_or(x.dtype());
    let values: Vec<f64> = (0..rows * cols)
        .map(|f| f64::from(u8::from((f % cols) as i64 - (f / cols) as i64 == k)))
        .collect();
    Tensor::from_f64(dtype, x.shape().clone(), values)
}

/// TopK: the k largest (or smallest) along `axis`, sorted, with their i64 indices; equal
/// values keep the lower index first, as the spec requires. NaN counts as largest.
fn top_k(
    axis: i64,
    largest: bool,
    sorted: bool,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let _ = sorted; // Always sorted: an unsorted order is any order, sorted included.
    let x = required(inputs, 0, "X")?;
    let k_t = required(inputs, 1, "K")?;
    let k = indices_of(k_t, 1, "K")?;
    let [k] = k.as_slice() else {
        return Err(OpError::Shape(format!(
            "TopK: K must hold one element, it has shape {}",
            k_t.shape()
        )));
    };
    let axis = normalize_axis(axis, x.rank())?;
    let dims = x.dims();
    let n = dims[axis];
    let k = usize::try_from(*k)
        .ok()
        .filter(|&k| k <= n)
        .ok_or_else(|| OpError::Shape(format!("TopK: K = {k} for an axis of extent {n}")))?;
    // An empty input may still have extents whose product overflows.
    let outer = numel(&dims[..axis])?;
    let inner = numel(&dims[axis + 1..])?;
    let keys = x.to_f64_vec();
    let exact = x.to_i128_vec();
    // Ascending order of two elements; NaN above every number.
    let ascending = |p: usize, q: usize| -> std::cmp::Ordering {
        match &exact {
            Some(v) => v[p].cmp(&v[q]),
            None => match (keys[p].is_nan(), keys[q].is_nan()) {
                (false, false) => keys[p]
                    .partial_cmp(&keys[q])
                    .unwrap_or(std::cmp::Ordering::Equal),
                (a, b) => a.cmp(&b),
            },
        }
    };
    let mut picked = vec![0usize; outer * k * inner];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| {
                let ord = ascending(at(a), at(b));
                let ord = if largest { ord.reverse() } else { ord };
                ord.then(a.cmp(&b))
            });
            for (r, &j) in order.iter().take(k).enumerate() {
                picked[(o * k + r) * inner + i] = at(j);
            }
        }
    }
    let mut out_dims = dims.to_vec();
    out_dims[axis] = k;
    let values = Tensor::from_parts(Shape(out_dims.clone()), x.data().gather(&picked)?)?;
    let indices: Vec<i64> = picked
        .iter()
        .map(|&flat| ((flat / inner) % n.max(1)) as i64)
        .collect();
    let indices = Tensor::from_parts(Shape(out_dims), TensorData::I64(indices))?;
    Ok(vec![values, indices]
        .into_iter()
        .take(num_outputs.max(1))
        .collect())
}

fn compress(axis: Option<i64>, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    let cond_t = required(inputs, 1, "condition")?;
    let cond = cond_t.as_bool().ok_or(OpError::DType {
        index: 1,
        name: "condition",
        expected: "bool".into(),
        actual: cond_t.dtype(),
    })?;
    let Some(axis) = axis else {
        let sources: Vec<usize> = (0..x.len())
            .filter(|&i| cond.get(i) == Some(&true))
            .collect();
        let n = sources.len();
        return Tensor::from_parts(Shape::new([n]), x.data().gather(&sources)?);
    };
    let axis = normalize_axis(axis, x.rank())?;
    let dims = x.dims();
    let kept: Vec<usize> = (0..dims[axis])
        .filter(|&j| cond.get(j) == Some(&true))
        .collect();
    let mut out_dims = dims.to_vec();
    out_dims[axis] = kept.len();
    let x_strides = strides(dims);
    let mut sources = Vec::with_capacity(numel(&out_dims)?);
    for_each_coord(&out_dims, |_, c| {
        sources.push(
            c.iter()
                .enumerate()
                .map(|(k, &ck)| if k == axis { kept[ck] } else { ck } * x_strides[k])
                .sum(),
        );
        Ok(())
    })?;
    Tensor::from_parts(Shape(out_dims), x.data().gather(&sources)?)
}

/// CenterCropPad: each named axis cropped (start at floor((in - out) / 2)) or zero-padded
/// (begin pad floor((out - in) / 2)) to its target extent.
fn center_crop_pad(axes: Option<&[i64]>, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input_data")?;
    let target = indices_of(required(inputs, 1, "shape")?, 1, "shape")?;
    let rank = x.rank();
    let axes: Vec<usize> = match axes {
        None => (0..rank).collect(),
        Some(a) => concord_core::shape::normalize_axes(a, rank)?,
    };
    if target.len() != axes.len() {
        return Err(OpError::Shape(format!(
            "CenterCropPad: shape {target:?} has {} values for {} axes",
            target.len(),
            axes.len()
        )));
    }
    let in_dims = x.dims();
    let mut out_dims = in_dims.to_vec();
    // Output coordinate c reads input coordinate c + offset (negative offsets pad).
    let mut offset = vec![0i64; rank];
    for (&axis, &t) in axes.iter().zip(&target) {
        let t = usize::try_from(t)
            .map_err(|_| OpError::Shape(format!("CenterCropPad: shape {target:?} is negative")))?;
        let d = in_dims[axis] as i64;
        // floor((in - out) / 2) when cropping, -floor((out - in) / 2) when padding: one
        // expression, as `/` truncates toward zero (a branch per case computed the same).
        offset[axis] = (d - t as i64) / 2;
        out_dims[axis] = t;
    }
    let in_strides = strides(in_dims);
    let mut sources = Vec::with_capacity(numel(&out_dims)?);
    for_each_coord(&out_dims, |_, c| {
        let mut flat = Some(0usize);
        for k in 0..rank {
            let src = c[k] as i64 + offset[k];
            flat = match flat {
                Some(f) if (0..in_dims[k] as i64).contains(&src) => {
                    Some(f + src as usize * in_strides[k])
                }
                _ => None,
            };
        }
        sources.push(flat);
        Ok(())
    })?;
    let zero = TensorData::zeros(x.dtype(), 1);
    Tensor::from_parts(Shape(out_dims), x.data().gather_or_fill(&sources, &zero)?)
}

/// ReverseSequence: along `time_axis`, the first sequence_lens[b] steps of batch entry b
/// (along `batch_axis`) in reverse order; the rest unchanged.
fn reverse_sequence(
    batch_axis: i64,
    time_axis: i64,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    let lens = indices_of(required(inputs, 1, "sequence_lens")?, 1, "sequence_lens")?;
    let b_axis = normalize_axis(batch_axis, x.rank())?;
    let t_axis = normalize_axis(time_axis, x.rank())?;
    if b_axis == t_axis {
        return Err(OpError::Attribute {
            name: "batch_axis",
            detail: format!("ReverseSequence: batch_axis and time_axis are both {b_axis}"),
        });
    }
    let dims = x.dims();
    if lens.len() != dims[b_axis] {
        return Err(OpError::Shape(format!(
            "ReverseSequence: sequence_lens has {} entries for a batch of {}",
            lens.len(),
            dims[b_axis]
        )));
    }
    let s = strides(dims);
    let mut sources = Vec::with_capacity(x.len());
    for_each_coord(dims, |flat, c| {
        let len = lens[c[b_axis]];
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= dims[t_axis])
            .ok_or_else(|| {
                OpError::Shape(format!(
                    "ReverseSequence: sequence length {len} for a time axis of {}",
                    dims[t_axis]
                ))
            })?;
        let t = c[t_axis];
        sources.push(if t < len {
            flat - t * s[t_axis] + (len - 1 - t) * s[t_axis]
        } else {
            flat
        });
        Ok(())
    })?;
    Tensor::from_parts(x.shape().clone(), x.data().gather(&sources)?)
}

/// TensorScatter: past_cache with each batch entry's update written along the sequence
/// axis from its write index. In circular mode only the sequence index wraps modulo
/// max_sequence: the spec's prose says so; its pseudocode takes np.mod of the whole index
/// tuple, which agrees wherever the other extents are at most max_sequence (as in every
/// node test), and would otherwise wrap batch and head indices too, which no cache layout
/// means.
fn tensor_scatter(
    axis: i64,
    circular: bool,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let past = required(inputs, 0, "past_cache")?;
    let update = required(inputs, 1, "update")?;
    if update.dtype() != past.dtype() {
        return Err(OpError::DType {
            index: 1,
            name: "update",
            expected: past.dtype().name().into(),
            actual: update.dtype(),
        });
    }
    let (p, u) = (past.dims(), update.dims());
    let seq = concord_core::infer::tensor_scatter_axis(axis, p.len())?;
    let fits = p.len() == u.len()
        && p.iter()
            .zip(u)
            .enumerate()
            .all(|(i, (p, u))| if i == seq { u <= p } else { u == p });
    if !fits {
        return Err(OpError::Shape(format!(
            "TensorScatter needs update {} to match past_cache {} on every axis but the \
             sequence axis {seq}, and to be no longer there",
            update.shape(),
            past.shape()
        )));
    }
    let batch = p[0];
    let write = match optional(inputs, 2) {
        Some(w) if w.dtype() != DType::I64 => {
            return Err(OpError::DType {
                index: 2,
                name: "write_indices",
                expected: DType::I64.name().into(),
                actual: w.dtype(),
            })
        }
        Some(w) if w.dims() != [batch] => {
            return Err(OpError::Shape(format!(
                "TensorScatter needs write_indices ({batch}), one per batch entry, got {}",
                w.shape()
            )))
        }
        Some(w) => indices_of(w, 2, "write_indices")?,
        None => vec![0; batch],
    };
    let max_sequence = p[seq];
    let strides = strides(p);
    let mut targets = Vec::with_capacity(update.len());
    for_each_coord(u, |_, coord| {
        let start = write[coord[0]];
        // In i128, where write index + step cannot overflow. The closure runs only for an
        // update with elements, so u[seq] >= 1 and (checked above) max_sequence >= u[seq]:
        // the modulus is never 0.
        let position = i128::from(start) + coord[seq] as i128;
        let position = if circular {
            position.rem_euclid(max_sequence as i128)
        } else {
            position
        };
        let position = usize::try_from(position)
            .ok()
            .filter(|&q| q < max_sequence)
            .ok_or_else(|| {
                OpError::Shape(format!(
                    "TensorScatter: batch entry {} writes {} steps from index {start}, past the \
                     {max_sequence} of the cache (linear mode needs write index + sequence \
                     length <= max sequence length)",
                    coord[0], u[seq]
                ))
            })?;
        let target: usize = coord
            .iter()
            .enumerate()
            .map(|(i, &c)| (if i == seq { position } else { c }) * strides[i])
            .sum();
        targets.push(target);
        Ok(())
    })?;
    scatter(past, &targets, update, ScatterReduction::None)
}
