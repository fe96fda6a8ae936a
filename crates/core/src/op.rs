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
use crate::graph::Graph;
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
    /// A stateful causal depthwise 1-D convolution (opset 27). Inputs: input
    /// (batch, channels, length), weight (channels, 1, k), bias?, past_state?
    /// (batch, channels, k - 1). Outputs: output, present_state.
    CausalConvWithState {
        /// SiLU (`silu` or its alias `swish`) on the convolution's output.
        silu: bool,
    },

    /// Elementwise binary, with multidirectional broadcasting. Inputs: A, B.
    Binary(Binary),
    /// Elementwise unary maths and activations. Input: X.
    Unary(Unary),
    /// Inputs: X, min?, max? (scalars).
    Clip,
    /// Max, Min, Sum, Mean of one or more broadcasting inputs.
    Variadic(Variadic),

    // Normalisation.
    /// Input: X.
    Softmax {
        axis: i64,
    },
    /// Input: X.
    LogSoftmax {
        axis: i64,
    },
    /// Input: X. One-hot of the first largest value along `axis`.
    Hardmax {
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
    /// Inputs: X (N, C, …), scale (C), B (C). Statistics per sample and channel.
    InstanceNormalization {
        epsilon: f32,
    },
    /// Inputs: X, scale, bias. Statistics per sample and group of channels; scale and bias
    /// per channel (opset 21) or per group (opset 18).
    GroupNormalization {
        epsilon: f32,
        num_groups: usize,
    },
    /// Inputs: X, scale. x / sqrt(mean(x²) + epsilon) over the axes from `axis`, times scale.
    RMSNormalization {
        axis: i64,
        epsilon: f32,
    },
    /// Input: X. x / ||x||_p along `axis` (p is 1 or 2).
    LpNormalization {
        axis: i64,
        p: i64,
    },
    /// Input: X. (x - mean) / (std + 1e-9) over `axes`.
    MeanVarianceNormalization {
        axes: Vec<i64>,
    },
    /// Input: X (N, C, …). Local response normalisation across channels.
    LRN {
        alpha: f32,
        beta: f32,
        bias: f32,
        size: usize,
    },
    /// Scaled dot-product attention (opset 23; opset 24 adds `nonpad_kv_seqlen`). Inputs: Q,
    /// K, V, attn_mask?, past_key?, past_value?, nonpad_kv_seqlen?. Outputs: Y,
    /// present_key?, present_value?, qk_matmul_output?. Q, K, V are all 4-D
    /// (batch, heads, sequence, head size) or all 3-D (batch, sequence, heads · head size),
    /// the 3-D form needing both head counts.
    Attention {
        is_causal: bool,
        kv_num_heads: Option<usize>,
        q_num_heads: Option<usize>,
        /// Which scores qk_matmul_output holds: 0 Q·Kᵀ scaled, 1 plus the mask, 2 after the
        /// softcap, 3 after the softmax.
        qk_matmul_output_mode: i64,
        /// Absent: 1 / sqrt(head size).
        scale: Option<f32>,
        /// 0 means no softcap.
        softcap: f32,
        /// The dtype the softmax is computed in; the reference always computes in f64.
        softmax_precision: Option<DType>,
        /// Opset 25's sliding window: how many keys before (left) and after (right) a
        /// query's absolute position it may attend; -1 leaves that side unbounded.
        left_window_size: i64,
        right_window_size: i64,
    },
    /// SwiGLU (opset 28). Inputs: A (gate), B (value), of one shape (no broadcasting).
    /// Y = A · sigmoid(alpha · A) · B.
    SwiGLU {
        alpha: f32,
    },
    /// Linear attention (opset 27): a recurrent state (batch, kv heads, d_k, d_v) updated per
    /// token by `update_rule` and read by each query. Inputs: query, key, value (3-D packed
    /// (batch, seq, heads · size)), past_state?, decay?, beta?. Outputs: output,
    /// present_state.
    LinearAttention {
        kv_num_heads: usize,
        q_num_heads: usize,
        /// 0 means 1 / sqrt(d_k).
        scale: f32,
        update_rule: LinearAttentionRule,
    },
    /// Rotary positional embedding (opset 23). Inputs: X, cos_cache, sin_cache,
    /// position_ids?. X is (batch, heads, sequence, head size) or 3-D
    /// (batch, sequence, heads · head size) with `num_heads` given.
    RotaryEmbedding {
        interleaved: bool,
        num_heads: Option<usize>,
        /// 0 means the whole head.
        rotary_embedding_dim: usize,
    },

    // Pooling. Input: X (N, C, spatial…).
    MaxPool(Pool),
    AveragePool(Pool),
    GlobalAveragePool,
    GlobalMaxPool,
    /// The p-norm of each window (padding counts as zeros).
    LpPool(Pool, i64),
    GlobalLpPool {
        p: i64,
    },

    // Reductions. Inputs: data, axes? (the attribute form is folded into `axes`).
    Reduce(ReduceKind, Reduce),
    /// Input: data. Output: i64 indices of the largest values along `axis`.
    ArgMax(ArgReduce),
    /// Input: data. Output: i64 indices of the smallest values along `axis`.
    ArgMin(ArgReduce),

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

    // Indexing: ops that compute positions, or read and write by index.
    /// Input: shape. Output: that shape filled with `value`'s one element.
    ConstantOfShape {
        value: Tensor,
    },
    /// Inputs: start, limit, delta (scalars of one numeric type).
    Range,
    /// Inputs: input, repeats.
    Tile,
    /// Inputs: x, axis (scalar).
    CumSum {
        exclusive: bool,
        reverse: bool,
    },
    /// Inputs: x, axis (scalar). The running product (opset 26).
    CumProd {
        exclusive: bool,
        reverse: bool,
    },
    /// Input: input. Its bytes, little-endian, read as `to` (opset 26); the two dtypes have
    /// one width.
    BitCast {
        to: DType,
    },
    /// Inputs: data, indices.
    GatherElements {
        axis: i64,
    },
    /// Inputs: data, indices.
    GatherND {
        batch_dims: i64,
    },
    /// Inputs: data, indices, updates.
    ScatterElements {
        axis: i64,
        reduction: ScatterReduction,
    },
    /// Inputs: data, indices, updates.
    ScatterND {
        reduction: ScatterReduction,
    },
    /// Inputs: indices, depth, values ([off, on]).
    OneHot {
        axis: i64,
    },
    /// Inputs: input, k?.
    Trilu {
        upper: bool,
    },
    /// Input: X. Output: i64 [rank, count] coordinates of the non-zero elements.
    NonZero,
    /// Input: data. Output: its element count, an i64 scalar.
    Size,
    /// Input: input (N, C, H, W).
    DepthToSpace {
        blocksize: usize,
        /// `mode = "CRD"` (column-row-depth) rather than the default DCR.
        crd: bool,
    },
    /// Input: input (N, C, H, W).
    SpaceToDepth {
        blocksize: usize,
        /// `mode = "CRD"` (column-row-depth, opset 28) rather than the default DCR.
        crd: bool,
    },
    /// Input: a 2-D tensor; output: ones on diagonal `k`, of `dtype` (default the input's).
    EyeLike {
        dtype: Option<DType>,
        k: i64,
    },
    /// Inputs: X, K. Outputs: Values, Indices (i64).
    TopK {
        axis: i64,
        largest: bool,
        sorted: bool,
    },
    /// Inputs: input, target_type (only its dtype is read).
    CastLike,
    /// Inputs: input, condition (1-D bool). No axis: the flattened input.
    Compress {
        axis: Option<i64>,
    },
    /// Inputs: input_data, shape. Crops or zero-pads `axes` (all when None) about the centre.
    CenterCropPad {
        axes: Option<Vec<i64>>,
    },
    /// Inputs: input, sequence_lens. Reverses each batch entry's first sequence_lens steps.
    ReverseSequence {
        batch_axis: i64,
        time_axis: i64,
    },

    // Losses (Normalization family).
    /// Inputs: input (N, C, d1…) log-probabilities, target (N, d1…) of i32 or i64 class
    /// indices, weight (C)?. Output: the loss, (N, d1…) for reduction none, else a scalar.
    NegativeLogLikelihoodLoss {
        reduction: LossReduction,
        ignore_index: Option<i64>,
    },
    /// Inputs: scores (N, C, d1…), labels (N, d1…), weights (C)?. Outputs: output (as
    /// NegativeLogLikelihoodLoss's), log_prob? (the LogSoftmax of scores along C).
    SoftmaxCrossEntropyLoss {
        reduction: LossReduction,
        ignore_index: Option<i64>,
    },

    // Quantisation (Quantization family).
    /// Inputs: x, y_scale, y_zero_point?. Per tensor (scalar scale), per axis (1-D scale
    /// along `axis`) or blocked (`block_size` > 0: scale has x's shape with `axis` divided
    /// into blocks). Output dtype: the zero point's, else `output_dtype`, else u8.
    QuantizeLinear {
        axis: i64,
        block_size: usize,
        output_dtype: Option<DType>,
        /// The dtype the division x / y_scale rounds to; None: y_scale's.
        precision: Option<DType>,
    },
    /// Inputs: x, x_scale, x_zero_point?. Output dtype: `output_dtype`, else x_scale's.
    DequantizeLinear {
        axis: i64,
        block_size: usize,
        output_dtype: Option<DType>,
    },
    /// Input: x (f32). Outputs: y (u8), y_scale (f32 scalar), y_zero_point (u8 scalar).
    DynamicQuantizeLinear,
    /// Inputs: A, B, a_zero_point?, b_zero_point?. Output: i32.
    MatMulInteger,
    /// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
    QLinearMatMul,
    /// Inputs: x, w, x_zero_point?, w_zero_point?. Output: i32.
    ConvInteger(Conv),
    /// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
    /// B? (i32).
    QLinearConv(Conv),

    // Recurrent networks (Recurrent family).
    /// LSTM, GRU or RNN, by [`Recurrent::cell`]. Inputs: X, W, R, B?, sequence_lens? (i32),
    /// initial_h?, and for LSTM initial_c?, P? (peepholes). Outputs: Y?, Y_h?, and for LSTM
    /// Y_c?; an output the model omits has an empty name.
    Recurrent(Recurrent),
    // Linear algebra without a device kernel (LinearAlgebra family).
    /// Inputs: one or more. Sums products over the labels of `equation` (numpy's einsum
    /// notation: explicit `->` output or implicit, `...` broadcasting, a repeated label
    /// within one operand takes its diagonal).
    Einsum {
        equation: String,
    },
    /// Input: X (…, M, M). Output: the determinant of each matrix, shape (…).
    Det,

    // Data-dependent selections (Indexing family): output extents depend on the values.
    /// Inputs: boxes (batches, spatial, 4), scores (batches, classes, spatial),
    /// max_output_boxes_per_class? (i64 scalar, absent or 0: nothing selected),
    /// iou_threshold? (f32 scalar, absent: 0), score_threshold? (f32 scalar). Output:
    /// selected_indices (selected, 3) of i64 (batch, class, box).
    NonMaxSuppression {
        /// Boxes are (x_center, y_center, width, height) rather than two corners
        /// (y1, x1, y2, x2).
        center_point_box: bool,
    },
    /// Input: X. Outputs: Y (the unique elements, or slices along `axis`), indices? (first
    /// occurrence of each), inverse_indices? (for each element or slice of X, its place in
    /// Y), counts?; the last three 1-D i64.
    Unique {
        axis: Option<i64>,
        /// Y in ascending order; otherwise in order of first occurrence.
        sorted: bool,
    },
    /// Inputs: X (N, C, D1…Dn), W (C, M/group, k1…kn), B (M)?. The gradient of Conv with
    /// respect to its input: every input value scatters its kernel-weighted taps.
    ConvTranspose(ConvTranspose),
    /// Inputs: X, I (i64, X's shape: flat positions in Y, as MaxPool's Indices give them),
    /// output_shape? (i64, Y's whole shape). Y is zeros with each X value at its index.
    MaxUnpool {
        kernel_shape: Vec<usize>,
        /// [begin…, end…]; empty means zeros.
        pads: Vec<usize>,
        /// Per spatial axis; empty means 1.
        strides: Vec<usize>,
    },
    // Control flow (ControlFlow family). A subgraph is a self-contained [`Graph`]: the
    // outer values it reads ("captures") are extra node inputs after the op's formal ones
    // and extra subgraph inputs after its declared ones, in the same order, so validation,
    // scheduling and partitioning of the outer graph see them as ordinary operands.
    /// Inputs: cond (bool, one element), then the captures. Each branch's inputs are the
    /// captures; both branches produce the node's outputs.
    If {
        then_branch: Box<Graph>,
        else_branch: Box<Graph>,
    },
    /// Inputs: M? (i64 max trip count), cond? (bool), the N loop-carried initial values,
    /// then `captures` captures. Body inputs: iteration number (i64 scalar), cond, the N
    /// carried values, the captures; body outputs: cond, the N carried values, K scan
    /// outputs. Node outputs: the N final carried values, the K scan outputs stacked along
    /// a new axis 0.
    Loop {
        body: Box<Graph>,
        captures: usize,
    },
    /// Inputs: the N initial states, the `num_scan_inputs` scan inputs, then `captures`
    /// captures. Body inputs: the N states, one slice of each scan input (the scan axis
    /// removed), the captures; body outputs: the N states, K scan-output slices. Node
    /// outputs: the N final states, the K scan outputs stacked along their axes. Directions
    /// are false forward, true reverse; axes are as written (negative counts from the end).
    Scan {
        body: Box<Graph>,
        num_scan_inputs: usize,
        scan_input_axes: Vec<i64>,
        scan_input_directions: Vec<bool>,
        scan_output_axes: Vec<i64>,
        scan_output_directions: Vec<bool>,
        captures: usize,
    },
    // Sampling at computed positions (Sampling family, the reference executor only).
    /// Inputs: X (N, C, D1…Dr), grid (N, H1…Hr, r) of normalised coordinates in [-1, 1],
    /// the last axis in x, y, z… order (innermost spatial axis first). Output: Y (N, C,
    /// H1…Hr), X interpolated at each grid point.
    GridSample {
        mode: GridSampleMode,
        padding_mode: GridPadding,
        align_corners: bool,
    },
    /// Inputs: theta (N, 2, 3) or (N, 3, 4), size (i64 [N, C, H, W] or [N, C, D, H, W]).
    /// Output: grid (N, H, W, 2) or (N, D, H, W, 3): theta applied to the normalised
    /// coordinates of each output position, as [`Op::GridSample`] reads them.
    AffineGrid {
        align_corners: bool,
    },
    // Regions of interest and deformable convolution (Sampling family: X read at positions
    // computed from another operand), and Col2Im (Linear family: ConvTranspose's scatter
    // without weights); the reference executor only.
    /// Inputs: X (N, C, H, W), rois (R, 4) of [x1, y1, x2, y2] in the coordinates that
    /// `spatial_scale` maps onto X, batch_indices (R) of i64. Output: Y (R, C,
    /// output_height, output_width): each region cut into bins, each bin the average (or
    /// max) of bilinear samples of X on a regular grid inside it.
    RoiAlign(RoiAlign),
    /// Inputs: X (N, C, H, W), rois (R, 5) of [batch index, x1, y1, x2, y2]. Output: Y (R,
    /// C, pooled height, pooled width): the maximum of X over each bin of each region, whose
    /// corners are rounded to whole elements after scaling by `spatial_scale`.
    MaxRoiPool {
        /// Bins along H and W.
        pooled_shape: [usize; 2],
        spatial_scale: f32,
    },
    /// Inputs: X (N, C, D1…Dr), W (M, C/group, k1…kr), offset (N, offset_group·∏k·r,
    /// O1…Or), B (M)?, mask (N, offset_group·∏k, O1…Or)?. Output: Y (N, M, O1…Or): Conv
    /// whose every tap reads X by bilinear interpolation at its window position moved by
    /// its offset, scaled by its mask.
    DeformConv(DeformConv),
    /// Inputs: input (N, C·∏block_shape, L), image_shape (i64, r extents), block_shape
    /// (i64, r extents). Output: (N, C, image_shape…): each column of L sliding-block
    /// positions added back into the image, overlaps summed (the adjoint of im2col).
    Col2Im {
        /// Per spatial axis; empty means 1.
        dilations: Vec<usize>,
        /// [begin…, end…]; empty means zeros.
        pads: Vec<usize>,
        /// Per spatial axis; empty means 1.
        strides: Vec<usize>,
    },
    // Signal processing (Signal family), computed by the reference only.
    /// Input: size (i32 or i64 scalar). Output: a 1-D window of `size` values of `dtype`.
    Window {
        kind: WindowKind,
        /// Periodic (length `size + 1` truncated) rather than symmetric.
        periodic: bool,
        dtype: DType,
    },
    /// Inputs: input (…, N, 1) real or (…, N, 2) complex (the trailing axis is required,
    /// as in the spec), dft_length? (int scalar), axis? (int scalar, opset 20 form only).
    /// Output: complex (…, K, 2) with K = dft_length (or N), or K/2 + 1 when `onesided`; with
    /// `inverse` and `onesided` (IRFFT) a real (…, dft_length or 2·(N - 1), 1) signal.
    Dft {
        /// The opset 17–19 attribute; `None` in the opset 20 form (axis an input, default
        /// -2).
        axis: Option<i64>,
        inverse: bool,
        onesided: bool,
    },
    /// Inputs: signal (batch, L, 1) real or (batch, L, 2) complex, frame_step (int scalar),
    /// window? (frame_length) real, frame_length? (int scalar; one of window and
    /// frame_length is needed). Output: (batch, frames, bins, 2), frames = (L −
    /// frame_length) / frame_step + 1, bins = frame_length (or frame_length/2 + 1 when
    /// `onesided`).
    Stft {
        onesided: bool,
    },
    /// Inputs: num_mel_bins, dft_length, sample_rate (i32 or i64 scalars), lower_edge_hertz,
    /// upper_edge_hertz (float scalars). Output: (dft_length/2 + 1, num_mel_bins) of
    /// `dtype`: triangular filters, peak 1, on the mel scale mel(f) = 2595·log10(1 + f/700).
    MelWeightMatrix {
        dtype: DType,
    },
    // Random numbers (Random family), computed by the reference only. Concord's random ops
    // are reproducible by design: each is a pure function of its seed ([`RandomSeed`]),
    // its attributes and its input, so two forwards, two threads or a folded copy give
    // bit-identical values, and no state survives a run.
    /// RandomNormal and RandomUniform (no inputs, `shape` given), RandomNormalLike and
    /// RandomUniformLike (input: any tensor, whose shape the output takes).
    Random(Random),
    /// Input: (batch, classes) unnormalised log-probabilities (float). Output: (batch,
    /// `sample_size`) class indices of `dtype` (i32 or i64), drawn with probabilities
    /// softmax(row).
    Multinomial {
        sample_size: usize,
        dtype: DType,
        seed: RandomSeed,
    },
    /// Input: probabilities p in [0, 1] (float). Output: 1 with probability p, else 0, of
    /// `dtype` (None: the input's).
    Bernoulli {
        dtype: Option<DType>,
        seed: RandomSeed,
    },
    // Cache and text ops (Indexing family), computed by the reference only.
    /// Inputs: past_cache (batch, …, max_sequence, …), update (past_cache's shape but
    /// `sequence` ≤ max_sequence along `axis`), write_indices? (i64 (batch), absent: zeros).
    /// Output: past_cache with update written along `axis` from each batch entry's write
    /// index (modulo max_sequence when `circular`).
    TensorScatter {
        axis: i64,
        circular: bool,
    },
    /// Input: X (C) or (N, C) of i32 or i64 token ids. Output: f32 (K) or (N, K), K =
    /// max(ngram_indexes) + 1: the (weighted) count of each pool n-gram found in each row.
    TfIdfVectorizer(TfIdf),
}

