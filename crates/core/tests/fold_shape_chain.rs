//! Constant folding of a PyTorch-style shape chain with the reference kernels: with a
//! fixed input shape, `Shape → Gather → Unsqueeze → Concat → Reshape` and a Slice whose
//! ends come from `Shape` fold to initializers and every shape becomes static; with a
//! symbolic batch dim, `Shape` of that input must stay, and both graphs must still compute
//! what the unfolded graph computes.

// A failed run is a failed test; panicking with the error says why.
#![allow(clippy::panic)]

use concord_core::op::Op;
use concord_core::{DType, Dim, Graph, Node, Tensor, ValueInfo};
use concord_cpu::{ReferenceEvaluator, ReferenceExecutor};
use std::collections::{BTreeMap, BTreeSet};

/// X → Shape → Gather(0) → Unsqueeze(0) → Concat with [-1] → Reshape(X, ·) → Y, and
/// X → Shape(start 2, end 3) → ends of Slice(X, starts [1], axes [2]) → Z.
fn shape_chain(x: ValueInfo) -> Graph {
    let mut g = Graph {
        name: "shape_chain".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs.push(x);
    for (name, t) in [
        ("zero", Tensor::scalar_i64(0)),
        ("axes0", Tensor::vec_i64(vec![0])),
        ("minus_one", Tensor::vec_i64(vec![-1])),
        ("slice_starts", Tensor::vec_i64(vec![1])),
        ("slice_axes", Tensor::vec_i64(vec![2])),
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
            &["batch"],
        ),
        Node::new(
            "unsqueeze",
            Op::Unsqueeze,
            &["batch", "axes0"],
            &["batch_1d"],
        ),
        Node::new(
            "concat",
            Op::Concat { axis: 0 },
            &["batch_1d", "minus_one"],
            &["target"],
        ),
        Node::new(
            "reshape",
            Op::Reshape { allowzero: false },
            &["X", "target"],
            &["Y"],
        ),
        Node::new(
            "shape_dim2",
            Op::Shape {
                start: 2,
                end: Some(3),
            },
            &["X"],
            &["x_dim2"],
        ),
        Node::new(
            "slice",
            Op::Slice,
            &["X", "slice_starts", "x_dim2", "slice_axes"],
            &["Z"],
        ),
    ];
    g.outputs = vec!["Y".into(), "Z".into()];
    g
}

/// X filled with 0, 1, 2, … so that every element is distinguishable.
fn iota_input(dims: &[usize]) -> BTreeMap<String, Tensor> {
    let n: usize = dims.iter().product();
    let x = Tensor::from_f32(dims, (0..n).map(|i| i as f32).collect()).expect("input tensor");
    BTreeMap::from([("X".to_string(), x)])
}

fn run(graph: &Graph, inputs: &BTreeMap<String, Tensor>) -> Vec<(String, Tensor)> {
    ReferenceExecutor::new()
        .run(graph, inputs)
        .unwrap_or_else(|e| panic!("graph `{}` failed: {e}", graph.name))
}

fn op_names(graph: &Graph) -> Vec<&'static str> {
    graph.nodes.iter().map(|n| n.op.name()).collect()
}

fn fixed(dims: &[usize]) -> Vec<Dim> {
    dims.iter().map(|&d| Dim::Fixed(d)).collect()
}

