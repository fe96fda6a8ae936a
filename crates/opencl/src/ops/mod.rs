//! Per-op support answers and plan building, one file per op family; this file routes.
//!
//! `supports` is what the planner asks at build time, from the graph alone; `build` turns
//! one (fused) node into kernel launches once shapes are concrete. Both agree on which
//! operands must be known on the host (see [`host_operands`]).

mod conv_transpose;
mod elementwise;
mod linear;
mod movement;
mod norm;
mod pool;
mod recurrent;
mod reduce;
mod resize;

pub(crate) use linear::local_tiled_fits;
pub(crate) use movement::copy_nd;

use crate::fuse::FusedNode;
use crate::plan::Builder;
use concord_core::op::PadMode;
use concord_core::op::{Binary, Family, ReduceKind};
use concord_core::storage::Storage;
use concord_core::{DType, Graph, Node, Op, OpError, Support, Target};

/// The rank of a node's input `i` as the graph knows it (None when absent or unknown).
fn input_rank(graph: &Graph, node: &Node, i: usize) -> Option<usize> {
    node.inputs
        .get(i)
        .and_then(|v| v.as_deref())
        .and_then(|v| graph.values.get(v))
        .map(|v| v.shape.len())
}

/// Operand positions whose values a kernel needs on the host when the plan is made (shape,
/// axes, pads, sizes…): they must be initializers, or computable from shapes and
/// initializers alone.
pub fn host_operands(op: &Op) -> &'static [usize] {
    match op {
        Op::Reshape { .. } | Op::Squeeze | Op::Unsqueeze | Op::Split { .. } | Op::Expand => &[1],
        Op::Slice => &[1, 2, 3, 4],
        Op::Pad { .. } => &[1, 2, 3],
        Op::Resize(_) => &[1, 2, 3],
        Op::Reduce(..) => &[1],
        Op::Dropout => &[1, 2],
        Op::Range => &[0, 1, 2],
        _ => &[],
    }
}

/// Whether the OpenCL executor can run `node` on `target`, and why not.
pub fn supports(graph: &Graph, node: &Node, target: &Target) -> Support {
    match check(graph, node, target) {
        Ok(()) => Support::Yes,
        Err(reason) => Support::No(reason),
    }
}

