//! What the CUDA executor can run, node by node, with a reason when it cannot. The planner
//! moves declined nodes to the reference executor and says so with these reasons.

use crate::ops::pool::MAX_SPATIAL;
use crate::ops::MAX_RANK;
use concord_core::op::{Binary, ReduceKind};
use concord_core::op::{CoordinateTransform, PadMode, ResizeMode};
use concord_core::{DType, Dim, Graph, Node, Op, Support, Target};

/// Whether `node` can run on `target`.
pub fn supports(graph: &Graph, node: &Node, target: &Target) -> Support {
    if !crate::executor::serves(target) {
        return Support::No(format!(
            "the CUDA executor runs the cuda and cuda-fp16 targets, not {target}"
        ));
    }
    match check(graph, node) {
        Ok(()) => Support::Yes,
        Err(reason) => Support::No(reason),
    }
}

type Check = Result<(), String>;

const FLOAT: &[DType] = &[DType::F32, DType::F16];
const NUMERIC: &[DType] = &[DType::F32, DType::F16, DType::I64];
const ANY: &[DType] = &[DType::F32, DType::F16, DType::I64, DType::Bool];

fn check(graph: &Graph, node: &Node) -> Check {
    // Whole families with no CUDA kernel, and table rows without one, are declined first,
    // so the reason names the missing kernel rather than an operand.
    let device_row = match &node.op {
        Op::Unary(u) => u.def().device,
        Op::Binary(b) => b.def().device,
        // Reference-only ops of families that otherwise have kernels.
        Op::ConvTranspose(_)
        | Op::MaxUnpool { .. }
        | Op::Col2Im { .. }
        | Op::CausalConvWithState { .. }
        | Op::SwiGLU { .. }
        | Op::LinearAttention { .. } => false,
        op => !matches!(
            op.family(),
            concord_core::op::Family::Indexing
                | concord_core::op::Family::Quantization
                | concord_core::op::Family::Recurrent
                | concord_core::op::Family::LinearAlgebra
                | concord_core::op::Family::ControlFlow
                | concord_core::op::Family::Sampling
                | concord_core::op::Family::Signal
                | concord_core::op::Family::Random
        ),
    };
    if matches!(node.op, Op::MaxPool(_)) && node.outputs.len() > 1 {
        return Err("MaxPool's Indices output (its second) has no CUDA kernel".into());
    }
    if !device_row {
        return Err(format!("{} has no CUDA kernel", node.op.name()));
    }
    let facts = Facts { graph, node };
    for name in node
        .present_inputs()
        .chain(node.outputs.iter().map(|s| s.as_str()))
    {
        if name.is_empty() {
            continue;
        }
        if let Some(dtype) = facts.graph.values.get(name).map(|v| v.dtype) {
            if !concord_core::storage::Storage::holds(dtype) {
                return Err(format!(
                    "`{name}` is {dtype}; the CUDA kernels handle f32, f16, i64 and bool"
                ));
            }
        }
        if let Some(rank) = facts.rank_of(name) {
            if rank > MAX_RANK {
                return Err(format!(
                    "`{name}` has rank {rank}; the CUDA kernels take at most {MAX_RANK} axes"
                ));
            }
        }
    }
    match &node.op {
        Op::Conv(_) => {
            facts.dtype_in(0, FLOAT)?;
            facts.same_dtype(1, 0)?;
            facts.same_dtype(2, 0)?;
            facts.spatial(0)?;
            facts.nonempty_inner(1, 1)
        }
        Op::Gemm(g) => {
            facts.dtype_in(0, FLOAT)?;
            facts.same_dtype(1, 0)?;
            facts.same_dtype(2, 0)?;
            facts.nonempty_inner(0, if g.trans_a { 0 } else { 1 })
        }
        Op::MatMul => {
            facts.dtype_in(0, FLOAT)?;
            facts.same_dtype(1, 0)?;
            facts.nonempty_inner(0, usize::MAX)
        }
        Op::Binary(Binary::Add | Binary::Sub | Binary::Mul | Binary::Div) => {
            facts.dtype_in(0, NUMERIC)?;
            facts.same_dtype(1, 0)
        }
        Op::Binary(Binary::Mod { fmod }) => {
            let dtype = facts.dtype_in(0, NUMERIC)?;
            facts.same_dtype(1, 0)?;
            if dtype.is_float() && !fmod {
                return Err(format!("Mod on {dtype} needs fmod=1"));
            }
            Ok(())
        }
        Op::Binary(Binary::Pow) => {
            facts.dtype_in(0, FLOAT)?;
            facts
                .same_dtype(1, 0)
                .map_err(|e| format!("{e} (the CUDA Pow kernel takes one float type)"))
        }
        Op::Binary(Binary::Equal) => {
            facts.dtype_in(0, ANY)?;
            facts.same_dtype(1, 0)
        }
        Op::Unary(_) => facts.dtype_in(0, FLOAT).map(|_| ()),
        Op::Clip => {
            facts.dtype_in(0, FLOAT)?;
            facts.constant(1, "min")?;
            facts.constant(2, "max")
        }
        Op::Where => {
            facts.dtype_in(0, &[DType::Bool])?;
            facts.dtype_in(1, ANY)?;
            facts.same_dtype(2, 1)
        }
        Op::Softmax { .. } => facts.dtype_in(0, FLOAT).map(|_| ()),
        Op::LayerNormalization { .. } => {
            if node.outputs.iter().skip(1).any(|o| !o.is_empty()) {
                return Err(
                    "LayerNormalization's Mean and InvStdDev outputs are not computed".into(),
                );
            }
            facts.dtype_in(0, FLOAT)?;
            facts.same_dtype(1, 0)?;
            facts.same_dtype(2, 0)
        }
        Op::BatchNormalization { .. } => {
            if node.outputs.iter().skip(1).any(|o| !o.is_empty()) {
                return Err("BatchNormalization runs in inference mode only (one output)".into());
            }
            facts.dtype_in(0, FLOAT)?;
            (1..5).try_for_each(|i| facts.same_dtype(i, 0))
        }
        Op::MaxPool(_) | Op::AveragePool(_) => {
            if node.outputs.iter().skip(1).any(|o| !o.is_empty()) {
                return Err("MaxPool's Indices output is not computed".into());
            }
            facts.dtype_in(0, FLOAT)?;
            facts.spatial(0)
        }
        Op::GlobalAveragePool => facts.dtype_in(0, FLOAT).map(|_| ()),
        Op::Reduce(ReduceKind::Mean | ReduceKind::Sum | ReduceKind::Max, _) => {
            facts.dtype_in(0, FLOAT)?;
            facts.constant(1, "axes")
        }
        Op::Concat { .. } => {
            facts.dtype_in(0, ANY)?;
            (1..node.inputs.len()).try_for_each(|i| facts.same_dtype(i, 0))
        }
        Op::Split { .. } => {
            facts.dtype_in(0, ANY)?;
            facts.constant(1, "split")
        }
        Op::Slice => {
            facts.dtype_in(0, ANY)?;
            facts.constant(1, "starts")?;
            facts.constant(2, "ends")?;
            facts.constant(3, "axes")?;
            facts.constant(4, "steps")
        }
        Op::Gather { .. } => {
            facts.dtype_in(0, ANY)?;
            facts.dtype_in(1, &[DType::I64]).map(|_| ())
        }
        Op::Reshape { .. } => {
            facts.dtype_in(0, ANY)?;
            facts.constant(1, "shape")
        }
        Op::Squeeze | Op::Unsqueeze => {
            facts.dtype_in(0, ANY)?;
            facts.constant(1, "axes")
        }
        Op::Expand => {
            facts.dtype_in(0, ANY)?;
            facts.constant(1, "shape")
        }
        Op::Pad { mode } => {
            if *mode != PadMode::Constant {
                return Err(format!(
                    "Pad mode {mode:?} is not implemented (constant is)"
                ));
            }
            facts.dtype_in(0, ANY)?;
            facts.constant(1, "pads")?;
            facts.constant(2, "constant_value")?;
            facts.constant(3, "axes")
        }
        Op::Resize(r) => {
            if r.axes.is_some()
                || r.keep_aspect_ratio != concord_core::op::AspectRatioPolicy::Stretch
            {
                return Err(
                    "Resize with axes or a keep_aspect_ratio_policy is not implemented".into(),
                );
            }
            if r.mode == ResizeMode::Cubic {
                return Err("Resize mode cubic is not implemented (nearest and linear are)".into());
            }
            if r.antialias && r.mode != ResizeMode::Nearest {
                return Err("Resize antialias = 1 is not implemented".into());
            }
            if r.coordinate_transformation_mode == CoordinateTransform::TfCropAndResize {
                return Err("Resize coordinate mode tf_crop_and_resize is not implemented".into());
            }
            facts.dtype_in(0, FLOAT)?;
            facts.constant(2, "scales")?;
            facts.constant(3, "sizes")
        }
        Op::Flatten { .. }
        | Op::Transpose { .. }
        | Op::Identity
        | Op::Cast { .. }
        | Op::Shape { .. } => facts.dtype_in(0, ANY).map(|_| ()),
        Op::Dropout => {
            facts.dtype_in(0, ANY)?;
            facts.constant(1, "ratio")?;
            facts.constant(2, "training_mode")
        }
        Op::Constant { .. } => Ok(()),
        // An op added to the IR runs on the reference until it gets a kernel here.
        other => Err(format!("{} has no CUDA kernel", other.name())),
    }
}

