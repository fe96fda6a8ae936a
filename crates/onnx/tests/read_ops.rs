//! Every op type, written as a hand-made NodeProto, reads to the Op the ONNX spec describes
//! (attribute values and defaults taken from the operator spec), and the graph read from
//! those nodes survives a save and a second read.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

mod common;

use common::*;
use concord_core::op::{ArgReduce, Binary, LossReduction, ReduceKind, Unary};
use concord_core::op::{
    AutoPad, Conv, CoordinateTransform, Gemm, NearestMode, PadMode, Pool, Reduce, Resize,
    ResizeMode,
};
use concord_core::op::{Recurrent, RecurrentCell, RnnActivation, RnnActivationKind, RnnDirection};
use concord_core::{op, DType, Op};
use concord_onnx::proto::NodeProto;
use concord_onnx::{read_graph, save};
use std::collections::BTreeSet;

/// One case: a node as an exporter would write it, and the op it must read as.
fn cases() -> Vec<(NodeProto, Op)> {
    let one = |op_type: &str, inputs: &[&str], attrs| node(op_type, "", inputs, &["out"], attrs);
    vec![
        (
            one(
                "Conv",
                &["x", "w", "b"],
                vec![
                    attr_string("auto_pad", "SAME_LOWER"),
                    attr_ints("dilations", &[2, 2]),
                    attr_int("group", 3),
                    attr_ints("kernel_shape", &[3, 3]),
                    attr_ints("strides", &[1, 2]),
                ],
            ),
            Op::Conv(Conv {
                auto_pad: AutoPad::SameLower,
                dilations: vec![2, 2],
                group: 3,
                kernel_shape: vec![3, 3],
                pads: vec![],
                strides: vec![1, 2],
            }),
        ),
        (
            one("Conv", &["x", "w"], vec![attr_ints("pads", &[0, 1, 2, 3])]),
            Op::Conv(Conv {
                auto_pad: AutoPad::NotSet,
                dilations: vec![],
                group: 1,
                kernel_shape: vec![],
                pads: vec![0, 1, 2, 3],
                strides: vec![],
            }),
        ),
        (
            one(
                "Gemm",
                &["a", "b", "c"],
                vec![
                    attr_float("alpha", 2.0),
                    attr_float("beta", 0.0),
                    attr_int("transA", 1),
                ],
            ),
            Op::Gemm(Gemm {
                alpha: 2.0,
                beta: 0.0,
                trans_a: true,
                trans_b: false,
            }),
        ),
        (one("MatMul", &["a", "b"], vec![]), Op::MatMul),
        (one("Add", &["a", "b"], vec![]), Op::Binary(Binary::Add)),
        (one("Sub", &["a", "b"], vec![]), Op::Binary(Binary::Sub)),
        (one("Mul", &["a", "b"], vec![]), Op::Binary(Binary::Mul)),
        (one("Div", &["a", "b"], vec![]), Op::Binary(Binary::Div)),
        (one("Pow", &["a", "b"], vec![]), Op::Binary(Binary::Pow)),
        (
            one("Mod", &["a", "b"], vec![]),
            Op::Binary(Binary::Mod { fmod: false }),
        ),
        (
            one("Mod", &["a", "b"], vec![attr_int("fmod", 1)]),
            Op::Binary(Binary::Mod { fmod: true }),
        ),
        (one("Equal", &["a", "b"], vec![]), Op::Binary(Binary::Equal)),
        (one("Sqrt", &["x"], vec![]), Op::Unary(Unary::Sqrt)),
        (one("Exp", &["x"], vec![]), Op::Unary(Unary::Exp)),
        (one("Neg", &["x"], vec![]), Op::Unary(Unary::Neg)),
        (one("Abs", &["x"], vec![]), Op::Unary(Unary::Abs)),
        (one("Erf", &["x"], vec![]), Op::Unary(Unary::Erf)),
        (one("Relu", &["x"], vec![]), Op::Unary(Unary::Relu)),
        (one("Sigmoid", &["x"], vec![]), Op::Unary(Unary::Sigmoid)),
        (one("Tanh", &["x"], vec![]), Op::Unary(Unary::Tanh)),
        (
            one("HardSwish", &["x"], vec![]),
            Op::Unary(Unary::HardSwish),
        ),
        (
            one("Reciprocal", &["x"], vec![]),
            Op::Unary(Unary::Reciprocal),
        ),
        (
            one("LeakyRelu", &["x"], vec![attr_float("alpha", 0.1)]),
            Op::Unary(Unary::LeakyRelu { alpha: 0.1 }),
        ),
        (
            one("HardSigmoid", &["x"], vec![]),
            Op::Unary(Unary::HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            }),
        ),
        (one("Clip", &["x", "lo", "hi"], vec![]), Op::Clip),
        (
            one("Softmax", &["x"], vec![attr_int("axis", 0)]),
            Op::Softmax { axis: 0 },
        ),
        (
            one(
                "LayerNormalization",
                &["x", "s", "b"],
                vec![attr_int("axis", 1), attr_float("epsilon", 1e-6)],
            ),
            Op::LayerNormalization {
                axis: 1,
                epsilon: 1e-6,
            },
        ),
        (
            one(
                "BatchNormalization",
                &["x", "s", "b", "m", "v"],
                vec![attr_float("momentum", 0.8)],
            ),
            Op::BatchNormalization { epsilon: 1e-5 },
        ),
        (
            one(
                "MaxPool",
                &["x"],
                vec![
                    attr_ints("kernel_shape", &[3, 3]),
                    attr_int("ceil_mode", 1),
                    attr_ints("pads", &[1, 1, 1, 1]),
                    attr_ints("strides", &[2, 2]),
                    attr_int("storage_order", 1),
                ],
            ),
            Op::MaxPool(Pool {
                auto_pad: AutoPad::NotSet,
                ceil_mode: true,
                count_include_pad: false,
                dilations: vec![],
                kernel_shape: vec![3, 3],
                pads: vec![1, 1, 1, 1],
                strides: vec![2, 2],
                column_major_indices: true,
            }),
        ),
        (
            one(
                "AveragePool",
                &["x"],
                vec![
                    attr_ints("kernel_shape", &[2]),
                    attr_int("count_include_pad", 1),
                    attr_string("auto_pad", "VALID"),
                ],
            ),
            Op::AveragePool(Pool {
                auto_pad: AutoPad::Valid,
                ceil_mode: false,
                count_include_pad: true,
                dilations: vec![],
                kernel_shape: vec![2],
                pads: vec![],
                strides: vec![],
                column_major_indices: false,
            }),
        ),
        (
            one("GlobalAveragePool", &["x"], vec![]),
            Op::GlobalAveragePool,
        ),
        (
            one(
                "ReduceMean",
                &["x"],
                vec![attr_ints("axes", &[-1]), attr_int("keepdims", 0)],
            ),
            Op::Reduce(
                ReduceKind::Mean,
                Reduce {
                    axes: Some(vec![-1]),
                    keepdims: false,
                    noop_with_empty_axes: false,
                },
            ),
        ),
        (
            one(
                "ReduceSum",
                &["x", "axes"],
                vec![attr_int("noop_with_empty_axes", 1)],
            ),
            Op::Reduce(
                ReduceKind::Sum,
                Reduce {
                    axes: None,
                    keepdims: true,
                    noop_with_empty_axes: true,
                },
            ),
        ),
        (
            one("ReduceMax", &["x"], vec![]),
            Op::Reduce(
                ReduceKind::Max,
                Reduce {
                    axes: None,
                    keepdims: true,
                    noop_with_empty_axes: false,
                },
            ),
        ),
        (
            one("ArgMax", &["x"], vec![]),
            Op::ArgMax(ArgReduce {
                axis: 0,
                keepdims: true,
                select_last_index: false,
            }),
        ),
        (
            one(
                "ArgMax",
                &["x"],
                vec![
                    attr_int("axis", -1),
                    attr_int("keepdims", 0),
                    attr_int("select_last_index", 1),
                ],
            ),
            Op::ArgMax(ArgReduce {
                axis: -1,
                keepdims: false,
                select_last_index: true,
            }),
        ),
        (
            one("Concat", &["a", "b"], vec![attr_int("axis", 1)]),
            Op::Concat { axis: 1 },
        ),
        (
            node("Split", "", &["x", "sizes"], &["p", "q", "r"], vec![]),
            Op::Split {
                axis: 0,
                num_outputs: 3,
            },
        ),
        (
            one("Slice", &["x", "starts", "ends", "axes", "steps"], vec![]),
            Op::Slice,
        ),
        (
            one("Gather", &["x", "i"], vec![attr_int("axis", -1)]),
            Op::Gather { axis: -1 },
        ),
        (
            one("Reshape", &["x", "shape"], vec![]),
            Op::Reshape { allowzero: false },
        ),
        (one("Flatten", &["x"], vec![]), Op::Flatten { axis: 1 }),
        (
            one("Transpose", &["x"], vec![attr_ints("perm", &[1, 0])]),
            Op::Transpose {
                perm: Some(vec![1, 0]),
            },
        ),
        (one("Squeeze", &["x", "axes"], vec![]), Op::Squeeze),
        (one("Unsqueeze", &["x", "axes"], vec![]), Op::Unsqueeze),
        (
            one("Shape", &["x"], vec![attr_int("end", -2)]),
            Op::Shape {
                start: 0,
                end: Some(-2),
            },
        ),
        (
            one("Cast", &["x"], vec![attr_int("to", 9)]),
            Op::Cast { to: DType::Bool },
        ),
        (
            one(
                "Cast",
                &["x"],
                vec![attr_int("to", 7), attr_int("saturate", 1)],
            ),
            Op::Cast { to: DType::I64 },
        ),
        (one("Identity", &["x"], vec![]), Op::Identity),
        (one("Dropout", &["x", "ratio"], vec![]), Op::Dropout),
        (
            one(
                "Constant",
                &[],
                vec![attr_tensor("value", float_tensor("", &[2], &[0.5, -1.0]))],
            ),
            Op::Constant {
                value: f32s(&[2], &[0.5, -1.0]),
            },
        ),
        (
            one("Pad", &["x", "pads"], vec![]),
            Op::Pad {
                mode: PadMode::Constant,
            },
        ),
        (
            one(
                "Pad",
                &["x", "pads", "", "axes"],
                vec![attr_string("mode", "edge")],
            ),
            Op::Pad {
                mode: PadMode::Edge,
            },
        ),
        (
            one(
                "Resize",
                &["x", "", "scales"],
                vec![
                    attr_string("mode", "nearest"),
                    attr_string("coordinate_transformation_mode", "asymmetric"),
                    attr_string("nearest_mode", "ceil"),
                ],
            ),
            Op::Resize(Resize {
                mode: ResizeMode::Nearest,
                coordinate_transformation_mode: CoordinateTransform::Asymmetric,
                nearest_mode: NearestMode::Ceil,
                extrapolation_value: 0.0,
                cubic_coeff_a: -0.75,
                exclude_outside: false,
                axes: None,
                keep_aspect_ratio: concord_core::op::AspectRatioPolicy::Stretch,
                antialias: false,
            }),
        ),
        (
            one(
                "Resize",
                &["x", "roi", "scales"],
                vec![
                    attr_string("coordinate_transformation_mode", "tf_crop_and_resize"),
                    attr_float("extrapolation_value", 9.0),
                    attr_string("mode", "cubic"),
                    attr_float("cubic_coeff_a", -0.5),
                    attr_int("exclude_outside", 1),
                ],
            ),
            Op::Resize(Resize {
                mode: ResizeMode::Cubic,
                coordinate_transformation_mode: CoordinateTransform::TfCropAndResize,
                nearest_mode: NearestMode::RoundPreferFloor,
                extrapolation_value: 9.0,
                cubic_coeff_a: -0.5,
                exclude_outside: true,
                axes: None,
                keep_aspect_ratio: concord_core::op::AspectRatioPolicy::Stretch,
                antialias: false,
            }),
        ),
        (one("Where", &["c", "a", "b"], vec![]), Op::Where),
        (one("Expand", &["x", "shape"], vec![]), Op::Expand),
    ]
    .into_iter()
    .chain(newer_cases())
    .collect()
}

