//! The planted-fault executors: each wraps the reference executor with exactly one bug that
//! real backends have shipped. Most bugs are graph rewrites applied at prepare (the reference
//! then computes what the buggy kernel would); a few are kernels of their own or changes to
//! the outputs; the concurrency bugs force their interleaving with a rendezvous, never with
//! a pause.

use concord::executor::{Error, Node, Op};
use concord::op::{
    Binary, Conv, CoordinateTransform, Gemm, NearestMode, Pool, Reduce, ReduceKind, Unary,
};
use concord::{
    Availability, CpuExecutor, DType, DeviceInfo, Executor, Graph, PreparedPartition, ProfileSink,
    Support, Target, TargetSpec, Tensor,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

/// One bug per planted executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No bug: the control.
    None,
    /// A prepared-plan cache shared process-wide and keyed by op name only.
    CacheKeyedByOpName,
    /// Claims the nodes, then runs them on the CPU path without saying so.
    SilentCpuFallback,
    /// Emits its own fallback warning on top of the planner's.
    DoubleNotice,
    /// Conv padding shifted by one on one side.
    ConvPadOffByOne,
    /// Conv groups ignored: every output channel reads the first group's input channels
    /// (the group offset into the input is never added).
    ConvGroupsIgnored,
    /// A lower-rank operand aligned with the leading axes instead of the trailing ones.
    BroadcastWrongAxis,
    /// An output buffer from a pool handed to the next call before its reader is done.
    BufferReusedTooEarly,
    /// Scratch not cleared between calls, so the second call differs.
    UninitialisedScratch,
    /// Intermediates stored in f16 on an f32 target: overflow to Inf.
    F16OverflowOnF32Target,
    /// NaN turned into 0.
    NanToZero,
    /// Gemm ignores transB.
    GemmIgnoresTransB,
    /// Subnormal results flushed to zero (a GPU's flush-to-zero mode left on).
    FlushDenormals,
    /// Float-to-integer Cast rounds to nearest instead of truncating toward zero.
    CastRoundsInsteadOfTruncating,
    /// A long ReduceSum accumulated in f16: every term and the running total in half
    /// precision.
    F16AccumulationInLongSum,
    /// Softmax as exp(x) / sum(exp(x)), without subtracting the maximum first.
    SoftmaxWithoutMaxSubtraction,
    /// Softmax with opset-11 semantics on an opset-13 model: over the input flattened to
    /// 2-D at `axis`, not along `axis`.
    SoftmaxFlattenedAtAxis,
    /// Resize's half_pixel and asymmetric coordinate transforms swapped.
    ResizeCoordinateTransformSwapped,
    /// Nearest Resize ignores nearest_mode (always round_prefer_floor).
    ResizeNearestModeIgnored,
    /// Gather clamps negative indices to 0 instead of counting them from the end.
    GatherNegativeIndexNotWrapped,
    /// Transpose by the inverse of `perm`.
    TransposeInversePerm,
    /// Slice with a negative step takes both bounds one element lower.
    SliceNegativeStepOffByOne,
    /// BatchNormalization's per-channel statistics broadcast along the last axis.
    BatchNormWrongAxis,
    /// Conv ignores dilations.
    ConvIgnoresDilation,
    /// A reduction over the axis after the one asked for.
    ReduceWrongAxis,
    /// MaxPool pads with zeros instead of -inf.
    MaxPoolPadsWithZero,
    /// AveragePool's count_include_pad inverted.
    AveragePoolCountIncludePadInverted,
    /// LayerNormalization ignores its epsilon (the default 1e-5 hard-coded).
    LayerNormEpsilonIgnored,
    /// Constant-mode Pad ignores the constant value and pads with zeros.
    PadValueIgnored,
    /// Integer Mod with C's sign rule (fmod) where ONNX asks for Python's.
    ModWithCSign,
    /// ArgMax ignores select_last_index.
    ArgMaxIgnoresSelectLastIndex,
    /// LeakyRelu ignores alpha (the default 0.01 hard-coded).
    LeakyReluAlphaIgnored,
    /// The last, partial work-group of 16 elements is never launched: the tail of every
    /// output whose length is not a multiple of 16 stays zero.
    PartialTileDropped,
    /// A divisor's zero loses its sign (an `x + 0.0` added by a fused zero bias, or folded
    /// under fast-math's no-signed-zeros), so x / -0 gives +inf instead of -inf.
    DivisorLosesSignOfZero,
}

