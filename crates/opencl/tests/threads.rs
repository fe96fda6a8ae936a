//! Thread safety on the OpenCL executor: 8 threads × 200 forwards on one shared `Net`, and
//! 8 threads each with its own `Net` of a different model (the cross-talk scenario), all
//! built from one shared registry. Every output must be bit-identical to the same model's
//! single-threaded run: the executor's caches are keyed finely enough and no two runs
//! share a kernel object, a queue or a buffer they write.

mod common;

use common::{opencl_here, OpenClHere};
use concord::{FallbackPolicy, Graph, Net, NetBuilder, Overrides, Tensor};
use std::sync::Arc;

const THREADS: usize = 8;
const FORWARDS: usize = 200;

/// Small models of different shapes and weights, so a cache keyed too coarsely would hand
/// one model's kernels or buffers to another.
fn models() -> Vec<(&'static str, Graph, Tensor)> {
    vec![
        (
            "resnet18_like",
            common::resnet18_like(32, 8, 10),
            common::image(32, 1),
        ),
        (
            "mobilenet_v2_like",
            common::mobilenet_v2_like(32, 0.25, 10),
            common::image(32, 2),
        ),
        (
            "resnet18_like_wide",
            common::resnet18_like(24, 12, 7),
            common::image(24, 3),
        ),
        (
            "mobilenet_v2_like_half",
            common::mobilenet_v2_like(24, 0.5, 5),
            common::image(24, 4),
        ),
    ]
}

fn build(graph: Graph, here: &OpenClHere) -> Net {
    let net = NetBuilder::from_graph(graph)
        .registry(common::shared_registry())
        .backend(concord::backends::OPENCL)
        .fallback(FallbackPolicy::Allow)
        .overrides(Overrides::default())
        .build()
        .expect("the model builds");
    let placement = net.placement();
    match here {
        OpenClHere::Available => assert!(
            placement.nodes.iter().all(|n| n.executor == "opencl"),
            "every node should run on OpenCL:\n{placement}"
        ),
        OpenClHere::Unavailable { cause, .. } => {
            assert!(placement.notices.iter().any(|n| n.cause == *cause));
            assert!(placement.nodes.iter().all(|n| n.executor == "cpu"));
        }
    }
    net
}

fn run(net: &Net, input: &Tensor) -> Tensor {
    net.forward([("input", input.clone())])
        .expect("forward")
        .get("output")
        .cloned()
        .expect("output")
}

#[test]
fn one_shared_net_on_eight_threads() {
    let here = opencl_here("one_shared_net_on_eight_threads");
    let (_, graph, input) = models().into_iter().next().expect("a model");
    let net = Arc::new(build(graph, &here));
    let expected = run(&net, &input);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (net, input, expected) = (net.clone(), input.clone(), expected.clone());
            std::thread::spawn(move || {
                for i in 0..FORWARDS {
                    let y = run(&net, &input);
                    assert!(
                        y.bit_identical(&expected),
                        "thread {t}, forward {i}: output differs from the single-threaded run"
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a worker thread panicked");
    }
}

#[test]
fn per_thread_nets_of_different_models() {
    let here = opencl_here("per_thread_nets_of_different_models");
    let models = models();
    // Single-threaded expectations first, one net per model.
    let expected: Vec<Tensor> = models
        .iter()
        .map(|(_, g, x)| run(&build(g.clone(), &here), x))
        .collect();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (name, graph, input) = models[t % models.len()].clone();
            let expected = expected[t % models.len()].clone();
            let here = here.clone();
            std::thread::spawn(move || {
                // Each thread builds its own net while the others run theirs.
                let net = build(graph, &here);
                for i in 0..FORWARDS {
                    let y = run(&net, &input);
                    assert!(
                        y.bit_identical(&expected),
                        "thread {t} ({name}), forward {i}: output differs from the \
                         single-threaded run"
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a worker thread panicked");
    }
}
