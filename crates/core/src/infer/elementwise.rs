//! Shape and dtype inference for the elementwise, normalisation and reduction families:
//! broadcasting binary ops, unary ops and activations, Clip, Where, Softmax,
//! LayerNormalization, BatchNormalization and ReduceMean / ReduceSum / ReduceMax.
//!
//! The dtype rules here are the ones the reference kernels enforce, so a graph that infers
//! cleanly does not fail in a kernel on a dtype.

use super::{expect_dtype, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::{Accepts, ArgReduce, Binary, Op, Reduce, ReduceKind, Variadic};
use crate::shape::{broadcast_sym, format_sym, normalize_axes, normalize_axis, Dim, SymShape};

/// The arithmetic dtypes.
const NUMERIC: [DType; 12] = DType::NUMERIC;
const FLOAT: [DType; 4] = DType::FLOATS;

pub(super) fn infer(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let fact = match op {
        Op::Binary(b) => binary(*b, inputs)?,
        Op::Unary(u) => {
            let def = u.def();
            let x = required(inputs, 0, "X")?;
            expect_accepted(&x, 0, "X", def.accepts)?;
            let dtype = if def.bool_output {
                DType::Bool
            } else {
                x.dtype
            };
            OutputFact::new(dtype, x.shape.to_vec())
        }
        Op::Clip => clip(inputs)?,
        Op::Where => select(inputs)?,
        Op::Variadic(v) => variadic(*v, inputs)?,
        Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::Hardmax { axis } => {
            let x = required(inputs, 0, "input")?;
            expect_dtype(&x, 0, "input", &FLOAT)?;
            resolve_axis(op.name(), *axis, &x)?;
            OutputFact::new(x.dtype, x.shape.to_vec())
        }
        Op::LayerNormalization { axis, .. } => {
            let y = layer_normalization(*axis, inputs)?;
            if num_outputs <= 1 {
                y
            } else {
                // Mean and InvStdDev: f32 (stash_type 1), the normalised axes kept as 1.
                let x = required(inputs, 0, "X")?;
                let axis = resolve_axis("LayerNormalization", *axis, &x)?;
                let mut stat = x.shape[..axis].to_vec();
                stat.resize(x.shape.len(), Dim::Fixed(1));
                let stat = OutputFact::new(DType::F32, stat);
                let mut facts = vec![y, stat.clone(), stat];
                facts.truncate(num_outputs);
                return Ok(facts);
            }
        }
        Op::InstanceNormalization { .. }
        | Op::GroupNormalization { .. }
        | Op::RMSNormalization { .. }
        | Op::LpNormalization { .. }
        | Op::MeanVarianceNormalization { .. }
        | Op::LRN { .. } => {
            // Parameter shapes are checked by the kernel, which names them.
            let x = required(inputs, 0, "X")?;
            expect_dtype(&x, 0, "X", &FLOAT)?;
            if x.shape.is_empty() {
                return Err(OpError::Shape(format!(
                    "{} needs an input of rank 1 or more",
                    op.name()
                )));
            }
            OutputFact::new(x.dtype, x.shape.to_vec())
        }
        Op::Attention { .. } => return super::attention::attention(op, inputs, num_outputs),
        Op::SwiGLU { .. } => super::attention::swiglu(inputs)?,
        Op::LinearAttention { .. } => {
            return super::attention::linear_attention(op, inputs, num_outputs)
        }
        Op::RotaryEmbedding { .. } => super::attention::rotary_embedding(inputs)?,
        Op::BatchNormalization { .. } => batch_normalization(inputs)?,
        Op::ArgMax(attrs) | Op::ArgMin(attrs) => arg_reduce(op.name(), attrs, inputs)?,
        Op::Reduce(kind, attrs) => reduce(*kind, attrs, inputs)?,
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not in the elementwise family",
                other.name()
            )))
        }
    };
    Ok(vec![fact])
}