/// The width of the work-group the PartialTileDropped fault rounds down to.
const TILE: usize = 16;

/// How long the BufferReusedTooEarly rendezvous waits for its partner at most. The catch
/// does not depend on it: the partner's write releases the wait. It only keeps a broken
/// scenario (a single worker thread) from hanging the test; a wait that runs out reads back
/// the call's own values, so the fault goes uncaught and the test says so.
const RENDEZVOUS_LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug)]
pub struct Planted {
    name: String,
    fault: Fault,
}

impl Planted {
    pub fn new(fault: Fault) -> Planted {
        Planted {
            name: format!("planted-{}", format!("{fault:?}").to_lowercase()),
            fault,
        }
    }
}

impl Executor for Planted {
    fn name(&self) -> &str {
        &self.name
    }
    fn probe(&self) -> Availability {
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "planted host".into(),
                ..DeviceInfo::default()
            }],
        }
    }
    fn targets(&self) -> Vec<TargetSpec> {
        // It wraps the reference, so it declares the reference's target.
        CpuExecutor::new().targets()
    }
    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support {
        if *target != concord::targets::CPU {
            return Support::No("planted executors run on the host only".into());
        }
        CpuExecutor::new().supports(graph, node, &concord::targets::CPU)
    }
    fn prepare(
        &self,
        partition: &Graph,
        _target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        let mut graph = partition.clone();
        plant(self.fault, &mut graph);
        if self.fault == Fault::DoubleNotice {
            tracing::warn!(target: "planted", "planted executor: falling back to the CPU for some nodes");
        }
        let inner: Arc<dyn PreparedPartition> = if self.fault == Fault::CacheKeyedByOpName {
            let key = graph
                .nodes
                .first()
                .map(|n| n.op.name().to_string())
                .unwrap_or_default();
            let cache = PLAN_CACHE.get_or_init(Mutex::default);
            let mut cache = cache
                .lock()
                .map_err(|_| Error::InvalidGraph("poisoned".into()))?;
            match cache.get(&key) {
                Some(p) => p.clone(),
                None => {
                    let p: Arc<dyn PreparedPartition> =
                        Arc::from(CpuExecutor::new().prepare(&graph, &concord::targets::CPU)?);
                    cache.insert(key, p.clone());
                    p
                }
            }
        } else {
            Arc::from(CpuExecutor::new().prepare(&graph, &concord::targets::CPU)?)
        };
        Ok(Box::new(PlantedPartition {
            inner,
            fault: self.fault,
            name: self.name.clone(),
            graph,
            prepared_on: std::thread::current().id(),
            scratch: Mutex::new(Vec::new()),
            pool: Mutex::new(BufferPool::default()),
            written: Condvar::new(),
        }))
    }
}

/// The process-wide cache of the CacheKeyedByOpName fault.
static PLAN_CACHE: OnceLock<Mutex<HashMap<String, Arc<dyn PreparedPartition>>>> = OnceLock::new();