#[test]
fn fixed_input_folds_the_whole_shape_chain() {
    let unfolded = shape_chain(ValueInfo::fixed("X", DType::F32, &[2, 3, 4, 5]));
    let mut folded = unfolded.clone();
    let summary = folded
        .fold_constants(&ReferenceEvaluator::default())
        .expect("folding succeeds");

    // Shape, Gather, Unsqueeze, Concat and the second Shape are gone.
    assert_eq!(summary.folded_nodes, 5);
    assert_eq!(op_names(&folded), vec!["Reshape", "Slice"]);
    for op in ["Shape", "Gather", "Concat", "Unsqueeze"] {
        assert!(!op_names(&folded).contains(&op), "{op} survived folding");
    }

    // Reshape reads the folded target [2, -1]; Slice's ends are the folded [4].
    let reshape = &folded.nodes[0];
    let target = reshape.inputs[1].as_deref().expect("shape input");
    assert_eq!(
        folded.initializers.get(target),
        Some(&Tensor::vec_i64(vec![2, -1]))
    );
    let slice = &folded.nodes[1];
    let ends = slice.inputs[2].as_deref().expect("ends input");
    assert_eq!(
        folded.initializers.get(ends),
        Some(&Tensor::vec_i64(vec![4]))
    );
    // Intermediate constants nobody reads any more are pruned.
    let names: BTreeSet<&str> = folded.initializers.keys().map(|k| k.as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from(["target", "x_dim2", "slice_starts", "slice_axes"])
    );

    // Every output shape is static now.
    assert_eq!(folded.values["Y"].shape, fixed(&[2, 60]));
    assert_eq!(folded.values["Y"].dtype, DType::F32);
    assert_eq!(folded.values["Z"].shape, fixed(&[2, 3, 3, 5]));

    // Same function as before folding, bit for bit.
    let inputs = iota_input(&[2, 3, 4, 5]);
    let before = run(&unfolded, &inputs);
    let after = run(&folded, &inputs);
    assert_eq!(before.len(), 2);
    for ((name_b, b), (name_a, a)) in before.iter().zip(&after) {
        assert_eq!(name_b, name_a);
        assert!(b.bit_identical(a), "{name_b} changed after folding");
    }
    // And that function is the one intended: Y is X as [2, 60]; Z = X[:, :, 1:4, :].
    let y = &after[0].1;
    assert_eq!(y.dims(), &[2, 60]);
    assert_eq!(y.as_f32().map(|v| v[61]), Some(61.0));
    let z = &after[1].1;
    assert_eq!(z.dims(), &[2, 3, 3, 5]);
    // Z[0, 0, 0, 0] is X[0, 0, 1, 0] = 5; Z[1, 2, 2, 4] is X[1, 2, 3, 4] = 119.
    assert_eq!(
        z.as_f32().map(|v| (v[0], v[v.len() - 1])),
        Some((5.0, 119.0))
    );
}

#[test]
fn symbolic_batch_keeps_shape_of_the_symbolic_input() {
    let x = ValueInfo::new(
        "X",
        DType::F32,
        vec![
            Dim::Named("batch".into()),
            Dim::Fixed(3),
            Dim::Fixed(4),
            Dim::Fixed(5),
        ],
    );
    let unfolded = shape_chain(x);
    let mut folded = unfolded.clone();
    let summary = folded
        .fold_constants(&ReferenceEvaluator::default())
        .expect("folding succeeds");

    // Nothing in this graph is foldable: both Shape nodes read X, whose batch is unknown.
    assert_eq!(summary.folded_nodes, 0);
    assert_eq!(
        op_names(&folded),
        vec![
            "Shape",
            "Gather",
            "Unsqueeze",
            "Concat",
            "Reshape",
            "Shape",
            "Slice"
        ]
    );
    assert!(!folded.initializers.contains_key("x_shape"));
    assert!(!folded.initializers.contains_key("target"));

    // Inference still knows the ranks and what the chain keeps.
    assert_eq!(folded.values["x_shape"].shape, fixed(&[4]));
    assert_eq!(folded.values["batch"].shape, fixed(&[]));
    assert_eq!(folded.values["batch_1d"].shape, fixed(&[1]));
    assert_eq!(folded.values["target"].shape, fixed(&[2]));
    assert_eq!(folded.values["Y"].shape, vec![Dim::Unknown, Dim::Unknown]);
    assert_eq!(folded.values["x_dim2"].shape, fixed(&[1]));
    assert_eq!(
        folded.values["Z"].shape,
        vec![
            Dim::Named("batch".into()),
            Dim::Fixed(3),
            Dim::Unknown,
            Dim::Fixed(5)
        ]
    );

    // The graph computes the right thing for any batch.
    for batch in [1, 3] {
        let inputs = iota_input(&[batch, 3, 4, 5]);
        let out = run(&folded, &inputs);
        assert_eq!(out[0].1.dims(), &[batch, 60]);
        assert_eq!(out[1].1.dims(), &[batch, 3, 3, 5]);
        let before = run(&unfolded, &inputs);
        for ((_, b), (name, a)) in before.iter().zip(&out) {
            assert!(b.bit_identical(a), "{name} differs for batch {batch}");
        }
    }
}

