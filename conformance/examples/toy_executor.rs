//! A backend author's first executor: the `src/lib.rs` of the crate that
//! docs/backend-authors.md builds, starting from `cargo new`, in another repository.
//!
//! `toy` runs three elementwise ops (Relu, Add, Mul) on f32 tensors with its own kernels,
//! on its own target `toy` (declared below: f32 storage and compute, no device capability
//! needed); for every other node it answers `Support::No`, so the planner places those
//! nodes on the reference executor and says so. Its trials are named `toy/toy/…`.
//!
//! `cargo test -p concord-conformance` compiles this file as an example library, and its
//! `guide` test builds the guide's crate around it in a scratch directory outside this
//! workspace (the guide's Cargo.toml, test harness and expectations file, read out of the
//! guide) and runs the suite there to a passing report, so the guide cannot rot.

use concord::executor::{Error, Node, Op, OpError, Schedule, Shape};
use concord::op::{Binary, Unary};
use concord::semantics::{broadcast_index, broadcast_shapes};
use concord::{
    Availability, DType, DeviceInfo, Executor, Graph, PreparedPartition, ProfileSink, Support,
    Target, TargetSpec, Tensor,
};
use std::collections::BTreeMap;

/// The toy's one target. An executor names its own targets; it never borrows another
/// executor's (the planner would then think a toy partition runs where "cpu" does).
pub const TOY: Target = Target::new("toy");

/// The executor: stateless here; a real one would own its device context and caches.
#[derive(Debug, Default)]
pub struct ToyExecutor;

/// A prepared partition: the sub-graph and its schedule (run order, value slots, frees).
#[derive(Debug)]
struct ToyPartition {
    graph: Graph,
    schedule: Schedule,
}

impl Executor for ToyExecutor {
    fn name(&self) -> &str {
        "toy"
    }

    fn probe(&self) -> Availability {
        // A device backend would look for its library and devices here, and answer
        // Unavailable { cause, reason } naming what it looked for — never panic.
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "toy host".into(),
                ..DeviceInfo::default()
            }],
        }
    }

    fn targets(&self) -> Vec<TargetSpec> {
        // Precision as data: what it stores and computes in, and (with `.needing(..)`) a
        // device capability such as fp16 and which of its targets runs without it.
        vec![TargetSpec::new(TOY, DType::F32, DType::F32)]
    }

    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support {
        // Whether the target can run here is the planner's call (`resolve_target`); an
        // executor only refuses a target it does not serve.
        if *target != TOY {
            return Support::No(format!("toy runs target toy only, not {target}"));
        }
        if !matches!(
            node.op,
            Op::Unary(Unary::Relu) | Op::Binary(Binary::Add) | Op::Binary(Binary::Mul)
        ) {
            return Support::No(format!("toy has no {} kernel", node.op.name()));
        }
        let all_f32 = node
            .present_inputs()
            .all(|name| graph.value(name).is_some_and(|v| v.dtype == DType::F32));
        if all_f32 {
            Support::Yes
        } else {
            Support::No("toy computes f32 only".into())
        }
    }

    fn prepare(
        &self,
        partition: &Graph,
        _target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        Ok(Box::new(ToyPartition {
            schedule: Schedule::for_graph(partition)?,
            graph: partition.clone(),
        }))
    }
}

impl PreparedPartition for ToyPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        // The walker resolves operands, drops dead values and collects the outputs; the
        // toy runs one node (`step.node` indexes the graph the schedule was made from).
        self.schedule
            .walk_host(inputs, &self.graph.initializers, |step, operands| {
                let node = &self.graph.nodes[step.node];
                let started = std::time::Instant::now();
                let result = run_node(node, operands)?;
                if let Some(sink) = profile {
                    sink.record_on(&node.name, "toy", started.elapsed());
                }
                Ok(vec![result])
            })
    }
}

/// Runs one node with the toy kernels, on its f32 operands.
fn run_node(node: &Node, operands: &[Option<&Tensor>]) -> Result<Tensor, Error> {
    let f32s: Vec<(&Shape, &[f32])> = (operands.iter().flatten())
        .filter_map(|t| Some((t.shape(), t.as_f32()?)))
        .collect();
    match (&node.op, &f32s[..]) {
        (Op::Unary(Unary::Relu), [x]) => relu(*x),
        (Op::Binary(Binary::Add), [a, b]) => binary(node, *a, *b, |x, y| x + y),
        (Op::Binary(Binary::Mul), [a, b]) => binary(node, *a, *b, |x, y| x * y),
        _ => Err(Error::at_node(
            node,
            OpError::Unsupported("toy declines it".into()),
        )),
    }
}

/// Relu. `max(x, 0)` would turn NaN into 0; the comparison keeps NaN, as ONNX asks.
fn relu((shape, x): (&Shape, &[f32])) -> Result<Tensor, Error> {
    let data = x.iter().map(|&v| if v < 0.0 { 0.0 } else { v }).collect();
    Tensor::from_f32(shape.clone(), data)
}

/// Add or Mul, with ONNX (numpy) broadcasting.
fn binary(
    node: &Node,
    (sa, a): (&Shape, &[f32]),
    (sb, b): (&Shape, &[f32]),
    f: fn(f32, f32) -> f32,
) -> Result<Tensor, Error> {
    let out = broadcast_shapes(&[sa, sb]).map_err(|e| Error::at_node(node, e))?;
    let strides = out.strides();
    let mut data = Vec::with_capacity(out.numel());
    for i in 0..out.numel() {
        let coords: Vec<usize> = strides
            .iter()
            .zip(out.dims())
            .map(|(s, d)| i / s % d)
            .collect();
        data.push(f(
            a[broadcast_index(&coords, sa)],
            b[broadcast_index(&coords, sb)],
        ));
    }
    Tensor::from_f32(out, data)
}