/// Rewrites `graph` into what a kernel with `fault` computes, for the faults that are
/// rewrites; leaves it alone for the others.
fn plant(fault: Fault, graph: &mut Graph) {
    let mut rewrite = Rewrite::new(graph);
    match fault {
        Fault::ConvPadOffByOne => rewrite.each(|node| {
            if let Op::Conv(Conv { pads, .. }) = &mut node.op {
                // Move one cell of padding from the end of the last axis to its beginning:
                // same output shape, shifted window.
                let half = pads.len() / 2;
                if half > 0 && pads[pads.len() - 1] > 0 {
                    pads[half - 1] += 1;
                    let last = pads.len() - 1;
                    pads[last] -= 1;
                }
            }
        }),
        Fault::ConvGroupsIgnored => rewrite.conv_groups_ignored(),
        Fault::ConvIgnoresDilation => rewrite.each(|node| {
            if let Op::Conv(Conv { dilations, .. }) = &mut node.op {
                dilations.clear();
            }
        }),
        Fault::GemmIgnoresTransB => rewrite.each(|node| {
            if let Op::Gemm(Gemm { trans_b, .. }) = &mut node.op {
                *trans_b = false;
            }
        }),
        Fault::BroadcastWrongAxis => rewrite.misalign_broadcasts(),
        Fault::CastRoundsInsteadOfTruncating => rewrite.round_before_integer_casts(),
        Fault::SoftmaxWithoutMaxSubtraction => rewrite.naive_softmax(),
        Fault::SoftmaxFlattenedAtAxis => rewrite.flattened_softmax(),
        Fault::ResizeCoordinateTransformSwapped => rewrite.each(|node| {
            if let Op::Resize(r) = &mut node.op {
                r.coordinate_transformation_mode = match r.coordinate_transformation_mode {
                    CoordinateTransform::HalfPixel => CoordinateTransform::Asymmetric,
                    CoordinateTransform::Asymmetric => CoordinateTransform::HalfPixel,
                    other => other,
                };
            }
        }),
        Fault::ResizeNearestModeIgnored => rewrite.each(|node| {
            if let Op::Resize(r) = &mut node.op {
                r.nearest_mode = NearestMode::RoundPreferFloor;
            }
        }),
        Fault::GatherNegativeIndexNotWrapped => rewrite.clamp_gather_indices(),
        Fault::DivisorLosesSignOfZero => rewrite.add_zero_to_divisors(),
        Fault::TransposeInversePerm => rewrite.each(|node| {
            if let Op::Transpose { perm: Some(perm) } = &mut node.op {
                let mut inverse = vec![0i64; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    if let Some(slot) = usize::try_from(p).ok().and_then(|p| inverse.get_mut(p)) {
                        *slot = i as i64;
                    }
                }
                *perm = inverse;
            }
        }),
        Fault::SliceNegativeStepOffByOne => rewrite.shift_negative_step_slices(),
        Fault::BatchNormWrongAxis => rewrite.batch_norm_on_last_axis(),
        Fault::ReduceWrongAxis => rewrite.reduce_next_axis(),
        Fault::MaxPoolPadsWithZero => rewrite.max_pool_zero_padding(),
        Fault::AveragePoolCountIncludePadInverted => rewrite.each(|node| {
            if let Op::AveragePool(Pool {
                count_include_pad, ..
            }) = &mut node.op
            {
                *count_include_pad = !*count_include_pad;
            }
        }),
        Fault::LayerNormEpsilonIgnored => rewrite.each(|node| {
            if let Op::LayerNormalization { epsilon, .. } = &mut node.op {
                *epsilon = 1e-5;
            }
        }),
        Fault::PadValueIgnored => rewrite.each(|node| {
            if matches!(node.op, Op::Pad { .. }) {
                if let Some(value) = node.inputs.get_mut(2) {
                    *value = None;
                }
            }
        }),
        Fault::ModWithCSign => rewrite.each(|node| {
            if let Op::Binary(Binary::Mod { fmod }) = &mut node.op {
                *fmod = true;
            }
        }),
        Fault::ArgMaxIgnoresSelectLastIndex => rewrite.each(|node| {
            if let Op::ArgMax(arg) = &mut node.op {
                arg.select_last_index = false;
            }
        }),
        Fault::LeakyReluAlphaIgnored => rewrite.each(|node| {
            if let Op::Unary(Unary::LeakyRelu { alpha }) = &mut node.op {
                *alpha = 0.01;
            }
        }),
        _ => {}
    }
    rewrite.finish();
}

/// A graph being rewritten: nodes to replace, constants to add, fresh value names.
struct Rewrite<'a> {
    graph: &'a mut Graph,
    /// Per original node index, the nodes that replace it (in order).
    replaced: BTreeMap<usize, Vec<Node>>,
}