/// Where a random op's values come from. The generator is ChaCha20 (`rand_chacha`'s
/// `ChaCha20Rng`) keyed by [`RandomSeed::key`]; the reference's random kernels document
/// how they draw from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RandomSeed {
    /// The model's `seed` attribute; its bit pattern keys the generator.
    Given(f32),
    /// No `seed` attribute: a key derived from the node's name
    /// ([`RandomSeed::from_node_name`]), so an unseeded node still draws the same values on
    /// every run, and two unseeded nodes of one model draw different ones. ONNX lets a
    /// runtime pick any seed here; Concord picks a reproducible one.
    FromName(u64),
}

impl RandomSeed {
    /// The seed of a node without a `seed` attribute: the 64-bit FNV-1a hash of its name's
    /// UTF-8 bytes (a fixed, documented function, unlike std's hashers, which may change
    /// between Rust releases).
    pub fn from_node_name(name: &str) -> RandomSeed {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let hash = name
            .bytes()
            .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
        RandomSeed::FromName(hash)
    }

    /// The generator's 32-byte key: byte 0 says which kind of seed (0 given, 1 from the
    /// name), bytes 1 to 8 hold the seed (a given seed's f32 bits widened to u64, or the
    /// name's hash) little-endian, the rest are zero.
    pub fn key(self) -> [u8; 32] {
        let (kind, value) = match self {
            RandomSeed::Given(seed) => (0u8, u64::from(seed.to_bits())),
            RandomSeed::FromName(hash) => (1u8, hash),
        };
        let mut key = [0u8; 32];
        key[0] = kind;
        key[1..9].copy_from_slice(&value.to_le_bytes());
        key
    }
}

/// The distribution a [`Random`] op draws from, with ONNX's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Normal with mean `mean` and standard deviation `scale`.
    Normal { mean: f32, scale: f32 },
    /// Uniform on [low, high).
    Uniform { low: f32, high: f32 },
}

/// RandomNormal, RandomUniform, RandomNormalLike and RandomUniformLike.
#[derive(Clone, Debug, PartialEq)]
pub struct Random {
    pub distribution: Distribution,
    /// `Some`: RandomNormal or RandomUniform, an output of this shape and no input.
    /// `None`: RandomNormalLike or RandomUniformLike, the shape of the one input.
    pub shape: Option<Vec<usize>>,
    /// The output's dtype (a float type). `None`: the input's (the Like forms), or f32,
    /// ONNX's default (the others).
    pub dtype: Option<DType>,
    pub seed: RandomSeed,
}

impl Random {
    /// The ONNX op type.
    pub fn name(&self) -> &'static str {
        match (self.distribution, self.shape.is_some()) {
            (Distribution::Normal { .. }, true) => "RandomNormal",
            (Distribution::Uniform { .. }, true) => "RandomUniform",
            (Distribution::Normal { .. }, false) => "RandomNormalLike",
            (Distribution::Uniform { .. }, false) => "RandomUniformLike",
        }
    }
}

/// How TfIdfVectorizer weighs the count of each n-gram (`mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TfIdfMode {
    /// "TF": the count.
    Tf,
    /// "IDF": the weight where the count is non-zero, else 0 (1 without weights).
    Idf,
    /// "TFIDF": the count times the weight (the count without weights).
    TfIdf,
}

impl TfIdfMode {
    pub const ALL: [(TfIdfMode, &'static str); 3] = [
        (TfIdfMode::Tf, "TF"),
        (TfIdfMode::Idf, "IDF"),
        (TfIdfMode::TfIdf, "TFIDF"),
    ];

    pub fn name(self) -> &'static str {
        TfIdfMode::ALL
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("TF", |(_, n)| n)
    }

    pub fn from_name(name: &str) -> Option<TfIdfMode> {
        TfIdfMode::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(m, _)| *m)
    }
}

/// TfIdfVectorizer's attributes for an integer pool (`pool_int64s`; a string pool is
/// refused on import, [`TFIDF_STRINGS_REFUSAL`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TfIdf {
    pub mode: TfIdfMode,
    pub min_gram_length: usize,
    pub max_gram_length: usize,
    /// n-grams are read with every skip from 0 to this between their tokens.
    pub max_skip_count: usize,
    /// Where the 1-grams, 2-grams, … start in `pool`.
    pub ngram_counts: Vec<usize>,
    /// The output column of each pool n-gram, in pool order.
    pub ngram_indexes: Vec<usize>,
    pub pool: Vec<i64>,
    /// Empty: absent (every weight 1).
    pub weights: Vec<f32>,
}

impl TfIdf {
    /// The output's last extent: max(ngram_indexes) + 1.
    pub fn output_size(&self) -> usize {
        self.ngram_indexes.iter().max().map_or(0, |&m| m + 1)
    }

    /// Every n-gram of the pool with its output column, in pool order: the `k`-grams
    /// run from `ngram_counts[k-1]` to the next start (or the pool's end), `k` tokens each,
    /// and the i-th n-gram overall takes `ngram_indexes[i]`. Only lengths from
    /// `min_gram_length` to `max_gram_length` are listed, though every length counts
    /// towards i. None when the attributes disagree (a start past the pool or before the
    /// previous one, fewer indexes than n-grams).
    pub fn pool_ngrams(&self) -> Option<Vec<(&[i64], usize)>> {
        let mut out = Vec::new();
        let mut ordinal = 0usize;
        for (k, &start) in self.ngram_counts.iter().enumerate() {
            let end = self
                .ngram_counts
                .get(k + 1)
                .copied()
                .unwrap_or(self.pool.len());
            let items = self.pool.get(start..end)?;
            let length = k + 1;
            for gram in items.chunks_exact(length) {
                let column = *self.ngram_indexes.get(ordinal)?;
                if (self.min_gram_length..=self.max_gram_length).contains(&length) {
                    out.push((gram, column));
                }
                ordinal += 1;
            }
        }
        Some(out)
    }
}

/// Why TfIdfVectorizer over strings is refused.
pub const TFIDF_STRINGS_REFUSAL: &str = "TfIdfVectorizer over strings (pool_strings) is out of \
    scope, by design: Concord tensors are numeric or bool; map the tokens to integer ids before \
    the model and use pool_int64s";

/// GridSample's interpolation (`mode`; opset 16 spells linear and cubic `bilinear` and
/// `bicubic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GridSampleMode {
    #[default]
    Linear,
    Nearest,
    Cubic,
}

/// What GridSample reads at positions outside X (`padding_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GridPadding {
    /// Zero.
    #[default]
    Zeros,
    /// The nearest border value.
    Border,
    /// The value at the position reflected at the borders.
    Reflection,
}

