// common.cl: prepended to every program. Storage and compute types per variant, and the
// index helpers the families share.
//
// Variants (one -D per build): T_F32 stores and computes float; T_F16 stores half and
// computes float through vload_half/vstore_half_rte, which are core OpenCL and need no
// cl_khr_fp16; T_I64 stores and computes long. USE_FP64 (set when the device has
// cl_khr_fp64) lets transcendental functions and long reductions run in double, so their
// results round once, like the reference's.

// Contraction would let the compiler fuse a*b+c and change results that must match the
// reference bit for bit; kernels that want fused multiply-add call fma() explicitly.
#pragma OPENCL FP_CONTRACT OFF

// The scalar arguments of a kernel that takes them in one buffer `P` (the executor's
// PARAM_KERNELS): one long each, in the launch's order, an int8 as eight, a float as its
// bits.
#define P_INT(i) ((int)P[(i)])
#define P_FLOAT(i) as_float((uint)P[(i)])
#define P_INT8(i) convert_int8(vload8(0, P + (i)))

#ifdef USE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

#if defined(T_F32)
typedef float C;
#define TPTR __global float*
#define CTPTR __global const float*
#define LD(p, i) ((p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (v))
#elif defined(T_F16)
typedef float C;
#define TPTR __global half*
#define CTPTR __global const half*
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half_rte((v), (i), (p))
#elif defined(T_I64)
typedef long C;
#define TPTR __global long*
#define CTPTR __global const long*
#define LD(p, i) ((p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (v))
#endif

// Sixteen consecutive floats of global memory, at any address, as one float16. On CPU
// devices through a float16 type aligned to 4 bytes, which the compiler emits as one
// unaligned vector move: PoCL 3.1 compiled vstore16 into three narrower stores, and the
// register-blocked GEMM of a 1×1 conv with 16 input channels at 112² took 1.39 ms with
// them, 1.15 ms with one (`layer_bench 16 96 112 1 1 1`). Elsewhere vload16/vstore16.
#ifdef CPU_DEVICE
typedef float16 float16_u __attribute__((aligned(4)));
#define VLOAD16(p) (*(__global const float16_u*)(p))
#define VSTORE16(v, p) (*(__global float16_u*)(p) = (v))
#else
#define VLOAD16(p) vload16(0, (p))
#define VSTORE16(v, p) vstore16((v), 0, (p))
#endif

// Sixteen consecutive values of a float variant as a float16 (vector loads and stores; f16
// storage rounds each value to nearest even, as ST does).
#if defined(T_F16)
#define LD16(p, i) vload_half16(0, (p) + (i))
#define ST16(v, p, i) vstore_half16_rte((v), 0, (p) + (i))
#elif defined(T_F32)
#define LD16(p, i) VLOAD16((p) + (i))
#define ST16(v, p, i) VSTORE16((v), (p) + (i))
#endif

// The flat offsets into two operands of the output element `i`, given the output dims and
// each operand's strides (0 on broadcast axes), innermost axis last.
inline void offsets2(int i, int rank, int8 dims, int8 s0, int8 s1, int* o0, int* o1) {
    int d[8], a[8], b[8];
    vstore8(dims, 0, d);
    vstore8(s0, 0, a);
    vstore8(s1, 0, b);
    int r0 = 0, r1 = 0;
    for (int k = rank - 1; k >= 0; --k) {
        int c = i % d[k];
        i /= d[k];
        r0 += c * a[k];
        r1 += c * b[k];
    }
    *o0 = r0;
    *o1 = r1;
}

inline int offset1(int i, int rank, int8 dims, int8 s0) {
    int d[8], a[8];
    vstore8(dims, 0, d);
    vstore8(s0, 0, a);
    int r0 = 0;
    for (int k = rank - 1; k >= 0; --k) {
        int c = i % d[k];
        i /= d[k];
        r0 += c * a[k];
    }
    return r0;
}

