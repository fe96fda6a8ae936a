//! The one place that knows each op's ONNX attributes, in both directions: [`read_op`] turns
//! an op type and its attributes into an [`Op`], [`write_op`] turns an [`Op`] back into
//! attributes. The structured ops (Conv, pooling, reductions, Resize) keep their reader and
//! writer side by side below so that a change to one is seen next to the other.
//!
//! Reading sees opset-13-and-newer forms only (older nodes were rewritten by `legacy.rs`),
//! applies the ONNX defaults (opsets 13 to 28) and refuses attribute values Concord does
//! not compute. Writing emits every attribute whose value differs from its ONNX default,
//! plus the required ones, and refuses values the target opset cannot express.

use crate::attrs::{self, Attrs};
use crate::error::Error;
use crate::proto::AttributeProto;
use crate::tensor::{dtype_from_onnx, dtype_to_onnx, tensor_from_proto, tensor_to_proto};
use crate::write::subgraph_proto;
use concord_core::op::{
    ArgReduce, AspectRatioPolicy, AttrDefault, AutoPad, Binary, CoordinateTransform,
    LinearAttentionRule, LossReduction, NearestMode, PadMode, Pool, Reduce, ReduceKind, Resize,
    ResizeMode, ScatterReduction, Unary, Variadic,
};
use concord_core::{op, DType, Node, Op, Tensor};

/// What the reader knows about the node besides its attributes.
#[derive(Clone, Copy, Debug)]
pub struct NodeContext<'a> {
    /// The opset whose form the node is in: the model's, or 13 for a node of opset 7 to 12
    /// that `legacy.rs` rewrote.
    pub opset: i64,
    /// Inputs after ONNX's empty names became `None`.
    pub inputs: &'a [Option<String>],
    pub num_outputs: usize,
}

/// An op's attributes as written, plus a Reduce `axes` value that the target opset takes
/// as an input instead of an attribute (the writer adds it as an initializer).
#[derive(Clone, Debug, Default)]
pub struct WrittenOp {
    pub attributes: Vec<AttributeProto>,
    pub axes_input: Option<Vec<i64>>,
}

/// The first opset of the default domain in which `op_type` exists and Concord reads it
/// (from the op's schema in concord-core; older forms are normalised on import); `None` for
/// an op Concord does not know.
pub fn since_version(op_type: &str) -> Option<i64> {
    op::schema_of("", op_type).map(|s| s.since)
}

/// How many leading outputs Concord computes for ops whose trailing outputs are optional
/// extras (training statistics, pooling indices, dropout masks); `None` for ops whose every
/// output is computed.
pub fn computed_outputs(op: &Op) -> Option<usize> {
    match op {
        Op::BatchNormalization { .. } => Some(1),
        _ => None,
    }
}

/// The index of the first optional output of ops whose trailing outputs Concord computes
/// but a model may leave unread; the reader drops those that nothing reads.
pub fn optional_outputs_from(op: &Op) -> Option<usize> {
    match op {
        // MaxPool's Indices are computed by the reference only; dropping them where
        // nothing reads them keeps MaxPool on the device executors.
        Op::Dropout | Op::LayerNormalization { .. } | Op::MaxPool(_) => Some(1),
        _ => None,
    }
}

