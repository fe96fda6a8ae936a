//! Ops as data: one [`Op`] variant per supported ONNX operator (the elementwise unary and
//! binary ops as [`Op::Unary`] and [`Op::Binary`]), each carrying its attributes as typed
//! fields with ONNX defaults already applied, and the one definition of every op: its
//! [`OpSchema`] (ONNX name, domain, first opset read, [`Family`], attributes with defaults).
//! The unary and binary ops are one row each in [`UNARY_OPS`] and [`BINARY_OPS`]; the ONNX
//! reader and writer, the name lists, the conformance property-test op list and the device
//! kernels' op codes ([`kernel_codes`]) derive from those rows, so a new unary op is a
//! variant and a row here, its reference formula, its two device formulas and its case data.
//!
//! Operands are never attributes here: where ONNX takes a value as an input (Clip's min and
//! max, Slice's starts, Reshape's shape, Pad's pads, Resize's scales), it stays a node input,
//! and constant folding turns computed ones into initializers.

use crate::dtype::DType;
use crate::tensor::Tensor;

/// A graph operation and its attributes.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    // Linear algebra and convolution.
    /// Inputs: X, W, B?.
    Conv(Conv),
    /// Inputs: A, B, C?.
    Gemm(Gemm),
    /// Inputs: A, B. Batched and broadcast over leading dims.
    MatMul,

    /// Elementwise binary, with multidirectional broadcasting. Inputs: A, B.
    Binary(Binary),
    /// Elementwise unary maths and activations. Input: X.
    Unary(Unary),
    /// Inputs: X, min?, max? (scalars).
    Clip,

    // Normalisation.
    /// Input: X.
    Softmax {
        axis: i64,
    },
    /// Inputs: X, Scale, B?. Outputs: Y (Mean and InvStdDev are not supported).
    LayerNormalization {
        axis: i64,
        epsilon: f32,
    },
    /// Inference mode. Inputs: X, scale, B, input_mean, input_var.
    BatchNormalization {
        epsilon: f32,
    },

    // Pooling. Input: X (N, C, spatial…).
    MaxPool(Pool),
    AveragePool(Pool),
    GlobalAveragePool,

    // Reductions. Inputs: data, axes? (the attribute form is folded into `axes`).
    ReduceMean(Reduce),
    ReduceSum(Reduce),
    ReduceMax(Reduce),
    /// Input: data. Output: i64 indices of the largest values along `axis`.
    ArgMax(ArgReduce),

    // Data movement.
    /// Inputs: any number, same rank.
    Concat {
        axis: i64,
    },
    /// Inputs: input, split?. `num_outputs` is the node's output count.
    Split {
        axis: i64,
        num_outputs: usize,
    },
    /// Inputs: data, starts, ends, axes?, steps?.
    Slice,
    /// Inputs: data, indices.
    Gather {
        axis: i64,
    },
    /// Inputs: data, shape.
    Reshape {
        allowzero: bool,
    },
    Flatten {
        axis: i64,
    },
    /// `perm == None` reverses the axes.
    Transpose {
        perm: Option<Vec<i64>>,
    },
    /// Inputs: data, axes?.
    Squeeze,
    /// Inputs: data, axes.
    Unsqueeze,
    /// Output: i64 dims of the input, sliced by `start..end`.
    Shape {
        start: i64,
        end: Option<i64>,
    },
    Cast {
        to: DType,
    },
    Identity,
    /// Inference mode: identity. Inputs: data, ratio?, training_mode?.
    Dropout,
    /// No inputs; the value is the output.
    Constant {
        value: Tensor,
    },
    /// Inputs: data, pads, constant_value?, axes?.
    Pad {
        mode: PadMode,
    },
    /// Inputs: X, roi?, scales?, sizes?.
    Resize(Resize),
    /// Inputs: condition (bool), X, Y.
    Where,
    /// Inputs: input, shape.
    Expand,
}

