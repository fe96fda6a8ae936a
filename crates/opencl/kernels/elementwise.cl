// elementwise.cl: unary maths and activations, broadcasting binary arithmetic and
// comparison, Clip and Where. Built per storage variant (T_F32, T_F16, T_I64).
//
// Binary kernels take the output element count and, when `rank` > 0, the output dims and
// each operand's strides (0 on broadcast axes); `rank` == 0 means both operands have the
// output's shape and are read at the same flat index.

#define BINARY(name, OUTPTR, OUTST, expr)                                                   \
__kernel void name(CTPTR a, CTPTR b, OUTPTR y, int n, int rank, int8 dims, int8 sa,       \
                   int8 sb, __global int* status) {                                       \
    int i = get_global_id(0);                                                             \
    if (i >= n) return;                                                                   \
    int ia = i, ib = i;                                                                   \
    if (rank > 0) offsets2(i, rank, dims, sa, sb, &ia, &ib);                              \
    C p = LD(a, ia);                                                                      \
    C q = LD(b, ib);                                                                      \
    OUTST(y, i, (expr));                                                                  \
}

#define ST_U8(p, i, v) ((p)[(i)] = (uchar)(v))

BINARY(binary_equal, __global uchar*, ST_U8, p == q ? 1 : 0)

#if defined(T_I64)

// Two's-complement wrapping arithmetic, as the reference does it.
inline long int_div(long p, long q, __global int* status) {
    if (q == 0) { status[0] = 1; return 0; }
    if (q == -1) return as_long(-as_ulong(p));
    return p / q;
}

inline long int_mod(long p, long q, int python_sign, __global int* status) {
    if (q == 0) { status[0] = 1; return 0; }
    if (q == -1) return 0;
    long r = p % q;
    if (python_sign && r != 0 && ((r < 0) != (q < 0))) r = as_long(as_ulong(r) + as_ulong(q));
    return r;
}

// Two's-complement wrapping arithmetic, as the reference does it. `op` is a B_* code; the
// caller refuses the ones without an integer form.
inline long binary_value(int op, long p, long q, __global int* status) {
    switch (op) {
    case B_ADD: return as_long(as_ulong(p) + as_ulong(q));
    case B_SUB: return as_long(as_ulong(p) - as_ulong(q));
    case B_MUL: return as_long(as_ulong(p) * as_ulong(q));
    case B_DIV: return int_div(p, q, status);
    case B_MOD: return int_mod(p, q, 1, status);
    case B_FMOD: return int_mod(p, q, 0, status);
    default: return 0;
    }
}

// `op` is a U_* code of an op ONNX defines on integers.
inline long unary_value(int op, long v, float alpha, float beta) {
    switch (op) {
    case U_NEG: return as_long(-as_ulong(v));
    // The builtins abs and max, not `v < 0 ? -v : v` and `v > 0 ? v : 0`: clang turns
    // those into the llvm.abs and llvm.smax intrinsics, which Oclgrind 21.10 cannot run
    // (the whole program fails to create its kernels there). abs(LONG_MIN) as a ulong is
    // 2^63, so as_long wraps to LONG_MIN as the reference does.
    case U_ABS: return as_long(abs(v));
    case U_RELU: return max(v, 0L);
    default: return 0;
    }
}

__kernel void clip(CTPTR x, TPTR y, int n, CTPTR lo, CTPTR hi, int has_lo, int has_hi) {
    int i = get_global_id(0);
    if (i >= n) return;
    C v = LD(x, i);
    // max and min, for the reason given at unary_value.
    if (has_lo) v = max(v, LD(lo, 0));
    if (has_hi) v = min(v, LD(hi, 0));
    ST(y, i, v);
}

#else

inline acc_t hard_clamp(acc_t v) {
    return isnan(v) ? v : (v < 0 ? (acc_t)0 : (v > 1 ? (acc_t)1 : v));
}

// `op` is a B_* code; Mod with the divisor's sign (B_MOD) is integer-only.
inline float binary_value(int op, float p, float q, __global int* status) {
    switch (op) {
    case B_ADD: return p + q;
    case B_SUB: return p - q;
    case B_MUL: return p * q;
    case B_DIV: return p / q;
    case B_POW: return (float)pow((acc_t)p, (acc_t)q);
    case B_FMOD: return fmod(p, q);
    default: return NAN;
    }
}

// `op` is a U_* code; alpha and beta are the op's parameters (LeakyRelu, HardSigmoid).
inline float unary_value(int op, float v, float alpha, float beta) {
    switch (op) {
    case U_SQRT: return (float)sqrt((acc_t)v);
    case U_EXP: return (float)exp((acc_t)v);
    case U_NEG: return -v;
    case U_ABS: return fabs(v);
    // Single precision: the tolerance model's special_function level is OpenCL C's 16 ulp
    // bound for erf, and on PoCL erf in double cost twice as much (bert's fused GELU).
    case U_ERF: return erf(v);
    case U_RELU: return (v > 0.0f || isnan(v)) ? v : 0.0f;
    case U_SIGMOID: return sigmoid_f(v);
    case U_TANH: return (float)tanh((acc_t)v);
    case U_HARD_SWISH: return (float)((acc_t)v * hard_clamp((acc_t)v / 6 + (acc_t)0.5));
    case U_LEAKY_RELU: return v < 0.0f ? alpha * v : v;
    case U_HARD_SIGMOID: return (float)hard_clamp((acc_t)alpha * (acc_t)v + (acc_t)beta);
    case U_RECIPROCAL: return 1.0f / v;
    default: return NAN;
    }
}

