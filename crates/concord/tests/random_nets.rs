//! Nets of random ops keep Concord's promises: `forward` draws the same values on every
//! call and every thread, and two nets built from the same model draw the same values, an
//! unseeded node included (its seed derives from its name). The oracle is the net's own
//! first forward: the claim under test is that nothing (no state, no thread) changes it.

// A failed build or forward is a failed test; panicking with the error says why.
#![allow(clippy::panic)]

use concord::internals::onnx;
use concord::op::{Binary, Distribution, Random, RandomSeed};
use concord::{DType, ExecutorRegistry, FallbackPolicy, Graph, Net, NetBuilder, Node, Op};
use concord::{Overrides, Tensor, ValueInfo};

/// Y = X + RandomNormal (unseeded) + RandomUniformLike(X) (seeded); C = Multinomial(X)
/// (unseeded), X f32[2, 3] read as logits.
fn noisy_model() -> Vec<u8> {
    let mut g = Graph {
        name: "noisy".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs.push(ValueInfo::fixed("X", DType::F32, &[2, 3]));
    g.nodes = vec![
        Node::new(
            "noise",
            Op::Random(Random {
                distribution: Distribution::Normal {
                    mean: 0.0,
                    scale: 0.1,
                },
                shape: Some(vec![2, 3]),
                dtype: Some(DType::F32),
                seed: RandomSeed::from_node_name("noise"),
            }),
            &[],
            &["n"],
        ),
        Node::new(
            "jitter",
            Op::Random(Random {
                distribution: Distribution::Uniform {
                    low: -0.5,
                    high: 0.5,
                },
                shape: None,
                dtype: None,
                seed: RandomSeed::Given(4.0),
            }),
            &["X"],
            &["j"],
        ),
        Node::new("add_noise", Op::Binary(Binary::Add), &["X", "n"], &["a"]),
        Node::new("add_jitter", Op::Binary(Binary::Add), &["a", "j"], &["Y"]),
        Node::new(
            "classes",
            Op::Multinomial {
                sample_size: 8,
                dtype: DType::I64,
                seed: RandomSeed::from_node_name("classes"),
            },
            &["X"],
            &["C"],
        ),
    ];
    g.outputs = vec!["Y".into(), "C".into()];
    onnx::save(&g).unwrap_or_else(|e| panic!("save: {e}"))
}

fn build(bytes: Vec<u8>) -> Net {
    NetBuilder::from_onnx_bytes(bytes)
        .registry(ExecutorRegistry::reference_only())
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .build()
        .unwrap_or_else(|e| panic!("build failed: {e}"))
}

fn x() -> Tensor {
    Tensor::from_f32([2, 3], vec![0.0, 1.0, 2.0, -1.0, 0.5, 3.0])
        .unwrap_or_else(|e| panic!("X: {e}"))
}

fn run(net: &Net) -> (Tensor, Tensor) {
    let out = net
        .forward([("X", x())])
        .unwrap_or_else(|e| panic!("forward failed: {e}"));
    match (out.get("Y"), out.get("C")) {
        (Some(y), Some(c)) => (y.clone(), c.clone()),
        _ => panic!("outputs Y and C"),
    }
}

#[test]
fn random_nodes_draw_the_same_values_on_every_forward_thread_and_net() {
    let net = build(noisy_model());
    let (y, c) = run(&net);
    assert_eq!((y.dtype(), y.dims()), (DType::F32, &[2, 3][..]));
    assert_eq!((c.dtype(), c.dims()), (DType::I64, &[2, 8][..]));
    // The noise is small (|normal| < 10σ = 1, |uniform| ≤ 0.5), and the draws are classes.
    let xs = x().to_f64_vec();
    for (got, base) in y.to_f64_vec().iter().zip(&xs) {
        assert!((got - base).abs() < 1.5, "{got} is far from {base}");
    }
    assert!(c.to_f64_vec().iter().all(|&k| (0.0..3.0).contains(&k)));
    // A second forward, forwards on many threads at once, and a second net of the model.
    let again = run(&net);
    assert!(
        again.0.bit_identical(&y) && again.1.bit_identical(&c),
        "second forward"
    );
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| run(&net))).collect();
        for h in handles {
            match h.join() {
                Ok((ty, tc)) => assert!(ty.bit_identical(&y) && tc.bit_identical(&c)),
                Err(_) => panic!("a forward thread panicked"),
            }
        }
    });
    let other = run(&build(noisy_model()));
    assert!(
        other.0.bit_identical(&y) && other.1.bit_identical(&c),
        "another net"
    );
    // The random nodes run at each forward on the reference: RandomNormal has no input to
    // fold from, and the others read the runtime input X.
    let ops: Vec<&str> = net.graph().nodes.iter().map(|n| n.op.name()).collect();
    for op in ["RandomNormal", "RandomUniformLike", "Multinomial"] {
        assert!(ops.contains(&op), "{op} in {ops:?}");
    }
}