/// How a convolution or pooling op pads when explicit pads are not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AutoPad {
    /// Use the explicit `pads`.
    #[default]
    NotSet,
    /// Pad so that output = ceil(input / stride); odd padding goes at the end.
    SameUpper,
    /// As SameUpper, but odd padding goes at the beginning.
    SameLower,
    /// No padding.
    Valid,
}

/// Conv attributes. Spatial vectors are empty when ONNX leaves them to be inferred from W.
#[derive(Clone, Debug, PartialEq)]
pub struct Conv {
    pub auto_pad: AutoPad,
    /// Per spatial axis; empty means 1.
    pub dilations: Vec<usize>,
    pub group: usize,
    /// Per spatial axis; empty means taken from W.
    pub kernel_shape: Vec<usize>,
    /// [begin_0, begin_1, …, end_0, end_1, …]; empty means zeros.
    pub pads: Vec<usize>,
    /// Per spatial axis; empty means 1.
    pub strides: Vec<usize>,
}

impl Default for Conv {
    /// ONNX's defaults: one group, everything else taken from W or zero.
    fn default() -> Self {
        Conv {
            auto_pad: AutoPad::NotSet,
            dilations: Vec::new(),
            group: 1,
            kernel_shape: Vec::new(),
            pads: Vec::new(),
            strides: Vec::new(),
        }
    }
}

/// Gemm attributes: Y = alpha·op(A)·op(B) + beta·C.
#[derive(Clone, Debug, PartialEq)]
pub struct Gemm {
    pub alpha: f32,
    pub beta: f32,
    pub trans_a: bool,
    pub trans_b: bool,
}

impl Default for Gemm {
    fn default() -> Self {
        Gemm {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
        }
    }
}

/// MaxPool and AveragePool attributes.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Pool {
    pub auto_pad: AutoPad,
    pub ceil_mode: bool,
    /// AveragePool only: count padded cells in the divisor.
    pub count_include_pad: bool,
    /// Per spatial axis; empty means 1.
    pub dilations: Vec<usize>,
    pub kernel_shape: Vec<usize>,
    /// [begin…, end…]; empty means zeros.
    pub pads: Vec<usize>,
    /// Per spatial axis; empty means 1.
    pub strides: Vec<usize>,
}

/// ReduceMean / ReduceSum / ReduceMax attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce {
    /// Axes from the attribute form (opset < 18, ReduceSum < 13). When None, the optional
    /// `axes` input decides, and with neither every axis is reduced (or none, see below).
    pub axes: Option<Vec<i64>>,
    pub keepdims: bool,
    /// With no axes at all: true means identity, false means reduce every axis.
    pub noop_with_empty_axes: bool,
}

impl Default for Reduce {
    fn default() -> Self {
        Reduce {
            axes: None,
            keepdims: true,
            noop_with_empty_axes: false,
        }
    }
}

/// ArgMax attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgReduce {
    pub axis: i64,
    pub keepdims: bool,
    /// Ties (and NaNs) go to the last index instead of the first.
    pub select_last_index: bool,
}

impl Default for ArgReduce {
    fn default() -> Self {
        ArgReduce {
            axis: 0,
            keepdims: true,
            select_last_index: false,
        }
    }
}

/// Pad modes. Only [`PadMode::Constant`] is required of executors; the others are
/// represented so an importer can name them in an error rather than misread them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PadMode {
    #[default]
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// Resize attributes (NCHW nearest and linear).
#[derive(Clone, Debug, PartialEq)]
pub struct Resize {
    pub mode: ResizeMode,
    pub coordinate_transformation_mode: CoordinateTransform,
    pub nearest_mode: NearestMode,
    pub extrapolation_value: f32,
    pub cubic_coeff_a: f32,
    pub exclude_outside: bool,
}

