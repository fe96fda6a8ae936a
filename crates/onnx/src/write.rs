//! [`Graph`] → ModelProto.
//!
//! The model imports one opset, the default domain at `graph.opset`, with the IR version
//! that opset was released with (the oldest a runtime must accept). Initializers are
//! written as little-endian `raw_data` and are not repeated among the graph inputs.
//! Graph outputs carry their type from `graph.values`; when those are missing the writer
//! infers them on a copy, and writes an output with no type only when even that fails.

use crate::error::Error;
use crate::ops::write_op;
use crate::proto::tensor_shape_proto::{dimension, Dimension};
use crate::proto::type_proto::{self, Value as TypeValue};
use crate::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
};
use crate::tensor::{dtype_to_onnx, tensor_to_proto};
use crate::{MAX_OPSET, MIN_WRITE_OPSET};
use concord_core::{Dim, Graph, ValueInfo};
use std::collections::HashSet;

/// Converts a graph to a ModelProto.
pub fn to_model_proto(graph: &Graph) -> Result<ModelProto, Error> {
    check_opset(graph.opset)?;
    let graph_proto = graph_proto(graph, graph.opset, None)?;
    Ok(ModelProto {
        ir_version: ir_version_for(graph.opset),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: graph.opset,
        }],
        producer_name: "concord".to_string(),
        producer_version: env!("CARGO_PKG_VERSION").to_string(),
        graph: Some(graph_proto),
        ..ModelProto::default()
    })
}

/// The GraphProto of a control-flow node's subgraph at `opset`, without its last
/// `captures` inputs: ONNX subgraphs read outer values by name. Its inputs keep the shapes
/// the reader recorded as declared (in the subgraph's `values`) and are written with their
/// dtype only otherwise (the node's operands give their shapes); its outputs with the
/// recorded types, untyped otherwise.
pub(crate) fn subgraph_proto(
    graph: &Graph,
    captures: usize,
    opset: i64,
) -> Result<GraphProto, Error> {
    graph_proto(graph, opset, Some(captures))
}

/// A graph's GraphProto; `captures` is `Some` for a subgraph.
fn graph_proto(graph: &Graph, opset: i64, captures: Option<usize>) -> Result<GraphProto, Error> {
    let mut initializer: Vec<_> = graph
        .initializers
        .iter()
        .map(|(name, t)| tensor_to_proto(name, t))
        .collect();
    let mut taken = value_names(graph);
    let mut nodes = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let written = write_op(node, opset)?;
        let mut inputs = node.inputs.clone();
        // Captured outer values are read by name inside the subgraph, not passed.
        inputs.truncate(inputs.len() - node.op.captures(inputs.len()));
        if let Some(axes) = written.axes_input {
            // The attribute form of Reduce axes does not exist at this opset: the axes
            // become an i64 initializer read as input 1.
            let name = fresh_name(&format!("{}_axes", node.name), &mut taken);
            initializer.push(tensor_to_proto(&name, &concord_core::Tensor::vec_i64(axes)));
            if inputs.is_empty() {
                inputs.push(None);
            }
            if inputs.len() < 2 {
                inputs.push(None);
            }
            inputs[1] = Some(name);
        }
        while matches!(inputs.last(), Some(None)) {
            inputs.pop();
        }
        nodes.push(NodeProto {
            input: inputs.into_iter().map(Option::unwrap_or_default).collect(),
            output: node.outputs.clone(),
            name: node.name.clone(),
            op_type: node.op.name().to_string(),
            attribute: written.attributes,
            ..NodeProto::default()
        });
    }
    let (input, output) = match captures {
        None => (
            graph.inputs.iter().map(value_info_proto).collect(),
            output_infos(graph, true),
        ),
        Some(captures) => {
            let declared = graph.inputs.len().saturating_sub(captures);
            let input = graph.inputs[..declared]
                .iter()
                .map(|info| {
                    let mut proto = value_info_proto(info);
                    // A shape the model did not declare is a placeholder: left out.
                    let declared = graph.values.get(&info.name) == Some(info);
                    if let (false, Some(TypeValue::TensorType(t))) = (
                        declared,
                        proto.r#type.as_mut().and_then(|t| t.value.as_mut()),
                    ) {
                        t.shape = None;
                    }
                    proto
                })
                .collect();
            (input, output_infos(graph, false))
        }
    };
    Ok(GraphProto {
        node: nodes,
        name: graph.name.clone(),
        initializer,
        input,
        output,
        ..GraphProto::default()
    })
}