/// Reads the op of a node. Every attribute must be one the op has; [`Attrs::finish`] is
/// called here.
pub fn read_op(op_type: &str, a: &Attrs, ctx: &NodeContext) -> Result<Op, Error> {
    let known = since_version(op_type).is_some_and(|since| since <= ctx.opset);
    if !known {
        return Err(Error::UnknownOp {
            op: op_type.to_string(),
            node: a.node().to_string(),
            opset: ctx.opset,
        });
    }
    if let Some(unary) = Unary::from_name(op_type) {
        let op = Op::Unary(read_unary(unary, a)?);
        a.finish()?;
        return Ok(op);
    }
    if let Some(binary) = Binary::from_name(op_type) {
        let op = Op::Binary(match binary {
            Binary::Mod { .. } => Binary::Mod {
                fmod: a.flag_or("fmod", false)?,
            },
            Binary::BitShift { .. } => Binary::BitShift {
                left: match a.string("direction")?.as_deref() {
                    Some("LEFT") => true,
                    Some("RIGHT") => false,
                    Some(other) => {
                        return Err(a.error("direction", format!("`{other}` is not LEFT or RIGHT")))
                    }
                    None => return Err(a.missing("direction")),
                },
            },
            other => other,
        });
        a.finish()?;
        return Ok(op);
    }
    if let Some(kind) = ReduceKind::from_name(op_type) {
        let op = Op::Reduce(kind, read_reduce(a, ctx)?);
        a.finish()?;
        return Ok(op);
    }
    if let Some(variadic) = Variadic::from_name(op_type) {
        if ctx.inputs.is_empty() {
            return Err(a.error("inputs", format!("{op_type} needs at least one input")));
        }
        a.finish()?;
        return Ok(Op::Variadic(variadic));
    }
    let op = match op_type {
        "Conv" => Op::Conv(read_conv(a)?),
        "Gemm" => Op::Gemm(op::Gemm {
            alpha: a.float_or("alpha", 1.0)?,
            beta: a.float_or("beta", 1.0)?,
            trans_a: a.flag_or("transA", false)?,
            trans_b: a.flag_or("transB", false)?,
        }),
        "MatMul" => Op::MatMul,
        "Clip" => Op::Clip,
        "Softmax" => Op::Softmax {
            axis: a.int_or("axis", -1)?,
        },
        "LayerNormalization" => {
            // stash_type picks the precision of the mean and variance; the reference
            // executor accumulates in f64 whatever it says, so it does not change results.
            a.ignore("stash_type");
            Op::LayerNormalization {
                axis: a.int_or("axis", -1)?,
                epsilon: a.float_or("epsilon", NORM_EPSILON)?,
            }
        }
        "BatchNormalization" => {
            // momentum only updates running statistics in training mode, refused below.
            a.ignore("momentum");
            if a.flag_or("training_mode", false)? {
                return Err(a.error(
                    "training_mode",
                    "training mode is not supported: export the model in inference (eval) mode",
                ));
            }
            Op::BatchNormalization {
                epsilon: a.float_or("epsilon", NORM_EPSILON)?,
            }
        }
        "MaxPool" => Op::MaxPool(read_pool(a, PoolKind::Max)?),
        "AveragePool" => Op::AveragePool(read_pool(a, PoolKind::Average)?),
        "GlobalAveragePool" => Op::GlobalAveragePool,
        "GlobalMaxPool" => Op::GlobalMaxPool,
        "GlobalLpPool" => Op::GlobalLpPool {
            p: a.int_or("p", 2)?,
        },
        "LpPool" => {
            let p = a.int_or("p", 2)?;
            Op::LpPool(read_pool(a, PoolKind::Lp)?, p)
        }
        "InstanceNormalization" => Op::InstanceNormalization {
            epsilon: a.float_or("epsilon", NORM_EPSILON)?,
        },
        "GroupNormalization" => {
            // As LayerNormalization's: the reference accumulates in f64 whatever it says.
            a.ignore("stash_type");
            let g = a
                .int("num_groups")?
                .ok_or_else(|| a.missing("num_groups"))?;
            Op::GroupNormalization {
                epsilon: a.float_or("epsilon", NORM_EPSILON)?,
                num_groups: usize::try_from(g)
                    .ok()
                    .filter(|&g| g >= 1)
                    .ok_or_else(|| a.error("num_groups", format!("must be at least 1, got {g}")))?,
            }
        }
        "RMSNormalization" => {
            a.ignore("stash_type");
            Op::RMSNormalization {
                axis: a.int_or("axis", -1)?,
                epsilon: a.float_or("epsilon", NORM_EPSILON)?,
            }
        }
        "LpNormalization" => Op::LpNormalization {
            axis: a.int_or("axis", -1)?,
            p: a.int_or("p", 2)?,
        },
        "MeanVarianceNormalization" => Op::MeanVarianceNormalization {
            axes: a.ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]),
        },
        "LRN" => {
            let size = a.int("size")?.ok_or_else(|| a.missing("size"))?;
            Op::LRN {
                alpha: a.float_or("alpha", 1e-4)?,
                beta: a.float_or("beta", 0.75)?,
                bias: a.float_or("bias", 1.0)?,
                size: usize::try_from(size)
                    .ok()
                    .filter(|&s| s >= 1)
                    .ok_or_else(|| a.error("size", format!("must be at least 1, got {size}")))?,
            }
        }
        "Attention" => {
            let heads = |name: &str| -> Result<Option<usize>, Error> {
                a.int(name)?
                    .map(|h| {
                        usize::try_from(h)
                            .ok()
                            .filter(|&h| h >= 1)
                            .ok_or_else(|| a.error(name, format!("must be at least 1, got {h}")))
                    })
                    .transpose()
            };
            let mode = a.int_or("qk_matmul_output_mode", 0)?;
            if !(0..=3).contains(&mode) {
                return Err(a.error(
                    "qk_matmul_output_mode",
                    format!("must be 0 to 3, got {mode}"),
                ));
            }
            let softmax_precision = a
                .int("softmax_precision")?
                .map(|code| {
                    i32::try_from(code)
                        .ok()
                        .and_then(dtype_from_onnx)
                        .ok_or_else(|| {
                            a.error("softmax_precision", format!("unknown data type {code}"))
                        })
                })
                .transpose()?;
            // Opset 25's sliding window; before it the attributes do not exist, and a node
            // that carries them is refused rather than read with a meaning it lacks.
            let mut window = [-1i64; 2];
            for (size, name) in window
                .iter_mut()
                .zip(["left_window_size", "right_window_size"])
            {
                if ctx.opset >= 25 {
                    *size = a.int_or(name, -1)?;
                    if *size < -1 {
                        return Err(a.error(
                            name,
                            format!("must be -1 (unbounded) or at least 0, got {size}"),
                        ));
                    }
                } else if a.int(name)?.is_some() {
                    return Err(a.error(name, format!("{name} exists from opset 25")));
                }
            }
            if ctx.inputs.len() > 6 && ctx.opset < 24 {
                return Err(a.error(
                    "nonpad_kv_seqlen",
                    "input 6 (nonpad_kv_seqlen) exists from opset 24",
                ));
            }
            Op::Attention {
                is_causal: a.flag_or("is_causal", false)?,
                kv_num_heads: heads("kv_num_heads")?,
                q_num_heads: heads("q_num_heads")?,
                qk_matmul_output_mode: mode,
                scale: a.float("scale")?,
                softcap: a.float_or("softcap", 0.0)?,
                softmax_precision,
                left_window_size: window[0],
                right_window_size: window[1],
            }
        }
        "RotaryEmbedding" => {
            let heads =
                a.int("num_heads")?
                    .map(|h| {
                        usize::try_from(h).ok().filter(|&h| h >= 1).ok_or_else(|| {
                            a.error("num_heads", format!("must be at least 1, got {h}"))
                        })
                    })
                    .transpose()?;
            let dim = a.int_or("rotary_embedding_dim", 0)?;
            Op::RotaryEmbedding {
                interleaved: a.flag_or("interleaved", false)?,
                num_heads: heads,
                rotary_embedding_dim: usize::try_from(dim).map_err(|_| {
                    a.error(
                        "rotary_embedding_dim",
                        format!("must be 0 or more, got {dim}"),
                    )
                })?,
            }
        }
        "ArgMax" => Op::ArgMax(read_arg_reduce(a)?),
        "ArgMin" => Op::ArgMin(read_arg_reduce(a)?),
        "LogSoftmax" => Op::LogSoftmax {
            axis: a.int_or("axis", -1)?,
        },
        "Hardmax" => Op::Hardmax {
            axis: a.int_or("axis", -1)?,
        },
        "Concat" => Op::Concat {
            axis: a.int("axis")?.ok_or_else(|| a.missing("axis"))?,
        },
        "Split" => {
            if let Some(n) = a.int("num_outputs")? {
                if usize::try_from(n).ok() != Some(ctx.num_outputs) {
                    return Err(a.error(
                        "num_outputs",
                        format!(
                            "is {n}, but the node has {} outputs; they must agree",
                            ctx.num_outputs
                        ),
                    ));
                }
            }
            Op::Split {
                axis: a.int_or("axis", 0)?,
                num_outputs: ctx.num_outputs,
            }
        }
        "Slice" => Op::Slice,
        "Gather" => Op::Gather {
            axis: a.int_or("axis", 0)?,
        },
        "Reshape" => Op::Reshape {
            allowzero: a.flag_or("allowzero", false)?,
        },
        "Flatten" => Op::Flatten {
            axis: a.int_or("axis", 1)?,
        },
        "Transpose" => Op::Transpose {
            perm: a.ints("perm")?,
        },
        "Squeeze" => Op::Squeeze,
        "Unsqueeze" => Op::Unsqueeze,
        "Shape" => Op::Shape {
            start: a.int_or("start", 0)?,
            end: a.int("end")?,
        },
        "Cast" => {
            // saturate only affects casts to float8 types, and round_mode (opset 24) only
            // casts to float8e8m0, which Concord refuses anyway.
            a.ignore("saturate");
            a.ignore("round_mode");
            let code = a.int("to")?.ok_or_else(|| a.missing("to"))?;
            let to = i32::try_from(code)
                .ok()
                .and_then(dtype_from_onnx)
                .ok_or_else(|| Error::UnsupportedDType {
                    what: "the Cast target of node",
                    name: a.node().to_string(),
                    data_type: i32::try_from(code).unwrap_or(-1),
                })?;
            Op::Cast { to }
        }
        "Identity" => Op::Identity,
        "Dropout" => {
            // The seed only matters in training mode; inference Dropout is the identity.
            a.ignore("seed");
            Op::Dropout
        }
        "Constant" => Op::Constant {
            value: read_constant(a)?,
        },
        "Pad" => Op::Pad {
            mode: match a.string("mode")?.as_deref() {
                None | Some("constant") => PadMode::Constant,
                Some("reflect") => PadMode::Reflect,
                Some("edge") => PadMode::Edge,
                Some("wrap") => PadMode::Wrap,
                Some(other) => {
                    return Err(a.error(
                        "mode",
                        format!("`{other}` is not a Pad mode (constant, reflect, edge, wrap)"),
                    ))
                }
            },
        },
        "Resize" => {
            // Both exist from opset 18; an older model may still spell out the default
            // policy, which changes nothing.
            if ctx.opset < 18 {
                let policy = a.string("keep_aspect_ratio_policy")?;
                let name = if a.has("axes") {
                    Some("axes")
                } else if policy.as_deref().is_some_and(|p| p != "stretch") {
                    Some("keep_aspect_ratio_policy")
                } else {
                    None
                };
                if let Some(name) = name {
                    return Err(a.error(
                        name,
                        format!("exists from opset 18; the model imports {}", ctx.opset),
                    ));
                }
            }
            Op::Resize(read_resize(a)?)
        }
        "Where" => Op::Where,
        "Expand" => Op::Expand,
        "ConstantOfShape" => Op::ConstantOfShape {
            value: match a.tensor("value")? {
                Some(proto) => {
                    let t = tensor_from_proto(proto, a.node())?;
                    if t.len() != 1 {
                        return Err(a.error(
                            "value",
                            format!("must hold one element, it has shape {}", t.shape()),
                        ));
                    }
                    t
                }
                // The spec's default: a float32 zero.
                None => Tensor::from_f32([1], vec![0.0])?,
            },
        },
        "Range" => {
            // Opset 27's `stash_type` says in what precision float16 and bfloat16 ranges
            // are computed: 1 (the default) in float32, rounding once to the output type.
            // The reference computes every float range in f64 and rounds once, which is
            // that (up to the double rounding of a tie through f32). The value 0 asks for
            // each element to be computed in the 16-bit type itself, which Concord does not
            // do, so it is refused rather than ignored.
            if ctx.opset >= 27 {
                let stash = a.int_or("stash_type", 1)?;
                if stash != 1 {
                    return Err(a.error(
                        "stash_type",
                        format!("{stash} is not supported; only 1 (compute in float32)"),
                    ));
                }
            }
            Op::Range
        }
        "Tile" => Op::Tile,
        "CumSum" => Op::CumSum {
            exclusive: a.flag_or("exclusive", false)?,
            reverse: a.flag_or("reverse", false)?,
        },
        "CumProd" => Op::CumProd {
            exclusive: a.flag_or("exclusive", false)?,
            reverse: a.flag_or("reverse", false)?,
        },
        "BitCast" => {
            let code = a.int("to")?.ok_or_else(|| a.missing("to"))?;
            let to = i32::try_from(code)
                .ok()
                .and_then(dtype_from_onnx)
                .ok_or_else(|| Error::UnsupportedDType {
                    what: "the BitCast target of node",
                    name: a.node().to_string(),
                    data_type: i32::try_from(code).unwrap_or(-1),
                })?;
            Op::BitCast { to }
        }
        "SwiGLU" => Op::SwiGLU {
            alpha: a.float_or("alpha", 1.0)?,
        },
        "LinearAttention" => {
            // chunk_size only tunes a chunk-parallel schedule; the output is the
            // sequential recurrence's whatever it is (the spec says so).
            a.ignore("chunk_size");
            let heads = |name: &str| -> Result<usize, Error> {
                let h = a.int(name)?.ok_or_else(|| a.missing(name))?;
                usize::try_from(h)
                    .ok()
                    .filter(|&h| h >= 1)
                    .ok_or_else(|| a.error(name, format!("must be at least 1, got {h}")))
            };
            let rule = a.string("update_rule")?;
            let rule = rule.as_deref().unwrap_or("gated_delta");
            Op::LinearAttention {
                kv_num_heads: heads("kv_num_heads")?,
                q_num_heads: heads("q_num_heads")?,
                scale: a.float_or("scale", 0.0)?,
                update_rule: LinearAttentionRule::from_name(rule).ok_or_else(|| {
                    a.error(
                        "update_rule",
                        format!("`{rule}` is not linear, gated, delta or gated_delta"),
                    )
                })?,
            }
        }
        "CausalConvWithState" => Op::CausalConvWithState {
            silu: match a.string("activation")?.as_deref() {
                None | Some("none") => false,
                Some("silu" | "swish") => true,
                Some(other) => {
                    return Err(a.error(
                        "activation",
                        format!("`{other}` is not none, silu or swish"),
                    ))
                }
            },
        },
        "GatherElements" => Op::GatherElements {
            axis: a.int_or("axis", 0)?,
        },
        "GatherND" => Op::GatherND {
            batch_dims: a.int_or("batch_dims", 0)?,
        },
        "ScatterElements" => Op::ScatterElements {
            axis: a.int_or("axis", 0)?,
            reduction: read_reduction(a)?,
        },
        "ScatterND" => Op::ScatterND {
            reduction: read_reduction(a)?,
        },
        "OneHot" => Op::OneHot {
            axis: a.int_or("axis", -1)?,
        },
        "Trilu" => Op::Trilu {
            upper: a.flag_or("upper", true)?,
        },
        "NonZero" => Op::NonZero,
        "Size" => Op::Size,
        "DepthToSpace" => Op::DepthToSpace {
            blocksize: read_blocksize(a)?,
            crd: match a.string("mode")?.as_deref() {
                None | Some("DCR") => false,
                Some("CRD") => true,
                Some(other) => return Err(a.error("mode", format!("`{other}` is not DCR or CRD"))),
            },
        },
        "SpaceToDepth" => Op::SpaceToDepth {
            blocksize: read_blocksize(a)?,
            // `mode` exists from opset 28; an older node that carries it is refused by
            // `finish` as an attribute the op does not have.
            crd: if ctx.opset >= 28 {
                match a.string("mode")?.as_deref() {
                    None | Some("DCR") => false,
                    Some("CRD") => true,
                    Some(other) => {
                        return Err(a.error("mode", format!("`{other}` is not DCR or CRD")))
                    }
                }
            } else {
                false
            },
        },
        "EyeLike" => Op::EyeLike {
            dtype: match a.int("dtype")? {
                None => None,
                Some(code) => Some(
                    i32::try_from(code)
                        .ok()
                        .and_then(dtype_from_onnx)
                        .ok_or_else(|| Error::UnsupportedDType {
                            what: "the EyeLike dtype of node",
                            name: a.node().to_string(),
                            data_type: i32::try_from(code).unwrap_or(-1),
                        })?,
                ),
            },
            k: a.int_or("k", 0)?,
        },
        "TopK" => Op::TopK {
            axis: a.int_or("axis", -1)?,
            largest: a.flag_or("largest", true)?,
            sorted: a.flag_or("sorted", true)?,
        },
        "CastLike" => {
            // As Cast: saturate only affects float8 targets, which Concord refuses.
            a.ignore("saturate");
            a.ignore("round_mode");
            Op::CastLike
        }
        "Compress" => Op::Compress {
            axis: a.int("axis")?,
        },
        "CenterCropPad" => Op::CenterCropPad {
            axes: a.ints("axes")?,
        },
        "ReverseSequence" => Op::ReverseSequence {
            batch_axis: a.int_or("batch_axis", 1)?,
            time_axis: a.int_or("time_axis", 0)?,
        },
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => {
            let reduction = match a.string("reduction")?.as_deref() {
                None => LossReduction::Mean,
                Some(name) => LossReduction::from_name(name).ok_or_else(|| {
                    a.error("reduction", format!("`{name}` is not none, sum or mean"))
                })?,
            };
            let ignore_index = a.int("ignore_index")?;
            if op_type == "NegativeLogLikelihoodLoss" {
                Op::NegativeLogLikelihoodLoss {
                    reduction,
                    ignore_index,
                }
            } else {
                Op::SoftmaxCrossEntropyLoss {
                    reduction,
                    ignore_index,
                }
            }
        }
        "QuantizeLinear" => {
            // saturate only affects float8 outputs, which Concord refuses (no such dtype).
            a.ignore("saturate");
            Op::QuantizeLinear {
                axis: a.int_or("axis", 1)?,
                block_size: read_block_size(a)?,
                output_dtype: read_optional_dtype(a, "output_dtype")?,
                precision: read_optional_dtype(a, "precision")?,
            }
        }
        "DequantizeLinear" => Op::DequantizeLinear {
            axis: a.int_or("axis", 1)?,
            block_size: read_block_size(a)?,
            output_dtype: read_optional_dtype(a, "output_dtype")?,
        },
        "DynamicQuantizeLinear" => Op::DynamicQuantizeLinear,
        "MatMulInteger" => Op::MatMulInteger,
        "QLinearMatMul" => Op::QLinearMatMul,
        "ConvInteger" => Op::ConvInteger(read_conv(a)?),
        "QLinearConv" => Op::QLinearConv(read_conv(a)?),
        "LSTM" | "GRU" | "RNN" => Op::Recurrent(read_recurrent(op_type, a, ctx)?),
        "Einsum" => {
            let equation = a.string("equation")?.ok_or_else(|| a.missing("equation"))?;
            // Parsed here for its syntax only (ranks are checked by inference), so that a
            // malformed equation is refused when the model is read.
            if let Some(bad) = equation
                .chars()
                .find(|c| !(c.is_ascii_alphabetic() || " .,->".contains(*c)))
            {
                return Err(a.error("equation", format!("`{equation}` holds `{bad}`")));
            }
            Op::Einsum { equation }
        }
        "Det" => Op::Det,
        "NonMaxSuppression" => Op::NonMaxSuppression {
            center_point_box: match a.int_or("center_point_box", 0)? {
                0 => false,
                1 => true,
                other => return Err(a.error("center_point_box", format!("{other} is not 0 or 1"))),
            },
        },
        "Unique" => Op::Unique {
            axis: a.int("axis")?,
            sorted: a.flag_or("sorted", true)?,
        },
        "MaxUnpool" => {
            let kernel_shape = a.extents("kernel_shape", 1)?;
            if kernel_shape.is_empty() {
                return Err(a.missing("kernel_shape"));
            }
            Op::MaxUnpool {
                kernel_shape,
                pads: a.extents("pads", 0)?,
                strides: a.extents("strides", 1)?,
            }
        }
        "ConvTranspose" => Op::ConvTranspose(op::ConvTranspose {
            conv: read_conv(a)?,
            output_padding: a.extents("output_padding", 0)?,
            output_shape: a.extents("output_shape", 0)?,
        }),
        "GridSample" => {
            // Opset 20 renamed bilinear and bicubic to linear and cubic (and allowed N-D
            // inputs); each opset accepts its own spelling only, as onnxruntime does.
            let (linear, cubic) = if ctx.opset >= 20 {
                ("linear", "cubic")
            } else {
                ("bilinear", "bicubic")
            };
            let mode = match a.string("mode")?.as_deref() {
                None => op::GridSampleMode::Linear,
                Some("nearest") => op::GridSampleMode::Nearest,
                Some(m) if m == linear => op::GridSampleMode::Linear,
                Some(m) if m == cubic => op::GridSampleMode::Cubic,
                Some(other) => {
                    return Err(a.error(
                        "mode",
                        format!(
                            "`{other}` is not {linear}, nearest or {cubic} at opset {}",
                            ctx.opset
                        ),
                    ))
                }
            };
            let padding_mode = match a.string("padding_mode")?.as_deref() {
                None | Some("zeros") => op::GridPadding::Zeros,
                Some("border") => op::GridPadding::Border,
                Some("reflection") => op::GridPadding::Reflection,
                Some(other) => {
                    return Err(a.error(
                        "padding_mode",
                        format!("`{other}` is not zeros, border or reflection"),
                    ))
                }
            };
            Op::GridSample {
                mode,
                padding_mode,
                align_corners: a.flag_or("align_corners", false)?,
            }
        }
        "AffineGrid" => Op::AffineGrid {
            align_corners: a.flag_or("align_corners", false)?,
        },
        "RoiAlign" => {
            let mode = match a.string("mode")?.as_deref() {
                None | Some("avg") => op::RoiAlignMode::Avg,
                Some("max") => op::RoiAlignMode::Max,
                Some(other) => return Err(a.error("mode", format!("`{other}` is not avg or max"))),
            };
            // Opset 16 added coordinate_transformation_mode (default half_pixel); opset 10's
            // form has no such attribute and behaves as output_half_pixel, so before 16 the
            // attribute is refused (legacy.rs refuses it by name for opsets 10 to 12).
            let coordinates = if ctx.opset >= 16 {
                match a.string("coordinate_transformation_mode")?.as_deref() {
                    None | Some("half_pixel") => op::RoiCoordinates::HalfPixel,
                    Some("output_half_pixel") => op::RoiCoordinates::OutputHalfPixel,
                    Some(other) => {
                        return Err(a.error(
                            "coordinate_transformation_mode",
                            format!("`{other}` is not half_pixel or output_half_pixel"),
                        ))
                    }
                }
            } else if a.has("coordinate_transformation_mode") {
                return Err(a.error(
                    "coordinate_transformation_mode",
                    format!(
                        "exists from opset 16; at opset {} RoiAlign always behaves as \
                         output_half_pixel",
                        ctx.opset
                    ),
                ));
            } else {
                op::RoiCoordinates::OutputHalfPixel
            };
            let count = |name: &str, default: i64, min: i64| -> Result<usize, Error> {
                let v = a.int_or(name, default)?;
                usize::try_from(v)
                    .ok()
                    .filter(|_| v >= min)
                    .ok_or_else(|| a.error(name, format!("must be an integer >= {min}, got {v}")))
            };
            Op::RoiAlign(op::RoiAlign {
                mode,
                coordinates,
                output_height: count("output_height", 1, 1)?,
                output_width: count("output_width", 1, 1)?,
                sampling_ratio: count("sampling_ratio", 0, 0)?,
                spatial_scale: a.float_or("spatial_scale", 1.0)?,
            })
        }
        "MaxRoiPool" => {
            let pooled = a.extents("pooled_shape", 1)?;
            let pooled_shape = match pooled[..] {
                [h, w] => [h, w],
                [] => return Err(a.missing("pooled_shape")),
                _ => {
                    return Err(a.error(
                        "pooled_shape",
                        format!("must hold two extents (height, width), got {pooled:?}"),
                    ))
                }
            };
            Op::MaxRoiPool {
                pooled_shape,
                spatial_scale: a.float_or("spatial_scale", 1.0)?,
            }
        }
        "DeformConv" => {
            let at_least_one = |name: &str| -> Result<usize, Error> {
                let v = a.int_or(name, 1)?;
                usize::try_from(v)
                    .ok()
                    .filter(|&g| g >= 1)
                    .ok_or_else(|| a.error(name, format!("must be at least 1, got {v}")))
            };
            Op::DeformConv(op::DeformConv {
                dilations: a.extents("dilations", 1)?,
                group: at_least_one("group")?,
                kernel_shape: a.extents("kernel_shape", 1)?,
                offset_group: at_least_one("offset_group")?,
                pads: a.extents("pads", 0)?,
                strides: a.extents("strides", 1)?,
            })
        }
        "Col2Im" => Op::Col2Im {
            dilations: a.extents("dilations", 1)?,
            pads: a.extents("pads", 0)?,
            strides: a.extents("strides", 1)?,
        },
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => {
            let kind = match op_type {
                "HannWindow" => op::WindowKind::Hann,
                "HammingWindow" => op::WindowKind::Hamming,
                _ => op::WindowKind::Blackman,
            };
            let code = a.int_or("output_datatype", 1)?;
            let dtype = i32::try_from(code)
                .ok()
                .and_then(dtype_from_onnx)
                .filter(|d| *d != DType::Bool)
                .ok_or_else(|| Error::UnsupportedDType {
                    what: "the window output_datatype of node",
                    name: a.node().to_string(),
                    data_type: i32::try_from(code).unwrap_or(-1),
                })?;
            Op::Window {
                kind,
                periodic: a.flag_or("periodic", true)?,
                dtype,
            }
        }
        "DFT" => Op::Dft {
            // From opset 20 the axis is an input (default -2); before, an attribute.
            axis: if ctx.opset >= 20 {
                if a.int("axis")?.is_some() {
                    return Err(a.error("axis", "is an input from opset 20".to_string()));
                }
                None
            } else {
                Some(a.int_or("axis", 1)?)
            },
            inverse: a.flag_or("inverse", false)?,
            onesided: a.flag_or("onesided", false)?,
        },
        "STFT" => Op::Stft {
            onesided: a.flag_or("onesided", true)?,
        },
        "MelWeightMatrix" => Op::MelWeightMatrix {
            dtype: read_dtype(a, "output_datatype", &DType::NUMERIC)?.unwrap_or(DType::F32),
        },
        "RandomNormal" | "RandomUniform" | "RandomNormalLike" | "RandomUniformLike" => {
            Op::Random(read_random(op_type, a)?)
        }
        "Multinomial" => Op::Multinomial {
            sample_size: {
                let n = a.int_or("sample_size", 1)?;
                usize::try_from(n)
                    .map_err(|_| a.error("sample_size", format!("must be 0 or more, got {n}")))?
            },
            dtype: read_dtype(a, "dtype", &[DType::I32, DType::I64])?.unwrap_or(DType::I32),
            seed: read_seed(a)?,
        },
        "Bernoulli" => Op::Bernoulli {
            dtype: read_dtype(a, "dtype", &DType::ALL)?,
            seed: read_seed(a)?,
        },
        "TensorScatter" => Op::TensorScatter {
            axis: a.int_or("axis", -2)?,
            circular: match a.string("mode")?.as_deref() {
                None | Some("linear") => false,
                Some("circular") => true,
                Some(other) => {
                    return Err(a.error("mode", format!("`{other}` is not linear or circular")))
                }
            },
        },
        "TfIdfVectorizer" => Op::TfIdfVectorizer(read_tf_idf(a)?),
        // The schemas and this match list the same ops; reaching here means they disagree.
        _ => {
            return Err(Error::UnknownOp {
                op: op_type.to_string(),
                node: a.node().to_string(),
                opset: ctx.opset,
            })
        }
    };
    a.finish()?;
    Ok(op)
}