impl Default for Resize {
    fn default() -> Self {
        Resize {
            mode: ResizeMode::Nearest,
            coordinate_transformation_mode: CoordinateTransform::HalfPixel,
            nearest_mode: NearestMode::RoundPreferFloor,
            extrapolation_value: 0.0,
            cubic_coeff_a: -0.75,
            exclude_outside: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    Nearest,
    Linear,
    Cubic,
}

/// How an output coordinate maps back to an input coordinate in Resize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoordinateTransform {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// Rounding of the mapped coordinate in nearest-mode Resize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

impl CoordinateTransform {
    /// Maps output index `x` back to a (fractional) input coordinate along one axis. It is
    /// computed in f32, as onnxruntime does: nearest-mode choices flip on exact halves, so
    /// the precision is part of what every executor must agree on. tf_crop_and_resize is
    /// refused before any coordinate is computed and maps like asymmetric here.
    pub fn original(self, x: f32, scale: f32, out_len: f32, in_len: f32) -> f32 {
        match self {
            CoordinateTransform::HalfPixel => (x + 0.5) / scale - 0.5,
            CoordinateTransform::HalfPixelSymmetric => {
                let adjustment = out_len / (scale * in_len);
                let center = in_len / 2.0;
                center * (1.0 - adjustment) + (x + 0.5) / scale - 0.5
            }
            CoordinateTransform::PytorchHalfPixel => {
                if out_len > 1.0 {
                    (x + 0.5) / scale - 0.5
                } else {
                    0.0
                }
            }
            CoordinateTransform::AlignCorners => {
                if out_len == 1.0 {
                    0.0
                } else {
                    x * (in_len - 1.0) / (out_len - 1.0)
                }
            }
            CoordinateTransform::Asymmetric | CoordinateTransform::TfCropAndResize => x / scale,
        }
    }
}

impl NearestMode {
    /// Rounds a coordinate to an index as the mode says; ties are exact halves.
    pub fn round(self, x: f32) -> f32 {
        let is_half = x - x.floor() == 0.5;
        match self {
            NearestMode::RoundPreferFloor if is_half => x.floor(),
            NearestMode::RoundPreferCeil if is_half => x.ceil(),
            NearestMode::RoundPreferFloor | NearestMode::RoundPreferCeil => x.round(),
            NearestMode::Floor => x.floor(),
            NearestMode::Ceil => x.ceil(),
        }
    }
}

/// The elementwise unary ops. Each has one row in [`UNARY_OPS`]; its parameters (at most
/// two, `alpha` and `beta`) are the kernels' two float arguments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    Sqrt,
    Exp,
    Neg,
    Abs,
    Erf,
    Relu,
    Sigmoid,
    Tanh,
    HardSwish,
    LeakyRelu { alpha: f32 },
    HardSigmoid { alpha: f32, beta: f32 },
    Reciprocal,
}

/// The elementwise binary ops (multidirectional broadcasting). Each has one row in
/// [`BINARY_OPS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    /// Integer or float remainder. `fmod == false` takes the divisor's sign (Python `%`).
    Mod {
        fmod: bool,
    },
    /// Produces bool.
    Equal,
}

/// What kind of computation an op is. Code that does not care about one op (routing,
/// inference, folding, a backend's dispatch) matches the family, and the family's own file
/// matches its ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Conv, Gemm, MatMul: multiply-accumulate over an inner dimension.
    Linear,
    /// [`Op::Unary`]: one input, same shape out.
    Unary,
    /// [`Op::Binary`]: two broadcasting inputs.
    Binary,
    /// Other elementwise ops with several operands: Clip, Where.
    Select,
    /// Softmax, LayerNormalization, BatchNormalization.
    Normalization,
    /// MaxPool, AveragePool, GlobalAveragePool.
    Pool,
    /// ReduceMean, ReduceSum, ReduceMax, ArgMax.
    Reduce,
    /// Shape, layout and dtype changes that compute nothing: Concat … Expand.
    Movement,
    /// Resize.
    Resize,
}

/// An attribute's default value as the schema states it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AttrDefault {
    /// The attribute must be given.
    Required,
    /// Absent means what the op's doc says (taken from an input, all axes, …).
    Absent,
    Int(i64),
    Float(f32),
    Str(&'static str),
}

/// One attribute an op reads, with its default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttrSpec {
    pub name: &'static str,
    pub default: AttrDefault,
}