/// RoiAlign's attributes (opsets 10 and 16).
#[derive(Clone, Debug, PartialEq)]
pub struct RoiAlign {
    pub mode: RoiAlignMode,
    pub coordinates: RoiCoordinates,
    pub output_height: usize,
    pub output_width: usize,
    /// Samples per bin along each axis; 0 is adaptive: ceil(region extent / bins) along
    /// each axis, per region.
    pub sampling_ratio: usize,
    /// Multiplies the region coordinates into X's.
    pub spatial_scale: f32,
}

impl Default for RoiAlign {
    /// ONNX's defaults at opset 16: average, half-pixel, one 1×1 bin, adaptive sampling.
    fn default() -> Self {
        RoiAlign {
            mode: RoiAlignMode::Avg,
            coordinates: RoiCoordinates::HalfPixel,
            output_height: 1,
            output_width: 1,
            sampling_ratio: 0,
            spatial_scale: 1.0,
        }
    }
}

/// How RoiAlign pools the samples of a bin (`mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RoiAlignMode {
    #[default]
    Avg,
    Max,
}

/// How RoiAlign maps region corners onto X (`coordinate_transformation_mode`, opset 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RoiCoordinates {
    /// Corners scaled then shifted by half a pixel (opset 16's default).
    #[default]
    HalfPixel,
    /// Corners scaled without a shift, regions at least 1×1: opset 10's only behaviour.
    OutputHalfPixel,
}

/// DeformConv's attributes (opset 19). There is no auto_pad: pads are explicit.
#[derive(Clone, Debug, PartialEq)]
pub struct DeformConv {
    /// Per spatial axis; empty means 1.
    pub dilations: Vec<usize>,
    pub group: usize,
    /// Per spatial axis; empty means taken from W.
    pub kernel_shape: Vec<usize>,
    /// Groups of input channels that share one set of offsets (and mask).
    pub offset_group: usize,
    /// [begin_0, begin_1, …, end_0, end_1, …]; empty means zeros.
    pub pads: Vec<usize>,
    /// Per spatial axis; empty means 1.
    pub strides: Vec<usize>,
}

impl Default for DeformConv {
    /// ONNX's defaults: one group, one offset group, everything else taken from W or zero.
    fn default() -> Self {
        DeformConv {
            dilations: Vec::new(),
            group: 1,
            kernel_shape: Vec::new(),
            offset_group: 1,
            pads: Vec::new(),
            strides: Vec::new(),
        }
    }
}

/// LinearAttention's `update_rule`: how each token updates the state S (d_k × d_v).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinearAttentionRule {
    /// S += k ⊗ v.
    Linear,
    /// S = exp(g) · S + k ⊗ v.
    Gated,
    /// S += β · k ⊗ (v − Sᵀk).
    Delta,
    /// S = exp(g) · S, then S += β · k ⊗ (v − Sᵀk).
    GatedDelta,
}

impl LinearAttentionRule {
    /// The ONNX attribute value.
    pub fn name(self) -> &'static str {
        match self {
            LinearAttentionRule::Linear => "linear",
            LinearAttentionRule::Gated => "gated",
            LinearAttentionRule::Delta => "delta",
            LinearAttentionRule::GatedDelta => "gated_delta",
        }
    }

    /// The rule an attribute value names.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            LinearAttentionRule::Linear,
            LinearAttentionRule::Gated,
            LinearAttentionRule::Delta,
            LinearAttentionRule::GatedDelta,
        ]
        .into_iter()
        .find(|r| r.name() == name)
    }

    /// Whether the state decays by exp(decay) each step (the `decay` input is required).
    pub fn gated(self) -> bool {
        matches!(
            self,
            LinearAttentionRule::Gated | LinearAttentionRule::GatedDelta
        )
    }

    /// Whether the write is the delta rule's correction (the `beta` input is required).
    pub fn delta(self) -> bool {
        matches!(
            self,
            LinearAttentionRule::Delta | LinearAttentionRule::GatedDelta
        )
    }
}

/// Which window function an [`Op::Window`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowKind {
    Hann,
    Hamming,
    Blackman,
}

impl WindowKind {
    /// The ONNX op type.
    pub fn name(self) -> &'static str {
        match self {
            WindowKind::Hann => "HannWindow",
            WindowKind::Hamming => "HammingWindow",
            WindowKind::Blackman => "BlackmanWindow",
        }
    }
}

/// Which recurrent network an [`Op::Recurrent`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecurrentCell {
    /// Gates i, o, f, c; functions f, g, h (default Sigmoid, Tanh, Tanh).
    Lstm,
    /// Gates z, r, h; functions f, g (default Sigmoid, Tanh).
    Gru,
    /// One gate; function f (default Tanh).
    Rnn,
}

/// The direction a recurrent op walks the sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RnnDirection {
    #[default]
    Forward,
    Reverse,
    /// Forward then reverse: two directions, each with its own weights.
    Bidirectional,
}

/// An activation function of a recurrent op, with its alpha and beta resolved (0 for
/// functions that take none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RnnActivation {
    pub kind: RnnActivationKind,
    pub alpha: f32,
    pub beta: f32,
}

/// The functions the `activations` attribute of LSTM, GRU and RNN may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RnnActivationKind {
    Relu,
    Tanh,
    Sigmoid,
    /// alpha * x + beta.
    Affine,
    /// x if x >= 0 else alpha * x.
    LeakyRelu,
    /// x if x > alpha else 0.
    ThresholdedRelu,
    /// alpha * tanh(beta * x).
    ScaledTanh,
    /// clamp(alpha * x + beta, 0, 1).
    HardSigmoid,
    /// x if x >= 0 else alpha * (exp(x) - 1).
    Elu,
    Softsign,
    Softplus,
}

/// LSTM's, GRU's and RNN's attributes (opsets 7 and 14; 14 added `layout`).
#[derive(Clone, Debug, PartialEq)]
pub struct Recurrent {
    pub cell: RecurrentCell,
    /// None: the model leaves it out, and R's last extent says it.
    pub hidden_size: Option<usize>,
    pub direction: RnnDirection,
    /// [`RecurrentCell::functions`] per direction, forward's first.
    pub activations: Vec<RnnActivation>,
    /// Gate pre-activations are clamped to [-clip, clip].
    pub clip: Option<f32>,
    /// `layout = 1`: X, Y, Y_h and Y_c have the batch axis first.
    pub batch_major: bool,
    /// LSTM's `input_forget`: the forget gate is 1 - the input gate.
    pub input_forget: bool,
    /// GRU's `linear_before_reset`: the reset gate scales R_h·H plus its bias rather than H.
    pub linear_before_reset: bool,
}

impl RecurrentCell {
    pub fn name(self) -> &'static str {
        match self {
            RecurrentCell::Lstm => "LSTM",
            RecurrentCell::Gru => "GRU",
            RecurrentCell::Rnn => "RNN",
        }
    }

    /// Gates per direction: the row blocks of W and R.
    pub fn gates(self) -> usize {
        match self {
            RecurrentCell::Lstm => 4,
            RecurrentCell::Gru => 3,
            RecurrentCell::Rnn => 1,
        }
    }

    /// The ONNX default activations of one direction.
    pub fn default_activations(self) -> &'static [RnnActivationKind] {
        use RnnActivationKind::{Sigmoid, Tanh};
        match self {
            RecurrentCell::Lstm => &[Sigmoid, Tanh, Tanh],
            RecurrentCell::Gru => &[Sigmoid, Tanh],
            RecurrentCell::Rnn => &[Tanh],
        }
    }

    /// Activation functions per direction.
    pub fn functions(self) -> usize {
        self.default_activations().len()
    }

    /// Outputs the op has: Y, Y_h, and for LSTM Y_c.
    pub fn max_outputs(self) -> usize {
        if self == RecurrentCell::Lstm {
            3
        } else {
            2
        }
    }
}

impl RnnDirection {
    pub const ALL: [(RnnDirection, &'static str); 3] = [
        (RnnDirection::Forward, "forward"),
        (RnnDirection::Reverse, "reverse"),
        (RnnDirection::Bidirectional, "bidirectional"),
    ];

    pub fn name(self) -> &'static str {
        RnnDirection::ALL
            .iter()
            .find(|(d, _)| *d == self)
            .map_or("forward", |(_, n)| n)
    }

    pub fn from_name(name: &str) -> Option<RnnDirection> {
        RnnDirection::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(d, _)| *d)
    }

    pub fn count(self) -> usize {
        if self == RnnDirection::Bidirectional {
            2
        } else {
            1
        }
    }
}

impl RnnActivationKind {
    /// Each function's ONNX name and its default alpha and beta (None: it takes none).
    /// The defaults are the standalone ops' (LeakyRelu 0.01, HardSigmoid 0.2 and 0.5, …),
    /// as the spec says, and onnxruntime's.
    pub const ALL: [(RnnActivationKind, &'static str, Option<f32>, Option<f32>); 11] = [
        (RnnActivationKind::Relu, "Relu", None, None),
        (RnnActivationKind::Tanh, "Tanh", None, None),
        (RnnActivationKind::Sigmoid, "Sigmoid", None, None),
        (RnnActivationKind::Affine, "Affine", Some(1.0), Some(0.0)),
        (RnnActivationKind::LeakyRelu, "LeakyRelu", Some(0.01), None),
        (
            RnnActivationKind::ThresholdedRelu,
            "ThresholdedRelu",
            Some(1.0),
            None,
        ),
        (
            RnnActivationKind::ScaledTanh,
            "ScaledTanh",
            Some(1.0),
            Some(1.0),
        ),
        (
            RnnActivationKind::HardSigmoid,
            "HardSigmoid",
            Some(0.2),
            Some(0.5),
        ),
        (RnnActivationKind::Elu, "Elu", Some(1.0), None),
        (RnnActivationKind::Softsign, "Softsign", None, None),
        (RnnActivationKind::Softplus, "Softplus", None, None),
    ];

    fn row(self) -> (RnnActivationKind, &'static str, Option<f32>, Option<f32>) {
        let found = RnnActivationKind::ALL.iter().find(|r| r.0 == self);
        // ALL has a row for every variant.
        found.copied().unwrap_or((self, "Tanh", None, None))
    }

    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// The function named `name`, compared without case as onnxruntime does.
    pub fn from_name(name: &str) -> Option<RnnActivationKind> {
        RnnActivationKind::ALL
            .iter()
            .find(|r| r.1.eq_ignore_ascii_case(name))
            .map(|r| r.0)
    }

    /// The default alpha, if the function takes one.
    pub fn default_alpha(self) -> Option<f32> {
        self.row().2
    }

    /// The default beta, if the function takes one.
    pub fn default_beta(self) -> Option<f32> {
        self.row().3
    }
}

impl RnnActivation {
    /// `kind` with its default alpha and beta.
    pub fn new(kind: RnnActivationKind) -> Self {
        RnnActivation {
            kind,
            alpha: kind.default_alpha().unwrap_or(0.0),
            beta: kind.default_beta().unwrap_or(0.0),
        }
    }
}

impl Recurrent {
    /// The op with every attribute at its ONNX default.
    pub fn new(cell: RecurrentCell, direction: RnnDirection) -> Self {
        Recurrent {
            cell,
            hidden_size: None,
            direction,
            activations: Recurrent::default_activations(cell, direction),
            clip: None,
            batch_major: false,
            input_forget: false,
            linear_before_reset: false,
        }
    }

    /// The default activations of every direction.
    pub fn default_activations(cell: RecurrentCell, direction: RnnDirection) -> Vec<RnnActivation> {
        (0..direction.count())
            .flat_map(|_| cell.default_activations().iter())
            .map(|k| RnnActivation::new(*k))
            .collect()
    }
}

/// How NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss reduce the per-element loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LossReduction {
    None,
    Sum,
    /// The weighted mean: the sum divided by the sum of the weights applied.
    #[default]
    Mean,
}

impl LossReduction {
    pub const ALL: [(LossReduction, &'static str); 3] = [
        (LossReduction::None, "none"),
        (LossReduction::Sum, "sum"),
        (LossReduction::Mean, "mean"),
    ];

    pub fn name(self) -> &'static str {
        LossReduction::ALL
            .iter()
            .find(|(r, _)| *r == self)
            .map_or("mean", |(_, n)| n)
    }

    pub fn from_name(name: &str) -> Option<LossReduction> {
        LossReduction::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(r, _)| *r)
    }
}

/// How ScatterElements and ScatterND combine an update with the element it lands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ScatterReduction {
    /// Replace.
    #[default]
    None,
    Add,
    Mul,
    Max,
    Min,
}

impl ScatterReduction {
    pub const ALL: [(ScatterReduction, &'static str); 5] = [
        (ScatterReduction::None, "none"),
        (ScatterReduction::Add, "add"),
        (ScatterReduction::Mul, "mul"),
        (ScatterReduction::Max, "max"),
        (ScatterReduction::Min, "min"),
    ];

    pub fn name(self) -> &'static str {
        ScatterReduction::ALL
            .iter()
            .find(|(r, _)| *r == self)
            .map_or("none", |(_, n)| n)
    }

    pub fn from_name(name: &str) -> Option<ScatterReduction> {
        ScatterReduction::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(r, _)| *r)
    }
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

