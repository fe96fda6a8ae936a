//! The graph IR: [`Graph`], [`Node`], [`ValueInfo`], structural validation and a
//! topological order.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::Op;
use crate::shape::{format_sym, Dim, Shape, SymShape};
use crate::tensor::Tensor;
use std::collections::{BTreeMap, HashMap};

/// A computation graph: named runtime inputs, constant initializers, nodes, named outputs.
///
/// Every value is named by a string, as in ONNX. After [`Graph::infer_shapes`], `values`
/// holds the dtype and (possibly symbolic) shape of every input, initializer and node
/// output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    pub name: String,
    /// Runtime inputs, in declaration order. Initializers are not listed here.
    pub inputs: Vec<ValueInfo>,
    /// Names of the graph outputs, in declaration order.
    pub outputs: Vec<String>,
    /// Constant tensors by name (weights, folded shapes).
    pub initializers: BTreeMap<String, Tensor>,
    /// Nodes; [`Graph::validate`] checks they can be ordered, not that they already are.
    pub nodes: Vec<Node>,
    /// The default-domain opset the graph was written against.
    pub opset: i64,
    /// Inferred type of every value, filled by [`Graph::infer_shapes`] (all but those whose
    /// rank needs folding) and [`Graph::fold_constants`] (all).
    pub values: BTreeMap<String, ValueInfo>,
}

/// One operation in a graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: Op,
    /// Input value names; `None` is an omitted optional input (ONNX's empty name).
    pub inputs: Vec<Option<String>>,
    /// Output value names.
    pub outputs: Vec<String>,
}

/// The element type and shape of a named value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueInfo {
    pub name: String,
    pub dtype: DType,
    pub shape: SymShape,
}

impl ValueInfo {
    pub fn new(name: impl Into<String>, dtype: DType, shape: SymShape) -> Self {
        ValueInfo {
            name: name.into(),
            dtype,
            shape,
        }
    }

    /// A value with a fully known shape.
    pub fn fixed(name: impl Into<String>, dtype: DType, dims: &[usize]) -> Self {
        ValueInfo {
            name: name.into(),
            dtype,
            shape: Shape::from(dims).to_sym(),
        }
    }

    /// The concrete shape, when every dim is known.
    pub fn concrete_shape(&self) -> Option<Shape> {
        Shape::from_sym(&self.shape)
    }

    /// "f32[1, 3, 224, 224]".
    pub fn describe(&self) -> String {
        format!("{}{}", self.dtype, format_sym(&self.shape))
    }
}

impl Node {
    pub fn new(name: impl Into<String>, op: Op, inputs: &[&str], outputs: &[&str]) -> Self {
        Node {
            name: name.into(),
            op,
            inputs: inputs
                .iter()
                .map(|s| {
                    if s.is_empty() {
                        None
                    } else {
                        Some((*s).to_string())
                    }
                })
                .collect(),
            outputs: outputs.iter().map(|s| (*s).to_string()).collect(),
        }
    }

    /// The names of the inputs that are present.
    pub fn present_inputs(&self) -> impl Iterator<Item = &str> {
        self.inputs.iter().filter_map(|i| i.as_deref())
    }
}

impl Graph {
    /// Checks structure: every node input and graph output is produced by exactly one of a
    /// graph input, an initializer or a node; value names are unique; there is no cycle;
    /// fixed input shapes fit in memory addressing.
    pub fn validate(&self) -> Result<()> {
        self.producers()?;
        for input in &self.inputs {
            let dims: Vec<usize> = input
                .shape
                .iter()
                .filter_map(|d| {
                    if let Dim::Fixed(n) = d {
                        Some(*n)
                    } else {
                        None
                    }
                })
                .collect();
            let bytes = Shape(dims)
                .checked_numel()
                .and_then(|n| n.checked_mul(input.dtype.size_in_bytes()))
                .filter(|&b| b <= isize::MAX as usize);
            if bytes.is_none() {
                return Err(Error::ShapeOverflow {
                    name: input.name.clone(),
                    shape: format_sym(&input.shape),
                });
            }
        }
        for (name, t) in &self.initializers {
            if t.shape().checked_numel() != Some(t.len()) {
                return Err(Error::TensorData {
                    name: name.clone(),
                    shape: t.shape().to_string(),
                    expected: t.shape().checked_numel().unwrap_or(usize::MAX),
                    actual: t.len(),
                });
            }
        }
        self.topological_order()?;
        Ok(())
    }