/// What the graph knows about one node's operands.
struct Facts<'g> {
    graph: &'g Graph,
    node: &'g Node,
}

impl Facts<'_> {
    fn input(&self, index: usize) -> Option<&str> {
        self.node.inputs.get(index).and_then(|i| i.as_deref())
    }

    fn dtype_of(&self, name: &str) -> Option<DType> {
        self.graph
            .value(name)
            .map(|v| v.dtype)
            .or_else(|| self.graph.initializers.get(name).map(|t| t.dtype()))
    }

    fn dims_of(&self, name: &str) -> Option<Vec<Dim>> {
        self.graph.value(name).map(|v| v.shape.clone()).or_else(|| {
            self.graph
                .initializers
                .get(name)
                .map(|t| t.shape().to_sym())
        })
    }

    fn rank_of(&self, name: &str) -> Option<usize> {
        self.dims_of(name).map(|d| d.len())
    }

    /// The dtype of input `index`, which must be present and one of `allowed`.
    fn dtype_in(&self, index: usize, allowed: &[DType]) -> Result<DType, String> {
        let name = self
            .input(index)
            .ok_or_else(|| format!("input {index} is missing"))?;
        let dtype = self
            .dtype_of(name)
            .ok_or_else(|| format!("the type of `{name}` is not known"))?;
        if allowed.contains(&dtype) {
            Ok(dtype)
        } else {
            let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
            Err(format!(
                "input {index} is {dtype}; the CUDA kernel for {} takes {}",
                self.node.op.name(),
                names.join(" or ")
            ))
        }
    }

    /// Input `index`, when present, has the dtype of input `like`.
    fn same_dtype(&self, index: usize, like: usize) -> Check {
        let Some(name) = self.input(index) else {
            return Ok(());
        };
        let want = self.input(like).and_then(|n| self.dtype_of(n));
        let got = self.dtype_of(name);
        match (want, got) {
            (Some(w), Some(g)) if w == g => Ok(()),
            (Some(w), Some(g)) => Err(format!("input {index} is {g}, input {like} is {w}")),
            _ => Err(format!("the type of `{name}` is not known")),
        }
    }

    /// Input `index`, when present, is a constant of the partition (an initializer), so its
    /// value is known on the host when the node runs.
    fn constant(&self, index: usize, what: &str) -> Check {
        let Some(name) = self.input(index) else {
            return Ok(());
        };
        let runtime = self.graph.inputs.iter().any(|i| i.name == name);
        if self.graph.initializers.contains_key(name) && !runtime {
            Ok(())
        } else {
            Err(format!(
                "its {what} operand `{name}` is computed at run time; the CUDA executor needs \
                 it as a constant (an initializer) of the model"
            ))
        }
    }

    /// Input `index` has 1 to 3 spatial axes (rank 3 to 5), when its rank is known.
    fn spatial(&self, index: usize) -> Check {
        match self.input(index).and_then(|n| self.rank_of(n)) {
            Some(rank) if !(3..=2 + MAX_SPATIAL).contains(&rank) => Err(format!(
                "input {index} has rank {rank}; the CUDA window kernels take 1 to {MAX_SPATIAL} \
                 spatial axes (rank 3 to {})",
                2 + MAX_SPATIAL
            )),
            _ => Ok(()),
        }
    }

    /// The contraction length (axis `axis` of input `index`; usize::MAX means the last
    /// axis) is not known to be zero.
    fn nonempty_inner(&self, index: usize, axis: usize) -> Check {
        let Some(dims) = self.input(index).and_then(|n| self.dims_of(n)) else {
            return Ok(());
        };
        let axis = if axis == usize::MAX {
            dims.len().saturating_sub(1)
        } else {
            axis
        };
        if let Some(Dim::Fixed(0)) = dims.get(axis) {
            return Err("the contraction has length 0 (an empty inner dimension)".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concord_core::op::{PadMode, Unary};
    use concord_core::{Tensor, ValueInfo};

    /// A graph with runtime input x (f32[2, 3]), i64 input n, and i64 initializer `shape`.
    fn graph_with(node: Node) -> Graph {
        let mut g = Graph {
            name: "t".into(),
            opset: 17,
            ..Graph::default()
        };
        g.inputs.push(ValueInfo::fixed("x", DType::F32, &[2, 3]));
        g.inputs.push(ValueInfo::fixed("n", DType::I64, &[2]));
        g.initializers
            .insert("shape".into(), Tensor::vec_i64(vec![3, 2]));
        for v in [
            ValueInfo::fixed("x", DType::F32, &[2, 3]),
            ValueInfo::fixed("n", DType::I64, &[2]),
            ValueInfo::fixed("shape", DType::I64, &[2]),
        ] {
            g.values.insert(v.name.clone(), v);
        }
        g.nodes.push(node);
        g
    }

    fn answer(op: Op, inputs: &[&str]) -> Support {
        let node = Node::new("n0", op, inputs, &["y"]);
        let g = graph_with(node.clone());
        supports(&g, &node, &crate::CUDA)
    }

    #[test]
    fn float_activations_run_and_integer_ones_are_declined_with_the_type() {
        assert_eq!(answer(Op::Unary(Unary::Relu), &["x"]), Support::Yes);
        let Support::No(why) = answer(Op::Unary(Unary::Relu), &["n"]) else {
            unreachable!("Relu on i64 has no CUDA kernel")
        };
        assert!(why.contains("i64"), "{why}");
    }

    #[test]
    fn shape_operands_must_be_initializers() {
        assert_eq!(
            answer(Op::Reshape { allowzero: false }, &["x", "shape"]),
            Support::Yes
        );
        let Support::No(why) = answer(Op::Reshape { allowzero: false }, &["x", "n"]) else {
            unreachable!("a runtime shape operand is declined")
        };
        assert!(why.contains("`n`") && why.contains("initializer"), "{why}");
    }

    #[test]
    fn integer_arithmetic_runs_except_pow() {
        assert_eq!(answer(Op::Binary(Binary::Add), &["n", "n"]), Support::Yes);
        assert!(matches!(
            answer(Op::Binary(Binary::Pow), &["n", "n"]),
            Support::No(_)
        ));
        assert!(matches!(
            answer(Op::Binary(Binary::Add), &["x", "n"]),
            Support::No(_)
        ));
    }

    #[test]
    fn only_constant_pad_is_implemented() {
        assert_eq!(
            answer(
                Op::Pad {
                    mode: PadMode::Constant
                },
                &["x", "shape"]
            ),
            Support::Yes
        );
        let Support::No(why) = answer(
            Op::Pad {
                mode: PadMode::Reflect,
            },
            &["x", "shape"],
        ) else {
            unreachable!("reflect padding is declined")
        };
        assert!(why.contains("Reflect"), "{why}");
    }

    #[test]
    fn other_targets_are_declined() {
        let node = Node::new("n0", Op::Unary(Unary::Relu), &["x"], &["y"]);
        let g = graph_with(node.clone());
        assert!(matches!(
            supports(&g, &node, &Target::new("opencl")),
            Support::No(why) if why.contains("opencl")
        ));
        assert_eq!(supports(&g, &node, &crate::CUDA_FP16), Support::Yes);
    }
}
