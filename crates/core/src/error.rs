//! Typed errors. [`OpError`] is what one op's shape inference or kernel says about its own
//! operands; [`Error`] adds the node and op it happened in, or describes a graph-level fault.

use crate::dtype::DType;
use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong inside one op, without knowing which node it was.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum OpError {
    #[error("input {index} ({name}) is required but missing")]
    MissingInput { index: usize, name: &'static str },
    #[error("input {index} ({name}) has dtype {actual}, expected {expected}")]
    DType {
        index: usize,
        name: &'static str,
        expected: String,
        actual: DType,
    },
    #[error("{0}")]
    Shape(String),
    #[error("attribute `{name}`: {detail}")]
    Attribute { name: &'static str, detail: String },
    #[error("input {index} ({name}) must be a constant known when the net is built")]
    NotConstant { index: usize, name: &'static str },
    #[error("{0}")]
    Unsupported(String),
    /// An allocation sized by the model or its inputs that the memory budget refuses
    /// before it is made: `bytes` is None when the count overflowed.
    #[error(
        "{what} needs {}, over the memory limit of {limit} bytes (raise it with NetBuilder::memory_limit or {})",
        bytes.map_or("more bytes than a 64-bit count holds".to_string(), |b| format!("{b} bytes")),
        crate::memory::MEMORY_LIMIT_ENV
    )]
    MemoryBudget {
        what: String,
        bytes: Option<u64>,
        limit: u64,
    },
    /// A run that went past its time limit ([`crate::deadline`]): `what` says what was
    /// running when it was found (a node about to start, a kernel's loop).
    #[error(
        "{what} ran past the time limit of {limit:?} ({elapsed:?} elapsed; raise it with NetBuilder::time_limit or {})",
        crate::deadline::TIME_LIMIT_ENV
    )]
    TimeLimit {
        what: String,
        elapsed: std::time::Duration,
        limit: std::time::Duration,
    },
    /// A type that inference alone cannot find but folding may (a subgraph output whose
    /// rank needs an evaluated operand, an If branch that types only when its condition is
    /// known): inference without an evaluator leaves the node untyped instead of failing.
    #[error("{0}")]
    NeedsFolding(String),
    /// A failure inside a control-flow op's subgraph (`then_branch`, `body`…): the inner
    /// error names the inner node.
    #[error("in {graph}: {source}")]
    Subgraph { graph: String, source: Box<Error> },
}

/// Errors of the graph IR, shape inference and execution.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum Error {
    /// An op failed on its operands; names the node and op.
    #[error("node `{node}` ({op}): {source}")]
    Node {
        node: String,
        op: &'static str,
        source: OpError,
    },
    /// A node reads a value that no node, input or initializer produces.
    #[error(
        "node `{node}` ({op}) reads `{value}`, which no node, graph input or initializer produces"
    )]
    DanglingInput {
        node: String,
        op: &'static str,
        value: String,
    },
    /// A graph output names a value nothing produces.
    #[error("graph output `{value}` is produced by no node, graph input or initializer")]
    DanglingOutput { value: String },
    /// Two producers write the same value name.
    #[error("value `{value}` is produced twice (by {first} and {second})")]
    DuplicateValue {
        value: String,
        first: String,
        second: String,
    },
    /// The node graph has a cycle; lists the nodes on it.
    #[error("the graph has a cycle through nodes {}", nodes.join(" -> "))]
    Cycle { nodes: Vec<String> },
    /// A tensor's data does not match its shape.
    #[error("tensor `{name}`: shape {shape} needs {expected} elements, data has {actual}")]
    TensorData {
        name: String,
        shape: String,
        expected: usize,
        actual: usize,
    },
    /// A shape's element count overflows.
    #[error("value `{name}`: shape {shape} has more elements than this machine can address")]
    ShapeOverflow { name: String, shape: String },
    /// A graph input has no usable type.
    #[error("graph input `{name}`: {detail}")]
    InvalidInput { name: String, detail: String },
    /// Anything else about the graph's structure.
    #[error("invalid graph: {0}")]
    InvalidGraph(String),
    /// An executor's device or runtime failed (out of device memory, a kernel that did not
    /// build, a lost device); names the executor and, when known, the node.
    #[error(
        "executor `{executor}`{}: {detail}",
        node.as_ref().map(|n| format!(" at node `{n}`")).unwrap_or_default()
    )]
    Device {
        executor: String,
        node: Option<String>,
        detail: String,
    },
}

impl Error {
    /// Wraps an [`OpError`] with the node and op it happened in.
    pub fn at_node(node: &crate::graph::Node, source: OpError) -> Self {
        Error::Node {
            node: node.name.clone(),
            op: node.op.name(),
            source,
        }
    }
}
