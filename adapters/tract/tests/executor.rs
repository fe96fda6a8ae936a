//! What the suite does not ask of the tract adapter directly: every element type Concord has
//! either goes through a tract plan bit for bit or is declined naming it, and a node tract
//! cannot load is declined with tract's reason before any partition is made.
// A test reports a failure by panicking, helpers included.
#![allow(clippy::panic)]

use concord::executor::{DType, Dim, Graph, Node, Support, Tensor, ValueInfo};
use concord::{Backend, Executor, ExecutorRegistry, FallbackPolicy, NetBuilder, Op, TensorData};
use concord_adapter_tract::{TractExecutor, NAME, TARGET};
use std::sync::Arc;

fn transpose_graph(dtype: DType) -> Graph {
    let x = ValueInfo::new("x", dtype, vec![Dim::Fixed(2), Dim::Fixed(3)]);
    let y = ValueInfo::new("y", dtype, vec![Dim::Fixed(3), Dim::Fixed(2)]);
    Graph {
        name: "types".into(),
        values: [("x".to_string(), x.clone()), ("y".to_string(), y)]
            .into_iter()
            .collect(),
        inputs: vec![x],
        outputs: vec!["y".into()],
        initializers: Default::default(),
        nodes: vec![Node {
            name: "transpose".into(),
            op: Op::Transpose { perm: None },
            inputs: vec![Some("x".into())],
            outputs: vec!["y".into()],
        }],
        opset: 18,
    }
}

/// Transpose of a 2×3 tensor of every element type but bfloat16: the output is the input's
/// elements in column order (by hand: [[0,1,2],[3,4,5]] → [[0,3],[1,4],[2,5]]), bit for bit.
#[test]
fn every_element_type_but_bfloat16_goes_through_a_plan() {
    for dtype in DType::ALL.into_iter().filter(|d| *d != DType::BF16) {
        let net = NetBuilder::from_graph(transpose_graph(dtype))
            .registry(ExecutorRegistry::reference_only().with(Arc::new(TractExecutor::new())))
            .backend(Backend::named(NAME))
            .fallback(FallbackPolicy::Deny)
            .build()
            .unwrap_or_else(|e| std::panic::panic_any(format!("{dtype}: {e}")));
        assert!(net.placement().nodes.iter().all(|n| n.executor == NAME));
        let values: Vec<f64> = (0..6)
            .map(|i| {
                if dtype == DType::Bool {
                    f64::from(i % 2)
                } else {
                    f64::from(i)
                }
            })
            .collect();
        let input = Tensor::new(vec![2, 3], TensorData::from_f64(dtype, &values))
            .unwrap_or_else(|e| std::panic::panic_any(e.to_string()));
        let want_values: Vec<f64> = [0, 3, 1, 4, 2, 5].iter().map(|&i| values[i]).collect();
        let want = Tensor::new(vec![3, 2], TensorData::from_f64(dtype, &want_values))
            .unwrap_or_else(|e| std::panic::panic_any(e.to_string()));
        let outputs = net
            .forward([("x", input)])
            .unwrap_or_else(|e| std::panic::panic_any(format!("{dtype}: {e}")));
        let got = outputs
            .get("y")
            .unwrap_or_else(|| std::panic::panic_any("no output y"));
        assert!(
            got.bit_identical(&want),
            "{dtype}: got {got:?}, want {want:?}"
        );
    }
}

#[test]
fn bfloat16_is_declined_naming_it() {
    let graph = transpose_graph(DType::BF16);
    match TractExecutor::new().supports(&graph, &graph.nodes[0], &TARGET) {
        Support::No(reason) => assert!(reason.contains("bf16"), "{reason}"),
        Support::Yes => std::panic::panic_any("tract has no bfloat16, yet bf16 was accepted"),
    }
}

/// tract-onnx 0.23 registers no Det: `supports` declines it, naming the op, before any
/// partition is made.
#[test]
fn an_op_tract_lacks_is_declined_before_prepare() {
    let mut graph = transpose_graph(DType::F32);
    graph.inputs[0].shape = vec![Dim::Fixed(2), Dim::Fixed(2)];
    graph.values.insert("x".into(), graph.inputs[0].clone());
    graph
        .values
        .insert("y".into(), ValueInfo::new("y", DType::F32, Vec::new()));
    graph.nodes[0].op = Op::Det;
    match TractExecutor::new().supports(&graph, &graph.nodes[0], &TARGET) {
        Support::No(reason) => assert!(reason.contains("no Det op"), "{reason}"),
        Support::Yes => std::panic::panic_any("tract-onnx 0.23 has no Det, yet it was accepted"),
    }
}

/// A node whose op tract registers but whose form it cannot load is declined with tract's
/// own message: here a Transpose whose permutation names an axis the input does not have,
/// which tract refuses when it types the one-node model.
#[test]
fn a_node_tract_cannot_load_is_declined_with_its_message() {
    let mut graph = transpose_graph(DType::F32);
    graph.nodes[0].op = Op::Transpose {
        perm: Some(vec![0, 5]),
    };
    match TractExecutor::new().supports(&graph, &graph.nodes[0], &TARGET) {
        Support::No(reason) => assert!(reason.starts_with("tract cannot load it: "), "{reason}"),
        Support::Yes => std::panic::panic_any("tract accepted a Transpose over a missing axis"),
    }
}

#[test]
fn another_target_is_refused() {
    let graph = transpose_graph(DType::F32);
    let other = concord::Target::new("cpu");
    assert!(matches!(
        TractExecutor::new().supports(&graph, &graph.nodes[0], &other),
        Support::No(_)
    ));
}