/// Checks that input `index` has the dtype of the input it is combined with.
fn expect_same(
    fact: &ValueFact,
    index: usize,
    name: &'static str,
    expected: DType,
    expected_from: &str,
) -> Result<(), OpError> {
    if fact.dtype == expected {
        return Ok(());
    }
    Err(OpError::DType {
        index,
        name,
        expected: format!("{expected} (the dtype of {expected_from})"),
        actual: fact.dtype,
    })
}

/// Broadcasts the shapes of named operands, naming each in the error.
fn broadcast(op: &str, operands: &[(usize, &str, &ValueFact)]) -> Result<SymShape, OpError> {
    let shapes: Vec<&[Dim]> = operands.iter().map(|(_, _, f)| f.shape).collect();
    broadcast_sym(&shapes).map_err(|e| {
        let described: Vec<String> = operands
            .iter()
            .map(|(i, name, f)| format!("input {i} ({name}) {}", format_sym(f.shape)))
            .collect();
        OpError::Shape(format!(
            "{op}: {} cannot be broadcast together: {e}",
            described.join(", ")
        ))
    })
}

/// Checks that input `index` has a dtype the op accepts.
fn expect_accepted(
    fact: &ValueFact,
    index: usize,
    name: &'static str,
    accepts: Accepts,
) -> Result<(), OpError> {
    if accepts.allows(fact.dtype) {
        return Ok(());
    }
    Err(OpError::DType {
        index,
        name,
        expected: accepts.describe().into(),
        actual: fact.dtype,
    })
}

fn binary(op: Binary, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let a = required(inputs, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    let def = op.def();
    expect_accepted(&a, 0, "A", def.accepts)?;
    if op == Binary::Pow {
        // The exponent may have another numeric dtype; the result keeps the base's.
        expect_dtype(&b, 1, "Y", &NUMERIC)?;
    } else {
        expect_same(&b, 1, "B", a.dtype, "input 0 (A)")?;
    }
    let dtype = if def.bool_output {
        DType::Bool
    } else {
        a.dtype
    };
    let shape = broadcast(op.name(), &[(0, "A", &a), (1, "B", &b)])?;
    Ok(OutputFact::new(dtype, shape))
}

/// Max, Min, Sum, Mean: one or more inputs of one dtype, broadcast together.
fn variadic(op: Variadic, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let first = required(inputs, 0, "data_0")?;
    expect_accepted(&first, 0, "data_0", op.accepts())?;
    let mut operands = Vec::with_capacity(inputs.len());
    for (index, input) in inputs.iter().enumerate() {
        let Some(fact) = input else {
            return Err(OpError::MissingInput {
                index,
                name: "data",
            });
        };
        expect_same(fact, index, "data", first.dtype, "input 0 (data_0)")?;
        operands.push((index, "data", fact));
    }
    let operands: Vec<(usize, &str, &ValueFact)> =
        operands.iter().map(|(i, n, f)| (*i, *n, *f)).collect();
    let shape = broadcast(op.name(), &operands)?;
    Ok(OutputFact::new(first.dtype, shape))
}

fn clip(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "input")?;
    expect_dtype(&x, 0, "input", &NUMERIC)?;
    for (index, name) in [(1, "min"), (2, "max")] {
        let Some(bound) = optional(inputs, index) else {
            continue;
        };
        expect_same(&bound, index, name, x.dtype, "input 0 (input)")?;
        // A bound must hold one element; a dim known to be other than 1 rules that out.
        if bound
            .shape
            .iter()
            .any(|d| matches!(d, Dim::Fixed(n) if *n != 1))
        {
            return Err(OpError::Shape(format!(
                "Clip: input {index} ({name}) must be a scalar (rank 0 or one element), it \
                 has shape {}",
                format_sym(bound.shape)
            )));
        }
    }
    Ok(OutputFact::new(x.dtype, x.shape.to_vec()))
}