#[test]
fn symbolic_graph_folds_the_parts_that_do_not_depend_on_the_batch() {
    // A second input with a fully fixed shape: its Shape chain folds even though X's
    // cannot, and Reshape(X, [0, -1]) keeps the batch name and solves -1 = 60.
    let mut g = shape_chain(ValueInfo::new(
        "X",
        DType::F32,
        vec![
            Dim::Named("batch".into()),
            Dim::Fixed(3),
            Dim::Fixed(4),
            Dim::Fixed(5),
        ],
    ));
    g.name = "mixed".into();
    g.inputs.push(ValueInfo::fixed("W", DType::F32, &[7, 60]));
    g.initializers.insert("one".into(), Tensor::scalar_i64(1));
    g.nodes.extend([
        Node::new(
            "w_shape",
            Op::Shape {
                start: 0,
                end: None,
            },
            &["W"],
            &["w_shape"],
        ),
        Node::new(
            "w_cols",
            Op::Gather { axis: 0 },
            &["w_shape", "one"],
            &["cols"],
        ),
        Node::new("w_cols_1d", Op::Unsqueeze, &["cols", "axes0"], &["cols_1d"]),
        Node::new(
            "flat_target",
            Op::Concat { axis: 0 },
            &["zero_1d", "cols_1d"],
            &["flat_shape"],
        ),
        Node::new(
            "flat",
            Op::Reshape { allowzero: false },
            &["X", "flat_shape"],
            &["F"],
        ),
    ]);
    g.initializers
        .insert("zero_1d".into(), Tensor::vec_i64(vec![0]));
    g.outputs.push("F".into());

    let mut folded = g.clone();
    let summary = folded
        .fold_constants(&ReferenceEvaluator::default())
        .expect("folding succeeds");
    assert_eq!(summary.folded_nodes, 4);
    assert_eq!(
        folded.initializers.get("flat_shape"),
        Some(&Tensor::vec_i64(vec![0, 60]))
    );
    assert_eq!(
        folded.values["F"].shape,
        vec![Dim::Named("batch".into()), Dim::Fixed(60)]
    );
    // X's own Shape is still there.
    assert_eq!(
        folded
            .nodes
            .iter()
            .filter(|n| matches!(n.op, Op::Shape { .. }))
            .count(),
        2
    );

    let mut inputs = iota_input(&[2, 3, 4, 5]);
    inputs.insert("W".into(), Tensor::zeros(DType::F32, [7, 60]));
    let before = run(&g, &inputs);
    let after = run(&folded, &inputs);
    for ((_, b), (name, a)) in before.iter().zip(&after) {
        assert!(b.bit_identical(a), "{name} changed after folding");
    }
    assert_eq!(after[2].1.dims(), &[2, 60]);
}

#[test]
fn constant_nodes_instead_of_initializers_infer_and_fold() {
    // PyTorch writes the axes and the -1 as Constant nodes. Before folding, inference must
    // still get through the chain (Unsqueeze of a scalar is [1] whatever its axes), and
    // folding then removes the Constant nodes along with the chain.
    let mut g = shape_chain(ValueInfo::fixed("X", DType::F32, &[2, 3, 4, 5]));
    for name in ["zero", "axes0", "minus_one"] {
        let value = g.initializers.remove(name).expect("initializer");
        g.nodes.insert(
            0,
            Node::new(
                format!("const_{name}"),
                Op::Constant { value },
                &[],
                &[name],
            ),
        );
    }
    let mut inferred = g.clone();
    inferred.infer_shapes().expect("inference succeeds");
    assert_eq!(inferred.values["batch_1d"].shape, fixed(&[1]));
    assert_eq!(inferred.values["target"].shape, fixed(&[2]));
    assert_eq!(inferred.values["Y"].shape, vec![Dim::Unknown, Dim::Unknown]);

    let mut folded = g.clone();
    let summary = folded
        .fold_constants(&ReferenceEvaluator::default())
        .expect("folding succeeds");
    assert_eq!(summary.folded_nodes, 8);
    assert_eq!(op_names(&folded), vec!["Reshape", "Slice"]);
    assert_eq!(folded.values["Y"].shape, fixed(&[2, 60]));

    let inputs = iota_input(&[2, 3, 4, 5]);
    let before = run(&inferred, &inputs);
    let after = run(&folded, &inputs);
    for ((_, b), (name, a)) in before.iter().zip(&after) {
        assert!(b.bit_identical(a), "{name} changed after folding");
    }
}

