//! ModelProto → [`Graph`]: opset checks, graph inputs, initializers, nodes and outputs.
//!
//! This is conversion only; structural validation (dangling names, cycles, duplicates) and
//! shape inference belong to core and run in [`crate::load`].

use crate::attrs::Attrs;
use crate::error::Error;
use crate::legacy::{self, FollowsDtype, Normaliser, FORM_OPSET};
use crate::ops::{computed_outputs, optional_outputs_from, read_op, since_version, NodeContext};
use crate::proto::tensor_shape_proto::dimension::Value as DimValue;
use crate::proto::type_proto::Value as TypeValue;
use crate::proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto, ValueInfoProto};
use crate::tensor::{dtype_from_onnx, tensor_from_proto};
use crate::{MAX_OPSET, MIN_OPSET};
use concord_core::{DType, Dim, Graph, Node, Op, Tensor, ValueInfo};
use prost::Message;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Decodes a ModelProto, refusing empty input (which protobuf would read as an empty model).
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto, Error> {
    if bytes.is_empty() {
        return Err(Error::Decode {
            what: "the model",
            detail: "the input is empty (0 bytes)".to_string(),
        });
    }
    ModelProto::decode(bytes).map_err(|e| Error::Decode {
        what: "the model",
        detail: e.to_string(),
    })
}

/// Converts a decoded model to a graph without validating it.
pub fn graph_from_model(model: &ModelProto) -> Result<Graph, Error> {
    let graph = model.graph.as_ref().ok_or(Error::NoGraph)?;
    let opset = match (default_opset(model), other_domain_node(graph)) {
        (Ok(opset), _) => opset,
        // A model of only, say, ai.onnx.ml nodes imports no default opset: the domain it
        // does use is the thing to name.
        (Err(Error::MissingOpset { .. }), Some((index, node))) => {
            let name = NodeNames::new(&graph.node).assign(node, index);
            return Err(unsupported_domain(node, &name, &model.opset_import));
        }
        (Err(e), _) => return Err(e),
    };
    let mut out = read_graph(graph, opset, &model.opset_import, Scope::Model)?;
    // Nodes of opsets 7 to 12 were rewritten to their opset-13 forms.
    out.opset = opset.max(FORM_OPSET);
    Ok(out)
}

/// Whether a graph is the model's main graph or the subgraph of a control-flow node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Model,
    /// A subgraph's inputs may leave out their shape (or even their type): the values the
    /// node binds to them type them when the outer graph is inferred.
    Subgraph,
}

/// Reads one graph (the model's or a subgraph) whose nodes are of `opset`.
fn read_graph(
    graph: &GraphProto,
    opset: i64,
    imports: &[OperatorSetIdProto],
    scope: Scope,
) -> Result<Graph, Error> {
    if let Some(sparse) = graph.sparse_initializer.first() {
        let tensor = sparse
            .values
            .as_ref()
            .map(|v| v.name.clone())
            .unwrap_or_default();
        return Err(Error::SparseTensor { tensor });
    }
    let mut initializers = read_initializers(graph)?;
    let mut inputs = Vec::with_capacity(graph.input.len());
    for info in &graph.input {
        // An input that is also an initializer is ONNX's "overridable default"; Concord
        // treats it as a constant so that shape inference and folding can use its value.
        if !initializers.contains_key(&info.name) {
            inputs.push(match scope {
                Scope::Model => read_input(info)?,
                Scope::Subgraph => read_subgraph_input(info)?,
            });
        }
    }
    let mut outputs = Vec::with_capacity(graph.output.len());
    for (i, info) in graph.output.iter().enumerate() {
        if info.name.is_empty() {
            return Err(Error::InvalidModel(format!(
                "graph output #{i} has no name"
            )));
        }
        outputs.push(info.name.clone());
    }
    let ranks: HashMap<String, usize> = inputs
        .iter()
        .map(|i| (i.name.clone(), i.shape.len()))
        .chain(initializers.iter().map(|(n, t)| (n.clone(), t.rank())))
        .collect();
    let mut normaliser = Normaliser::new(opset, &mut initializers, value_names(graph), ranks);
    let nodes = read_nodes(graph, opset, imports, &mut normaliser)?;
    let follows = std::mem::take(&mut normaliser.follows);
    let mut out = Graph {
        name: graph.name.clone(),
        inputs,
        outputs,
        initializers,
        nodes,
        opset: opset.max(FORM_OPSET),
        values: BTreeMap::new(),
    };
    match scope {
        Scope::Model => retype_follows(&mut out, &follows),
        Scope::Subgraph => {
            // The declared input and output types, so that the writer can write them again.
            for info in graph.input.iter().chain(&graph.output) {
                if let Ok((typed, true)) = read_declared_type(info) {
                    out.values.insert(typed.name.clone(), typed);
                }
            }
        }
    }
    Ok(out)
}