impl<'a> Rewrite<'a> {
    fn new(graph: &'a mut Graph) -> Rewrite<'a> {
        Rewrite {
            graph,
            replaced: BTreeMap::new(),
        }
    }

    /// Applies `f` to every node in place.
    fn each(&mut self, f: impl FnMut(&mut Node)) {
        self.graph.nodes.iter_mut().for_each(f);
    }

    /// The dims of a value: an initializer's, or the inferred shape's when it is concrete.
    fn dims(&self, name: &str) -> Option<Vec<usize>> {
        if let Some(t) = self.graph.initializers.get(name) {
            return Some(t.dims().to_vec());
        }
        self.graph
            .values
            .get(name)
            .or_else(|| self.graph.inputs.iter().find(|v| v.name == name))
            .and_then(|v| v.concrete_shape())
            .map(|s| s.dims().to_vec())
    }

    /// Adds a constant and returns its name.
    fn constant(&mut self, index: usize, what: &str, value: Tensor) -> String {
        let name = format!("planted_{index}_{what}");
        self.graph.initializers.insert(name.clone(), value);
        name
    }

    fn replace(&mut self, index: usize, nodes: Vec<Node>) {
        self.replaced.insert(index, nodes);
    }

    /// Puts the replacement nodes in place of the originals.
    fn finish(self) {
        if self.replaced.is_empty() {
            return;
        }
        let old = std::mem::take(&mut self.graph.nodes);
        for (i, node) in old.into_iter().enumerate() {
            match self.replaced.get(&i) {
                Some(nodes) => self.graph.nodes.extend(nodes.iter().cloned()),
                None => self.graph.nodes.push(node),
            }
        }
    }

    fn input(node: &Node, slot: usize) -> Option<String> {
        node.inputs.get(slot).cloned().flatten()
    }

    /// Conv with `group` g becomes a dense Conv over the first C/g input channels.
    fn conv_groups_ignored(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            let Op::Conv(conv) = &node.op else { continue };
            if conv.group <= 1 {
                continue;
            }
            let (Some(x), Some(w)) = (Self::input(&node, 0), Self::input(&node, 1)) else {
                continue;
            };
            let Some(per_group) = self.dims(&w).and_then(|d| d.get(1).copied()) else {
                continue;
            };
            let starts = self.constant(i, "starts", Tensor::vec_i64(vec![0]));
            let ends = self.constant(i, "ends", Tensor::vec_i64(vec![per_group as i64]));
            let axes = self.constant(i, "axes", Tensor::vec_i64(vec![1]));
            let first = format!("planted_{i}_first_group");
            let slice = Node::new(
                format!("planted_{i}_slice"),
                Op::Slice,
                &[&x, &starts, &ends, &axes],
                &[&first],
            );
            let mut dense = node.clone();
            dense.op = Op::Conv(Conv {
                group: 1,
                ..conv.clone()
            });
            dense.inputs[0] = Some(first);
            self.replace(i, vec![slice, dense]);
        }
    }

