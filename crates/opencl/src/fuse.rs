//! Fusion at prepare time: a convolution absorbs the BatchNormalization after it (folded
//! into its weights and bias on the host, in f64), a same-shape residual Add, and a
//! pointwise activation, so that a ResNet or MobileNet block is one kernel per conv. A
//! MatMul absorbs the Add of a constant bias along its last axis (a transformer's
//! projection, exported as MatMul + Add); a MatMul or Gemm absorbs a residual Add (also
//! where the graph leaves the operands' shapes open, as dynamic axes do: a plan whose
//! shapes turn out to differ runs that Add apart; a Gemm also one it reaches through
//! layout-only steps, as torchvision's attention writes its output projection), a
//! pointwise activation, and the erf GELU as PyTorch exports it (Div, Erf, Add, Mul, Mul),
//! so that an encoder layer's MLP is two GEMM launches; a MatMul absorbs the Transpose
//! after it that keeps the last axis last (attention's merge of the heads), storing its
//! rows where the Transpose would have put them. In the activation's place any of
//! them can absorb a Mul or Div by a one-element constant (attention's score scale). The
//! GELU and the scalings only need the value's rank to be known, not its extents: a
//! constant of no higher rank cannot broadcast it. A Conv, MatMul or Gemm absorbs SiLU as
//! exporters write it (Sigmoid and Mul reading the same value: EfficientNet's
//! activation). A GlobalAveragePool absorbs the two 1×1 convs of a squeeze-excite block
//! after it (with the activations they took, the gate's Sigmoid or HardSigmoid among
//! them) and the Mul that applies the channel scales to its input, so that MobileNetV3's
//! and EfficientNet's blocks are one launch instead of five.
//!
//! Every fused kernel rounds as the nodes it replaces do on f32 storage: the epilogue adds
//! the bias and the residual to the rounded product in the graph's order, and the GELU
//! rounds after each of its five steps. The folded squeeze-excite keeps its two small
//! vectors in float between the steps, as f32 storage would; on f16 storage it skips the
//! two roundings to f16 the unfused nodes make (within the f16 tolerance, which allows
//! one rounding per stored value).
//!
//! A value is only fused away when exactly one node reads it and it is not a partition
//! output; the fused nodes are still reported to the profile (with zero time, theirs being
//! part of the conv's).

use concord_core::op::{AutoPad, Conv};
use concord_core::op::{
    Binary, Unary, CLIP_KERNEL_CODE, SCALE_DIV_KERNEL_CODE, SCALE_MUL_KERNEL_CODE, SILU_KERNEL_CODE,
};
use concord_core::{DType, Graph, Node, Op, Tensor, TensorData};
use std::collections::{HashMap, HashSet};

/// A pointwise activation applied in a kernel's epilogue.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Activation {
    #[default]
    None,
    Relu,
    /// Clip with these bounds (±inf when absent).
    Clip(f32, f32),
    LeakyRelu(f32),
    HardSigmoid(f32, f32),
    HardSwish,
    /// `(x · (erf(x / divisor) + 1)) · scale`, each step rounded to f32: the erf GELU as
    /// PyTorch exports it (divisor √2, scale 0.5).
    GeluErf {
        divisor: f32,
        scale: f32,
    },
    /// `x · sigmoid(x)`, the sigmoid rounded to f32 first: SiLU as exporters write it
    /// (Sigmoid, Mul).
    Silu,
    /// `sigmoid(x)`, as the Sigmoid kernel computes it (a squeeze-excite block's gate in
    /// EfficientNet).
    Sigmoid,
    /// `x · c`: a Mul by a one-element constant.
    MulBy(f32),
    /// `x / c`: a Div by a one-element constant (an attention score's scale as PyTorch
    /// exports it; kept a division, not a multiplication by 1/c, so it rounds as the node).
    DivBy(f32),
}

/// What a fused kernel does after its main computation: add a bias, add a residual, then
/// activate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Epilogue {
    /// A constant of shape [1, …, 1, N] added along the output's last axis (MatMul only;
    /// a Conv's bias is its own input).
    pub bias: Option<String>,
    /// A value of the output's shape added before the activation.
    pub residual: Option<String>,
    pub activation: Activation,
    /// The residual's Add, when it was fused on shapes that may prove different once the
    /// inputs are known (dims the graph leaves unknown or names differently): a plan whose
    /// concrete shapes differ (the Add broadcasts) runs the GEMM and this Add as two
    /// launches. Nothing is fused after such a residual.
    pub unchecked_add: Option<Node>,
    /// A node that writes its output permuted so: the Transpose after it folded into where
    /// the node stores. A MatMul's (attention's merge of the heads, which keeps the last
    /// axis last) into where the GEMM stores each row, nothing fused after it; a GRU's or
    /// LSTM's Y into the strides the walk stores it at.
    pub output_perm: Option<Vec<usize>>,
    /// The residual's Add was reached through layout-only steps (see
    /// [`absorb_viewed_residual`]): the node writes the Add's output, whose shape is that
    /// of this value (the residual), its elements in the node's own row-major order.
    pub residual_view: Option<String>,
}

/// A deliberately wrong fusion, which a test plants (through
/// `OpenClOptions::planted_fusion_fault`) to prove that a named golden case catches it by
/// value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FusionFault {
    /// The fused GELU drops its final `· 0.5`.
    GeluScaleDropped,
    /// A MatMul's fused bias is never added.
    MatMulBiasDropped,
    /// A MatMul's or Gemm's fused residual is never added.
    GemmResidualDropped,
    /// A MatMul's or Gemm's fused Mul or Div by a constant is never applied.
    ScaleDropped,
    /// A fused SiLU computed as HardSwish, its piecewise-linear approximation.
    SiluAsHardSwish,
    /// A squeeze-excite tail folded into a GlobalAveragePool loses its second conv's
    /// activation (the gate).
    ExciteGateDropped,
    /// A GRU or LSTM stores Y unpermuted although a Transpose of it was folded in.
    RecurrentPermDropped,
}

