//! Profiling switched off costs nothing measurable: a forward through `Net` with profiling
//! off against the reference runner called directly on the same graph, and with profiling
//! on for comparison. The model is a chain of many small nodes, where per-node overhead
//! would show most.
//!
//! Run: `cargo bench -p concord --bench profiling`.

use concord::executor::{Node, Op};
use concord::{DType, Graph, NetBuilder, Overrides, Tensor, ValueInfo};
use concord_core::op::{Binary, Unary};
use concord_cpu::ReferenceExecutor;
use criterion::{criterion_group, criterion_main, Criterion};
use std::collections::BTreeMap;

fn chain(nodes: usize, width: usize) -> Graph {
    let mut g = Graph {
        name: "chain".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs
        .push(ValueInfo::fixed("x", DType::F32, &[1, width]));
    let bias: Vec<f32> = (0..width)
        .map(|i| (i as f32 - width as f32 / 2.0) / width as f32)
        .collect();
    g.initializers.insert(
        "bias".into(),
        Tensor::from_f32([width], bias).expect("bias"),
    );
    let mut prev = "x".to_string();
    for i in 0..nodes {
        let out = format!("v{i}");
        let op = if i % 2 == 0 {
            Op::Binary(Binary::Add)
        } else {
            Op::Unary(Unary::Relu)
        };
        let inputs: Vec<&str> = if i % 2 == 0 {
            vec![&prev, "bias"]
        } else {
            vec![&prev]
        };
        g.nodes
            .push(Node::new(format!("n{i}"), op, &inputs, &[&out]));
        prev = out;
    }
    g.outputs.push(prev);
    g
}

fn bench(c: &mut Criterion) {
    let graph = chain(200, 64);
    let x = Tensor::from_f32([1, 64], (0..64).map(|i| i as f32 / 64.0).collect()).expect("x");
    let off = NetBuilder::from_graph(graph.clone())
        .overrides(Overrides::default())
        .build()
        .expect("net");
    let on = NetBuilder::from_graph(graph.clone())
        .overrides(Overrides::default())
        .profiling(true)
        .build()
        .expect("net");
    let mut prepared = off.graph().clone();
    prepared
        .fold_constants(&concord_cpu::ReferenceEvaluator::default())
        .expect("fold");
    let direct_inputs: BTreeMap<String, Tensor> = [("x".to_string(), x.clone())].into();
    let runner = ReferenceExecutor::new();

    let mut group = c.benchmark_group("profiling_overhead_200_nodes");
    group.bench_function("reference_runner_direct", |b| {
        b.iter(|| runner.run(&prepared, &direct_inputs).expect("run"))
    });
    group.bench_function("net_forward_profiling_off", |b| {
        b.iter(|| off.forward([("x", x.clone())]).expect("forward"))
    });
    group.bench_function("net_forward_profiling_on", |b| {
        b.iter(|| on.forward([("x", x.clone())]).expect("forward"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