/// The attributes of `node`'s op as written at `opset`.
pub fn write_op(node: &Node, opset: i64) -> Result<WrittenOp, Error> {
    let op = &node.op;
    let unrepresentable = |detail: &str| Error::Unrepresentable {
        node: node.name.clone(),
        op: op.name().to_string(),
        opset,
        detail: detail.to_string(),
    };
    let since = op.schema().since;
    if since > opset {
        return Err(unrepresentable(&format!(
            "{} exists from opset {since}",
            op.name()
        )));
    }
    let mut out = WrittenOp::default();
    let at = &mut out.attributes;
    match op {
        Op::Conv(c) => write_conv(c, at),
        Op::Gemm(g) => {
            if g.alpha != 1.0 {
                at.push(attrs::float("alpha", g.alpha));
            }
            if g.beta != 1.0 {
                at.push(attrs::float("beta", g.beta));
            }
            if g.trans_a {
                at.push(attrs::flag("transA", true));
            }
            if g.trans_b {
                at.push(attrs::flag("transB", true));
            }
        }
        Op::Binary(Binary::Mod { fmod }) => {
            if *fmod {
                at.push(attrs::flag("fmod", true));
            }
        }
        Op::Binary(Binary::BitShift { left }) => {
            at.push(attrs::string(
                "direction",
                if *left { "LEFT" } else { "RIGHT" },
            ));
        }
        Op::Unary(u) => write_unary(*u, at),
        Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::Hardmax { axis } => {
            if *axis != -1 {
                at.push(attrs::int("axis", *axis));
            }
        }
        Op::LayerNormalization { axis, epsilon } => {
            if *axis != -1 {
                at.push(attrs::int("axis", *axis));
            }
            if *epsilon != NORM_EPSILON {
                at.push(attrs::float("epsilon", *epsilon));
            }
        }
        Op::BatchNormalization { epsilon } => {
            if *epsilon != NORM_EPSILON {
                at.push(attrs::float("epsilon", *epsilon));
            }
        }
        Op::MaxPool(p) => {
            write_pool(p, PoolKind::Max, opset, at).map_err(|d| unrepresentable(&d))?
        }
        Op::AveragePool(p) => {
            write_pool(p, PoolKind::Average, opset, at).map_err(|d| unrepresentable(&d))?
        }
        Op::Reduce(_, r) => {
            out.axes_input =
                write_reduce(op, r, node, opset, at).map_err(|d| unrepresentable(&d))?
        }
        Op::ArgMax(r) | Op::ArgMin(r) => {
            if r.axis != 0 {
                at.push(attrs::int("axis", r.axis));
            }
            if !r.keepdims {
                at.push(attrs::flag("keepdims", false));
            }
            if r.select_last_index {
                at.push(attrs::flag("select_last_index", true));
            }
        }
        Op::Concat { axis } => at.push(attrs::int("axis", *axis)),
        Op::Split { axis, num_outputs } => {
            if *axis != 0 {
                at.push(attrs::int("axis", *axis));
            }
            // From opset 18 a Split without the `split` input must say how many outputs.
            let has_split_input = matches!(node.inputs.get(1), Some(Some(_)));
            if opset >= 18 && !has_split_input {
                at.push(attrs::int(
                    "num_outputs",
                    i64::try_from(*num_outputs).unwrap_or(i64::MAX),
                ));
            }
        }
        Op::Gather { axis } => {
            if *axis != 0 {
                at.push(attrs::int("axis", *axis));
            }
        }
        Op::Reshape { allowzero } => {
            if *allowzero {
                if opset < 14 {
                    return Err(unrepresentable("Reshape's allowzero exists from opset 14"));
                }
                at.push(attrs::flag("allowzero", true));
            }
        }
        Op::Flatten { axis } => {
            if *axis != 1 {
                at.push(attrs::int("axis", *axis));
            }
        }
        Op::Transpose { perm } => {
            if let Some(perm) = perm {
                at.push(attrs::ints("perm", perm));
            }
        }
        Op::Shape { start, end } => {
            if (*start != 0 || end.is_some()) && opset < 15 {
                return Err(unrepresentable("Shape's start and end exist from opset 15"));
            }
            if *start != 0 {
                at.push(attrs::int("start", *start));
            }
            if let Some(end) = end {
                at.push(attrs::int("end", *end));
            }
        }
        Op::Cast { to } | Op::BitCast { to } => {
            at.push(attrs::int("to", i64::from(dtype_to_onnx(*to))))
        }
        Op::SwiGLU { alpha } => {
            if *alpha != 1.0 {
                at.push(attrs::float("alpha", *alpha));
            }
        }
        Op::LinearAttention {
            kv_num_heads,
            q_num_heads,
            scale,
            update_rule,
        } => {
            at.push(attrs::int("kv_num_heads", *kv_num_heads as i64));
            at.push(attrs::int("q_num_heads", *q_num_heads as i64));
            if *scale != 0.0 {
                at.push(attrs::float("scale", *scale));
            }
            at.push(attrs::string("update_rule", update_rule.name()));
        }
        Op::CausalConvWithState { silu } => {
            if *silu {
                at.push(attrs::string("activation", "silu"));
            }
        }
        Op::Constant { value } => at.push(attrs::tensor("value", tensor_to_proto("", value))),
        Op::Pad { mode } => {
            let name = match mode {
                PadMode::Constant => None,
                PadMode::Reflect => Some("reflect"),
                PadMode::Edge => Some("edge"),
                PadMode::Wrap if opset < 19 => {
                    return Err(unrepresentable("Pad mode wrap exists from opset 19"))
                }
                PadMode::Wrap => Some("wrap"),
            };
            if let Some(name) = name {
                at.push(attrs::string("mode", name));
            }
        }
        Op::Resize(r) => write_resize(r, opset, at).map_err(|d| unrepresentable(&d))?,
        Op::GlobalLpPool { p } if *p != 2 => at.push(attrs::int("p", *p)),
        Op::LpPool(pool, p) => {
            write_pool(pool, PoolKind::Lp, opset, at).map_err(|d| unrepresentable(&d))?;
            if *p != 2 {
                at.push(attrs::int("p", *p));
            }
        }
        Op::InstanceNormalization { epsilon } if *epsilon != NORM_EPSILON => {
            at.push(attrs::float("epsilon", *epsilon))
        }
        Op::GroupNormalization {
            epsilon,
            num_groups,
        } => {
            if *epsilon != NORM_EPSILON {
                at.push(attrs::float("epsilon", *epsilon));
            }
            at.push(attrs::int("num_groups", *num_groups as i64));
        }
        Op::RMSNormalization { axis, epsilon } => {
            if *axis != -1 {
                at.push(attrs::int("axis", *axis));
            }
            if *epsilon != NORM_EPSILON {
                at.push(attrs::float("epsilon", *epsilon));
            }
        }
        Op::LpNormalization { axis, p } => {
            if *axis != -1 {
                at.push(attrs::int("axis", *axis));
            }
            if *p != 2 {
                at.push(attrs::int("p", *p));
            }
        }
        Op::MeanVarianceNormalization { axes } => at.push(attrs::ints("axes", axes)),
        Op::LRN {
            alpha,
            beta,
            bias,
            size,
        } => {
            at.push(attrs::float("alpha", *alpha));
            at.push(attrs::float("beta", *beta));
            at.push(attrs::float("bias", *bias));
            at.push(attrs::int("size", *size as i64));
        }
        Op::Attention {
            is_causal,
            kv_num_heads,
            q_num_heads,
            qk_matmul_output_mode,
            scale,
            softcap,
            softmax_precision,
            left_window_size,
            right_window_size,
        } => {
            for (name, size) in [
                ("left_window_size", *left_window_size),
                ("right_window_size", *right_window_size),
            ] {
                if size != -1 {
                    if opset < 25 {
                        return Err(unrepresentable(
                            "Attention's sliding window exists from opset 25",
                        ));
                    }
                    at.push(attrs::int(name, size));
                }
            }
            if *is_causal {
                at.push(attrs::flag("is_causal", true));
            }
            if let Some(h) = kv_num_heads {
                at.push(attrs::int("kv_num_heads", *h as i64));
            }
            if let Some(h) = q_num_heads {
                at.push(attrs::int("q_num_heads", *h as i64));
            }
            if *qk_matmul_output_mode != 0 {
                at.push(attrs::int("qk_matmul_output_mode", *qk_matmul_output_mode));
            }
            if let Some(scale) = scale {
                at.push(attrs::float("scale", *scale));
            }
            if *softcap != 0.0 {
                at.push(attrs::float("softcap", *softcap));
            }
            if let Some(d) = softmax_precision {
                at.push(attrs::int(
                    "softmax_precision",
                    i64::from(dtype_to_onnx(*d)),
                ));
            }
        }
        Op::RotaryEmbedding {
            interleaved,
            num_heads,
            rotary_embedding_dim,
        } => {
            if *interleaved {
                at.push(attrs::flag("interleaved", true));
            }
            if let Some(h) = num_heads {
                at.push(attrs::int("num_heads", *h as i64));
            }
            if *rotary_embedding_dim != 0 {
                at.push(attrs::int(
                    "rotary_embedding_dim",
                    *rotary_embedding_dim as i64,
                ));
            }
        }
        Op::GlobalMaxPool | Op::GlobalLpPool { .. } | Op::InstanceNormalization { .. } => {}
        Op::ConstantOfShape { value } => {
            at.push(attrs::tensor("value", tensor_to_proto("value", value)));
        }
        Op::CumSum { exclusive, reverse } | Op::CumProd { exclusive, reverse } => {
            if *exclusive {
                at.push(attrs::flag("exclusive", true));
            }
            if *reverse {
                at.push(attrs::flag("reverse", true));
            }
        }
        Op::GatherElements { axis } | Op::OneHot { axis } if *axis != op_default_axis(op) => {
            at.push(attrs::int("axis", *axis));
        }
        Op::GatherND { batch_dims } if *batch_dims != 0 => {
            at.push(attrs::int("batch_dims", *batch_dims));
        }
        Op::ScatterElements { axis, reduction } => {
            if *axis != 0 {
                at.push(attrs::int("axis", *axis));
            }
            if *reduction != ScatterReduction::None {
                at.push(attrs::string("reduction", reduction.name()));
            }
        }
        Op::ScatterND { reduction } if *reduction != ScatterReduction::None => {
            at.push(attrs::string("reduction", reduction.name()));
        }
        Op::Trilu { upper } if !*upper => at.push(attrs::flag("upper", false)),
        Op::DepthToSpace { blocksize, crd } => {
            at.push(attrs::int("blocksize", *blocksize as i64));
            if *crd {
                at.push(attrs::string("mode", "CRD"));
            }
        }
        Op::SpaceToDepth { blocksize, crd } => {
            at.push(attrs::int("blocksize", *blocksize as i64));
            if *crd {
                if opset < 28 {
                    return Err(unrepresentable("SpaceToDepth's mode exists from opset 28"));
                }
                at.push(attrs::string("mode", "CRD"));
            }
        }
        Op::EyeLike { dtype, k } => {
            if let Some(d) = dtype {
                at.push(attrs::int("dtype", i64::from(dtype_to_onnx(*d))));
            }
            if *k != 0 {
                at.push(attrs::int("k", *k));
            }
        }
        Op::TopK {
            axis,
            largest,
            sorted,
        } => {
            if *axis != -1 {
                at.push(attrs::int("axis", *axis));
            }
            if !*largest {
                at.push(attrs::flag("largest", false));
            }
            if !*sorted {
                at.push(attrs::flag("sorted", false));
            }
        }
        Op::Compress { axis: Some(axis) } => at.push(attrs::int("axis", *axis)),
        Op::CenterCropPad { axes: Some(axes) } => at.push(attrs::ints("axes", axes)),
        Op::ReverseSequence {
            batch_axis,
            time_axis,
        } => {
            if *batch_axis != 1 {
                at.push(attrs::int("batch_axis", *batch_axis));
            }
            if *time_axis != 0 {
                at.push(attrs::int("time_axis", *time_axis));
            }
        }
        Op::CenterCropPad { axes: None } => {}
        Op::NegativeLogLikelihoodLoss {
            reduction,
            ignore_index,
        }
        | Op::SoftmaxCrossEntropyLoss {
            reduction,
            ignore_index,
        } => {
            if let Some(ii) = ignore_index {
                at.push(attrs::int("ignore_index", *ii));
            }
            if *reduction != LossReduction::Mean {
                at.push(attrs::string("reduction", reduction.name()));
            }
        }
        Op::QuantizeLinear {
            axis,
            block_size,
            output_dtype,
            precision,
        } => {
            write_quant_attrs(*axis, *block_size, *output_dtype, opset, at)
                .map_err(|e| unrepresentable(&e))?;
            if let Some(p) = precision {
                if opset < 24 {
                    return Err(unrepresentable("precision exists from opset 24"));
                }
                at.push(attrs::int("precision", i64::from(dtype_to_onnx(*p))));
            }
        }
        Op::DequantizeLinear {
            axis,
            block_size,
            output_dtype,
        } => write_quant_attrs(*axis, *block_size, *output_dtype, opset, at)
            .map_err(|e| unrepresentable(&e))?,
        Op::If {
            then_branch,
            else_branch,
        } => {
            let captures = op.captures(node.inputs.len());
            at.push(attrs::graph(
                "then_branch",
                subgraph_proto(then_branch, captures, opset)?,
            ));
            at.push(attrs::graph(
                "else_branch",
                subgraph_proto(else_branch, captures, opset)?,
            ));
        }
        Op::Loop { body, captures } => {
            at.push(attrs::graph(
                "body",
                subgraph_proto(body, *captures, opset)?,
            ));
        }
        Op::Scan {
            body,
            num_scan_inputs,
            scan_input_axes,
            scan_input_directions,
            scan_output_axes,
            scan_output_directions,
            captures,
        } => {
            at.push(attrs::graph(
                "body",
                subgraph_proto(body, *captures, opset)?,
            ));
            let count = i64::try_from(*num_scan_inputs).unwrap_or(i64::MAX);
            at.push(attrs::int("num_scan_inputs", count));
            let flags = |d: &[bool]| -> Vec<i64> { d.iter().map(|&r| i64::from(r)).collect() };
            if !scan_input_axes.is_empty() {
                at.push(attrs::ints("scan_input_axes", scan_input_axes));
            }
            if !scan_input_directions.is_empty() {
                at.push(attrs::ints(
                    "scan_input_directions",
                    &flags(scan_input_directions),
                ));
            }
            if !scan_output_axes.is_empty() {
                at.push(attrs::ints("scan_output_axes", scan_output_axes));
            }
            if !scan_output_directions.is_empty() {
                at.push(attrs::ints(
                    "scan_output_directions",
                    &flags(scan_output_directions),
                ));
            }
        }
        Op::ConvInteger(c) | Op::QLinearConv(c) => write_conv(c, at),
        Op::Recurrent(r) => write_recurrent(r, opset, at).map_err(|e| unrepresentable(&e))?,
        Op::MaxUnpool {
            kernel_shape,
            pads,
            strides,
        } => {
            at.push(attrs::extents("kernel_shape", kernel_shape));
            if !pads.is_empty() {
                at.push(attrs::extents("pads", pads));
            }
            if !strides.is_empty() {
                at.push(attrs::extents("strides", strides));
            }
        }
        Op::Window {
            periodic, dtype, ..
        } => {
            if *dtype != DType::F32 {
                at.push(attrs::int(
                    "output_datatype",
                    i64::from(dtype_to_onnx(*dtype)),
                ));
            }
            if !*periodic {
                at.push(attrs::flag("periodic", false));
            }
        }
        Op::Dft {
            axis,
            inverse,
            onesided,
        } => {
            match (axis, opset >= 20) {
                (Some(axis), false) => {
                    if *axis != 1 {
                        at.push(attrs::int("axis", *axis));
                    }
                }
                (None, true) => {}
                (Some(_), true) => {
                    return Err(unrepresentable(
                        "DFT's axis is an input from opset 20, this node has it as an attribute",
                    ))
                }
                (None, false) => {
                    return Err(unrepresentable(
                        "DFT's axis is an attribute before opset 20, this node has it as an input",
                    ))
                }
            }
            if *inverse {
                at.push(attrs::flag("inverse", true));
            }
            if *onesided {
                at.push(attrs::flag("onesided", true));
            }
        }
        Op::Stft { onesided } => {
            if !*onesided {
                at.push(attrs::flag("onesided", false));
            }
        }
        Op::MelWeightMatrix { dtype } => {
            if *dtype != DType::F32 {
                at.push(attrs::int(
                    "output_datatype",
                    i64::from(dtype_to_onnx(*dtype)),
                ));
            }
        }
        Op::Random(r) => write_random(r, at),
        Op::Multinomial {
            sample_size,
            dtype,
            seed,
        } => {
            if *dtype != DType::I32 {
                at.push(attrs::int("dtype", i64::from(dtype_to_onnx(*dtype))));
            }
            if *sample_size != 1 {
                at.push(attrs::int("sample_size", count_attr(*sample_size)));
            }
            write_seed(*seed, at);
        }
        Op::Bernoulli { dtype, seed } => {
            if let Some(dtype) = dtype {
                at.push(attrs::int("dtype", i64::from(dtype_to_onnx(*dtype))));
            }
            write_seed(*seed, at);
        }
        Op::TensorScatter { axis, circular } => {
            if *axis != -2 {
                at.push(attrs::int("axis", *axis));
            }
            if *circular {
                at.push(attrs::string("mode", "circular"));
            }
        }
        Op::TfIdfVectorizer(t) => write_tf_idf(t, at),
        Op::ConvTranspose(c) => {
            write_conv(&c.conv, at);
            if !c.output_padding.is_empty() {
                at.push(attrs::extents("output_padding", &c.output_padding));
            }
            if !c.output_shape.is_empty() {
                at.push(attrs::extents("output_shape", &c.output_shape));
            }
        }
        Op::DynamicQuantizeLinear | Op::MatMulInteger | Op::QLinearMatMul => {}
        Op::Einsum { equation } => at.push(attrs::string("equation", equation)),
        Op::Det => {}
        Op::GridSample {
            mode,
            padding_mode,
            align_corners,
        } => {
            let modern = opset >= 20;
            match mode {
                op::GridSampleMode::Linear => {}
                op::GridSampleMode::Nearest => at.push(attrs::string("mode", "nearest")),
                op::GridSampleMode::Cubic => at.push(attrs::string(
                    "mode",
                    if modern { "cubic" } else { "bicubic" },
                )),
            }
            match padding_mode {
                op::GridPadding::Zeros => {}
                op::GridPadding::Border => at.push(attrs::string("padding_mode", "border")),
                op::GridPadding::Reflection => at.push(attrs::string("padding_mode", "reflection")),
            }
            if *align_corners {
                at.push(attrs::flag("align_corners", true));
            }
        }
        Op::AffineGrid { align_corners } => {
            if *align_corners {
                at.push(attrs::flag("align_corners", true));
            }
        }
        Op::RoiAlign(r) => {
            if r.mode == op::RoiAlignMode::Max {
                at.push(attrs::string("mode", "max"));
            }
            match (r.coordinates, opset >= 16) {
                (op::RoiCoordinates::HalfPixel, true)
                | (op::RoiCoordinates::OutputHalfPixel, false) => {}
                (op::RoiCoordinates::OutputHalfPixel, true) => at.push(attrs::string(
                    "coordinate_transformation_mode",
                    "output_half_pixel",
                )),
                (op::RoiCoordinates::HalfPixel, false) => {
                    return Err(unrepresentable(
                        "RoiAlign's half_pixel coordinates exist from opset 16 (opset 10's form \
                         is output_half_pixel)",
                    ))
                }
            }
            let count = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
            if r.output_height != 1 {
                at.push(attrs::int("output_height", count(r.output_height)));
            }
            if r.output_width != 1 {
                at.push(attrs::int("output_width", count(r.output_width)));
            }
            if r.sampling_ratio != 0 {
                at.push(attrs::int("sampling_ratio", count(r.sampling_ratio)));
            }
            if r.spatial_scale != 1.0 {
                at.push(attrs::float("spatial_scale", r.spatial_scale));
            }
        }
        Op::MaxRoiPool {
            pooled_shape,
            spatial_scale,
        } => {
            at.push(attrs::extents("pooled_shape", pooled_shape));
            if *spatial_scale != 1.0 {
                at.push(attrs::float("spatial_scale", *spatial_scale));
            }
        }
        Op::DeformConv(d) => {
            for (name, values) in [
                ("dilations", &d.dilations),
                ("kernel_shape", &d.kernel_shape),
                ("pads", &d.pads),
                ("strides", &d.strides),
            ] {
                if !values.is_empty() {
                    at.push(attrs::extents(name, values));
                }
            }
            for (name, value) in [("group", d.group), ("offset_group", d.offset_group)] {
                if value != 1 {
                    at.push(attrs::int(name, i64::try_from(value).unwrap_or(i64::MAX)));
                }
            }
        }
        Op::Col2Im {
            dilations,
            pads,
            strides,
        } => {
            for (name, values) in [
                ("dilations", dilations),
                ("pads", pads),
                ("strides", strides),
            ] {
                if !values.is_empty() {
                    at.push(attrs::extents(name, values));
                }
            }
        }
        Op::NonMaxSuppression { center_point_box } => {
            if *center_point_box {
                at.push(attrs::int("center_point_box", 1));
            }
        }
        Op::Unique { axis, sorted } => {
            if let Some(axis) = axis {
                at.push(attrs::int("axis", *axis));
            }
            if !*sorted {
                at.push(attrs::flag("sorted", false));
            }
        }
        Op::GatherElements { .. }
        | Op::OneHot { .. }
        | Op::GatherND { .. }
        | Op::ScatterND { .. }
        | Op::Trilu { .. }
        | Op::Compress { .. }
        | Op::Range
        | Op::Tile
        | Op::NonZero
        | Op::Size
        | Op::CastLike => {}
        Op::MatMul
        | Op::Binary(_)
        | Op::Variadic(_)
        | Op::Clip
        | Op::GlobalAveragePool
        | Op::Slice
        | Op::Squeeze
        | Op::Unsqueeze
        | Op::Identity
        | Op::Dropout
        | Op::Where
        | Op::Expand => {}
    }
    Ok(out)
}

