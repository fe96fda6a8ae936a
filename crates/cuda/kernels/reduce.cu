// reduce.cu: ReduceSum, ReduceMean and ReduceMax over any set of axes (also
// GlobalAveragePool), in f32: one block of REDUCE_THREADS threads per output element
// (reduce_*), or, when each output reduces only a few values, one thread per output with
// a serial loop (reduce_small_*), since a block per output would leave most of its threads
// idle and spend its time in the block reduction's barriers.
//
// `kept` iterates the output elements (dims of the kept axes, `a` = their input strides);
// `reduced` iterates one output's inputs (dims of the reduced axes, `a` = input strides).
// Over no values at all: Sum gives 0, Max -inf and Mean 0/0 = NaN, as the reference does.

#define R_SUM 0
#define R_MEAN 1
#define R_MAX 2

#define DEFINE_REDUCE(T, SUFFIX)                                                             \
    extern "C" __global__ void reduce_##SUFFIX(Strided kept, Strided reduced, int kind,     \
                                               const T* x, T* y) {                          \
        __shared__ float scratch[REDUCE_THREADS];                                           \
        for (i64 o = blockIdx.x; o < kept.n; o += gridDim.x) {                              \
            i64 base, unused_b, unused_c;                                                   \
            strided_offsets(kept, o, &base, &unused_b, &unused_c);                          \
            float acc = kind == R_MAX ? -f32_inf() : 0.0f;                                  \
            for (i64 k = threadIdx.x; k < reduced.n; k += blockDim.x) {                     \
                i64 off, ob, oc;                                                            \
                strided_offsets(reduced, k, &off, &ob, &oc);                                \
                float v = load(x, base + off);                                              \
                acc = kind == R_MAX ? nan_max(acc, v) : acc + v;                            \
            }                                                                               \
            acc = kind == R_MAX ? block_max(acc, scratch) : block_sum(acc, scratch);        \
            if (kind == R_MEAN) acc = acc / (float)reduced.n;                               \
            if (threadIdx.x == 0) store(y, o, acc);                                         \
        }                                                                                   \
    }

DEFINE_REDUCE(float, f32)
DEFINE_REDUCE(half_t, f16)

#define DEFINE_REDUCE_SMALL(T, SUFFIX)                                                       \
    extern "C" __global__ void reduce_small_##SUFFIX(Strided kept, Strided reduced, int kind, \
                                                     const T* x, T* y) {                    \
        GRID_STRIDE(o, kept.n) {                                                            \
            i64 base, unused_b, unused_c;                                                   \
            strided_offsets(kept, o, &base, &unused_b, &unused_c);                          \
            float acc = kind == R_MAX ? -f32_inf() : 0.0f;                                  \
            for (i64 k = 0; k < reduced.n; ++k) {                                           \
                i64 off, ob, oc;                                                            \
                strided_offsets(reduced, k, &off, &ob, &oc);                                \
                float v = load(x, base + off);                                              \
                acc = kind == R_MAX ? nan_max(acc, v) : acc + v;                            \
            }                                                                               \
            if (kind == R_MEAN) acc = acc / (float)reduced.n;                               \
            store(y, o, acc);                                                               \
        }                                                                                   \
    }

DEFINE_REDUCE_SMALL(float, f32)
DEFINE_REDUCE_SMALL(half_t, f16)
