// elementwise.cu: unary activations, broadcasting binary arithmetic, Equal and Where.
// Op codes (U_*, B_*) are #defines that concord-core's op table generates and
// src/kernels.rs prepends to this file.

// clamp to [0, 1] that keeps NaN.
__device__ __forceinline__ float unit_clamp(float v) {
    return v != v ? v : fminf(fmaxf(v, 0.0f), 1.0f);
}

__device__ __forceinline__ float unary_op(int op, float v, float alpha, float beta) {
    switch (op) {
    case U_SQRT: return sqrtf(v);
    case U_EXP: return expf(v);
    case U_NEG: return -v;
    case U_ABS: return fabsf(v);
    case U_ERF: return erff(v);
    case U_RELU: return (v > 0.0f || v != v) ? v : 0.0f;
    case U_SIGMOID: return v >= 0.0f ? 1.0f / (1.0f + expf(-v)) : expf(v) / (1.0f + expf(v));
    case U_TANH: return tanhf(v);
    case U_HARD_SWISH: return v * unit_clamp(v / 6.0f + 0.5f);
    case U_LEAKY_RELU: return v < 0.0f ? alpha * v : v;
    case U_HARD_SIGMOID: return unit_clamp(alpha * v + beta);
    case U_RECIPROCAL: return __frcp_rn(v);
    case U_CLIP: return nan_min(nan_max(v, alpha), beta);
    default: return f32_nan();
    }
}

#define DEFINE_UNARY(T, SUFFIX)                                                              \
    extern "C" __global__ void unary_##SUFFIX(i64 n, int op, float alpha, float beta,      \
                                              const T* x, T* y) {                          \
        GRID_STRIDE(i, n) { store(y, i, unary_op(op, load(x, i), alpha, beta)); }           \
    }

DEFINE_UNARY(float, f32)
DEFINE_UNARY(half_t, f16)

__device__ __forceinline__ float binary_float(int op, float p, float q) {
    switch (op) {
    case B_ADD: return p + q;
    case B_SUB: return p - q;
    case B_MUL: return p * q;
    case B_DIV: return p / q;
    case B_POW: return powf(p, q);
    case B_FMOD: return fmodf(p, q);
    case B_MOD: {
        float r = fmodf(p, q);
        return (r != 0.0f && ((r < 0.0f) != (q < 0.0f))) ? r + q : r;
    }
    default: return f32_nan();
    }
}

#define DEFINE_BINARY_FLOAT(T, SUFFIX)                                                       \
    extern "C" __global__ void binary_##SUFFIX(Strided s, int op, const T* a, const T* b,   \
                                               T* y) {                                      \
        GRID_STRIDE(i, s.n) {                                                               \
            i64 oa, ob, oc;                                                                 \
            strided_offsets(s, i, &oa, &ob, &oc);                                           \
            store(y, oc, binary_float(op, load(a, oa), load(b, ob)));                       \
        }                                                                                   \
    }

DEFINE_BINARY_FLOAT(float, f32)
DEFINE_BINARY_FLOAT(half_t, f16)

// i64 arithmetic wraps on overflow (two's complement through unsigned), as numpy does.
extern "C" __global__ void binary_i64(Strided s, int op, const i64* a, const i64* b, i64* y,
                                      int* status) {
    GRID_STRIDE(i, s.n) {
        i64 oa, ob, oc;
        strided_offsets(s, i, &oa, &ob, &oc);
        i64 p = a[oa], q = b[ob];
        unsigned long long up = (unsigned long long)p, uq = (unsigned long long)q;
        i64 r = 0;
        switch (op) {
        case B_ADD: r = (i64)(up + uq); break;
        case B_SUB: r = (i64)(up - uq); break;
        case B_MUL: r = (i64)(up * uq); break;
        case B_DIV:
        case B_FMOD:
        case B_MOD:
            if (q == 0) {
                report(status, STATUS_DIVISION_BY_ZERO);
                r = 0;
            } else if (q == -1) {
                // i64::MIN / -1 overflows; it wraps to i64::MIN, and any remainder is 0.
                r = op == B_DIV ? (i64)(0ull - up) : 0;
            } else if (op == B_DIV) {
                r = p / q;
            } else {
                r = p % q;
                if (op == B_MOD && r != 0 && ((r < 0) != (q < 0))) r += q;
            }
            break;
        default: r = 0; break;
        }
        y[oc] = r;
    }
}

#define DEFINE_EQUAL(T, SUFFIX, LOAD)                                                        \
    extern "C" __global__ void equal_##SUFFIX(Strided s, const T* a, const T* b,            \
                                              unsigned char* y) {                           \
        GRID_STRIDE(i, s.n) {                                                               \
            i64 oa, ob, oc;                                                                 \
            strided_offsets(s, i, &oa, &ob, &oc);                                           \
            y[oc] = (LOAD(a, oa) == LOAD(b, ob)) ? 1 : 0;                                    \
        }                                                                                   \
    }

#define RAW(p, i) ((p)[i])
DEFINE_EQUAL(float, f32, RAW)
DEFINE_EQUAL(half_t, f16, load)
DEFINE_EQUAL(i64, i64, RAW)
DEFINE_EQUAL(unsigned char, u8, RAW)

// Where over element bits: the condition's strides are set `a`, X's set `b` and Y's set
// `c`; the output is contiguous.
#define DEFINE_WHERE(E, SUFFIX)                                                              \
    extern "C" __global__ void where_##SUFFIX(Strided s, const unsigned char* cond,         \
                                              const E* x, const E* y, E* out) {             \
        GRID_STRIDE(i, s.n) {                                                               \
            i64 oc, ox, oy;                                                                 \
            strided_offsets(s, i, &oc, &ox, &oy);                                           \
            out[i] = cond[oc] ? x[ox] : y[oy];                                              \
        }                                                                                   \
    }

DEFINE_WHERE(unsigned char, b8)
DEFINE_WHERE(unsigned short, b16)
DEFINE_WHERE(unsigned int, b32)
DEFINE_WHERE(unsigned long long, b64)

// Per-channel affine maps: BatchNormalization (inference) and Conv's bias.
#define DEFINE_CHANNEL(T, SUFFIX)                                                            \
    extern "C" __global__ void batch_norm_##SUFFIX(i64 n, i64 channels, i64 inner, float eps, \
                                                   const T* x, const T* scale, const T* bias, \
                                                   const T* mean, const T* var, T* y) {       \
        GRID_STRIDE(i, n) {                                                                 \
            i64 c = (i / inner) % channels;                                                 \
            float inv = 1.0f / sqrtf(load(var, c) + eps);                                   \
            store(y, i, (load(x, i) - load(mean, c)) * inv * load(scale, c) + load(bias, c)); \
        }                                                                                   \
    }                                                                                       \
    extern "C" __global__ void bias_add_##SUFFIX(i64 n, i64 channels, i64 inner,            \
                                                 const T* bias, T* y) {                     \
        GRID_STRIDE(i, n) {                                                                 \
            i64 c = (i / inner) % channels;                                                 \
            store(y, i, load(y, i) + load(bias, c));                                        \
        }                                                                                   \
    }

DEFINE_CHANNEL(float, f32)
DEFINE_CHANNEL(half_t, f16)