fn check(graph: &Graph, node: &Node, target: &Target) -> Result<(), String> {
    // Whole families with no OpenCL kernel, and table rows without one, are declined
    // first, so the reason names the missing kernel rather than an operand.
    let device_row = match &node.op {
        Op::Unary(u) => u.def().device,
        Op::Binary(b) => b.def().device,
        // Reference-only ops of families that otherwise have kernels.
        Op::MaxUnpool { .. }
        | Op::Col2Im { .. }
        | Op::CausalConvWithState { .. }
        | Op::SwiGLU { .. }
        | Op::LinearAttention { .. } => false,
        // GRU and LSTM have kernels; RNN is declined below with the reason.
        Op::Recurrent(_) => true,
        // Computed when the plan is made, from constant operands (see host_operands).
        Op::Range => true,
        op => !matches!(
            op.family(),
            Family::Indexing
                | Family::Quantization
                | Family::Recurrent
                | Family::LinearAlgebra
                | Family::ControlFlow
                | Family::Sampling
                | Family::Signal
                | Family::Random
        ),
    };
    if matches!(node.op, Op::MaxPool(_)) && node.outputs.len() > 1 {
        return Err("MaxPool's Indices output (its second) has no OpenCL kernel".into());
    }
    if !device_row {
        return Err(format!("{} has no OpenCL kernel", node.op.name()));
    }
    // What the recurrent kernels leave out (RNN, sequence_lens) is named
    // before the general operand checks, which would only say "i32" of sequence_lens.
    if let Op::Recurrent(r) = &node.op {
        recurrent::check(graph, node, r)?;
    }
    let names = operand_names(&node.op);
    for &index in host_operands(&node.op) {
        if let Some(Some(value)) = node.inputs.get(index) {
            if !is_plan_known(graph, value, 0) {
                let name = names.get(index).copied().unwrap_or("operand");
                return Err(format!(
                    "input {index} ({name}) must be a constant (an initializer, or computed \
                     from shapes and initializers only), but `{value}` is computed at run time"
                ));
            }
        }
    }
    for value in node
        .present_inputs()
        .chain(node.outputs.iter().map(String::as_str))
    {
        if let Some(info) = graph.values.get(value) {
            if !Storage::holds(info.dtype) {
                return Err(format!(
                    "`{value}` is {}; the OpenCL kernels handle f32, f16, i64 and bool",
                    info.dtype
                ));
            }
            if info.shape.len() > 8 {
                return Err(format!(
                    "`{value}` has rank {}; the OpenCL kernels handle rank 8 at most",
                    info.shape.len()
                ));
            }
        }
    }
    let dtype = |index: usize| -> Option<DType> {
        let name = node.inputs.get(index)?.as_deref()?;
        graph.values.get(name).map(|v| v.dtype)
    };
    let x = dtype(0);
    let float = |what: &str| -> Result<(), String> {
        match x {
            Some(DType::F32 | DType::F16) | None => Ok(()),
            Some(other) => Err(format!(
                "{what} on {other} is not implemented (f32 and f16 are)"
            )),
        }
    };
    let _ = target;
    match &node.op {
        Op::Conv(attrs) => linear::check_conv(graph, node, attrs).and(float("Conv")),
        Op::ConvTranspose(_) => conv_transpose::check(graph, node).and(float("ConvTranspose")),
        Op::Gemm(_) => float("Gemm"),
        Op::MatMul => linear::check_matmul(graph, node).and(float("MatMul")),
        Op::Binary(Binary::Add | Binary::Sub | Binary::Mul | Binary::Div) => match x {
            Some(DType::Bool) => Err(format!("{} on bool is not defined", node.op.name())),
            _ => Ok(()),
        },
        Op::Binary(Binary::Pow) => {
            float("Pow")?;
            if dtype(1) != x {
                Err(
                    "Pow with an exponent of a different dtype than the base is not \
                     implemented"
                        .into(),
                )
            } else {
                Ok(())
            }
        }
        Op::Binary(Binary::Mod { fmod }) => match x {
            Some(DType::I64) | None => Ok(()),
            Some(DType::F32 | DType::F16) if *fmod => Ok(()),
            Some(other) => Err(format!(
                "Mod with fmod={} on {other} is not defined",
                *fmod as u8
            )),
        },
        Op::Binary(Binary::Equal) => match x {
            Some(DType::Bool) => Err("Equal on bool is not implemented".into()),
            _ => Ok(()),
        },
        // The unary ops ONNX defines on integers (Neg, Abs, Relu) have i64 kernels.
        Op::Unary(u) if u.def().integer() => match x {
            Some(DType::Bool) => Err(format!("{} on bool is not defined", node.op.name())),
            _ => Ok(()),
        },
        Op::Clip => match x {
            Some(DType::Bool) => Err(format!("{} on bool is not defined", node.op.name())),
            _ => Ok(()),
        },
        Op::Unary(_) => float(node.op.name()),
        Op::Where => match dtype(1) {
            Some(DType::Bool) => {
                Err("Where choosing between bool tensors is not implemented".into())
            }
            _ => Ok(()),
        },
        Op::LayerNormalization { .. } if node.outputs.iter().skip(1).any(|o| !o.is_empty()) => {
            Err("LayerNormalization's Mean and InvStdDev outputs are not implemented".into())
        }
        Op::Softmax { .. } | Op::LayerNormalization { .. } | Op::BatchNormalization { .. } => {
            float(node.op.name())
        }
        Op::MaxPool(p) | Op::AveragePool(p) => {
            float(node.op.name())?;
            pool::check(graph, node, p)
        }
        Op::GlobalAveragePool => float("GlobalAveragePool"),
        Op::Reduce(ReduceKind::Mean | ReduceKind::Sum | ReduceKind::Max, _) => {
            float(node.op.name())
        }
        Op::Resize(attrs) => {
            float("Resize")?;
            resize::check(attrs)
        }
        Op::Recurrent(_) => Ok(()),
        // Its operands are plan-time constants (checked above), so the plan computes it on
        // the host and no kernel runs.
        Op::Range => Ok(()),
        Op::Pad { mode } => {
            if *mode == PadMode::Constant {
                Ok(())
            } else {
                Err(format!(
                    "Pad mode {mode:?} is not implemented (constant is)"
                ))
            }
        }
        Op::Dropout => {
            if node.outputs.len() > 1 && node.outputs.get(1).is_some_and(|o| !o.is_empty()) {
                Err("Dropout's mask output is not implemented".into())
            } else {
                Ok(())
            }
        }
        Op::Concat { .. }
        | Op::Split { .. }
        | Op::Slice
        | Op::Gather { .. }
        | Op::Reshape { .. }
        | Op::Flatten { .. }
        | Op::Transpose { .. }
        | Op::Squeeze
        | Op::Unsqueeze
        | Op::Shape { .. }
        | Op::Cast { .. }
        | Op::Identity
        | Op::Constant { .. }
        | Op::Expand => Ok(()),
        // An op added to the IR runs on the reference until it gets a kernel here.
        other => Err(format!("{} has no OpenCL kernel", other.name())),
    }
}