fn select(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let cond = required(inputs, 0, "condition")?;
    let x = required(inputs, 1, "X")?;
    let y = required(inputs, 2, "Y")?;
    expect_dtype(&cond, 0, "condition", &[DType::Bool])?;
    expect_same(&y, 2, "Y", x.dtype, "input 1 (X)")?;
    let shape = broadcast(
        "Where",
        &[(0, "condition", &cond), (1, "X", &x), (2, "Y", &y)],
    )?;
    Ok(OutputFact::new(x.dtype, shape))
}

/// Resolves an `axis` attribute against input 0's rank, naming the shape in the error.
fn resolve_axis(op: &str, axis: i64, x: &ValueFact) -> Result<usize, OpError> {
    normalize_axis(axis, x.shape.len()).map_err(|_| OpError::Attribute {
        name: "axis",
        detail: format!(
            "{op}: axis {axis} is out of range for input 0 of shape {} (rank {})",
            format_sym(x.shape),
            x.shape.len()
        ),
    })
}

fn layer_normalization(axis: i64, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_dtype(&x, 0, "X", &FLOAT)?;
    let axis = resolve_axis("LayerNormalization", axis, &x)?;
    let normalized = &x.shape[axis..];
    let params = [
        (1, "Scale", Some(required(inputs, 1, "Scale")?)),
        (2, "B", optional(inputs, 2)),
    ];
    for (index, name, param) in params {
        let Some(param) = param else {
            continue;
        };
        expect_same(&param, index, name, x.dtype, "input 0 (X)")?;
        // The parameter must broadcast to the normalised shape without growing it.
        let fits = param.shape.len() <= normalized.len()
            && broadcast_sym(&[normalized, param.shape])
                .map(|s| s.len() == normalized.len() && fixed_dims_agree(&s, normalized))
                .unwrap_or(false);
        if !fits {
            return Err(OpError::Shape(format!(
                "LayerNormalization: input {index} ({name}) has shape {}, which does not \
                 broadcast to the normalised shape {} (input 0 (X) {} from axis {axis})",
                format_sym(param.shape),
                format_sym(normalized),
                format_sym(x.shape)
            )));
        }
    }
    Ok(OutputFact::new(x.dtype, x.shape.to_vec()))
}

/// True when every dim fixed in `target` is the same in `broadcast`, i.e. broadcasting a
/// parameter against `target` did not change any of its known extents.
fn fixed_dims_agree(broadcast: &[Dim], target: &[Dim]) -> bool {
    broadcast.iter().zip(target).all(|(b, t)| match t {
        Dim::Fixed(_) => b == t,
        _ => true,
    })
}