/// A node of the fused partition.
#[derive(Clone, Debug)]
pub struct FusedNode {
    pub node: Node,
    pub epilogue: Epilogue,
    /// Names of the nodes folded into this one.
    pub fused: Vec<String>,
    /// For a GlobalAveragePool, the squeeze-excite tail folded into it (see
    /// [`absorb_excite`]).
    pub excite: Option<Excite>,
}

/// The two 1×1 convs of a squeeze-excite block folded into the GlobalAveragePool before
/// them: the pooled [N, C, 1, 1] goes to M channels and back to C, each conv adding its
/// bias and applying its activation. The pool node then reads the convs' weights and
/// biases as its inputs 1 to 4 (a bias may be absent) and writes the second conv's output,
/// or, with `scales_input`, the Mul of its input by those channel scales.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Excite {
    /// The first conv's activation (C → M).
    pub reduce: Activation,
    /// The second conv's activation (M → C), the gate.
    pub expand: Activation,
    /// The block's Mul of the pool's input by the scales is folded in too: the node writes
    /// a value of its input's shape.
    pub scales_input: bool,
}

/// The most channels on either side of a folded squeeze-excite block: the kernel keeps
/// both vectors in local memory (`SE_MAX` in pool.cl), 16 KiB at this size, half of the
/// least local memory an OpenCL device has.
pub const EXCITE_MAX_CHANNELS: usize = 2048;

impl Activation {
    /// The activation code and its two parameters, as the kernels take them.
    pub fn code(self) -> (i32, f32, f32) {
        // The U_* codes of concord-core's op table, which the kernels see as #defines.
        let code = |op: Unary| op.def().code() as i32;
        match self {
            Activation::None => (0, 0.0, 0.0),
            Activation::Relu => (code(Unary::Relu), 0.0, 0.0),
            Activation::Clip(lo, hi) => (CLIP_KERNEL_CODE as i32, lo, hi),
            Activation::LeakyRelu(a) => (code(Unary::LeakyRelu { alpha: a }), a, 0.0),
            Activation::HardSigmoid(a, b) => (code(Unary::HardSigmoid { alpha: a, beta: b }), a, b),
            Activation::HardSwish => (code(Unary::HardSwish), 0.0, 0.0),
            // The U_GELU code, which only fused epilogues use on OpenCL (a Gelu node has no
            // kernel): the divisor and the scale are its two parameters.
            Activation::GeluErf { divisor, scale } => {
                (code(Unary::Gelu { tanh: false }), divisor, scale)
            }
            Activation::Silu => (SILU_KERNEL_CODE as i32, 0.0, 0.0),
            Activation::Sigmoid => (code(Unary::Sigmoid), 0.0, 0.0),
            Activation::MulBy(c) => (SCALE_MUL_KERNEL_CODE as i32, c, 0.0),
            Activation::DivBy(c) => (SCALE_DIV_KERNEL_CODE as i32, c, 0.0),
        }
    }
}

impl FusedNode {
    /// Every value the node reads, the bias and the residual included.
    pub fn reads(&self) -> impl Iterator<Item = &str> {
        self.node
            .present_inputs()
            .chain(self.epilogue.bias.as_deref())
            .chain(self.epilogue.residual.as_deref())
    }
}

/// Fuses `graph`'s nodes (adding folded weights to its initializers).
pub fn fuse(graph: &mut Graph) -> Vec<FusedNode> {
    let mut nodes: Vec<FusedNode> = graph
        .nodes
        .iter()
        .map(|n| FusedNode {
            node: n.clone(),
            epilogue: Epilogue::default(),
            fused: Vec::new(),
            excite: None,
        })
        .collect();
    let outputs: HashSet<String> = graph.outputs.iter().cloned().collect();
    let mut i = 0;
    while i < nodes.len() {
        match nodes[i].node.op {
            // Each absorption removes the consumer, so keep trying until none applies.
            Op::Conv(_) => {
                while absorb_next(graph, &mut nodes, i, &outputs)
                    || absorb_silu(graph, &mut nodes, i, &outputs)
                {}
            }
            Op::Recurrent(_) => {
                absorb_recurrent_transpose(&mut nodes, i, &outputs);
            }
            Op::MatMul | Op::Gemm(_) => {
                while nodes[i].epilogue.unchecked_add.is_none()
                    && nodes[i].epilogue.output_perm.is_none()
                    && (absorb_next(graph, &mut nodes, i, &outputs)
                        || absorb_gelu(graph, &mut nodes, i, &outputs)
                        || absorb_silu(graph, &mut nodes, i, &outputs)
                        || absorb_transpose(graph, &mut nodes, i, &outputs)
                        || absorb_viewed_residual(graph, &mut nodes, i, &outputs))
                {}
            }
            _ => {}
        }
        i += 1;
    }
    // After the convs have taken their activations.
    let mut i = 0;
    while i < nodes.len() {
        if matches!(nodes[i].node.op, Op::GlobalAveragePool) {
            absorb_excite(graph, &mut nodes, i, &outputs);
        }
        i += 1;
    }
    nodes
}

