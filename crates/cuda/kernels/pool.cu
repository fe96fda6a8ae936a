// pool.cu: MaxPool and AveragePool over 1 to 3 spatial axes, and im2col for Conv. The host
// resolves the window geometry (auto_pad, ceil_mode, defaults) exactly as the reference
// does and passes it per axis; unused trailing axes have extent 1, kernel 1, stride 1.

struct Window {
    i64 planes;      // N * C for pooling, C for im2col
    i64 in[3];
    i64 kernel[3];
    i64 stride[3];
    i64 dilation[3];
    i64 pad_begin[3];
    i64 pad_end[3];
    i64 out[3];
};

// Padded cells never take part in a max or a sum. With count_include_pad the divisor is
// the number of taps inside the padded input (ceil_mode taps past the padded end are not
// counted), otherwise the number of real cells read. A window that reads no cell gives
// `empty` (MaxPool: the lowest finite value of the model's dtype, which the host chooses,
// then stored like any other result) or 0 (AveragePool), as the reference does.
#define DEFINE_POOL(T, SUFFIX)                                                               \
    extern "C" __global__ void pool_##SUFFIX(Window w, int average, int count_include_pad,  \
                                             float empty, const T* x, T* y) {               \
        i64 out_plane = w.out[0] * w.out[1] * w.out[2];                                     \
        i64 in_plane = w.in[0] * w.in[1] * w.in[2];                                         \
        GRID_STRIDE(i, w.planes * out_plane) {                                              \
            i64 p = i / out_plane, q = i % out_plane;                                       \
            i64 o2 = q % w.out[2], o1 = (q / w.out[2]) % w.out[1], o0 = q / (w.out[2] * w.out[1]); \
            i64 o[3] = {o0, o1, o2};                                                        \
            float acc = average ? 0.0f : -f32_inf();                                        \
            i64 real = 0, padded = 1;                                                       \
            for (int d = 0; d < 3; ++d) {                                                   \
                i64 inside = 0;                                                             \
                for (i64 t = 0; t < w.kernel[d]; ++t)                                       \
                    if (o[d] * w.stride[d] + t * w.dilation[d] < w.pad_begin[d] + w.in[d] + w.pad_end[d]) \
                        ++inside;                                                           \
                padded *= inside;                                                           \
            }                                                                               \
            for (i64 t0 = 0; t0 < w.kernel[0]; ++t0) {                                      \
                i64 c0 = o0 * w.stride[0] + t0 * w.dilation[0] - w.pad_begin[0];           \
                if (c0 < 0 || c0 >= w.in[0]) continue;                                      \
                for (i64 t1 = 0; t1 < w.kernel[1]; ++t1) {                                  \
                    i64 c1 = o1 * w.stride[1] + t1 * w.dilation[1] - w.pad_begin[1];       \
                    if (c1 < 0 || c1 >= w.in[1]) continue;                                  \
                    for (i64 t2 = 0; t2 < w.kernel[2]; ++t2) {                              \
                        i64 c2 = o2 * w.stride[2] + t2 * w.dilation[2] - w.pad_begin[2];   \
                        if (c2 < 0 || c2 >= w.in[2]) continue;                              \
                        float v = load(x, p * in_plane + (c0 * w.in[1] + c1) * w.in[2] + c2); \
                        acc = average ? acc + v : nan_max(acc, v);                          \
                        ++real;                                                             \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
            float result;                                                                   \
            if (real == 0) result = average ? 0.0f : empty;                                 \
            else if (average) result = acc / (float)(count_include_pad ? padded : real);    \
            else result = acc;                                                              \
            store(y, i, result);                                                            \
        }                                                                                   \
    }

DEFINE_POOL(float, f32)
DEFINE_POOL(half_t, f16)

// im2col for one batch element: col[(c * K + k) * P + p] is the input cell tap k of output
// position p reads in channel c (0 in the padding), where K is the kernel volume and P the
// output volume. Channels of one group are consecutive, so group g's rows are a block.
#define DEFINE_IM2COL(T, SUFFIX)                                                             \
    extern "C" __global__ void im2col_##SUFFIX(Window w, i64 batch, const T* x, T* col) {   \
        i64 kvol = w.kernel[0] * w.kernel[1] * w.kernel[2];                                 \
        i64 pvol = w.out[0] * w.out[1] * w.out[2];                                          \
        i64 in_plane = w.in[0] * w.in[1] * w.in[2];                                         \
        i64 per_item = w.planes * kvol * pvol;                                              \
        GRID_STRIDE(i, batch * per_item) {                                                  \
            i64 b = i / per_item, r = i % per_item;                                         \
            i64 p = r % pvol, row = r / pvol;                                               \
            i64 k = row % kvol, c = row / kvol;                                             \
            i64 k2 = k % w.kernel[2], k1 = (k / w.kernel[2]) % w.kernel[1], k0 = k / (w.kernel[2] * w.kernel[1]); \
            i64 p2 = p % w.out[2], p1 = (p / w.out[2]) % w.out[1], p0 = p / (w.out[2] * w.out[1]); \
            i64 c0 = p0 * w.stride[0] + k0 * w.dilation[0] - w.pad_begin[0];               \
            i64 c1 = p1 * w.stride[1] + k1 * w.dilation[1] - w.pad_begin[1];               \
            i64 c2 = p2 * w.stride[2] + k2 * w.dilation[2] - w.pad_begin[2];               \
            bool inside = c0 >= 0 && c0 < w.in[0] && c1 >= 0 && c1 < w.in[1] && c2 >= 0 && c2 < w.in[2]; \
            T zero = 0;                                                                     \
            col[i] = inside ? x[(b * w.planes + c) * in_plane + (c0 * w.in[1] + c1) * w.in[2] + c2] : zero; \
        }                                                                                   \
    }

DEFINE_IM2COL(float, f32)
DEFINE_IM2COL(half_t, f16)