__kernel void clip(CTPTR x, TPTR y, int n, CTPTR lo, CTPTR hi, int has_lo, int has_hi) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = LD(x, i);
    if (has_lo) v = nan_max(v, LD(lo, 0));
    if (has_hi) v = nan_min(v, LD(hi, 0));
    ST(y, i, v);
}

#endif

// Broadcasting binary arithmetic: `op` is a B_* code; a_off and b_off place each operand's
// first element (a view's offset).
__kernel void binary(CTPTR a, CTPTR b, TPTR y, int n, int rank, int8 dims, int8 sa, int8 sb,
                     __global int* status, int op, int a_off, int b_off) {
    int i = get_global_id(0);
    if (i >= n) return;
    int ia = i, ib = i;
    if (rank > 0) offsets2(i, rank, dims, sa, sb, &ia, &ib);
    ia += a_off;
    ib += b_off;
    C p = LD(a, ia);
    C q = LD(b, ib);
    ST(y, i, binary_value(op, p, q, status));
}

// Broadcasting binary arithmetic a row at a time. The output is `rows` × `inner` (the
// innermost coalesced axis); a work-item computes 16 consecutive values of one row, with
// the row's operand offsets worked out once (the outer `rank` axes in dims, sa, sb) and
// a_in, b_in each operand's stride along the row: 1, 0 where it repeats one value (a
// per-channel scale), or any other for a view (a transposed operand); a_off, b_off place
// each operand's first element. Float Add, Sub, Mul and Div of a whole chunk with strides
// 0 or 1 run on float16 vectors: the same IEEE operations on each lane as binary_value.
// Global (rows · chunks, rounded up to the work-group), chunks = ceil(inner / 16).
// Its scalars come in P (a PARAM_KERNEL): rows, inner, chunks, rank, dims, sa, sb, op, a_in,
// b_in, a_off, b_off.
__kernel void binary_rows(CTPTR a, CTPTR b, TPTR y, __global int* status,
                          __global const long* restrict P) {
    const int rows = P_INT(0), inner = P_INT(1), chunks = P_INT(2), rank = P_INT(3);
    const int8 dims = P_INT8(4), sa = P_INT8(12), sb = P_INT8(20);
    const int op = P_INT(28), a_in = P_INT(29), b_in = P_INT(30);
    const int a_off = P_INT(31), b_off = P_INT(32);
    const int g = get_global_id(0);
    const int row = g / chunks;
    if (row >= rows) return;
    const int j0 = (g - row * chunks) * 16;
    const int left = min(16, inner - j0);
    int ra = row, rb = row;
    if (rank > 0) offsets2(row, rank, dims, sa, sb, &ra, &rb);
    CTPTR pa = a + a_off + ra + (long)j0 * a_in;
    CTPTR pb = b + b_off + rb + (long)j0 * b_in;
    const long at = (long)row * inner + j0;
#if !defined(T_I64)
    if (left == 16 && (a_in == 0 || a_in == 1) && (b_in == 0 || b_in == 1)
        && (op == B_ADD || op == B_SUB || op == B_MUL || op == B_DIV)) {
        const float16 p = a_in ? LD16(pa, 0) : (float16)LD(pa, 0);
        const float16 q = b_in ? LD16(pb, 0) : (float16)LD(pb, 0);
        float16 v;
        switch (op) {
        case B_ADD: v = p + q; break;
        case B_SUB: v = p - q; break;
        case B_MUL: v = p * q; break;
        default: v = p / q; break;
        }
        ST16(v, y, at);
        return;
    }
#endif
    for (int j = 0; j < left; ++j)
        ST(y, at + j, binary_value(op, LD(pa, j * a_in), LD(pb, j * b_in), status));
}

// Unary maths and activations: `op` is a U_* code.
__kernel void unary(CTPTR x, TPTR y, int n, int op, float alpha, float beta) {
    int i = get_global_id(0);
    if (i >= n) return;
    ST(y, i, unary_value(op, LD(x, i), alpha, beta));
}

// unary over a strided operand (a view: a slice or transpose of a value), read where it is:
// element i of the output reads X at x_off plus its coordinates in `dims` times `sx`. Its
// scalars come in P (a PARAM_KERNEL): n, rank, dims, sx, x_off, op, alpha, beta.
__kernel void unary_strided(CTPTR x, TPTR y, __global const long* restrict P) {
    const int n = P_INT(0), rank = P_INT(1);
    const int8 dims = P_INT8(2), sx = P_INT8(10);
    const int x_off = P_INT(18), op = P_INT(19);
    const float alpha = P_FLOAT(20), beta = P_FLOAT(21);
    const int i = get_global_id(0);
    if (i >= n) return;
    ST(y, i, unary_value(op, LD(x, x_off + offset1(i, rank, dims, sx)), alpha, beta));
}

// Where: condition (uchar), X and Y of this variant, three-way broadcast. `dims` are the
// output's; sc, sx, sy the operands' strides.
__kernel void where_select(__global const uchar* c, CTPTR x, CTPTR yv, TPTR out, int n,
                           int rank, int8 dims, int8 sc, int8 sx, int8 sy) {
    int i = get_global_id(0);
    if (i >= n) return;
    int ic = i, ix = i, iy = i;
    if (rank > 0) {
        offsets2(i, rank, dims, sc, sx, &ic, &ix);
        iy = offset1(i, rank, dims, sy);
    }
    ST(out, i, c[ic] ? LD(x, ix) : LD(yv, iy));
}