/// Plants `fault` in every MatMul and Gemm it applies to (a SiLU's also in every Conv).
pub fn plant(nodes: &mut [FusedNode], fault: FusionFault) {
    if fault == FusionFault::ExciteGateDropped {
        for excite in nodes.iter_mut().filter_map(|f| f.excite.as_mut()) {
            excite.expand = Activation::None;
        }
        return;
    }
    if fault == FusionFault::RecurrentPermDropped {
        for fused in nodes
            .iter_mut()
            .filter(|f| matches!(f.node.op, Op::Recurrent(_)))
        {
            fused.epilogue.output_perm = None;
        }
        return;
    }
    for fused in nodes.iter_mut().filter(|f| match f.node.op {
        Op::MatMul | Op::Gemm(_) => true,
        Op::Conv(_) => fault == FusionFault::SiluAsHardSwish,
        _ => false,
    }) {
        let epilogue = &mut fused.epilogue;
        match fault {
            FusionFault::SiluAsHardSwish => {
                if epilogue.activation == Activation::Silu {
                    epilogue.activation = Activation::HardSwish;
                }
            }
            FusionFault::GeluScaleDropped => {
                if let Activation::GeluErf { divisor, .. } = epilogue.activation {
                    epilogue.activation = Activation::GeluErf {
                        divisor,
                        scale: 1.0,
                    };
                }
            }
            FusionFault::MatMulBiasDropped => epilogue.bias = None,
            FusionFault::GemmResidualDropped => epilogue.residual = None,
            FusionFault::ScaleDropped => {
                if matches!(
                    epilogue.activation,
                    Activation::MulBy(_) | Activation::DivBy(_)
                ) {
                    epilogue.activation = Activation::None;
                }
            }
            FusionFault::ExciteGateDropped | FusionFault::RecurrentPermDropped => {}
        }
    }
}

/// Tries to absorb the single consumer of node `i`'s output; true when it did.
fn absorb_next(
    graph: &mut Graph,
    nodes: &mut Vec<FusedNode>,
    i: usize,
    outputs: &HashSet<String>,
) -> bool {
    let Some(value) = sole_output(nodes, i, outputs) else {
        return false;
    };
    let Some(j) = only_reader(nodes, i, &value, outputs) else {
        return false;
    };
    let consumer = nodes[j].node.clone();
    let head = &nodes[i];
    let no_epilogue_yet =
        head.epilogue.residual.is_none() && head.epilogue.activation == Activation::None;
    let absorbed = match &consumer.op {
        Op::BatchNormalization { epsilon } if no_epilogue_yet && input_is(&consumer, 0, &value) => {
            fold_batch_norm(graph, &mut nodes[i].node, &consumer, *epsilon)
        }
        Op::Binary(Binary::Add)
            if head.epilogue.activation == Activation::None && head.epilogue.residual.is_none() =>
        {
            let other = consumer
                .inputs
                .iter()
                .flatten()
                .find(|n| **n != value)
                .cloned();
            // A MatMul with a vector B has no column axis in its output for the bias to
            // run along (its last axis is A's rows).
            let head_is_matmul =
                matches!(head.node.op, Op::MatMul) && input_rank(graph, &head.node, 1) >= Some(2);
            match other {
                // The residual must exist when the head runs, i.e. be made before it.
                Some(other)
                    if same_known_shape(graph, &value, &other)
                        && !nodes[i..].iter().any(|n| n.node.outputs.contains(&other)) =>
                {
                    nodes[i].epilogue.residual = Some(other);
                    true
                }
                // A GEMM's residual whose shape the graph does not pin down (a transformer
                // exported with dynamic axes: the reshaped attention output's dims are
                // unknown until the inputs are) is fused on the condition that the plan's
                // concrete shapes agree (see `Epilogue::unchecked_add`).
                Some(other)
                    if matches!(head.node.op, Op::MatMul | Op::Gemm(_))
                        && maybe_same_shape(graph, &value, &other)
                        && !nodes[i..].iter().any(|n| n.node.outputs.contains(&other)) =>
                {
                    nodes[i].epilogue.residual = Some(other);
                    nodes[i].epilogue.unchecked_add = Some(consumer.clone());
                    true
                }
                // A bias comes before any residual, as the kernels add them.
                Some(other)
                    if head_is_matmul
                        && head.epilogue.bias.is_none()
                        && is_row_bias(graph, &value, &other) =>
                {
                    nodes[i].epilogue.bias = Some(other);
                    true
                }
                _ => false,
            }
        }
        Op::Binary(Binary::Mul | Binary::Div) if head.epilogue.activation == Activation::None => {
            match scaling(graph, &consumer, &value) {
                Some(act) => {
                    nodes[i].epilogue.activation = act;
                    true
                }
                None => false,
            }
        }
        op if head.epilogue.activation == Activation::None => {
            match activation_of(graph, op, &consumer) {
                Some(act) if input_is(&consumer, 0, &value) => {
                    nodes[i].epilogue.activation = act;
                    true
                }
                _ => false,
            }
        }
        _ => false,
    };
    if !absorbed {
        return false;
    }
    let Some(out) = consumer.outputs.first().cloned() else {
        return false;
    };
    nodes[i].node.outputs = vec![out];
    nodes[i].fused.push(consumer.name.clone());
    let inner = nodes[j].fused.clone();
    nodes[i].fused.extend(inner);
    nodes.remove(j);
    true
}

