//! Reading and writing agree: a graph saved and read back is the same graph, for every op
//! variant; hand-made models read with the ONNX defaults applied; the wire format matches
//! onnx.proto's field numbers, checked against bytes assembled by hand.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

mod common;

use common::*;
use concord_core::op::{ArgReduce, Binary, ReduceKind, Unary};
use concord_core::op::{
    AutoPad, Conv, CoordinateTransform, Gemm, NearestMode, PadMode, Pool, Reduce, Resize,
    ResizeMode,
};
use concord_core::{DType, Dim, Graph, Node, Op, Tensor, ValueInfo};
use concord_onnx::proto::tensor_proto::DataType;
use concord_onnx::proto::TensorProto;
use concord_onnx::{
    ir_version_for, read_graph, read_tensor_proto, save, tensor_to_proto, to_model_proto, Error,
};
use half::f16;
use std::collections::{BTreeMap, BTreeSet};

/// Compares everything a round trip must preserve (not `values`, which only inference
/// fills), node by node so a failure names the node.
#[track_caller]
fn assert_same_graph(expected: &Graph, actual: &Graph) {
    assert_eq!(expected.name, actual.name, "graph name");
    assert_eq!(expected.opset, actual.opset, "opset");
    assert_eq!(expected.inputs, actual.inputs, "inputs");
    assert_eq!(expected.outputs, actual.outputs, "outputs");
    assert_eq!(expected.initializers, actual.initializers, "initializers");
    assert_eq!(expected.nodes.len(), actual.nodes.len(), "node count");
    for (e, a) in expected.nodes.iter().zip(&actual.nodes) {
        assert_eq!(e, a, "node `{}`", e.name);
    }
}

#[track_caller]
fn round_trip(graph: &Graph) -> Graph {
    let bytes = match save(graph) {
        Ok(b) => b,
        Err(e) => panic!("save failed: {e}"),
    };
    match read_graph(&bytes) {
        Ok(g) => g,
        Err(e) => panic!("read_graph of saved bytes failed: {e}"),
    }
}

fn n(name: &str, op: Op, inputs: &[&str], outputs: &[&str]) -> Node {
    Node::new(name, op, inputs, outputs)
}