const NORM_EPSILON: f32 = 1e-5;

/// An output dtype attribute (`dtype`, `output_datatype`), which must be one of `allowed`;
/// absent (or 0, UNDEFINED) is None.
fn read_dtype(a: &Attrs, name: &str, allowed: &[DType]) -> Result<Option<DType>, Error> {
    let Some(code) = a.int(name)?.filter(|&c| c != 0) else {
        return Ok(None);
    };
    let dtype = i32::try_from(code)
        .ok()
        .and_then(dtype_from_onnx)
        .ok_or_else(|| Error::UnsupportedDType {
            what: "the output dtype attribute of node",
            name: a.node().to_string(),
            data_type: i32::try_from(code).unwrap_or(-1),
        })?;
    if !allowed.contains(&dtype) {
        let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
        return Err(a.error(
            name,
            format!(
                "is {dtype} (ONNX type {code}); {} outputs {}",
                a.op(),
                names.join(", ")
            ),
        ));
    }
    Ok(Some(dtype))
}

/// A random op's `seed`: the given one, or, absent, one derived from the node's name, so
/// that the node draws the same values on every run ([`op::RandomSeed`]).
fn read_seed(a: &Attrs) -> Result<op::RandomSeed, Error> {
    Ok(match a.float("seed")? {
        Some(seed) => op::RandomSeed::Given(seed),
        None => op::RandomSeed::from_node_name(a.node()),
    })
}