/// PyTorch's opset-17 transformer export computes a Slice start as `Mod(-1, rank)` of two
/// Constant nodes, reshaped to [1]: X → Shape → Slice(starts = Reshape(Mod(-1, 4), [1]),
/// ends [INT64_MAX], axes [0]) → Concat([-1], ·) → Reshape(X, ·) → Y. Only evaluating Mod
/// tells the target's length, so inference alone must leave Y for folding to finish.
fn mod_slice_chain() -> Graph {
    let mut g = Graph {
        name: "mod_slice_chain".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs
        .push(ValueInfo::fixed("X", DType::F32, &[2, 3, 4, 5]));
    let constant = |name: &str, value: Tensor| {
        Node::new(
            format!("const_{name}"),
            Op::Constant { value },
            &[],
            &[name],
        )
    };
    g.nodes = vec![
        constant("minus_one_scalar", Tensor::scalar_i64(-1)),
        constant("rank", Tensor::scalar_i64(4)),
        Node::new(
            "mod",
            Op::Binary(concord_core::op::Binary::Mod { fmod: false }),
            &["minus_one_scalar", "rank"],
            &["last_axis"],
        ),
        constant("one", Tensor::vec_i64(vec![1])),
        Node::new(
            "reshape_1",
            Op::Reshape { allowzero: false },
            &["last_axis", "one"],
            &["starts"],
        ),
        constant("ends", Tensor::vec_i64(vec![i64::MAX])),
        constant("axes", Tensor::vec_i64(vec![0])),
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
            "slice",
            Op::Slice,
            &["x_shape", "starts", "ends", "axes"],
            &["tail"],
        ),
        constant("minus_one", Tensor::vec_i64(vec![-1])),
        Node::new(
            "concat",
            Op::Concat { axis: 0 },
            &["minus_one", "tail"],
            &["target"],
        ),
        Node::new(
            "reshape_2",
            Op::Reshape { allowzero: false },
            &["X", "target"],
            &["Y"],
        ),
    ];
    g.outputs = vec!["Y".into()];
    g
}

#[test]
fn inference_alone_leaves_what_only_folding_can_know() {
    let mut g = mod_slice_chain();
    g.infer_shapes()
        .unwrap_or_else(|e| panic!("inference must not refuse what folding computes: {e}"));
    // Shape of the fixed X is known without evaluating; Mod's value is not, so Slice's
    // extent and the target's length are unknown, and Y's rank waits for folding.
    assert_eq!(g.values["x_shape"].shape, fixed(&[4]));
    assert_eq!(g.values["starts"].shape, fixed(&[1]));
    assert_eq!(g.values["tail"].shape, vec![Dim::Unknown]);
    assert_eq!(g.values["target"].shape, vec![Dim::Unknown]);
    assert!(!g.values.contains_key("Y"));
    assert_eq!(g.nodes.len(), 12, "inference changes no node");
}