    /// Who produces each value: "input", "initializer" or the node's index.
    fn producers(&self) -> Result<HashMap<&str, Producer>> {
        let mut producers: HashMap<&str, Producer> = HashMap::new();
        for input in &self.inputs {
            check_insert(&mut producers, &input.name, Producer::Input, self)?;
        }
        for name in self.initializers.keys() {
            // An initializer may share its name with a graph input (ONNX's default value
            // for an overridable input); the runtime input wins, so it is not a duplicate.
            if !producers.contains_key(name.as_str()) {
                producers.insert(name.as_str(), Producer::Initializer);
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            for out in &node.outputs {
                if out.is_empty() {
                    continue;
                }
                check_insert(&mut producers, out, Producer::Node(i), self)?;
            }
        }
        for node in &self.nodes {
            for input in node.present_inputs() {
                if !producers.contains_key(input) {
                    return Err(Error::DanglingInput {
                        node: node.name.clone(),
                        op: node.op.name(),
                        value: input.to_string(),
                    });
                }
            }
        }
        for out in &self.outputs {
            if !producers.contains_key(out.as_str()) {
                return Err(Error::DanglingOutput { value: out.clone() });
            }
        }
        Ok(producers)
    }

    /// Node indices in an order where every node runs after the producers of its inputs.
    /// Errors with the nodes of a cycle when there is one.
    pub fn topological_order(&self) -> Result<Vec<usize>> {
        let mut producer_of: HashMap<&str, usize> = HashMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            for out in &node.outputs {
                producer_of.insert(out.as_str(), i);
            }
        }
        let n = self.nodes.len();
        let mut indegree = vec![0usize; n];
        let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, node) in self.nodes.iter().enumerate() {
            for input in node.present_inputs() {
                // Graph inputs and initializers shadow node outputs of the same name only
                // when validate() has already rejected the duplicate, so this is exact.
                if let Some(&p) = producer_of.get(input) {
                    indegree[i] += 1;
                    consumers[p].push(i);
                }
            }
        }
        // Kahn's algorithm, taking ready nodes in declaration order for a stable result.
        let mut ready: std::collections::BTreeSet<usize> =
            (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(i) = ready.pop_first() {
            order.push(i);
            for &c in &consumers[i] {
                indegree[c] -= 1;
                if indegree[c] == 0 {
                    ready.insert(c);
                }
            }
        }
        if order.len() < n {
            let mut nodes: Vec<String> = (0..n)
                .filter(|&i| indegree[i] > 0)
                .map(|i| self.nodes[i].name.clone())
                .collect();
            nodes.sort();
            return Err(Error::Cycle { nodes });
        }
        Ok(order)
    }

    /// Reorders `nodes` topologically (after validation).
    pub fn sort_nodes(&mut self) -> Result<()> {
        let order = self.topological_order()?;
        let mut slots: Vec<Option<Node>> = self.nodes.drain(..).map(Some).collect();
        self.nodes = order.into_iter().filter_map(|i| slots[i].take()).collect();
        Ok(())
    }

    /// The inferred type of a value, if known.
    pub fn value(&self, name: &str) -> Option<&ValueInfo> {
        self.values.get(name)
    }

    /// The graph-output value infos, from the inferred types.
    pub fn output_infos(&self) -> Vec<Option<&ValueInfo>> {
        self.outputs.iter().map(|o| self.values.get(o)).collect()
    }
}

#[derive(Clone, Copy, Debug)]
enum Producer {
    Input,
    Initializer,
    Node(usize),
}

impl Producer {
    fn describe(&self, graph: &Graph) -> String {
        match self {
            Producer::Input => "a graph input".to_string(),
            Producer::Initializer => "an initializer".to_string(),
            Producer::Node(i) => format!("node `{}`", graph.nodes[*i].name),
        }
    }
}

fn check_insert<'g>(
    map: &mut HashMap<&'g str, Producer>,
    name: &'g str,
    p: Producer,
    graph: &Graph,
) -> Result<()> {
    if let Some(first) = map.get(name) {
        return Err(Error::DuplicateValue {
            value: name.to_string(),
            first: first.describe(graph),
            second: p.describe(graph),
        });
    }
    map.insert(name, p);
    Ok(())
}
