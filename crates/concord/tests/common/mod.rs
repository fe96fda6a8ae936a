//! Helpers shared by the facade's integration tests: a small model built with the core API,
//! a configurable test executor, and a tracing subscriber that counts warnings.

#![allow(dead_code)]

use concord::executor::{Node, Op};
use concord::op::{Conv, Gemm};
use concord::{
    Availability, Capability, CpuExecutor, DType, DeviceInfo, Executor, FallbackCause, Graph,
    PreparedPartition, Support, Target, TargetSpec, Tensor, ValueInfo,
};
use concord_core::op::Unary;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// X f32[1,3,8,8] → Conv(4 filters, 3x3, pad 1) → Relu → GlobalAveragePool → Flatten → Gemm(4→2).
pub fn small_cnn() -> Graph {
    let mut g = Graph {
        name: "small_cnn".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs
        .push(ValueInfo::fixed("x", DType::F32, &[1, 3, 8, 8]));
    let w: Vec<f32> = (0..4 * 3 * 3 * 3)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0)
        .collect();
    let b: Vec<f32> = vec![0.1, -0.2, 0.3, 0.0];
    let fc: Vec<f32> = (0..8).map(|i| (i as f32 - 3.5) / 4.0).collect();
    g.initializers
        .insert("w".into(), Tensor::from_f32([4, 3, 3, 3], w).expect("w"));
    g.initializers
        .insert("b".into(), Tensor::from_f32([4], b).expect("b"));
    g.initializers
        .insert("fc".into(), Tensor::from_f32([4, 2], fc).expect("fc"));
    let conv = Conv {
        group: 1,
        pads: vec![1, 1, 1, 1],
        ..Conv::default()
    };
    g.nodes
        .push(Node::new("conv", Op::Conv(conv), &["x", "w", "b"], &["c"]));
    g.nodes
        .push(Node::new("relu", Op::Unary(Unary::Relu), &["c"], &["r"]));
    g.nodes
        .push(Node::new("gap", Op::GlobalAveragePool, &["r"], &["p"]));
    g.nodes.push(Node::new(
        "flatten",
        Op::Flatten { axis: 1 },
        &["p"],
        &["f"],
    ));
    g.nodes.push(Node::new(
        "fc",
        Op::Gemm(Gemm::default()),
        &["f", "fc"],
        &["y"],
    ));
    g.outputs.push("y".into());
    g
}

/// A deterministic input for [`small_cnn`].
pub fn small_input() -> Tensor {
    let data: Vec<f32> = (0..3 * 8 * 8)
        .map(|i| ((i * 13 % 17) as f32 - 8.0) / 8.0)
        .collect();
    Tensor::from_f32([1, 3, 8, 8], data).expect("input")
}

/// A backend author's executor for tests: pretends to be a device backend, supports only
/// the listed ops, and runs them with the reference kernels.
#[derive(Debug)]
pub struct TestExecutor {
    pub name: String,
    pub availability: Availability,
    pub targets: Vec<TargetSpec>,
    pub ops: Vec<&'static str>,
}

impl TestExecutor {
    pub fn device(name: &str, fp16: bool, ops: &[&'static str]) -> Self {
        TestExecutor {
            name: name.into(),
            availability: Availability::Available {
                devices: vec![DeviceInfo {
                    name: "test device".into(),
                    fp16,
                    ..DeviceInfo::default()
                }],
            },
            targets: vec![
                TargetSpec::new(concord::targets::OPENCL, DType::F32, DType::F32),
                TargetSpec::new(concord::targets::OPENCL_FP16, DType::F16, DType::F32)
                    .needing(Capability::Fp16, Some(concord::targets::OPENCL)),
            ],
            ops: ops.to_vec(),
        }
    }

    pub fn unavailable(name: &str, cause: FallbackCause, reason: &str) -> Self {
        TestExecutor {
            name: name.into(),
            availability: Availability::Unavailable {
                cause,
                reason: reason.into(),
            },
            targets: vec![TargetSpec::new(
                concord::targets::OPENCL,
                DType::F32,
                DType::F32,
            )],
            ops: Vec::new(),
        }
    }
}

impl Executor for TestExecutor {
    fn name(&self) -> &str {
        &self.name
    }
    fn probe(&self) -> Availability {
        self.availability.clone()
    }
    fn targets(&self) -> Vec<TargetSpec> {
        self.targets.clone()
    }
    fn supports(&self, _graph: &Graph, node: &Node, _target: &Target) -> Support {
        if self.ops.contains(&node.op.name()) {
            Support::Yes
        } else {
            Support::No(format!("no {} kernel", node.op.name()))
        }
    }
    fn prepare(
        &self,
        partition: &Graph,
        _target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, concord::executor::Error> {
        CpuExecutor::new().prepare(partition, &concord::targets::CPU)
    }
}

pub fn test_executor(e: TestExecutor) -> Arc<dyn Executor> {
    Arc::new(e)
}

/// A tracing subscriber that counts WARN events and keeps their messages.
#[derive(Debug, Default)]
pub struct WarningCounter {
    pub count: AtomicUsize,
    pub messages: std::sync::Mutex<Vec<String>>,
}

struct MessageVisitor<'a>(&'a mut String);

impl tracing::field::Visit for MessageVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.push_str(&format!("{value:?}"));
        }
    }
}

impl tracing::Subscriber for ArcCounter {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            self.0.count.fetch_add(1, Ordering::SeqCst);
            let mut message = String::new();
            event.record(&mut MessageVisitor(&mut message));
            if let Ok(mut m) = self.0.messages.lock() {
                m.push(message);
            }
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A subscriber handle tests keep to read the counts after `with_default`.
#[derive(Clone, Debug, Default)]
pub struct ArcCounter(pub Arc<WarningCounter>);

impl ArcCounter {
    pub fn warnings(&self) -> usize {
        self.0.count.load(Ordering::SeqCst)
    }
    pub fn messages(&self) -> Vec<String> {
        self.0
            .messages
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }
}

/// Runs `f` with a counting subscriber installed for this thread; returns f's result and
/// the counter.
pub fn count_warnings<T>(f: impl FnOnce() -> T) -> (T, ArcCounter) {
    let counter = ArcCounter::default();
    let result = tracing::subscriber::with_default(counter.clone(), f);
    (result, counter)
}
