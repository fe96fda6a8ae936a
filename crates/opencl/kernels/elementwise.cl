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
#define WRAP(op) as_long(as_ulong(p) op as_ulong(q))
BINARY(binary_add, TPTR, ST, WRAP(+))
BINARY(binary_sub, TPTR, ST, WRAP(-))
BINARY(binary_mul, TPTR, ST, WRAP(*))

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

BINARY(binary_div, TPTR, ST, int_div(p, q, status))
BINARY(binary_mod, TPTR, ST, int_mod(p, q, 1, status))
BINARY(binary_fmod, TPTR, ST, int_mod(p, q, 0, status))

#define UNARY(name, expr)                                                                 \
__kernel void name(CTPTR x, TPTR y, int n, float alpha, float beta) {                     \
    int i = get_global_id(0);                                                             \
    if (i >= n) return;                                                                   \
    C v = LD(x, i);                                                                       \
    ST(y, i, (expr));                                                                     \
}

UNARY(unary_neg, as_long(-as_ulong(v)))
UNARY(unary_abs, v < 0 ? as_long(-as_ulong(v)) : v)
UNARY(unary_relu, v > 0 ? v : 0)

__kernel void clip(CTPTR x, TPTR y, int n, CTPTR lo, CTPTR hi, int has_lo, int has_hi) {
    int i = get_global_id(0);
    if (i >= n) return;
    C v = LD(x, i);
    if (has_lo) { C l = LD(lo, 0); v = v < l ? l : v; }
    if (has_hi) { C h = LD(hi, 0); v = v > h ? h : v; }
    ST(y, i, v);
}

#else

BINARY(binary_add, TPTR, ST, p + q)
BINARY(binary_sub, TPTR, ST, p - q)
BINARY(binary_mul, TPTR, ST, p * q)
BINARY(binary_div, TPTR, ST, p / q)
BINARY(binary_pow, TPTR, ST, (float)pow((acc_t)p, (acc_t)q))
BINARY(binary_fmod, TPTR, ST, fmod(p, q))

#define UNARY(name, expr)                                                                 \
__kernel void name(CTPTR x, TPTR y, int n, float alpha, float beta) {                     \
    int i = get_global_id(0);                                                             \
    if (i >= n) return;                                                                   \
    float v = LD(x, i);                                                                   \
    ST(y, i, (float)(expr));                                                              \
}

inline acc_t hard_clamp(acc_t v) {
    return isnan(v) ? v : (v < 0 ? (acc_t)0 : (v > 1 ? (acc_t)1 : v));
}

inline acc_t sigmoid_acc(acc_t v) {
    if (v >= 0) return 1 / (1 + exp(-v));
    acc_t e = exp(v);
    return e / (1 + e);
}

UNARY(unary_sqrt, sqrt((acc_t)v))
UNARY(unary_exp, exp((acc_t)v))
UNARY(unary_neg, -v)
UNARY(unary_abs, fabs(v))
UNARY(unary_erf, erf((acc_t)v))
UNARY(unary_relu, (v > 0.0f || isnan(v)) ? v : 0.0f)
UNARY(unary_sigmoid, sigmoid_acc((acc_t)v))
UNARY(unary_tanh, tanh((acc_t)v))
UNARY(unary_hard_swish, (acc_t)v * hard_clamp((acc_t)v / 6 + (acc_t)0.5))
UNARY(unary_leaky_relu, v < 0.0f ? alpha * v : v)
UNARY(unary_hard_sigmoid, hard_clamp((acc_t)alpha * (acc_t)v + (acc_t)beta))

__kernel void clip(CTPTR x, TPTR y, int n, CTPTR lo, CTPTR hi, int has_lo, int has_hi) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = LD(x, i);
    if (has_lo) v = nan_max(v, LD(lo, 0));
    if (has_hi) v = nan_min(v, LD(hi, 0));
    ST(y, i, v);
}

#endif

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