/// The default-domain opset the model imports, checked against the supported range.
fn default_opset(model: &ModelProto) -> Result<i64, Error> {
    // onnx.checker keeps one version per domain; two that differ ("" 13 and "ai.onnx" 17)
    // would leave which semantics the nodes have to a guess.
    let versions: BTreeSet<i64> = model
        .opset_import
        .iter()
        .filter(|o| is_default_domain(&o.domain))
        .map(|o| o.version)
        .collect();
    if versions.len() > 1 {
        return Err(Error::InvalidModel(format!(
            "the model imports the default ONNX domain at {} different versions ({}); import it once",
            versions.len(),
            concord_core::text::list(&versions.iter().collect::<Vec<_>>(), 8)
        )));
    }
    let entry = model
        .opset_import
        .iter()
        .filter(|o| is_default_domain(&o.domain))
        .max_by_key(|o| o.version)
        .ok_or(Error::MissingOpset {
            min_supported: MIN_OPSET,
            max_supported: MAX_OPSET,
        })?;
    let domain = if entry.domain.is_empty() {
        "ai.onnx".to_string()
    } else {
        entry.domain.clone()
    };
    if entry.version > MAX_OPSET {
        return Err(Error::OpsetTooNew {
            domain,
            version: entry.version,
            max_supported: MAX_OPSET,
        });
    }
    if entry.version < MIN_OPSET {
        return Err(Error::OpsetTooOld {
            domain,
            version: entry.version,
            min_supported: MIN_OPSET,
            max_supported: MAX_OPSET,
        });
    }
    Ok(entry.version)
}

/// The first node of a domain other than the default one, with its index.
fn other_domain_node(graph: &GraphProto) -> Option<(usize, &NodeProto)> {
    graph
        .node
        .iter()
        .enumerate()
        .find(|(_, n)| !is_default_domain(&n.domain))
}

fn is_default_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "ai.onnx"
}

fn read_initializers(graph: &GraphProto) -> Result<BTreeMap<String, Tensor>, Error> {
    let mut out = BTreeMap::new();
    for (i, proto) in graph.initializer.iter().enumerate() {
        if proto.name.is_empty() {
            return Err(Error::InvalidModel(format!(
                "initializer #{i} has no name, so no node can read it"
            )));
        }
        if out.contains_key(&proto.name) {
            return Err(Error::Graph(concord_core::Error::DuplicateValue {
                value: proto.name.clone(),
                first: "an initializer".to_string(),
                second: "another initializer".to_string(),
            }));
        }
        let tensor = tensor_from_proto(proto, &proto.name)?;
        out.insert(proto.name.clone(), tensor);
    }
    Ok(out)
}