/// Absorbs the Transpose that alone reads MatMul `i`'s output when it keeps the last axis
/// last (the output has rank 2 to 4, both operands rank 2 or more, and no residual is
/// fused): the MatMul then stores its rows where the Transpose would have moved them. True
/// when it did.
fn absorb_transpose(
    graph: &Graph,
    nodes: &mut Vec<FusedNode>,
    i: usize,
    outputs: &HashSet<String>,
) -> bool {
    let head = &nodes[i];
    if !matches!(head.node.op, Op::MatMul) || head.epilogue.residual.is_some() {
        return false;
    }
    if !(input_rank(graph, &head.node, 0) >= Some(2) && input_rank(graph, &head.node, 1) >= Some(2))
    {
        return false;
    }
    let Some(value) = sole_output(nodes, i, outputs) else {
        return false;
    };
    let Some(j) = only_reader(nodes, i, &value, outputs) else {
        return false;
    };
    let Some(perm) = transpose_of(&nodes[j].node, &value) else {
        return false;
    };
    if perm.last() != Some(&(perm.len() - 1)) {
        return false;
    }
    let Some(out) = nodes[j].node.outputs.first().cloned() else {
        return false;
    };
    let name = nodes[j].node.name.clone();
    nodes[i].epilogue.output_perm = Some(perm);
    nodes[i].node.outputs = vec![out];
    nodes[i].fused.push(name);
    nodes.remove(j);
    true
}

/// Absorbs the residual Add that reads Gemm `i`'s output through layout-only steps, each
/// the only reader of the value before it: Reshape, Flatten, Squeeze, Unsqueeze, and a
/// Transpose that moves only axes of extent 1 (torchvision's attention writes its output
/// projection as Gemm → Reshape → Transpose → residual Add). Those steps keep the elements
/// in the Gemm's row-major order, so adding the residual's elements in that order is the
/// Add; the Gemm then writes the Add's output, of the residual's shape (see
/// [`Epilogue::residual_view`]). The Add must not broadcast: both its operands have one
/// known shape. True when it did.
fn absorb_viewed_residual(
    graph: &Graph,
    nodes: &mut Vec<FusedNode>,
    i: usize,
    outputs: &HashSet<String>,
) -> bool {
    let head = &nodes[i];
    if !matches!(head.node.op, Op::Gemm(_))
        || head.epilogue.residual.is_some()
        || head.epilogue.activation != Activation::None
    {
        return false;
    }
    let Some(mut value) = sole_output(nodes, i, outputs) else {
        return false;
    };
    let mut steps = Vec::new();
    let add = loop {
        let Some(j) = only_reader(nodes, i, &value, outputs) else {
            return false;
        };
        let node = &nodes[j].node;
        if binary(node, Binary::Add).is_some() {
            break j;
        }
        if !keeps_layout(graph, node, &value) {
            return false;
        }
        let Some(out) = sole_output(nodes, j, outputs) else {
            return false;
        };
        steps.push(j);
        value = out;
    };
    if steps.is_empty() {
        return false;
    }
    let Some((a, b)) = binary(&nodes[add].node, Binary::Add) else {
        return false;
    };
    let other = if a == value { b } else { a }.to_string();
    if other == value
        || !same_known_shape(graph, &value, &other)
        || nodes[i..].iter().any(|n| n.node.outputs.contains(&other))
    {
        return false;
    }
    let Some(out) = nodes[add].node.outputs.first().cloned() else {
        return false;
    };
    nodes[i].epilogue.residual = Some(other.clone());
    nodes[i].epilogue.residual_view = Some(other);
    nodes[i].node.outputs = vec![out];
    steps.push(add);
    for &j in &steps {
        let name = nodes[j].node.name.clone();
        nodes[i].fused.push(name);
    }
    for &j in steps.iter().rev() {
        nodes.remove(j);
    }
    true
}

/// Whether `node` only gives `value` (its input 0) another shape, its elements staying in
/// row-major order: a Reshape, Flatten, Squeeze or Unsqueeze, or a Transpose whose axes of
/// extent other than 1 keep their order (the graph must know the input's extents).
fn keeps_layout(graph: &Graph, node: &Node, value: &str) -> bool {
    if !input_is(node, 0, value) || node.outputs.len() != 1 {
        return false;
    }
    match &node.op {
        Op::Reshape { .. } | Op::Flatten { .. } | Op::Squeeze | Op::Unsqueeze => true,
        Op::Transpose { perm } => {
            let Some(info) = graph.values.get(value) else {
                return false;
            };
            let Some(dims) = concord_core::Shape::from_sym(&info.shape).map(|s| s.0) else {
                return false;
            };
            let perm: Vec<usize> = match perm {
                Some(p) => match p.iter().map(|&a| usize::try_from(a).ok()).collect() {
                    Some(p) => p,
                    None => return false,
                },
                None => (0..dims.len()).rev().collect(),
            };
            let moved: Vec<usize> = perm
                .iter()
                .copied()
                .filter(|&a| dims.get(a).is_some_and(|&d| d != 1))
                .collect();
            perm.len() == dims.len() && moved.windows(2).all(|w| w[0] < w[1])
        }
        _ => false,
    }
}

/// Absorbs the Transpose that alone reads a GRU's or LSTM's Y (node `i`'s output 0): the
/// walk stores Y's elements at the permuted strides instead, so that a bidirectional
/// layer's Y, [seq, dirs, batch, hidden], reaches the next layer as [seq, batch, dirs,
/// hidden] without a copy (PyTorch exports a stacked bidirectional LSTM or GRU with a
/// Transpose and a Reshape after every layer). True when it did.
fn absorb_recurrent_transpose(
    nodes: &mut Vec<FusedNode>,
    i: usize,
    outputs: &HashSet<String>,
) -> bool {
    let Some(y) = nodes[i]
        .node
        .outputs
        .first()
        .filter(|y| !y.is_empty())
        .cloned()
    else {
        return false;
    };
    let Some(j) = only_reader(nodes, i, &y, outputs) else {
        return false;
    };
    let Some(perm) = transpose_of(&nodes[j].node, &y).filter(|p| p.len() == 4) else {
        return false;
    };
    let Some(out) = nodes[j].node.outputs.first().cloned() else {
        return false;
    };
    let name = nodes[j].node.name.clone();
    nodes[i].epilogue.output_perm = Some(perm);
    nodes[i].node.outputs[0] = out;
    nodes[i].fused.push(name);
    nodes.remove(j);
    true
}