    /// A lower-rank operand of Add/Sub/Mul/Div gets trailing size-1 axes, so it lines up
    /// with the leading axes.
    fn misalign_broadcasts(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            if !matches!(
                node.op,
                Op::Binary(Binary::Add | Binary::Sub | Binary::Mul | Binary::Div)
            ) {
                continue;
            }
            let ranks: Vec<usize> = node
                .inputs
                .iter()
                .map(|n| {
                    n.as_deref()
                        .and_then(|n| self.dims(n))
                        .map_or(0, |d| d.len())
                })
                .collect();
            let Some(&max) = ranks.iter().max() else {
                continue;
            };
            let mut nodes = Vec::new();
            let mut moved_node = node.clone();
            for (slot, &rank) in ranks.iter().enumerate() {
                if rank == 0 || rank >= max {
                    continue;
                }
                let Some(name) = Self::input(&node, slot) else {
                    continue;
                };
                let axes: Vec<i64> = (rank as i64..max as i64).collect();
                let axes = self.constant(i, &format!("axes_{slot}"), Tensor::vec_i64(axes));
                let moved = format!("planted_{i}_moved_{slot}");
                nodes.push(Node::new(
                    format!("planted_{i}_unsqueeze_{slot}"),
                    Op::Unsqueeze,
                    &[&name, &axes],
                    &[&moved],
                ));
                moved_node.inputs[slot] = Some(moved);
            }
            if !nodes.is_empty() {
                nodes.push(moved_node);
                self.replace(i, nodes);
            }
        }
    }

    /// A Cast from a float type to an integer type rounds its input first.
    fn round_before_integer_casts(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            let Op::Cast { to } = node.op else { continue };
            let Some(x) = Self::input(&node, 0) else {
                continue;
            };
            let from_float = self
                .graph
                .values
                .get(&x)
                .or_else(|| self.graph.inputs.iter().find(|v| v.name == x))
                .is_some_and(|v| matches!(v.dtype, DType::F32 | DType::F16));
            if !from_float || !matches!(to, DType::I64 | DType::I32) {
                continue;
            }
            let rounded = format!("planted_{i}_rounded");
            let round = Node::new(
                format!("planted_{i}_round"),
                Op::Unary(Unary::Round),
                &[&x],
                &[&rounded],
            );
            let mut cast = node.clone();
            cast.inputs[0] = Some(rounded);
            self.replace(i, vec![round, cast]);
        }
    }

    /// Softmax(x) becomes Exp(x) / ReduceSum(Exp(x)) along the axis.
    fn naive_softmax(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            let Op::Softmax { axis } = node.op else {
                continue;
            };
            let (Some(x), Some(y)) = (Self::input(&node, 0), node.outputs.first().cloned()) else {
                continue;
            };
            let e = format!("planted_{i}_exp");
            let s = format!("planted_{i}_sum");
            self.replace(
                i,
                vec![
                    Node::new(
                        format!("planted_{i}_exp"),
                        Op::Unary(Unary::Exp),
                        &[&x],
                        &[&e],
                    ),
                    Node::new(
                        format!("planted_{i}_sum"),
                        Op::Reduce(
                            ReduceKind::Sum,
                            Reduce {
                                axes: Some(vec![axis]),
                                keepdims: true,
                                noop_with_empty_axes: false,
                            },
                        ),
                        &[&e],
                        &[&s],
                    ),
                    Node::new(
                        format!("planted_{i}_div"),
                        Op::Binary(Binary::Div),
                        &[&e, &s],
                        &[&y],
                    ),
                ],
            );
        }
    }

    /// Softmax along `axis` becomes Softmax over the input flattened to
    /// [prod(dims[..axis]), prod(dims[axis..])], reshaped back.
    fn flattened_softmax(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            let Op::Softmax { axis } = node.op else {
                continue;
            };
            let (Some(x), Some(y)) = (Self::input(&node, 0), node.outputs.first().cloned()) else {
                continue;
            };
            let Some(dims) = self.dims(&x) else { continue };
            let rank = dims.len() as i64;
            let Ok(axis) = usize::try_from(if axis < 0 { axis + rank } else { axis }) else {
                continue;
            };
            let outer: usize = dims[..axis.min(dims.len())].iter().product();
            let inner: usize = dims[axis.min(dims.len())..].iter().product();
            let flat_shape = self.constant(
                i,
                "flat_shape",
                Tensor::vec_i64(vec![outer as i64, inner as i64]),
            );
            let back_shape = self.constant(
                i,
                "back_shape",
                Tensor::vec_i64(dims.iter().map(|&d| d as i64).collect()),
            );
            let flat = format!("planted_{i}_flat");
            let soft = format!("planted_{i}_soft");
            self.replace(
                i,
                vec![
                    Node::new(
                        format!("planted_{i}_flatten"),
                        Op::Reshape { allowzero: false },
                        &[&x, &flat_shape],
                        &[&flat],
                    ),
                    Node::new(
                        format!("planted_{i}_softmax"),
                        Op::Softmax { axis: 1 },
                        &[&flat],
                        &[&soft],
                    ),
                    Node::new(
                        format!("planted_{i}_unflatten"),
                        Op::Reshape { allowzero: false },
                        &[&soft, &back_shape],
                        &[&y],
                    ),
                ],
            );
        }
    }

    /// Gather's indices pass through Relu: negative ones read element 0.
    fn clamp_gather_indices(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            if !matches!(node.op, Op::Gather { .. }) {
                continue;
            }
            let Some(indices) = Self::input(&node, 1) else {
                continue;
            };
            let clamped = format!("planted_{i}_clamped");
            let relu = Node::new(
                format!("planted_{i}_clamp"),
                Op::Unary(Unary::Relu),
                &[&indices],
                &[&clamped],
            );
            let mut gather = node.clone();
            gather.inputs[1] = Some(clamped);
            self.replace(i, vec![relu, gather]);
        }
    }

    /// Every f32 divisor passes through `+ 0.0`, which turns -0 into +0 and leaves every
    /// other value as it is.
    fn add_zero_to_divisors(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            if !matches!(node.op, Op::Binary(Binary::Div)) {
                continue;
            }
            let Some(divisor) = Self::input(&node, 1) else {
                continue;
            };
            let is_f32 = self
                .graph
                .values
                .get(&divisor)
                .or_else(|| self.graph.inputs.iter().find(|v| v.name == divisor))
                .is_some_and(|v| v.dtype == DType::F32);
            if !is_f32 {
                continue;
            }
            let zero = self.constant(i, "zero", Tensor::scalar_f32(0.0));
            let unsigned = format!("planted_{i}_unsigned");
            let add = Node::new(
                format!("planted_{i}_add_zero"),
                Op::Binary(Binary::Add),
                &[&divisor, &zero],
                &[&unsigned],
            );
            let mut div = node.clone();
            div.inputs[1] = Some(unsigned);
            self.replace(i, vec![add, div]);
        }
    }

    /// Slice's constant starts and ends, on every axis with a negative step, one lower.
    fn shift_negative_step_slices(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            if !matches!(node.op, Op::Slice) {
                continue;
            }
            let bound = |slot| {
                Self::input(&node, slot)
                    .and_then(|n| self.graph.initializers.get(&n))
                    .and_then(Tensor::to_i64_vec)
            };
            let (Some(mut starts), Some(mut ends), Some(steps)) = (bound(1), bound(2), bound(4))
            else {
                continue;
            };
            for ((s, e), &step) in starts.iter_mut().zip(ends.iter_mut()).zip(&steps) {
                if step < 0 {
                    *s = s.saturating_sub(1);
                    *e = e.saturating_sub(1);
                }
            }
            let starts = self.constant(i, "starts", Tensor::vec_i64(starts));
            let ends = self.constant(i, "ends", Tensor::vec_i64(ends));
            let mut slice = node.clone();
            slice.inputs[1] = Some(starts);
            slice.inputs[2] = Some(ends);
            self.replace(i, vec![slice]);
        }
    }

    /// BatchNormalization runs on the input with axes 1 and rank-1 swapped, and the result
    /// is swapped back: the statistics index the last axis.
    fn batch_norm_on_last_axis(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            if !matches!(node.op, Op::BatchNormalization { .. }) {
                continue;
            }
            let (Some(x), Some(y)) = (Self::input(&node, 0), node.outputs.first().cloned()) else {
                continue;
            };
            let Some(rank) = self.dims(&x).map(|d| d.len()) else {
                continue;
            };
            if rank < 3 {
                continue;
            }
            let mut perm: Vec<i64> = (0..rank as i64).collect();
            perm.swap(1, rank - 1);
            let swapped = format!("planted_{i}_swapped");
            let normed = format!("planted_{i}_normed");
            let mut norm = node.clone();
            norm.inputs[0] = Some(swapped.clone());
            norm.outputs = vec![normed.clone()];
            self.replace(
                i,
                vec![
                    Node::new(
                        format!("planted_{i}_swap"),
                        Op::Transpose {
                            perm: Some(perm.clone()),
                        },
                        &[&x],
                        &[&swapped],
                    ),
                    norm,
                    Node::new(
                        format!("planted_{i}_swap_back"),
                        Op::Transpose { perm: Some(perm) },
                        &[&normed],
                        &[&y],
                    ),
                ],
            );
        }
    }

    /// Every reduction axis (attribute or constant input) one further, modulo the rank.
    fn reduce_next_axis(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            let Op::Reduce(kind, reduce) = &node.op else {
                continue;
            };
            let Some(rank) = Self::input(&node, 0)
                .and_then(|x| self.dims(&x))
                .map(|d| d.len() as i64)
            else {
                continue;
            };
            if rank < 2 {
                continue;
            }
            let next = |axes: &[i64]| -> Vec<i64> {
                axes.iter()
                    .map(|&a| (if a < 0 { a + rank } else { a } + 1) % rank)
                    .collect()
            };
            let mut moved = node.clone();
            if let Some(axes) = &reduce.axes {
                moved.op = Op::Reduce(
                    *kind,
                    Reduce {
                        axes: Some(next(axes)),
                        ..reduce.clone()
                    },
                );
            } else if let Some(axes) = Self::input(&node, 1)
                .and_then(|n| self.graph.initializers.get(&n))
                .and_then(Tensor::to_i64_vec)
            {
                let name = self.constant(i, "axes", Tensor::vec_i64(next(&axes)));
                moved.inputs[1] = Some(name);
            } else {
                continue;
            }
            self.replace(i, vec![moved]);
        }
    }

    /// MaxPool with explicit pads becomes a zero Pad followed by an unpadded MaxPool.
    fn max_pool_zero_padding(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let node = self.graph.nodes[i].clone();
            let Op::MaxPool(pool) = &node.op else {
                continue;
            };
            if pool.pads.iter().all(|&p| p == 0) || pool.ceil_mode {
                continue;
            }
            let Some(x) = Self::input(&node, 0) else {
                continue;
            };
            let spatial = pool.pads.len() / 2;
            // Pads for N and C are zero; then the begins, then the ends.
            let mut pads = vec![0i64, 0];
            pads.extend(pool.pads[..spatial].iter().map(|&p| p as i64));
            pads.extend([0i64, 0]);
            pads.extend(pool.pads[spatial..].iter().map(|&p| p as i64));
            let pads = self.constant(i, "pads", Tensor::vec_i64(pads));
            let padded = format!("planted_{i}_padded");
            let mut unpadded = node.clone();
            unpadded.op = Op::MaxPool(Pool {
                pads: Vec::new(),
                ..pool.clone()
            });
            unpadded.inputs[0] = Some(padded.clone());
            self.replace(
                i,
                vec![
                    Node::new(
                        format!("planted_{i}_pad"),
                        Op::Pad {
                            mode: concord::op::PadMode::Constant,
                        },
                        &[&x, &pads],
                        &[&padded],
                    ),
                    unpadded,
                ],
            );
        }
    }
}

