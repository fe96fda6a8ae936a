//! Models of opsets 7 to 12 compute on the reference what their opset-13 forms compute:
//! each case is an older-opset model and the same function written at opset 13 (or the
//! expected values, where opset 13 has no single-node form), run through `Net`.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord::{Net, Tensor};
use concord_onnx::attrs;
use concord_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use concord_onnx::proto::type_proto::{self, Value as TypeValue};
use concord_onnx::proto::{
    AttributeProto, AttributeType, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use concord_onnx::tensor_to_proto;
use prost::Message;

/// A one-node model: input `x` of `dims`, outputs `outputs`, and initializers.
fn model(
    opset: i64,
    op_type: &str,
    inputs: &[&str],
    outputs: &[&str],
    attributes: Vec<AttributeProto>,
    dims: &[usize],
    initializers: Vec<TensorProto>,
) -> Vec<u8> {
    let node = NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: "n".to_string(),
        op_type: op_type.to_string(),
        attribute: attributes,
        ..NodeProto::default()
    };
    chain(opset, vec![node], dims, outputs, initializers)
}

/// A model of several nodes reading `x` (f32 of `dims`).
fn chain(
    opset: i64,
    nodes: Vec<NodeProto>,
    dims: &[usize],
    outputs: &[&str],
    initializers: Vec<TensorProto>,
) -> Vec<u8> {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            value: Some(dimension::Value::DimValue(d as i64)),
            ..Dimension::default()
        })
        .collect();
    let x = ValueInfoProto {
        name: "x".to_string(),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(type_proto::Tensor {
                elem_type: 1,
                shape: Some(TensorShapeProto { dim }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    };
    ModelProto {
        ir_version: 7,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        graph: Some(GraphProto {
            node: nodes,
            name: "legacy".to_string(),
            initializer: initializers,
            input: vec![x],
            output: outputs
                .iter()
                .map(|o| ValueInfoProto {
                    name: o.to_string(),
                    ..ValueInfoProto::default()
                })
                .collect(),
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    }
    .encode_to_vec()
}

fn node(
    op_type: &str,
    inputs: &[&str],
    output: &str,
    attributes: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        op_type: op_type.to_string(),
        attribute: attributes,
        ..NodeProto::default()
    }
}

fn floats(name: &str, values: &[f32]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Floats as i32,
        floats: values.to_vec(),
        ..AttributeProto::default()
    }
}

fn f32s(dims: &[usize], values: &[f32]) -> Tensor {
    match Tensor::from_f32(dims.to_vec(), values.to_vec()) {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn init_i64(name: &str, v: &[i64]) -> TensorProto {
    tensor_to_proto(name, &Tensor::vec_i64(v.to_vec()))
}

fn init_f32(name: &str, dims: &[usize], v: &[f32]) -> TensorProto {
    tensor_to_proto(name, &f32s(dims, v))
}

/// x = 0.1·i − 1 for i in 0..n, so negative and positive values both occur.
fn ramp(dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.1 - 1.0).collect();
    f32s(dims, &values)
}

fn run(what: &str, model: &[u8], x: &Tensor) -> Vec<(String, Tensor)> {
    let net = match Net::from_onnx_bytes(model.to_vec()) {
        Ok(net) => net,
        Err(e) => panic!("{what}: cannot build: {e}"),
    };
    match net.forward([("x", x.clone())]) {
        Ok(out) => out.into_vec(),
        Err(e) => panic!("{what}: forward failed: {e}"),
    }
}

/// One case: the older model, its opset-13 equivalent, and the input's dims.
struct Case {
    name: &'static str,
    old: Vec<u8>,
    new: Vec<u8>,
    dims: Vec<usize>,
}

fn cases() -> Vec<Case> {
    let y = &["y"];
    vec![
        Case {
            name: "Slice-9 attributes",
            old: model(
                9,
                "Slice",
                &["x"],
                y,
                vec![
                    attrs::ints("starts", &[0, 1]),
                    attrs::ints("ends", &[2, i64::MAX]),
                    attrs::ints("axes", &[0, 1]),
                ],
                &[3, 4],
                vec![],
            ),
            new: model(
                13,
                "Slice",
                &["x", "s", "e", "a"],
                y,
                vec![],
                &[3, 4],
                vec![
                    init_i64("s", &[0, 1]),
                    init_i64("e", &[2, i64::MAX]),
                    init_i64("a", &[0, 1]),
                ],
            ),
            dims: vec![3, 4],
        },
        Case {
            name: "Pad-10 attributes",
            old: model(
                10,
                "Pad",
                &["x"],
                y,
                vec![
                    attrs::ints("pads", &[0, 1, 1, 0]),
                    attrs::float("value", 1.5),
                ],
                &[2, 3],
                vec![],
            ),
            new: model(
                13,
                "Pad",
                &["x", "p", "v"],
                y,
                vec![],
                &[2, 3],
                vec![init_i64("p", &[0, 1, 1, 0]), init_f32("v", &[], &[1.5])],
            ),
            dims: vec![2, 3],
        },
        Case {
            name: "Clip-10 attributes",
            old: model(
                10,
                "Clip",
                &["x"],
                y,
                vec![attrs::float("min", -0.5), attrs::float("max", 0.25)],
                &[12],
                vec![],
            ),
            new: model(
                13,
                "Clip",
                &["x", "lo", "hi"],
                y,
                vec![],
                &[12],
                vec![init_f32("lo", &[], &[-0.5]), init_f32("hi", &[], &[0.25])],
            ),
            dims: vec![12],
        },
        Case {
            name: "Squeeze-11 axes",
            old: model(
                11,
                "Squeeze",
                &["x"],
                y,
                vec![attrs::ints("axes", &[0])],
                &[1, 4],
                vec![],
            ),
            new: model(
                13,
                "Squeeze",
                &["x", "a"],
                y,
                vec![],
                &[1, 4],
                vec![init_i64("a", &[0])],
            ),
            dims: vec![1, 4],
        },
        Case {
            name: "Unsqueeze-11 axes",
            old: model(
                11,
                "Unsqueeze",
                &["x"],
                y,
                vec![attrs::ints("axes", &[1])],
                &[4],
                vec![],
            ),
            new: model(
                13,
                "Unsqueeze",
                &["x", "a"],
                y,
                vec![],
                &[4],
                vec![init_i64("a", &[1])],
            ),
            dims: vec![4],
        },
        Case {
            name: "Split-11 split",
            old: model(
                11,
                "Split",
                &["x"],
                &["a", "b"],
                vec![attrs::int("axis", 1), attrs::ints("split", &[1, 3])],
                &[2, 4],
                vec![],
            ),
            new: model(
                13,
                "Split",
                &["x", "s"],
                &["a", "b"],
                vec![attrs::int("axis", 1)],
                &[2, 4],
                vec![init_i64("s", &[1, 3])],
            ),
            dims: vec![2, 4],
        },
        Case {
            name: "Dropout-7 ratio",
            old: model(
                7,
                "Dropout",
                &["x"],
                y,
                vec![attrs::float("ratio", 0.5)],
                &[5],
                vec![],
            ),
            new: model(13, "Identity", &["x"], y, vec![], &[5], vec![]),
            dims: vec![5],
        },
        Case {
            name: "BatchNormalization-7 spatial",
            old: model(
                7,
                "BatchNormalization",
                &["x", "s", "b", "m", "v"],
                y,
                vec![attrs::int("spatial", 1)],
                &[1, 2, 2, 2],
                bn_params(),
            ),
            new: model(
                13,
                "BatchNormalization",
                &["x", "s", "b", "m", "v"],
                y,
                vec![],
                &[1, 2, 2, 2],
                bn_params(),
            ),
            dims: vec![1, 2, 2, 2],
        },
        Case {
            name: "Softmax-11 at the last axis",
            old: model(
                11,
                "Softmax",
                &["x"],
                y,
                vec![attrs::int("axis", 2)],
                &[2, 3, 4],
                vec![],
            ),
            new: model(13, "Softmax", &["x"], y, vec![], &[2, 3, 4], vec![]),
            dims: vec![2, 3, 4],
        },
        Case {
            // Opset 13 writes the old coercion as the same three nodes onnx's version
            // converter inserts; the hand-computed values are checked separately below.
            name: "Softmax-12 at axis 1",
            old: model(12, "Softmax", &["x"], y, vec![], &[2, 3, 4], vec![]),
            new: chain(
                13,
                vec![
                    node("Shape", &["x"], "shape", vec![]),
                    node("Flatten", &["x"], "flat", vec![attrs::int("axis", 1)]),
                    node("Softmax", &["flat"], "soft", vec![]),
                    node("Reshape", &["soft", "shape"], "y", vec![]),
                ],
                &[2, 3, 4],
                y,
                vec![],
            ),
            dims: vec![2, 3, 4],
        },
        Case {
            name: "Upsample-7 nearest",
            old: model(
                7,
                "Upsample",
                &["x"],
                y,
                vec![floats("scales", &[1.0, 1.0, 2.0, 3.0])],
                &[1, 1, 2, 3],
                vec![],
            ),
            new: resize_13("nearest", &[1.0, 1.0, 2.0, 3.0], &[1, 1, 2, 3]),
            dims: vec![1, 1, 2, 3],
        },
        Case {
            name: "Upsample-9 linear",
            old: model(
                9,
                "Upsample",
                &["x", "sc"],
                y,
                vec![attrs::string("mode", "linear")],
                &[1, 1, 3, 3],
                vec![init_f32("sc", &[4], &[1.0, 1.0, 2.0, 1.5])],
            ),
            new: resize_13("linear", &[1.0, 1.0, 2.0, 1.5], &[1, 1, 3, 3]),
            dims: vec![1, 1, 3, 3],
        },
        Case {
            name: "Resize-10 nearest downsampling",
            old: model(
                10,
                "Resize",
                &["x", "sc"],
                y,
                vec![],
                &[1, 1, 4, 6],
                vec![init_f32("sc", &[4], &[1.0, 1.0, 0.5, 0.6])],
            ),
            new: resize_13("nearest", &[1.0, 1.0, 0.5, 0.6], &[1, 1, 4, 6]),
            dims: vec![1, 1, 4, 6],
        },
    ]
}

fn bn_params() -> Vec<TensorProto> {
    vec![
        init_f32("s", &[2], &[1.5, 0.5]),
        init_f32("b", &[2], &[0.1, -0.2]),
        init_f32("m", &[2], &[0.3, -0.1]),
        init_f32("v", &[2], &[0.8, 1.2]),
    ]
}

/// Resize at opset 13 with Upsample's mapping: asymmetric coordinates, floor for nearest.
fn resize_13(mode: &str, scales: &[f32], dims: &[usize]) -> Vec<u8> {
    let mut attributes = vec![
        attrs::string("mode", mode),
        attrs::string("coordinate_transformation_mode", "asymmetric"),
    ];
    if mode == "nearest" {
        attributes.push(attrs::string("nearest_mode", "floor"));
    }
    model(
        13,
        "Resize",
        &["x", "", "sc"],
        &["y"],
        attributes,
        dims,
        vec![init_f32("sc", &[scales.len()], scales)],
    )
}

#[test]
fn older_opsets_compute_what_their_opset_13_forms_compute() {
    let cases = cases();
    assert!(cases.len() >= 13);
    for case in cases {
        let x = ramp(&case.dims);
        let old = run(case.name, &case.old, &x);
        let new = run(case.name, &case.new, &x);
        assert_eq!(old.len(), new.len(), "{}", case.name);
        for ((name, a), (_, b)) in old.iter().zip(&new) {
            assert!(
                a.bit_identical(b),
                "{}: output {name} differs:\n old form {a:?}\n opset 13 {b:?}",
                case.name
            );
        }
    }
}

#[test]
fn softmax_before_13_normalises_rows_of_the_2d_coercion() {
    // Softmax-11 with the default axis 1 on [2, 3, 4]: each batch's 12 values form a row.
    let x = ramp(&[2, 3, 4]);
    let out = run(
        "Softmax-11",
        &model(11, "Softmax", &["x"], &["y"], vec![], &[2, 3, 4], vec![]),
        &x,
    );
    let [(_, y)] = out.as_slice() else {
        panic!("one output");
    };
    assert_eq!(y.dims(), &[2, 3, 4]);
    let xs = x.to_f64_vec();
    let ys = y.to_f64_vec();
    for (row_x, row_y) in xs.chunks(12).zip(ys.chunks(12)) {
        let max = row_x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row_x.iter().map(|v| (v - max).exp()).sum();
        for (xv, yv) in row_x.iter().zip(row_y) {
            let want = (xv - max).exp() / sum;
            assert!((want - yv).abs() < 1e-6, "softmax {yv}, expected {want}");
        }
    }
}

#[test]
fn upsample_nearest_repeats_each_value() {
    let x = f32s(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let out = run(
        "Upsample-7",
        &model(
            7,
            "Upsample",
            &["x"],
            &["y"],
            vec![floats("scales", &[1.0, 1.0, 2.0, 3.0])],
            &[1, 1, 2, 2],
            vec![],
        ),
        &x,
    );
    let expected = f32s(
        &[1, 1, 4, 6],
        &[
            1., 1., 1., 2., 2., 2., //
            1., 1., 1., 2., 2., 2., //
            3., 3., 3., 4., 4., 4., //
            3., 3., 3., 4., 4., 4.,
        ],
    );
    assert!(
        out.first().is_some_and(|(_, y)| y.bit_identical(&expected)),
        "{out:?}"
    );
}

#[test]
fn clip_10_bounds_follow_f16_data() {
    let nodes = vec![
        node("Cast", &["x"], "h", vec![attrs::int("to", 10)]),
        node(
            "Clip",
            &["h"],
            "c",
            vec![attrs::float("min", -0.5), attrs::float("max", 0.25)],
        ),
        node("Cast", &["c"], "y", vec![attrs::int("to", 1)]),
    ];
    let x = ramp(&[12]);
    let out = run(
        "Clip-10 on f16",
        &chain(10, nodes, &[12], &["y"], vec![]),
        &x,
    );
    let want: Vec<f64> = x
        .to_f64_vec()
        .iter()
        .map(|v| f64::from(npyz::half::f16::from_f64(*v).to_f32()).clamp(-0.5, 0.25))
        .collect();
    let got = out.first().map(|(_, y)| y.to_f64_vec());
    assert_eq!(got, Some(want));
}