/// The perm of `node` when it is a Transpose of `value` (its input 0) with an explicit
/// perm of rank 2 to 4 that names every axis once.
fn transpose_of(node: &Node, value: &str) -> Option<Vec<usize>> {
    let Op::Transpose { perm: Some(perm) } = &node.op else {
        return None;
    };
    let rank = perm.len();
    let perm: Vec<usize> = perm
        .iter()
        .filter_map(|&a| usize::try_from(a).ok())
        .collect();
    let mut seen = perm.clone();
    seen.sort_unstable();
    ((2..=4).contains(&rank)
        && perm.len() == rank
        && seen == (0..rank).collect::<Vec<_>>()
        && input_is(node, 0, value))
    .then_some(perm)
}

/// Absorbs the erf GELU that reads node `i`'s output `x` as PyTorch exports it:
/// `Div(x, d) → Erf → Add(·, 1) → Mul(x, ·) → Mul(·, s)` (either operand order of the Add
/// and the Muls, d and s scalar constants), its four inner values read by the next step
/// only. True when it did.
fn absorb_gelu(
    graph: &Graph,
    nodes: &mut Vec<FusedNode>,
    i: usize,
    outputs: &HashSet<String>,
) -> bool {
    let Some(x) = activation_slot(nodes, i, outputs) else {
        return false;
    };
    let only_reader = |nodes: &[FusedNode], value: &str| only_reader(nodes, i, value, outputs);
    // The other operand when one of `a`, `b` is `value`.
    let other = |(a, b): (&str, &str), value: &str| -> Option<String> {
        if a == value && b != value {
            Some(b.to_string())
        } else if b == value && a != value {
            Some(a.to_string())
        } else {
            None
        }
    };
    // x is read by the Div and by the first Mul, and by nothing else.
    let Some(x_readers) = two_readers(nodes, i, &x) else {
        return false;
    };
    let Some(div) = x_readers
        .iter()
        .copied()
        .find(|&j| binary(&nodes[j].node, Binary::Div).is_some_and(|(a, _)| a == x))
    else {
        return false;
    };
    let Some((_, d)) = binary(&nodes[div].node, Binary::Div) else {
        return false;
    };
    let Some(divisor) = scalar_constant(graph, d) else {
        return false;
    };
    let t = nodes[div].node.outputs[0].clone();
    let Some(erf) = only_reader(nodes, &t) else {
        return false;
    };
    if !matches!(nodes[erf].node.op, Op::Unary(Unary::Erf)) || !input_is(&nodes[erf].node, 0, &t) {
        return false;
    }
    let Some(e) = nodes[erf].node.outputs.first().cloned() else {
        return false;
    };
    let Some(add) = only_reader(nodes, &e) else {
        return false;
    };
    let Some(one) = binary(&nodes[add].node, Binary::Add).and_then(|ab| other(ab, &e)) else {
        return false;
    };
    if scalar_constant(graph, &one) != Some(1.0) {
        return false;
    }
    let s = nodes[add].node.outputs[0].clone();
    let Some(mul) = only_reader(nodes, &s) else {
        return false;
    };
    if binary(&nodes[mul].node, Binary::Mul).and_then(|ab| other(ab, &s)) != Some(x.clone()) {
        return false;
    }
    let m = nodes[mul].node.outputs[0].clone();
    let Some(last) = only_reader(nodes, &m) else {
        return false;
    };
    let Some(s_name) = binary(&nodes[last].node, Binary::Mul).and_then(|ab| other(ab, &m)) else {
        return false;
    };
    let Some(scale) = scalar_constant(graph, &s_name) else {
        return false;
    };
    let y = nodes[last].node.outputs[0].clone();
    // The GELU must not change the shape: a one-element constant of higher rank than x
    // would broadcast it (x's extents may be unknown until run time; its rank is not).
    if !keeps_rank(graph, &x, [d, one.as_str(), s_name.as_str()])
        || x_readers.iter().all(|&j| j != mul)
    {
        return false;
    }
    absorb_chain(
        nodes,
        i,
        y,
        Activation::GeluErf { divisor, scale },
        [div, erf, add, mul, last],
    );
    true
}

/// Absorbs the SiLU that reads node `i`'s output `x` as exporters write it, `Sigmoid(x)`
/// and `Mul(x, ·)` (either operand order), x read by those two only and the sigmoid by the
/// Mul only. True when it did.
fn absorb_silu(
    graph: &Graph,
    nodes: &mut Vec<FusedNode>,
    i: usize,
    outputs: &HashSet<String>,
) -> bool {
    let Some(x) = activation_slot(nodes, i, outputs) else {
        return false;
    };
    // Only on f32 values: on f16 ones the nodes round the sigmoid to f16.
    if graph.values.get(&x).map(|v| v.dtype) != Some(DType::F32) {
        return false;
    }
    let Some(readers) = two_readers(nodes, i, &x) else {
        return false;
    };
    let Some(&sigmoid) = readers.iter().find(|&&j| {
        matches!(nodes[j].node.op, Op::Unary(Unary::Sigmoid)) && input_is(&nodes[j].node, 0, &x)
    }) else {
        return false;
    };
    let Some(&mul) = readers.iter().find(|&&j| j != sigmoid) else {
        return false;
    };
    let Some(s) = nodes[sigmoid].node.outputs.first().cloned() else {
        return false;
    };
    let multiplies = binary(&nodes[mul].node, Binary::Mul)
        .is_some_and(|(a, b)| (a == x && b == s) || (a == s && b == x));
    // The sigmoid is read by the Mul alone, once.
    if !multiplies || only_reader(nodes, sigmoid, &s, outputs) != Some(mul) {
        return false;
    }
    let y = nodes[mul].node.outputs[0].clone();
    absorb_chain(nodes, i, y, Activation::Silu, [sigmoid, mul]);
    true
}