/// Everything Concord knows about one op type, in one place: the readers, writers, name
/// lists, property tests and kernel op codes derive from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpSchema {
    /// The ONNX op type, as it appears in a model and in every report.
    pub name: &'static str,
    /// The ONNX domain; "" is the default domain (ai.onnx).
    pub domain: &'static str,
    /// The first default-domain opset whose form of the op Concord reads: the opset that
    /// introduced the op, since the ONNX reader normalises every form from opset 7 on
    /// (opset-7-and-older ops say 1).
    pub since: i64,
    pub family: Family,
    /// Every attribute the op reads, with ONNX's default.
    pub attributes: &'static [AttrSpec],
}

/// One elementwise unary op: its schema and what its kernels need.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnaryDef {
    /// The op with its attributes at their defaults.
    pub op: Unary,
    pub name: &'static str,
    pub since: i64,
    /// The kernel-facing name (snake case): kernels are `unary_<kernel>`, codes `U_<KERNEL>`.
    pub kernel: &'static str,
    /// Whether ONNX defines it on signed integers too (else floats only).
    pub integer: bool,
    /// The names of its float attributes, in kernel-argument order (alpha, beta).
    pub params: &'static [AttrSpec],
}

/// One elementwise binary op: its schema and what its kernels need.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BinaryDef {
    pub op: Binary,
    pub name: &'static str,
    pub since: i64,
    /// Kernel-facing names: kernels `binary_<kernel>`, codes `B_<KERNEL>`. Mod has two
    /// (Python-sign `mod`, C-sign `fmod`).
    pub kernels: &'static [&'static str],
    pub attributes: &'static [AttrSpec],
}

const fn attr(name: &'static str, default: AttrDefault) -> AttrSpec {
    AttrSpec { name, default }
}

const fn unary(
    op: Unary,
    name: &'static str,
    kernel: &'static str,
    integer: bool,
    params: &'static [AttrSpec],
) -> UnaryDef {
    UnaryDef {
        op,
        name,
        since: 1,
        kernel,
        integer,
        params,
    }
}

/// Every unary op, in kernel-code order (code = position + 1; 0 means "no activation").
pub const UNARY_OPS: &[UnaryDef] = &[
    unary(Unary::Sqrt, "Sqrt", "sqrt", false, &[]),
    unary(Unary::Exp, "Exp", "exp", false, &[]),
    unary(Unary::Neg, "Neg", "neg", true, &[]),
    unary(Unary::Abs, "Abs", "abs", true, &[]),
    UnaryDef {
        since: 9,
        ..unary(Unary::Erf, "Erf", "erf", false, &[])
    },
    unary(Unary::Relu, "Relu", "relu", true, &[]),
    unary(Unary::Sigmoid, "Sigmoid", "sigmoid", false, &[]),
    unary(Unary::Tanh, "Tanh", "tanh", false, &[]),
    UnaryDef {
        since: 14,
        ..unary(Unary::HardSwish, "HardSwish", "hard_swish", false, &[])
    },
    unary(
        Unary::LeakyRelu { alpha: 0.01 },
        "LeakyRelu",
        "leaky_relu",
        false,
        &[attr("alpha", AttrDefault::Float(0.01))],
    ),
    unary(
        Unary::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        "HardSigmoid",
        "hard_sigmoid",
        false,
        &[
            attr("alpha", AttrDefault::Float(0.2)),
            attr("beta", AttrDefault::Float(0.5)),
        ],
    ),
    unary(Unary::Reciprocal, "Reciprocal", "reciprocal", false, &[]),
];

/// Every binary op, in kernel-code order.
pub const BINARY_OPS: &[BinaryDef] = &[
    binary(Binary::Add, "Add", &["add"]),
    binary(Binary::Sub, "Sub", &["sub"]),
    binary(Binary::Mul, "Mul", &["mul"]),
    binary(Binary::Div, "Div", &["div"]),
    binary(Binary::Pow, "Pow", &["pow"]),
    BinaryDef {
        since: 10,
        attributes: &[attr("fmod", AttrDefault::Int(0))],
        ..binary(Binary::Mod { fmod: false }, "Mod", &["mod", "fmod"])
    },
    binary(Binary::Equal, "Equal", &["equal"]),
];