/// The one buffer of the BufferReusedTooEarly fault's pool, and how many worker calls have
/// written it.
#[derive(Debug, Default)]
struct BufferPool {
    buffer: Vec<f32>,
    writes: u64,
}

#[derive(Debug)]
struct PlantedPartition {
    inner: Arc<dyn PreparedPartition>,
    fault: Fault,
    name: String,
    /// The graph as planted (read by the faults that are kernels of their own).
    graph: Graph,
    /// The thread that prepared the partition: the suite's own, which runs the
    /// single-threaded baselines; every other thread is a worker of a concurrency scenario.
    prepared_on: ThreadId,
    scratch: Mutex<Vec<f32>>,
    pool: Mutex<BufferPool>,
    written: Condvar,
}

/// Passes profile records through, attributing the work to the planted executor — except
/// under the silent-fallback fault, where the CPU path's own attribution shows through.
struct Relabel<'a> {
    inner: &'a dyn ProfileSink,
    name: &'a str,
}

impl ProfileSink for Relabel<'_> {
    fn record(&self, node: &str, elapsed: Duration) {
        self.inner.record_on(node, self.name, elapsed);
    }
    fn record_on(&self, node: &str, _executor: &str, elapsed: Duration) {
        self.inner.record_on(node, self.name, elapsed);
    }
    fn record_transfer(&self, value: &str, bytes: u64, elapsed: Duration) {
        self.inner.record_transfer(value, bytes, elapsed);
    }
}