/// ConvTranspose attributes: Conv's window attributes (W's layout is (C, M/group, kernel…)
/// here) plus the two that size the output.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ConvTranspose {
    pub conv: Conv,
    /// Per spatial axis, cells added at the end of the full output; empty means zeros.
    pub output_padding: Vec<usize>,
    /// The output's spatial extents (or, as onnxruntime also accepts, its whole shape);
    /// when given, the pads are derived from it. Empty means computed from the pads.
    pub output_shape: Vec<usize>,
}

/// One spatial axis of a transposed convolution, fully resolved: input position `i` and
/// kernel tap `k` write output position `i·stride + k·dilation − pad_begin`, when that lies
/// in `0..output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransposedAxis {
    pub input: usize,
    pub kernel: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_begin: usize,
    pub output: usize,
}

impl TransposedAxis {
    /// The output position that input `i`'s tap `k` writes, or None when it is cropped.
    pub fn output_coord(&self, i: usize, k: usize) -> Option<usize> {
        (i * self.stride + k * self.dilation)
            .checked_sub(self.pad_begin)
            .filter(|&o| o < self.output)
    }
}

/// MaxUnpool's default output extents: those of the ConvTranspose with its window (no
/// dilation, no output padding), `stride·(in − 1) + kernel − pads`.
pub fn max_unpool_extents(
    input: &[usize],
    kernel_shape: &[usize],
    pads: &[usize],
    strides: &[usize],
) -> Result<Vec<usize>, crate::OpError> {
    let window = ConvTranspose {
        conv: Conv {
            pads: pads.to_vec(),
            strides: strides.to_vec(),
            ..Conv::default()
        },
        ..ConvTranspose::default()
    };
    Ok(window
        .plan(input, kernel_shape)?
        .iter()
        .map(|a| a.output)
        .collect())
}

impl ConvTranspose {
    /// The geometry of every spatial axis of an input with spatial extents `input` and a
    /// kernel of extents `kernel`; the one rule for shape inference and the reference.
    ///
    /// The full output of an axis is `stride·(in − 1) + output_padding + (kernel − 1)·dilation
    /// + 1`. Explicit pads crop it; `output_shape`, or SAME auto-padding (output `in·stride`),
    /// crop it by the difference, split as onnxruntime does: SAME_UPPER puts the odd cell at
    /// the end, SAME_LOWER and an `output_shape` without auto-padding at the beginning. A
    /// negative difference crops nothing (onnxruntime clamps it to 0): SAME then yields the
    /// full output, and a larger `output_shape` ends in zeros.
    pub fn plan(
        &self,
        input: &[usize],
        kernel: &[usize],
    ) -> Result<Vec<TransposedAxis>, crate::OpError> {
        use crate::OpError;
        let n = input.len();
        let per_axis = |name: &'static str, values: &[usize], default: usize, min: usize| {
            if values.is_empty() {
                return Ok(vec![default; n]);
            }
            if values.len() != n {
                return Err(OpError::Attribute {
                    name,
                    detail: format!(
                        "has {} values {values:?}, expected one per spatial axis ({n})",
                        values.len()
                    ),
                });
            }
            if values.iter().any(|&v| v < min) {
                return Err(OpError::Attribute {
                    name,
                    detail: format!("values {values:?} must all be at least {min}"),
                });
            }
            Ok(values.to_vec())
        };
        if kernel.len() != n {
            return Err(OpError::Shape(format!(
                "ConvTranspose: the kernel has {} spatial extents {kernel:?} but the input has \
                 {n} {input:?}",
                kernel.len()
            )));
        }
        let kernel = per_axis("kernel_shape", kernel, 1, 1)?;
        let strides = per_axis("strides", &self.conv.strides, 1, 1)?;
        let dilations = per_axis("dilations", &self.conv.dilations, 1, 1)?;
        let output_padding = per_axis("output_padding", &self.output_padding, 0, 0)?;
        let output_shape = match self.output_shape.len() {
            0 => None,
            len if len == n => Some(&self.output_shape[..]),
            // onnxruntime also takes the whole output shape (N, M, spatial…).
            len if len == n + 2 => Some(&self.output_shape[2..]),
            len => {
                return Err(OpError::Attribute {
                    name: "output_shape",
                    detail: format!(
                        "has {len} values {:?}, expected one per spatial axis ({n})",
                        self.output_shape
                    ),
                })
            }
        };
        let pads = match self.conv.pads.len() {
            0 => vec![0; 2 * n],
            len if len == 2 * n => self.conv.pads.clone(),
            len => {
                return Err(OpError::Attribute {
                    name: "pads",
                    detail: format!(
                        "has {len} values {:?}, expected {} (begin and end for each of {n} \
                         spatial axes)",
                        self.conv.pads,
                        2 * n
                    ),
                })
            }
        };
        let mut axes = Vec::with_capacity(n);
        for i in 0..n {
            let (in_len, k, s, d) = (input[i], kernel[i], strides[i], dilations[i]);
            let too_big = || {
                OpError::Shape(format!(
                    "ConvTranspose spatial axis {i}: input {in_len}, kernel {k}, stride {s}, \
                     dilation {d} and output_padding {} overflow",
                    output_padding[i]
                ))
            };
            if in_len == 0 {
                return Err(OpError::Shape(format!(
                    "ConvTranspose: spatial axis {i} of the input has extent 0; only the batch \
                     axis may be empty"
                )));
            }
            let full = (in_len - 1)
                .checked_mul(s)
                .and_then(|v| v.checked_add(output_padding[i]))
                .and_then(|v| (k - 1).checked_mul(d).and_then(|t| v.checked_add(t + 1)))
                .ok_or_else(too_big)?;
            // Cropping `total` cells, the odd one at the end (true) or the beginning.
            let split = |total: usize, odd_at_end: bool| {
                if odd_at_end {
                    total / 2
                } else {
                    total - total / 2
                }
            };
            let (pad_begin, output) = if let Some(shape) = output_shape {
                let total = full.saturating_sub(shape[i]);
                let begin = split(total, self.conv.auto_pad == AutoPad::SameUpper);
                (begin, shape[i])
            } else {
                match self.conv.auto_pad {
                    AutoPad::SameUpper | AutoPad::SameLower => {
                        let same = in_len.checked_mul(s).ok_or_else(too_big)?;
                        let total = full.saturating_sub(same);
                        let begin = split(total, self.conv.auto_pad == AutoPad::SameUpper);
                        (begin, full - total)
                    }
                    AutoPad::Valid => (0, full),
                    AutoPad::NotSet => {
                        let (pb, pe) = (pads[i], pads[i + n]);
                        let output = pb
                            .checked_add(pe)
                            .and_then(|p| full.checked_sub(p))
                            .ok_or_else(|| {
                                OpError::Shape(format!(
                                    "ConvTranspose spatial axis {i}: pads {pb}+{pe} crop more \
                                     than the full output extent {full}"
                                ))
                            })?;
                        (pb, output)
                    }
                }
            };
            // Output coordinates are computed as i·stride + k·dilation; `full` bounds them.
            axes.push(TransposedAxis {
                input: in_len,
                kernel: k,
                stride: s,
                dilation: d,
                pad_begin,
                output,
            });
        }
        Ok(axes)
    }
}

/// Col2Im's geometry: for each of the r spatial axes of an image of extents `image`, the
/// sliding blocks of extents `block` whose columns the input holds, as the transposed
/// window that scatters them back (block position `i` and tap `k` write image position
/// `i·stride + k·dilation − pad_begin`). The blocks along an axis are those of the forward
/// sliding window, `(image + pads − dilation·(block − 1) − 1) / stride + 1`; the one rule
/// for shape inference and the reference.
pub fn col2im_plan(
    image: &[usize],
    block: &[usize],
    dilations: &[usize],
    pads: &[usize],
    strides: &[usize],
) -> Result<Vec<TransposedAxis>, crate::OpError> {
    use crate::OpError;
    let n = image.len();
    if block.len() != n || n == 0 {
        return Err(OpError::Shape(format!(
            "Col2Im: image_shape {image:?} and block_shape {block:?} must list the same number \
             (at least one) of spatial extents"
        )));
    }
    let per_axis = |name: &'static str, values: &[usize]| {
        if values.is_empty() {
            return Ok(vec![1; n]);
        }
        if values.len() != n {
            return Err(OpError::Attribute {
                name,
                detail: format!(
                    "has {} values {values:?}, expected one per spatial axis ({n})",
                    values.len()
                ),
            });
        }
        if values.contains(&0) {
            return Err(OpError::Attribute {
                name,
                detail: format!("values {values:?} must all be at least 1"),
            });
        }
        Ok(values.to_vec())
    };
    let strides = per_axis("strides", strides)?;
    let dilations = per_axis("dilations", dilations)?;
    let pads = match pads.len() {
        0 => vec![0; 2 * n],
        len if len == 2 * n => pads.to_vec(),
        len => {
            return Err(OpError::Attribute {
                name: "pads",
                detail: format!(
                    "has {len} values {pads:?}, expected {} (begin and end for each of {n} \
                     spatial axes)",
                    2 * n
                ),
            })
        }
    };
    let mut axes = Vec::with_capacity(n);
    for i in 0..n {
        let (len, k, s, d) = (image[i], block[i], strides[i], dilations[i]);
        let (pb, pe) = (pads[i], pads[i + n]);
        if k == 0 {
            return Err(OpError::Shape(format!(
                "Col2Im: block_shape {block:?} has an extent of 0 on axis {i}"
            )));
        }
        let too_big = || {
            OpError::Shape(format!(
                "Col2Im spatial axis {i}: image extent {len}, block {k}, dilation {d}, stride \
                 {s} and pads {pb}+{pe} overflow"
            ))
        };
        let dilated = (k - 1)
            .checked_mul(d)
            .and_then(|v| v.checked_add(1))
            .ok_or_else(too_big)?;
        let padded = len
            .checked_add(pb)
            .and_then(|v| v.checked_add(pe))
            .ok_or_else(too_big)?;
        // Block positions are addressed up to about padded + dilated + stride.
        padded
            .checked_add(dilated)
            .and_then(|v| v.checked_add(s))
            .ok_or_else(too_big)?;
        if len == 0 || padded < dilated {
            return Err(OpError::Shape(format!(
                "Col2Im spatial axis {i}: the image extent {len} plus pads {pb}+{pe} holds no \
                 block of dilated extent {dilated} (block {k}, dilation {d})"
            )));
        }
        axes.push(TransposedAxis {
            input: (padded - dilated) / s + 1,
            kernel: k,
            stride: s,
            dilation: d,
            pad_begin: pb,
            output: len,
        });
    }
    Ok(axes)
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
    /// MaxPool only (`storage_order` = 1): its Indices output numbers each plane's cells
    /// column-major (the first spatial axis fastest) instead of row-major.
    pub column_major_indices: bool,
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

/// Resize attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct Resize {
    pub mode: ResizeMode,
    pub coordinate_transformation_mode: CoordinateTransform,
    pub nearest_mode: NearestMode,
    pub extrapolation_value: f32,
    pub cubic_coeff_a: f32,
    pub exclude_outside: bool,
    /// The axes `scales` or `sizes` are given for (opset 18); None: every axis.
    pub axes: Option<Vec<i64>>,
    /// How `sizes` is honoured over `axes` (opset 18).
    pub keep_aspect_ratio: AspectRatioPolicy,
    /// Linear and cubic downsampling widen the filter by 1 / scale (opset 18); nearest
    /// ignores it.
    pub antialias: bool,
}

/// Resize's `keep_aspect_ratio_policy`: `sizes` as given, or one scale for every resized
/// axis, the largest that fits inside `sizes` (not larger) or the smallest that covers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AspectRatioPolicy {
    #[default]
    Stretch,
    NotLarger,
    NotSmaller,
}

impl Resize {
    /// The output extent and the f32 coordinate scale of every axis of an input of extents
    /// `input`, from a `scales` (f32) or `sizes` target given for [`Resize::axes`] (every
    /// axis when None). One rule for shape inference and every executor: extents are
    /// `floor(in · scale)` in f32, a `sizes` target maps with `out / in` in f32, and a
    /// keep-aspect policy uses one scale, rounding `scale · in` half up, as ONNX says.
    pub fn plan(
        &self,
        input: &[usize],
        scales: Option<&[f32]>,
        sizes: Option<&[i64]>,
    ) -> Result<Vec<(usize, f32)>, crate::OpError> {
        use crate::OpError;
        let rank = input.len();
        let axes: Vec<usize> = match &self.axes {
            None => (0..rank).collect(),
            Some(axes) => crate::shape::normalize_axes(axes, rank)?,
        };
        let given = scales.map_or_else(|| sizes.map_or(0, <[i64]>::len), <[f32]>::len);
        if given != axes.len() {
            return Err(OpError::Shape(format!(
                "Resize: {} has {given} values for {} axes of X {} (rank {rank})",
                if scales.is_some() { "scales" } else { "sizes" },
                axes.len(),
                crate::shape::Shape::from(input)
            )));
        }
        let mut plan: Vec<(usize, f32)> = input.iter().map(|&d| (d, 1.0)).collect();
        if let Some(scales) = scales {
            for (&axis, &s) in axes.iter().zip(scales) {
                if !(s.is_finite() && s > 0.0) {
                    return Err(OpError::Shape(format!(
                        "Resize: scales {scales:?} must all be finite and greater than 0"
                    )));
                }
                plan[axis] = ((input[axis] as f32 * s).floor() as usize, s);
            }
            return Ok(plan);
        }
        let sizes = sizes.unwrap_or(&[]);
        let mut wanted = Vec::with_capacity(axes.len());
        for (&axis, &s) in axes.iter().zip(sizes) {
            let out = usize::try_from(s).map_err(|_| {
                OpError::Shape(format!("Resize: sizes {sizes:?} must not be negative"))
            })?;
            if input[axis] == 0 && out > 0 {
                return Err(OpError::Shape(format!(
                    "Resize: axis {axis} of the input is empty, which cannot grow to sizes \
                     {sizes:?}"
                )));
            }
            wanted.push((axis, out));
        }
        let ratio = |axis: usize, out: usize| out as f32 / input[axis] as f32;
        let one_scale = match self.keep_aspect_ratio {
            AspectRatioPolicy::Stretch => None,
            AspectRatioPolicy::NotLarger => {
                wanted.iter().map(|&(a, o)| ratio(a, o)).reduce(f32::min)
            }
            AspectRatioPolicy::NotSmaller => {
                wanted.iter().map(|&(a, o)| ratio(a, o)).reduce(f32::max)
            }
        };
        for &(axis, out) in &wanted {
            plan[axis] = match one_scale {
                None => (out, ratio(axis, out)),
                Some(s) => ((s * input[axis] as f32 + 0.5).floor() as usize, s),
            };
        }
        Ok(plan)
    }
}