const fn binary(op: Binary, name: &'static str, kernels: &'static [&'static str]) -> BinaryDef {
    BinaryDef {
        op,
        name,
        since: 1,
        kernels,
        attributes: &[],
    }
}

const fn schema(
    name: &'static str,
    since: i64,
    family: Family,
    attributes: &'static [AttrSpec],
) -> OpSchema {
    OpSchema {
        name,
        domain: "",
        since,
        family,
        attributes,
    }
}

use AttrDefault::{Absent, Float, Int, Required, Str};

const CONV_ATTRS: &[AttrSpec] = &[
    attr("auto_pad", Str("NOTSET")),
    attr("dilations", Absent),
    attr("group", Int(1)),
    attr("kernel_shape", Absent),
    attr("pads", Absent),
    attr("strides", Absent),
];
const REDUCE_ATTRS: &[AttrSpec] = &[
    attr("axes", Absent),
    attr("keepdims", Int(1)),
    attr("noop_with_empty_axes", Int(0)),
];

/// Every op other than the unary and binary ones (those are [`UNARY_OPS`] and
/// [`BINARY_OPS`]).
pub const OTHER_OPS: &[OpSchema] = &[
    schema("Conv", 1, Family::Linear, CONV_ATTRS),
    schema(
        "Gemm",
        1,
        Family::Linear,
        &[
            attr("alpha", Float(1.0)),
            attr("beta", Float(1.0)),
            attr("transA", Int(0)),
            attr("transB", Int(0)),
        ],
    ),
    schema("MatMul", 1, Family::Linear, &[]),
    schema("Clip", 1, Family::Select, &[]),
    schema("Where", 9, Family::Select, &[]),
    schema(
        "Softmax",
        1,
        Family::Normalization,
        &[attr("axis", Int(-1))],
    ),
    schema(
        "LayerNormalization",
        17,
        Family::Normalization,
        &[
            attr("axis", Int(-1)),
            attr("epsilon", Float(1e-5)),
            attr("stash_type", Int(1)),
        ],
    ),
    schema(
        "BatchNormalization",
        1,
        Family::Normalization,
        &[
            attr("epsilon", Float(1e-5)),
            attr("momentum", Float(0.9)),
            attr("training_mode", Int(0)),
        ],
    ),
    schema(
        "MaxPool",
        1,
        Family::Pool,
        &[
            attr("auto_pad", Str("NOTSET")),
            attr("ceil_mode", Int(0)),
            attr("dilations", Absent),
            attr("kernel_shape", Required),
            attr("pads", Absent),
            attr("storage_order", Int(0)),
            attr("strides", Absent),
        ],
    ),
    schema(
        "AveragePool",
        1,
        Family::Pool,
        &[
            attr("auto_pad", Str("NOTSET")),
            attr("ceil_mode", Int(0)),
            attr("count_include_pad", Int(0)),
            attr("dilations", Absent),
            attr("kernel_shape", Required),
            attr("pads", Absent),
            attr("strides", Absent),
        ],
    ),
    schema("GlobalAveragePool", 1, Family::Pool, &[]),
    schema("ReduceMean", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceSum", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceMax", 1, Family::Reduce, REDUCE_ATTRS),
    schema(
        "ArgMax",
        1,
        Family::Reduce,
        &[
            attr("axis", Int(0)),
            attr("keepdims", Int(1)),
            attr("select_last_index", Int(0)),
        ],
    ),
    schema("Concat", 1, Family::Movement, &[attr("axis", Required)]),
    schema(
        "Split",
        1,
        Family::Movement,
        &[attr("axis", Int(0)), attr("num_outputs", Absent)],
    ),
    schema("Slice", 1, Family::Movement, &[]),
    schema("Gather", 1, Family::Movement, &[attr("axis", Int(0))]),
    schema("Reshape", 1, Family::Movement, &[attr("allowzero", Int(0))]),
    schema("Flatten", 1, Family::Movement, &[attr("axis", Int(1))]),
    schema("Transpose", 1, Family::Movement, &[attr("perm", Absent)]),
    schema("Squeeze", 1, Family::Movement, &[]),
    schema("Unsqueeze", 1, Family::Movement, &[]),
    schema(
        "Shape",
        1,
        Family::Movement,
        &[attr("start", Int(0)), attr("end", Absent)],
    ),
    schema(
        "Cast",
        1,
        Family::Movement,
        &[
            attr("to", Required),
            attr("saturate", Int(1)),
            attr("round_mode", Str("up")),
        ],
    ),
    schema("Identity", 1, Family::Movement, &[]),
    schema("Dropout", 1, Family::Movement, &[attr("seed", Absent)]),
    schema("Constant", 1, Family::Movement, &[attr("value", Required)]),
    schema("Pad", 1, Family::Movement, &[attr("mode", Str("constant"))]),
    schema(
        "Resize",
        10,
        Family::Resize,
        &[
            attr("antialias", Int(0)),
            attr("axes", Absent),
            attr("coordinate_transformation_mode", Str("half_pixel")),
            attr("cubic_coeff_a", Float(-0.75)),
            attr("exclude_outside", Int(0)),
            attr("extrapolation_value", Float(0.0)),
            attr("keep_aspect_ratio_policy", Str("stretch")),
            attr("mode", Str("nearest")),
            attr("nearest_mode", Str("round_prefer_floor")),
        ],
    ),
    schema("Expand", 8, Family::Movement, &[]),
];

impl UnaryDef {
    pub fn schema(&self) -> OpSchema {
        OpSchema {
            name: self.name,
            domain: "",
            since: self.since,
            family: Family::Unary,
            attributes: self.params,
        }
    }

    /// The kernel op code (`U_<KERNEL>`): position in [`UNARY_OPS`] plus one.
    pub fn code(&self) -> u32 {
        let index = UNARY_OPS.iter().position(|d| d.name == self.name);
        // Every UnaryDef handed out is a row of UNARY_OPS.
        index.map_or(0, |i| i as u32 + 1)
    }
}

impl BinaryDef {
    pub fn schema(&self) -> OpSchema {
        OpSchema {
            name: self.name,
            domain: "",
            since: self.since,
            family: Family::Binary,
            attributes: self.attributes,
        }
    }
}

impl Unary {
    /// Its row of [`UNARY_OPS`].
    pub fn def(self) -> &'static UnaryDef {
        let found = UNARY_OPS
            .iter()
            .find(|d| std::mem::discriminant(&d.op) == std::mem::discriminant(&self));
        // UNARY_OPS has a row per variant; `every_unary_and_binary_op_has_one_row` checks it.
        found.unwrap_or(&UNARY_OPS[0])
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// The two float parameters the kernels take (alpha, beta); zero where unused.
    pub fn params(self) -> [f32; 2] {
        match self {
            Unary::LeakyRelu { alpha } => [alpha, 0.0],
            Unary::HardSigmoid { alpha, beta } => [alpha, beta],
            _ => [0.0, 0.0],
        }
    }

    /// The same op with its parameters replaced, in [`UnaryDef::params`] order.
    pub fn with_params(self, p: [f32; 2]) -> Unary {
        match self {
            Unary::LeakyRelu { .. } => Unary::LeakyRelu { alpha: p[0] },
            Unary::HardSigmoid { .. } => Unary::HardSigmoid {
                alpha: p[0],
                beta: p[1],
            },
            other => other,
        }
    }

    /// The op of this name with its default parameters.
    pub fn from_name(name: &str) -> Option<Unary> {
        UNARY_OPS.iter().find(|d| d.name == name).map(|d| d.op)
    }
}

impl Binary {
    /// Its row of [`BINARY_OPS`].
    pub fn def(self) -> &'static BinaryDef {
        let found = BINARY_OPS
            .iter()
            .find(|d| std::mem::discriminant(&d.op) == std::mem::discriminant(&self));
        // BINARY_OPS has a row per variant; `every_unary_and_binary_op_has_one_row` checks it.
        found.unwrap_or(&BINARY_OPS[0])
    }

    pub fn name(self) -> &'static str {
        self.def().name
    }

    /// The kernel-facing name: `fmod` for C-sign Mod, else the row's first.
    pub fn kernel(self) -> &'static str {
        let kernels = self.def().kernels;
        match self {
            Binary::Mod { fmod: true } => kernels.get(1).copied().unwrap_or(kernels[0]),
            _ => kernels[0],
        }
    }

    /// The kernel op code (`B_<KERNEL>`): the kernel's position among every binary kernel.
    pub fn code(self) -> u32 {
        let kernel = self.kernel();
        binary_kernels()
            .position(|k| k == kernel)
            .map_or(0, |i| i as u32)
    }

    /// The op of this name with its default attributes.
    pub fn from_name(name: &str) -> Option<Binary> {
        BINARY_OPS.iter().find(|d| d.name == name).map(|d| d.op)
    }
}

