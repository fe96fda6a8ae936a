//! Reading and writing If, Loop and Scan: outer values a subgraph reads (through nested
//! subgraphs too) become captured node and subgraph inputs, the writer strips them again,
//! and a name nothing defines is a typed error.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

mod common;

use common::*;
use concord_core::{DType, Dim, Op, ValueInfo};
use concord_onnx::proto::{AttributeProto, AttributeType, GraphProto};
use concord_onnx::{load, read_graph, save};

fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Graph as i32,
        g: Some(Box::new(g)),
        ..AttributeProto::default()
    }
}

/// y = If(c) { If(c) { x + b } else { x } } else { b }: the inner then-branch reads `x`
/// and `b` from two scopes out.
fn nested_if_model() -> Vec<u8> {
    let inner_then = graph(
        vec![node("Add", "add", &["x", "b"], &["s"], vec![])],
        vec![],
        vec![f32_value("s", &[2])],
        vec![],
    );
    let inner_else = graph(
        vec![node("Identity", "keep", &["x"], &["k"], vec![])],
        vec![],
        vec![f32_value("k", &[2])],
        vec![],
    );
    let outer_then = graph(
        vec![node(
            "If",
            "inner",
            &["c"],
            &["r"],
            vec![
                graph_attr("then_branch", inner_then),
                graph_attr("else_branch", inner_else),
            ],
        )],
        vec![],
        vec![f32_value("r", &[2])],
        vec![],
    );
    let outer_else = graph(vec![], vec![], vec![f32_value("b", &[2])], vec![]);
    let main = graph(
        vec![node(
            "If",
            "outer",
            &["c"],
            &["y"],
            vec![
                graph_attr("then_branch", outer_then),
                graph_attr("else_branch", outer_else),
            ],
        )],
        vec![
            value("c", concord_onnx::proto::tensor_proto::DataType::Bool, &[]),
            f32_value("x", &[2]),
        ],
        vec![f32_value("y", &[2])],
        vec![float_tensor("b", &[2], &[1.0, 2.0])],
    );
    bytes(&model(21, main))
}

#[test]
fn outer_values_become_captured_inputs_at_every_level() {
    let g = load(&nested_if_model()).unwrap_or_else(|e| panic!("{e}"));
    let outer = &g.nodes[0];
    let names: Vec<Option<&str>> = outer.inputs.iter().map(|i| i.as_deref()).collect();
    // cond, then the captures in sorted order: `c` (read by the inner If), `b` and `x`.
    assert_eq!(names, vec![Some("c"), Some("b"), Some("c"), Some("x")]);
    let Op::If {
        then_branch,
        else_branch,
    } = &outer.op
    else {
        panic!("the outer node is an If: {:?}", outer.op);
    };
    let inputs: Vec<&str> = then_branch.inputs.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(inputs, vec!["b", "c", "x"]);
    assert_eq!(
        else_branch.inputs.len(),
        3,
        "both branches take every capture"
    );
    let inner = &then_branch.nodes[0];
    let inner_inputs: Vec<Option<&str>> = inner.inputs.iter().map(|i| i.as_deref()).collect();
    assert_eq!(inner_inputs, vec![Some("c"), Some("b"), Some("x")]);
    assert_eq!(
        g.value("y"),
        Some(&ValueInfo::new("y", DType::F32, vec![Dim::Fixed(2)]))
    );
}

#[test]
fn a_nested_if_round_trips() {
    let g = read_graph(&nested_if_model()).unwrap_or_else(|e| panic!("{e}"));
    let saved = save(&g).unwrap_or_else(|e| panic!("{e}"));
    let again = read_graph(&saved).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.nodes, again.nodes);
    assert_eq!(g.inputs, again.inputs);
    assert_eq!(g.initializers, again.initializers);
}

#[test]
fn loop_and_scan_round_trip_with_their_attributes() {
    // Loop: carried s, s + c captured as scan output; Scan: running sum, reversed output.
    let body = graph(
        vec![
            node("Identity", "keep", &["cond_in"], &["cond_out"], vec![]),
            node("Add", "step", &["s", "c"], &["s_out"], vec![]),
            node("Identity", "copy", &["s_out"], &["scan"], vec![]),
        ],
        vec![
            value("i", concord_onnx::proto::tensor_proto::DataType::Int64, &[]),
            value(
                "cond_in",
                concord_onnx::proto::tensor_proto::DataType::Bool,
                &[],
            ),
            f32_value("s", &[2]),
        ],
        vec![output("cond_out"), output("s_out"), output("scan")],
        vec![],
    );
    let scan_body = graph(
        vec![
            node("Add", "add", &["sum", "row"], &["next"], vec![]),
            node("Identity", "out", &["next"], &["o"], vec![]),
        ],
        vec![f32_value("sum", &[2]), f32_value("row", &[2])],
        vec![output("next"), output("o")],
        vec![],
    );
    let main = graph(
        vec![
            node(
                "Loop",
                "loop",
                &["m", "", "x"],
                &["final", "scans"],
                vec![graph_attr("body", body)],
            ),
            node(
                "Scan",
                "scan",
                &["x", "rows"],
                &["total", "sums"],
                vec![
                    graph_attr("body", scan_body),
                    attr_int("num_scan_inputs", 1),
                    attr_ints("scan_output_directions", &[1]),
                ],
            ),
        ],
        vec![
            f32_value("x", &[2]),
            f32_value("c", &[2]),
            f32_value("rows", &[3, 2]),
        ],
        vec![
            f32_value("final", &[2]),
            output("scans"),
            f32_value("total", &[2]),
            output("sums"),
        ],
        vec![i64_tensor("m", &[], &[3])],
    );
    let g = load(&bytes(&model(21, main))).unwrap_or_else(|e| panic!("{e}"));
    match &g.nodes.iter().find(|n| n.name == "loop").map(|n| &n.op) {
        Some(Op::Loop { captures, body }) => {
            assert_eq!(*captures, 1);
            assert_eq!(body.inputs.len(), 4);
        }
        other => panic!("expected the Loop: {other:?}"),
    }
    assert_eq!(
        g.value("scans").map(|v| v.shape.clone()),
        Some(vec![Dim::Unknown, Dim::Fixed(2)])
    );
    assert_eq!(
        g.value("sums").map(|v| v.shape.clone()),
        Some(vec![Dim::Fixed(3), Dim::Fixed(2)])
    );
    let saved = save(&g).unwrap_or_else(|e| panic!("{e}"));
    let again = read_graph(&saved).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.nodes, again.nodes);
}

#[test]
fn a_name_nothing_defines_is_a_typed_error() {
    let then_branch = graph(
        vec![node("Identity", "lost", &["nowhere"], &["z"], vec![])],
        vec![],
        vec![f32_value("z", &[2])],
        vec![],
    );
    let else_branch = graph(vec![], vec![], vec![f32_value("x", &[2])], vec![]);
    let main = graph(
        vec![node(
            "If",
            "choose",
            &["c"],
            &["y"],
            vec![
                graph_attr("then_branch", then_branch),
                graph_attr("else_branch", else_branch),
            ],
        )],
        vec![
            value("c", concord_onnx::proto::tensor_proto::DataType::Bool, &[]),
            f32_value("x", &[2]),
        ],
        vec![f32_value("y", &[2])],
        vec![],
    );
    let err = load(&bytes(&model(21, main)))
        .err()
        .unwrap_or_else(|| panic!("`nowhere` is defined by nothing"));
    let text = err.to_string();
    assert!(
        text.contains("choose") && text.contains("nowhere"),
        "{text}"
    );
}