fn t(result: Result<Tensor, concord_core::Error>) -> Tensor {
    match result {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

/// One node per op variant (two for variants whose attributes have distinct write paths),
/// with non-default attribute values wherever the op has attributes.
fn every_op_graph(opset: i64) -> Graph {
    let nodes = vec![
        n(
            "conv_custom",
            Op::Conv(Conv {
                auto_pad: AutoPad::SameUpper,
                dilations: vec![1, 2],
                group: 2,
                kernel_shape: vec![3, 3],
                pads: vec![],
                strides: vec![2, 1],
            }),
            &["x", "w"],
            &["conv_a"],
        ),
        n(
            "conv_default",
            Op::Conv(Conv {
                group: 1,
                pads: vec![1, 1, 1, 1],
                ..Conv::default()
            }),
            &["x", "w", "b"],
            &["conv_b"],
        ),
        n(
            "gemm",
            Op::Gemm(Gemm {
                alpha: 0.5,
                beta: 2.0,
                trans_a: true,
                trans_b: false,
            }),
            &["m", "m", "b"],
            &["gemm_out"],
        ),
        n(
            "gemm_default",
            Op::Gemm(Gemm::default()),
            &["m", "m"],
            &["gemm_d"],
        ),
        n("matmul", Op::MatMul, &["m", "m"], &["mm"]),
        n("add", Op::Binary(Binary::Add), &["x", "x"], &["add"]),
        n("sub", Op::Binary(Binary::Sub), &["x", "x"], &["sub"]),
        n("mul", Op::Binary(Binary::Mul), &["x", "x"], &["mul"]),
        n("div", Op::Binary(Binary::Div), &["x", "x"], &["div"]),
        n("pow", Op::Binary(Binary::Pow), &["x", "x"], &["pow"]),
        n(
            "mod_f",
            Op::Binary(Binary::Mod { fmod: true }),
            &["x", "x"],
            &["modf"],
        ),
        n(
            "mod_i",
            Op::Binary(Binary::Mod { fmod: false }),
            &["idx", "idx"],
            &["modi"],
        ),
        n("equal", Op::Binary(Binary::Equal), &["x", "x"], &["eq"]),
        n("sqrt", Op::Unary(Unary::Sqrt), &["x"], &["sqrt"]),
        n("exp", Op::Unary(Unary::Exp), &["x"], &["exp"]),
        n("neg", Op::Unary(Unary::Neg), &["x"], &["neg"]),
        n("abs", Op::Unary(Unary::Abs), &["x"], &["abs"]),
        n("erf", Op::Unary(Unary::Erf), &["x"], &["erf"]),
        n("relu", Op::Unary(Unary::Relu), &["x"], &["relu"]),
        n("sigmoid", Op::Unary(Unary::Sigmoid), &["x"], &["sig"]),
        n("tanh", Op::Unary(Unary::Tanh), &["x"], &["tanh"]),
        n("hardswish", Op::Unary(Unary::HardSwish), &["x"], &["hsw"]),
        n(
            "reciprocal",
            Op::Unary(Unary::Reciprocal),
            &["x"],
            &["recip"],
        ),
        n(
            "argmax",
            Op::ArgMax(ArgReduce {
                axis: -1,
                keepdims: false,
                select_last_index: true,
            }),
            &["x"],
            &["argmax"],
        ),
        n(
            "leaky",
            Op::Unary(Unary::LeakyRelu { alpha: 0.3 }),
            &["x"],
            &["leaky"],
        ),
        n(
            "leaky_d",
            Op::Unary(Unary::LeakyRelu { alpha: 0.01 }),
            &["x"],
            &["leaky_d"],
        ),
        n(
            "hsig",
            Op::Unary(Unary::HardSigmoid {
                alpha: 0.25,
                beta: 0.4,
            }),
            &["x"],
            &["hsig"],
        ),
        n("clip", Op::Clip, &["x", "", "max"], &["clip"]),
        n("softmax", Op::Softmax { axis: 1 }, &["x"], &["sm"]),
        n(
            "ln",
            Op::LayerNormalization {
                axis: 1,
                epsilon: 1e-3,
            },
            &["x", "scale", "b"],
            &["ln"],
        ),
        n(
            "bn",
            Op::BatchNormalization { epsilon: 1e-3 },
            &["x", "scale", "b", "b", "scale"],
            &["bn"],
        ),
        n(
            "maxpool",
            Op::MaxPool(Pool {
                auto_pad: AutoPad::Valid,
                ceil_mode: true,
                count_include_pad: false,
                dilations: vec![2, 2],
                kernel_shape: vec![2, 2],
                pads: vec![1, 1, 0, 0],
                strides: vec![2, 2],
                column_major_indices: true,
            }),
            &["x"],
            &["maxpool"],
        ),
        n(
            "avgpool",
            Op::AveragePool(Pool {
                auto_pad: AutoPad::SameLower,
                count_include_pad: true,
                dilations: vec![1, 1],
                kernel_shape: vec![3, 3],
                ..Pool::default()
            }),
            &["x"],
            &["avgpool"],
        ),
        n("gap", Op::GlobalAveragePool, &["x"], &["gap"]),
        n(
            "rmean",
            Op::Reduce(
                ReduceKind::Mean,
                Reduce {
                    axes: None,
                    keepdims: false,
                    noop_with_empty_axes: true,
                },
            ),
            &["x", "axes"],
            &["rmean"],
        ),
        n(
            "rsum",
            Op::Reduce(ReduceKind::Sum, Reduce::default()),
            &["x", "axes"],
            &["rsum"],
        ),
        n(
            "rmax",
            Op::Reduce(
                ReduceKind::Max,
                Reduce {
                    keepdims: false,
                    ..Reduce::default()
                },
            ),
            &["x"],
            &["rmax"],
        ),
        n(
            "concat",
            Op::Concat { axis: -1 },
            &["x", "x", "x"],
            &["cat"],
        ),
        n("concat0", Op::Concat { axis: 0 }, &["x", "x"], &["cat0"]),
        n(
            "split_n",
            Op::Split {
                axis: 1,
                num_outputs: 3,
            },
            &["x"],
            &["s0", "s1", "s2"],
        ),
        n(
            "split_input",
            Op::Split {
                axis: 0,
                num_outputs: 2,
            },
            &["x", "sizes"],
            &["s3", "s4"],
        ),
        n(
            "slice",
            Op::Slice,
            &["x", "starts", "ends", "", "steps"],
            &["slice"],
        ),
        n("gather", Op::Gather { axis: 1 }, &["x", "idx"], &["gather"]),
        n(
            "reshape",
            Op::Reshape { allowzero: true },
            &["x", "shape"],
            &["reshape"],
        ),
        n(
            "reshape_d",
            Op::Reshape { allowzero: false },
            &["x", "shape"],
            &["reshape_d"],
        ),
        n("flatten", Op::Flatten { axis: 2 }, &["x"], &["flat"]),
        n(
            "transpose",
            Op::Transpose {
                perm: Some(vec![0, 2, 1, 3]),
            },
            &["x"],
            &["tr"],
        ),
        n(
            "transpose_rev",
            Op::Transpose { perm: None },
            &["x"],
            &["tr_rev"],
        ),
        n("squeeze", Op::Squeeze, &["x", "axes"], &["sq"]),
        n("squeeze_all", Op::Squeeze, &["x"], &["sq_all"]),
        n("unsqueeze", Op::Unsqueeze, &["x", "axes"], &["unsq"]),
        n(
            "shape",
            Op::Shape {
                start: 1,
                end: Some(-1),
            },
            &["x"],
            &["shape_out"],
        ),
        n(
            "shape_all",
            Op::Shape {
                start: 0,
                end: None,
            },
            &["x"],
            &["shape_all"],
        ),
        n("cast_f16", Op::Cast { to: DType::F16 }, &["x"], &["half"]),
        n("cast_bool", Op::Cast { to: DType::Bool }, &["x"], &["flag"]),
        n("cast_i64", Op::Cast { to: DType::I64 }, &["x"], &["ints"]),
        n(
            "cast_f32",
            Op::Cast { to: DType::F32 },
            &["half"],
            &["back"],
        ),
        n("identity", Op::Identity, &["x"], &["id"]),
        n("dropout", Op::Dropout, &["x"], &["drop"]),
        n(
            "const_f32",
            Op::Constant {
                value: t(Tensor::from_f32([2, 2], vec![1.0, -2.5, 3.25, 0.0])),
            },
            &[],
            &["k_f32"],
        ),
        n(
            "const_bool",
            Op::Constant {
                value: t(Tensor::from_bool([3], vec![true, false, true])),
            },
            &[],
            &["k_bool"],
        ),
        n(
            "const_f16",
            Op::Constant {
                value: t(Tensor::from_f16([1], vec![f16::from_f32(0.5)])),
            },
            &[],
            &["k_f16"],
        ),
        n(
            "const_scalar",
            Op::Constant {
                value: Tensor::scalar_i64(-7),
            },
            &[],
            &["k_i64"],
        ),
        n(
            "pad",
            Op::Pad {
                mode: PadMode::Reflect,
            },
            &["x", "pads"],
            &["pad"],
        ),
        n(
            "pad_edge",
            Op::Pad {
                mode: PadMode::Edge,
            },
            &["x", "pads"],
            &["pad_e"],
        ),
        n(
            "pad_const",
            Op::Pad {
                mode: PadMode::Constant,
            },
            &["x", "pads", "max"],
            &["pad_c"],
        ),
        n(
            "resize",
            Op::Resize(Resize {
                mode: ResizeMode::Cubic,
                coordinate_transformation_mode: CoordinateTransform::HalfPixelSymmetric,
                nearest_mode: NearestMode::Floor,
                extrapolation_value: 1.5,
                cubic_coeff_a: -0.5,
                exclude_outside: true,
                axes: Some(vec![2, 3]),
                keep_aspect_ratio: concord_core::op::AspectRatioPolicy::NotLarger,
                antialias: false,
            }),
            &["x", "", "scales"],
            &["resize"],
        ),
        n(
            "resize_linear",
            Op::Resize(Resize {
                mode: ResizeMode::Linear,
                coordinate_transformation_mode: CoordinateTransform::AlignCorners,
                nearest_mode: NearestMode::RoundPreferCeil,
                ..Resize::default()
            }),
            &["x", "", "", "shape"],
            &["resize_l"],
        ),
        n(
            "resize_default",
            Op::Resize(Resize::default()),
            &["x", "", "scales"],
            &["resize_d"],
        ),
        n("where", Op::Where, &["flag", "x", "x"], &["where"]),
        n("expand", Op::Expand, &["x", "shape"], &["expand"]),
    ];
    let mut nodes = nodes;
    nodes.extend(
        newer_op_nodes()
            .into_iter()
            .filter(|n| n.op.schema().since <= opset),
    );
    nodes.extend(control_flow_nodes(opset));
    nodes.extend(signal_nodes(opset));
    nodes.extend(random_and_text_nodes(opset));
    let mut initializers = BTreeMap::new();
    initializers.insert(
        "w".to_string(),
        t(Tensor::from_f32([2, 1, 3, 3], vec![0.25; 18])),
    );
    initializers.insert("b".to_string(), t(Tensor::from_f32([2], vec![1.0, -1.0])));
    initializers.insert(
        "m".to_string(),
        t(Tensor::from_f32([2, 2], vec![1.0, 2.0, 3.0, 4.0])),
    );
    initializers.insert(
        "scale".to_string(),
        t(Tensor::from_f32([2], vec![0.5, 2.0])),
    );
    initializers.insert("max".to_string(), Tensor::scalar_f32(6.0));
    initializers.insert("axes".to_string(), Tensor::vec_i64(vec![1]));
    initializers.insert("sizes".to_string(), Tensor::vec_i64(vec![1, 1]));
    initializers.insert("starts".to_string(), Tensor::vec_i64(vec![0]));
    initializers.insert("ends".to_string(), Tensor::vec_i64(vec![i64::MAX]));
    initializers.insert("steps".to_string(), Tensor::vec_i64(vec![2]));
    initializers.insert("idx".to_string(), t(Tensor::from_i64([2], vec![0, -1])));
    initializers.insert("shape".to_string(), Tensor::vec_i64(vec![1, 2, 4, 4]));
    initializers.insert(
        "pads".to_string(),
        Tensor::vec_i64(vec![0, 0, 1, 1, 0, 0, 1, 1]),
    );
    initializers.insert(
        "scales".to_string(),
        t(Tensor::from_f32([4], vec![1.0, 1.0, 2.0, 2.0])),
    );
    initializers.insert(
        "half_w".to_string(),
        t(Tensor::from_f16(
            [2],
            vec![f16::from_f32(1.5), f16::from_f32(-0.25)],
        )),
    );
    initializers.insert(
        "mask".to_string(),
        t(Tensor::from_bool([2], vec![false, true])),
    );
    Graph {
        name: "every_op".to_string(),
        inputs: vec![
            ValueInfo::new(
                "x",
                DType::F32,
                vec![
                    Dim::Named("batch".to_string()),
                    Dim::Fixed(2),
                    Dim::Fixed(4),
                    Dim::Unknown,
                ],
            ),
            ValueInfo::fixed("empty", DType::I64, &[0, 3]),
            ValueInfo::fixed("scalar", DType::Bool, &[]),
        ],
        outputs: nodes.iter().flat_map(|n| n.outputs.clone()).collect(),
        initializers,
        nodes,
        opset,
        values: BTreeMap::new(),
    }
}

/// The window ops (non-default attributes) and DFT in the form of `opset` (axis an
/// attribute before opset 20, an input from it).
fn signal_nodes(opset: i64) -> Vec<Node> {
    use concord_core::op::WindowKind;
    let window = |name: &str, kind: WindowKind, periodic: bool, dtype: DType| {
        let out = format!("{name}_out");
        n(
            name,
            Op::Window {
                kind,
                periodic,
                dtype,
            },
            &["idx"],
            &[out.as_str()],
        )
    };
    let mut nodes = vec![
        window("hann", WindowKind::Hann, false, DType::F64),
        window("hamming", WindowKind::Hamming, true, DType::F32),
        window("blackman", WindowKind::Blackman, false, DType::F16),
    ];
    if opset >= 20 {
        let dft = Op::Dft {
            axis: None,
            inverse: true,
            onesided: false,
        };
        nodes.push(n("dft", dft, &["x", "", "idx"], &["dft_out"]));
    } else if opset >= 17 {
        let dft = Op::Dft {
            axis: Some(-2),
            inverse: false,
            onesided: true,
        };
        nodes.push(n("dft", dft, &["x", "idx"], &["dft_out"]));
    }
    nodes.push(n(
        "stft",
        Op::Stft { onesided: false },
        &["x", "idx", "", "idx"],
        &["stft_out"],
    ));
    nodes.retain(|n| n.op.schema().since <= opset);
    nodes
}

/// MelWeightMatrix, the random ops (a given seed, and seeds derived from the node names,
/// which the writer leaves out and the reader derives again), TensorScatter and
/// TfIdfVectorizer, with non-default attributes, each where `opset` has it.
fn random_and_text_nodes(opset: i64) -> Vec<Node> {
    use concord_core::op::{Distribution, Random, RandomSeed, TfIdf, TfIdfMode};
    let by_name = RandomSeed::from_node_name;
    let mut nodes = vec![
        n(
            "mel",
            Op::MelWeightMatrix { dtype: DType::F64 },
            &["idx", "idx", "idx", "max", "max"],
            &["mel_out"],
        ),
        n(
            "normal",
            Op::Random(Random {
                distribution: Distribution::Normal {
                    mean: 1.0,
                    scale: 0.5,
                },
                shape: Some(vec![2, 3]),
                dtype: Some(DType::F16),
                seed: RandomSeed::Given(7.0),
            }),
            &[],
            &["normal_out"],
        ),
        n(
            "uniform",
            Op::Random(Random {
                distribution: Distribution::Uniform {
                    low: 0.0,
                    high: 1.0,
                },
                shape: Some(Vec::new()),
                dtype: Some(DType::F32),
                seed: by_name("uniform"),
            }),
            &[],
            &["uniform_out"],
        ),
        n(
            "normal_like",
            Op::Random(Random {
                distribution: Distribution::Normal {
                    mean: 0.0,
                    scale: 1.0,
                },
                shape: None,
                dtype: Some(DType::F32),
                seed: by_name("normal_like"),
            }),
            &["idx"],
            &["normal_like_out"],
        ),
        n(
            "uniform_like",
            Op::Random(Random {
                distribution: Distribution::Uniform {
                    low: -2.0,
                    high: 2.0,
                },
                shape: None,
                dtype: None,
                seed: RandomSeed::Given(-1.0),
            }),
            &["x"],
            &["uniform_like_out"],
        ),
        n(
            "multinomial",
            Op::Multinomial {
                sample_size: 3,
                dtype: DType::I64,
                seed: by_name("multinomial"),
            },
            &["m"],
            &["multinomial_out"],
        ),
        n(
            "bernoulli",
            Op::Bernoulli {
                dtype: Some(DType::Bool),
                seed: RandomSeed::Given(0.0),
            },
            &["b"],
            &["bernoulli_out"],
        ),
        n(
            "tensor_scatter",
            Op::TensorScatter {
                axis: 2,
                circular: true,
            },
            &["x", "x", "idx"],
            &["tensor_scatter_out"],
        ),
        n(
            "tfidf",
            Op::TfIdfVectorizer(TfIdf {
                mode: TfIdfMode::Idf,
                min_gram_length: 2,
                max_gram_length: 3,
                max_skip_count: 1,
                ngram_counts: vec![0, 1, 3],
                ngram_indexes: vec![3, 2, 1, 0],
                pool: vec![9, 1, 2, 1, 2, 3],
                weights: vec![1.0, 0.5, 0.25, 2.0],
            }),
            &["idx"],
            &["tfidf_out"],
        ),
    ];
    nodes.retain(|n| n.op.schema().since <= opset);
    nodes
}

/// If, Loop and Scan whose subgraphs read `x` from the outer graph (a capture, which the
/// writer strips and the reader derives again).
fn control_flow_nodes(opset: i64) -> Vec<Node> {
    let sub = |inputs: &[(&str, DType)], nodes: Vec<Node>, outputs: &[&str]| {
        Box::new(Graph {
            name: "sub".into(),
            inputs: inputs
                .iter()
                .map(|(n, d)| ValueInfo::new(*n, *d, Vec::new()))
                .collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            nodes,
            opset,
            ..Graph::default()
        })
    };
    let identity = |from: &str, to: &str| n(&format!("copy_{to}"), Op::Identity, &[from], &[to]);
    vec![
        n(
            "if",
            Op::If {
                then_branch: sub(&[("x", DType::F32)], vec![identity("x", "t")], &["t"]),
                else_branch: sub(&[("x", DType::F32)], vec![], &["x"]),
            },
            &["flag", "x"],
            &["if_out"],
        ),
        n(
            "loop",
            Op::Loop {
                body: sub(
                    &[
                        ("i", DType::I64),
                        ("cond_in", DType::Bool),
                        ("s", DType::F32),
                        ("x", DType::F32),
                    ],
                    vec![
                        identity("cond_in", "cond_out"),
                        n("step", Op::Binary(Binary::Add), &["s", "x"], &["s_out"]),
                    ],
                    &["cond_out", "s_out"],
                ),
                captures: 1,
            },
            &["", "flag", "x", "x"],
            &["loop_out"],
        ),
        n(
            "scan",
            Op::Scan {
                body: sub(
                    &[("s", DType::F32), ("row", DType::F32), ("x", DType::F32)],
                    vec![
                        n("acc", Op::Binary(Binary::Add), &["s", "row"], &["s_next"]),
                        n("emit", Op::Binary(Binary::Mul), &["s_next", "x"], &["o"]),
                    ],
                    &["s_next", "o"],
                ),
                num_scan_inputs: 1,
                scan_input_axes: vec![1],
                scan_input_directions: vec![true],
                scan_output_axes: vec![-1],
                scan_output_directions: vec![false],
                captures: 1,
            },
            &["x", "x", "x"],
            &["scan_state", "scan_out"],
        ),
    ]
}

/// One node per op added with the wider op table (issue 13), non-default attributes where
/// the op has them so the writer and reader must both carry them.
fn newer_op_nodes() -> Vec<Node> {
    use concord_core::op::{LossReduction, ScatterReduction, Variadic};
    let mut nodes = Vec::new();
    let mut add = |op: Op, inputs: &[&str], outputs: usize| {
        let name = format!("n{}", nodes.len());
        let outs: Vec<String> = (0..outputs).map(|i| format!("{name}_{i}")).collect();
        let outs: Vec<&str> = outs.iter().map(String::as_str).collect();
        nodes.push(n(&name, op, inputs, &outs));
    };
    for def in concord_core::op::UNARY_OPS.iter().filter(|d| !d.device) {
        // Non-default parameters: every float moved by 0.25, every flag flipped.
        let p = def.op.params().map(|v| {
            if v == 0.0 || v == 1.0 {
                1.0 - v
            } else {
                v + 0.25
            }
        });
        let op = def.op.with_params(if def.params.is_empty() {
            def.op.params()
        } else {
            p
        });
        add(Op::Unary(op), &["x"], 1);
    }
    for def in concord_core::op::BINARY_OPS.iter().filter(|d| !d.device) {
        add(Op::Binary(def.op), &["x", "x"], 1);
    }
    add(
        Op::Binary(Binary::BitShift { left: false }),
        &["idx", "idx"],
        1,
    );
    for (v, _) in Variadic::ALL {
        add(Op::Variadic(v), &["x", "x", "x"], 1);
    }
    for (kind, _) in ReduceKind::ALL {
        add(
            Op::Reduce(
                kind,
                Reduce {
                    keepdims: false,
                    ..Reduce::default()
                },
            ),
            &["x", "axes"],
            1,
        );
    }
    add(
        Op::ArgMin(ArgReduce {
            axis: 1,
            keepdims: false,
            select_last_index: true,
        }),
        &["x"],
        1,
    );
    add(Op::LogSoftmax { axis: 1 }, &["x"], 1);
    add(Op::Hardmax { axis: 0 }, &["x"], 1);
    add(
        Op::InstanceNormalization { epsilon: 1e-3 },
        &["x", "scale", "b"],
        1,
    );
    add(
        Op::GroupNormalization {
            epsilon: 1e-4,
            num_groups: 2,
        },
        &["x", "scale", "b"],
        1,
    );
    add(
        Op::RMSNormalization {
            axis: 1,
            epsilon: 1e-3,
        },
        &["x", "scale"],
        1,
    );
    add(Op::LpNormalization { axis: 0, p: 1 }, &["x"], 1);
    add(
        Op::MeanVarianceNormalization { axes: vec![0, 1] },
        &["x"],
        1,
    );
    add(
        Op::LRN {
            alpha: 0.5,
            beta: 0.25,
            bias: 2.0,
            size: 3,
        },
        &["x"],
        1,
    );
    add(
        Op::Attention {
            is_causal: true,
            kv_num_heads: Some(2),
            q_num_heads: Some(2),
            qk_matmul_output_mode: 2,
            scale: Some(0.5),
            softcap: 3.0,
            softmax_precision: Some(DType::F32),
            left_window_size: -1,
            right_window_size: -1,
        },
        &["x", "x", "x"],
        4,
    );
    // Opsets 25 to 28: filtered out of the graphs of older opsets by their first opset.
    add(
        Op::Attention {
            is_causal: false,
            kv_num_heads: Some(2),
            q_num_heads: Some(2),
            qk_matmul_output_mode: 0,
            scale: None,
            softcap: 0.0,
            softmax_precision: None,
            left_window_size: 3,
            right_window_size: 1,
        },
        &["x", "x", "x"],
        1,
    );
    add(
        Op::CumProd {
            exclusive: true,
            reverse: true,
        },
        &["x", "axes"],
        1,
    );
    add(Op::BitCast { to: DType::I32 }, &["x"], 1);
    add(Op::SwiGLU { alpha: 1.702 }, &["x", "x"], 1);
    add(
        Op::LinearAttention {
            kv_num_heads: 1,
            q_num_heads: 2,
            scale: 0.25,
            update_rule: concord_core::op::LinearAttentionRule::Gated,
        },
        &["x", "x", "x", "", "x"],
        2,
    );
    add(Op::CausalConvWithState { silu: true }, &["x", "x"], 2);
    add(
        Op::RotaryEmbedding {
            interleaved: true,
            num_heads: Some(2),
            rotary_embedding_dim: 2,
        },
        &["x", "m", "m"],
        1,
    );
    add(Op::GlobalMaxPool, &["x"], 1);
    add(Op::GlobalLpPool { p: 3 }, &["x"], 1);
    add(
        Op::LpPool(
            Pool {
                kernel_shape: vec![2, 2],
                strides: vec![2, 1],
                ..Pool::default()
            },
            1,
        ),
        &["x"],
        1,
    );
    add(
        Op::ConstantOfShape {
            value: Tensor::vec_i64(vec![7]),
        },
        &["shape"],
        1,
    );
    add(Op::Range, &["max", "max", "max"], 1);
    add(Op::Tile, &["x", "shape"], 1);
    add(
        Op::CumSum {
            exclusive: true,
            reverse: true,
        },
        &["x", "axes"],
        1,
    );
    add(Op::GatherElements { axis: 1 }, &["x", "idx"], 1);
    add(Op::GatherND { batch_dims: 1 }, &["x", "idx"], 1);
    add(
        Op::ScatterElements {
            axis: 1,
            reduction: ScatterReduction::Max,
        },
        &["x", "idx", "x"],
        1,
    );
    add(
        Op::ScatterND {
            reduction: ScatterReduction::Mul,
        },
        &["x", "idx", "x"],
        1,
    );
    add(Op::OneHot { axis: 0 }, &["idx", "max", "m"], 1);
    add(Op::Trilu { upper: false }, &["m", "axes"], 1);
    add(Op::NonZero, &["x"], 1);
    add(Op::Size, &["x"], 1);
    add(
        Op::DepthToSpace {
            blocksize: 2,
            crd: true,
        },
        &["x"],
        1,
    );
    add(
        Op::SpaceToDepth {
            blocksize: 2,
            crd: false,
        },
        &["x"],
        1,
    );
    add(
        Op::EyeLike {
            dtype: Some(DType::U8),
            k: -1,
        },
        &["m"],
        1,
    );
    add(
        Op::TopK {
            axis: 1,
            largest: false,
            sorted: false,
        },
        &["x", "axes"],
        2,
    );
    add(Op::CastLike, &["x", "idx"], 1);
    add(Op::Compress { axis: Some(1) }, &["x", "mask"], 1);
    add(Op::Compress { axis: None }, &["x", "mask"], 1);
    add(
        Op::CenterCropPad {
            axes: Some(vec![2]),
        },
        &["x", "shape"],
        1,
    );
    add(
        Op::ReverseSequence {
            batch_axis: 0,
            time_axis: 1,
        },
        &["x", "idx"],
        1,
    );
    add(
        Op::NegativeLogLikelihoodLoss {
            reduction: LossReduction::Sum,
            ignore_index: Some(2),
        },
        &["x", "idx"],
        1,
    );
    add(
        Op::SoftmaxCrossEntropyLoss {
            reduction: LossReduction::None,
            ignore_index: None,
        },
        &["x", "idx"],
        2,
    );
    add(
        Op::QuantizeLinear {
            axis: 0,
            block_size: 0,
            output_dtype: None,
            precision: None,
        },
        &["x", "m"],
        1,
    );
    add(
        Op::DequantizeLinear {
            axis: -1,
            block_size: 0,
            output_dtype: None,
        },
        &["idx", "m"],
        1,
    );
    add(Op::DynamicQuantizeLinear, &["x"], 3);
    add(Op::MatMulInteger, &["idx", "idx"], 1);
    add(
        Op::QLinearMatMul,
        &["idx", "m", "idx", "idx", "m", "idx", "m", "idx"],
        1,
    );
    add(
        Op::ConvInteger(concord_core::op::Conv {
            group: 2,
            ..Default::default()
        }),
        &["idx", "idx"],
        1,
    );
    add(
        Op::QLinearConv(concord_core::op::Conv::default()),
        &["idx", "m", "idx", "idx", "m", "idx", "m", "idx"],
        1,
    );
    {
        use concord_core::op::{
            Recurrent, RecurrentCell, RnnActivation, RnnActivationKind, RnnDirection,
        };
        let act = |kind, alpha, beta| RnnActivation { kind, alpha, beta };
        add(
            Op::Recurrent(Recurrent {
                hidden_size: Some(3),
                activations: vec![
                    act(RnnActivationKind::HardSigmoid, 0.25, 0.75),
                    act(RnnActivationKind::Elu, 0.5, 0.0),
                    act(RnnActivationKind::Softsign, 0.0, 0.0),
                    act(RnnActivationKind::Affine, 2.0, -1.0),
                    act(RnnActivationKind::ThresholdedRelu, 0.1, 0.0),
                    act(RnnActivationKind::Softplus, 0.0, 0.0),
                ],
                clip: Some(3.0),
                batch_major: true,
                input_forget: true,
                ..Recurrent::new(RecurrentCell::Lstm, RnnDirection::Bidirectional)
            }),
            &["x", "m", "m", "b", "idx", "m", "m", "m"],
            3,
        );
        add(
            Op::Recurrent(Recurrent {
                linear_before_reset: true,
                ..Recurrent::new(RecurrentCell::Gru, RnnDirection::Reverse)
            }),
            &["x", "m", "m"],
            2,
        );
        add(
            Op::Recurrent(Recurrent::new(RecurrentCell::Rnn, RnnDirection::Forward)),
            &["x", "m", "m"],
            1,
        );
    }
    add(
        Op::Einsum {
            equation: "ij,jk->ik".into(),
        },
        &["m", "m"],
        1,
    );
    add(Op::Det, &["m"], 1);
    add(
        Op::NonMaxSuppression {
            center_point_box: true,
        },
        &["x", "x", "idx", "m", "m"],
        1,
    );
    add(
        Op::NonMaxSuppression {
            center_point_box: false,
        },
        &["x", "x"],
        1,
    );
    add(
        Op::Unique {
            axis: Some(1),
            sorted: false,
        },
        &["x"],
        4,
    );
    add(
        Op::Unique {
            axis: None,
            sorted: true,
        },
        &["x"],
        1,
    );
    add(
        Op::MaxUnpool {
            kernel_shape: vec![2, 2],
            pads: vec![0, 1, 1, 0],
            strides: vec![2, 1],
        },
        &["x", "idx"],
        1,
    );
    add(
        Op::ConvTranspose(concord_core::op::ConvTranspose {
            conv: concord_core::op::Conv {
                auto_pad: concord_core::op::AutoPad::SameLower,
                dilations: vec![2, 1],
                group: 2,
                ..Default::default()
            },
            output_padding: vec![1, 0],
            output_shape: vec![9, 9],
        }),
        &["x", "w"],
        1,
    );
    add(
        Op::GridSample {
            mode: concord_core::op::GridSampleMode::Cubic,
            padding_mode: concord_core::op::GridPadding::Reflection,
            align_corners: true,
        },
        &["x", "x"],
        1,
    );
    add(
        Op::GridSample {
            mode: concord_core::op::GridSampleMode::Nearest,
            padding_mode: concord_core::op::GridPadding::Border,
            align_corners: false,
        },
        &["x", "x"],
        1,
    );
    add(
        Op::GridSample {
            mode: concord_core::op::GridSampleMode::Linear,
            padding_mode: concord_core::op::GridPadding::Zeros,
            align_corners: false,
        },
        &["x", "x"],
        1,
    );
    add(
        Op::AffineGrid {
            align_corners: true,
        },
        &["m", "shape"],
        1,
    );
    // RoiAlign's non-default coordinates are written from opset 16, MaxRoiPool always.
    add(
        Op::RoiAlign(concord_core::op::RoiAlign {
            mode: concord_core::op::RoiAlignMode::Max,
            coordinates: concord_core::op::RoiCoordinates::OutputHalfPixel,
            output_height: 2,
            output_width: 3,
            sampling_ratio: 2,
            spatial_scale: 0.5,
        }),
        &["x", "m", "idx"],
        1,
    );
    add(
        Op::MaxRoiPool {
            pooled_shape: [2, 2],
            spatial_scale: 0.25,
        },
        &["x", "m"],
        1,
    );
    add(
        Op::DeformConv(concord_core::op::DeformConv {
            dilations: vec![1, 2],
            group: 2,
            kernel_shape: vec![3, 3],
            offset_group: 2,
            pads: vec![1, 1, 0, 0],
            strides: vec![2, 1],
        }),
        &["x", "w", "x", "", "x"],
        1,
    );
    add(
        Op::Col2Im {
            dilations: vec![2, 1],
            pads: vec![1, 0, 0, 1],
            strides: vec![1, 2],
        },
        &["x", "shape", "sizes"],
        1,
    );
    nodes
}

#[test]
fn every_op_variant_survives_save_and_read() {
    let newest = every_op_graph(concord_onnx::MAX_OPSET);
    let covered: BTreeSet<&str> = newest.nodes.iter().map(|n| n.op.name()).collect();
    let graph = every_op_graph(19);
    let supported: BTreeSet<&str> = concord_core::op::supported_names()
        .iter()
        .copied()
        .collect();
    assert_eq!(
        covered, supported,
        "the round-trip graph must use every op variant"
    );
    assert_same_graph(&graph, &round_trip(&graph));
}

#[test]
fn every_op_variant_survives_at_the_newest_opset() {
    let graph = every_op_graph(concord_onnx::MAX_OPSET);
    assert_same_graph(&graph, &round_trip(&graph));
}

#[test]
fn reduce_axes_attribute_round_trips_where_the_opset_has_it() {
    // ReduceMean and ReduceMax take axes as an attribute until opset 17.
    let graph = Graph {
        name: "reduce".to_string(),
        inputs: vec![ValueInfo::fixed("x", DType::F32, &[2, 3, 4])],
        outputs: vec!["mean".to_string(), "max".to_string()],
        nodes: vec![
            n(
                "mean",
                Op::Reduce(
                    ReduceKind::Mean,
                    Reduce {
                        axes: Some(vec![1, -1]),
                        keepdims: true,
                        noop_with_empty_axes: false,
                    },
                ),
                &["x"],
                &["mean"],
            ),
            n(
                "max",
                Op::Reduce(
                    ReduceKind::Max,
                    Reduce {
                        axes: Some(vec![]),
                        keepdims: false,
                        noop_with_empty_axes: false,
                    },
                ),
                &["x"],
                &["max"],
            ),
        ],
        opset: 17,
        ..Graph::default()
    };
    let model = to_model_proto(&graph).map_err(|e| e.to_string());
    let attr_names: Vec<Vec<String>> = model
        .as_ref()
        .map(|m| {
            m.graph
                .iter()
                .flat_map(|g| &g.node)
                .map(|n| n.attribute.iter().map(|a| a.name.clone()).collect())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        attr_names,
        vec![
            vec!["axes".to_string()],
            vec!["axes".to_string(), "keepdims".to_string()]
        ]
    );
    assert_same_graph(&graph, &round_trip(&graph));
}

#[test]
fn reduce_axes_become_an_input_from_opset_18() {
    let graph = Graph {
        name: "reduce".to_string(),
        inputs: vec![ValueInfo::fixed("x", DType::F32, &[2, 3, 4])],
        outputs: vec!["mean".to_string(), "sum".to_string()],
        nodes: vec![
            n(
                "mean",
                Op::Reduce(
                    ReduceKind::Mean,
                    Reduce {
                        axes: Some(vec![1]),
                        ..Reduce::default()
                    },
                ),
                &["x"],
                &["mean"],
            ),
            // ReduceSum's axes are an input from opset 13.
            n(
                "sum",
                Op::Reduce(
                    ReduceKind::Sum,
                    Reduce {
                        axes: Some(vec![0, 2]),
                        keepdims: false,
                        noop_with_empty_axes: false,
                    },
                ),
                &["x"],
                &["sum"],
            ),
        ],
        opset: 18,
        ..Graph::default()
    };
    let back = round_trip(&graph);
    let expect = [("mean", vec![1i64]), ("sum", vec![0, 2])];
    for ((node_name, axes), node) in expect.iter().zip(&back.nodes) {
        assert_eq!(&node.name, node_name);
        let reduce = match &node.op {
            Op::Reduce(ReduceKind::Mean | ReduceKind::Sum, r) => r.clone(),
            other => panic!("unexpected op {other:?}"),
        };
        assert_eq!(reduce.axes, None, "axes moved out of the attribute");
        let axes_input = node.inputs.get(1).cloned().flatten();
        let value = axes_input
            .as_ref()
            .and_then(|name| back.initializers.get(name));
        assert_eq!(
            value,
            Some(&Tensor::vec_i64(axes.clone())),
            "node `{node_name}`"
        );
    }
}

#[test]
fn ops_the_opset_cannot_express_are_refused_on_save() {
    let relu_like = |op: Op, opset: i64| Graph {
        name: "g".to_string(),
        inputs: vec![ValueInfo::fixed("x", DType::F32, &[4])],
        outputs: vec!["y".to_string()],
        nodes: vec![n("node0", op, &["x"], &["y"])],
        opset,
        ..Graph::default()
    };
    let cases = [
        (relu_like(Op::Unary(Unary::HardSwish), 13), "HardSwish"),
        (
            relu_like(
                Op::Pad {
                    mode: PadMode::Wrap,
                },
                18,
            ),
            "wrap",
        ),
        (relu_like(Op::Reshape { allowzero: true }, 13), "allowzero"),
        (
            relu_like(Op::RoiAlign(concord_core::op::RoiAlign::default()), 15),
            "half_pixel",
        ),
        (
            relu_like(
                Op::Shape {
                    start: 1,
                    end: None,
                },
                14,
            ),
            "start",
        ),
        (
            relu_like(
                Op::Reduce(
                    ReduceKind::Mean,
                    Reduce {
                        noop_with_empty_axes: true,
                        ..Reduce::default()
                    },
                ),
                17,
            ),
            "noop_with_empty_axes",
        ),
    ];
    for (graph, needle) in cases {
        expect_err(
            save(&graph),
            |e| matches!(e, Error::Unrepresentable { node, .. } if node == "node0"),
            &[needle, "node0"],
        );
    }
    expect_err(
        save(&relu_like(Op::Unary(Unary::Relu), 0)),
        |e| {
            matches!(
                e,
                Error::WriteOpsetTooOld {
                    version: 0,
                    min_supported: 13,
                    ..
                }
            )
        },
        &["13 to 28"],
    );
}

#[test]
fn hand_made_model_reads_with_onnx_defaults() {
    let m = model(
        17,
        graph(
            vec![
                node(
                    "Conv",
                    "conv",
                    &["x", "w"],
                    &["c"],
                    vec![
                        attr_ints("kernel_shape", &[1, 1]),
                        attr_ints("strides", &[1, 1]),
                    ],
                ),
                node(
                    "Gemm",
                    "",
                    &["f", "g", ""],
                    &["gemm"],
                    vec![attr_int("transB", 1)],
                ),
                node("LeakyRelu", "", &["c"], &["leaky"], vec![]),
                node(
                    "HardSigmoid",
                    "hs",
                    &["c"],
                    &["hs"],
                    vec![attr_float("beta", 0.6)],
                ),
                node("Softmax", "sm", &["c"], &["sm"], vec![]),
                node(
                    "Resize",
                    "rs",
                    &["c", "", "scales"],
                    &["rs"],
                    vec![
                        attr_string("mode", "linear"),
                        attr_int("antialias", 0),
                        attr_string("keep_aspect_ratio_policy", "stretch"),
                    ],
                ),
                node(
                    "Dropout",
                    "drop",
                    &["c"],
                    &["drop", "drop_mask"],
                    vec![attr_int("seed", 3)],
                ),
                node(
                    "MaxPool",
                    "mp",
                    &["c"],
                    &["mp", ""],
                    vec![attr_ints("kernel_shape", &[2, 2])],
                ),
                node(
                    "LayerNormalization",
                    "ln",
                    &["f", "scale"],
                    &["ln", "ln_mean", "ln_inv_std"],
                    vec![attr_int("stash_type", 1)],
                ),
                node(
                    "Constant",
                    "k1",
                    &[],
                    &["k1"],
                    vec![attr_floats("value_floats", &[1.5, 2.5])],
                ),
                node(
                    "Constant",
                    "k2",
                    &[],
                    &["k2"],
                    vec![attr_int("value_int", 42)],
                ),
                node(
                    "Constant",
                    "k3",
                    &[],
                    &["k3"],
                    vec![attr_ints("value_ints", &[3, 4])],
                ),
                node(
                    "Constant",
                    "k4",
                    &[],
                    &["k4"],
                    vec![attr_float("value_float", -1.0)],
                ),
                node("Cast", "cast", &["c"], &["cast"], vec![attr_int("to", 10)]),
                node(
                    "Split",
                    "split",
                    &["f", ""],
                    &["s0", "s1"],
                    vec![attr_int("axis", 1)],
                ),
                node("Clip", "clip", &["f", "", ""], &["clip"], vec![]),
            ],
            vec![
                value(
                    "x",
                    DataType::Float,
                    &[D::P("N"), D::V(3), D::V(0), D::Unknown],
                ),
                value("f", DataType::Float, &[D::V(2), D::V(-1)]),
                // Also an initializer: read as a constant, not a runtime input.
                f32_value("w", &[4, 3, 1, 1]),
            ],
            vec![
                output("gemm"),
                output("leaky"),
                output("hs"),
                output("sm"),
                output("rs"),
                output("drop"),
                output("mp"),
                output("ln"),
                output("k1"),
                output("k2"),
                output("k3"),
                output("k4"),
                output("cast"),
                output("s0"),
                output("s1"),
                output("clip"),
            ],
            vec![
                float_tensor("w", &[4, 3, 1, 1], &[1.0; 12]),
                float_tensor("g", &[2, 2], &[1.0, 0.0, 0.0, 1.0]),
                float_tensor("scale", &[2], &[1.0, 1.0]),
                float_tensor("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
            ],
        ),
    );
    let graph = match read_graph(&bytes(&m)) {
        Ok(g) => g,
        Err(e) => panic!("read_graph failed: {e}"),
    };
    assert_eq!(graph.opset, 17);
    assert_eq!(
        graph.inputs,
        vec![
            ValueInfo::new(
                "x",
                DType::F32,
                vec![
                    Dim::Named("N".to_string()),
                    Dim::Fixed(3),
                    Dim::Fixed(0),
                    Dim::Unknown
                ]
            ),
            ValueInfo::new("f", DType::F32, vec![Dim::Fixed(2), Dim::Unknown]),
        ],
        "w is an initializer, so not a runtime input; dim_value 0 is fixed, -1 unknown"
    );
    assert!(graph.initializers.contains_key("w"));
    let op = |name: &str| {
        graph
            .nodes
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.op.clone())
    };
    // Expected values are the defaults in the ONNX operator spec.
    assert_eq!(
        op("conv"),
        Some(Op::Conv(Conv {
            auto_pad: AutoPad::NotSet,
            dilations: vec![],
            group: 1,
            kernel_shape: vec![1, 1],
            pads: vec![],
            strides: vec![1, 1],
        }))
    );
    assert_eq!(
        op("Gemm_1"),
        Some(Op::Gemm(Gemm {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: true
        }))
    );
    assert_eq!(
        op("LeakyRelu_2"),
        Some(Op::Unary(Unary::LeakyRelu { alpha: 0.01 }))
    );
    assert_eq!(
        op("hs"),
        Some(Op::Unary(Unary::HardSigmoid {
            alpha: 0.2,
            beta: 0.6
        }))
    );
    assert_eq!(op("sm"), Some(Op::Softmax { axis: -1 }));
    assert_eq!(
        op("rs"),
        Some(Op::Resize(Resize {
            mode: ResizeMode::Linear,
            coordinate_transformation_mode: CoordinateTransform::HalfPixel,
            nearest_mode: NearestMode::RoundPreferFloor,
            extrapolation_value: 0.0,
            cubic_coeff_a: -0.75,
            exclude_outside: false,
            axes: None,
            keep_aspect_ratio: concord_core::op::AspectRatioPolicy::Stretch,
            antialias: false,
        }))
    );
    assert_eq!(
        op("ln"),
        Some(Op::LayerNormalization {
            axis: -1,
            epsilon: 1e-5
        })
    );
    assert_eq!(op("cast"), Some(Op::Cast { to: DType::F16 }));
    assert_eq!(
        op("split"),
        Some(Op::Split {
            axis: 1,
            num_outputs: 2
        })
    );
    let node = |name: &str| graph.nodes.iter().find(|n| n.name == name);
    // Unused optional outputs are dropped; empty input names are omitted and trailing ones
    // trimmed.
    assert_eq!(
        node("drop").map(|n| n.outputs.clone()),
        Some(vec!["drop".to_string()])
    );
    assert_eq!(
        node("mp").map(|n| n.outputs.clone()),
        Some(vec!["mp".to_string()])
    );
    assert_eq!(
        node("ln").map(|n| n.outputs.clone()),
        Some(vec!["ln".to_string()])
    );
    assert_eq!(
        node("Gemm_1").map(|n| n.inputs.clone()),
        Some(vec![Some("f".to_string()), Some("g".to_string())])
    );
    assert_eq!(
        node("rs").map(|n| n.inputs.clone()),
        Some(vec![
            Some("c".to_string()),
            None,
            Some("scales".to_string())
        ])
    );
    assert_eq!(
        node("clip").map(|n| n.inputs.clone()),
        Some(vec![Some("f".to_string())])
    );
    assert_eq!(node("split").map(|n| n.inputs.len()), Some(1));
    let constant = |name: &str| match op(name) {
        Some(Op::Constant { value }) => value,
        other => panic!("{name} is {other:?}"),
    };
    assert_eq!(constant("k1"), t(Tensor::from_f32([2], vec![1.5, 2.5])));
    assert_eq!(constant("k2"), Tensor::scalar_i64(42));
    assert_eq!(constant("k3"), Tensor::vec_i64(vec![3, 4]));
    assert_eq!(constant("k4"), Tensor::scalar_f32(-1.0));

    // And what was read survives a save and a second read unchanged.
    assert_same_graph(&graph, &round_trip(&graph));
}

#[test]
fn generated_node_names_are_unique() {
    let m = model(
        17,
        graph(
            vec![
                node("Relu", "", &["x"], &["a"], vec![]),
                node("Relu", "dup", &["a"], &["b"], vec![]),
                node("Relu", "dup", &["b"], &["c"], vec![]),
                // An explicit name equal to what node 0 would be given.
                node("Neg", "Relu_0", &["c"], &["d"], vec![]),
            ],
            vec![f32_value("x", &[2])],
            vec![output("d")],
            vec![],
        ),
    );
    let graph = read_graph(&bytes(&m)).map_err(|e| e.to_string());
    let names: Vec<String> = graph
        .map(|g| g.nodes.into_iter().map(|n| n.name).collect())
        .unwrap_or_default();
    assert_eq!(names, vec!["Relu_0_1", "dup", "dup_2", "Relu_0"]);
}

#[test]
fn ai_onnx_domain_spelling_is_the_default_domain() {
    let mut m = relu_model(16);
    m.opset_import[0].domain = "ai.onnx".to_string();
    if let Some(g) = m.graph.as_mut() {
        g.node[0].domain = "ai.onnx".to_string();
    }
    // Another domain imported but unused is harmless.
    m.opset_import
        .push(concord_onnx::proto::OperatorSetIdProto {
            domain: "ai.onnx.ml".to_string(),
            version: 3,
        });
    let graph = read_graph(&bytes(&m)).map_err(|e| e.to_string());
    assert_eq!(graph.map(|g| (g.opset, g.nodes.len())), Ok((16, 1)));
}

#[test]
fn narrow_integer_initializers_keep_their_type() {
    let int32_raw = TensorProto {
        dims: vec![3],
        data_type: DataType::Int32 as i32,
        name: "i32raw".to_string(),
        raw_data: [7i32, -8, i32::MIN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        ..TensorProto::default()
    };
    let int32_typed = TensorProto {
        dims: vec![2],
        data_type: DataType::Int32 as i32,
        name: "i32typed".to_string(),
        int32_data: vec![-1, 2],
        ..TensorProto::default()
    };
    let uint8 = TensorProto {
        dims: vec![2],
        data_type: DataType::Uint8 as i32,
        name: "u8".to_string(),
        raw_data: vec![200, 1],
        ..TensorProto::default()
    };
    let bools = TensorProto {
        dims: vec![2],
        data_type: DataType::Bool as i32,
        name: "flags".to_string(),
        int32_data: vec![1, 0],
        ..TensorProto::default()
    };
    let m = model(
        17,
        graph(
            vec![node("Identity", "id", &["x"], &["y"], vec![])],
            vec![f32_value("x", &[1])],
            vec![output("y")],
            vec![int32_raw, int32_typed, uint8, bools],
        ),
    );
    let graph = match read_graph(&bytes(&m)) {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    let get = |name: &str| graph.initializers.get(name).cloned();
    assert_eq!(
        get("i32raw"),
        Some(t(Tensor::from_vec([3], vec![7i32, -8, i32::MIN])))
    );
    assert_eq!(
        get("i32typed"),
        Some(t(Tensor::from_vec([2], vec![-1i32, 2])))
    );
    assert_eq!(get("u8"), Some(t(Tensor::from_vec([2], vec![200u8, 1]))));
    assert_eq!(
        get("flags"),
        Some(t(Tensor::from_bool([2], vec![true, false])))
    );
}

/// Length-delimited field: tag byte, one-byte length, payload (all test payloads are short).
fn ld(tag: &[u8], payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 128, "one-byte lengths only");
    let mut out = tag.to_vec();
    out.push(payload.len() as u8);
    out.extend_from_slice(payload);
    out
}

#[test]
fn hand_assembled_wire_bytes_read_with_onnx_field_numbers() {
    // Tags are (field_number << 3) | wire_type, with field numbers from onnx.proto; wire
    // type 0 is a varint, 2 length-delimited, 5 a 32-bit fixed value.
    let attribute = [
        ld(&[0x0a], b"alpha"),              // AttributeProto.name = 1
        vec![0xa0, 0x01, 0x01],             // AttributeProto.type = 20 (two-byte tag): FLOAT
        vec![0x15, 0x00, 0x00, 0x00, 0x3f], // AttributeProto.f = 2: 0.5f32
    ]
    .concat();
    let node = [
        ld(&[0x0a], b"x"),         // NodeProto.input = 1
        ld(&[0x12], b"y"),         // NodeProto.output = 2
        ld(&[0x1a], b"leaky"),     // NodeProto.name = 3
        ld(&[0x22], b"LeakyRelu"), // NodeProto.op_type = 4
        ld(&[0x2a], &attribute),   // NodeProto.attribute = 5
    ]
    .concat();
    let shape = [
        ld(&[0x0a], &ld(&[0x12], b"N")), // TensorShapeProto.dim = 1 { dim_param = 2 }
        ld(&[0x0a], &[0x08, 0x03]),      // dim { dim_value = 1: 3 }
    ]
    .concat();
    let tensor_type = [vec![0x08, 0x01], ld(&[0x12], &shape)].concat(); // elem_type FLOAT, shape
    let input = [
        ld(&[0x0a], b"x"),                       // ValueInfoProto.name = 1
        ld(&[0x12], &ld(&[0x0a], &tensor_type)), // type = 2 { tensor_type = 1 }
    ]
    .concat();
    let initializer = [
        vec![0x08, 0x02],           // TensorProto.dims = 1: [2]
        vec![0x10, 0x07],           // data_type = 2: INT64
        ld(&[0x3a], &[0x05, 0x7b]), // int64_data = 7, packed: [5, 123]
        ld(&[0x42], b"k"),          // name = 8
    ]
    .concat();
    let graph = [
        ld(&[0x0a], &node),              // GraphProto.node = 1
        ld(&[0x12], b"wire"),            // GraphProto.name = 2
        ld(&[0x2a], &initializer),       // GraphProto.initializer = 5
        ld(&[0x5a], &input),             // GraphProto.input = 11
        ld(&[0x62], &ld(&[0x0a], b"y")), // GraphProto.output = 12 { name = 1 }
    ]
    .concat();
    let model = [
        vec![0x08, 0x08],           // ModelProto.ir_version = 1: 8
        ld(&[0x3a], &graph),        // ModelProto.graph = 7
        ld(&[0x42], &[0x10, 0x11]), // ModelProto.opset_import = 8 { version = 2: 17 }
    ]
    .concat();

    let graph = match read_graph(&model) {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(graph.name, "wire");
    assert_eq!(graph.opset, 17);
    assert_eq!(
        graph.inputs,
        vec![ValueInfo::new(
            "x",
            DType::F32,
            vec![Dim::Named("N".to_string()), Dim::Fixed(3)]
        )]
    );
    assert_eq!(graph.outputs, vec!["y".to_string()]);
    assert_eq!(
        graph.nodes,
        vec![n(
            "leaky",
            Op::Unary(Unary::LeakyRelu { alpha: 0.5 }),
            &["x"],
            &["y"]
        )]
    );
    assert_eq!(
        graph.initializers.get("k"),
        Some(&Tensor::vec_i64(vec![5, 123]))
    );
}

#[test]
fn hand_assembled_tensor_file_reads() {
    let bytes = [
        vec![0x08, 0x02, 0x08, 0x01], // dims = 1 (unpacked): [2, 1]
        vec![0x10, 0x01],             // data_type = 2: FLOAT
        // float_data = 4, packed: 1.0f32 (0x3f800000) and -2.0f32 (0xc0000000).
        ld(&[0x22], &[0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]),
        ld(&[0x42], b"input_0"), // name = 8
    ]
    .concat();
    let read = read_tensor_proto(&bytes).map_err(|e| e.to_string());
    assert_eq!(
        read,
        Ok((
            "input_0".to_string(),
            t(Tensor::from_f32([2, 1], vec![1.0, -2.0]))
        ))
    );
}

#[test]
fn tensor_files_round_trip() {
    let cases = [
        t(Tensor::from_f32(
            [2, 2],
            vec![0.1, -0.0, f32::MAX, f32::MIN_POSITIVE],
        )),
        t(Tensor::from_f16(
            [3],
            vec![f16::from_f32(1.0), f16::MAX, f16::from_f32(-0.125)],
        )),
        t(Tensor::from_i64([2], vec![i64::MIN, i64::MAX])),
        t(Tensor::from_bool([2, 1], vec![true, false])),
        Tensor::scalar_f32(3.5),
        t(Tensor::from_f32([0, 4], vec![])),
    ];
    for tensor in cases {
        let bytes = prost::Message::encode_to_vec(&tensor_to_proto("v", &tensor));
        let read = read_tensor_proto(&bytes).map_err(|e| e.to_string());
        assert_eq!(read, Ok(("v".to_string(), tensor)));
    }
}

#[test]
fn saved_model_header_and_outputs() {
    let mut graph = Graph {
        name: "g".to_string(),
        inputs: vec![ValueInfo::new(
            "x",
            DType::F16,
            vec![Dim::Named("n".to_string()), Dim::Fixed(4)],
        )],
        outputs: vec!["y".to_string()],
        nodes: vec![n("relu", Op::Unary(Unary::Relu), &["x"], &["y"])],
        opset: 13,
        ..Graph::default()
    };
    graph.values.insert(
        "y".to_string(),
        ValueInfo::new(
            "y",
            DType::F16,
            vec![Dim::Named("n".to_string()), Dim::Fixed(4)],
        ),
    );
    let bytes = match save(&graph) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    };
    // opset_import (field 8) holding { version (field 2) = 13 }, domain "" omitted.
    let opset_entry = [0x42, 0x02, 0x10, 0x0d];
    assert!(
        bytes.windows(4).any(|w| w == opset_entry),
        "the opset import must be encoded as in onnx.proto"
    );
    // ir_version (field 1) = 7 for opset 13, the first field written.
    assert_eq!(bytes.get(..2), Some(&[0x08, 0x07][..]));
    let model = to_model_proto(&graph).map_err(|e| e.to_string());
    let out = model
        .ok()
        .and_then(|m| m.graph)
        .and_then(|g| g.output.into_iter().next());
    let expected = value("y", DataType::Float16, &[D::P("n"), D::V(4)]);
    assert_eq!(out, Some(expected));
}

#[test]
fn ir_version_follows_the_onnx_release_table() {
    // onnx 1.8: IR 7 / opset 13; 1.10: IR 8 / opset 15; 1.13: IR 8 / opset 18;
    // 1.14: IR 9 / opset 19; 1.16: IR 10 / opset 21; 1.17: IR 10 / opset 22;
    // 1.18: IR 11 / opset 23; 1.19: IR 12 / opset 24; 1.20 to 1.22: IR 13 / opsets 25 to
    // 27; 1.23: IR 14 / opset 28 (onnx.helper.VERSION_TABLE).
    let table = [
        (13, 7),
        (14, 7),
        (15, 8),
        (18, 8),
        (19, 9),
        (20, 9),
        (21, 10),
        (22, 10),
        (23, 11),
        (24, 12),
        (25, 13),
        (27, 13),
        (28, 14),
    ];
    for (opset, ir) in table {
        assert_eq!(ir_version_for(opset), ir, "opset {opset}");
    }
}

#[test]
fn zero_valued_int_attributes_are_written_explicitly() {
    // onnx.proto declares `optional int64 i = 3` (proto2): ONNX's own shape inference reads
    // an INT attribute without `i` as absent, so Flatten's axis 0 must be on the wire.
    let graph = Graph {
        name: "g".to_string(),
        inputs: vec![ValueInfo::fixed("x", DType::F32, &[2, 3])],
        outputs: vec!["y".to_string()],
        nodes: vec![n("flat", Op::Flatten { axis: 0 }, &["x"], &["y"])],
        opset: 13,
        ..Graph::default()
    };
    let bytes = match save(&graph) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    };
    // AttributeProto { name (1) = "axis", i (3) = 0, type (20) = INT (2) }.
    let attribute = [
        0x0a, 0x04, b'a', b'x', b'i', b's', 0x18, 0x00, 0xa0, 0x01, 0x02,
    ];
    assert!(
        bytes.windows(attribute.len()).any(|w| w == attribute),
        "axis = 0 must be encoded with its i field"
    );
    assert_same_graph(&graph, &round_trip(&graph));
}
