//! A backend author's first executor, run through the whole conformance suite.
//!
//! `toy` runs three elementwise ops (Relu, Add, Mul) on f32 tensors with its own kernels,
//! on its own target `toy` (declared below: f32 storage and compute, no device capability
//! needed); for every other node it answers `Support::No`, so the planner places those
//! nodes on the reference executor and says so. Its trials are named `toy/toy/…`. `cargo test -p concord-conformance` builds and runs this
//! file as a test (see `[[test]] name = "example_toy"` in conformance/Cargo.toml), so
//! docs/backend-authors.md, which walks through it, cannot rot.

use concord::core::shape::{broadcast_index, broadcast_shapes};
use concord::core::{Error, Node, Op, OpError};
use concord::{
    Availability, DType, DeviceInfo, Executor, Graph, PreparedPartition, ProfileSink, Support,
    Target, TargetSpec, Tensor,
};
use std::collections::{BTreeMap, HashMap};

/// The toy's one target. An executor names its own targets; it never borrows another
/// executor's (the planner would then think a toy partition runs where "cpu" does).
pub const TOY: Target = Target::new("toy");

/// The executor: stateless here; a real one would own its device context and caches.
#[derive(Debug, Default)]
pub struct ToyExecutor;

/// A prepared partition: the sub-graph, run node by node with the toy kernels.
#[derive(Debug)]
struct ToyPartition {
    graph: Graph,
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
        if !matches!(node.op, Op::Relu | Op::Add | Op::Mul) {
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
        let mut values: HashMap<String, Tensor> = inputs.clone().into_iter().collect();
        for (name, t) in &self.graph.initializers {
            values.entry(name.clone()).or_insert_with(|| t.clone());
        }
        for node in &self.graph.nodes {
            let started = std::time::Instant::now();
            let operand = |i: usize| -> Result<&[f32], Error> {
                node.inputs
                    .get(i)
                    .and_then(|n| n.as_ref())
                    .and_then(|n| values.get(n))
                    .and_then(|t| t.as_f32())
                    .ok_or_else(|| {
                        Error::at_node(
                            node,
                            OpError::MissingInput {
                                index: i,
                                name: "f32 operand",
                            },
                        )
                    })
            };
            let shape_of = |i: usize| {
                node.inputs
                    .get(i)
                    .and_then(|n| n.as_ref())
                    .and_then(|n| values.get(n))
                    .map(|t| t.shape().clone())
            };
            let result = match node.op {
                Op::Relu => {
                    let x = operand(0)?;
                    let shape = shape_of(0).unwrap_or_default();
                    // max(x, 0) would turn NaN into 0; the comparison keeps NaN as ONNX asks.
                    Tensor::from_f32(
                        shape,
                        x.iter().map(|&v| if v < 0.0 { 0.0 } else { v }).collect(),
                    )?
                }
                Op::Add | Op::Mul => {
                    let (a, b) = (operand(0)?, operand(1)?);
                    let (sa, sb) = (
                        shape_of(0).unwrap_or_default(),
                        shape_of(1).unwrap_or_default(),
                    );
                    let out = broadcast_shapes(&[&sa, &sb]).map_err(|e| Error::at_node(node, e))?;
                    let strides = out.strides();
                    let mut data = Vec::with_capacity(out.numel());
                    for i in 0..out.numel() {
                        let coords: Vec<usize> = strides
                            .iter()
                            .zip(out.dims())
                            .map(|(s, d)| i / s % d)
                            .collect();
                        let (x, y) = (
                            a[broadcast_index(&coords, &sa)],
                            b[broadcast_index(&coords, &sb)],
                        );
                        data.push(if matches!(node.op, Op::Add) {
                            x + y
                        } else {
                            x * y
                        });
                    }
                    Tensor::from_f32(out, data)?
                }
                _ => {
                    return Err(Error::at_node(
                        node,
                        OpError::Unsupported("toy was handed a node it declined".into()),
                    ))
                }
            };
            if let Some(sink) = profile {
                sink.record_on(&node.name, "toy", started.elapsed());
            }
            if let Some(out) = node.outputs.first() {
                values.insert(out.clone(), result);
            }
        }
        self.graph
            .outputs
            .iter()
            .map(|o| {
                values
                    .get(o)
                    .cloned()
                    .ok_or_else(|| Error::DanglingOutput { value: o.clone() })
            })
            .collect()
    }
}

fn main() {
    concord_conformance::main(|| ToyExecutor)
}