fn binary_kernels() -> impl Iterator<Item = &'static str> {
    BINARY_OPS.iter().flat_map(|d| d.kernels.iter().copied())
}

/// Every op type this IR can represent: [`OTHER_OPS`], [`UNARY_OPS`] and [`BINARY_OPS`].
pub fn schemas() -> impl Iterator<Item = OpSchema> {
    OTHER_OPS
        .iter()
        .copied()
        .chain(UNARY_OPS.iter().map(UnaryDef::schema))
        .chain(BINARY_OPS.iter().map(BinaryDef::schema))
}

/// The schema of the op type `name` in `domain` ("" for the default domain).
pub fn schema_of(domain: &str, name: &str) -> Option<OpSchema> {
    schemas().find(|s| s.name == name && s.domain == domain)
}

/// Every op type name, for `concord info`, coverage reports and error messages.
pub fn supported_names() -> &'static [&'static str] {
    static NAMES: std::sync::LazyLock<Vec<&'static str>> =
        std::sync::LazyLock::new(|| schemas().map(|s| s.name).collect());
    &NAMES
}

/// The kernel op code of Clip with scalar bounds (`U_CLIP`), which device kernels treat as a
/// unary op whose bounds are its two parameters: after every [`UNARY_OPS`] code.
pub const CLIP_KERNEL_CODE: u32 = UNARY_OPS.len() as u32 + 1;