/// The ops added with the wider op table (issue 13): each read once with ONNX's defaults
/// and, where it has attributes, once with every attribute set.
fn newer_cases() -> Vec<(NodeProto, Op)> {
    use concord_core::op::{Pool, Reduce, ScatterReduction, Variadic};
    let one = |op_type: &str, inputs: &[&str], attrs| node(op_type, "", inputs, &["out"], attrs);
    let mut cases = Vec::new();
    for def in concord_core::op::UNARY_OPS.iter().filter(|d| !d.device) {
        cases.push((one(def.name, &["x"], vec![]), Op::Unary(def.op)));
    }
    for def in concord_core::op::BINARY_OPS.iter().filter(|d| !d.device) {
        let attrs = if def.name == "BitShift" {
            vec![attr_string("direction", "LEFT")]
        } else {
            vec![]
        };
        cases.push((one(def.name, &["a", "b"], attrs), Op::Binary(def.op)));
    }
    cases.push((
        one(
            "BitShift",
            &["a", "b"],
            vec![attr_string("direction", "RIGHT")],
        ),
        Op::Binary(Binary::BitShift { left: false }),
    ));
    cases.push((
        one(
            "Selu",
            &["x"],
            vec![attr_float("alpha", 2.0), attr_float("gamma", 3.0)],
        ),
        Op::Unary(Unary::Selu {
            alpha: 2.0,
            gamma: 3.0,
        }),
    ));
    cases.push((
        one("Gelu", &["x"], vec![attr_string("approximate", "tanh")]),
        Op::Unary(Unary::Gelu { tanh: true }),
    ));
    cases.push((
        one("IsInf", &["x"], vec![attr_int("detect_positive", 0)]),
        Op::Unary(Unary::IsInf {
            detect_negative: true,
            detect_positive: false,
        }),
    ));
    for (v, name) in Variadic::ALL {
        cases.push((one(name, &["a", "b", "c"], vec![]), Op::Variadic(v)));
    }
    for (kind, name) in ReduceKind::ALL {
        cases.push((
            one(name, &["x", "axes"], vec![attr_int("keepdims", 0)]),
            Op::Reduce(
                kind,
                Reduce {
                    keepdims: false,
                    ..Reduce::default()
                },
            ),
        ));
    }
    cases.push((
        one(
            "ArgMin",
            &["x"],
            vec![attr_int("axis", -1), attr_int("select_last_index", 1)],
        ),
        Op::ArgMin(ArgReduce {
            axis: -1,
            keepdims: true,
            select_last_index: true,
        }),
    ));
    cases.push((
        one("LogSoftmax", &["x"], vec![]),
        Op::LogSoftmax { axis: -1 },
    ));
    cases.push((
        one("Hardmax", &["x"], vec![attr_int("axis", 0)]),
        Op::Hardmax { axis: 0 },
    ));
    cases.push((
        one("InstanceNormalization", &["x", "s", "b"], vec![]),
        Op::InstanceNormalization { epsilon: 1e-5 },
    ));
    cases.push((
        one(
            "GroupNormalization",
            &["x", "s", "b"],
            vec![attr_int("num_groups", 4)],
        ),
        Op::GroupNormalization {
            epsilon: 1e-5,
            num_groups: 4,
        },
    ));
    cases.push((
        one("RMSNormalization", &["x", "s"], vec![attr_int("axis", 1)]),
        Op::RMSNormalization {
            axis: 1,
            epsilon: 1e-5,
        },
    ));
    cases.push((
        one("LpNormalization", &["x"], vec![attr_int("p", 1)]),
        Op::LpNormalization { axis: -1, p: 1 },
    ));
    cases.push((
        one("MeanVarianceNormalization", &["x"], vec![]),
        Op::MeanVarianceNormalization {
            axes: vec![0, 2, 3],
        },
    ));
    cases.push((
        one("LRN", &["x"], vec![attr_int("size", 5)]),
        Op::LRN {
            alpha: 1e-4,
            beta: 0.75,
            bias: 1.0,
            size: 5,
        },
    ));
    cases.push((
        node(
            "Attention",
            "",
            &["q", "k", "v"],
            &["y", "", "", "qk"],
            vec![
                attr_int("q_num_heads", 4),
                attr_int("kv_num_heads", 2),
                attr_float("softcap", 1.5),
                attr_int("qk_matmul_output_mode", 3),
                attr_int("softmax_precision", 1),
            ],
        ),
        Op::Attention {
            is_causal: false,
            kv_num_heads: Some(2),
            q_num_heads: Some(4),
            qk_matmul_output_mode: 3,
            scale: None,
            softcap: 1.5,
            softmax_precision: Some(DType::F32),
            left_window_size: -1,
            right_window_size: -1,
        },
    ));
    cases.push((
        one("CumProd", &["x", "axis"], vec![attr_int("reverse", 1)]),
        Op::CumProd {
            exclusive: false,
            reverse: true,
        },
    ));
    cases.push((
        one("BitCast", &["x"], vec![attr_int("to", 10)]),
        Op::BitCast { to: DType::F16 },
    ));
    cases.push((
        one("SwiGLU", &["a", "b"], vec![]),
        Op::SwiGLU { alpha: 1.0 },
    ));
    cases.push((
        node(
            "LinearAttention",
            "",
            &["q", "k", "v", "", "g", "beta"],
            &["y", "state"],
            vec![attr_int("q_num_heads", 2), attr_int("kv_num_heads", 2)],
        ),
        Op::LinearAttention {
            kv_num_heads: 2,
            q_num_heads: 2,
            scale: 0.0,
            update_rule: concord_core::op::LinearAttentionRule::GatedDelta,
        },
    ));
    cases.push((
        node(
            "CausalConvWithState",
            "",
            &["x", "w"],
            &["y", "state"],
            vec![],
        ),
        Op::CausalConvWithState { silu: false },
    ));
    cases.push((
        one("RotaryEmbedding", &["x", "cos", "sin"], vec![]),
        Op::RotaryEmbedding {
            interleaved: false,
            num_heads: None,
            rotary_embedding_dim: 0,
        },
    ));
    cases.push((one("GlobalMaxPool", &["x"], vec![]), Op::GlobalMaxPool));
    cases.push((
        one("GlobalLpPool", &["x"], vec![]),
        Op::GlobalLpPool { p: 2 },
    ));
    cases.push((
        one(
            "LpPool",
            &["x"],
            vec![attr_ints("kernel_shape", &[3]), attr_int("p", 3)],
        ),
        Op::LpPool(
            Pool {
                kernel_shape: vec![3],
                ..Pool::default()
            },
            3,
        ),
    ));
    cases.push((
        one("ConstantOfShape", &["s"], vec![]),
        Op::ConstantOfShape {
            value: concord_core::Tensor::from_f32([1], vec![0.0]).unwrap_or_else(|e| panic!("{e}")),
        },
    ));
    cases.push((one("Range", &["a", "b", "c"], vec![]), Op::Range));
    cases.push((one("Tile", &["x", "r"], vec![]), Op::Tile));
    cases.push((
        one("CumSum", &["x", "a"], vec![attr_int("reverse", 1)]),
        Op::CumSum {
            exclusive: false,
            reverse: true,
        },
    ));
    cases.push((
        one("GatherElements", &["x", "i"], vec![]),
        Op::GatherElements { axis: 0 },
    ));
    cases.push((
        one("GatherND", &["x", "i"], vec![]),
        Op::GatherND { batch_dims: 0 },
    ));
    cases.push((
        one(
            "ScatterElements",
            &["x", "i", "u"],
            vec![attr_string("reduction", "min")],
        ),
        Op::ScatterElements {
            axis: 0,
            reduction: ScatterReduction::Min,
        },
    ));
    cases.push((
        one("ScatterND", &["x", "i", "u"], vec![]),
        Op::ScatterND {
            reduction: ScatterReduction::None,
        },
    ));
    cases.push((
        one("OneHot", &["i", "d", "v"], vec![]),
        Op::OneHot { axis: -1 },
    ));
    cases.push((one("Trilu", &["x"], vec![]), Op::Trilu { upper: true }));
    cases.push((one("NonZero", &["x"], vec![]), Op::NonZero));
    cases.push((one("Size", &["x"], vec![]), Op::Size));
    cases.push((
        one("DepthToSpace", &["x"], vec![attr_int("blocksize", 2)]),
        Op::DepthToSpace {
            blocksize: 2,
            crd: false,
        },
    ));
    cases.push((
        one("SpaceToDepth", &["x"], vec![attr_int("blocksize", 3)]),
        Op::SpaceToDepth {
            blocksize: 3,
            crd: false,
        },
    ));
    cases.push((
        one("EyeLike", &["x"], vec![attr_int("dtype", 7)]),
        Op::EyeLike {
            dtype: Some(DType::I64),
            k: 0,
        },
    ));
    cases.push((
        one("TopK", &["x", "k"], vec![]),
        Op::TopK {
            axis: -1,
            largest: true,
            sorted: true,
        },
    ));
    cases.push((one("CastLike", &["x", "y"], vec![]), Op::CastLike));
    cases.push((
        one("Compress", &["x", "c"], vec![]),
        Op::Compress { axis: None },
    ));
    cases.push((
        one("CenterCropPad", &["x", "s"], vec![attr_ints("axes", &[1])]),
        Op::CenterCropPad {
            axes: Some(vec![1]),
        },
    ));
    cases.push((
        one(
            "ReverseSequence",
            &["x", "l"],
            vec![attr_int("batch_axis", 0), attr_int("time_axis", 1)],
        ),
        Op::ReverseSequence {
            batch_axis: 0,
            time_axis: 1,
        },
    ));
    cases.push((
        one("NegativeLogLikelihoodLoss", &["x", "t", "w"], vec![]),
        Op::NegativeLogLikelihoodLoss {
            reduction: LossReduction::Mean,
            ignore_index: None,
        },
    ));
    cases.push((
        one(
            "SoftmaxCrossEntropyLoss",
            &["x", "t"],
            vec![
                attr_string("reduction", "none"),
                attr_int("ignore_index", -1),
            ],
        ),
        Op::SoftmaxCrossEntropyLoss {
            reduction: LossReduction::None,
            ignore_index: Some(-1),
        },
    ));
    cases.push((
        one(
            "QuantizeLinear",
            &["x", "s", "z"],
            vec![attr_int("axis", 0)],
        ),
        Op::QuantizeLinear {
            axis: 0,
            block_size: 0,
            output_dtype: None,
            precision: None,
        },
    ));
    cases.push((
        one("DequantizeLinear", &["x", "s"], vec![]),
        Op::DequantizeLinear {
            axis: 1,
            block_size: 0,
            output_dtype: None,
        },
    ));
    cases.push((
        node(
            "DynamicQuantizeLinear",
            "",
            &["x"],
            &["y", "s", "z"],
            vec![],
        ),
        Op::DynamicQuantizeLinear,
    ));
    cases.push((
        one("MatMulInteger", &["a", "b", "az", "bz"], vec![]),
        Op::MatMulInteger,
    ));
    cases.push((
        one(
            "QLinearMatMul",
            &["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
            vec![],
        ),
        Op::QLinearMatMul,
    ));
    cases.push((
        one("ConvInteger", &["x", "w"], vec![attr_int("group", 2)]),
        Op::ConvInteger(Conv {
            group: 2,
            ..Conv::default()
        }),
    ));
    cases.push((
        one(
            "QLinearConv",
            &["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
            vec![],
        ),
        Op::QLinearConv(Conv::default()),
    ));
    // Recurrent ops: the defaults, then every attribute; activation_alpha and _beta are
    // read by position (the k-th function takes the k-th value), as onnxruntime does.
    cases.push((
        one("LSTM", &["x", "w", "r"], vec![attr_int("hidden_size", 3)]),
        Op::Recurrent(Recurrent {
            hidden_size: Some(3),
            ..Recurrent::new(RecurrentCell::Lstm, RnnDirection::Forward)
        }),
    ));
    let act = |kind, alpha, beta| RnnActivation { kind, alpha, beta };
    cases.push((
        one(
            "GRU",
            &["x", "w", "r", "b", "l", "h"],
            vec![
                attr_string("direction", "bidirectional"),
                attr_strings("activations", &["relu", "Tanh", "HardSigmoid", "LeakyRelu"]),
                attr_floats("activation_alpha", &[9.0, 9.0, 0.3, 0.1]),
                attr_floats("activation_beta", &[9.0, 9.0, 0.6]),
                attr_float("clip", 2.5),
                attr_int("layout", 1),
                attr_int("linear_before_reset", 1),
            ],
        ),
        Op::Recurrent(Recurrent {
            activations: vec![
                act(RnnActivationKind::Relu, 0.0, 0.0),
                act(RnnActivationKind::Tanh, 0.0, 0.0),
                act(RnnActivationKind::HardSigmoid, 0.3, 0.6),
                // Past the end of activation_beta, and LeakyRelu takes no beta.
                act(RnnActivationKind::LeakyRelu, 0.1, 0.0),
            ],
            clip: Some(2.5),
            batch_major: true,
            linear_before_reset: true,
            ..Recurrent::new(RecurrentCell::Gru, RnnDirection::Bidirectional)
        }),
    ));
    cases.push((
        one(
            "RNN",
            &["x", "w", "r"],
            vec![
                attr_string("direction", "reverse"),
                attr_strings("activations", &["ScaledTanh"]),
                attr_floats("activation_alpha", &[2.0]),
            ],
        ),
        Op::Recurrent(Recurrent {
            // ScaledTanh's beta defaults to 1.
            activations: vec![act(RnnActivationKind::ScaledTanh, 2.0, 1.0)],
            ..Recurrent::new(RecurrentCell::Rnn, RnnDirection::Reverse)
        }),
    ));
    cases.push((
        one(
            "Einsum",
            &["a", "b"],
            vec![attr_string("equation", "...ij, ...jk -> ...ik")],
        ),
        Op::Einsum {
            equation: "...ij, ...jk -> ...ik".into(),
        },
    ));
    cases.push((one("Det", &["x"], vec![]), Op::Det));
    cases.push((
        one(
            "NonMaxSuppression",
            &["boxes", "scores", "max", "iou", "score"],
            vec![attr_int("center_point_box", 1)],
        ),
        Op::NonMaxSuppression {
            center_point_box: true,
        },
    ));
    cases.push((
        one("NonMaxSuppression", &["boxes", "scores"], vec![]),
        Op::NonMaxSuppression {
            center_point_box: false,
        },
    ));
    cases.push((
        one(
            "Unique",
            &["x"],
            vec![attr_int("axis", -1), attr_int("sorted", 0)],
        ),
        Op::Unique {
            axis: Some(-1),
            sorted: false,
        },
    ));
    cases.push((
        one("Unique", &["x"], vec![]),
        Op::Unique {
            axis: None,
            sorted: true,
        },
    ));
    cases.push((
        one(
            "MaxUnpool",
            &["x", "i", "shape"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_ints("strides", &[2, 2]),
            ],
        ),
        Op::MaxUnpool {
            kernel_shape: vec![2, 2],
            pads: vec![],
            strides: vec![2, 2],
        },
    ));
    cases.push((
        one(
            "ConvTranspose",
            &["x", "w"],
            vec![
                attr_ints("strides", &[3, 2]),
                attr_ints("output_padding", &[1, 1]),
                attr_ints("output_shape", &[10, 8]),
                attr_int("group", 2),
            ],
        ),
        Op::ConvTranspose(concord_core::op::ConvTranspose {
            conv: Conv {
                group: 2,
                strides: vec![3, 2],
                ..Conv::default()
            },
            output_padding: vec![1, 1],
            output_shape: vec![10, 8],
        }),
    ));
    for (name, kind) in [
        ("HannWindow", concord_core::op::WindowKind::Hann),
        ("HammingWindow", concord_core::op::WindowKind::Hamming),
        ("BlackmanWindow", concord_core::op::WindowKind::Blackman),
    ] {
        cases.push((
            one(
                name,
                &["size"],
                vec![attr_int("periodic", 0), attr_int("output_datatype", 11)],
            ),
            Op::Window {
                kind,
                periodic: false,
                dtype: DType::F64,
            },
        ));
    }
    // Read at opset 17: the axis is an attribute.
    cases.push((
        one(
            "DFT",
            &["x", "len"],
            vec![attr_int("axis", 2), attr_int("onesided", 1)],
        ),
        Op::Dft {
            axis: Some(2),
            inverse: false,
            onesided: true,
        },
    ));
    cases.push((
        one(
            "STFT",
            &["x", "step", "window"],
            vec![attr_int("onesided", 0)],
        ),
        Op::Stft { onesided: false },
    ));
    // Control flow, with empty subgraphs (read at opset 17, their form's opset).
    let empty = || concord_onnx::proto::GraphProto::default();
    let body = || {
        Box::new(concord_core::Graph {
            opset: 17,
            ..concord_core::Graph::default()
        })
    };
    cases.push((
        one(
            "If",
            &["c"],
            vec![
                attr_graph("then_branch", empty()),
                attr_graph("else_branch", empty()),
            ],
        ),
        Op::If {
            then_branch: body(),
            else_branch: body(),
        },
    ));
    cases.push((
        one("Loop", &["m", "c", "x"], vec![attr_graph("body", empty())]),
        Op::Loop {
            body: body(),
            captures: 0,
        },
    ));
    cases.push((
        one(
            "Scan",
            &["s", "x"],
            vec![
                attr_graph("body", empty()),
                attr_int("num_scan_inputs", 1),
                attr_ints("scan_input_axes", &[1]),
                attr_ints("scan_input_directions", &[1]),
                attr_ints("scan_output_axes", &[-1]),
                attr_ints("scan_output_directions", &[0]),
            ],
        ),
        Op::Scan {
            body: body(),
            num_scan_inputs: 1,
            scan_input_axes: vec![1],
            scan_input_directions: vec![true],
            scan_output_axes: vec![-1],
            scan_output_directions: vec![false],
            captures: 0,
        },
    ));
    // GridSample is read at opset 17 here, with opset 16's spelling of the modes.
    cases.push((
        one(
            "GridSample",
            &["x", "grid"],
            vec![
                attr_string("mode", "bicubic"),
                attr_string("padding_mode", "reflection"),
                attr_int("align_corners", 1),
            ],
        ),
        Op::GridSample {
            mode: op::GridSampleMode::Cubic,
            padding_mode: op::GridPadding::Reflection,
            align_corners: true,
        },
    ));
    cases.push((
        one("GridSample", &["x", "grid"], vec![]),
        Op::GridSample {
            mode: op::GridSampleMode::Linear,
            padding_mode: op::GridPadding::Zeros,
            align_corners: false,
        },
    ));
    cases.push((
        one(
            "AffineGrid",
            &["theta", "size"],
            vec![attr_int("align_corners", 1)],
        ),
        Op::AffineGrid {
            align_corners: true,
        },
    ));
    cases.push((
        one(
            "MelWeightMatrix",
            &["bins", "dft", "rate", "lo", "hi"],
            vec![attr_int("output_datatype", 11)],
        ),
        Op::MelWeightMatrix { dtype: DType::F64 },
    ));
    cases.extend(random_cases());
    cases.push((
        one(
            "TensorScatter",
            &["past", "update", "at"],
            vec![attr_string("mode", "circular"), attr_int("axis", 1)],
        ),
        Op::TensorScatter {
            axis: 1,
            circular: true,
        },
    ));
    cases.push((
        one("TensorScatter", &["past", "update"], vec![]),
        Op::TensorScatter {
            axis: -2,
            circular: false,
        },
    ));
    cases.push((
        one(
            "TfIdfVectorizer",
            &["x"],
            vec![
                attr_string("mode", "TFIDF"),
                attr_int("min_gram_length", 1),
                attr_int("max_gram_length", 2),
                attr_int("max_skip_count", 3),
                attr_ints("ngram_counts", &[0, 2]),
                attr_ints("ngram_indexes", &[1, 0, 2]),
                attr_ints("pool_int64s", &[4, 5, 4, 5]),
                attr_floats("weights", &[0.5, 1.0, 2.0]),
            ],
        ),
        Op::TfIdfVectorizer(op::TfIdf {
            mode: op::TfIdfMode::TfIdf,
            min_gram_length: 1,
            max_gram_length: 2,
            max_skip_count: 3,
            ngram_counts: vec![0, 2],
            ngram_indexes: vec![1, 0, 2],
            pool: vec![4, 5, 4, 5],
            weights: vec![0.5, 1.0, 2.0],
        }),
    ));
    // Regions of interest, deformable convolution and Col2Im.
    cases.push((
        one(
            "RoiAlign",
            &["x", "rois", "batch"],
            vec![
                attr_string("coordinate_transformation_mode", "output_half_pixel"),
                attr_string("mode", "max"),
                attr_int("output_height", 3),
                attr_int("output_width", 2),
                attr_int("sampling_ratio", 2),
                attr_float("spatial_scale", 0.25),
            ],
        ),
        Op::RoiAlign(op::RoiAlign {
            mode: op::RoiAlignMode::Max,
            coordinates: op::RoiCoordinates::OutputHalfPixel,
            output_height: 3,
            output_width: 2,
            sampling_ratio: 2,
            spatial_scale: 0.25,
        }),
    ));
    cases.push((
        one("RoiAlign", &["x", "rois", "batch"], vec![]),
        Op::RoiAlign(op::RoiAlign::default()),
    ));
    cases.push((
        one(
            "MaxRoiPool",
            &["x", "rois"],
            vec![
                attr_ints("pooled_shape", &[2, 3]),
                attr_float("spatial_scale", 0.0625),
            ],
        ),
        Op::MaxRoiPool {
            pooled_shape: [2, 3],
            spatial_scale: 0.0625,
        },
    ));
    cases.push((
        one(
            "DeformConv",
            &["x", "w", "offset", "b", "mask"],
            vec![
                attr_ints("dilations", &[2, 1]),
                attr_int("group", 2),
                attr_ints("kernel_shape", &[3, 3]),
                attr_int("offset_group", 4),
                attr_ints("pads", &[1, 0, 1, 0]),
                attr_ints("strides", &[1, 2]),
            ],
        ),
        Op::DeformConv(op::DeformConv {
            dilations: vec![2, 1],
            group: 2,
            kernel_shape: vec![3, 3],
            offset_group: 4,
            pads: vec![1, 0, 1, 0],
            strides: vec![1, 2],
        }),
    ));
    cases.push((
        one("DeformConv", &["x", "w", "offset"], vec![]),
        Op::DeformConv(op::DeformConv::default()),
    ));
    cases.push((
        one(
            "Col2Im",
            &["x", "image", "block"],
            vec![
                attr_ints("dilations", &[1, 2]),
                attr_ints("pads", &[0, 1, 1, 0]),
                attr_ints("strides", &[2, 2]),
            ],
        ),
        Op::Col2Im {
            dilations: vec![1, 2],
            pads: vec![0, 1, 1, 0],
            strides: vec![2, 2],
        },
    ));
    cases
}

/// The random ops: a given seed is kept; without one the seed derives from the node's
/// name, which for these unnamed nodes is the reader's `<op type>_0`.
fn random_cases() -> Vec<(NodeProto, Op)> {
    let one = |op_type: &str, inputs: &[&str], attrs| node(op_type, "", inputs, &["out"], attrs);
    let by_name = |op_type: &str| op::RandomSeed::from_node_name(&format!("{op_type}_0"));
    let normal = |mean, scale| op::Distribution::Normal { mean, scale };
    let uniform = |low, high| op::Distribution::Uniform { low, high };
    vec![
        (
            one(
                "RandomNormal",
                &[],
                vec![
                    attr_ints("shape", &[2, 3]),
                    attr_float("mean", 1.0),
                    attr_float("scale", 2.0),
                    attr_float("seed", 5.0),
                    attr_int("dtype", 11),
                ],
            ),
            Op::Random(op::Random {
                distribution: normal(1.0, 2.0),
                shape: Some(vec![2, 3]),
                dtype: Some(DType::F64),
                seed: op::RandomSeed::Given(5.0),
            }),
        ),
        (
            // The fixed-shape forms' dtype defaults to float.
            one("RandomUniform", &[], vec![attr_ints("shape", &[4])]),
            Op::Random(op::Random {
                distribution: uniform(0.0, 1.0),
                shape: Some(vec![4]),
                dtype: Some(DType::F32),
                seed: by_name("RandomUniform"),
            }),
        ),
        (
            // The Like forms' dtype defaults to the input's.
            one("RandomNormalLike", &["x"], vec![]),
            Op::Random(op::Random {
                distribution: normal(0.0, 1.0),
                shape: None,
                dtype: None,
                seed: by_name("RandomNormalLike"),
            }),
        ),
        (
            one(
                "RandomUniformLike",
                &["x"],
                vec![
                    attr_float("low", -1.0),
                    attr_float("high", 2.0),
                    attr_int("dtype", 10),
                ],
            ),
            Op::Random(op::Random {
                distribution: uniform(-1.0, 2.0),
                shape: None,
                dtype: Some(DType::F16),
                seed: by_name("RandomUniformLike"),
            }),
        ),
        (
            one(
                "Multinomial",
                &["x"],
                vec![
                    attr_int("sample_size", 5),
                    attr_int("dtype", 7),
                    attr_float("seed", 1.5),
                ],
            ),
            Op::Multinomial {
                sample_size: 5,
                dtype: DType::I64,
                seed: op::RandomSeed::Given(1.5),
            },
        ),
        (
            one("Multinomial", &["x"], vec![]),
            Op::Multinomial {
                sample_size: 1,
                dtype: DType::I32,
                seed: by_name("Multinomial"),
            },
        ),
        (
            one("Bernoulli", &["x"], vec![attr_int("dtype", 9)]),
            Op::Bernoulli {
                dtype: Some(DType::Bool),
                seed: by_name("Bernoulli"),
            },
        ),
    ]
}

#[test]
fn unseeded_random_nodes_take_their_seed_from_their_name() {
    let draw = |name: &str| {
        node(
            "RandomNormal",
            name,
            &[],
            &[&format!("{name}_out")],
            vec![attr_ints("shape", &[2])],
        )
    };
    let m = model(
        17,
        graph(vec![draw("noise"), draw("jitter")], vec![], vec![], vec![]),
    );
    let seeds = |m: &concord_onnx::proto::ModelProto| match read_graph(&bytes(m)) {
        Ok(g) => g
            .nodes
            .iter()
            .map(|n| match &n.op {
                Op::Random(r) => r.seed,
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>(),
        Err(e) => panic!("{e}"),
    };
    let first = seeds(&m);
    assert_eq!(
        first,
        [
            op::RandomSeed::from_node_name("noise"),
            op::RandomSeed::from_node_name("jitter")
        ]
    );
    assert_ne!(first[0], first[1], "two nodes, two streams");
    assert_eq!(seeds(&m), first, "the same on every read");
}

#[test]
fn random_dtypes_and_shapes_are_checked() {
    let read = |op_type: &str, inputs: &[&str], attrs| {
        let proto = node(op_type, "", inputs, &["y"], attrs);
        read_graph(&bytes(&model(
            17,
            graph(vec![proto], vec![], vec![], vec![]),
        )))
    };
    expect_err(
        read("RandomNormal", &[], vec![]),
        |e| matches!(e, concord_onnx::Error::MissingAttribute { .. }),
        &["shape"],
    );
    expect_err(
        read("RandomNormal", &[], vec![attr_ints("shape", &[2, -1])]),
        |_| true,
        &["shape"],
    );
    // Random values are floats; Multinomial's indices i32 or i64.
    expect_err(
        read(
            "RandomUniform",
            &[],
            vec![attr_ints("shape", &[2]), attr_int("dtype", 7)],
        ),
        |_| true,
        &["dtype", "i64"],
    );
    expect_err(
        read("Multinomial", &["x"], vec![attr_int("dtype", 1)]),
        |_| true,
        &["dtype", "i32"],
    );
    expect_err(
        read("Multinomial", &["x"], vec![attr_int("sample_size", -1)]),
        |_| true,
        &["sample_size"],
    );
    // A string output has no Concord tensor.
    expect_err(
        read("Bernoulli", &["x"], vec![attr_int("dtype", 8)]),
        |e| matches!(e, concord_onnx::Error::UnsupportedDType { .. }),
        &[],
    );
}

#[test]
fn tfidf_over_strings_is_refused_by_design() {
    let proto = node(
        "TfIdfVectorizer",
        "tokens",
        &["x"],
        &["y"],
        vec![
            attr_string("mode", "TF"),
            attr_int("min_gram_length", 1),
            attr_int("max_gram_length", 1),
            attr_int("max_skip_count", 0),
            attr_ints("ngram_counts", &[0]),
            attr_ints("ngram_indexes", &[0, 1]),
            attr_strings("pool_strings", &["cat", "dog"]),
        ],
    );
    expect_err(
        read_graph(&bytes(&model(
            9,
            graph(vec![proto], vec![], vec![], vec![]),
        ))),
        |e| matches!(e, concord_onnx::Error::RefusedOp { .. }),
        &["tokens", "TfIdfVectorizer", "pool_strings", "integer ids"],
    );
}

#[test]
fn tfidf_attributes_must_agree() {
    let read = |attrs: Vec<concord_onnx::proto::AttributeProto>| {
        let mut all = vec![
            attr_string("mode", "IDF"),
            attr_int("max_skip_count", 0),
            attr_ints("pool_int64s", &[1, 2, 3]),
        ];
        all.extend(attrs);
        let proto = node("TfIdfVectorizer", "", &["x"], &["y"], all);
        read_graph(&bytes(&model(
            9,
            graph(vec![proto], vec![], vec![], vec![]),
        )))
    };
    let lengths = || {
        vec![
            attr_int("min_gram_length", 1),
            attr_int("max_gram_length", 1),
        ]
    };
    // A 2-gram start past the pool's end.
    let mut bad_counts = lengths();
    bad_counts.extend([
        attr_ints("ngram_counts", &[0, 5]),
        attr_ints("ngram_indexes", &[0, 1, 2]),
    ]);
    expect_err(read(bad_counts), |_| true, &["ngram_counts"]);
    // Three 1-grams but two indexes.
    let mut few_indexes = lengths();
    few_indexes.extend([
        attr_ints("ngram_counts", &[0]),
        attr_ints("ngram_indexes", &[0, 1]),
    ]);
    expect_err(read(few_indexes), |_| true, &["ngram_counts"]);
    // Two weights for three columns, in a mode that reads them.
    let mut few_weights = lengths();
    few_weights.extend([
        attr_ints("ngram_counts", &[0]),
        attr_ints("ngram_indexes", &[0, 1, 2]),
        attr_floats("weights", &[1.0, 2.0]),
    ]);
    expect_err(read(few_weights), |_| true, &["weights"]);
    // max_gram_length below min_gram_length.
    let mut backwards = vec![
        attr_int("min_gram_length", 2),
        attr_int("max_gram_length", 1),
    ];
    backwards.extend([
        attr_ints("ngram_counts", &[0]),
        attr_ints("ngram_indexes", &[0, 1, 2]),
    ]);
    expect_err(read(backwards), |_| true, &["max_gram_length"]);
}

#[test]
fn roi_align_coordinates_follow_the_opset() {
    let read = |opset: i64, attrs| {
        let proto = node("RoiAlign", "", &["x", "rois", "batch"], &["y"], attrs);
        read_graph(&bytes(&model(
            opset,
            graph(vec![proto], vec![], vec![], vec![]),
        )))
        .map(|g| g.nodes[0].op.clone())
    };
    let roi = |coordinates| {
        Op::RoiAlign(op::RoiAlign {
            coordinates,
            ..op::RoiAlign::default()
        })
    };
    // Opset 10's form (read up to 15) has no coordinate_transformation_mode and behaves as
    // output_half_pixel; from opset 16 the default is half_pixel.
    for opset in [10, 13, 15] {
        assert_eq!(
            read(opset, vec![]).ok(),
            Some(roi(op::RoiCoordinates::OutputHalfPixel)),
            "opset {opset}"
        );
    }
    assert_eq!(
        read(16, vec![]).ok(),
        Some(roi(op::RoiCoordinates::HalfPixel))
    );
    let mode = || vec![attr_string("coordinate_transformation_mode", "half_pixel")];
    expect_err(
        read(11, mode()),
        |_| true,
        &["coordinate_transformation_mode", "16"],
    );
    expect_err(
        read(14, mode()),
        |_| true,
        &["coordinate_transformation_mode", "16"],
    );
    expect_err(
        read(
            16,
            vec![attr_string(
                "coordinate_transformation_mode",
                "align_corners",
            )],
        ),
        |_| true,
        &["align_corners"],
    );
    expect_err(
        read(16, vec![attr_string("mode", "sum")]),
        |_| true,
        &["mode", "sum"],
    );
    expect_err(
        read(16, vec![attr_int("sampling_ratio", -1)]),
        |_| true,
        &["sampling_ratio", "-1"],
    );
    expect_err(
        read(16, vec![attr_int("output_height", 0)]),
        |_| true,
        &["output_height"],
    );
}

#[test]
fn region_and_deformable_attributes_are_checked() {
    let read = |op_type: &str, inputs: &[&str], opset: i64, attrs| {
        let proto = node(op_type, "", inputs, &["y"], attrs);
        read_graph(&bytes(&model(
            opset,
            graph(vec![proto], vec![], vec![], vec![]),
        )))
    };
    // MaxRoiPool (opset 1's form) reads from opset 7; its pooled_shape is required and has
    // two extents.
    let pooled = || vec![attr_ints("pooled_shape", &[2, 1])];
    assert_eq!(
        read("MaxRoiPool", &["x", "r"], 7, pooled())
            .ok()
            .map(|g| g.nodes[0].op.clone()),
        Some(Op::MaxRoiPool {
            pooled_shape: [2, 1],
            spatial_scale: 1.0,
        })
    );
    expect_err(
        read("MaxRoiPool", &["x", "r"], 13, vec![]),
        |_| true,
        &["pooled_shape"],
    );
    expect_err(
        read(
            "MaxRoiPool",
            &["x", "r"],
            13,
            vec![attr_ints("pooled_shape", &[2, 2, 2])],
        ),
        |_| true,
        &["pooled_shape", "two"],
    );
    // DeformConv has no auto_pad, and its groups are at least 1.
    let deform = ["x", "w", "offset"];
    expect_err(
        read(
            "DeformConv",
            &deform,
            19,
            vec![attr_string("auto_pad", "SAME_UPPER")],
        ),
        |_| true,
        &["auto_pad"],
    );
    expect_err(
        read("DeformConv", &deform, 19, vec![attr_int("offset_group", 0)]),
        |_| true,
        &["offset_group"],
    );
    // Col2Im exists from opset 18.
    expect_err(
        read("Col2Im", &["x", "i", "b"], 17, vec![]),
        |_| true,
        &["Col2Im"],
    );
}

#[test]
fn grid_sample_modes_are_spelled_as_the_opset_says() {
    let read = |opset: i64, mode: &str| {
        let proto = node(
            "GridSample",
            "",
            &["x", "grid"],
            &["y"],
            vec![attr_string("mode", mode)],
        );
        read_graph(&bytes(&model(
            opset,
            graph(vec![proto], vec![], vec![], vec![]),
        )))
        .map(|g| g.nodes[0].op.clone())
    };
    let gs = |mode| Op::GridSample {
        mode,
        padding_mode: op::GridPadding::Zeros,
        align_corners: false,
    };
    assert_eq!(read(20, "cubic").ok(), Some(gs(op::GridSampleMode::Cubic)));
    assert_eq!(
        read(20, "linear").ok(),
        Some(gs(op::GridSampleMode::Linear))
    );
    assert_eq!(
        read(16, "bilinear").ok(),
        Some(gs(op::GridSampleMode::Linear))
    );
    assert_eq!(
        read(19, "nearest").ok(),
        Some(gs(op::GridSampleMode::Nearest))
    );
    expect_err(read(16, "cubic"), |_| true, &["cubic", "16"]);
    expect_err(read(20, "bilinear"), |_| true, &["bilinear", "20"]);
}

#[test]
fn recurrent_attributes_are_checked() {
    let read = |opset: i64, attrs| {
        let proto = node("LSTM", "", &["x", "w", "r"], &["y"], attrs);
        read_graph(&bytes(&model(
            opset,
            graph(vec![proto], vec![], vec![], vec![]),
        )))
    };
    expect_err(
        read(13, vec![attr_int("layout", 1)]),
        |_| true,
        &["layout", "opset 14"],
    );
    // A bidirectional LSTM takes six functions.
    expect_err(
        read(
            17,
            vec![
                attr_string("direction", "bidirectional"),
                attr_strings("activations", &["Sigmoid", "Tanh", "Tanh"]),
            ],
        ),
        |_| true,
        &["activations", "6"],
    );
    expect_err(
        read(
            17,
            vec![attr_strings("activations", &["Sigmoid", "Gelu", "Tanh"])],
        ),
        |_| true,
        &["Gelu"],
    );
    expect_err(
        read(17, vec![attr_int("linear_before_reset", 1)]),
        |_| true,
        &["linear_before_reset"],
    );
}

#[test]
fn every_op_type_reads_as_the_spec_says() {
    let cases = cases();
    let covered: BTreeSet<&str> = cases.iter().map(|(_, op)| op.name()).collect();
    let supported: BTreeSet<&str> = concord_core::op::supported_names()
        .iter()
        .copied()
        .collect();
    assert_eq!(covered, supported, "every op type needs a case");

    // Each node in its own graph, so that the shared output name does not collide.
    for (proto, expected) in cases {
        let op_type = proto.op_type.clone();
        // Opset 17, or the op's first opset when it is newer.
        let opset = expected.schema().since.max(17);
        let m = model(opset, graph(vec![proto], vec![], vec![], vec![]));
        let graph = match read_graph(&bytes(&m)) {
            Ok(g) => g,
            Err(e) => panic!("{op_type}: {e}"),
        };
        let node = graph.nodes.first().map(|n| n.op.clone());
        assert_eq!(node.as_ref(), Some(&expected), "{op_type}");

        let back = save(&graph)
            .map_err(|e| e.to_string())
            .and_then(|b| read_graph(&b).map_err(|e| e.to_string()));
        assert_eq!(
            back.map(|g| g.nodes),
            Ok(graph.nodes.clone()),
            "{op_type} after save and read"
        );
    }
}

#[test]
fn dft_axis_is_an_attribute_before_opset_20_and_an_input_from_it() {
    let read = |opset: i64, attrs| {
        let proto = node("DFT", "", &["x", "", "axis"], &["y"], attrs);
        read_graph(&bytes(&model(
            opset,
            graph(vec![proto], vec![], vec![], vec![]),
        )))
        .map(|g| g.nodes.first().map(|n| n.op.clone()))
    };
    let dft = |axis| {
        Some(Op::Dft {
            axis,
            inverse: true,
            onesided: false,
        })
    };
    // Opset 17's default axis is 1.
    assert_eq!(
        read(17, vec![attr_int("inverse", 1)]).map_err(|e| e.to_string()),
        Ok(dft(Some(1)))
    );
    assert_eq!(
        read(20, vec![attr_int("inverse", 1)]).map_err(|e| e.to_string()),
        Ok(dft(None))
    );
    expect_err(
        read(20, vec![attr_int("axis", 1)]),
        |_| true,
        &["axis", "opset 20"],
    );
    expect_err(
        read(17, vec![attr_int("output_datatype", 1)]),
        |_| true,
        &["output_datatype"],
    );
}

#[test]
fn window_output_datatype_must_be_numeric() {
    let proto = node(
        "HannWindow",
        "",
        &["size"],
        &["y"],
        vec![attr_int("output_datatype", 9)],
    );
    expect_err(
        read_graph(&bytes(&model(
            17,
            graph(vec![proto], vec![], vec![], vec![]),
        ))),
        |_| true,
        &["output_datatype"],
    );
}
