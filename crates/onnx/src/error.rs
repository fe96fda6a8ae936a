//! [`Error`]: everything that can go wrong reading or writing an ONNX model, each variant
//! naming the node, op, attribute, tensor or opset involved and saying what to do.

use std::path::PathBuf;
use thiserror::Error;

/// An ONNX import or export failure.
#[derive(Debug, Error)]
pub enum Error {
    /// The bytes are not a protobuf message of the expected kind.
    #[error(
        "cannot decode {what}: {detail}; the file is truncated or is not an ONNX protobuf \
         (check that it is the .onnx file itself, fully downloaded, not a text or LFS pointer)"
    )]
    Decode { what: &'static str, detail: String },

    /// A model decoded but holds no graph.
    #[error("the model has no graph: it is not an ONNX model, or an empty one")]
    NoGraph,

    /// The model imports no opset of the default ONNX domain.
    #[error(
        "the model imports no opset for the default ONNX domain (\"\" or \"ai.onnx\"); \
         re-export it with an opset between {min_supported} and {max_supported}"
    )]
    MissingOpset {
        min_supported: i64,
        max_supported: i64,
    },

    /// The default-domain opset is newer than Concord knows.
    #[error(
        "opset {domain} {version} is newer than the newest Concord supports ({max_supported}): \
         re-export the model with opset {max_supported} or convert it with \
         onnx.version_converter"
    )]
    OpsetTooNew {
        domain: String,
        version: i64,
        max_supported: i64,
    },

    /// The default-domain opset is older than Concord reads.
    #[error(
        "opset {domain} {version} is older than Concord reads: it reads opsets {min_supported} \
         to {max_supported} (before opset 7, binary ops broadcast only with the `broadcast` and \
         `axis` attributes and many ops carry `consumed_inputs`); convert the model with \
         onnx.version_converter to opset {min_supported} or newer"
    )]
    OpsetTooOld {
        domain: String,
        version: i64,
        min_supported: i64,
        max_supported: i64,
    },

    /// A node in a form of an older opset that has no equivalent in Concord's IR, or that
    /// belongs to an opset before the oldest Concord reads.
    #[error("node `{node}` ({op}) at opset {opset}, {attribute}: {detail}")]
    LegacyForm {
        node: String,
        op: String,
        opset: i64,
        /// The attribute or input concerned, as `attribute `name`` or `input N (name)`.
        attribute: String,
        detail: String,
    },

    /// The writer was asked for an opset older than the ones whose forms it writes.
    #[error(
        "cannot write opset {version}: Concord writes opsets {min_supported} to {max_supported} \
         only (a model read at opset 7 to 12 is normalised to opset-13 forms, and its graph \
         says opset 13); set graph.opset to {min_supported} or newer"
    )]
    WriteOpsetTooOld {
        version: i64,
        min_supported: i64,
        max_supported: i64,
    },

    /// A node belongs to an operator domain other than the default ONNX one.
    #[error(
        "node `{node}` ({op}) is in operator domain `{domain}`{}, which Concord does not \
         implement; it implements only the default ONNX domain (\"\" or \"ai.onnx\"), opsets \
         {} to {}: export without custom, contrib or ai.onnx.ml ops",
        imported.map(|v| format!(" (the model imports version {v})")).unwrap_or_default(),
        crate::MIN_OPSET,
        crate::MAX_OPSET
    )]
    UnsupportedDomain {
        node: String,
        op: String,
        domain: String,
        /// The version of `domain` the model imports, if it imports it at all.
        imported: Option<i64>,
    },

    /// A node's op type is not one Concord represents (at this opset).
    #[error(
        "node `{node}`: op `{op}` is not supported at opset {opset}; Concord supports {}",
        concord_core::op::supported_names().join(", ")
    )]
    UnknownOp {
        op: String,
        node: String,
        opset: i64,
    },

    /// A node's op type is one Concord refuses by design
    /// ([`concord_core::op::REFUSED_OPS`]), with the reason.
    #[error("node `{node}`: op `{op}` is not supported, by design: {reason}")]
    RefusedOp {
        op: String,
        node: String,
        reason: &'static str,
    },

    /// An attribute has the wrong kind, a bad value, or is not one the op has.
    #[error("node `{node}` ({op}), attribute `{attribute}`: {detail}")]
    Attribute {
        node: String,
        op: String,
        attribute: String,
        detail: String,
    },

    /// A node gives an op more inputs than the op has (an extra input would be ignored).
    #[error("node `{node}` ({op}) has {given} inputs; {op} takes at most {max}")]
    TooManyInputs {
        node: String,
        op: String,
        given: usize,
        max: usize,
    },

    /// A required attribute is absent.
    #[error("node `{node}` ({op}) needs attribute `{attribute}`, which is missing")]
    MissingAttribute {
        node: String,
        op: String,
        attribute: String,
    },

    /// A tensor keeps its bytes in a separate file.
    #[error(
        "tensor `{tensor}` uses external data, and external data is not supported: re-save \
         the model with all tensors inline (onnx.save_model(model, path, \
         save_as_external_data=False) after onnx.load with its data)"
    )]
    ExternalData { tensor: String },

    /// A sparse initializer or sparse Constant value.
    #[error("tensor `{tensor}` is sparse, and sparse tensors are not supported: store it dense")]
    SparseTensor { tensor: String },

    /// An element type Concord does not compute in.
    #[error(
        "{what} `{name}` has ONNX data type {} ({data_type}), which Concord does not support; \
         it holds the dense numeric types (float64/32/16, bfloat16, int8 to int64, uint8 to \
         uint64) and bool, not strings, complex numbers or the 2-, 4- and 8-bit formats",
        crate::tensor::data_type_name(*data_type)
    )]
    UnsupportedDType {
        what: &'static str,
        name: String,
        data_type: i32,
    },

    /// A tensor's stored elements do not match its dims and data type.
    #[error("tensor `{name}`: {detail}")]
    TensorData { name: String, detail: String },

    /// A graph input whose type has no shape at all (not even a rank).
    #[error(
        "graph input `{name}` has no shape: Concord needs at least the rank of every input; \
         re-export with a static or symbolic (dim_param) shape"
    )]
    InputWithoutShape { name: String },

    /// A graph input or output whose type is missing or not a tensor type.
    #[error("graph value `{name}`: {detail}")]
    ValueInfo { name: String, detail: String },

    /// An optional output Concord does not compute is read by a node or is a graph output.
    #[error(
        "node `{node}` ({op}): output {index} (`{output}`) is used, but Concord computes only \
         the first output of {op}; remove the use of `{output}` or compute it another way"
    )]
    UnsupportedOutput {
        node: String,
        op: String,
        output: String,
        index: usize,
    },

    /// Anything else structurally wrong with the model (unnamed or duplicate initializers).
    #[error("invalid model: {0}")]
    InvalidModel(String),

    /// A graph value that cannot be expressed at the graph's opset when writing.
    #[error(
        "node `{node}` ({op}) cannot be written at opset {opset}: {detail}; raise graph.opset"
    )]
    Unrepresentable {
        node: String,
        op: String,
        opset: i64,
        detail: String,
    },

    /// Reading a control-flow node's subgraph failed.
    #[error("node `{node}` ({op}), subgraph `{attribute}`: {source}")]
    Subgraph {
        node: String,
        op: String,
        attribute: String,
        source: Box<Error>,
    },

    /// The graph failed core validation or shape inference.
    #[error(transparent)]
    Graph(#[from] concord_core::Error),

    /// A model path that is not a regular file, or a file too large to be a model.
    #[error("`{}` cannot be read as a model: {problem}", path.display())]
    ModelFile { path: PathBuf, problem: String },
    /// Reading or writing a file failed.
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}