/// Writes a given seed; a seed derived from the node's name is not written, and reading
/// the node back (with its name) derives it again.
fn write_seed(seed: op::RandomSeed, at: &mut Vec<AttributeProto>) {
    if let op::RandomSeed::Given(seed) = seed {
        at.push(attrs::float("seed", seed));
    }
}

/// RandomNormal, RandomUniform and their Like forms.
fn read_random(op_type: &str, a: &Attrs) -> Result<op::Random, Error> {
    let distribution = if op_type.starts_with("RandomNormal") {
        op::Distribution::Normal {
            mean: a.float_or("mean", 0.0)?,
            scale: a.float_or("scale", 1.0)?,
        }
    } else {
        op::Distribution::Uniform {
            low: a.float_or("low", 0.0)?,
            high: a.float_or("high", 1.0)?,
        }
    };
    let like = op_type.ends_with("Like");
    let shape = if like {
        None
    } else {
        if !a.has("shape") {
            return Err(a.missing("shape"));
        }
        Some(a.extents("shape", 0)?)
    };
    let dtype = read_dtype(a, "dtype", &DType::FLOATS)?;
    Ok(op::Random {
        distribution,
        shape,
        // The fixed-shape forms default to float (1); the Like forms to the input's type.
        dtype: if like {
            dtype
        } else {
            Some(dtype.unwrap_or(DType::F32))
        },
        seed: read_seed(a)?,
    })
}

