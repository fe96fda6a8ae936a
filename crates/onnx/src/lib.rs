//! concord-onnx: reads ONNX models into a [`concord_core::Graph`] and writes a graph back
//! to ONNX.
//!
//! The protobuf messages are declared by hand in [`proto`] with prost derives (no protoc,
//! no build script, no vendored .proto). [`load`] decodes, converts, validates and infers
//! shapes; [`read_graph`] only decodes and converts; [`save`] writes.
//!
//! Invariants:
//! - Only the default ONNX domain at opsets [`MIN_OPSET`]..=[`MAX_OPSET`] (7 to 28) is read;
//!   anything else is a typed [`Error`] naming the node, op, domain or opset. A node of
//!   another domain (ai.onnx.ml, com.microsoft, …) is an [`Error::UnsupportedDomain`]
//!   naming the domain, node and op.
//! - A model at opset 7 to 12 is normalised on import into the one form the IR has, its
//!   opset-13 form: attributes that later became inputs become initializers the node reads
//!   (Slice, Pad, Clip, Dropout, Squeeze, Unsqueeze, Split), Upsample and Resize-10 become
//!   Resize with their asymmetric mapping, Softmax's old 2-D coercion becomes Flatten →
//!   Softmax → Reshape, and its graph says opset 13. An old form with no opset-13
//!   equivalent, and any attribute from before opset 7, is an [`Error::LegacyForm`]
//!   naming node, op, opset and attribute. See `legacy.rs`.
//! - Only opsets [`MIN_WRITE_OPSET`]..=[`MAX_OPSET`] (13 to 28) are written; an older
//!   `graph.opset` is an [`Error::WriteOpsetTooOld`].
//! - Every attribute of a node is either mapped to a typed field of its [`concord_core::Op`]
//!   (ONNX defaults applied) or refused: nothing that changes the result is silently
//!   ignored. Optional extra outputs Concord does not compute (MaxPool's Indices, Dropout's
//!   mask, LayerNormalization's Mean and InvStdDev, BatchNormalization's training outputs)
//!   are dropped when nothing reads them and refused otherwise.
//! - Tensors of every dense numeric type (float64/32/16, bfloat16, int8 to int64, uint8 to
//!   uint64) and bool keep their type, from raw or typed fields; strings, complex numbers and
//!   the 2-, 4-, 6- and 8-bit formats are refused, naming the type. External and sparse tensor data
//!   are refused.
//! - A graph input that is also an initializer is read as an initializer (a constant), not
//!   as a runtime input.
//! - Nodes without a name get `<OpType>_<index>`; repeated names get a suffix, so node
//!   names are unique.
//! - Nothing here panics on any input bytes: decoding is prost's, and every length, dim and
//!   element count is checked before use.
//! - onnx.checker's structural rules (one value field per tensor and attribute, names,
//!   dims, types, attribute kinds, opset imports, subgraph scoping) are each either
//!   enforced with a typed [`Error`] or accepted on purpose; `docs/onnx-reading.md` lists
//!   every rule, what the reader does and why.

pub mod attrs;
pub mod error;
mod legacy;
mod ops;
pub mod proto;
mod read;
pub mod tensor;
mod write;

pub use error::Error;
pub use legacy::is_legacy_alias;
pub use tensor::tensor_to_proto;
pub use write::{ir_version_for, to_model_proto};

use concord_core::{Graph, Tensor};
use prost::Message;
use std::ops::RangeInclusive;
use std::path::Path;

/// The oldest default-domain opset Concord reads. Opsets 7 to 12 are normalised to their
/// opset-13 forms on import; before 7, binary ops broadcast only by attribute and many ops
/// carry `consumed_inputs`, forms Concord does not read.
pub const MIN_OPSET: i64 = 7;
/// The oldest default-domain opset Concord writes: the writer emits opset-13 forms and
/// newer only.
pub const MIN_WRITE_OPSET: i64 = legacy::FORM_OPSET;
/// The newest default-domain opset Concord reads.
///
/// Opsets 23 and 24 changed none of Concord's ops for the dtypes Concord has: they added
/// element types (4-bit integers and floats, float8e8m0) to Cast, Reshape, Transpose and
/// the other type-generic ops, Cast's `round_mode` (which only rounds to float8e8m0), and
/// new ops (Attention, RMSNormalization, RotaryEmbedding, Swish, TensorScatter), which are
/// refused by name like any op outside the set.
///
/// Opsets 25 to 28 changed these of Concord's ops: Attention gained a sliding window (25;
/// read and computed), Range gained `stash_type` and 16-bit floats (27; the default float32
/// stash is what the reference computes, 0 is refused), SpaceToDepth gained `mode` (28;
/// read and computed), Mod defined `fmod = 0` on floats (28; a floored remainder, which the
/// reference computes at every opset), BitShift gained the signed integer types (28;
/// arithmetic right shifts), and ReduceLogSum and ReduceLogSumExp dropped integer types
/// (28; nothing to read). DepthToSpace 28 only gained a function body. The rest added
/// element types Concord does not hold (2-bit integers in 25, 6-bit floats in 28, refused by
/// name like float8 and int4) or widened type lists to types Concord already reads, and new
/// ops: BitCast and CumProd (26), CausalConvWithState and LinearAttention (27) and SwiGLU
/// (28), all read and computed; the Optional ops are refused by name (not dense tensors).
/// FlexAttention (26) lives in the `ai.onnx.preview` domain, refused as a domain.
pub const MAX_OPSET: i64 = 28;

