//! Times one conv layer (Conv → BatchNormalization → ReLU6) on OpenCL and on the reference:
//! `cargo run --release -p concord-opencl --example layer_bench -- CIN COUT SIZE K STRIDE GROUP [ITERS]`.

// A measuring tool, not library code: a failure ends it with the message.
#![allow(clippy::unwrap_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;

use concord::{FallbackPolicy, NetBuilder, Overrides};
use std::time::Instant;

fn main() {
    const USAGE: &str = "usage: layer_bench CIN COUT SIZE K STRIDE GROUP [ITERS] (whole numbers)";
    let a: Vec<usize> = match std::env::args().skip(1).map(|s| s.parse()).collect() {
        Ok(a) => a,
        Err(_) => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    if a.len() < 6 {
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
    let (cin, cout, size, k, stride, group) = (a[0], a[1], a[2], a[3], a[4], a[5]);
    let iters = a.get(6).copied().unwrap_or(50);
    let mut b = common::CnnBuilder::new("layer", &[1, cin, size, size], 3);
    let y = b.conv_bn("input", cin, cout, k, stride, group);
    let y = b.relu6(&y);
    b.graph.outputs.push(y);
    let input = common::Lcg::new(5).tensor(&[1, cin, size, size], 1.0);
    let net = NetBuilder::from_graph(b.graph.clone())
        .registry(common::shared_registry())
        .backend(concord::backends::OPENCL)
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .profiling(true)
        .build()
        .unwrap();
    let reference = NetBuilder::from_graph(b.graph)
        .overrides(Overrides::default())
        .build()
        .unwrap();
    // The reference is timed over a few forwards only: it is the slow side, and a profile of
    // this tool should show the OpenCL side.
    let time = |f: &dyn Fn()| {
        f();
        let mut t: Vec<f64> = (0..3)
            .map(|_| {
                let s = Instant::now();
                f();
                s.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        t.sort_by(|a, b| a.partial_cmp(b).unwrap());
        t[t.len() / 2]
    };
    net.reset_profile();
    for _ in 0..iters {
        net.forward([("input", input.clone())]).unwrap();
    }
    let conv_us = net
        .profile()
        .entries
        .iter()
        .filter(|e| e.kind == "node")
        .map(|e| e.mean_us)
        .sum::<f64>();
    let o = conv_us / 1e3;
    let r = time(&|| {
        reference.forward([("input", input.clone())]).unwrap();
    });
    let cg = cin / group;
    let oh = (size + 2 * (k / 2) - k) / stride + 1;
    let flops = 2.0 * (cout * cg * k * k * oh * oh) as f64;
    println!(
        "cin {cin} cout {cout} size {size} k {k} s {stride} g {group}: opencl {o:.3} ms ({:.1} GFLOP/s), reference {r:.3} ms, {:.1}x",
        flops / o / 1e6,
        r / o
    );
}
