// cast.cl: Cast between f32, f16, i64 and bool, built per (source, destination) pair with
// SRC_* and DST_* defines. Float to integer truncates toward zero and saturates (NaN gives
// 0); anything to bool is "not equal to zero" (NaN is true); float to half rounds to
// nearest even.

#if defined(SRC_F32)
#define SRC_PTR __global const float*
#define SRC_LD(p, i) ((p)[(i)])
#define SRC_FLOAT
#elif defined(SRC_F16)
#define SRC_PTR __global const half*
#define SRC_LD(p, i) vload_half((i), (p))
#define SRC_FLOAT
#elif defined(SRC_I64)
#define SRC_PTR __global const long*
#define SRC_LD(p, i) ((p)[(i)])
#elif defined(SRC_U8)
#define SRC_PTR __global const uchar*
#define SRC_LD(p, i) ((p)[(i)])
#endif

__kernel void cast(SRC_PTR src,
#if defined(DST_F32)
                   __global float* dst,
#elif defined(DST_F16)
                   __global half* dst,
#elif defined(DST_I64)
                   __global long* dst,
#elif defined(DST_U8)
                   __global uchar* dst,
#endif
                   int n) {
    int i = get_global_id(0);
    if (i >= n) return;
#if defined(DST_U8)
    dst[i] = SRC_LD(src, i) != 0 ? 1 : 0;
#elif defined(DST_I64) && defined(SRC_FLOAT)
    dst[i] = convert_long_sat_rtz(SRC_LD(src, i));
#elif defined(DST_I64)
    dst[i] = (long)SRC_LD(src, i);
#elif defined(DST_F32) && defined(SRC_I64)
    dst[i] = convert_float_rte(SRC_LD(src, i));
#elif defined(DST_F32)
    dst[i] = (float)SRC_LD(src, i);
#elif defined(DST_F16)
    vstore_half_rte((float)SRC_LD(src, i), i, dst);
#endif
}