impl Resize {
    /// Each axis's region of interest (start, end), in normalised input coordinates, from
    /// the values of the `roi` operand: a start for each of [`Resize::axes`] (every axis
    /// when None), then an end for each. An axis not listed is whole
    /// ([`crate::resize::WHOLE_AXIS`]), and so is every axis when `roi` is empty: the spec
    /// makes roi optional, onnxruntime then reads whole axes and the ONNX reference
    /// implementation refuses the node; Concord follows onnxruntime. Only
    /// tf_crop_and_resize reads the result.
    pub fn roi_per_axis(
        &self,
        rank: usize,
        roi: &[f32],
    ) -> Result<Vec<(f32, f32)>, crate::OpError> {
        let mut out = vec![crate::resize::WHOLE_AXIS; rank];
        if roi.is_empty() {
            return Ok(out);
        }
        let axes: Vec<usize> = match &self.axes {
            None => (0..rank).collect(),
            Some(axes) => crate::shape::normalize_axes(axes, rank)?,
        };
        if roi.len() != 2 * axes.len() {
            return Err(crate::OpError::Shape(format!(
                "Resize: roi has {} values; it needs a start and an end for each of the {} \
                 resized axes, {}",
                roi.len(),
                axes.len(),
                2 * axes.len()
            )));
        }
        for (k, &axis) in axes.iter().enumerate() {
            out[axis] = (roi[k], roi[axes.len() + k]);
        }
        Ok(out)
    }
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
            axes: None,
            keep_aspect_ratio: AspectRatioPolicy::Stretch,
            antialias: false,
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
    /// the precision is part of what every executor must agree on. `roi` is the axis's
    /// (start, end) in normalised input coordinates, read by tf_crop_and_resize only (the
    /// whole axis is (0, 1)); its arithmetic is onnxruntime's, operation for operation.
    pub fn original(self, x: f32, scale: f32, out_len: f32, in_len: f32, roi: (f32, f32)) -> f32 {
        match self {
            CoordinateTransform::TfCropAndResize => {
                let (start, end) = roi;
                if out_len > 1.0 {
                    start * (in_len - 1.0) + (x * (end - start) * (in_len - 1.0)) / (out_len - 1.0)
                } else {
                    0.5 * (start + end) * (in_len - 1.0)
                }
            }
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
            CoordinateTransform::Asymmetric => x / scale,
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
/// two, `alpha` and `beta` for most) are the kernels' two float arguments.
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
    LeakyRelu {
        alpha: f32,
    },
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    Reciprocal,
    Log,
    Floor,
    Ceil,
    /// Round half to even.
    Round,
    Sign,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Softplus,
    Softsign,
    Elu {
        alpha: f32,
    },
    Selu {
        alpha: f32,
        gamma: f32,
    },
    Celu {
        alpha: f32,
    },
    ThresholdedRelu {
        alpha: f32,
    },
    Shrink {
        bias: f32,
        lambd: f32,
    },
    Mish,
    /// x · sigmoid(alpha · x) (opset 24).
    Swish {
        alpha: f32,
    },
    /// `tanh`: the tanh approximation (`approximate = "tanh"`), else the exact erf form.
    Gelu {
        tanh: bool,
    },
    /// Produces bool.
    IsNaN,
    /// Produces bool.
    IsInf {
        detect_negative: bool,
        detect_positive: bool,
    },
    /// bool to bool.
    Not,
    BitwiseNot,
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
    /// Produces bool.
    Less,
    /// Produces bool.
    Greater,
    /// Produces bool.
    LessOrEqual,
    /// Produces bool.
    GreaterOrEqual,
    /// bool operands.
    And,
    Or,
    Xor,
    /// Integer operands.
    BitwiseAnd,
    BitwiseOr,
    BitwiseXor,
    /// Integer operands (signed from opset 28); `left` shifts left (`direction = "LEFT"`).
    BitShift {
        left: bool,
    },
    /// Inputs X, slope: `x < 0 ? slope * x : x`.
    PRelu,
}

/// The variadic elementwise ops: one or more broadcasting inputs of one dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variadic {
    Max,
    Min,
    Sum,
    Mean,
}

/// The reductions over a set of axes ([`Op::Reduce`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Mean,
    Sum,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

impl ReduceKind {
    /// Every reduction, with its ONNX op type.
    pub const ALL: [(ReduceKind, &'static str); 10] = [
        (ReduceKind::Mean, "ReduceMean"),
        (ReduceKind::Sum, "ReduceSum"),
        (ReduceKind::Max, "ReduceMax"),
        (ReduceKind::Min, "ReduceMin"),
        (ReduceKind::Prod, "ReduceProd"),
        (ReduceKind::L1, "ReduceL1"),
        (ReduceKind::L2, "ReduceL2"),
        (ReduceKind::LogSum, "ReduceLogSum"),
        (ReduceKind::LogSumExp, "ReduceLogSumExp"),
        (ReduceKind::SumSquare, "ReduceSumSquare"),
    ];

    pub fn name(self) -> &'static str {
        ReduceKind::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("ReduceMean", |(_, n)| n)
    }

    pub fn from_name(name: &str) -> Option<ReduceKind> {
        ReduceKind::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(k, _)| *k)
    }

    /// The first opset whose form takes `axes` as an input (ReduceSum 13, the rest 18).
    pub fn axes_input_since(self) -> i64 {
        if self == ReduceKind::Sum {
            13
        } else {
            18
        }
    }
}

impl Variadic {
    pub const ALL: [(Variadic, &'static str); 4] = [
        (Variadic::Max, "Max"),
        (Variadic::Min, "Min"),
        (Variadic::Sum, "Sum"),
        (Variadic::Mean, "Mean"),
    ];

    pub fn name(self) -> &'static str {
        Variadic::ALL
            .iter()
            .find(|(v, _)| *v == self)
            .map_or("Max", |(_, n)| n)
    }

    pub fn from_name(name: &str) -> Option<Variadic> {
        Variadic::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(v, _)| *v)
    }

    /// Max and Min take every numeric type; Sum and Mean the floats.
    pub fn accepts(self) -> Accepts {
        match self {
            Variadic::Max | Variadic::Min => Accepts::Numeric,
            Variadic::Sum | Variadic::Mean => Accepts::Float,
        }
    }
}

/// Which element types an elementwise op accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepts {
    /// f64, f32, f16, bf16.
    Float,
    /// The floats and the signed integers.
    Signed,
    /// Every type but bool.
    Numeric,
    /// The integers (signed and unsigned).
    Integer,
    /// The unsigned integers.
    Unsigned,
    /// bool only.
    Bool,
    /// Every type, bool included.
    Any,
}

impl Accepts {
    pub fn allows(self, dtype: DType) -> bool {
        match self {
            Accepts::Float => dtype.is_float(),
            Accepts::Signed => dtype.is_float() || dtype.is_signed_integer(),
            Accepts::Numeric => dtype != DType::Bool,
            Accepts::Integer => dtype.is_integer(),
            Accepts::Unsigned => dtype.is_integer() && !dtype.is_signed_integer(),
            Accepts::Bool => dtype == DType::Bool,
            Accepts::Any => true,
        }
    }

    /// The accepted dtypes, in [`DType::ALL`] order.
    pub fn dtypes(self) -> Vec<DType> {
        DType::ALL.into_iter().filter(|&d| self.allows(d)).collect()
    }

    /// The accepted dtypes as words for an error message.
    pub fn describe(self) -> &'static str {
        match self {
            Accepts::Float => "a float type (f64, f32, f16, bf16)",
            Accepts::Signed => "a float or signed integer type",
            Accepts::Numeric => "a numeric type (not bool)",
            Accepts::Integer => "an integer type",
            Accepts::Unsigned => "an unsigned integer type",
            Accepts::Bool => "bool",
            Accepts::Any => "any type",
        }
    }
}

/// What kind of computation an op is. Code that does not care about one op (routing,
/// inference, folding, a backend's dispatch) matches the family, and the family's own file
/// matches its ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Conv, Gemm, MatMul, ConvTranspose: multiply-accumulate over an inner dimension; and
    /// Col2Im, ConvTranspose's scatter without weights.
    Linear,
    /// [`Op::Unary`]: one input, same shape out.
    Unary,
    /// [`Op::Binary`]: two broadcasting inputs.
    Binary,
    /// Other elementwise ops with several operands: Clip, Where, Max/Min/Sum/Mean.
    Select,
    /// Softmax, LogSoftmax, Hardmax, LayerNormalization, BatchNormalization, and the losses
    /// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
    Normalization,
    /// MaxPool, AveragePool, GlobalAveragePool, LpPool, MaxUnpool.
    Pool,
    /// The Reduce* ops, ArgMax, ArgMin.
    Reduce,
    /// Shape, layout and dtype changes that compute nothing: Concat … Expand.
    Movement,
    /// Ops that compute positions or read and write by index: ConstantOfShape, Range, Tile,
    /// CumSum, the Gather/Scatter variants, OneHot, Trilu, NonZero, Size, DepthToSpace,
    /// SpaceToDepth, EyeLike, TopK, CastLike, Compress, and the data-dependent selections
    /// NonMaxSuppression and Unique. TensorScatter (a cache update by index) and
    /// TfIdfVectorizer (n-gram counts written to indexed columns) belong here too.
    Indexing,
    /// Resize.
    Resize,
    /// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
    /// QLinearMatMul, ConvInteger, QLinearConv: integer (quantised) arithmetic.
    Quantization,
    /// LSTM, GRU, RNN: a state carried through the steps of a sequence.
    Recurrent,
    /// Einsum and Det: general tensor contractions and matrix functions, computed by the
    /// reference only.
    LinearAlgebra,
    /// If, Loop, Scan: nodes that run subgraphs (the reference executor only).
    ControlFlow,
    /// GridSample, AffineGrid, RoiAlign, MaxRoiPool, DeformConv: X read at positions
    /// computed from another operand (a grid, regions of interest, per-tap offsets), by
    /// the reference executor only.
    Sampling,
    /// HannWindow, HammingWindow, BlackmanWindow, DFT, STFT, MelWeightMatrix: signal
    /// processing, computed by the reference only.
    Signal,
    /// RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike, Multinomial,
    /// Bernoulli: values drawn from a seeded generator, computed by the reference only.
    /// Their values are reproducible ([`RandomSeed`]) but no other runtime's, so conformance
    /// checks them by their statistics, shape and dtype rather than against recorded values.
    Random,
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
    /// The input types ONNX defines it on.
    pub accepts: Accepts,
    /// Whether the output is bool (IsNaN, IsInf) rather than the input's type.
    pub bool_output: bool,
    /// Whether the device executors (OpenCL, CUDA) have a kernel for it; the others run on
    /// the reference, and device executors decline them by this flag.
    pub device: bool,
    /// Its attributes, in kernel-argument order (alpha, beta). Int attributes (IsInf's
    /// detect flags) travel as 0.0 / 1.0; Gelu's `approximate` string as 0 (none) / 1 (tanh).
    pub params: &'static [AttrSpec],
}

impl UnaryDef {
    /// Whether it is defined on signed integers too (device kernels exist for i64).
    pub fn integer(&self) -> bool {
        self.accepts.allows(DType::I64)
    }
}

/// One elementwise binary op: its schema and what its kernels need.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BinaryDef {
    pub op: Binary,
    pub name: &'static str,
    pub since: i64,
    /// Kernel-facing names: kernels `binary_<kernel>`, codes `B_<KERNEL>`. Mod has two
    /// (Python-sign `mod`, C-sign `fmod`), BitShift two (`shl`, `shr`).
    pub kernels: &'static [&'static str],
    pub attributes: &'static [AttrSpec],
    /// The types of input A ONNX defines it on (B has A's type, except Pow's exponent).
    pub accepts: Accepts,
    /// Whether the output is bool (comparisons, logical ops).
    pub bool_output: bool,
    /// Whether the device executors have a kernel for it (see [`UnaryDef::device`]).
    pub device: bool,
}

