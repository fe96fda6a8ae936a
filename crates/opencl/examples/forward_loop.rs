//! Runs one model's forward on OpenCL f32 in a loop, for `perf record` and for timing one
//! change against another binary: `cargo run --release -p concord-opencl --example
//! forward_loop -- MODEL [ITERS]`, MODEL a golden case's name or a bench model's .onnx
//! file with its input beside it (`target/bench-models/resnet18_like.onnx` and
//! `resnet18_like.input.npy`, which the models bench writes). It prints the median
//! forward time, and the mean, 90th and 99th percentiles (the models bench reports means).

// A measuring tool, not library code: a failure ends it with the message.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;

use concord::{FallbackPolicy, NetBuilder, Overrides};
use std::time::Instant;

fn main() {
    let name = std::env::args()
        .nth(1)
        .expect("usage: forward_loop CASE [ITERS]");
    let iters: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(2000);
    let (graph, inputs) = match name.strip_suffix(".onnx") {
        Some(stem) => {
            let graph = concord::internals::onnx::load(&std::fs::read(&name).unwrap()).unwrap();
            let npy = std::path::PathBuf::from(format!("{stem}.input.npy"));
            let input = common::read_npy(&npy).unwrap();
            (graph, vec![("input".to_string(), input)])
        }
        None => {
            let manifest = common::load_manifest();
            let case = manifest
                .cases
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("no golden case {name}"));
            let bytes = std::fs::read(common::golden_dir().join(&case.model)).unwrap();
            let graph = concord::internals::onnx::load(&bytes).unwrap();
            (graph, common::case_inputs(case).unwrap())
        }
    };
    let net = NetBuilder::from_graph(graph)
        .registry(common::shared_registry())
        .backend(concord::backends::OPENCL)
        .target(concord::targets::OPENCL)
        .fallback(FallbackPolicy::Allow)
        .overrides(Overrides::default())
        .build()
        .unwrap();
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let start = Instant::now();
        net.forward(inputs.iter().cloned()).unwrap();
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let mean = times.iter().sum::<f64>() / iters as f64;
    times.sort_by(f64::total_cmp);
    println!(
        "{name}: median {:.1} µs over {iters} (mean {mean:.1}, p90 {:.1}, p99 {:.1})",
        times[iters / 2],
        times[iters * 9 / 10],
        times[iters * 99 / 100]
    );
}