fn batch_normalization(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    expect_dtype(&x, 0, "X", &FLOAT)?;
    let Some(channels) = x.shape.get(1) else {
        return Err(OpError::Shape(format!(
            "BatchNormalization: input 0 (X) has shape {}; it needs rank 2 or more (N, C, …)",
            format_sym(x.shape)
        )));
    };
    for (index, name) in [(1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")] {
        let param = required(inputs, index, name)?;
        expect_dtype(&param, index, name, &FLOAT)?;
        let fits = match param.shape {
            [d] => match (d, channels) {
                (Dim::Fixed(p), Dim::Fixed(c)) => p == c,
                _ => true,
            },
            _ => false,
        };
        if !fits {
            return Err(OpError::Shape(format!(
                "BatchNormalization: input {index} ({name}) has shape {}, expected [{channels}] \
                 (the channel dim of input 0 (X) {})",
                format_sym(param.shape),
                format_sym(x.shape)
            )));
        }
    }
    Ok(OutputFact::new(x.dtype, x.shape.to_vec()))
}

/// The Reduce* ops. The output shape needs the axes, from the attribute or the `axes`
/// input's constant value; when that input is not constant, only a `keepdims` output has a
/// known rank. ReduceMax and ReduceMin take bool too (opset 20); the ones that take a log,
/// a root or a mean take floats and integers alike, as ONNX's schemas do.
fn reduce(
    kind: ReduceKind,
    attrs: &Reduce,
    inputs: &[Option<ValueFact>],
) -> Result<OutputFact, OpError> {
    let op = kind.name();
    let data = required(inputs, 0, "data")?;
    let accepts = match kind {
        ReduceKind::Max | ReduceKind::Min => Accepts::Any,
        _ => Accepts::Numeric,
    };
    expect_accepted(&data, 0, "data", accepts)?;
    let rank = data.shape.len();
    let axes_input = optional(inputs, 1);
    if let Some(axes) = &axes_input {
        expect_dtype(axes, 1, "axes", &[DType::I64])?;
        if axes.shape.len() != 1 {
            return Err(OpError::Shape(format!(
                "{op}: input 1 (axes) must be 1-D, it has shape {}",
                format_sym(axes.shape)
            )));
        }
    }
    let axes: Vec<i64> = match (&attrs.axes, axes_input) {
        (Some(attr), _) => attr.clone(),
        (None, None) => Vec::new(),
        (None, Some(input)) => match input.value.and_then(|t| t.to_i64_vec()) {
            Some(v) => v,
            None if attrs.keepdims => {
                // Each axis either stays or becomes 1; an axis already 1 is 1 either way.
                let shape = data
                    .shape
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(1) => Dim::Fixed(1),
                        _ => Dim::Unknown,
                    })
                    .collect();
                return Ok(OutputFact::new(data.dtype, shape));
            }
            // Without keepdims the output rank is the input's less the number of axes,
            // which the axes input's length gives (ONNX forbids repeated axes); the
            // extents are known when the reference computes them.
            None => match input.shape {
                [Dim::Fixed(k)] if *k > 0 && *k <= rank => {
                    return Ok(OutputFact::new(data.dtype, vec![Dim::Unknown; rank - k]));
                }
                _ => {
                    return Err(OpError::NotConstant {
                        index: 1,
                        name: "axes",
                    })
                }
            },
        },
    };
    if axes.is_empty() && attrs.noop_with_empty_axes {
        return Ok(OutputFact::new(data.dtype, data.shape.to_vec()));
    }
    let reduced: Vec<usize> = if axes.is_empty() {
        (0..rank).collect()
    } else {
        normalize_axes(&axes, rank).map_err(|e| OpError::Attribute {
            name: "axes",
            detail: format!(
                "{op}: axes {axes:?} are invalid for input 0 (data) of shape {}: {e}",
                format_sym(data.shape)
            ),
        })?
    };
    let shape = data
        .shape
        .iter()
        .enumerate()
        .filter_map(
            |(axis, d)| match (reduced.contains(&axis), attrs.keepdims) {
                (false, _) => Some(d.clone()),
                (true, true) => Some(Dim::Fixed(1)),
                (true, false) => None,
            },
        )
        .collect();
    Ok(OutputFact::new(data.dtype, shape))
}

/// ArgMax, ArgMin: i64 indices, `axis` removed (or kept as 1).
fn arg_reduce(
    op: &str,
    attrs: &ArgReduce,
    inputs: &[Option<ValueFact>],
) -> Result<OutputFact, OpError> {
    let data = required(inputs, 0, "data")?;
    expect_dtype(&data, 0, "data", &NUMERIC)?;
    let axis = normalize_axis(attrs.axis, data.shape.len()).map_err(|e| OpError::Attribute {
        name: "axis",
        detail: format!(
            "{op}: axis {} is invalid for input 0 (data) of shape {}: {e}",
            attrs.axis,
            format_sym(data.shape)
        ),
    })?;
    if matches!(data.shape[axis], Dim::Fixed(0)) {
        return Err(OpError::Shape(format!(
            "{op}: axis {axis} of input 0 (data) {} is empty, so it has no extreme value",
            format_sym(data.shape)
        )));
    }
    let mut shape = data.shape.to_vec();
    if attrs.keepdims {
        shape[axis] = Dim::Fixed(1);
    } else {
        shape.remove(axis);
    }
    Ok(OutputFact::new(DType::I64, shape))
}