const fn attr(name: &'static str, default: AttrDefault) -> AttrSpec {
    AttrSpec { name, default }
}

const fn unary(
    op: Unary,
    name: &'static str,
    kernel: &'static str,
    accepts: Accepts,
    params: &'static [AttrSpec],
) -> UnaryDef {
    UnaryDef {
        op,
        name,
        since: 1,
        kernel,
        accepts,
        bool_output: false,
        device: false,
        params,
    }
}

/// A row whose device kernels exist.
const fn on_device(d: UnaryDef) -> UnaryDef {
    UnaryDef { device: true, ..d }
}

const FLOAT: Accepts = Accepts::Float;

/// Every unary op, in kernel-code order (code = position + 1; 0 means "no activation").
/// Rows with device kernels come first so that their codes never move.
pub const UNARY_OPS: &[UnaryDef] = &[
    on_device(unary(Unary::Sqrt, "Sqrt", "sqrt", FLOAT, &[])),
    on_device(unary(Unary::Exp, "Exp", "exp", FLOAT, &[])),
    on_device(unary(Unary::Neg, "Neg", "neg", Accepts::Signed, &[])),
    on_device(unary(Unary::Abs, "Abs", "abs", Accepts::Numeric, &[])),
    on_device(UnaryDef {
        since: 9,
        ..unary(Unary::Erf, "Erf", "erf", FLOAT, &[])
    }),
    on_device(unary(Unary::Relu, "Relu", "relu", Accepts::Signed, &[])),
    on_device(unary(Unary::Sigmoid, "Sigmoid", "sigmoid", FLOAT, &[])),
    on_device(unary(Unary::Tanh, "Tanh", "tanh", FLOAT, &[])),
    on_device(UnaryDef {
        since: 14,
        ..unary(Unary::HardSwish, "HardSwish", "hard_swish", FLOAT, &[])
    }),
    on_device(unary(
        Unary::LeakyRelu { alpha: 0.01 },
        "LeakyRelu",
        "leaky_relu",
        FLOAT,
        &[attr("alpha", AttrDefault::Float(0.01))],
    )),
    on_device(unary(
        Unary::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        "HardSigmoid",
        "hard_sigmoid",
        FLOAT,
        &[
            attr("alpha", AttrDefault::Float(0.2)),
            attr("beta", AttrDefault::Float(0.5)),
        ],
    )),
    on_device(unary(
        Unary::Reciprocal,
        "Reciprocal",
        "reciprocal",
        FLOAT,
        &[],
    )),
    unary(Unary::Log, "Log", "log", FLOAT, &[]),
    unary(Unary::Floor, "Floor", "floor", FLOAT, &[]),
    unary(Unary::Ceil, "Ceil", "ceil", FLOAT, &[]),
    unary(Unary::Round, "Round", "round", FLOAT, &[]),
    unary(Unary::Sign, "Sign", "sign", Accepts::Numeric, &[]),
    unary(Unary::Sin, "Sin", "sin", FLOAT, &[]),
    unary(Unary::Cos, "Cos", "cos", FLOAT, &[]),
    unary(Unary::Tan, "Tan", "tan", FLOAT, &[]),
    unary(Unary::Asin, "Asin", "asin", FLOAT, &[]),
    unary(Unary::Acos, "Acos", "acos", FLOAT, &[]),
    unary(Unary::Atan, "Atan", "atan", FLOAT, &[]),
    unary(Unary::Sinh, "Sinh", "sinh", FLOAT, &[]),
    unary(Unary::Cosh, "Cosh", "cosh", FLOAT, &[]),
    unary(Unary::Asinh, "Asinh", "asinh", FLOAT, &[]),
    unary(Unary::Acosh, "Acosh", "acosh", FLOAT, &[]),
    unary(Unary::Atanh, "Atanh", "atanh", FLOAT, &[]),
    unary(Unary::Softplus, "Softplus", "softplus", FLOAT, &[]),
    unary(Unary::Softsign, "Softsign", "softsign", FLOAT, &[]),
    unary(
        Unary::Elu { alpha: 1.0 },
        "Elu",
        "elu",
        FLOAT,
        &[attr("alpha", AttrDefault::Float(1.0))],
    ),
    unary(
        Unary::Selu {
            alpha: SELU_ALPHA,
            gamma: SELU_GAMMA,
        },
        "Selu",
        "selu",
        FLOAT,
        &[
            attr("alpha", AttrDefault::Float(SELU_ALPHA)),
            attr("gamma", AttrDefault::Float(SELU_GAMMA)),
        ],
    ),
    unary(
        Unary::Celu { alpha: 1.0 },
        "Celu",
        "celu",
        FLOAT,
        &[attr("alpha", AttrDefault::Float(1.0))],
    ),
    unary(
        Unary::ThresholdedRelu { alpha: 1.0 },
        "ThresholdedRelu",
        "thresholded_relu",
        FLOAT,
        &[attr("alpha", AttrDefault::Float(1.0))],
    ),
    unary(
        Unary::Shrink {
            bias: 0.0,
            lambd: 0.5,
        },
        "Shrink",
        "shrink",
        Accepts::Numeric,
        &[
            attr("bias", AttrDefault::Float(0.0)),
            attr("lambd", AttrDefault::Float(0.5)),
        ],
    ),
    unary(Unary::Mish, "Mish", "mish", FLOAT, &[]),
    UnaryDef {
        since: 20,
        ..unary(
            Unary::Gelu { tanh: false },
            "Gelu",
            "gelu",
            FLOAT,
            &[attr("approximate", AttrDefault::Str("none"))],
        )
    },
    UnaryDef {
        bool_output: true,
        ..unary(Unary::IsNaN, "IsNaN", "is_nan", FLOAT, &[])
    },
    UnaryDef {
        bool_output: true,
        ..unary(
            Unary::IsInf {
                detect_negative: true,
                detect_positive: true,
            },
            "IsInf",
            "is_inf",
            FLOAT,
            &[
                attr("detect_negative", AttrDefault::Int(1)),
                attr("detect_positive", AttrDefault::Int(1)),
            ],
        )
    },
    unary(Unary::Not, "Not", "not", Accepts::Bool, &[]),
    UnaryDef {
        since: 24,
        ..unary(
            Unary::Swish { alpha: 1.0 },
            "Swish",
            "swish",
            FLOAT,
            &[attr("alpha", AttrDefault::Float(1.0))],
        )
    },
    UnaryDef {
        since: 18,
        ..unary(
            Unary::BitwiseNot,
            "BitwiseNot",
            "bitwise_not",
            Accepts::Integer,
            &[],
        )
    },
];

/// Selu's default alpha and gamma, as the ONNX schema writes them (f32).
pub const SELU_ALPHA: f32 = 1.673_263_2;
pub const SELU_GAMMA: f32 = 1.050_701;

/// Every binary op, in kernel-code order; rows with device kernels first.
pub const BINARY_OPS: &[BinaryDef] = &[
    on_device_binary(binary(Binary::Add, "Add", &["add"], Accepts::Numeric)),
    on_device_binary(binary(Binary::Sub, "Sub", &["sub"], Accepts::Numeric)),
    on_device_binary(binary(Binary::Mul, "Mul", &["mul"], Accepts::Numeric)),
    on_device_binary(binary(Binary::Div, "Div", &["div"], Accepts::Numeric)),
    on_device_binary(binary(Binary::Pow, "Pow", &["pow"], Accepts::Numeric)),
    on_device_binary(BinaryDef {
        since: 10,
        attributes: &[attr("fmod", AttrDefault::Int(0))],
        ..binary(
            Binary::Mod { fmod: false },
            "Mod",
            &["mod", "fmod"],
            Accepts::Numeric,
        )
    }),
    on_device_binary(comparison(Binary::Equal, "Equal", &["equal"], Accepts::Any)),
    comparison(Binary::Less, "Less", &["less"], Accepts::Numeric),
    comparison(Binary::Greater, "Greater", &["greater"], Accepts::Numeric),
    BinaryDef {
        since: 12,
        ..comparison(
            Binary::LessOrEqual,
            "LessOrEqual",
            &["less_or_equal"],
            Accepts::Numeric,
        )
    },
    BinaryDef {
        since: 12,
        ..comparison(
            Binary::GreaterOrEqual,
            "GreaterOrEqual",
            &["greater_or_equal"],
            Accepts::Numeric,
        )
    },
    comparison(Binary::And, "And", &["and"], Accepts::Bool),
    comparison(Binary::Or, "Or", &["or"], Accepts::Bool),
    comparison(Binary::Xor, "Xor", &["xor"], Accepts::Bool),
    BinaryDef {
        since: 18,
        ..binary(
            Binary::BitwiseAnd,
            "BitwiseAnd",
            &["bitwise_and"],
            Accepts::Integer,
        )
    },
    BinaryDef {
        since: 18,
        ..binary(
            Binary::BitwiseOr,
            "BitwiseOr",
            &["bitwise_or"],
            Accepts::Integer,
        )
    },
    BinaryDef {
        since: 18,
        ..binary(
            Binary::BitwiseXor,
            "BitwiseXor",
            &["bitwise_xor"],
            Accepts::Integer,
        )
    },
    BinaryDef {
        since: 11,
        attributes: &[attr("direction", AttrDefault::Required)],
        ..binary(
            Binary::BitShift { left: true },
            "BitShift",
            &["shl", "shr"],
            // Opset 28 added the signed integer types; the reference computes them at every
            // opset (an older model that uses them broke its schema, not the arithmetic).
            Accepts::Integer,
        )
    },
    binary(Binary::PRelu, "PRelu", &["prelu"], Accepts::Signed),
];

const fn binary(
    op: Binary,
    name: &'static str,
    kernels: &'static [&'static str],
    accepts: Accepts,
) -> BinaryDef {
    BinaryDef {
        op,
        name,
        since: 1,
        kernels,
        attributes: &[],
        accepts,
        bool_output: false,
        device: false,
    }
}

/// A binary op whose output is bool.
const fn comparison(
    op: Binary,
    name: &'static str,
    kernels: &'static [&'static str],
    accepts: Accepts,
) -> BinaryDef {
    BinaryDef {
        bool_output: true,
        ..binary(op, name, kernels, accepts)
    }
}

