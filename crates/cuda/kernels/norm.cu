// norm.cu: Softmax along one axis and LayerNormalization over the trailing axes, one block
// of REDUCE_THREADS threads per row, accumulating in f32.

// Softmax: the tensor is viewed as (outer, n, inner); row r = (o, i) holds the n elements
// (o * n + k) * inner + i. exp(x - max) / sum keeps large inputs finite; a NaN anywhere in
// the row makes the whole row NaN, as numpy does.
#define DEFINE_SOFTMAX(T, SUFFIX)                                                            \
    extern "C" __global__ void softmax_##SUFFIX(i64 rows, i64 n, i64 inner, const T* x,     \
                                                T* y) {                                     \
        __shared__ float scratch[REDUCE_THREADS];                                           \
        for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {                                \
            i64 base = (r / inner) * n * inner + r % inner;                                 \
            float m = -f32_inf();                                                           \
            for (i64 k = threadIdx.x; k < n; k += blockDim.x)                               \
                m = nan_max(m, load(x, base + k * inner));                                  \
            m = block_max(m, scratch);                                                      \
            float sum = 0.0f;                                                               \
            for (i64 k = threadIdx.x; k < n; k += blockDim.x)                               \
                sum += expf(load(x, base + k * inner) - m);                                 \
            sum = block_sum(sum, scratch);                                                  \
            for (i64 k = threadIdx.x; k < n; k += blockDim.x)                               \
                store(y, base + k * inner, expf(load(x, base + k * inner) - m) / sum);      \
        }                                                                                   \
    }

DEFINE_SOFTMAX(float, f32)
DEFINE_SOFTMAX(half_t, f16)

// LayerNormalization: rows of n contiguous elements; scale and bias hold n elements each
// (the host expands broadcast ones first). has_bias = 0 means no bias.
#define DEFINE_LAYER_NORM(T, SUFFIX)                                                         \
    extern "C" __global__ void layer_norm_##SUFFIX(i64 rows, i64 n, float eps, int has_bias, \
                                                   const T* x, const T* scale,              \
                                                   const T* bias, T* y) {                   \
        __shared__ float scratch[REDUCE_THREADS];                                           \
        for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {                                \
            i64 base = r * n;                                                               \
            float sum = 0.0f;                                                               \
            for (i64 k = threadIdx.x; k < n; k += blockDim.x) sum += load(x, base + k);     \
            float mean = block_sum(sum, scratch) / (float)n;                                \
            float sq = 0.0f;                                                                \
            for (i64 k = threadIdx.x; k < n; k += blockDim.x) {                             \
                float d = load(x, base + k) - mean;                                         \
                sq += d * d;                                                                \
            }                                                                               \
            float inv = 1.0f / sqrtf(block_sum(sq, scratch) / (float)n + eps);              \
            for (i64 k = threadIdx.x; k < n; k += blockDim.x) {                             \
                float v = (load(x, base + k) - mean) * inv * load(scale, k);                \
                if (has_bias) v += load(bias, k);                                           \
                store(y, base + k, v);                                                      \
            }                                                                               \
        }                                                                                   \
    }

DEFINE_LAYER_NORM(float, f32)
DEFINE_LAYER_NORM(half_t, f16)
