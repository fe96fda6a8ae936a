//! What opencl-fp16 costs against opencl on this device, in one run: the bench models
//! (MobileNetV2-shaped and ResNet-18-shaped, batch 1, 3×224×224) built for both targets,
//! their forwards interleaved so that both see the same machine load:
//! `cargo run -p concord-opencl --example fp16_cost [ITERS]` (add `--release` for forward
//! times of optimized host code; the device times do not depend on it).
//! It prints, per model and target, the median forward (as `Net::forward` is called: input
//! upload and output download included) and the sum of the nodes' device times from the
//! profile (what `concord run --profile` shows), and the fp16 / f32 ratio of each. On a
//! device without cl_khr_fp16 the fp16 target runs storage-only, and this is the figure its
//! build-time note quotes.

// A measuring tool, not library code: a failure ends it with the message.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;

use concord::{FallbackPolicy, Graph, Net, NetBuilder, Overrides, Target, Tensor};
use std::time::Instant;

fn main() {
    let iters: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 20,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: fp16_cost [ITERS] (a whole number above 0)");
            std::process::exit(2);
        }
    };
    let models: [(&str, Graph); 2] = [
        (
            "mobilenet_v2_like",
            common::mobilenet_v2_like(224, 1.0, 1000),
        ),
        ("resnet18_like", common::resnet18_like(224, 64, 1000)),
    ];
    let input = common::image(224, 7);
    for (name, graph) in models {
        let build = |target: Target| {
            NetBuilder::from_graph(graph.clone())
                .registry(common::shared_registry())
                .backend(concord::backends::OPENCL)
                .target(target)
                .fallback(FallbackPolicy::Deny)
                .overrides(Overrides::default())
                .profiling(true)
                .build()
                .unwrap()
        };
        let f32_net = build(concord::targets::OPENCL);
        // On a device without cl_khr_fp16 this build says, as a note, what this measures.
        let f16_net = build(concord::targets::OPENCL_FP16);
        let (mut f32_ms, mut f16_ms) = (Vec::new(), Vec::new());
        // One warm-up each (it builds the plans' kernels), then alternate.
        forward_ms(&f32_net, &input);
        forward_ms(&f16_net, &input);
        f32_net.reset_profile();
        f16_net.reset_profile();
        for _ in 0..iters {
            f32_ms.push(forward_ms(&f32_net, &input));
            f16_ms.push(forward_ms(&f16_net, &input));
        }
        let (a, b) = (median(&mut f32_ms), median(&mut f16_ms));
        let (da, db) = (device_ms(&f32_net), device_ms(&f16_net));
        println!(
            "{name}: opencl {a:.2} ms (device {da:.2} ms), opencl-fp16 {b:.2} ms (device \
             {db:.2} ms): fp16 takes {:.2}x the forward, {:.2}x the device time \
             (median of {iters})",
            b / a,
            db / da
        );
    }
}

fn forward_ms(net: &Net, input: &Tensor) -> f64 {
    let start = Instant::now();
    net.forward([("input", input.clone())]).unwrap();
    start.elapsed().as_secs_f64() * 1e3
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The mean per-forward sum of the nodes' device times, in ms.
fn device_ms(net: &Net) -> f64 {
    net.profile()
        .entries
        .iter()
        .filter(|e| e.kind == "node")
        .map(|e| e.mean_us)
        .sum::<f64>()
        / 1e3
}