// NaN-propagating max and min (OpenCL's fmax/fmin drop a NaN operand).
inline float nan_max(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : (a >= b ? a : b); }
inline float nan_min(float a, float b) { return (isnan(a) || isnan(b)) ? NAN : (a <= b ? a : b); }

// Sigmoid in float: 1 / (1 + e^-v), or e^v / (1 + e^v) for negative v so that the exp
// cannot overflow. The tolerance model's transcendental level (8 ulp) covers it; in
// double it cost PoCL twice as much (EfficientNet's SiLUs).
inline float sigmoid_f(float v) {
    const float e = exp(-fabs(v));
    const float p = 1.0f + e;
    return v >= 0.0f ? 1.0f / p : e / p;
}

// sigmoid_f on 16 lanes, the same steps lane for lane.
inline float16 sigmoid_f16(float16 v) {
    const float16 e = exp(-fabs(v));
    const float16 p = 1.0f + e;
    return select(e / p, 1.0f / p, v >= 0.0f);
}

// The fused epilogue's activation, by the U_* op codes that concord-core's op table
// generates (prepended to every program): 0 none, Relu, Clip(a, b), LeakyRelu(a),
// HardSigmoid(a, b), HardSwish, Sigmoid, U_SCALE_MUL and U_SCALE_DIV (v · a, v / a), U_SILU
// (v · sigmoid(v), the sigmoid rounded to float first, as Sigmoid then Mul), and U_GELU
// for the erf GELU as PyTorch exports it,
// (v · (erf(v / a) + 1)) · b, rounded to float after each step as its five nodes are (erf
// in float, as the unary kernel computes it).
inline float activate(float v, int act, float a, float b) {
    switch (act) {
    case U_GELU: {
        const float t = v / a;
        const float e = erf(t);
        const float s = e + 1.0f;
        const float m = v * s;
        return m * b;
    }
    case U_RELU: return (v > 0.0f || isnan(v)) ? v : 0.0f;
    case U_CLIP: return nan_min(nan_max(v, a), b);
    case U_LEAKY_RELU: return v < 0.0f ? a * v : v;
    case U_HARD_SIGMOID: { float h = a * v + b; return isnan(h) ? h : clamp(h, 0.0f, 1.0f); }
    case U_HARD_SWISH: { float h = v / 6.0f + 0.5f; return v * (isnan(h) ? h : clamp(h, 0.0f, 1.0f)); }
    case U_SCALE_MUL: return v * a;
    case U_SCALE_DIV: return v / a;
    case U_SILU: return v * sigmoid_f(v);
    case U_SIGMOID: return sigmoid_f(v);
    default: return v;
    }
}

// Keeps a function out of its callers on CPU devices (see activate16).
#ifdef CPU_DEVICE
#define CPU_NOINLINE __attribute__((noinline))
#else
#define CPU_NOINLINE
#endif

// activate16's cases other than none, Relu and Clip.
CPU_NOINLINE float16 activate16_other(float16 v, int act, float a, float b) {
    const float16 zero = 0.0f, one = 1.0f;
    switch (act) {
    case U_GELU: {
        // The same steps as activate(), each rounded to float, on 16 lanes.
        const float16 t = v / a;
        const float16 s = erf(t) + one;
        const float16 m = v * s;
        return m * b;
    }
    case U_LEAKY_RELU: return select(v, a * v, v < zero);
    case U_HARD_SIGMOID: { const float16 h = a * v + b; return select(clamp(h, zero, one), h, isnan(h)); }
    case U_HARD_SWISH: {
        const float16 h = v / 6.0f + 0.5f;
        return v * select(clamp(h, zero, one), h, isnan(h));
    }
    case U_SCALE_MUL: return v * a;
    case U_SCALE_DIV: return v / a;
    case U_SILU: return v * sigmoid_f16(v);
    case U_SIGMOID: return sigmoid_f16(v);
    default: return v;
    }
}