const fn on_device_binary(d: BinaryDef) -> BinaryDef {
    BinaryDef { device: true, ..d }
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
const ARG_ATTRS: &[AttrSpec] = &[
    attr("axis", Int(0)),
    attr("keepdims", Int(1)),
    attr("select_last_index", Int(0)),
];
const LOSS_ATTRS: &[AttrSpec] = &[attr("ignore_index", Absent), attr("reduction", Str("mean"))];
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
        "LogSoftmax",
        1,
        Family::Normalization,
        &[attr("axis", Int(-1))],
    ),
    schema(
        "Hardmax",
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
    schema("GlobalMaxPool", 1, Family::Pool, &[]),
    schema(
        "LpPool",
        2,
        Family::Pool,
        &[
            attr("auto_pad", Str("NOTSET")),
            attr("ceil_mode", Int(0)),
            attr("dilations", Absent),
            attr("kernel_shape", Required),
            attr("p", Int(2)),
            attr("pads", Absent),
            attr("strides", Absent),
        ],
    ),
    schema("GlobalLpPool", 2, Family::Pool, &[attr("p", Int(2))]),
    schema(
        "InstanceNormalization",
        1,
        Family::Normalization,
        &[attr("epsilon", Float(1e-5))],
    ),
    schema(
        "GroupNormalization",
        18,
        Family::Normalization,
        &[
            attr("epsilon", Float(1e-5)),
            attr("num_groups", Required),
            attr("stash_type", Int(1)),
        ],
    ),
    schema(
        "RMSNormalization",
        23,
        Family::Normalization,
        &[
            attr("axis", Int(-1)),
            attr("epsilon", Float(1e-5)),
            attr("stash_type", Int(1)),
        ],
    ),
    schema(
        "LpNormalization",
        1,
        Family::Normalization,
        &[attr("axis", Int(-1)), attr("p", Int(2))],
    ),
    schema(
        "MeanVarianceNormalization",
        9,
        Family::Normalization,
        &[attr("axes", Absent)],
    ),
    schema(
        "LRN",
        1,
        Family::Normalization,
        &[
            attr("alpha", Float(1e-4)),
            attr("beta", Float(0.75)),
            attr("bias", Float(1.0)),
            attr("size", Required),
        ],
    ),
    schema(
        "Attention",
        23,
        Family::Normalization,
        &[
            attr("is_causal", Int(0)),
            attr("kv_num_heads", Absent),
            attr("q_num_heads", Absent),
            attr("qk_matmul_output_mode", Int(0)),
            attr("scale", Absent),
            attr("softcap", Float(0.0)),
            attr("softmax_precision", Absent),
            attr("left_window_size", Int(-1)),
            attr("right_window_size", Int(-1)),
        ],
    ),
    schema(
        "SwiGLU",
        28,
        Family::Normalization,
        &[attr("alpha", Float(1.0))],
    ),
    schema(
        "LinearAttention",
        27,
        Family::Normalization,
        &[
            attr("chunk_size", Int(64)),
            attr("kv_num_heads", Required),
            attr("q_num_heads", Required),
            attr("scale", Float(0.0)),
            attr("update_rule", Str("gated_delta")),
        ],
    ),
    schema(
        "CausalConvWithState",
        27,
        Family::Linear,
        &[attr("activation", Str("none"))],
    ),
    schema(
        "RotaryEmbedding",
        23,
        Family::Normalization,
        &[
            attr("interleaved", Int(0)),
            attr("num_heads", Absent),
            attr("rotary_embedding_dim", Int(0)),
        ],
    ),
    schema("ReduceMean", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceSum", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceMax", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceMin", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceProd", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceL1", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceL2", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceLogSum", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceLogSumExp", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ReduceSumSquare", 1, Family::Reduce, REDUCE_ATTRS),
    schema("ArgMax", 1, Family::Reduce, ARG_ATTRS),
    schema("ArgMin", 1, Family::Reduce, ARG_ATTRS),
    schema("Max", 1, Family::Select, &[]),
    schema("Min", 1, Family::Select, &[]),
    schema("Sum", 1, Family::Select, &[]),
    schema("Mean", 1, Family::Select, &[]),
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
    schema(
        "ConstantOfShape",
        9,
        Family::Indexing,
        &[attr("value", Absent)],
    ),
    schema("Range", 11, Family::Indexing, &[]),
    schema("Tile", 1, Family::Indexing, &[]),
    schema(
        "CumSum",
        11,
        Family::Indexing,
        &[attr("exclusive", Int(0)), attr("reverse", Int(0))],
    ),
    schema(
        "CumProd",
        26,
        Family::Indexing,
        &[attr("exclusive", Int(0)), attr("reverse", Int(0))],
    ),
    schema("BitCast", 26, Family::Indexing, &[attr("to", Required)]),
    schema(
        "GatherElements",
        11,
        Family::Indexing,
        &[attr("axis", Int(0))],
    ),
    schema(
        "GatherND",
        11,
        Family::Indexing,
        &[attr("batch_dims", Int(0))],
    ),
    schema(
        "ScatterElements",
        11,
        Family::Indexing,
        &[attr("axis", Int(0)), attr("reduction", Str("none"))],
    ),
    schema(
        "ScatterND",
        11,
        Family::Indexing,
        &[attr("reduction", Str("none"))],
    ),
    schema("OneHot", 9, Family::Indexing, &[attr("axis", Int(-1))]),
    schema("Trilu", 14, Family::Indexing, &[attr("upper", Int(1))]),
    schema("NonZero", 9, Family::Indexing, &[]),
    schema("Size", 1, Family::Indexing, &[]),
    schema(
        "DepthToSpace",
        1,
        Family::Indexing,
        &[attr("blocksize", Required), attr("mode", Str("DCR"))],
    ),
    schema(
        "SpaceToDepth",
        1,
        Family::Indexing,
        &[attr("blocksize", Required)],
    ),
    schema(
        "EyeLike",
        9,
        Family::Indexing,
        &[attr("dtype", Absent), attr("k", Int(0))],
    ),
    schema(
        "TopK",
        10,
        Family::Indexing,
        &[
            attr("axis", Int(-1)),
            attr("largest", Int(1)),
            attr("sorted", Int(1)),
        ],
    ),
    schema("CastLike", 15, Family::Indexing, &[]),
    schema("Compress", 9, Family::Indexing, &[attr("axis", Absent)]),
    schema(
        "CenterCropPad",
        18,
        Family::Indexing,
        &[attr("axes", Absent)],
    ),
    schema(
        "ReverseSequence",
        10,
        Family::Indexing,
        &[attr("batch_axis", Int(1)), attr("time_axis", Int(0))],
    ),
    schema(
        "NegativeLogLikelihoodLoss",
        12,
        Family::Normalization,
        LOSS_ATTRS,
    ),
    schema(
        "SoftmaxCrossEntropyLoss",
        12,
        Family::Normalization,
        LOSS_ATTRS,
    ),
    schema(
        "QuantizeLinear",
        10,
        Family::Quantization,
        &[
            attr("axis", Int(1)),
            attr("block_size", Int(0)),
            attr("output_dtype", Absent),
            attr("precision", Absent),
            attr("saturate", Int(1)),
        ],
    ),
    schema(
        "DequantizeLinear",
        10,
        Family::Quantization,
        &[
            attr("axis", Int(1)),
            attr("block_size", Int(0)),
            attr("output_dtype", Absent),
        ],
    ),
    schema("DynamicQuantizeLinear", 11, Family::Quantization, &[]),
    schema("MatMulInteger", 10, Family::Quantization, &[]),
    schema("QLinearMatMul", 10, Family::Quantization, &[]),
    schema("ConvInteger", 10, Family::Quantization, CONV_ATTRS),
    schema("QLinearConv", 10, Family::Quantization, CONV_ATTRS),
    schema("LSTM", 7, Family::Recurrent, LSTM_ATTRS),
    schema("GRU", 7, Family::Recurrent, GRU_ATTRS),
    schema("RNN", 7, Family::Recurrent, RNN_ATTRS),
    schema(
        "Einsum",
        12,
        Family::LinearAlgebra,
        &[attr("equation", Required)],
    ),
    schema("Det", 11, Family::LinearAlgebra, &[]),
    schema(
        "NonMaxSuppression",
        10,
        Family::Indexing,
        &[attr("center_point_box", Int(0))],
    ),
    schema(
        "Unique",
        11,
        Family::Indexing,
        &[attr("axis", Absent), attr("sorted", Int(1))],
    ),
    schema(
        "ConvTranspose",
        1,
        Family::Linear,
        &[
            attr("auto_pad", Str("NOTSET")),
            attr("dilations", Absent),
            attr("group", Int(1)),
            attr("kernel_shape", Absent),
            attr("output_padding", Absent),
            attr("output_shape", Absent),
            attr("pads", Absent),
            attr("strides", Absent),
        ],
    ),
    schema(
        "MaxUnpool",
        9,
        Family::Pool,
        &[
            attr("kernel_shape", Required),
            attr("pads", Absent),
            attr("strides", Absent),
        ],
    ),
    schema(
        "If",
        1,
        Family::ControlFlow,
        &[attr("else_branch", Required), attr("then_branch", Required)],
    ),
    schema("Loop", 1, Family::ControlFlow, &[attr("body", Required)]),
    // Scan-8's batched form is read as a Scan over the batch axis of the opset-9 form.
    schema(
        "Scan",
        8,
        Family::ControlFlow,
        &[
            attr("body", Required),
            attr("num_scan_inputs", Required),
            attr("scan_input_axes", Absent),
            attr("scan_input_directions", Absent),
            attr("scan_output_axes", Absent),
            attr("scan_output_directions", Absent),
        ],
    ),
    // The `mode` default is opset 20's spelling; opsets 16 to 19 spell it `bilinear`.
    schema(
        "GridSample",
        16,
        Family::Sampling,
        &[
            attr("align_corners", Int(0)),
            attr("mode", Str("linear")),
            attr("padding_mode", Str("zeros")),
        ],
    ),
    schema(
        "AffineGrid",
        20,
        Family::Sampling,
        &[attr("align_corners", Int(0))],
    ),
    // RoiAlign's `coordinate_transformation_mode` exists from opset 16; opset 10's form
    // behaves as `output_half_pixel`.
    schema(
        "RoiAlign",
        10,
        Family::Sampling,
        &[
            attr("coordinate_transformation_mode", Str("half_pixel")),
            attr("mode", Str("avg")),
            attr("output_height", Int(1)),
            attr("output_width", Int(1)),
            attr("sampling_ratio", Int(0)),
            attr("spatial_scale", Float(1.0)),
        ],
    ),
    schema(
        "MaxRoiPool",
        1,
        Family::Sampling,
        &[
            attr("pooled_shape", Required),
            attr("spatial_scale", Float(1.0)),
        ],
    ),
    schema(
        "DeformConv",
        19,
        Family::Sampling,
        &[
            attr("dilations", Absent),
            attr("group", Int(1)),
            attr("kernel_shape", Absent),
            attr("offset_group", Int(1)),
            attr("pads", Absent),
            attr("strides", Absent),
        ],
    ),
    schema(
        "Col2Im",
        18,
        Family::Linear,
        &[
            attr("dilations", Absent),
            attr("pads", Absent),
            attr("strides", Absent),
        ],
    ),
    schema(
        "HannWindow",
        17,
        Family::Signal,
        &[attr("output_datatype", Int(1)), attr("periodic", Int(1))],
    ),
    schema(
        "HammingWindow",
        17,
        Family::Signal,
        &[attr("output_datatype", Int(1)), attr("periodic", Int(1))],
    ),
    schema(
        "BlackmanWindow",
        17,
        Family::Signal,
        &[attr("output_datatype", Int(1)), attr("periodic", Int(1))],
    ),
    schema(
        "DFT",
        17,
        Family::Signal,
        &[
            attr("axis", Int(1)),
            attr("inverse", Int(0)),
            attr("onesided", Int(0)),
        ],
    ),
    schema("STFT", 17, Family::Signal, &[attr("onesided", Int(1))]),
    schema(
        "MelWeightMatrix",
        17,
        Family::Signal,
        &[attr("output_datatype", Int(1))],
    ),
    schema(
        "RandomNormal",
        1,
        Family::Random,
        &[
            attr("dtype", Int(1)),
            attr("mean", Float(0.0)),
            attr("scale", Float(1.0)),
            attr("seed", Absent),
            attr("shape", Required),
        ],
    ),
    schema(
        "RandomUniform",
        1,
        Family::Random,
        &[
            attr("dtype", Int(1)),
            attr("high", Float(1.0)),
            attr("low", Float(0.0)),
            attr("seed", Absent),
            attr("shape", Required),
        ],
    ),
    schema(
        "RandomNormalLike",
        1,
        Family::Random,
        &[
            attr("dtype", Absent),
            attr("mean", Float(0.0)),
            attr("scale", Float(1.0)),
            attr("seed", Absent),
        ],
    ),
    schema(
        "RandomUniformLike",
        1,
        Family::Random,
        &[
            attr("dtype", Absent),
            attr("high", Float(1.0)),
            attr("low", Float(0.0)),
            attr("seed", Absent),
        ],
    ),
    schema(
        "Multinomial",
        7,
        Family::Random,
        &[
            attr("dtype", Int(6)),
            attr("sample_size", Int(1)),
            attr("seed", Absent),
        ],
    ),
    schema(
        "Bernoulli",
        15,
        Family::Random,
        &[attr("dtype", Absent), attr("seed", Absent)],
    ),
    schema(
        "TensorScatter",
        24,
        Family::Indexing,
        &[attr("axis", Int(-2)), attr("mode", Str("linear"))],
    ),
    schema(
        "TfIdfVectorizer",
        9,
        Family::Indexing,
        &[
            attr("max_gram_length", Required),
            attr("max_skip_count", Required),
            attr("min_gram_length", Required),
            attr("mode", Required),
            attr("ngram_counts", Required),
            attr("ngram_indexes", Required),
            // ONNX needs one of the two pools; Concord reads integer pools only (a string
            // pool is refused, TFIDF_STRINGS_REFUSAL), so for it pool_int64s is required.
            attr("pool_int64s", Required),
            attr("pool_strings", Absent),
            attr("weights", Absent),
        ],
    ),
];

/// The attributes LSTM, GRU and RNN share; `layout` exists from opset 14.
macro_rules! recurrent_attrs {
    ($($extra:expr),*) => {
        &[
            attr("activation_alpha", Absent),
            attr("activation_beta", Absent),
            attr("activations", Absent),
            attr("clip", Absent),
            attr("direction", Str("forward")),
            attr("hidden_size", Absent),
            attr("layout", Int(0)),
            $($extra),*
        ]
    };
}
const LSTM_ATTRS: &[AttrSpec] = recurrent_attrs!(attr("input_forget", Int(0)));
const GRU_ATTRS: &[AttrSpec] = recurrent_attrs!(attr("linear_before_reset", Int(0)));
const RNN_ATTRS: &[AttrSpec] = recurrent_attrs!();

/// A group of ONNX op types Concord deliberately does not represent, and why: a model
/// using one is refused when it is read with this reason rather than as an unknown op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefusedOps {
    /// The ONNX domain the ops live in ("" is the default domain).
    pub domain: &'static str,
    pub names: &'static [&'static str],
    pub reason: &'static str,
}

/// Every op type refused by design, grouped by reason. Ops absent from both this list and
/// the op table are merely not implemented yet.
pub const REFUSED_OPS: &[RefusedOps] = &[
    RefusedOps {
        domain: "ai.onnx.preview.training",
        names: &["Gradient", "Momentum", "Adam", "Adagrad"],
        reason: "training ops are out of scope: Concord runs inference only",
    },
    RefusedOps {
        domain: "",
        names: &[
            "SequenceConstruct",
            "SequenceEmpty",
            "SequenceInsert",
            "SequenceErase",
            "SequenceAt",
            "SequenceLength",
            "SequenceMap",
            "SplitToSequence",
            "ConcatFromSequence",
            "Optional",
            "OptionalHasElement",
            "OptionalGetElement",
        ],
        reason: "Concord tensors are dense; sequences and optionals are out of scope",
    },
    RefusedOps {
        domain: "",
        names: &[
            "StringNormalizer",
            "StringConcat",
            "StringSplit",
            "RegexFullMatch",
        ],
        reason: "Concord tensors are numeric or bool; string ops are out of scope",
    },
    RefusedOps {
        domain: "",
        names: &["ImageDecoder"],
        reason: "decoding encoded images (JPEG, PNG, …) is out of scope; decode them before \
                 the model and pass the pixels as a tensor",
    },
];