fn write_random(r: &op::Random, at: &mut Vec<AttributeProto>) {
    match r.distribution {
        op::Distribution::Normal { mean, scale } => {
            if mean != 0.0 {
                at.push(attrs::float("mean", mean));
            }
            if scale != 1.0 {
                at.push(attrs::float("scale", scale));
            }
        }
        op::Distribution::Uniform { low, high } => {
            if low != 0.0 {
                at.push(attrs::float("low", low));
            }
            if high != 1.0 {
                at.push(attrs::float("high", high));
            }
        }
    }
    if let Some(shape) = &r.shape {
        at.push(attrs::extents("shape", shape));
    }
    // The fixed-shape forms' absent dtype means f32; the Like forms' the input's.
    let written = match (r.shape.is_some(), r.dtype) {
        (true, Some(DType::F32)) | (_, None) => None,
        (_, Some(dtype)) => Some(dtype),
    };
    if let Some(dtype) = written {
        at.push(attrs::int("dtype", i64::from(dtype_to_onnx(dtype))));
    }
    write_seed(r.seed, at);
}

/// TfIdfVectorizer over an integer pool; a string pool is refused by design.
fn read_tf_idf(a: &Attrs) -> Result<op::TfIdf, Error> {
    if a.has("pool_strings") {
        return Err(Error::RefusedOp {
            op: a.op().to_string(),
            node: a.node().to_string(),
            reason: op::TFIDF_STRINGS_REFUSAL,
        });
    }
    let mode = a.string("mode")?.ok_or_else(|| a.missing("mode"))?;
    let mode = op::TfIdfMode::from_name(&mode)
        .ok_or_else(|| a.error("mode", format!("`{mode}` is not TF, IDF or TFIDF")))?;
    let count = |name: &str, min: usize| -> Result<usize, Error> {
        let v = a.int(name)?.ok_or_else(|| a.missing(name))?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v >= min)
            .ok_or_else(|| a.error(name, format!("must be {min} or more, got {v}")))
    };
    let min_gram_length = count("min_gram_length", 1)?;
    let max_gram_length = count("max_gram_length", min_gram_length)?;
    let max_skip_count = count("max_skip_count", 0)?;
    let list = |name: &str| -> Result<Vec<usize>, Error> {
        if !a.has(name) {
            return Err(a.missing(name));
        }
        a.extents(name, 0)
    };
    let t = op::TfIdf {
        mode,
        min_gram_length,
        max_gram_length,
        max_skip_count,
        ngram_counts: list("ngram_counts")?,
        ngram_indexes: list("ngram_indexes")?,
        pool: a
            .ints("pool_int64s")?
            .ok_or_else(|| a.missing("pool_int64s"))?,
        weights: a.floats("weights")?.unwrap_or_default(),
    };
    if t.pool_ngrams().is_none() {
        return Err(a.error(
            "ngram_counts",
            format!(
                "{:?} does not split pool_int64s ({} tokens) into n-grams that ngram_indexes \
                 ({} values) places: each start must lie between the previous one and the \
                 pool's end, with an index for every n-gram",
                t.ngram_counts,
                t.pool.len(),
                t.ngram_indexes.len()
            ),
        ));
    }
    // onnxruntime reads the weights by output column (which is the pool n-gram's position
    // when ngram_indexes is 0, 1, 2, …, as the spec's "i-th weight of the i-th n-gram"
    // assumes), so every column needs one.
    if t.mode != op::TfIdfMode::Tf && !t.weights.is_empty() && t.weights.len() < t.output_size() {
        return Err(a.error(
            "weights",
            format!(
                "has {} values for {} output columns (max(ngram_indexes) + 1)",
                t.weights.len(),
                t.output_size()
            ),
        ));
    }
    Ok(t)
}