/// The elementwise kernel op codes every device backend's kernels use, as
/// (`U_<KERNEL>` / `B_<KERNEL>`, value) pairs: device crates prepend them to their kernel
/// sources as `#define`s, so a kernel and its Rust caller cannot disagree.
pub fn kernel_codes() -> Vec<(String, u32)> {
    let unary = UNARY_OPS
        .iter()
        .map(|d| (format!("U_{}", d.kernel.to_ascii_uppercase()), d.code()));
    let binary = binary_kernels()
        .enumerate()
        .map(|(i, k)| (format!("B_{}", k.to_ascii_uppercase()), i as u32));
    let clip = std::iter::once(("U_CLIP".to_string(), CLIP_KERNEL_CODE));
    unary.chain(clip).chain(binary).collect()
}

/// [`kernel_codes`] as C preprocessor lines, for a kernel source's prelude.
pub fn kernel_code_defines() -> String {
    kernel_codes()
        .into_iter()
        .map(|(name, code)| format!("#define {name} {code}\n"))
        .collect()
}

impl Op {
    /// Its schema: name, domain, opset, family, attributes.
    pub fn schema(&self) -> OpSchema {
        let other = |name: &str| {
            OTHER_OPS
                .iter()
                .copied()
                .find(|s| s.name == name)
                // Every name below is a row of OTHER_OPS; `every_op_has_a_schema` checks it.
                .unwrap_or(OTHER_OPS[0])
        };
        match self {
            Op::Unary(u) => u.def().schema(),
            Op::Binary(b) => b.def().schema(),
            Op::Conv(_) => other("Conv"),
            Op::Gemm(_) => other("Gemm"),
            Op::MatMul => other("MatMul"),
            Op::Clip => other("Clip"),
            Op::Softmax { .. } => other("Softmax"),
            Op::LayerNormalization { .. } => other("LayerNormalization"),
            Op::BatchNormalization { .. } => other("BatchNormalization"),
            Op::MaxPool(_) => other("MaxPool"),
            Op::AveragePool(_) => other("AveragePool"),
            Op::GlobalAveragePool => other("GlobalAveragePool"),
            Op::ReduceMean(_) => other("ReduceMean"),
            Op::ReduceSum(_) => other("ReduceSum"),
            Op::ReduceMax(_) => other("ReduceMax"),
            Op::ArgMax(_) => other("ArgMax"),
            Op::Concat { .. } => other("Concat"),
            Op::Split { .. } => other("Split"),
            Op::Slice => other("Slice"),
            Op::Gather { .. } => other("Gather"),
            Op::Reshape { .. } => other("Reshape"),
            Op::Flatten { .. } => other("Flatten"),
            Op::Transpose { .. } => other("Transpose"),
            Op::Squeeze => other("Squeeze"),
            Op::Unsqueeze => other("Unsqueeze"),
            Op::Shape { .. } => other("Shape"),
            Op::Cast { .. } => other("Cast"),
            Op::Identity => other("Identity"),
            Op::Dropout => other("Dropout"),
            Op::Constant { .. } => other("Constant"),
            Op::Pad { .. } => other("Pad"),
            Op::Resize(_) => other("Resize"),
            Op::Where => other("Where"),
            Op::Expand => other("Expand"),
        }
    }