/// The default-domain opsets Concord reads.
pub fn opset_range() -> RangeInclusive<i64> {
    MIN_OPSET..=MAX_OPSET
}

/// The default-domain opsets Concord writes.
pub fn write_opset_range() -> RangeInclusive<i64> {
    MIN_WRITE_OPSET..=MAX_OPSET
}

/// Decodes an ONNX model, converts it, and returns the validated, topologically sorted,
/// shape-inferred graph ([`Graph::infer_shapes`]: a value whose rank only evaluating a
/// node could tell is typed later, when the net is built and folds constants).
pub fn load(bytes: &[u8]) -> Result<Graph, Error> {
    let mut graph = read_graph(bytes)?;
    graph.infer_shapes()?;
    Ok(graph)
}

/// The largest model file read: protobuf caps one message at 2 GiB, so ONNX keeps larger
/// weights in external data (which Concord does not read).
pub const MAX_MODEL_BYTES: u64 = (2 << 30) - 1;

/// [`load`] on the contents of a file. The file must be a regular file of at most
/// [`MAX_MODEL_BYTES`]: a FIFO, a device or a directory is refused before it is read, and a
/// file that grows while it is read is cut off at the cap and refused.
pub fn load_file(path: &Path) -> Result<Graph, Error> {
    load_file_within(path, MAX_MODEL_BYTES)
}

/// [`load_file`] with a smaller cap: the file must also be at most `max_bytes` (a net's
/// memory budget), checked before it is read.
pub fn load_file_within(path: &Path, max_bytes: u64) -> Result<Graph, Error> {
    load(&read_model_file(path, max_bytes.min(MAX_MODEL_BYTES))?)
}

fn read_model_file(path: &Path, cap: u64) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    let too_large = |bytes: u64| Error::ModelFile {
        path: path.to_path_buf(),
        problem: if cap < MAX_MODEL_BYTES {
            format!("{bytes} bytes, more than the memory limit of {cap} bytes")
        } else {
            format!("{bytes} bytes, more than the {MAX_MODEL_BYTES} a model may have")
        },
    };
    if !meta.is_file() {
        return Err(Error::ModelFile {
            path: path.to_path_buf(),
            problem: "not a regular file".into(),
        });
    }
    if meta.len() > cap {
        return Err(too_large(meta.len()));
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > cap {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Decodes and converts an ONNX model without validating it or inferring shapes. (A model
/// of opset 7 to 10 whose Clip bounds or Pad value were attributes, and that may hold f16
/// data, is inferred on a copy to give those bounds the data's dtype.)
pub fn read_graph(bytes: &[u8]) -> Result<Graph, Error> {
    let model = read::decode_model(bytes)?;
    read::graph_from_model(&model)
}

/// Converts an already decoded model without validating it or inferring shapes.
pub fn graph_from_model(model: &proto::ModelProto) -> Result<Graph, Error> {
    read::graph_from_model(model)
}

/// Encodes a graph as an ONNX model (see [`to_model_proto`]).
pub fn save(graph: &Graph) -> Result<Vec<u8>, Error> {
    Ok(to_model_proto(graph)?.encode_to_vec())
}

/// Reads one serialized TensorProto, as in the ONNX node tests' `input_*.pb` and
/// `output_*.pb` files; returns its name and value.
pub fn read_tensor_proto(bytes: &[u8]) -> Result<(String, Tensor), Error> {
    let proto = proto::TensorProto::decode(bytes).map_err(|e| Error::Decode {
        what: "the tensor",
        detail: e.to_string(),
    })?;
    let tensor = tensor::tensor_from_proto(&proto, &proto.name)?;
    Ok((proto.name, tensor))
}