/// Folds a squeeze-excite tail into the GlobalAveragePool at `i` (see [`Excite`]): the
/// pool's only reader a 1×1 conv to M channels, whose only reader is a 1×1 conv back to the
/// pool's C channels. Each conv has constant weights ([M, C, 1, 1], then [C, M, 1, 1]), a
/// constant bias or none, one group, no padding and no residual; its activation is
/// whatever its epilogue took. When the scales' only reader is a Mul of the pool's input by
/// them, that is folded too. One launch then does what took three or four. True when it
/// folded.
fn absorb_excite(
    graph: &Graph,
    nodes: &mut Vec<FusedNode>,
    i: usize,
    outputs: &HashSet<String>,
) -> bool {
    let head = &nodes[i];
    if head.excite.is_some() || head.epilogue != Epilogue::default() {
        return false;
    }
    let Some(x) = head.node.inputs.first().cloned().flatten() else {
        return false;
    };
    // A 2-D image (N, C, H, W), so the pooled value is (N, C, 1, 1); made by a kernel (a
    // constant's pool is computed on the host, by the unfused op).
    if graph.values.get(&x).map(|v| v.shape.len()) != Some(4) || graph.initializers.contains_key(&x)
    {
        return false;
    }
    let Some(pooled) = sole_output(nodes, i, outputs) else {
        return false;
    };
    let Some(j) = only_reader(nodes, i, &pooled, outputs) else {
        return false;
    };
    let Some(reduce) = excite_conv(graph, &nodes[j], &pooled) else {
        return false;
    };
    let Some(middle) = sole_output(nodes, j, outputs) else {
        return false;
    };
    let Some(k) = only_reader(nodes, j, &middle, outputs) else {
        return false;
    };
    let Some(expand) = excite_conv(graph, &nodes[k], &middle) else {
        return false;
    };
    // C → M → C, with both vectors within the kernel's local memory.
    let (m, c) = reduce.channels;
    if expand.channels != (c, m) || m.max(c) > EXCITE_MAX_CHANNELS {
        return false;
    }
    let excite = Excite {
        reduce: nodes[j].epilogue.activation,
        expand: nodes[k].epilogue.activation,
        scales_input: false,
    };
    let scales = nodes[k].node.outputs.concat();
    nodes[i].node.inputs = vec![
        Some(x.clone()),
        Some(reduce.weight),
        reduce.bias,
        Some(expand.weight),
        expand.bias,
    ];
    nodes[i].excite = Some(excite);
    absorb_chain(nodes, i, scales.clone(), Activation::None, [j, k]);
    // The Mul that applies the scales to the pooled image, when it is their only reader.
    if let Some(mul) = only_reader(nodes, i, &scales, outputs) {
        let applies = binary(&nodes[mul].node, Binary::Mul)
            .is_some_and(|(a, b)| (a == x && b == scales) || (a == scales && b == x))
            && nodes[mul].epilogue == Epilogue::default();
        if applies {
            let y = nodes[mul].node.outputs.concat();
            absorb_chain(nodes, i, y, Activation::None, [mul]);
            nodes[i].excite = Some(Excite {
                scales_input: true,
                ..excite
            });
        }
    }
    true
}

/// A conv that [`absorb_excite`] can fold: its weight, bias, and (output, input) channels.
struct ExciteConv {
    weight: String,
    bias: Option<String>,
    channels: (usize, usize),
}

/// `fused` as one of a squeeze-excite block's 1×1 convs reading `value` (see
/// [`absorb_excite`]).
fn excite_conv(graph: &Graph, fused: &FusedNode, value: &str) -> Option<ExciteConv> {
    let Op::Conv(attrs) = &fused.node.op else {
        return None;
    };
    let unpadded = attrs.pads.iter().all(|&p| p == 0)
        && matches!(attrs.auto_pad, AutoPad::NotSet | AutoPad::Valid);
    if attrs.group != 1
        || !unpadded
        || !attrs.kernel_shape.iter().all(|&k| k == 1)
        || fused.epilogue.residual.is_some()
        || fused.epilogue.bias.is_some()
        || fused.node.outputs.len() != 1
        || !input_is(&fused.node, 0, value)
    {
        return None;
    }
    let weight = fused.node.inputs.get(1)?.clone()?;
    let w = graph.initializers.get(&weight)?;
    let (m, c) = match w.dims() {
        &[m, c, 1, 1] => (m, c),
        _ => return None,
    };
    let bias = match fused.node.inputs.get(2).cloned().flatten() {
        None => None,
        Some(name) => {
            let t = graph.initializers.get(&name)?;
            if t.dims() != [m] || t.dtype() != w.dtype() {
                return None;
            }
            Some(name)
        }
    };
    Some(ExciteConv {
        weight,
        bias,
        channels: (m, c),
    })
}

/// Node `i`'s output when it has exactly one and it is not a partition output (so a fused
/// epilogue may replace what its readers see).
fn sole_output(nodes: &[FusedNode], i: usize, outputs: &HashSet<String>) -> Option<String> {
    match &nodes[i].node.outputs[..] {
        [value] if !outputs.contains(value) => Some(value.clone()),
        _ => None,
    }
}