fn poisoned<T>(_: T) -> Error {
    Error::InvalidGraph("planted: a lock was poisoned".into())
}

impl PlantedPartition {
    /// The pool of the BufferReusedTooEarly fault: the call writes its result into the one
    /// buffer and releases it, then reads it back. The first worker call is held between
    /// release and read until the next worker call — necessarily from another thread, with
    /// another input — has written (the interleaving a pool that releases before its reader
    /// is done allows); later calls are not held. The suite's own thread, which runs the
    /// baselines alone, never waits.
    fn through_pool(&self, values: &[f32]) -> Result<Vec<f32>, Error> {
        let mut pool = self.pool.lock().map_err(poisoned)?;
        pool.buffer = values.to_vec();
        if std::thread::current().id() == self.prepared_on {
            return Ok(pool.buffer.clone());
        }
        let mine = pool.writes;
        pool.writes += 1;
        self.written.notify_all();
        if mine == 0 {
            let (held, _) = self
                .written
                .wait_timeout_while(pool, RENDEZVOUS_LIMIT, |p| p.writes == mine + 1)
                .map_err(poisoned)?;
            pool = held;
            if pool.writes == mine + 1 {
                // No partner came: read back our own values (the fault goes uncaught).
                return Ok(values.to_vec());
            }
        }
        Ok(pool.buffer.clone())
    }

