// movement.cu: data movement over element bits (Transpose, Slice, Expand, Concat, Split,
// broadcasting copies), constant Pad, Gather and Cast. Movement kernels never look at
// values, only at bit patterns of 1, 2, 4 or 8 bytes, so one kernel serves every dtype.

// out[c-offset of i] = in[a-offset of i]: set `a` holds the input strides (negative for a
// reversed Slice, 0 for a broadcast axis), set `c` the output strides.
#define DEFINE_COPY(E, SUFFIX)                                                               \
    extern "C" __global__ void copy_##SUFFIX(Strided s, const E* in, E* out) {              \
        GRID_STRIDE(i, s.n) {                                                               \
            i64 oa, ob, oc;                                                                 \
            strided_offsets(s, i, &oa, &ob, &oc);                                           \
            out[oc] = in[oa];                                                               \
        }                                                                                   \
    }

DEFINE_COPY(unsigned char, b8)
DEFINE_COPY(unsigned short, b16)
DEFINE_COPY(unsigned int, b32)
DEFINE_COPY(unsigned long long, b64)

// Constant Pad: `s.dims` is the output shape, `s.a` the input strides, `s.b[d]` the number
// of cells padded before axis d (negative crops) and `s.c[d]` the input extent of axis d.
#define DEFINE_PAD(E, SUFFIX)                                                                \
    extern "C" __global__ void pad_##SUFFIX(Strided s, unsigned long long fill, const E* in, \
                                            E* out) {                                       \
        GRID_STRIDE(i, s.n) {                                                               \
            i64 rest = i, src = 0;                                                          \
            bool inside = true;                                                             \
            for (int d = (int)s.rank - 1; d >= 0; --d) {                                    \
                i64 coord = rest % s.dims[d] - s.b[d];                                      \
                rest /= s.dims[d];                                                          \
                if (coord < 0 || coord >= s.c[d]) inside = false;                           \
                src += coord * s.a[d];                                                      \
            }                                                                               \
            out[i] = inside ? in[src] : (E)fill;                                            \
        }                                                                                   \
    }

DEFINE_PAD(unsigned char, b8)
DEFINE_PAD(unsigned short, b16)
DEFINE_PAD(unsigned int, b32)
DEFINE_PAD(unsigned long long, b64)

// Gather along one axis: data viewed as (outer, axis_len, inner), indices flat (count),
// output (outer, count, inner). A negative index counts from the end; one out of range sets
// the status word and reads element 0 instead, so the kernel never reads out of bounds.
#define DEFINE_GATHER(E, SUFFIX)                                                             \
    extern "C" __global__ void gather_##SUFFIX(i64 n, i64 axis_len, i64 count, i64 inner,   \
                                               const i64* indices, const E* in, E* out,     \
                                               int* status) {                               \
        GRID_STRIDE(i, n) {                                                                 \
            i64 k = i % inner;                                                              \
            i64 j = (i / inner) % count;                                                    \
            i64 o = i / (inner * count);                                                    \
            i64 index = indices[j];                                                         \
            if (index < 0) index += axis_len;                                               \
            if (index < 0 || index >= axis_len) {                                           \
                report(status, STATUS_INDEX_OUT_OF_RANGE);                                  \
                index = 0;                                                                  \
            }                                                                               \
            out[i] = axis_len > 0 ? in[(o * axis_len + index) * inner + k] : (E)0;          \
        }                                                                                   \
    }

DEFINE_GATHER(unsigned char, b8)
DEFINE_GATHER(unsigned short, b16)
DEFINE_GATHER(unsigned int, b32)
DEFINE_GATHER(unsigned long long, b64)

// Cast between storage types through double, which holds every f32, f16 and bool exactly.
// Float to i64 truncates toward zero and saturates (NaN gives 0), as Rust's `as` does on
// the reference side; anything to bool is `!= 0` (so NaN is true).
__device__ __forceinline__ double to_double(float v) { return (double)v; }
__device__ __forceinline__ double to_double(half_t v) { return (double)h2f(v); }
__device__ __forceinline__ double to_double(i64 v) { return (double)v; }
__device__ __forceinline__ double to_double(unsigned char v) { return v ? 1.0 : 0.0; }

__device__ __forceinline__ void from_double(float* p, i64 i, double v) { p[i] = (float)v; }
__device__ __forceinline__ void from_double(half_t* p, i64 i, double v) { p[i] = f2h((float)v); }
__device__ __forceinline__ void from_double(unsigned char* p, i64 i, double v) { p[i] = v != 0.0 ? 1 : 0; }
__device__ __forceinline__ void from_double(i64* p, i64 i, double v) {
    i64 r;
    if (v != v) r = 0;
    else if (v >= 9223372036854775807.0) r = 9223372036854775807LL;
    else if (v <= -9223372036854775808.0) r = (i64)(-9223372036854775807LL - 1);
    else r = (i64)v;
    p[i] = r;
}

#define DEFINE_CAST(S, SS, D, DS)                                                            \
    extern "C" __global__ void cast_##SS##_##DS(i64 n, const S* in, D* out) {               \
        GRID_STRIDE(i, n) { from_double(out, i, to_double(in[i])); }                        \
    }

// Every pair of distinct storage types (a same-type Cast is a copy on the host side).
DEFINE_CAST(float, f32, half_t, f16)
DEFINE_CAST(float, f32, i64, i64)
DEFINE_CAST(float, f32, unsigned char, u8)
DEFINE_CAST(half_t, f16, float, f32)
DEFINE_CAST(half_t, f16, i64, i64)
DEFINE_CAST(half_t, f16, unsigned char, u8)
DEFINE_CAST(i64, i64, half_t, f16)
DEFINE_CAST(i64, i64, unsigned char, u8)
DEFINE_CAST(unsigned char, u8, float, f32)
DEFINE_CAST(unsigned char, u8, half_t, f16)
DEFINE_CAST(unsigned char, u8, i64, i64)

// i64 to f32 rounds once, directly (through double it could round twice past 2^53).
extern "C" __global__ void cast_i64_f32(i64 n, const i64* in, float* out) {
    GRID_STRIDE(i, n) { out[i] = (float)in[i]; }
}