/// Node `i`'s sole output (see [`sole_output`]) when its epilogue has no activation yet, so
/// an activation matched after it can be fused in.
fn activation_slot(nodes: &[FusedNode], i: usize, outputs: &HashSet<String>) -> Option<String> {
    if nodes[i].epilogue.activation != Activation::None {
        return None;
    }
    sole_output(nodes, i, outputs)
}

/// The one node after `i` that reads `value`, reading it once, when `value` is not a
/// partition output.
fn only_reader(
    nodes: &[FusedNode],
    i: usize,
    value: &str,
    outputs: &HashSet<String>,
) -> Option<usize> {
    if outputs.contains(value) {
        return None;
    }
    let (readers, reads) = readers_of(nodes, value);
    match readers[..] {
        [j] if reads == 1 && j > i => Some(j),
        _ => None,
    }
}

/// The two nodes after `i` that read `value`, each once, when nothing else reads it.
fn two_readers(nodes: &[FusedNode], i: usize, value: &str) -> Option<Vec<usize>> {
    let (readers, reads) = readers_of(nodes, value);
    (readers.len() == 2 && reads == 2 && readers.iter().all(|&j| j > i)).then_some(readers)
}

/// The nodes that read `value`, and how many reads there are in all (a node may read a
/// value more than once).
fn readers_of(nodes: &[FusedNode], value: &str) -> (Vec<usize>, usize) {
    let readers = (0..nodes.len())
        .filter(|&j| nodes[j].reads().any(|r| r == value))
        .collect();
    let reads = nodes
        .iter()
        .map(|n| n.reads().filter(|r| *r == value).count())
        .sum();
    (readers, reads)
}

/// Makes node `i` compute the chain of `absorbed` nodes after it as its epilogue's
/// `activation`, writing their last value `y`, and removes them.
fn absorb_chain<const N: usize>(
    nodes: &mut Vec<FusedNode>,
    i: usize,
    y: String,
    activation: Activation,
    mut absorbed: [usize; N],
) {
    nodes[i].node.outputs = vec![y];
    nodes[i].epilogue.activation = activation;
    for &j in &absorbed {
        let name = nodes[j].node.name.clone();
        let inner = nodes[j].fused.clone();
        nodes[i].fused.push(name);
        nodes[i].fused.extend(inner);
    }
    absorbed.sort_unstable();
    for &j in absorbed.iter().rev() {
        nodes.remove(j);
    }
}

/// The two operands of `node` when it is the binary `op` with one output.
fn binary(node: &Node, op: Binary) -> Option<(&str, &str)> {
    match (&node.op, node.inputs.as_slice(), node.outputs.as_slice()) {
        (Op::Binary(o), [Some(a), Some(b)], [_]) if *o == op => Some((a, b)),
        _ => None,
    }
}

/// `node` as a scaling of `value` by a one-element constant that keeps its shape: a Mul by
/// one (either operand order) or a Div of `value` by one.
fn scaling(graph: &Graph, node: &Node, value: &str) -> Option<Activation> {
    let (op, (a, b)) = [Binary::Mul, Binary::Div]
        .into_iter()
        .find_map(|op| binary(node, op).map(|ab| (op, ab)))?;
    let constant = if a == value && b != value {
        b
    } else if op == Binary::Mul && b == value && a != value {
        a
    } else {
        return None;
    };
    if !keeps_rank(graph, value, [constant]) {
        return None;
    }
    let c = scalar_constant(graph, constant)?;
    Some(if op == Binary::Div {
        Activation::DivBy(c)
    } else {
        Activation::MulBy(c)
    })
}

/// Whether broadcasting f32 `value` with each of `constants` keeps its shape: none has a
/// higher rank than it.
fn keeps_rank<'a>(
    graph: &Graph,
    value: &str,
    constants: impl IntoIterator<Item = &'a str>,
) -> bool {
    let Some(v) = graph.values.get(value) else {
        return false;
    };
    v.dtype == concord_core::DType::F32
        && constants.into_iter().all(|c| {
            graph
                .initializers
                .get(c)
                .is_some_and(|t| t.dims().len() <= v.shape.len())
        })
}

/// The value of a one-element f32 constant.
fn scalar_constant(graph: &Graph, name: &str) -> Option<f32> {
    match graph.initializers.get(name)?.data() {
        TensorData::F32(v) if v.len() == 1 => Some(v[0]),
        _ => None,
    }
}

/// Whether `bias` is a constant of shape [1, …, 1, N] that adds along the last axis of
/// `value` (N its last extent) without broadcasting `value` to a larger shape.
fn is_row_bias(graph: &Graph, value: &str, bias: &str) -> bool {
    let (Some(v), Some(t)) = (graph.values.get(value), graph.initializers.get(bias)) else {
        return false;
    };
    let dims = t.dims();
    let Some(concord_core::Dim::Fixed(n)) = v.shape.last() else {
        return false;
    };
    v.dtype == t.dtype()
        && !dims.is_empty()
        && dims.len() <= v.shape.len()
        && dims.last() == Some(n)
        && dims[..dims.len() - 1].iter().all(|&d| d == 1)
}

fn input_is(node: &Node, index: usize, value: &str) -> bool {
    node.inputs.get(index).and_then(|i| i.as_deref()) == Some(value)
}

fn same_known_shape(graph: &Graph, a: &str, b: &str) -> bool {
    match (graph.values.get(a), graph.values.get(b)) {
        (Some(x), Some(y)) => {
            x.dtype == y.dtype
                && x.shape == y.shape
                && x.shape
                    .iter()
                    .all(|d| !matches!(d, concord_core::Dim::Unknown))
        }
        _ => false,
    }
}