/// A runtime graph input: tensor type, supported dtype, and a shape with at least a rank.
fn read_input(info: &ValueInfoProto) -> Result<ValueInfo, Error> {
    let name = info.name.clone();
    if name.is_empty() {
        return Err(Error::InvalidModel("a graph input has no name".to_string()));
    }
    let value_err = |detail: &str| Error::ValueInfo {
        name: name.clone(),
        detail: detail.to_string(),
    };
    let ty = info
        .r#type
        .as_ref()
        .ok_or_else(|| value_err("has no type; every graph input needs a tensor type"))?;
    let tensor = match &ty.value {
        Some(TypeValue::TensorType(t)) => t,
        None => {
            return Err(value_err(
                "is not a dense tensor (sequence, map, optional and sparse types are not \
                 supported)",
            ))
        }
    };
    let dtype = dtype_from_onnx(tensor.elem_type).ok_or_else(|| Error::UnsupportedDType {
        what: "graph input",
        name: name.clone(),
        data_type: tensor.elem_type,
    })?;
    let shape = tensor
        .shape
        .as_ref()
        .ok_or_else(|| Error::InputWithoutShape { name: name.clone() })?;
    let dims = shape
        .dim
        .iter()
        .map(|d| match &d.value {
            // A negative dim_value is invalid ONNX, but some converters write -1 for
            // "dynamic"; it reads as unknown rather than failing the whole model.
            Some(DimValue::DimValue(v)) => usize::try_from(*v).map_or(Dim::Unknown, Dim::Fixed),
            Some(DimValue::DimParam(p)) if !p.is_empty() => Dim::Named(p.clone()),
            _ => Dim::Unknown,
        })
        .collect();
    Ok(ValueInfo::new(name, dtype, dims))
}

/// A subgraph input: its declared type where it has one. The node's operands type it when
/// the outer graph is inferred, so a missing dtype reads as f32 and a missing shape as a
/// scalar, both placeholders that inference replaces.
fn read_subgraph_input(info: &ValueInfoProto) -> Result<ValueInfo, Error> {
    read_declared_type(info).map(|(info, _)| info)
}

/// A value's declared tensor type, placeholders for what is missing, and whether it had
/// both a dtype and a shape.
fn read_declared_type(info: &ValueInfoProto) -> Result<(ValueInfo, bool), Error> {
    if info.name.is_empty() {
        return Err(Error::InvalidModel(
            "a subgraph input or output has no name".to_string(),
        ));
    }
    let tensor = info
        .r#type
        .as_ref()
        .and_then(|t| t.value.as_ref())
        .map(|TypeValue::TensorType(t)| t);
    let dtype = tensor.and_then(|t| dtype_from_onnx(t.elem_type));
    let shape = tensor.and_then(|t| t.shape.as_ref()).map(|shape| {
        shape
            .dim
            .iter()
            .map(|d| match &d.value {
                Some(DimValue::DimValue(v)) => usize::try_from(*v).map_or(Dim::Unknown, Dim::Fixed),
                Some(DimValue::DimParam(p)) if !p.is_empty() => Dim::Named(p.clone()),
                _ => Dim::Unknown,
            })
            .collect::<Vec<_>>()
    });
    let complete = dtype.is_some() && shape.is_some();
    Ok((
        ValueInfo::new(
            info.name.clone(),
            dtype.unwrap_or(DType::F32),
            shape.unwrap_or_default(),
        ),
        complete,
    ))
}

/// Every value name a graph's nodes read, its own nodes' and those of the subgraphs
/// nested in them (an outer value read only inside an If branch is still read).
fn names_read(graph: &GraphProto, out: &mut HashSet<String>) {
    for node in &graph.node {
        out.extend(node.input.iter().filter(|s| !s.is_empty()).cloned());
        for attribute in &node.attribute {
            for sub in attribute.g.iter().map(|g| &**g).chain(&attribute.graphs) {
                names_read(sub, out);
                out.extend(sub.output.iter().map(|o| o.name.clone()));
            }
        }
    }
}

fn read_nodes(
    graph: &GraphProto,
    opset: i64,
    imports: &[OperatorSetIdProto],
    normaliser: &mut Normaliser,
) -> Result<Vec<Node>, Error> {
    // Values something reads (here or in a subgraph): an extra output in this set cannot
    // be dropped.
    let mut read = HashSet::new();
    names_read(graph, &mut read);
    read.extend(graph.output.iter().map(|o| o.name.clone()));
    let used: HashSet<&str> = read
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    let mut names = NodeNames::new(&graph.node);
    let mut nodes = Vec::with_capacity(graph.node.len());
    let form_opset = opset.max(FORM_OPSET);
    for (index, proto) in graph.node.iter().enumerate() {
        let name = names.assign(proto, index);
        check_node_kind(proto, &name, opset, imports)?;
        for normalised in normaliser.normalise(proto, name, &mut names)? {
            nodes.push(read_node(
                &normalised.proto,
                normalised.name,
                form_opset,
                &used,
                &Nested { opset, imports },
            )?);
        }
    }
    Ok(nodes)
}

