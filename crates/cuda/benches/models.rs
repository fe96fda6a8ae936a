//! Benchmark: one forward pass of the ResNet-18-shaped and MobileNetV2-shaped models
//! (`concord_conformance::models`, 3×224×224) at batch 1 and batch 32, on the CUDA
//! executor's two targets (cuda: f32; cuda-fp16: half storage, f32 accumulation), and on
//! the reference at batch 1 for the ratio. Measured through `Net::forward` as a user calls
//! it, so host↔device transfers are included.
//!
//! Run with `cargo bench -p concord-cuda --bench models`; the GPU bundle carries this
//! binary and `run.sh` runs it after the tests, writing `reports/bench-models.txt`.
//! Without a driver (CI, this project's machines) it says why and measures the reference
//! only: a benchmark is not a test, and the tests already assert the fallback.

use concord::{
    Availability, Executor, ExecutorRegistry, FallbackPolicy, Graph, NetBuilder, Overrides,
};
use concord_conformance::models::{images, mobilenet_v2_like, resnet18_like, with_batch};
use concord_cuda::CudaExecutor;
use criterion::{criterion_group, criterion_main, Criterion};
use std::sync::Arc;
use std::time::Duration;

fn bench_model(c: &mut Criterion, name: &str, graph: Graph, cuda: Option<&ExecutorRegistry>) {
    for batch in [1usize, 32] {
        let graph = with_batch(graph.clone(), batch);
        let input = images(batch, 224, 11);
        let mut group = c.benchmark_group(format!("{name}/batch{batch}"));
        group.sample_size(10);
        group.warm_up_time(Duration::from_secs(2));
        group.measurement_time(Duration::from_secs(6));
        if batch == 1 {
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
        }
        if let Some(registry) = cuda {
            for target in [concord::targets::CUDA, concord::targets::CUDA_FP16] {
                let net = match NetBuilder::from_graph(graph.clone())
                    .registry(registry.clone())
                    .backend(concord::backends::CUDA)
                    .target(&target)
                    .fallback(FallbackPolicy::Deny)
                    .overrides(Overrides::default())
                    .build()
                {
                    Ok(net) => net,
                    Err(e) => {
                        println!("{name} batch {batch} on {target}: not measured: {e}");
                        continue;
                    }
                };
                group.bench_function(target.to_string(), |b| {
                    b.iter(|| net.forward([("input", input.clone())]).expect("forward"))
                });
            }
        }
        group.finish();
    }
}

fn models(c: &mut Criterion) {
    let executor = Arc::new(CudaExecutor::new());
    let cuda = match executor.probe() {
        Availability::Available { .. } => {
            Some(ExecutorRegistry::with_builtins().with(executor.clone()))
        }
        Availability::Unavailable { cause, reason } => {
            println!("CUDA is unavailable ({cause:?}: {reason}); measuring the reference only");
            None
        }
    };
    bench_model(
        c,
        "resnet18_like",
        resnet18_like(224, 64, 1000),
        cuda.as_ref(),
    );
    bench_model(
        c,
        "mobilenet_v2_like",
        mobilenet_v2_like(224, 1.0, 1000),
        cuda.as_ref(),
    );
}

criterion_group!(benches, models);
criterion_main!(benches);