/// The rank of `node`'s input `index`, when the graph knows it.
fn input_rank(graph: &Graph, node: &Node, index: usize) -> Option<usize> {
    let name = node.inputs.get(index)?.as_deref()?;
    let info = graph.values.get(name).map(|v| v.shape.len());
    info.or_else(|| graph.initializers.get(name).map(|t| t.dims().len()))
}

/// Whether `a` and `b` can have one shape: one dtype, one rank, and equal extents wherever
/// both are known (the plan checks the rest).
fn maybe_same_shape(graph: &Graph, a: &str, b: &str) -> bool {
    use concord_core::Dim;
    match (graph.values.get(a), graph.values.get(b)) {
        (Some(x), Some(y)) => {
            x.dtype == y.dtype
                && x.shape.len() == y.shape.len()
                && x.shape.iter().zip(&y.shape).all(|pair| match pair {
                    (Dim::Fixed(m), Dim::Fixed(n)) => m == n,
                    _ => true,
                })
        }
        _ => false,
    }
}

/// The activation a node computes, when its parameters are known now.
fn activation_of(graph: &Graph, op: &Op, node: &Node) -> Option<Activation> {
    Some(match op {
        Op::Unary(Unary::Relu) => Activation::Relu,
        Op::Unary(Unary::LeakyRelu { alpha }) => Activation::LeakyRelu(*alpha),
        Op::Unary(Unary::HardSigmoid { alpha, beta }) => Activation::HardSigmoid(*alpha, *beta),
        Op::Unary(Unary::HardSwish) => Activation::HardSwish,
        Op::Unary(Unary::Sigmoid) => Activation::Sigmoid,
        Op::Clip => {
            let bound = |index: usize, default: f32| -> Option<f32> {
                match node.inputs.get(index).and_then(|i| i.as_deref()) {
                    None => Some(default),
                    Some(name) => match graph.initializers.get(name)?.data() {
                        TensorData::F32(v) if v.len() == 1 => Some(v[0]),
                        _ => None,
                    },
                }
            };
            Activation::Clip(bound(1, f32::NEG_INFINITY)?, bound(2, f32::INFINITY)?)
        }
        _ => return None,
    })
}

/// Folds BatchNormalization into the conv: W'[o] = W[o]·s[o], b'[o] = (b[o] - mean[o])·s[o]
/// + beta[o] with s = scale / sqrt(var + eps), computed in f64 and rounded once.
fn fold_batch_norm(graph: &mut Graph, conv: &mut Node, bn: &Node, epsilon: f32) -> bool {
    let Op::Conv(Conv { .. }) = conv.op else {
        return false;
    };
    let get = |graph: &Graph, index: usize| -> Option<Vec<f64>> {
        let name = bn.inputs.get(index)?.as_deref()?;
        let t = graph.initializers.get(name)?;
        t.as_f32()
            .map(|v| v.iter().map(|&x| f64::from(x)).collect())
    };
    let (Some(scale), Some(beta), Some(mean), Some(var)) =
        (get(graph, 1), get(graph, 2), get(graph, 3), get(graph, 4))
    else {
        return false;
    };
    let Some(w_name) = conv.inputs.get(1).and_then(|i| i.clone()) else {
        return false;
    };
    let Some(w) = graph.initializers.get(&w_name) else {
        return false;
    };
    let Some(w_data) = w.as_f32() else {
        return false;
    };
    let out_channels = w.dims().first().copied().unwrap_or(0);
    if out_channels == 0
        || [&scale, &beta, &mean, &var]
            .iter()
            .any(|v| v.len() != out_channels)
    {
        return false;
    }
    let per = w_data.len() / out_channels;
    let bias: Vec<f64> = match conv.inputs.get(2).and_then(|i| i.as_deref()) {
        None => vec![0.0; out_channels],
        Some(name) => match graph.initializers.get(name).and_then(|t| t.as_f32()) {
            Some(b) if b.len() == out_channels => b.iter().map(|&x| f64::from(x)).collect(),
            _ => return false,
        },
    };
    let s: Vec<f64> = (0..out_channels)
        .map(|o| scale[o] / (var[o] + f64::from(epsilon)).sqrt())
        .collect();
    let new_w: Vec<f32> = w_data
        .iter()
        .enumerate()
        .map(|(k, &x)| (f64::from(x) * s[k / per]) as f32)
        .collect();
    let new_b: Vec<f32> = (0..out_channels)
        .map(|o| ((bias[o] - mean[o]) * s[o] + beta[o]) as f32)
        .collect();
    let (Ok(w_t), Ok(b_t)) = (
        Tensor::from_f32(w.shape().clone(), new_w),
        Tensor::from_f32([out_channels], new_b),
    ) else {
        return false;
    };
    let w_new_name = format!("{}::bn_folded_weight", conv.name);
    let b_new_name = format!("{}::bn_folded_bias", conv.name);
    let mut values: HashMap<String, concord_core::ValueInfo> = HashMap::new();
    values.insert(
        w_new_name.clone(),
        concord_core::ValueInfo::new(w_new_name.clone(), w_t.dtype(), w_t.shape().to_sym()),
    );
    values.insert(
        b_new_name.clone(),
        concord_core::ValueInfo::new(b_new_name.clone(), b_t.dtype(), b_t.shape().to_sym()),
    );
    graph.values.extend(values);
    graph.initializers.insert(w_new_name.clone(), w_t);
    graph.initializers.insert(b_new_name.clone(), b_t);
    conv.inputs = vec![
        conv.inputs.first().cloned().flatten(),
        Some(w_new_name),
        Some(b_new_name),
    ];
    true
}
