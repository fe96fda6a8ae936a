//! Throughput of one shared `Net` at 1 and 2 threads, on the reference executor and (where a
//! device is present) the OpenCL executor. Each sample runs the same total number of
//! forwards split across the threads, so time(1 thread) / time(2 threads) is the speed-up.
//!
//! Run: `cargo bench -p concord --bench scaling`.

use concord::executor::{Node, Op};
use concord::op::Conv;
use concord::{DType, FallbackPolicy, Graph, Net, NetBuilder, Overrides, Tensor, ValueInfo};
use concord_core::op::Unary;
use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Two 3×3 convolutions with ReLU on 32 channels at 32×32: about 38 MFLOP per forward.
fn model() -> Graph {
    let mut g = Graph {
        name: "conv_block".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs
        .push(ValueInfo::fixed("x", DType::F32, &[1, 32, 32, 32]));
    for (i, name) in ["w0", "w1"].iter().enumerate() {
        let w: Vec<f32> = (0..32 * 32 * 9)
            .map(|k| ((k * (7 + i)) % 13) as f32 / 13.0 - 0.5)
            .collect();
        g.initializers.insert(
            (*name).into(),
            Tensor::from_f32([32, 32, 3, 3], w).expect("w"),
        );
    }
    let conv = || {
        Op::Conv(Conv {
            group: 1,
            pads: vec![1, 1, 1, 1],
            ..Conv::default()
        })
    };
    g.nodes
        .push(Node::new("conv0", conv(), &["x", "w0"], &["c0"]));
    g.nodes
        .push(Node::new("relu0", Op::Unary(Unary::Relu), &["c0"], &["r0"]));
    g.nodes
        .push(Node::new("conv1", conv(), &["r0", "w1"], &["c1"]));
    g.nodes
        .push(Node::new("relu1", Op::Unary(Unary::Relu), &["c1"], &["y"]));
    g.outputs.push("y".into());
    g
}

fn input() -> Tensor {
    Tensor::from_f32(
        [1, 32, 32, 32],
        (0..32 * 32 * 32).map(|i| (i % 17) as f32 / 17.0).collect(),
    )
    .expect("x")
}

/// Runs `total` forwards split over `threads` threads on one shared net.
fn run_split(net: &Arc<Net>, threads: usize, total: u64) -> Duration {
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let net = net.clone();
            let share = total / threads as u64 + u64::from((t as u64) < total % threads as u64);
            s.spawn(move || {
                for _ in 0..share {
                    net.forward([("x", input())]).expect("forward");
                }
            });
        }
    });
    started.elapsed()
}

fn bench(c: &mut Criterion) {
    let mut nets: Vec<(&str, Arc<Net>)> = Vec::new();
    let reference = NetBuilder::from_graph(model())
        .overrides(Overrides::default())
        .build()
        .expect("reference net");
    nets.push(("cpu", Arc::new(reference)));
    match NetBuilder::from_graph(model())
        .backend(concord::backends::OPENCL)
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .build()
    {
        Ok(net) => nets.push(("opencl", Arc::new(net))),
        Err(e) => eprintln!("opencl not benchmarked: {e}"),
    }
    for (name, net) in nets {
        let mut group = c.benchmark_group(format!("scaling_{name}"));
        group.sample_size(10);
        for threads in [1usize, 2] {
            group.bench_function(format!("{threads}_threads"), |b| {
                b.iter_custom(|iters| run_split(&net, threads, iters.max(2)))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
