//! [`Net`] and [`NetBuilder`]: build once (validate, infer, fold), then `forward` from any
//! number of threads.

use crate::error::Error;
use concord_core::{Dim, Graph, Tensor, ValueInfo};
use concord_cpu::{ReferenceEvaluator, ReferenceExecutor};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A model ready to run. Cheap to share: wrap it in an `Arc` and call
/// [`Net::forward`] from as many threads as you like.
#[derive(Debug)]
pub struct Net {
    graph: Graph,
    executor: ReferenceExecutor,
}

/// Where a [`NetBuilder`] takes its model from.
#[derive(Debug)]
enum Source {
    File(PathBuf),
    Bytes(Vec<u8>),
    Graph(Box<Graph>),
}

/// Configures and builds a [`Net`].
#[derive(Debug)]
pub struct NetBuilder {
    source: Source,
}

/// Named outputs of one forward, in the model's output order.
#[derive(Clone, Debug, PartialEq)]
pub struct Outputs(Vec<(String, Tensor)>);

impl Net {
    /// Reads an ONNX model file and builds a net with default settings.
    pub fn from_onnx_file(path: impl AsRef<Path>) -> Result<Net, Error> {
        NetBuilder::from_onnx_file(path).build()
    }

    /// Reads an ONNX model from memory and builds a net with default settings.
    pub fn from_onnx_bytes(bytes: impl Into<Vec<u8>>) -> Result<Net, Error> {
        NetBuilder::from_onnx_bytes(bytes).build()
    }

    /// Builds a net from a graph made with the core API.
    pub fn from_graph(graph: Graph) -> Result<Net, Error> {
        NetBuilder::from_graph(graph).build()
    }

    /// The model's runtime inputs.
    pub fn inputs(&self) -> &[ValueInfo] {
        &self.graph.inputs
    }

    /// The model's outputs with their inferred types.
    pub fn outputs(&self) -> Vec<ValueInfo> {
        self.graph
            .outputs
            .iter()
            .filter_map(|name| self.graph.values.get(name).cloned())
            .collect()
    }

    /// The graph as built: validated, sorted, shape-inferred and constant-folded.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs the model. Inputs are given by name; every model input must be present once,
    /// with the model's dtype and a shape that matches its fixed dims (named dims must
    /// agree across inputs).
    pub fn forward<S: Into<String>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<Outputs, Error> {
        let inputs = self.check_inputs(inputs)?;
        let outputs = self.executor.run(&self.graph, &inputs)?;
        Ok(Outputs(outputs))
    }

    fn check_inputs<S: Into<String>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<BTreeMap<String, Tensor>, Error> {
        let mut given: BTreeMap<String, Tensor> = BTreeMap::new();
        for (name, tensor) in inputs {
            let name = name.into();
            if !self.graph.inputs.iter().any(|i| i.name == name) {
                return Err(Error::UnknownInput {
                    name,
                    expected: self.graph.inputs.iter().map(|i| i.name.clone()).collect(),
                });
            }
            if given.contains_key(&name) {
                return Err(Error::DuplicateInput { name });
            }
            given.insert(name, tensor);
        }
        let mut named_dims: HashMap<&str, (usize, &str)> = HashMap::new();
        for info in &self.graph.inputs {
            let Some(tensor) = given.get(&info.name) else {
                return Err(Error::MissingInput {
                    name: info.name.clone(),
                    expected: info.describe(),
                });
            };
            check_input(info, tensor, &mut named_dims)?;
        }
        Ok(given)
    }
}

fn check_input<'a>(
    info: &'a ValueInfo,
    tensor: &Tensor,
    named_dims: &mut HashMap<&'a str, (usize, &'a str)>,
) -> Result<(), Error> {
    if tensor.dtype() != info.dtype {
        return Err(Error::InputDType {
            name: info.name.clone(),
            expected: info.dtype,
            actual: tensor.dtype(),
        });
    }
    let expected = concord_core::shape::format_sym(&info.shape);
    if tensor.rank() != info.shape.len() {
        return Err(Error::InputRank {
            name: info.name.clone(),
            expected,
            expected_rank: info.shape.len(),
            actual: tensor.shape().clone(),
        });
    }
    for (axis, (dim, &actual)) in info.shape.iter().zip(tensor.dims()).enumerate() {
        match dim {
            Dim::Fixed(n) if *n != actual => {
                return Err(Error::InputShape {
                    name: info.name.clone(),
                    expected,
                    actual: tensor.shape().clone(),
                    detail: format!("axis {axis} is {actual}, expected {n}"),
                });
            }
            Dim::Named(symbol) => match named_dims.get(symbol.as_str()) {
                Some(&(bound, by)) if bound != actual => {
                    return Err(Error::InputShape {
                        name: info.name.clone(),
                        expected,
                        actual: tensor.shape().clone(),
                        detail: format!(
                            "axis {axis} (`{symbol}`) is {actual}, but `{symbol}` is {bound} in input `{by}`"
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    named_dims.insert(symbol.as_str(), (actual, info.name.as_str()));
                }
            },
            _ => {}
        }
    }
    Ok(())
}

impl NetBuilder {
    pub fn from_onnx_file(path: impl AsRef<Path>) -> NetBuilder {
        NetBuilder {
            source: Source::File(path.as_ref().to_path_buf()),
        }
    }

    pub fn from_onnx_bytes(bytes: impl Into<Vec<u8>>) -> NetBuilder {
        NetBuilder {
            source: Source::Bytes(bytes.into()),
        }
    }

    pub fn from_graph(graph: Graph) -> NetBuilder {
        NetBuilder {
            source: Source::Graph(Box::new(graph)),
        }
    }

    /// Loads, validates, infers shapes and folds constants. Every check that does not need
    /// the caller's input values happens here, not at the first forward.
    pub fn build(self) -> Result<Net, Error> {
        let mut graph = match self.source {
            Source::File(path) => concord_onnx::load_file(&path)?,
            Source::Bytes(bytes) => concord_onnx::load(&bytes)?,
            Source::Graph(graph) => *graph,
        };
        graph.fold_constants(&ReferenceEvaluator)?;
        Ok(Net {
            graph,
            executor: ReferenceExecutor::new(),
        })
    }
}

impl Outputs {
    /// The output called `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.0.iter().map(|(n, t)| (n.as_str(), t))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_vec(self) -> Vec<(String, Tensor)> {
        self.0
    }
}

impl IntoIterator for Outputs {
    type Item = (String, Tensor);
    type IntoIter = std::vec::IntoIter<(String, Tensor)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn net_is_send_and_sync() {
        assert_send_sync::<Net>();
    }
}