/// Refuses an op refused by design (with its reason), a node of another domain, and an op
/// the table lacks or that its schema says exists only from a later opset than the model's.
fn check_node_kind(
    proto: &NodeProto,
    name: &str,
    opset: i64,
    imports: &[OperatorSetIdProto],
) -> Result<(), Error> {
    if let Some(reason) = concord_core::op::refusal_of(&proto.domain, &proto.op_type) {
        return Err(Error::RefusedOp {
            op: proto.op_type.clone(),
            node: name.to_string(),
            reason,
        });
    }
    if !is_default_domain(&proto.domain) {
        return Err(unsupported_domain(proto, name, imports));
    }
    let known = since_version(&proto.op_type).is_some_and(|since| since <= opset)
        || legacy::is_legacy_alias(&proto.op_type, opset);
    if !known {
        return Err(Error::UnknownOp {
            op: proto.op_type.clone(),
            node: name.to_string(),
            opset,
        });
    }
    Ok(())
}

fn unsupported_domain(proto: &NodeProto, name: &str, imports: &[OperatorSetIdProto]) -> Error {
    Error::UnsupportedDomain {
        node: name.to_string(),
        op: proto.op_type.clone(),
        domain: proto.domain.clone(),
        imported: imports
            .iter()
            .find(|o| o.domain == proto.domain)
            .map(|o| o.version),
    }
}

/// What reading a node's subgraphs needs: the opset their nodes are of, and the model's
/// imports.
struct Nested<'a> {
    opset: i64,
    imports: &'a [OperatorSetIdProto],
}

/// Reads one node already in its opset-`form_opset` form (13 or newer).
fn read_node(
    proto: &NodeProto,
    name: String,
    form_opset: i64,
    used: &HashSet<&str>,
    nested: &Nested,
) -> Result<Node, Error> {
    let mut inputs: Vec<Option<String>> = proto
        .input
        .iter()
        .map(|s| if s.is_empty() { None } else { Some(s.clone()) })
        .collect();
    if matches!(proto.op_type.as_str(), "If" | "Loop" | "Scan") {
        return read_control_node(proto, name, inputs, nested);
    }
    while matches!(inputs.last(), Some(None)) {
        inputs.pop();
    }
    let attrs = Attrs::new(&name, &proto.op_type, &proto.attribute)?;
    let ctx = NodeContext {
        opset: form_opset,
        inputs: &inputs,
        num_outputs: proto.output.len(),
    };
    let op = read_op(&proto.op_type, &attrs, &ctx)?;
    // onnx.checker refuses an input past an op's last; for the elementwise families the
    // count is known here (other families' schemas carry no input counts yet).
    let max_inputs = match op {
        Op::Unary(_) => Some(1),
        Op::Binary(_) => Some(2),
        _ => None,
    };
    if let Some(max) = max_inputs.filter(|&max| inputs.len() > max) {
        return Err(Error::TooManyInputs {
            node: name,
            op: proto.op_type.clone(),
            given: inputs.len(),
            max,
        });
    }
    let mut outputs = proto.output.clone();
    if let Some(computed) = computed_outputs(&op) {
        for (index, output) in outputs.iter().enumerate().skip(computed) {
            if !output.is_empty() && used.contains(output.as_str()) {
                return Err(Error::UnsupportedOutput {
                    node: name,
                    op: proto.op_type.clone(),
                    output: output.clone(),
                    index,
                });
            }
        }
        outputs.truncate(computed);
    }
    // Optional trailing outputs nothing reads (Dropout's mask, LayerNormalization's
    // statistics) are dropped, so that an executor without them still takes the node.
    if let Some(required) = optional_outputs_from(&op) {
        while outputs.len() > required
            && outputs
                .last()
                .is_some_and(|o| o.is_empty() || !used.contains(o.as_str()))
        {
            outputs.pop();
        }
    }
    Ok(Node {
        name,
        op,
        inputs,
        outputs,
    })
}

