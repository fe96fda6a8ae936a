//! Shapes known late. A model read from ONNX whose Reshape target only evaluation can
//! compute (PyTorch's `Mod` of constants feeding a Slice of `Shape`) builds, because
//! folding finishes what inference alone cannot. A net whose input has a symbolic batch dim
//! is built once and serves forwards of different batches, from many threads, on the
//! reference executor: its shape sub-graph (`Shape → Gather → Unsqueeze → Concat →
//! Reshape`) cannot fold at build, so the reference computes it on the host per forward.
//! The oracle is the same model built with a fixed batch, where the chain folds away: both
//! run on the reference, so outputs must be bit-identical. An output whose shape depends on
//! a runtime value (Slice with ends given as an input) also runs on the reference.

// A failed build or forward is a failed test; panicking with the error says why.
#![allow(clippy::panic)]

use concord::internals::onnx;
use concord::op::Binary;
use concord::{
    DType, Dim, Error, ExecutorRegistry, FallbackPolicy, Graph, Net, NetBuilder, Node, Op,
    Overrides, Tensor, ValueInfo,
};

/// X f32[batch, 3, 4] → Shape → Gather(0) → Unsqueeze(0) → Concat with [-1] gives the
/// target [batch, -1]; Reshape(X, target) → MatMul with W f32[12, 5] → Add B → Y[batch, 5].
fn flatten_then_project(batch: Dim) -> Graph {
    let mut g = Graph {
        name: "flatten_then_project".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs.push(ValueInfo::new(
        "X",
        DType::F32,
        vec![batch, Dim::Fixed(3), Dim::Fixed(4)],
    ));
    let w: Vec<f32> = (0..12 * 5)
        .map(|i| ((i * 13 % 17) as f32 - 8.0) / 7.0)
        .collect();
    let b: Vec<f32> = (0..5).map(|i| i as f32 / 3.0 - 0.5).collect();
    for (name, t) in [
        ("zero", Tensor::scalar_i64(0)),
        ("axes0", Tensor::vec_i64(vec![0])),
        ("minus_one", Tensor::vec_i64(vec![-1])),
        ("W", Tensor::from_f32([12, 5], w).expect("W")),
        ("B", Tensor::from_f32([5], b).expect("B")),
    ] {
        g.initializers.insert(name.into(), t);
    }
    g.nodes = vec![
        Node::new(
            "shape",
            Op::Shape {
                start: 0,
                end: None,
            },
            &["X"],
            &["x_shape"],
        ),
        Node::new(
            "gather",
            Op::Gather { axis: 0 },
            &["x_shape", "zero"],
            &["n"],
        ),
        Node::new("unsqueeze", Op::Unsqueeze, &["n", "axes0"], &["n_1d"]),
        Node::new(
            "concat",
            Op::Concat { axis: 0 },
            &["n_1d", "minus_one"],
            &["target"],
        ),
        Node::new(
            "reshape",
            Op::Reshape { allowzero: false },
            &["X", "target"],
            &["flat"],
        ),
        Node::new("project", Op::MatMul, &["flat", "W"], &["projected"]),
        Node::new("bias", Op::Binary(Binary::Add), &["projected", "B"], &["Y"]),
    ];
    g.outputs = vec!["Y".into()];
    g
}

fn reference_net(graph: Graph) -> Net {
    NetBuilder::from_graph(graph)
        .registry(ExecutorRegistry::reference_only())
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .build()
        .unwrap_or_else(|e| panic!("build failed: {e}"))
}

/// X[batch, 3, 4] with distinct, batch-dependent values.
fn input(batch: usize) -> Tensor {
    let n = batch * 12;
    let values = (0..n)
        .map(|i| ((i * 7 + batch) % 23) as f32 / 5.0 - 2.0)
        .collect();
    Tensor::from_f32([batch, 3, 4], values).expect("input")
}

fn forward(net: &Net, x: Tensor) -> Tensor {
    let outputs = net
        .forward([("X", x)])
        .unwrap_or_else(|e| panic!("forward failed: {e}"));
    outputs.get("Y").cloned().expect("output Y")
}

#[test]
fn symbolic_batch_builds_once_and_serves_every_batch() {
    let symbolic = reference_net(flatten_then_project(Dim::Named("N".into())));
    // The shape chain reads the symbolic input, so it stays in the built graph.
    let ops: Vec<&str> = symbolic.graph().nodes.iter().map(|n| n.op.name()).collect();
    assert!(ops.contains(&"Shape"), "{ops:?}");
    assert_eq!(
        symbolic.outputs()[0].shape,
        vec![Dim::Unknown, Dim::Fixed(5)]
    );
    for batch in [1, 4, 2] {
        let fixed = reference_net(flatten_then_project(Dim::Fixed(batch)));
        // With a fixed batch the chain folds: no Shape is left to run.
        assert!(
            !fixed
                .graph()
                .nodes
                .iter()
                .any(|n| matches!(n.op, Op::Shape { .. })),
            "batch {batch}: Shape survived folding"
        );
        let got = forward(&symbolic, input(batch));
        let want = forward(&fixed, input(batch));
        assert_eq!(got.dims(), &[batch, 5]);
        assert!(
            got.bit_identical(&want),
            "batch {batch}: the symbolic net differs from the fixed one"
        );
    }
}

#[test]
fn symbolic_batch_serves_four_threads_at_once() {
    let symbolic = reference_net(flatten_then_project(Dim::Named("N".into())));
    let batches = [1usize, 4, 2, 3];
    let expected: Vec<Tensor> = batches
        .iter()
        .map(|&b| {
            forward(
                &reference_net(flatten_then_project(Dim::Fixed(b))),
                input(b),
            )
        })
        .collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = batches
            .iter()
            .zip(&expected)
            .map(|(&batch, want)| {
                let net = &symbolic;
                scope.spawn(move || {
                    for _ in 0..20 {
                        let got = forward(net, input(batch));
                        assert!(got.bit_identical(want), "batch {batch} differs");
                    }
                })
            })
            .collect();
        for h in handles {
            assert!(h.join().is_ok(), "a forward thread panicked");
        }
    });
}