    /// The ONNX op type, as it appears in a model and in every report.
    pub fn name(&self) -> &'static str {
        self.schema().name
    }

    pub fn family(&self) -> Family {
        self.schema().family
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_unary_and_binary_op_has_one_row() {
        for d in UNARY_OPS {
            assert_eq!(d.op.def().name, d.name, "{} finds its own row", d.name);
            assert_eq!(d.op.with_params(d.op.params()), d.op);
            assert_eq!(
                d.params.len(),
                d.op.params().iter().filter(|p| **p != 0.0).count()
            );
        }
        for d in BINARY_OPS {
            assert_eq!(d.op.def().name, d.name, "{} finds its own row", d.name);
        }
        assert_eq!(Binary::Mod { fmod: true }.kernel(), "fmod");
        assert_eq!(Binary::Mod { fmod: false }.kernel(), "mod");
    }

    #[test]
    fn names_and_kernel_codes_are_unique() {
        let names: Vec<&str> = supported_names().to_vec();
        let set: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(
            set.len(),
            names.len(),
            "an op name appears twice: {names:?}"
        );
        let codes = kernel_codes();
        let unary: BTreeSet<u32> = codes
            .iter()
            .filter(|(n, _)| n.starts_with("U_"))
            .map(|c| c.1)
            .collect();
        assert_eq!(unary.len(), UNARY_OPS.len() + 1, "every unary op and Clip");
        assert!(!unary.contains(&0), "0 is reserved for no activation");
        let binary: BTreeSet<u32> = codes
            .iter()
            .filter(|(n, _)| n.starts_with("B_"))
            .map(|c| c.1)
            .collect();
        assert_eq!(binary.len(), codes.len() - UNARY_OPS.len() - 1);
    }

    #[test]
    fn every_op_has_a_schema() {
        let ops = [
            Op::MatMul,
            Op::Clip,
            Op::GlobalAveragePool,
            Op::Slice,
            Op::Squeeze,
            Op::Unsqueeze,
            Op::Identity,
            Op::Dropout,
            Op::Where,
            Op::Expand,
        ];
        for op in ops {
            assert_eq!(op.schema().name, format!("{op:?}"));
        }
        assert_eq!(Op::Gemm(Gemm::default()).name(), "Gemm");
        assert_eq!(Op::Resize(Resize::default()).family(), Family::Resize);
    }
}
