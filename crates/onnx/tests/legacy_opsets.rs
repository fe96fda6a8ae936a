//! Opsets 7 to 12: each older form reads as the IR's one (opset-13) form, with attributes
//! that later became inputs turned into initializers; forms with no equivalent, and forms
//! from before opset 7, are typed errors naming node, op, opset and attribute.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

mod common;

use common::*;
use concord_core::op::{
    CoordinateTransform, NearestMode, PadMode, Reduce, ReduceKind, Resize, ResizeMode,
    ScatterReduction,
};
use concord_core::{DType, Graph, Op, Tensor};
use concord_onnx::proto::tensor_proto::DataType;
use concord_onnx::proto::{NodeProto, OperatorSetIdProto, ValueInfoProto};
use concord_onnx::{load, save, Error};

/// What one input of a read node must be.
#[derive(Clone, Debug)]
enum In {
    /// A value of the model, by name.
    Named(&'static str),
    /// An initializer the reader made, with this value.
    Made(Tensor),
    /// Omitted.
    Absent,
}

/// A node as the reader must produce it.
struct Expected {
    op: Op,
    inputs: Vec<In>,
}

/// One case: an older-opset node over f32 inputs `x` (and any others), and the nodes it
/// must read as.
struct Case {
    opset: i64,
    node: NodeProto,
    inputs: Vec<ValueInfoProto>,
    expected: Vec<Expected>,
}

fn expect(op: Op, inputs: Vec<In>) -> Expected {
    Expected { op, inputs }
}

fn i64s(v: &[i64]) -> In {
    In::Made(Tensor::vec_i64(v.to_vec()))
}

fn scalar(v: f32) -> In {
    In::Made(Tensor::scalar_f32(v))
}

fn x(dims: &[i64]) -> Vec<ValueInfoProto> {
    vec![f32_value("x", dims)]
}

fn one(
    op_type: &str,
    inputs: &[&str],
    attrs: Vec<concord_onnx::proto::AttributeProto>,
) -> NodeProto {
    node(op_type, "n", inputs, &["y"], attrs)
}

/// Loads a model of `nodes` whose one graph output is `y`.
fn read(opset: i64, nodes: Vec<NodeProto>, inputs: Vec<ValueInfoProto>) -> Result<Graph, Error> {
    load(&bytes(&model(
        opset,
        graph(nodes, inputs, vec![output("y")], vec![]),
    )))
}

/// Reads the case and checks every node's op and inputs, and that the graph says opset 13.
#[track_caller]
fn check(case: Case) {
    let what = format!("{} at opset {}", case.node.op_type, case.opset);
    let g = match read(case.opset, vec![case.node], case.inputs) {
        Ok(g) => g,
        Err(e) => panic!("{what}: {e}"),
    };
    assert_eq!(g.opset, 13, "{what}: the normalised graph says opset 13");
    let ops: Vec<&Op> = g.nodes.iter().map(|n| &n.op).collect();
    let want: Vec<&Op> = case.expected.iter().map(|e| &e.op).collect();
    assert_eq!(ops, want, "{what}");
    for (node, expected) in g.nodes.iter().zip(&case.expected) {
        assert_eq!(
            node.inputs.len(),
            expected.inputs.len(),
            "{what}: inputs of {}: {:?}",
            node.name,
            node.inputs
        );
        for (i, (got, want)) in node.inputs.iter().zip(&expected.inputs).enumerate() {
            match (got, want) {
                (None, In::Absent) => {}
                (Some(got), In::Named(name)) => assert_eq!(got, name, "{what}: input {i}"),
                (Some(got), In::Made(tensor)) => {
                    assert_eq!(
                        g.initializers.get(got),
                        Some(tensor),
                        "{what}: input {i} (`{got}`)"
                    )
                }
                (got, want) => panic!("{what}: input {i} is {got:?}, expected {want:?}"),
            }
        }
    }
    // What was read from an old form writes back at opset 13 and reads the same again.
    let written = match save(&g) {
        Ok(b) => b,
        Err(e) => panic!("{what}: cannot write the normalised graph: {e}"),
    };
    let again = match load(&written) {
        Ok(g) => g,
        Err(e) => panic!("{what}: cannot reread the written graph: {e}"),
    };
    assert_eq!(again.nodes.len(), g.nodes.len(), "{what}");
    for (a, b) in again.nodes.iter().zip(&g.nodes) {
        if let (Op::Reduce(ReduceKind::Sum, r), Op::Reduce(ReduceKind::Sum, _)) = (&a.op, &b.op) {
            // At opset 13 ReduceSum's axes are written as input 1.
            assert_eq!(r.axes, None, "{what}");
            assert_eq!(a.inputs.len(), 2, "{what}: axes as input 1");
        } else {
            assert_eq!(a.op, b.op, "{what}: {} after a save", b.name);
        }
    }
}

fn asymmetric(mode: ResizeMode, nearest_mode: NearestMode) -> Op {
    Op::Resize(Resize {
        mode,
        coordinate_transformation_mode: CoordinateTransform::Asymmetric,
        nearest_mode,
        ..Resize::default()
    })
}

fn cases() -> Vec<Case> {
    use In::{Absent, Named};
    let xx = || Named("x");
    vec![
        Case {
            opset: 9,
            node: one(
                "Slice",
                &["x"],
                vec![
                    attr_ints("starts", &[0, 1]),
                    attr_ints("ends", &[1, 3]),
                    attr_ints("axes", &[0, 1]),
                ],
            ),
            inputs: x(&[2, 4]),
            expected: vec![expect(
                Op::Slice,
                vec![xx(), i64s(&[0, 1]), i64s(&[1, 3]), i64s(&[0, 1])],
            )],
        },
        Case {
            opset: 7,
            node: one(
                "Slice",
                &["x"],
                vec![attr_ints("starts", &[1]), attr_ints("ends", &[i64::MAX])],
            ),
            inputs: x(&[4]),
            expected: vec![expect(Op::Slice, vec![xx(), i64s(&[1]), i64s(&[i64::MAX])])],
        },
        Case {
            opset: 10,
            node: one(
                "Pad",
                &["x"],
                vec![attr_ints("pads", &[0, 1, 0, 2]), attr_float("value", 1.5)],
            ),
            inputs: x(&[2, 2]),
            expected: vec![expect(
                Op::Pad {
                    mode: PadMode::Constant,
                },
                vec![xx(), i64s(&[0, 1, 0, 2]), scalar(1.5)],
            )],
        },
        Case {
            opset: 8,
            node: one(
                "Pad",
                &["x"],
                vec![attr_ints("pads", &[1, 1]), attr_string("mode", "edge")],
            ),
            inputs: x(&[3]),
            expected: vec![expect(
                Op::Pad {
                    mode: PadMode::Edge,
                },
                vec![xx(), i64s(&[1, 1])],
            )],
        },
        Case {
            opset: 10,
            node: one(
                "Clip",
                &["x"],
                vec![attr_float("min", 0.0), attr_float("max", 6.0)],
            ),
            inputs: x(&[4]),
            expected: vec![expect(Op::Clip, vec![xx(), scalar(0.0), scalar(6.0)])],
        },
        Case {
            opset: 7,
            node: one("Clip", &["x"], vec![attr_float("max", 6.0)]),
            inputs: x(&[4]),
            expected: vec![expect(Op::Clip, vec![xx(), Absent, scalar(6.0)])],
        },
        Case {
            opset: 11,
            node: one("Squeeze", &["x"], vec![attr_ints("axes", &[0])]),
            inputs: x(&[1, 4]),
            expected: vec![expect(Op::Squeeze, vec![xx(), i64s(&[0])])],
        },
        Case {
            opset: 9,
            node: one("Squeeze", &["x"], vec![]),
            inputs: x(&[1, 4]),
            expected: vec![expect(Op::Squeeze, vec![xx()])],
        },
        Case {
            opset: 12,
            node: one("Unsqueeze", &["x"], vec![attr_ints("axes", &[0, 2])]),
            inputs: x(&[3]),
            expected: vec![expect(Op::Unsqueeze, vec![xx(), i64s(&[0, 2])])],
        },
        Case {
            opset: 12,
            node: node(
                "Split",
                "n",
                &["x"],
                &["a", "y"],
                vec![attr_int("axis", 1), attr_ints("split", &[1, 3])],
            ),
            inputs: x(&[2, 4]),
            expected: vec![expect(
                Op::Split {
                    axis: 1,
                    num_outputs: 2,
                },
                vec![xx(), i64s(&[1, 3])],
            )],
        },
        Case {
            opset: 11,
            node: node(
                "Dropout",
                "n",
                &["x"],
                &["y", "mask"],
                vec![attr_float("ratio", 0.25)],
            ),
            inputs: x(&[4]),
            expected: vec![expect(Op::Dropout, vec![xx(), scalar(0.25)])],
        },
        Case {
            opset: 7,
            node: one("Dropout", &["x"], vec![]),
            inputs: x(&[4]),
            expected: vec![expect(Op::Dropout, vec![xx()])],
        },
        Case {
            opset: 7,
            node: one(
                "BatchNormalization",
                &["x", "s", "b", "m", "v"],
                vec![attr_int("spatial", 1), attr_float("epsilon", 1e-3)],
            ),
            inputs: vec![
                f32_value("x", &[1, 2, 2, 2]),
                f32_value("s", &[2]),
                f32_value("b", &[2]),
                f32_value("m", &[2]),
                f32_value("v", &[2]),
            ],
            expected: vec![expect(
                Op::BatchNormalization { epsilon: 1e-3 },
                ["x", "s", "b", "m", "v"].map(Named).to_vec(),
            )],
        },
        Case {
            // The axis is the last one of a known rank: one opset-13 Softmax.
            opset: 11,
            node: one("Softmax", &["x"], vec![attr_int("axis", 2)]),
            inputs: x(&[2, 3, 4]),
            expected: vec![expect(Op::Softmax { axis: -1 }, vec![xx()])],
        },
        Case {
            opset: 12,
            node: one("Softmax", &["x"], vec![attr_int("axis", -1)]),
            inputs: x(&[2, 3, 4]),
            expected: vec![expect(Op::Softmax { axis: -1 }, vec![xx()])],
        },
        Case {
            opset: 7,
            node: one(
                "Upsample",
                &["x"],
                vec![attr_floats("scales", &[1.0, 1.0, 2.0, 3.0])],
            ),
            inputs: x(&[1, 1, 2, 2]),
            expected: vec![expect(
                asymmetric(ResizeMode::Nearest, NearestMode::Floor),
                vec![xx(), Absent, In::Made(f32s(&[4], &[1.0, 1.0, 2.0, 3.0]))],
            )],
        },
        Case {
            opset: 9,
            node: one(
                "Upsample",
                &["x", "scales"],
                vec![attr_string("mode", "linear")],
            ),
            inputs: vec![f32_value("x", &[1, 1, 2, 2]), f32_value("scales", &[4])],
            expected: vec![expect(
                asymmetric(ResizeMode::Linear, Resize::default().nearest_mode),
                vec![xx(), Absent, Named("scales")],
            )],
        },
        Case {
            opset: 10,
            node: one("Resize", &["x", "scales"], vec![]),
            inputs: vec![f32_value("x", &[1, 1, 2, 2]), f32_value("scales", &[4])],
            expected: vec![expect(
                asymmetric(ResizeMode::Nearest, NearestMode::Floor),
                vec![xx(), Absent, Named("scales")],
            )],
        },
        Case {
            // Opset 11's form (roi and scales required) is the opset-13 form.
            opset: 11,
            node: one(
                "Resize",
                &["x", "roi", "scales"],
                vec![attr_string("mode", "linear")],
            ),
            inputs: vec![
                f32_value("x", &[1, 1, 2, 2]),
                f32_value("roi", &[0]),
                f32_value("scales", &[4]),
            ],
            expected: vec![expect(
                Op::Resize(Resize {
                    mode: ResizeMode::Linear,
                    ..Resize::default()
                }),
                vec![xx(), Named("roi"), Named("scales")],
            )],
        },
        Case {
            // ReduceSum's axes attribute (before 13) stays the IR's attribute form.
            opset: 11,
            node: one(
                "ReduceSum",
                &["x"],
                vec![attr_ints("axes", &[1]), attr_int("keepdims", 0)],
            ),
            inputs: x(&[2, 3]),
            expected: vec![expect(
                Op::Reduce(
                    ReduceKind::Sum,
                    Reduce {
                        axes: Some(vec![1]),
                        keepdims: false,
                        noop_with_empty_axes: false,
                    },
                ),
                vec![xx()],
            )],
        },
        Case {
            // Scatter (opsets 9 and 10) is ScatterElements: same inputs, same axis.
            opset: 9,
            node: one("Scatter", &["x", "i", "u"], vec![attr_int("axis", 1)]),
            inputs: scatter_inputs(),
            expected: vec![expect(
                Op::ScatterElements {
                    axis: 1,
                    reduction: ScatterReduction::None,
                },
                vec![xx(), Named("i"), Named("u")],
            )],
        },
        Case {
            opset: 10,
            node: one("Scatter", &["x", "i", "u"], vec![]),
            inputs: scatter_inputs(),
            expected: vec![expect(
                Op::ScatterElements {
                    axis: 0,
                    reduction: ScatterReduction::None,
                },
                vec![xx(), Named("i"), Named("u")],
            )],
        },
    ]
}

/// data (1, 5) f32, indices (1, 2) i64, updates (1, 2) f32, as test_scatter_with_axis.
fn scatter_inputs() -> Vec<ValueInfoProto> {
    vec![
        f32_value("x", &[1, 5]),
        value("i", DataType::Int64, &[D::V(1), D::V(2)]),
        f32_value("u", &[1, 2]),
    ]
}

#[test]
fn older_forms_read_as_the_opset_13_form() {
    let cases = cases();
    assert!(cases.len() > 15);
    for case in cases {
        check(case);
    }
}

#[test]
fn softmax_before_13_coerces_to_2d_at_axis() {
    // Default axis 1 on a rank-3 input: Shape, Flatten(1), Softmax(-1), Reshape.
    let g = match read(
        11,
        vec![node("Softmax", "sm", &["x"], &["y"], vec![])],
        x(&[2, 3, 4]),
    ) {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    let summary: Vec<(&str, &Op)> = g.nodes.iter().map(|n| (n.name.as_str(), &n.op)).collect();
    assert_eq!(
        summary,
        vec![
            (
                "sm_shape",
                &Op::Shape {
                    start: 0,
                    end: None
                }
            ),
            ("sm_flatten", &Op::Flatten { axis: 1 }),
            ("sm", &Op::Softmax { axis: -1 }),
            ("sm_reshape", &Op::Reshape { allowzero: false }),
        ]
    );
    let [shape, flatten, softmax, reshape] = g.nodes.as_slice() else {
        panic!("four nodes");
    };
    assert_eq!(shape.inputs, vec![Some("x".to_string())]);
    assert_eq!(flatten.inputs, vec![Some("x".to_string())]);
    assert_eq!(softmax.inputs, vec![Some(flatten.outputs[0].clone())]);
    assert_eq!(
        reshape.inputs,
        vec![
            Some(softmax.outputs[0].clone()),
            Some(shape.outputs[0].clone())
        ]
    );
    assert_eq!(reshape.outputs, vec!["y".to_string()]);
    // The Reshape's shape is Shape(x), a value only folding (at net build) fixes; inference
    // at load knows the rank.
    assert_eq!(g.values.get("y").map(|v| v.shape.len()), Some(3));
}

#[test]
fn made_names_do_not_collide() {
    // `n_starts` is already a graph input and `sm_shape` a node name.
    let nodes = vec![
        node("Relu", "sm_shape", &["n_starts"], &["r"], vec![]),
        node(
            "Slice",
            "n",
            &["r"],
            &["s"],
            vec![attr_ints("starts", &[0]), attr_ints("ends", &[1])],
        ),
        node("Softmax", "sm", &["s"], &["y"], vec![attr_int("axis", 0)]),
    ];
    let g = match read(9, nodes, vec![f32_value("n_starts", &[3])]) {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    let slice = g.nodes.iter().find(|n| n.name == "n");
    let starts = slice.and_then(|n| n.inputs.get(1).cloned().flatten());
    assert_eq!(starts.as_deref(), Some("n_starts_1"));
    let names: std::collections::BTreeSet<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names.len(),
        g.nodes.len(),
        "node names are unique: {names:?}"
    );
    assert!(names.contains("sm_shape_1"), "{names:?}");
}

#[test]
fn clip_and_pad_bounds_take_the_dtype_of_f16_data() {
    let nodes = vec![
        node("Cast", "half", &["x"], &["h"], vec![attr_int("to", 10)]),
        node(
            "Clip",
            "clip",
            &["h"],
            &["c"],
            vec![attr_float("min", 0.0), attr_float("max", 6.0)],
        ),
        node(
            "Pad",
            "pad",
            &["c"],
            &["p"],
            vec![attr_ints("pads", &[1, 1]), attr_float("value", 2.0)],
        ),
        node("Cast", "back", &["p"], &["y"], vec![attr_int("to", 1)]),
    ];
    let g = match read(10, nodes, x(&[4])) {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    for name in ["clip_min", "clip_max", "pad_value"] {
        assert_eq!(
            g.initializers.get(name).map(Tensor::dtype),
            Some(DType::F16),
            "{name}"
        );
    }
    assert_eq!(
        g.initializers.get("pad_pads"),
        Some(&Tensor::vec_i64(vec![1, 1]))
    );
}

#[test]
fn opsets_7_to_28_read_and_13_to_28_write() {
    assert_eq!(concord_onnx::opset_range(), 7..=28);
    assert_eq!(concord_onnx::write_opset_range(), 13..=28);
    for opset in 7..=28 {
        let g = match load(&bytes(&relu_model(opset))) {
            Ok(g) => g,
            Err(e) => panic!("opset {opset}: {e}"),
        };
        assert_eq!(g.opset, opset.max(13));
    }
    let mut g = match load(&bytes(&relu_model(9))) {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    g.opset = 9;
    expect_err(
        save(&g),
        |e| matches!(e, Error::WriteOpsetTooOld { version: 9, .. }),
        &["opset 9", "13 to 28"],
    );
}

/// One refused older form: opset, node, the error's attribute and words its message holds.
fn legacy_err(
    opset: i64,
    node: NodeProto,
    inputs: Vec<ValueInfoProto>,
    attribute: &str,
    needles: &[&str],
) {
    let op = node.op_type.clone();
    expect_err(
        read(opset, vec![node], inputs),
        |e| {
            matches!(e, Error::LegacyForm { node, op: o, opset: v, attribute: a, .. }
                if node == "n" && *o == op && *v == opset && a.contains(attribute))
        },
        needles,
    );
}

#[test]
fn forms_with_no_equivalent_are_refused_by_name() {
    let xy = || vec![f32_value("x", &[2, 2]), f32_value("b", &[2])];
    // Opset 6 and older: explicit broadcasting, consumed_inputs, is_test.
    legacy_err(
        7,
        one(
            "Add",
            &["x", "b"],
            vec![attr_int("broadcast", 1), attr_int("axis", 1)],
        ),
        xy(),
        "broadcast",
        &["opset 6 and older", "7 to 28", "multidirectionally"],
    );
    legacy_err(
        13,
        one("Mul", &["x", "b"], vec![attr_int("axis", 0)]),
        xy(),
        "axis",
        &["broadcast"],
    );
    legacy_err(
        7,
        one("Relu", &["x"], vec![attr_ints("consumed_inputs", &[0])]),
        x(&[2]),
        "consumed_inputs",
        &["opset 5 and older"],
    );
    legacy_err(
        7,
        one("Dropout", &["x"], vec![attr_int("is_test", 1)]),
        x(&[2]),
        "is_test",
        &["opset 6 and older"],
    );
    legacy_err(
        8,
        one(
            "BatchNormalization",
            &["x", "b", "b", "b", "b"],
            vec![attr_int("spatial", 0)],
        ),
        xy(),
        "spatial",
        &["spatial = 1"],
    );
    legacy_err(
        10,
        one("Upsample", &["x", "b"], vec![]),
        xy(),
        "the op",
        &["deprecated", "Resize"],
    );
    legacy_err(
        11,
        one("Scatter", &["x", "i", "u"], vec![]),
        scatter_inputs(),
        "the op",
        &["deprecated", "ScatterElements"],
    );
    legacy_err(
        11,
        one(
            "Resize",
            &["x", "b", "b"],
            vec![attr_string(
                "coordinate_transformation_mode",
                "tf_half_pixel_for_nn",
            )],
        ),
        xy(),
        "coordinate_transformation_mode",
        &["tf_half_pixel_for_nn"],
    );
    legacy_err(
        9,
        one("Slice", &["x", "b", "b"], vec![]),
        xy(),
        "input 1",
        &["starts, ends, axes as attributes"],
    );
    legacy_err(
        10,
        one("Resize", &["x", "b", "b"], vec![]),
        xy(),
        "inputs",
        &["X and scales"],
    );
}

#[test]
fn attributes_newer_than_the_model_are_refused() {
    let cases = [
        (9, "MaxPool", "ceil_mode", 10),
        (7, "MaxPool", "storage_order", 8),
        (9, "AveragePool", "ceil_mode", 10),
        (11, "ArgMax", "select_last_index", 12),
        (12, "ReduceSum", "noop_with_empty_axes", 13),
        (12, "ReduceMean", "noop_with_empty_axes", 18),
    ];
    for (opset, op, attribute, since) in cases {
        let mut attributes = vec![attr_int(attribute, 1)];
        if op.ends_with("Pool") {
            attributes.push(attr_ints("kernel_shape", &[1]));
        }
        legacy_err(
            opset,
            one(op, &["x"], attributes),
            x(&[1, 1, 4]),
            attribute,
            &[&format!("from opset {since}"), &format!("at opset {opset}")],
        );
    }
    // At the opset that added it, the attribute reads.
    let ok = read(
        10,
        vec![one(
            "MaxPool",
            &["x"],
            vec![attr_int("ceil_mode", 1), attr_ints("kernel_shape", &[2])],
        )],
        x(&[1, 1, 5]),
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn older_forms_check_their_attributes() {
    expect_err(
        read(11, vec![one("Unsqueeze", &["x"], vec![])], x(&[2])),
        |e| matches!(e, Error::MissingAttribute { attribute, .. } if attribute == "axes"),
        &["Unsqueeze", "axes"],
    );
    expect_err(
        read(
            7,
            vec![one(
                "Upsample",
                &["x"],
                vec![
                    attr_floats("scales", &[1.0, 2.0]),
                    attr_string("mode", "cubic"),
                ],
            )],
            x(&[2, 2]),
        ),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "mode"),
        &["cubic", "nearest, linear"],
    );
    // An attribute Upsample does not have is refused, not dropped in the rewrite.
    expect_err(
        read(
            8,
            vec![one(
                "Upsample",
                &["x"],
                vec![
                    attr_floats("scales", &[1.0, 2.0]),
                    attr_float("height_scale", 2.0),
                ],
            )],
            x(&[2, 2]),
        ),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "height_scale"),
        &["Upsample"],
    );
    // Scatter has no reduction (ScatterElements gained one at opset 16): refused, not
    // carried into the rewrite.
    expect_err(
        read(
            10,
            vec![one(
                "Scatter",
                &["x", "i", "u"],
                vec![attr_string("reduction", "add")],
            )],
            scatter_inputs(),
        ),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "reduction"),
        &["Scatter"],
    );
}

#[test]
fn ops_newer_than_the_model_are_unknown_at_its_opset() {
    for (opset, op) in [
        (8, "Erf"),
        (8, "Where"),
        (7, "Expand"),
        (9, "Mod"),
        (9, "Resize"),
        (12, "HardSwish"),
        (8, "Scatter"),
    ] {
        let inputs: &[&str] = match op {
            "Where" | "Scatter" => &["c", "x", "x"],
            "Expand" | "Mod" | "Resize" => &["x", "x"],
            _ => &["x"],
        };
        expect_err(
            read(opset, vec![one(op, inputs, vec![])], x(&[2])),
            |e| matches!(e, Error::UnknownOp { op: o, opset: v, .. } if o == op && *v == opset),
            &[op, &format!("opset {opset}")],
        );
    }
}

#[test]
fn nodes_of_other_domains_name_the_domain() {
    let mut n = one("LinearClassifier", &["x"], vec![]);
    n.domain = "ai.onnx.ml".to_string();
    let mut m = model(9, graph(vec![n], x(&[2]), vec![output("y")], vec![]));
    m.opset_import.push(OperatorSetIdProto {
        domain: "ai.onnx.ml".to_string(),
        version: 3,
    });
    expect_err(
        load(&bytes(&m)),
        |e| {
            matches!(e, Error::UnsupportedDomain { domain, node, op, imported: Some(3) }
                if domain == "ai.onnx.ml" && node == "n" && op == "LinearClassifier")
        },
        &[
            "ai.onnx.ml",
            "`n`",
            "LinearClassifier",
            "version 3",
            "7 to 28",
        ],
    );
    // A model of ai.onnx.ml nodes only imports no default opset: the domain is named.
    let mut n = one("Binarizer", &["x"], vec![]);
    n.domain = "ai.onnx.ml".to_string();
    let mut m = model(9, graph(vec![n], x(&[2]), vec![output("y")], vec![]));
    m.opset_import = vec![OperatorSetIdProto {
        domain: "ai.onnx.ml".to_string(),
        version: 1,
    }];
    expect_err(
        load(&bytes(&m)),
        |e| {
            matches!(
                e,
                Error::UnsupportedDomain {
                    imported: Some(1),
                    ..
                }
            )
        },
        &["ai.onnx.ml", "Binarizer", "`n`"],
    );
    // An unused import of another domain is no obstacle.
    let mut m = relu_model(11);
    m.opset_import.push(OperatorSetIdProto {
        domain: "com.microsoft".to_string(),
        version: 1,
    });
    assert!(load(&bytes(&m)).is_ok());
}

/// A Scan-8 model: batch 2, one state `s` of [2] per element, one scan input `x` of
/// [3, 2] per element scanned in reverse (`directions` = [1]); the body adds each slice to
/// the state and scales the scan output by `k`, a graph input the body captures.
fn scan_8_model(scan_inputs: &[&str], extra: Vec<concord_onnx::proto::AttributeProto>) -> Vec<u8> {
    let body = graph(
        vec![
            node("Add", "add", &["sum_in", "next"], &["sum_out"], vec![]),
            node("Mul", "scale", &["sum_out", "k"], &["scan_out"], vec![]),
        ],
        vec![f32_value("sum_in", &[2]), f32_value("next", &[2])],
        vec![output("sum_out"), output("scan_out")],
        vec![],
    );
    let mut attributes = vec![
        attr_graph("body", body),
        attr_int("num_scan_inputs", 1),
        attr_ints("directions", &[1]),
    ];
    attributes.extend(extra);
    let scan = node("Scan", "n", scan_inputs, &["y", "z"], attributes);
    bytes(&model(
        8,
        graph(
            vec![scan],
            vec![
                f32_value("initial", &[2, 2]),
                f32_value("x", &[2, 3, 2]),
                f32_value("k", &[2]),
                value(
                    "lens",
                    concord_onnx::proto::tensor_proto::DataType::Int64,
                    &[D::V(2)],
                ),
            ],
            vec![output("y"), output("z")],
            vec![],
        ),
    ))
}

#[test]
fn scan_8_is_a_scan_over_the_batch_of_per_element_scans() {
    let g = match load(&scan_8_model(&["", "initial", "x"], vec![])) {
        Ok(g) => g,
        Err(e) => panic!("Scan-8 without sequence_lens reads: {e}"),
    };
    // The structure: an outer Scan over both operands' batch axis (no states), capturing k;
    // its body runs the per-element Scan with Scan-8's directions.
    let [scan] = g.nodes.as_slice() else {
        panic!("one node expected, got {:?}", g.nodes);
    };
    let Op::Scan {
        body,
        num_scan_inputs: 2,
        captures: 1,
        scan_input_directions: outer_directions,
        ..
    } = &scan.op
    else {
        panic!(
            "an outer Scan of 2 scan inputs and 1 capture expected, got {:?}",
            scan.op
        );
    };
    assert!(outer_directions.is_empty());
    let [inner] = body.nodes.as_slice() else {
        panic!("the outer body holds one node, got {:?}", body.nodes);
    };
    assert!(
        matches!(&inner.op, Op::Scan { num_scan_inputs: 1, captures: 1, scan_input_directions, .. }
            if scan_input_directions == &[true]),
        "{:?}",
        inner.op
    );
    // The values, worked out by hand. Element 0: state 0, slices [5, 6], [3, 4], [1, 2]
    // (reversed) give sums [5, 6], [8, 10], [9, 12]; element 1: state 10, slices [3, 3],
    // [2, 2], [1, 1] give [13, 13], [15, 15], [16, 16]. Scan outputs are the sums times
    // k = [1, −1], stacked in iteration order; y is the last sum.
    let inputs = std::collections::BTreeMap::from([
        ("initial".to_string(), f32s(&[2, 2], &[0., 0., 10., 10.])),
        (
            "x".to_string(),
            f32s(
                &[2, 3, 2],
                &[1., 2., 3., 4., 5., 6., 1., 1., 2., 2., 3., 3.],
            ),
        ),
        ("k".to_string(), f32s(&[2], &[1., -1.])),
    ]);
    let want_y = f32s(&[2, 2], &[9., 12., 16., 16.]);
    let want_z = f32s(
        &[2, 3, 2],
        &[5., -6., 8., -10., 9., -12., 13., -13., 15., -15., 16., -16.],
    );
    let run = |g: &Graph| match concord_cpu::ReferenceExecutor::new().run(g, &inputs) {
        Ok(outputs) => outputs,
        Err(e) => panic!("the read Scan-8 runs: {e}"),
    };
    let outputs = run(&g);
    assert_eq!(
        outputs,
        vec![
            ("y".to_string(), want_y.clone()),
            ("z".to_string(), want_z.clone())
        ]
    );
    // Written at opset 13 and read back, it is the same nested Scan and computes the same.
    let again = match save(&g).and_then(|b| load(&b)) {
        Ok(g) => g,
        Err(e) => panic!("the nested Scan writes and rereads: {e}"),
    };
    assert_eq!(
        run(&again),
        vec![("y".to_string(), want_y), ("z".to_string(), want_z)]
    );
}

#[test]
fn scan_8_with_sequence_lens_or_opset_9_attributes_is_refused() {
    expect_err(
        load(&scan_8_model(&["lens", "initial", "x"], vec![])),
        |e| {
            matches!(e, Error::LegacyForm { node, op, opset: 8, attribute, .. }
                if node == "n" && op == "Scan" && attribute.contains("sequence_lens"))
        },
        &["each batch element its own sequence length"],
    );
    expect_err(
        load(&scan_8_model(
            &["", "initial", "x"],
            vec![attr_ints("scan_input_axes", &[1])],
        )),
        |e| {
            matches!(e, Error::LegacyForm { opset: 8, attribute, .. }
                if attribute.contains("scan_input_axes"))
        },
        &["from opset 9"],
    );
}