/// Why the op type `name` of `domain` ("" or "ai.onnx" for the default domain) is refused
/// by design, if it is.
pub fn refusal_of(domain: &str, name: &str) -> Option<&'static str> {
    let domain = if domain == "ai.onnx" { "" } else { domain };
    REFUSED_OPS
        .iter()
        .find(|g| g.domain == domain && g.names.contains(&name))
        .map(|g| g.reason)
}

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
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        match self {
            Unary::LeakyRelu { alpha }
            | Unary::Elu { alpha }
            | Unary::Celu { alpha }
            | Unary::ThresholdedRelu { alpha }
            | Unary::Swish { alpha } => [alpha, 0.0],
            Unary::HardSigmoid { alpha, beta } => [alpha, beta],
            Unary::Selu { alpha, gamma } => [alpha, gamma],
            Unary::Shrink { bias, lambd } => [bias, lambd],
            Unary::Gelu { tanh } => [flag(tanh), 0.0],
            Unary::IsInf {
                detect_negative,
                detect_positive,
            } => [flag(detect_negative), flag(detect_positive)],
            _ => [0.0, 0.0],
        }
    }

    /// The same op with its parameters replaced, in [`UnaryDef::params`] order.
    pub fn with_params(self, p: [f32; 2]) -> Unary {
        match self {
            Unary::LeakyRelu { .. } => Unary::LeakyRelu { alpha: p[0] },
            Unary::Elu { .. } => Unary::Elu { alpha: p[0] },
            Unary::Celu { .. } => Unary::Celu { alpha: p[0] },
            Unary::ThresholdedRelu { .. } => Unary::ThresholdedRelu { alpha: p[0] },
            Unary::Swish { .. } => Unary::Swish { alpha: p[0] },
            Unary::HardSigmoid { .. } => Unary::HardSigmoid {
                alpha: p[0],
                beta: p[1],
            },
            Unary::Selu { .. } => Unary::Selu {
                alpha: p[0],
                gamma: p[1],
            },
            Unary::Shrink { .. } => Unary::Shrink {
                bias: p[0],
                lambd: p[1],
            },
            Unary::Gelu { .. } => Unary::Gelu { tanh: p[0] != 0.0 },
            Unary::IsInf { .. } => Unary::IsInf {
                detect_negative: p[0] != 0.0,
                detect_positive: p[1] != 0.0,
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

    /// The kernel-facing name: `fmod` for C-sign Mod, `shr` for a right BitShift, else the
    /// row's first.
    pub fn kernel(self) -> &'static str {
        let kernels = self.def().kernels;
        match self {
            Binary::Mod { fmod: true } | Binary::BitShift { left: false } => {
                kernels.get(1).copied().unwrap_or(kernels[0])
            }
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

/// The kernel op codes of a multiplication (`U_SCALE_MUL`) and a division (`U_SCALE_DIV`)
/// by a scalar constant, its one parameter: what a device backend fuses into a kernel's
/// epilogue when a Mul or Div by a one-element constant follows it (an attention score's
/// scale, for one).
pub const SCALE_MUL_KERNEL_CODE: u32 = CLIP_KERNEL_CODE + 1;
pub const SCALE_DIV_KERNEL_CODE: u32 = CLIP_KERNEL_CODE + 2;

/// The kernel op code of SiLU as exporters write it, Sigmoid then Mul (`U_SILU`):
/// `x · sigmoid(x)` with the sigmoid rounded to the stored type first, as the two nodes
/// round. Device backends fuse it into a kernel's epilogue.
pub const SILU_KERNEL_CODE: u32 = CLIP_KERNEL_CODE + 3;

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
    let extra = [
        ("U_CLIP", CLIP_KERNEL_CODE),
        ("U_SCALE_MUL", SCALE_MUL_KERNEL_CODE),
        ("U_SCALE_DIV", SCALE_DIV_KERNEL_CODE),
        ("U_SILU", SILU_KERNEL_CODE),
    ]
    .map(|(name, code)| (name.to_string(), code));
    unary.chain(extra).chain(binary).collect()
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
            Op::GlobalMaxPool => other("GlobalMaxPool"),
            Op::LpPool(..) => other("LpPool"),
            Op::GlobalLpPool { .. } => other("GlobalLpPool"),
            Op::InstanceNormalization { .. } => other("InstanceNormalization"),
            Op::GroupNormalization { .. } => other("GroupNormalization"),
            Op::RMSNormalization { .. } => other("RMSNormalization"),
            Op::LpNormalization { .. } => other("LpNormalization"),
            Op::MeanVarianceNormalization { .. } => other("MeanVarianceNormalization"),
            Op::LRN { .. } => other("LRN"),
            Op::Attention { .. } => other("Attention"),
            Op::RotaryEmbedding { .. } => other("RotaryEmbedding"),
            Op::Reduce(kind, _) => other(kind.name()),
            Op::ArgMax(_) => other("ArgMax"),
            Op::ArgMin(_) => other("ArgMin"),
            Op::Variadic(v) => other(v.name()),
            Op::LogSoftmax { .. } => other("LogSoftmax"),
            Op::Hardmax { .. } => other("Hardmax"),
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
            Op::ConstantOfShape { .. } => other("ConstantOfShape"),
            Op::Range => other("Range"),
            Op::Tile => other("Tile"),
            Op::CumSum { .. } => other("CumSum"),
            Op::CumProd { .. } => other("CumProd"),
            Op::BitCast { .. } => other("BitCast"),
            Op::SwiGLU { .. } => other("SwiGLU"),
            Op::LinearAttention { .. } => other("LinearAttention"),
            Op::CausalConvWithState { .. } => other("CausalConvWithState"),
            Op::GatherElements { .. } => other("GatherElements"),
            Op::GatherND { .. } => other("GatherND"),
            Op::ScatterElements { .. } => other("ScatterElements"),
            Op::ScatterND { .. } => other("ScatterND"),
            Op::OneHot { .. } => other("OneHot"),
            Op::Trilu { .. } => other("Trilu"),
            Op::NonZero => other("NonZero"),
            Op::Size => other("Size"),
            Op::DepthToSpace { .. } => other("DepthToSpace"),
            Op::SpaceToDepth { .. } => other("SpaceToDepth"),
            Op::EyeLike { .. } => other("EyeLike"),
            Op::TopK { .. } => other("TopK"),
            Op::CastLike => other("CastLike"),
            Op::Compress { .. } => other("Compress"),
            Op::CenterCropPad { .. } => other("CenterCropPad"),
            Op::ReverseSequence { .. } => other("ReverseSequence"),
            Op::NegativeLogLikelihoodLoss { .. } => other("NegativeLogLikelihoodLoss"),
            Op::SoftmaxCrossEntropyLoss { .. } => other("SoftmaxCrossEntropyLoss"),
            Op::QuantizeLinear { .. } => other("QuantizeLinear"),
            Op::DequantizeLinear { .. } => other("DequantizeLinear"),
            Op::DynamicQuantizeLinear => other("DynamicQuantizeLinear"),
            Op::MatMulInteger => other("MatMulInteger"),
            Op::QLinearMatMul => other("QLinearMatMul"),
            Op::ConvInteger(_) => other("ConvInteger"),
            Op::QLinearConv(_) => other("QLinearConv"),
            Op::Recurrent(r) => other(r.cell.name()),
            Op::Einsum { .. } => other("Einsum"),
            Op::Det => other("Det"),
            Op::NonMaxSuppression { .. } => other("NonMaxSuppression"),
            Op::Unique { .. } => other("Unique"),
            Op::ConvTranspose(_) => other("ConvTranspose"),
            Op::MaxUnpool { .. } => other("MaxUnpool"),
            Op::If { .. } => other("If"),
            Op::Loop { .. } => other("Loop"),
            Op::Scan { .. } => other("Scan"),
            Op::GridSample { .. } => other("GridSample"),
            Op::AffineGrid { .. } => other("AffineGrid"),
            Op::RoiAlign(_) => other("RoiAlign"),
            Op::MaxRoiPool { .. } => other("MaxRoiPool"),
            Op::DeformConv(_) => other("DeformConv"),
            Op::Col2Im { .. } => other("Col2Im"),
            Op::Window { kind, .. } => other(kind.name()),
            Op::Dft { .. } => other("DFT"),
            Op::Stft { .. } => other("STFT"),
            Op::MelWeightMatrix { .. } => other("MelWeightMatrix"),
            Op::Random(r) => other(r.name()),
            Op::Multinomial { .. } => other("Multinomial"),
            Op::Bernoulli { .. } => other("Bernoulli"),
            Op::TensorScatter { .. } => other("TensorScatter"),
            Op::TfIdfVectorizer(_) => other("TfIdfVectorizer"),
        }
    }

    /// The ONNX op type, as it appears in a model and in every report.
    pub fn name(&self) -> &'static str {
        self.schema().name
    }

    pub fn family(&self) -> Family {
        self.schema().family
    }

    /// The subgraphs a control-flow op runs (none for every other op).
    pub fn subgraphs(&self) -> Vec<&Graph> {
        match self {
            Op::If {
                then_branch,
                else_branch,
            } => vec![then_branch, else_branch],
            Op::Loop { body, .. } | Op::Scan { body, .. } => vec![body],
            _ => Vec::new(),
        }
    }

    /// The attribute name of each of [`Op::subgraphs`], in the same order, for errors.
    pub fn subgraph_attributes(&self) -> &'static [&'static str] {
        match self {
            Op::If { .. } => &["then_branch", "else_branch"],
            Op::Loop { .. } | Op::Scan { .. } => &["body"],
            _ => &[],
        }
    }

    /// How many of a node's inputs (the last ones) are captured outer values rather than
    /// the op's formal operands, given the node's input count.
    pub fn captures(&self, num_inputs: usize) -> usize {
        match self {
            Op::If { .. } => num_inputs.saturating_sub(1),
            Op::Loop { captures, .. } | Op::Scan { captures, .. } => *captures,
            _ => 0,
        }
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
            assert!(
                d.params.len() <= 2,
                "{}: kernels take two parameters",
                d.name
            );
            // Every parameter reaches the kernels: changing it changes the op.
            for i in 0..d.params.len() {
                let mut p = d.op.params();
                p[i] = if p[i] == 0.0 { 1.0 } else { 0.0 };
                assert_ne!(d.op.with_params(p), d.op, "{} parameter {i}", d.name);
            }
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
        assert_eq!(
            unary.len(),
            UNARY_OPS.len() + 4,
            "every unary op, Clip, the two scalings and SiLU"
        );
        assert!(!unary.contains(&0), "0 is reserved for no activation");
        let binary: BTreeSet<u32> = codes
            .iter()
            .filter(|(n, _)| n.starts_with("B_"))
            .map(|c| c.1)
            .collect();
        assert_eq!(binary.len(), codes.len() - UNARY_OPS.len() - 4);
    }

    #[test]
    fn refused_ops_are_not_in_the_op_table_and_say_why() {
        for group in REFUSED_OPS {
            for name in group.names {
                assert!(
                    schema_of(group.domain, name).is_none(),
                    "{name} is both refused and supported"
                );
                assert_eq!(refusal_of(group.domain, name), Some(group.reason));
            }
        }
        assert_eq!(
            refusal_of("ai.onnx", "SequenceAt"),
            Some("Concord tensors are dense; sequences and optionals are out of scope")
        );
        assert!(
            refusal_of("", "Adam").is_none(),
            "Adam is a training-domain op"
        );
        assert!(refusal_of("", "Einsum").is_none());
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
            Op::DynamicQuantizeLinear,
            Op::MatMulInteger,
            Op::QLinearMatMul,
        ];
        for op in ops {
            assert_eq!(op.schema().name, format!("{op:?}"));
        }
        assert_eq!(Op::Gemm(Gemm::default()).name(), "Gemm");
        assert_eq!(Op::Resize(Resize::default()).family(), Family::Resize);
        assert_eq!(
            Op::QLinearConv(Conv::default()).family(),
            Family::Quantization
        );
        for (r, name) in LossReduction::ALL {
            assert_eq!(LossReduction::from_name(name), Some(r));
            assert_eq!(r.name(), name);
        }
        for (cell, name) in [
            (RecurrentCell::Lstm, "LSTM"),
            (RecurrentCell::Gru, "GRU"),
            (RecurrentCell::Rnn, "RNN"),
        ] {
            let op = Op::Recurrent(Recurrent::new(cell, RnnDirection::Bidirectional));
            assert_eq!(op.name(), name);
            assert_eq!(op.family(), Family::Recurrent);
            if let Op::Recurrent(r) = op {
                assert_eq!(r.activations.len(), 2 * cell.functions());
            }
        }
        for (d, name) in RnnDirection::ALL {
            assert_eq!(RnnDirection::from_name(name), Some(d));
            assert_eq!(d.name(), name);
        }
        for (kind, name, _, _) in RnnActivationKind::ALL {
            assert_eq!(RnnActivationKind::from_name(name), Some(kind));
            assert_eq!(
                RnnActivationKind::from_name(&name.to_lowercase()),
                Some(kind)
            );
            assert_eq!(kind.name(), name);
        }
    }
}