    /// The F16AccumulationInLongSum kernel: a ReduceSum over the last axis of a runtime
    /// f32 input, summed in f16; None where the partition is anything else.
    fn f16_sum(&self, inputs: &BTreeMap<String, Tensor>, out_len: usize) -> Option<Vec<f32>> {
        let [node] = self.graph.nodes.as_slice() else {
            return None;
        };
        if !matches!(node.op, Op::Reduce(ReduceKind::Sum, _)) {
            return None;
        }
        let x = inputs.get(node.inputs.first()?.as_deref()?)?;
        let rank = x.rank() as i64;
        let axes = node
            .inputs
            .get(1)?
            .as_deref()
            .and_then(|n| self.graph.initializers.get(n))
            .and_then(Tensor::to_i64_vec)?;
        if axes
            .iter()
            .map(|&a| if a < 0 { a + rank } else { a })
            .ne([rank - 1])
        {
            return None;
        }
        let row = *x.dims().last()?;
        let values = x.as_f32()?;
        if row == 0 || values.len() != out_len * row {
            return None;
        }
        Some(
            values
                .chunks(row)
                .map(|terms| {
                    terms
                        .iter()
                        .fold(half::f16::ZERO, |sum, &t| {
                            half::f16::from_f32(sum.to_f32() + half::f16::from_f32(t).to_f32())
                        })
                        .to_f32()
                })
                .collect(),
        )
    }
}

impl PreparedPartition for PlantedPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let relabel = profile.map(|inner| Relabel {
            inner,
            name: &self.name,
        });
        let sink: Option<&dyn ProfileSink> = match (self.fault, &relabel) {
            (Fault::SilentCpuFallback, _) => profile,
            (_, Some(r)) => Some(r),
            (_, None) => None,
        };
        let mut outputs = self.inner.run(inputs, sink)?;
        let Some(first) = outputs.first_mut() else {
            return Ok(outputs);
        };
        if self.fault == Fault::FlushDenormals && first.dtype() == DType::F16 {
            if let Some(v) = first.as_f16() {
                let flushed = v
                    .iter()
                    .map(|&h| {
                        let subnormal = !h.is_normal() && h.is_finite() && h.to_f32() != 0.0;
                        if subnormal {
                            half::f16::ZERO
                        } else {
                            h
                        }
                    })
                    .collect();
                *first = Tensor::from_f16(first.shape().clone(), flushed)?;
            }
            return Ok(outputs);
        }
        let Some(values) = first.as_f32().map(|v| v.to_vec()) else {
            return Ok(outputs);
        };
        let shape = first.shape().clone();
        let changed: Option<Vec<f32>> = match self.fault {
            Fault::F16OverflowOnF32Target => Some(
                values
                    .iter()
                    .map(|&v| half::f16::from_f32(v).to_f32())
                    .collect(),
            ),
            Fault::NanToZero => Some(
                values
                    .iter()
                    .map(|&v| if v.is_nan() { 0.0 } else { v })
                    .collect(),
            ),
            Fault::FlushDenormals => Some(
                values
                    .iter()
                    .map(|&v| if v.is_subnormal() { 0.0 } else { v })
                    .collect(),
            ),
            Fault::PartialTileDropped => {
                let launched = values.len() / TILE * TILE;
                Some(
                    values
                        .iter()
                        .enumerate()
                        .map(|(i, &v)| if i < launched { v } else { 0.0 })
                        .collect(),
                )
            }
            Fault::F16AccumulationInLongSum => self.f16_sum(inputs, values.len()),
            Fault::UninitialisedScratch => {
                let mut scratch = self.scratch.lock().map_err(poisoned)?;
                if scratch.len() != values.len() {
                    *scratch = vec![0.0; values.len()];
                }
                for (s, v) in scratch.iter_mut().zip(&values) {
                    *s += v;
                }
                Some(scratch.clone())
            }
            Fault::BufferReusedTooEarly => Some(self.through_pool(&values)?),
            _ => None,
        };
        if let Some(v) = changed {
            *first = Tensor::from_f32(shape, v)?;
        }
        Ok(outputs)
    }
}