#[test]
fn mod_reshape_slice_concat_chain_folds_to_a_static_reshape() {
    let mut g = mod_slice_chain();
    // The loader's order: inference first, folding at build.
    g.infer_shapes().expect("inference");
    let summary = g
        .fold_constants(&ReferenceEvaluator::default())
        .unwrap_or_else(|e| panic!("folding fails: {e}"));
    assert_eq!(op_names(&g), vec!["Reshape"]);
    assert_eq!(summary.folded_nodes, 11);
    // -1 mod 4 is 3 (ONNX's integer Mod takes the divisor's sign), so the tail is
    // X's dims from axis 3 on: [5], and the target is [-1, 5].
    assert_eq!(
        g.initializers.get("target"),
        Some(&Tensor::vec_i64(vec![-1, 5]))
    );
    assert_eq!(g.values["Y"].shape, fixed(&[24, 5]));

    // One pass is the fixed point: folding again finds nothing.
    let again = g
        .fold_constants(&ReferenceEvaluator::default())
        .expect("refold");
    assert_eq!(again.folded_nodes, 0);

    // Reshape keeps the element order, so Y's data is X's.
    let inputs = iota_input(&[2, 3, 4, 5]);
    let out = run(&g, &inputs);
    assert_eq!(out[0].1.dims(), &[24, 5]);
    assert_eq!(out[0].1.as_f32(), inputs["X"].as_f32());
}

#[test]
fn a_folded_graph_output_still_feeds_its_readers() {
    // x_shape is also a graph output: its Shape node stays, but its value is known, so the
    // Gather → Unsqueeze → Concat after it still fold and Reshape's target is static.
    let mut g = shape_chain(ValueInfo::fixed("X", DType::F32, &[2, 3, 4, 5]));
    g.outputs.push("x_shape".into());
    g.fold_constants(&ReferenceEvaluator::default())
        .expect("folding");
    assert_eq!(op_names(&g), vec!["Shape", "Reshape", "Slice"]);
    assert_eq!(
        g.initializers.get("target"),
        Some(&Tensor::vec_i64(vec![2, -1]))
    );
    assert_eq!(g.values["Y"].shape, fixed(&[2, 60]));
    let out = run(&g, &iota_input(&[2, 3, 4, 5]));
    assert_eq!(out[2].0, "x_shape");
    assert_eq!(out[2].1, Tensor::vec_i64(vec![2, 3, 4, 5]));
}

/// The reference evaluator, counting what it is asked to evaluate.
#[derive(Default)]
struct CountingEvaluator {
    evaluated: std::sync::Mutex<Vec<&'static str>>,
}

impl concord_core::fold::Evaluator for CountingEvaluator {
    fn evaluate(
        &self,
        op: &Op,
        inputs: &[Option<&Tensor>],
        num_outputs: usize,
    ) -> Result<Vec<Tensor>, concord_core::OpError> {
        if let Ok(mut seen) = self.evaluated.lock() {
            seen.push(op.name());
        }
        ReferenceEvaluator::default().evaluate(op, inputs, num_outputs)
    }
}

#[test]
fn outputs_over_the_size_limit_are_not_even_evaluated() {
    // A Transpose of a weight with more than MAX_FOLDED_ELEMENTS elements is left to run
    // time, and its inferred size says so before any kernel runs; the small Shape chain
    // beside it still folds.
    let side = 300;
    assert!(side * side > concord_core::fold::MAX_FOLDED_ELEMENTS);
    let mut g = shape_chain(ValueInfo::fixed("X", DType::F32, &[2, 3, 4, 5]));
    g.initializers
        .insert("big".into(), Tensor::zeros(DType::F32, [side, side]));
    g.nodes.push(Node::new(
        "transpose",
        Op::Transpose { perm: None },
        &["big"],
        &["big_t"],
    ));
    g.nodes.push(Node::new(
        "use_big",
        Op::Unary(concord_core::op::Unary::Relu),
        &["big_t"],
        &["R"],
    ));
    g.outputs.push("R".into());
    let evaluator = CountingEvaluator::default();
    g.fold_constants(&evaluator).expect("folding");
    let evaluated = evaluator.evaluated.lock().expect("lock").clone();
    assert!(!evaluated.contains(&"Transpose"), "{evaluated:?}");
    assert!(evaluated.contains(&"Concat"), "{evaluated:?}");
    assert!(op_names(&g).contains(&"Transpose"));
    assert!(!op_names(&g).contains(&"Concat"));
}
