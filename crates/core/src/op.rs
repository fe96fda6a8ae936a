//! Ops as data: one [`Op`] variant per supported ONNX operator, each carrying its
//! attributes as typed fields with ONNX defaults already applied.
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

    // Elementwise binary (multidirectional broadcasting). Inputs: A, B.
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

    // Elementwise unary. Input: X.
    Sqrt,
    Exp,
    Neg,
    Abs,
    Erf,
    Relu,
    Sigmoid,
    Tanh,
    HardSwish,
    LeakyRelu {
        alpha: f32,
    },
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
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

impl Op {
    /// The ONNX op type, as it appears in a model and in every report.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Conv(_) => "Conv",
            Op::Gemm(_) => "Gemm",
            Op::MatMul => "MatMul",
            Op::Add => "Add",
            Op::Sub => "Sub",
            Op::Mul => "Mul",
            Op::Div => "Div",
            Op::Pow => "Pow",
            Op::Mod { .. } => "Mod",
            Op::Equal => "Equal",
            Op::Sqrt => "Sqrt",
            Op::Exp => "Exp",
            Op::Neg => "Neg",
            Op::Abs => "Abs",
            Op::Erf => "Erf",
            Op::Relu => "Relu",
            Op::Sigmoid => "Sigmoid",
            Op::Tanh => "Tanh",
            Op::HardSwish => "HardSwish",
            Op::LeakyRelu { .. } => "LeakyRelu",
            Op::HardSigmoid { .. } => "HardSigmoid",
            Op::Clip => "Clip",
            Op::Softmax { .. } => "Softmax",
            Op::LayerNormalization { .. } => "LayerNormalization",
            Op::BatchNormalization { .. } => "BatchNormalization",
            Op::MaxPool(_) => "MaxPool",
            Op::AveragePool(_) => "AveragePool",
            Op::GlobalAveragePool => "GlobalAveragePool",
            Op::ReduceMean(_) => "ReduceMean",
            Op::ReduceSum(_) => "ReduceSum",
            Op::ReduceMax(_) => "ReduceMax",
            Op::Concat { .. } => "Concat",
            Op::Split { .. } => "Split",
            Op::Slice => "Slice",
            Op::Gather { .. } => "Gather",
            Op::Reshape { .. } => "Reshape",
            Op::Flatten { .. } => "Flatten",
            Op::Transpose { .. } => "Transpose",
            Op::Squeeze => "Squeeze",
            Op::Unsqueeze => "Unsqueeze",
            Op::Shape { .. } => "Shape",
            Op::Cast { .. } => "Cast",
            Op::Identity => "Identity",
            Op::Dropout => "Dropout",
            Op::Constant { .. } => "Constant",
            Op::Pad { .. } => "Pad",
            Op::Resize(_) => "Resize",
            Op::Where => "Where",
            Op::Expand => "Expand",
        }
    }

    /// Every ONNX op type this IR can represent, for `concord info` and coverage reports.
    pub const SUPPORTED: &'static [&'static str] = &[
        "Conv",
        "Gemm",
        "MatMul",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Mod",
        "Equal",
        "Sqrt",
        "Exp",
        "Neg",
        "Abs",
        "Erf",
        "Relu",
        "Sigmoid",
        "Tanh",
        "HardSwish",
        "LeakyRelu",
        "HardSigmoid",
        "Clip",
        "Softmax",
        "LayerNormalization",
        "BatchNormalization",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "Concat",
        "Split",
        "Slice",
        "Gather",
        "Reshape",
        "Flatten",
        "Transpose",
        "Squeeze",
        "Unsqueeze",
        "Shape",
        "Cast",
        "Identity",
        "Dropout",
        "Constant",
        "Pad",
        "Resize",
        "Where",
        "Expand",
    ];
}
