//! Builders for hand-made ONNX models, shared by the integration tests.

#![allow(dead_code, clippy::panic)]

use concord_onnx::proto::tensor_proto::DataType;
use concord_onnx::proto::tensor_shape_proto::{dimension, Dimension};
use concord_onnx::proto::type_proto::{self, Value as TypeValue};
use concord_onnx::proto::{
    AttributeProto, AttributeType, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use prost::Message;

/// A model importing the default domain at `opset`.
pub fn model(opset: i64, graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        producer_name: "concord-onnx tests".to_string(),
        graph: Some(graph),
        ..ModelProto::default()
    }
}

pub fn bytes(model: &ModelProto) -> Vec<u8> {
    model.encode_to_vec()
}

/// A graph from nodes, inputs, outputs and initializers.
pub fn graph(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    initializers: Vec<TensorProto>,
) -> GraphProto {
    GraphProto {
        node: nodes,
        name: "test".to_string(),
        initializer: initializers,
        input: inputs,
        output: outputs,
        ..GraphProto::default()
    }
}

pub fn node(
    op_type: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attributes: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: name.to_string(),
        op_type: op_type.to_string(),
        attribute: attributes,
        ..NodeProto::default()
    }
}

/// One dim of a value info: `Some(n)` fixed, a name, or unknown.
#[derive(Clone, Debug)]
pub enum D {
    V(i64),
    P(&'static str),
    Unknown,
}

/// A tensor value info with the given ONNX element type and dims.
pub fn value(name: &str, elem_type: DataType, dims: &[D]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: match d {
                D::V(v) => Some(dimension::Value::DimValue(*v)),
                D::P(p) => Some(dimension::Value::DimParam(p.to_string())),
                D::Unknown => None,
            },
            ..Dimension::default()
        })
        .collect();
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(type_proto::Tensor {
                elem_type: elem_type as i32,
                shape: Some(TensorShapeProto { dim }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// A float32 value info with fixed dims.
pub fn f32_value(name: &str, dims: &[i64]) -> ValueInfoProto {
    let dims: Vec<D> = dims.iter().map(|&d| D::V(d)).collect();
    value(name, DataType::Float, &dims)
}

/// A graph output named only, as the reader does not need its type.
pub fn output(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.to_string(),
        ..ValueInfoProto::default()
    }
}

pub fn float_tensor(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        name: name.to_string(),
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..TensorProto::default()
    }
}

pub fn i64_tensor(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: DataType::Int64 as i32,
        name: name.to_string(),
        int64_data: values.to_vec(),
        ..TensorProto::default()
    }
}

pub fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Int as i32,
        i: Some(v),
        ..AttributeProto::default()
    }
}

pub fn attr_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Float as i32,
        f: v,
        ..AttributeProto::default()
    }
}

pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..AttributeProto::default()
    }
}

/// A GRAPH attribute (a control-flow node's subgraph).
pub fn attr_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Graph as i32,
        g: Some(Box::new(g)),
        ..AttributeProto::default()
    }
}

pub fn attr_floats(name: &str, v: &[f32]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Floats as i32,
        floats: v.to_vec(),
        ..AttributeProto::default()
    }
}

pub fn attr_string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..AttributeProto::default()
    }
}

pub fn attr_strings(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Strings as i32,
        strings: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..AttributeProto::default()
    }
}

pub fn attr_tensor(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Tensor as i32,
        t: Some(t),
        ..AttributeProto::default()
    }
}

/// x: f32[1, 4] → Relu → y, the smallest valid model.
pub fn relu_model(opset: i64) -> ModelProto {
    model(
        opset,
        graph(
            vec![node("Relu", "relu", &["x"], &["y"], vec![])],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    )
}

/// A core f32 tensor; panics on a test's own bad dims.
pub fn f32s(dims: &[usize], values: &[f32]) -> concord_core::Tensor {
    match concord_core::Tensor::from_f32(dims.to_vec(), values.to_vec()) {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

/// Asserts that `result` is an error satisfying `pred` whose message contains every needle.
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(
    result: Result<T, concord_onnx::Error>,
    pred: impl Fn(&concord_onnx::Error) -> bool,
    needles: &[&str],
) {
    match result {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => {
            assert!(pred(&e), "unexpected error variant: {e:?}");
            let message = e.to_string();
            for needle in needles {
                assert!(
                    message.contains(needle),
                    "message `{message}` does not mention `{needle}`"
                );
            }
        }
    }
}