/// Reads an If, Loop or Scan node and its subgraphs. The outer values the subgraphs read
/// (their free names, through nested subgraphs too) are captured: appended, sorted, to the
/// node's inputs and to every subgraph's inputs, so that each subgraph is a self-contained
/// graph and the outer graph sees the captured values as ordinary operands.
fn read_control_node(
    proto: &NodeProto,
    name: String,
    mut inputs: Vec<Option<String>>,
    nested: &Nested,
) -> Result<Node, Error> {
    let attrs = Attrs::new(&name, &proto.op_type, &proto.attribute)?;
    let subgraph = |attribute: &str| -> Result<Graph, Error> {
        let proto = attrs
            .graph(attribute)?
            .ok_or_else(|| attrs.missing(attribute))?;
        read_graph(proto, nested.opset, nested.imports, Scope::Subgraph).map_err(|e| {
            Error::Subgraph {
                node: attrs.node().to_string(),
                op: attrs.op().to_string(),
                attribute: attribute.to_string(),
                source: Box::new(e),
            }
        })
    };
    let mut op = match proto.op_type.as_str() {
        "If" => Op::If {
            then_branch: Box::new(subgraph("then_branch")?),
            else_branch: Box::new(subgraph("else_branch")?),
        },
        "Loop" => Op::Loop {
            body: Box::new(subgraph("body")?),
            captures: 0,
        },
        _ => {
            let body = subgraph("body")?;
            let m = attrs
                .int("num_scan_inputs")?
                .ok_or_else(|| attrs.missing("num_scan_inputs"))?;
            let num_scan_inputs = usize::try_from(m)
                .ok()
                .filter(|&m| m >= 1)
                .ok_or_else(|| attrs.error("num_scan_inputs", format!("must be >= 1, got {m}")))?;
            let directions = |attribute: &str| -> Result<Vec<bool>, Error> {
                let values = attrs.ints(attribute)?.unwrap_or_default();
                values
                    .iter()
                    .map(|&d| match d {
                        0 => Ok(false),
                        1 => Ok(true),
                        other => Err(attrs.error(
                            attribute,
                            format!("every direction must be 0 or 1, got {other}"),
                        )),
                    })
                    .collect()
            };
            Op::Scan {
                body: Box::new(body),
                num_scan_inputs,
                scan_input_axes: attrs.ints("scan_input_axes")?.unwrap_or_default(),
                scan_input_directions: directions("scan_input_directions")?,
                scan_output_axes: attrs.ints("scan_output_axes")?.unwrap_or_default(),
                scan_output_directions: directions("scan_output_directions")?,
                captures: 0,
            }
        }
    };
    attrs.finish()?;
    let mut free = BTreeSet::new();
    for graph in op.subgraphs() {
        free.extend(free_names(graph));
    }
    let count = free.len();
    let add_inputs = |graph: &mut Graph| {
        for value in &free {
            graph
                .inputs
                .push(ValueInfo::new(value.clone(), DType::F32, Vec::new()));
        }
    };
    match &mut op {
        Op::If {
            then_branch,
            else_branch,
        } => {
            // If's only formal input is cond.
            inputs.truncate(1);
            add_inputs(then_branch);
            add_inputs(else_branch);
        }
        Op::Loop { body, captures } | Op::Scan { body, captures, .. } => {
            *captures = count;
            add_inputs(body);
        }
        _ => {}
    }
    inputs.extend(free.into_iter().map(Some));
    let node = Node {
        name,
        op,
        inputs,
        outputs: proto.output.clone(),
    };
    if proto.op_type == "Scan" && nested.opset < 9 {
        // The normaliser made Scan-8 the Scan of one batch element; this is the batch.
        return legacy::scan_over_batch(node);
    }
    Ok(node)
}

/// The names a graph reads that neither its inputs, its initializers nor its nodes define:
/// the outer values it captures (nested subgraphs' captures are already their nodes'
/// inputs).
fn free_names(graph: &Graph) -> BTreeSet<String> {
    let mut defined: HashSet<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    defined.extend(graph.initializers.keys().map(String::as_str));
    defined.extend(
        graph
            .nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(String::as_str)),
    );
    graph
        .nodes
        .iter()
        .flat_map(|n| n.present_inputs())
        .chain(graph.outputs.iter().map(String::as_str))
        .filter(|name| !defined.contains(name))
        .map(str::to_string)
        .collect()
}

