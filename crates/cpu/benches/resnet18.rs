//! Benchmark: one forward pass of a ResNet-18-shaped graph (batch 1, 3×224×224, about
//! 1.8 G multiply-adds) on the reference executor, single-threaded.
//!
//! The graph is built directly with the core API, as PyTorch exports ResNet-18 after
//! folding BatchNormalization into the convolutions: Conv with bias, Relu, Add, MaxPool,
//! GlobalAveragePool, Flatten and Gemm. Weights are deterministic pseudo-random values with
//! He-style scaling, so activations stay in a normal floating-point range (denormals would
//! measure the FPU's slow path, not the executor). The requirement this tracks: under 2 s
//! per forward pass in release mode (about 0.4 s measured on a shared 2-core Xeon).
//!
//! Run with `cargo bench -p concord-cpu --bench resnet18`; criterion writes the median to
//! `target/criterion/resnet18/forward/new/estimates.json`.

use concord_core::op::{Binary, Unary};
use concord_core::op::{Conv, Gemm, Pool};
use concord_core::{DType, Graph, Node, Op, Tensor, ValueInfo};
use concord_cpu::ReferenceExecutor;
use criterion::{criterion_group, criterion_main, Criterion};
use std::collections::BTreeMap;
use std::time::Duration;

/// Builds the graph node by node, naming values `v0, v1, …`.
struct ResNetBuilder {
    graph: Graph,
    next_value: usize,
    rng: u64,
}

impl ResNetBuilder {
    fn new() -> Self {
        let graph = Graph {
            name: "resnet18".into(),
            inputs: vec![ValueInfo::fixed("input", DType::F32, &[1, 3, 224, 224])],
            opset: 17,
            ..Graph::default()
        };
        ResNetBuilder {
            graph,
            next_value: 0,
            rng: 0x5EED,
        }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next_value += 1;
        format!("{prefix}{}", self.next_value)
    }

    /// `len` uniform values in [-scale, scale) from a fixed-seed LCG.
    fn weights(&mut self, len: usize, scale: f32) -> Vec<f32> {
        (0..len)
            .map(|_| {
                self.rng = self
                    .rng
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let unit = (self.rng >> 40) as f32 / (1u64 << 24) as f32;
                (2.0 * unit - 1.0) * scale
            })
            .collect()
    }

    fn initializer(&mut self, dims: &[usize], values: Vec<f32>) -> String {
        let name = self.fresh("w");
        let tensor = Tensor::from_f32(dims, values).expect("benchmark weights match their shape");
        self.graph.initializers.insert(name.clone(), tensor);
        name
    }

    fn node(&mut self, op: Op, inputs: &[&str]) -> String {
        let out = self.fresh("v");
        let name = format!("n{}", self.graph.nodes.len());
        self.graph.nodes.push(Node::new(name, op, inputs, &[&out]));
        out
    }

    /// Conv (BatchNormalization folded in, hence the bias) with a square kernel.
    fn conv(&mut self, x: &str, c_in: usize, c_out: usize, k: usize, stride: usize) -> String {
        let fan_in = (c_in * k * k) as f32;
        // Uniform in ±sqrt(6 / fan_in) has variance 2 / fan_in (He initialisation).
        let w = self.weights(c_out * c_in * k * k, (6.0 / fan_in).sqrt());
        let w = self.initializer(&[c_out, c_in, k, k], w);
        let b = self.weights(c_out, 0.1);
        let b = self.initializer(&[c_out], b);
        let pad = k / 2;
        let attrs = Conv {
            group: 1,
            kernel_shape: vec![k, k],
            strides: vec![stride, stride],
            pads: vec![pad; 4],
            ..Conv::default()
        };
        self.node(Op::Conv(attrs), &[x, &w, &b])
    }

    fn relu(&mut self, x: &str) -> String {
        self.node(Op::Unary(Unary::Relu), &[x])
    }

    /// A BasicBlock: conv3x3 → relu → conv3x3, plus the shortcut (a strided 1x1 conv when
    /// the shape changes), then relu.
    fn basic_block(&mut self, x: &str, c_in: usize, c_out: usize, stride: usize) -> String {
        let a = self.conv(x, c_in, c_out, 3, stride);
        let a = self.relu(&a);
        let a = self.conv(&a, c_out, c_out, 3, 1);
        let shortcut = if stride != 1 || c_in != c_out {
            self.conv(x, c_in, c_out, 1, stride)
        } else {
            x.to_string()
        };
        let sum = self.node(Op::Binary(Binary::Add), &[&a, &shortcut]);
        self.relu(&sum)
    }

    fn build(mut self) -> Graph {
        let x = self.conv("input", 3, 64, 7, 2);
        let x = self.relu(&x);
        let pool = Pool {
            kernel_shape: vec![3, 3],
            strides: vec![2, 2],
            pads: vec![1; 4],
            ..Pool::default()
        };
        let mut x = self.node(Op::MaxPool(pool), &[&x]);
        let mut c_in = 64;
        for (c_out, stride) in [(64, 1), (128, 2), (256, 2), (512, 2)] {
            x = self.basic_block(&x, c_in, c_out, stride);
            x = self.basic_block(&x, c_out, c_out, 1);
            c_in = c_out;
        }
        let x = self.node(Op::GlobalAveragePool, &[&x]);
        let x = self.node(Op::Flatten { axis: 1 }, &[&x]);
        let w = self.weights(1000 * 512, (1.0 / 512.0f32).sqrt());
        let w = self.initializer(&[1000, 512], w);
        let b = self.weights(1000, 0.1);
        let b = self.initializer(&[1000], b);
        let gemm = Gemm {
            trans_b: true,
            ..Gemm::default()
        };
        let logits = self.node(Op::Gemm(gemm), &[&x, &w, &b]);
        self.graph.outputs = vec![logits];
        self.graph
    }
}

fn resnet18(c: &mut Criterion) {
    let mut graph = ResNetBuilder::new().build();
    graph
        .infer_shapes()
        .expect("the ResNet-18 graph is well formed and its shapes infer");
    let output_info = graph.output_infos()[0].map(|v| v.describe());
    assert_eq!(output_info.as_deref(), Some("f32[1, 1000]"));

    let mut image = ResNetBuilder::new();
    let pixels = image.weights(3 * 224 * 224, 1.0);
    let mut inputs = BTreeMap::new();
    inputs.insert(
        "input".to_string(),
        Tensor::from_f32([1, 3, 224, 224], pixels).expect("input matches its shape"),
    );
    let executor = ReferenceExecutor::new();
    // One checked run first: the benchmark must measure a pass that succeeds.
    let outputs = executor.run(&graph, &inputs).expect("ResNet-18 runs");
    let logits = outputs[0].1.to_f64_vec();
    assert!(logits.iter().all(|v| v.is_finite()), "logits are finite");

    let mut group = c.benchmark_group("resnet18");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    group.bench_function("forward", |b| {
        b.iter(|| executor.run(&graph, &inputs).expect("ResNet-18 runs"))
    });
    group.finish();
}

criterion_group!(benches, resnet18);
criterion_main!(benches);