/// A count as an INT attribute (read from one, so it fits).
fn count_attr(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn write_tf_idf(t: &op::TfIdf, at: &mut Vec<AttributeProto>) {
    at.push(attrs::string("mode", t.mode.name()));
    at.push(attrs::int("min_gram_length", count_attr(t.min_gram_length)));
    at.push(attrs::int("max_gram_length", count_attr(t.max_gram_length)));
    at.push(attrs::int("max_skip_count", count_attr(t.max_skip_count)));
    at.push(attrs::extents("ngram_counts", &t.ngram_counts));
    at.push(attrs::extents("ngram_indexes", &t.ngram_indexes));
    at.push(attrs::ints("pool_int64s", &t.pool));
    if !t.weights.is_empty() {
        at.push(attrs::floats("weights", &t.weights));
    }
}

/// LSTM's, GRU's and RNN's attributes. `activations` lists every direction's functions,
/// forward's first. `activation_alpha` and `activation_beta` are read by position: the
/// k-th function takes the k-th value, and a function past the end of the list takes its
/// default. The spec's "consumed in the order of activation functions" could also mean that
/// functions taking none consume nothing, which is how onnxruntime 1.23 reads them (its GRU
/// and LSTM give Affine after Sigmoid the first value, not the second: the onnxruntime
/// adapter's expectations, prop/GRU and prop/LSTM); not decided.
fn read_recurrent(op_type: &str, a: &Attrs, ctx: &NodeContext) -> Result<op::Recurrent, Error> {
    use concord_core::op::{RecurrentCell, RnnActivation, RnnActivationKind, RnnDirection};
    let cell = match op_type {
        "LSTM" => RecurrentCell::Lstm,
        "GRU" => RecurrentCell::Gru,
        _ => RecurrentCell::Rnn,
    };
    let direction = match a.string("direction")?.as_deref() {
        None => RnnDirection::Forward,
        Some(name) => RnnDirection::from_name(name).ok_or_else(|| {
            a.error(
                "direction",
                format!("`{name}` is not forward, reverse or bidirectional"),
            )
        })?,
    };
    let hidden_size = a
        .int("hidden_size")?
        .map(|h| {
            usize::try_from(h)
                .ok()
                .filter(|&h| h >= 1)
                .ok_or_else(|| a.error("hidden_size", format!("must be at least 1, got {h}")))
        })
        .transpose()?;
    if ctx.opset < 14 && a.has("layout") {
        return Err(a.error(
            "layout",
            format!("exists from opset 14; the model imports {}", ctx.opset),
        ));
    }
    let batch_major = match a.int_or("layout", 0)? {
        0 => false,
        1 => true,
        other => return Err(a.error("layout", format!("must be 0 or 1, got {other}"))),
    };
    let clip = a
        .float("clip")?
        .map(|c| {
            if c >= 0.0 {
                Ok(c)
            } else {
                Err(a.error("clip", format!("must be a non-negative threshold, got {c}")))
            }
        })
        .transpose()?;
    let input_forget = cell == RecurrentCell::Lstm && a.flag_or("input_forget", false)?;
    let linear_before_reset =
        cell == RecurrentCell::Gru && a.flag_or("linear_before_reset", false)?;
    let alphas = a.floats("activation_alpha")?.unwrap_or_default();
    let betas = a.floats("activation_beta")?.unwrap_or_default();
    let activations = match a.strings("activations")? {
        None => op::Recurrent::default_activations(cell, direction),
        Some(names) => {
            let per_direction = cell.functions();
            if names.len() != per_direction * direction.count() {
                return Err(a.error(
                    "activations",
                    format!(
                        "{op_type} {} takes {} functions ({per_direction} per direction), \
                         got {names:?}",
                        direction.name(),
                        per_direction * direction.count()
                    ),
                ));
            }
            names
                .iter()
                .enumerate()
                .map(|(k, name)| {
                    let kind = RnnActivationKind::from_name(name).ok_or_else(|| {
                        a.error(
                            "activations",
                            format!("`{name}` is not an activation function {op_type} takes"),
                        )
                    })?;
                    let mut act = RnnActivation::new(kind);
                    if kind.default_alpha().is_some() {
                        act.alpha = alphas.get(k).copied().unwrap_or(act.alpha);
                    }
                    if kind.default_beta().is_some() {
                        act.beta = betas.get(k).copied().unwrap_or(act.beta);
                    }
                    Ok(act)
                })
                .collect::<Result<Vec<_>, Error>>()?
        }
    };
    Ok(op::Recurrent {
        cell,
        hidden_size,
        direction,
        activations,
        clip,
        batch_major,
        input_forget,
        linear_before_reset,
    })
}

/// The attributes of an LSTM, GRU or RNN that differ from the defaults; `layout = 1` needs
/// opset 14.
fn write_recurrent(
    r: &op::Recurrent,
    opset: i64,
    at: &mut Vec<AttributeProto>,
) -> Result<(), String> {
    use concord_core::op::RnnDirection;
    if r.activations != op::Recurrent::default_activations(r.cell, r.direction) {
        let names: Vec<&str> = r.activations.iter().map(|f| f.kind.name()).collect();
        at.push(attrs::strings("activations", &names));
        // By position, one value per function (0 for one that takes none).
        let alphas: Vec<f32> = r.activations.iter().map(|f| f.alpha).collect();
        let betas: Vec<f32> = r.activations.iter().map(|f| f.beta).collect();
        if r.activations
            .iter()
            .any(|f| f.kind.default_alpha().is_some())
        {
            at.push(attrs::floats("activation_alpha", &alphas));
        }
        if r.activations
            .iter()
            .any(|f| f.kind.default_beta().is_some())
        {
            at.push(attrs::floats("activation_beta", &betas));
        }
    }
    if let Some(c) = r.clip {
        at.push(attrs::float("clip", c));
    }
    if r.direction != RnnDirection::Forward {
        at.push(attrs::string("direction", r.direction.name()));
    }
    if let Some(h) = r.hidden_size {
        at.push(attrs::int("hidden_size", h as i64));
    }
    if r.batch_major {
        if opset < 14 {
            return Err("layout exists from opset 14".into());
        }
        at.push(attrs::int("layout", 1));
    }
    if r.input_forget {
        at.push(attrs::flag("input_forget", true));
    }
    if r.linear_before_reset {
        at.push(attrs::flag("linear_before_reset", true));
    }
    Ok(())
}

/// QuantizeLinear's and DequantizeLinear's `block_size` (opset 21): 0 (not blocked) or more.
fn read_block_size(a: &Attrs) -> Result<usize, Error> {
    let b = a.int_or("block_size", 0)?;
    usize::try_from(b).map_err(|_| a.error("block_size", format!("must be 0 or more, got {b}")))
}

/// A dtype attribute where 0 (UNDEFINED) or absence means "not given".
fn read_optional_dtype(a: &Attrs, name: &str) -> Result<Option<concord_core::DType>, Error> {
    match a.int(name)? {
        None | Some(0) => Ok(None),
        Some(code) => i32::try_from(code)
            .ok()
            .and_then(dtype_from_onnx)
            .map(Some)
            .ok_or_else(|| Error::UnsupportedDType {
                what: "the quantisation dtype attribute of node",
                name: a.node().to_string(),
                data_type: i32::try_from(code).unwrap_or(-1),
            }),
    }
}

/// The attributes QuantizeLinear and DequantizeLinear share; `axis` exists from opset 13,
/// `block_size` and `output_dtype` from 21.
fn write_quant_attrs(
    axis: i64,
    block_size: usize,
    output_dtype: Option<concord_core::DType>,
    opset: i64,
    at: &mut Vec<AttributeProto>,
) -> Result<(), String> {
    if axis != 1 {
        if opset < 13 {
            return Err("axis exists from opset 13".into());
        }
        at.push(attrs::int("axis", axis));
    }
    if block_size != 0 {
        if opset < 21 {
            return Err("block_size exists from opset 21".into());
        }
        at.push(attrs::int("block_size", block_size as i64));
    }
    if let Some(d) = output_dtype {
        if opset < 21 {
            return Err("output_dtype exists from opset 21".into());
        }
        at.push(attrs::int("output_dtype", i64::from(dtype_to_onnx(d))));
    }
    Ok(())
}

/// The ONNX default of an op's `axis` attribute, for ops that differ (OneHot's is -1).
fn op_default_axis(op: &Op) -> i64 {
    match op {
        Op::OneHot { .. } => -1,
        _ => 0,
    }
}

// Unary: the parameters and their defaults come from the op's row of UNARY_OPS.

fn read_unary(op: Unary, a: &Attrs) -> Result<Unary, Error> {
    let mut params = op.params();
    for (value, spec) in params.iter_mut().zip(op.def().params) {
        match spec.default {
            AttrDefault::Float(default) => *value = a.float_or(spec.name, default)?,
            // Int attributes (IsInf's detect flags) travel as floats.
            AttrDefault::Int(default) => *value = a.int_or(spec.name, default)? as f32,
            // Gelu's `approximate`, the one string parameter: none is 0, tanh is 1.
            AttrDefault::Str(_) => {
                *value = match a.string(spec.name)?.as_deref() {
                    None | Some("none") => 0.0,
                    Some("tanh") => 1.0,
                    Some(other) => {
                        return Err(a.error(spec.name, format!("`{other}` is not none or tanh")))
                    }
                }
            }
            AttrDefault::Required | AttrDefault::Absent => {}
        }
    }
    Ok(op.with_params(params))
}

fn write_unary(op: Unary, at: &mut Vec<AttributeProto>) {
    for (value, spec) in op.params().iter().zip(op.def().params) {
        match spec.default {
            AttrDefault::Float(d) if d != *value => at.push(attrs::float(spec.name, *value)),
            AttrDefault::Int(d) if d as f32 != *value => {
                at.push(attrs::int(spec.name, *value as i64))
            }
            AttrDefault::Str(_) if *value != 0.0 => at.push(attrs::string(spec.name, "tanh")),
            _ => {}
        }
    }
}

fn read_reduction(a: &Attrs) -> Result<ScatterReduction, Error> {
    match a.string("reduction")? {
        None => Ok(ScatterReduction::None),
        Some(name) => ScatterReduction::from_name(&name).ok_or_else(|| {
            a.error(
                "reduction",
                format!("`{name}` is not one of none, add, mul, max, min"),
            )
        }),
    }
}

fn read_blocksize(a: &Attrs) -> Result<usize, Error> {
    let b = a.int("blocksize")?.ok_or_else(|| a.missing("blocksize"))?;
    usize::try_from(b)
        .ok()
        .filter(|&b| b >= 1)
        .ok_or_else(|| a.error("blocksize", format!("must be at least 1, got {b}")))
}

fn read_arg_reduce(a: &Attrs) -> Result<ArgReduce, Error> {
    Ok(ArgReduce {
        axis: a.int_or("axis", 0)?,
        keepdims: a.flag_or("keepdims", true)?,
        select_last_index: a.flag_or("select_last_index", false)?,
    })
}

// Conv.

fn read_conv(a: &Attrs) -> Result<op::Conv, Error> {
    let group = a.int_or("group", 1)?;
    let group = usize::try_from(group)
        .ok()
        .filter(|&g| g >= 1)
        .ok_or_else(|| a.error("group", format!("must be at least 1, got {group}")))?;
    Ok(op::Conv {
        auto_pad: read_auto_pad(a)?,
        dilations: a.extents("dilations", 1)?,
        group,
        kernel_shape: a.extents("kernel_shape", 1)?,
        pads: a.extents("pads", 0)?,
        strides: a.extents("strides", 1)?,
    })
}

fn write_conv(c: &op::Conv, at: &mut Vec<AttributeProto>) {
    write_auto_pad(c.auto_pad, at);
    if !c.dilations.is_empty() {
        at.push(attrs::extents("dilations", &c.dilations));
    }
    if c.group != 1 {
        at.push(attrs::int(
            "group",
            i64::try_from(c.group).unwrap_or(i64::MAX),
        ));
    }
    if !c.kernel_shape.is_empty() {
        at.push(attrs::extents("kernel_shape", &c.kernel_shape));
    }
    if !c.pads.is_empty() {
        at.push(attrs::extents("pads", &c.pads));
    }
    if !c.strides.is_empty() {
        at.push(attrs::extents("strides", &c.strides));
    }
}

fn read_auto_pad(a: &Attrs) -> Result<AutoPad, Error> {
    match a.string("auto_pad")?.as_deref() {
        // Some exporters write an empty string for the default.
        None | Some("NOTSET") | Some("") => Ok(AutoPad::NotSet),
        Some("SAME_UPPER") => Ok(AutoPad::SameUpper),
        Some("SAME_LOWER") => Ok(AutoPad::SameLower),
        Some("VALID") => Ok(AutoPad::Valid),
        Some(other) => Err(a.error(
            "auto_pad",
            format!("`{other}` is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"),
        )),
    }
}

fn write_auto_pad(auto_pad: AutoPad, at: &mut Vec<AttributeProto>) {
    let name = match auto_pad {
        AutoPad::NotSet => return,
        AutoPad::SameUpper => "SAME_UPPER",
        AutoPad::SameLower => "SAME_LOWER",
        AutoPad::Valid => "VALID",
    };
    at.push(attrs::string("auto_pad", name));
}

// Pooling.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PoolKind {
    Max,
    Average,
    Lp,
}

fn read_pool(a: &Attrs, kind: PoolKind) -> Result<Pool, Error> {
    let kernel_shape = a.extents("kernel_shape", 1)?;
    if kernel_shape.is_empty() {
        return Err(a.missing("kernel_shape"));
    }
    let count_include_pad = match kind {
        PoolKind::Average => a.flag_or("count_include_pad", false)?,
        PoolKind::Lp | PoolKind::Max => false,
    };
    let column_major_indices = match kind {
        PoolKind::Max => match a.int_or("storage_order", 0)? {
            0 => false,
            1 => true,
            other => {
                return Err(a.error(
                    "storage_order",
                    format!("must be 0 (row-major) or 1 (column-major), got {other}"),
                ))
            }
        },
        PoolKind::Average | PoolKind::Lp => false,
    };
    Ok(Pool {
        column_major_indices,
        auto_pad: read_auto_pad(a)?,
        ceil_mode: a.flag_or("ceil_mode", false)?,
        count_include_pad,
        dilations: a.extents("dilations", 1)?,
        kernel_shape,
        pads: a.extents("pads", 0)?,
        strides: a.extents("strides", 1)?,
    })
}