/// Every value name the graph proto mentions.
fn value_names(graph: &GraphProto) -> HashSet<String> {
    graph
        .input
        .iter()
        .chain(&graph.output)
        .map(|v| v.name.clone())
        .chain(graph.initializer.iter().map(|t| t.name.clone()))
        .chain(
            graph
                .node
                .iter()
                .flat_map(|n| n.input.iter().chain(&n.output).cloned()),
        )
        .filter(|n| !n.is_empty())
        .collect()
}

/// Gives the bounds and pad values made from opset 7–10 attributes (made f32) the dtype of
/// the data they apply to. Only f16 data needs a change, so a graph that cannot hold f16
/// is left alone; otherwise the data's dtype comes from inference on a copy without the
/// made inputs. When that inference fails the values stay f32 and [`crate::load`]'s own
/// inference reports what is wrong.
fn retype_follows(graph: &mut Graph, follows: &[FollowsDtype]) {
    if follows.is_empty() || !may_hold_f16(graph) {
        return;
    }
    let made: HashSet<&str> = follows.iter().map(|f| f.initializer.as_str()).collect();
    let mut copy = graph.clone();
    for node in &mut copy.nodes {
        for input in &mut node.inputs {
            if input.as_deref().is_some_and(|i| made.contains(i)) {
                *input = None;
            }
        }
    }
    copy.initializers
        .retain(|name, _| !made.contains(name.as_str()));
    if copy.infer_shapes().is_err() {
        return;
    }
    for f in follows {
        let dtype = copy
            .values
            .get(&f.value)
            .map(|v| v.dtype)
            .or_else(|| copy.initializers.get(&f.value).map(Tensor::dtype));
        if dtype != Some(DType::F16) {
            continue;
        }
        if let Some(value) = graph.initializers.get_mut(&f.initializer) {
            // A made scalar always converts; on the impossible failure it stays f32 and
            // inference names the mismatch.
            if let Ok(t) = Tensor::from_f64(DType::F16, value.shape().clone(), value.to_f64_vec()) {
                *value = t;
            }
        }
    }
}

/// Whether any value of the graph can be f16: an f16 input or initializer, a Cast to f16,
/// or an f16 Constant.
fn may_hold_f16(graph: &Graph) -> bool {
    graph.inputs.iter().any(|i| i.dtype == DType::F16)
        || graph.initializers.values().any(|t| t.dtype() == DType::F16)
        || graph.nodes.iter().any(|n| match &n.op {
            Op::Cast { to } => *to == DType::F16,
            Op::Constant { value } => value.dtype() == DType::F16,
            _ => false,
        })
}

/// Gives every node a unique name: its own when no earlier node took it, otherwise
/// `<OpType>_<index>` (or `<name>_<index>` for a repeated name), with a further suffix if
/// even that is taken.
pub(crate) struct NodeNames {
    /// Every explicit name in the graph, so a generated name never steals a later one.
    explicit: HashSet<String>,
    /// Names already assigned.
    assigned: HashSet<String>,
}

impl NodeNames {
    fn new(nodes: &[NodeProto]) -> Self {
        NodeNames {
            explicit: nodes
                .iter()
                .filter(|n| !n.name.is_empty())
                .map(|n| n.name.clone())
                .collect(),
            assigned: HashSet::with_capacity(nodes.len()),
        }
    }

    fn assign(&mut self, node: &NodeProto, index: usize) -> String {
        if !node.name.is_empty() && !self.assigned.contains(&node.name) {
            self.assigned.insert(node.name.clone());
            return node.name.clone();
        }
        let base = if node.name.is_empty() {
            format!("{}_{index}", node.op_type)
        } else {
            format!("{}_{index}", node.name)
        };
        self.fresh(&base)
    }

    /// A name no node has or will have, starting from `base` (for nodes the reader adds).
    pub(crate) fn fresh(&mut self, base: &str) -> String {
        let mut candidate = base.to_string();
        let mut suffix = 1usize;
        while self.explicit.contains(&candidate) || self.assigned.contains(&candidate) {
            candidate = format!("{base}_{suffix}");
            suffix += 1;
        }
        self.assigned.insert(candidate.clone());
        candidate
    }
}