/// Whether a value is known when the plan is made: an initializer, a Shape or Constant
/// result, or computed from such values only.
fn is_plan_known(graph: &Graph, value: &str, depth: usize) -> bool {
    if graph.inputs.iter().any(|i| i.name == value) {
        return false;
    }
    if graph.initializers.contains_key(value) {
        return true;
    }
    if depth > 64 {
        return false;
    }
    let Some(producer) = graph
        .nodes
        .iter()
        .find(|n| n.outputs.iter().any(|o| o == value))
    else {
        return false;
    };
    match producer.op {
        Op::Shape { .. } | Op::Constant { .. } => true,
        _ => producer
            .present_inputs()
            .all(|i| is_plan_known(graph, i, depth + 1)),
    }
}

/// The ONNX names of an op's inputs, for messages.
fn operand_names(op: &Op) -> &'static [&'static str] {
    match op {
        Op::Reshape { .. } | Op::Expand => &["data", "shape"],
        Op::Squeeze | Op::Unsqueeze => &["data", "axes"],
        Op::Split { .. } => &["input", "split"],
        Op::Slice => &["data", "starts", "ends", "axes", "steps"],
        Op::Pad { .. } => &["data", "pads", "constant_value", "axes"],
        Op::Resize(_) => &["X", "roi", "scales", "sizes"],
        Op::Reduce(..) => &["data", "axes"],
        Op::Dropout => &["data", "ratio", "training_mode"],
        Op::Range => &["start", "limit", "delta"],
        _ => &[],
    }
}

/// Turns one node into kernel launches.
pub fn build(b: &mut Builder, fused: &FusedNode) -> Result<(), OpError> {
    let node = &fused.node;
    match &node.op {
        Op::Conv(attrs) => linear::conv(b, fused, attrs),
        Op::ConvTranspose(attrs) => conv_transpose::build(b, node, attrs),
        Op::Gemm(attrs) => linear::gemm(b, fused, attrs),
        Op::MatMul => linear::matmul(b, fused),
        Op::Binary(_) | Op::Unary(_) | Op::Clip | Op::Where => elementwise::build(b, node),
        Op::Softmax { .. } | Op::LayerNormalization { .. } | Op::BatchNormalization { .. } => {
            norm::build(b, node)
        }
        Op::MaxPool(_) | Op::AveragePool(_) | Op::GlobalAveragePool => {
            pool::build(b, node, fused.excite)
        }
        Op::Reduce(ReduceKind::Mean | ReduceKind::Sum | ReduceKind::Max, _) => {
            reduce::build(b, node)
        }
        Op::Resize(attrs) => resize::build(b, node, attrs),
        Op::Recurrent(r) => recurrent::build(b, node, r, fused.epilogue.output_perm.as_deref()),
        op if op.family() == Family::Movement => movement::build(b, node),
        // `supports` declines every op without a kernel, so this is a planner bug.
        other => Err(OpError::Unsupported(format!(
            "{} has no OpenCL kernel",
            other.name()
        ))),
    }
}

/// The input at `index`, or a MissingInput error naming it.
pub(crate) fn input<'n>(
    node: &'n Node,
    index: usize,
    name: &'static str,
) -> Result<&'n str, OpError> {
    node.inputs
        .get(index)
        .and_then(|i| i.as_deref())
        .ok_or(OpError::MissingInput { index, name })
}

/// The input at `index` if present.
pub(crate) fn optional_input(node: &Node, index: usize) -> Option<&str> {
    node.inputs.get(index).and_then(|i| i.as_deref())
}

/// The first output's name.
pub(crate) fn output(node: &Node) -> Result<&str, OpError> {
    node.outputs
        .first()
        .map(String::as_str)
        .ok_or_else(|| OpError::Shape(format!("{} has no output", node.op.name())))
}

/// The strides with which an operand of `dims`, laid out with `strides` (a view's, or its
/// own row-major ones), is read for each coordinate of the broadcast output `out`: 0 along
/// axes it lacks or has of extent 1.
pub(crate) fn view_broadcast_strides(dims: &[usize], strides: &[i64], out: &[usize]) -> Vec<i64> {
    let lead = out.len() - dims.len().min(out.len());
    (0..out.len())
        .map(|axis| match axis.checked_sub(lead) {
            Some(i) if dims[i] != 1 => strides[i],
            _ => 0,
        })
        .collect()
}

/// Strides of an operand of shape `dims`, laid out row-major, broadcast to `out` (0 on
/// broadcast axes).
pub(crate) fn broadcast_strides(dims: &[usize], out: &[usize]) -> Vec<i64> {
    view_broadcast_strides(dims, &crate::plan::strides_of(dims), out)
}