#[test]
fn a_fixed_dim_mismatch_names_input_axis_expected_and_got() {
    let symbolic = reference_net(flatten_then_project(Dim::Named("N".into())));
    let wrong = Tensor::zeros(DType::F32, [2, 7, 4]);
    match symbolic.forward([("X", wrong)]) {
        Err(Error::InputShape {
            name,
            axis,
            expected,
            actual,
            ..
        }) => {
            assert_eq!(name, "X");
            assert_eq!(axis, 1);
            assert_eq!(expected, "[N, 3, 4]");
            assert_eq!(actual.dims(), &[2, 7, 4]);
        }
        other => panic!("expected an InputShape error, got {other:?}"),
    }
}

/// X f32[2, 3, 4, 5] → Reshape(X, Concat([-1], Slice(Shape(X), Reshape(Mod(-1, 4), [1]),
/// [INT64_MAX], [0]))) → Y, with every operand a Constant node, as PyTorch writes it.
fn mod_slice_chain() -> Graph {
    let mut g = Graph {
        name: "mod_slice_chain".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs
        .push(ValueInfo::fixed("X", DType::F32, &[2, 3, 4, 5]));
    let constant = |name: &str, value: Tensor| {
        Node::new(format!("{name}_c"), Op::Constant { value }, &[], &[name])
    };
    g.nodes = vec![
        constant("minus_one_scalar", Tensor::scalar_i64(-1)),
        constant("rank", Tensor::scalar_i64(4)),
        Node::new(
            "/Mod",
            Op::Binary(Binary::Mod { fmod: false }),
            &["minus_one_scalar", "rank"],
            &["last_axis"],
        ),
        constant("one", Tensor::vec_i64(vec![1])),
        Node::new(
            "/Reshape_1",
            Op::Reshape { allowzero: false },
            &["last_axis", "one"],
            &["starts"],
        ),
        constant("ends", Tensor::vec_i64(vec![i64::MAX])),
        constant("axes", Tensor::vec_i64(vec![0])),
        Node::new(
            "/Shape",
            Op::Shape {
                start: 0,
                end: None,
            },
            &["X"],
            &["x_shape"],
        ),
        Node::new(
            "/Slice",
            Op::Slice,
            &["x_shape", "starts", "ends", "axes"],
            &["tail"],
        ),
        constant("minus_one", Tensor::vec_i64(vec![-1])),
        Node::new(
            "/Concat",
            Op::Concat { axis: 0 },
            &["minus_one", "tail"],
            &["target"],
        ),
        Node::new(
            "/Reshape_2",
            Op::Reshape { allowzero: false },
            &["X", "target"],
            &["Y"],
        ),
    ];
    g.outputs = vec!["Y".into()];
    g
}

#[test]
fn an_onnx_reshape_target_computed_from_mod_of_constants_folds_at_build() {
    let bytes = onnx::save(&mod_slice_chain()).unwrap_or_else(|e| panic!("save: {e}"));
    let net = NetBuilder::from_onnx_bytes(bytes)
        .registry(ExecutorRegistry::reference_only())
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .build()
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    let ops: Vec<&str> = net.graph().nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, vec!["Reshape"]);
    // -1 mod 4 = 3, so the target is [-1, X's dims from axis 3] = [-1, 5]: Y is [24, 5].
    assert_eq!(net.outputs()[0].shape, vec![Dim::Fixed(24), Dim::Fixed(5)]);
    let x = Tensor::from_f32([2, 3, 4, 5], (0..120).map(|i| i as f32).collect()).expect("X");
    let y = forward(&net, x.clone());
    assert_eq!(y.dims(), &[24, 5]);
    // Reshape keeps the element order.
    assert_eq!(y.as_f32(), x.as_f32());
}

#[test]
fn an_output_shape_that_depends_on_a_runtime_value_runs_on_the_reference() {
    // Y = Slice(X, [0], k) with k an i64 input: Y's extent is known only per forward.
    let mut g = Graph {
        name: "runtime_slice".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs.push(ValueInfo::fixed("X", DType::F32, &[6]));
    g.inputs.push(ValueInfo::fixed("k", DType::I64, &[1]));
    g.initializers
        .insert("start".into(), Tensor::vec_i64(vec![0]));
    g.nodes = vec![Node::new("slice", Op::Slice, &["X", "start", "k"], &["Y"])];
    g.outputs = vec!["Y".into()];
    let net = reference_net(g);
    assert_eq!(net.outputs()[0].shape, vec![Dim::Unknown]);
    let x: Vec<f32> = vec![0.5, -1.0, 2.0, 3.5, -4.0, 8.0];
    for k in [2usize, 5, 0, 6] {
        let outputs = net
            .forward([
                ("X", Tensor::from_f32([6], x.clone()).expect("X")),
                ("k", Tensor::vec_i64(vec![k as i64])),
            ])
            .unwrap_or_else(|e| panic!("k = {k}: {e}"));
        let y = outputs.get("Y").expect("Y");
        assert_eq!(y.dims(), &[k]);
        assert_eq!(y.as_f32(), Some(&x[..k]));
    }
}
