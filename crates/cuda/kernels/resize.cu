// resize.cu: one axis of a separable Resize. The host computes each output index's taps
// (i0, i1, w1) exactly as the reference does; nearest taps have i0 == i1 and w1 == 0. The
// tensor is viewed as (outer, len, inner) around the axis. Intermediate axes are kept in
// f32 so that an fp16 resize rounds to half once, at the end.

#define DEFINE_RESIZE_AXIS(S, SS, D, DS)                                                     \
    extern "C" __global__ void resize_axis_##SS##_##DS(i64 outer, i64 in_len, i64 out_len,  \
                                                       i64 inner, const i64* i0,            \
                                                       const i64* i1, const float* w1,      \
                                                       const S* x, D* y) {                  \
        GRID_STRIDE(i, outer * out_len * inner) {                                           \
            i64 k = i % inner, j = (i / inner) % out_len, o = i / (inner * out_len);        \
            float a = load(x, (o * in_len + i0[j]) * inner + k);                            \
            float v;                                                                        \
            if (i0[j] == i1[j]) v = a;                                                      \
            else {                                                                          \
                float b = load(x, (o * in_len + i1[j]) * inner + k);                        \
                v = (1.0f - w1[j]) * a + w1[j] * b;                                         \
            }                                                                               \
            store(y, i, v);                                                                 \
        }                                                                                   \
    }

DEFINE_RESIZE_AXIS(float, f32, float, f32)
DEFINE_RESIZE_AXIS(half_t, f16, float, f32)
DEFINE_RESIZE_AXIS(float, f32, half_t, f16)
DEFINE_RESIZE_AXIS(half_t, f16, half_t, f16)