/// The IR version released with each opset (onnx's version table): the oldest IR version
/// a runtime must understand to read the model.
pub fn ir_version_for(opset: i64) -> i64 {
    match opset {
        ..=14 => 7,
        15..=18 => 8,
        19..=20 => 9,
        21..=22 => 10,
        23 => 11,
        24 => 12,
        // onnx 1.20 to 1.22 pair opsets 25 to 27 with IR 13; onnx 1.23, opset 28, with 14.
        25..=27 => 13,
        _ => 14,
    }
}

fn check_opset(opset: i64) -> Result<(), Error> {
    if opset < MIN_WRITE_OPSET {
        return Err(Error::WriteOpsetTooOld {
            version: opset,
            min_supported: MIN_WRITE_OPSET,
            max_supported: MAX_OPSET,
        });
    }
    if opset > MAX_OPSET {
        return Err(Error::OpsetTooNew {
            domain: "ai.onnx".to_string(),
            version: opset,
            max_supported: MAX_OPSET,
        });
    }
    Ok(())
}

/// Every value name in the graph, so that an added initializer gets a fresh one.
fn value_names(graph: &Graph) -> HashSet<String> {
    graph
        .inputs
        .iter()
        .map(|i| i.name.clone())
        .chain(graph.initializers.keys().cloned())
        .chain(graph.nodes.iter().flat_map(|n| n.outputs.iter().cloned()))
        .chain(
            graph
                .nodes
                .iter()
                .flat_map(|n| n.present_inputs().map(str::to_string)),
        )
        .collect()
}

fn fresh_name(base: &str, taken: &mut HashSet<String>) -> String {
    let mut candidate = base.to_string();
    let mut suffix = 1usize;
    while taken.contains(&candidate) {
        candidate = format!("{base}_{suffix}");
        suffix += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// The typed graph outputs; `infer` allows inference on a copy for the missing types (not
/// for a subgraph, whose captured inputs' types are the outer graph's).
fn output_infos(graph: &Graph, infer: bool) -> Vec<ValueInfoProto> {
    let known = |g: &Graph, name: &str| -> Option<ValueInfo> {
        g.values
            .get(name)
            .cloned()
            // A subgraph's inputs may hold placeholder types (captures): only its
            // recorded `values` count there.
            .or_else(|| g.inputs.iter().find(|i| infer && i.name == name).cloned())
            .or_else(|| {
                g.initializers
                    .get(name)
                    .map(|t| ValueInfo::new(name, t.dtype(), t.shape().to_sym()))
            })
    };
    let all_known = graph.outputs.iter().all(|o| known(graph, o).is_some());
    // Inference on a copy fills the types the caller did not; a graph that cannot be
    // inferred still gets written, its untyped outputs named only.
    let inferred = if all_known || !infer {
        None
    } else {
        let mut copy = graph.clone();
        copy.infer_shapes().ok().map(|()| copy)
    };
    graph
        .outputs
        .iter()
        .map(|name| {
            let info =
                known(graph, name).or_else(|| inferred.as_ref().and_then(|g| known(g, name)));
            match info {
                Some(info) => value_info_proto(&info),
                None => ValueInfoProto {
                    name: name.clone(),
                    ..ValueInfoProto::default()
                },
            }
        })
        .collect()
}

fn value_info_proto(info: &ValueInfo) -> ValueInfoProto {
    let dim = info
        .shape
        .iter()
        .map(|d| Dimension {
            value: match d {
                Dim::Fixed(n) => Some(dimension::Value::DimValue(
                    i64::try_from(*n).unwrap_or(i64::MAX),
                )),
                Dim::Named(s) => Some(dimension::Value::DimParam(s.clone())),
                Dim::Unknown => None,
            },
            ..Dimension::default()
        })
        .collect();
    ValueInfoProto {
        name: info.name.clone(),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(type_proto::Tensor {
                elem_type: dtype_to_onnx(info.dtype),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}