fn write_pool(
    p: &Pool,
    kind: PoolKind,
    opset: i64,
    at: &mut Vec<AttributeProto>,
) -> Result<(), String> {
    if p.kernel_shape.is_empty() {
        return Err("kernel_shape is required but empty".to_string());
    }
    write_auto_pad(p.auto_pad, at);
    if p.ceil_mode {
        at.push(attrs::flag("ceil_mode", true));
    }
    match kind {
        PoolKind::Average if p.count_include_pad => at.push(attrs::flag("count_include_pad", true)),
        PoolKind::Max if p.count_include_pad => {
            return Err("count_include_pad is an AveragePool attribute, MaxPool has none".into())
        }
        _ => {}
    }
    if !p.dilations.is_empty() {
        if kind == PoolKind::Average && opset < 19 {
            return Err("AveragePool's dilations exist from opset 19".to_string());
        }
        at.push(attrs::extents("dilations", &p.dilations));
    }
    at.push(attrs::extents("kernel_shape", &p.kernel_shape));
    if !p.pads.is_empty() {
        at.push(attrs::extents("pads", &p.pads));
    }
    if !p.strides.is_empty() {
        at.push(attrs::extents("strides", &p.strides));
    }
    if p.column_major_indices {
        if kind != PoolKind::Max {
            return Err("storage_order is a MaxPool attribute".into());
        }
        at.push(attrs::int("storage_order", 1));
    }
    Ok(())
}

// Reductions.

fn read_reduce(a: &Attrs, ctx: &NodeContext) -> Result<Reduce, Error> {
    // The attribute form of axes is ReduceMean/ReduceMax before opset 18 (ReduceSum before
    // 13); it is accepted at any opset as long as the input form is not also given.
    let axes = a.ints("axes")?;
    if axes.is_some() && matches!(ctx.inputs.get(1), Some(Some(_))) {
        return Err(a.error(
            "axes",
            "is given both as an attribute and as input 1; give one of them",
        ));
    }
    Ok(Reduce {
        axes,
        keepdims: a.flag_or("keepdims", true)?,
        noop_with_empty_axes: a.flag_or("noop_with_empty_axes", false)?,
    })
}

/// Writes a reduction; returns axes that must become input 1 at this opset.
fn write_reduce(
    op: &Op,
    r: &Reduce,
    node: &Node,
    opset: i64,
    at: &mut Vec<AttributeProto>,
) -> Result<Option<Vec<i64>>, String> {
    // The opset from which axes is an input (and noop_with_empty_axes exists).
    let input_form_since = match op {
        Op::Reduce(kind, _) => kind.axes_input_since(),
        _ => 18,
    };
    let mut axes_input = None;
    if let Some(axes) = &r.axes {
        if opset < input_form_since {
            at.push(attrs::ints("axes", axes));
        } else if matches!(node.inputs.get(1), Some(Some(_))) {
            return Err("axes is set both as the attribute form and as input 1".to_string());
        } else {
            axes_input = Some(axes.clone());
        }
    }
    if !r.keepdims {
        at.push(attrs::flag("keepdims", false));
    }
    if r.noop_with_empty_axes {
        if opset < input_form_since {
            return Err(format!(
                "noop_with_empty_axes exists for {} from opset {input_form_since}",
                op.name()
            ));
        }
        at.push(attrs::flag("noop_with_empty_axes", true));
    }
    Ok(axes_input)
}

// Resize.

fn read_resize(a: &Attrs) -> Result<Resize, Error> {
    let keep_aspect_ratio = match a.string("keep_aspect_ratio_policy")?.as_deref() {
        None | Some("stretch") => AspectRatioPolicy::Stretch,
        Some("not_larger") => AspectRatioPolicy::NotLarger,
        Some("not_smaller") => AspectRatioPolicy::NotSmaller,
        Some(other) => {
            return Err(a.error(
                "keep_aspect_ratio_policy",
                format!("`{other}` is not one of stretch, not_larger, not_smaller"),
            ))
        }
    };
    let defaults = Resize::default();
    let mode = match a.string("mode")?.as_deref() {
        None => defaults.mode,
        Some("nearest") => ResizeMode::Nearest,
        Some("linear") => ResizeMode::Linear,
        Some("cubic") => ResizeMode::Cubic,
        Some(other) => {
            return Err(a.error(
                "mode",
                format!("`{other}` is not one of nearest, linear, cubic"),
            ))
        }
    };
    let coordinate_transformation_mode =
        match a.string("coordinate_transformation_mode")?.as_deref() {
            None => defaults.coordinate_transformation_mode,
            Some("half_pixel") => CoordinateTransform::HalfPixel,
            Some("half_pixel_symmetric") => CoordinateTransform::HalfPixelSymmetric,
            Some("pytorch_half_pixel") => CoordinateTransform::PytorchHalfPixel,
            Some("align_corners") => CoordinateTransform::AlignCorners,
            Some("asymmetric") => CoordinateTransform::Asymmetric,
            Some("tf_crop_and_resize") => CoordinateTransform::TfCropAndResize,
            Some(other) => {
                return Err(a.error(
                    "coordinate_transformation_mode",
                    format!(
                        "`{other}` is not one of half_pixel, half_pixel_symmetric, \
                         pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize"
                    ),
                ))
            }
        };
    let nearest_mode = match a.string("nearest_mode")?.as_deref() {
        None => defaults.nearest_mode,
        Some("round_prefer_floor") => NearestMode::RoundPreferFloor,
        Some("round_prefer_ceil") => NearestMode::RoundPreferCeil,
        Some("floor") => NearestMode::Floor,
        Some("ceil") => NearestMode::Ceil,
        Some(other) => {
            return Err(a.error(
                "nearest_mode",
                format!(
                    "`{other}` is not one of round_prefer_floor, round_prefer_ceil, floor, ceil"
                ),
            ))
        }
    };
    Ok(Resize {
        mode,
        coordinate_transformation_mode,
        nearest_mode,
        extrapolation_value: a.float_or("extrapolation_value", defaults.extrapolation_value)?,
        cubic_coeff_a: a.float_or("cubic_coeff_a", defaults.cubic_coeff_a)?,
        exclude_outside: a.flag_or("exclude_outside", defaults.exclude_outside)?,
        axes: a.ints("axes")?,
        keep_aspect_ratio,
        antialias: a.flag_or("antialias", false)?,
    })
}

fn write_resize(r: &Resize, opset: i64, at: &mut Vec<AttributeProto>) -> Result<(), String> {
    let defaults = Resize::default();
    if r.antialias {
        if opset < 18 {
            return Err("Resize's antialias exists from opset 18".into());
        }
        at.push(attrs::flag("antialias", true));
    }
    if r.mode != defaults.mode {
        let name = match r.mode {
            ResizeMode::Nearest => "nearest",
            ResizeMode::Linear => "linear",
            ResizeMode::Cubic => "cubic",
        };
        at.push(attrs::string("mode", name));
    }
    if r.coordinate_transformation_mode != defaults.coordinate_transformation_mode {
        let name = match r.coordinate_transformation_mode {
            CoordinateTransform::HalfPixel => "half_pixel",
            CoordinateTransform::HalfPixelSymmetric if opset < 19 => {
                return Err("half_pixel_symmetric exists from opset 19".to_string())
            }
            CoordinateTransform::HalfPixelSymmetric => "half_pixel_symmetric",
            CoordinateTransform::PytorchHalfPixel => "pytorch_half_pixel",
            CoordinateTransform::AlignCorners => "align_corners",
            CoordinateTransform::Asymmetric => "asymmetric",
            CoordinateTransform::TfCropAndResize => "tf_crop_and_resize",
        };
        at.push(attrs::string("coordinate_transformation_mode", name));
    }
    if r.nearest_mode != defaults.nearest_mode {
        let name = match r.nearest_mode {
            NearestMode::RoundPreferFloor => "round_prefer_floor",
            NearestMode::RoundPreferCeil => "round_prefer_ceil",
            NearestMode::Floor => "floor",
            NearestMode::Ceil => "ceil",
        };
        at.push(attrs::string("nearest_mode", name));
    }
    if r.extrapolation_value != defaults.extrapolation_value {
        at.push(attrs::float("extrapolation_value", r.extrapolation_value));
    }
    if r.cubic_coeff_a != defaults.cubic_coeff_a {
        at.push(attrs::float("cubic_coeff_a", r.cubic_coeff_a));
    }
    if r.exclude_outside {
        at.push(attrs::flag("exclude_outside", true));
    }
    if (r.axes.is_some() || r.keep_aspect_ratio != AspectRatioPolicy::Stretch) && opset < 18 {
        return Err("Resize's axes and keep_aspect_ratio_policy exist from opset 18".to_string());
    }
    if let Some(axes) = &r.axes {
        at.push(attrs::ints("axes", axes));
    }
    match r.keep_aspect_ratio {
        AspectRatioPolicy::Stretch => {}
        AspectRatioPolicy::NotLarger => {
            at.push(attrs::string("keep_aspect_ratio_policy", "not_larger"))
        }
        AspectRatioPolicy::NotSmaller => {
            at.push(attrs::string("keep_aspect_ratio_policy", "not_smaller"))
        }
    }
    Ok(())
}

// Constant.

/// The value attributes a Constant may carry; exactly one must be present.
const CONSTANT_VALUE_ATTRIBUTES: [&str; 8] = [
    "value",
    "value_float",
    "value_floats",
    "value_int",
    "value_ints",
    "value_string",
    "value_strings",
    "sparse_value",
];

fn read_constant(a: &Attrs) -> Result<Tensor, Error> {
    let present: Vec<&str> = CONSTANT_VALUE_ATTRIBUTES
        .iter()
        .copied()
        .filter(|name| a.has(name))
        .collect();
    let name = match present.as_slice() {
        [] => return Err(a.missing("value")),
        [one] => *one,
        [first, ..] => {
            return Err(a.error(
                first,
                format!(
                    "a Constant holds exactly one value attribute, this one has {}",
                    present.join(", ")
                ),
            ))
        }
    };
    let tensor = match name {
        "value" => {
            let proto = a.tensor("value")?.ok_or_else(|| a.missing("value"))?;
            tensor_from_proto(proto, a.node())?
        }
        "value_float" => Tensor::scalar_f32(a.float_or(name, 0.0)?),
        "value_floats" => {
            let v = a.floats(name)?.unwrap_or_default();
            Tensor::from_f32([v.len()], v)?
        }
        "value_int" => Tensor::scalar_i64(a.int_or(name, 0)?),
        "value_ints" => Tensor::vec_i64(a.ints(name)?.unwrap_or_default()),
        _ => {
            return Err(a.error(
                name,
                "string and sparse constants are not supported; Concord computes in float32, \
                 float16, int64 and bool",
            ))
        }
    };
    Ok(tensor)
}