// activate() on 16 lanes at once, lane for lane the same results (the epilogues of the
// CPU kernels run it on whole register rows). None, Relu and Clip (ReLU6) are tested here
// and the rest called: on PoCL, inlining the whole switch into an epilogue cost as much as
// a depthwise conv's multiply-adds even where `act` was none.
inline float16 activate16(float16 v, int act, float a, float b) {
    if (act == 0) return v;
    if (act == U_RELU) return select((float16)0.0f, v, (v > 0.0f) | isnan(v));
    if (act == U_CLIP) {
        // nan_min(nan_max(v, a), b) lane for lane. A NaN bound makes every lane NaN (a
        // uniform branch); a NaN lane fails both comparisons and becomes NAN at the end.
        const float16 nan16 = NAN;
        if (isnan(a) || isnan(b)) return nan16;
        const float16 lo = select(v, (float16)a, v < a);
        return select(select(lo, (float16)b, lo > b), nan16, isnan(v));
    }
    return activate16_other(v, act, a, b);
}

#if defined(T_F32) || defined(T_F16)
// pad_planes (movement.cl) done by the one work-group of a launch that pads its own input
// (conv_rows_padding, conv_shift_padding in gemm.cl, max_pool_padding in pool.cl), its
// work-items taking the padded rows in turn: planes of H×W of X into planes of rows×Wp of
// Xp, `fill` around (PH rows and PW columns before, the rest after), with `split` each
// row's even columns first, then its odd ones. The kernel reads Xp after the work-group's
// barrier. A small conv's or pool's two commands were mostly the device's cost per command
// (on PoCL's `pthread` device, a few microseconds each).
// pad = (planes, H, W, rows, Wp, PH, PW, split).
inline void pad_in_group(CTPTR X, TPTR Xp, int8 pad, float fill) {
    const int planes = pad.s0, H = pad.s1, W = pad.s2, rows = pad.s3, Wp = pad.s4;
    const int PH = pad.s5, PW = pad.s6, split = pad.s7;
    const int items = get_local_size(0) * get_local_size(1) * get_local_size(2);
    const int me = get_local_id(0)
                   + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2));
    for (int t = me; t < planes * rows; t += items) {
        const int plane = t / rows, r = t - plane * rows;
        const long d = (long)t * Wp;
        const int ih = r - PH;
        if (ih < 0 || ih >= H) {
            for (int j = 0; j < Wp; ++j) ST(Xp, d + j, fill);
            continue;
        }
        const long s = ((long)plane * H + ih) * W;
        if (split) {
            const int even = (Wp + 1) / 2;
            for (int j = 0; j < Wp; ++j) {
                // Padded column 2j' + q lands at q·even + j'.
                const int q = j < even ? 0 : 1;
                const int col = 2 * (j - q * even) + q - PW;
                ST(Xp, d + j, col >= 0 && col < W ? LD(X, s + col) : fill);
            }
            continue;
        }
        // As pad_planes: the pad before, the row, the rest; no test per element.
        for (int j = 0; j < PW; ++j) ST(Xp, d + j, fill);
        for (int j = 0; j < W; ++j) ST(Xp, d + PW + j, LD(X, s + j));
        for (int j = PW + W; j < Wp; ++j) ST(Xp, d + j, fill);
    }
}

// The epilogue of a ragged 16-lane chunk: the first `left` lanes of activate16(v + R's
// lanes) stored at Y[at..]. The residual's lanes are gathered and the activation applied
// once to the whole vector (lane for lane activate()'s results) rather than lane by lane.
inline void store_prefix16(float16 v, int left, int has_res, CTPTR R, TPTR Y, long at,
                           int act, float a, float b) {
    float t[16];
    if (has_res) {
        for (int j = 0; j < 16; ++j) t[j] = j < left ? LD(R, at + j) : 0.0f;
        v += vload16(0, t);
    }
    vstore16(activate16(v, act, a, b), 0, t);
    for (int j = 0; j < left; ++j) ST(Y, at + j, t[j]);
}
#endif
