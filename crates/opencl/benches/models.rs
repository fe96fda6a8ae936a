//! Benchmark: one forward pass (batch 1, 3×224×224) of a ResNet-18-shaped and a
//! MobileNetV2-shaped model, built with the core API (Conv, BatchNormalization, Relu or
//! ReLU6 as Clip, Add, MaxPool, GlobalAveragePool, Flatten, Gemm), on the OpenCL executor
//! and on the reference executor, through `Net::forward` as a user calls it (input upload
//! and output download included).
//!
//! Run with `cargo bench -p concord-opencl --bench models`; criterion writes the medians
//! under `target/criterion/<model>/<executor>/new/estimates.json`. Without an OpenCL
//! runtime only the reference is measured, and the bench says why.

#[path = "../tests/common/mod.rs"]
mod common;

use concord::{Availability, Backend, Executor, FallbackPolicy, Graph, NetBuilder, Overrides};
use criterion::{criterion_group, criterion_main, Criterion};
use std::time::Duration;

fn bench_model(c: &mut Criterion, name: &str, graph: Graph, opencl: bool) {
    let input = common::image(224, 11);
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(2));
    group.measurement_time(Duration::from_secs(8));
    let reference = NetBuilder::from_graph(graph.clone())
        .overrides(Overrides::default())
        .build()
        .expect("the reference builds");
    group.bench_function("reference", |b| {
        b.iter(|| {
            reference
                .forward([("input", input.clone())])
                .expect("forward")
        })
    });
    if opencl {
        let net = NetBuilder::from_graph(graph)
            .registry(common::shared_registry())
            .backend(Backend::OpenCl)
            .fallback(FallbackPolicy::Deny)
            .overrides(Overrides::default())
            .build()
            .expect("every node runs on OpenCL");
        group.bench_function("opencl", |b| {
            b.iter(|| net.forward([("input", input.clone())]).expect("forward"))
        });
    }
    group.finish();
}

fn models(c: &mut Criterion) {
    let opencl = match common::shared_executor().probe() {
        Availability::Available { .. } => true,
        Availability::Unavailable { cause, reason } => {
            println!("OpenCL is unavailable ({cause:?}: {reason}); measuring the reference only");
            false
        }
    };
    bench_model(
        c,
        "resnet18_like",
        common::resnet18_like(224, 64, 1000),
        opencl,
    );
    bench_model(
        c,
        "mobilenet_v2_like",
        common::mobilenet_v2_like(224, 1.0, 1000),
        opencl,
    );
}

criterion_group!(benches, models);
criterion_main!(benches);
