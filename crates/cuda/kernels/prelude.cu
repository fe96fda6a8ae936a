// prelude.cu: what every kernel family shares. It is prepended to each family's source
// before NVRTC compiles it, so the families stay independent compilation units with no
// include path and no CUDA toolkit headers (NVRTC ships none we rely on).
//
// Storage types: f32 is `float`, f16 is `half_t` (the raw 16 bits, converted with PTX `cvt`
// so that no cuda_fp16.h is needed), i64 is `long long`, bool is `unsigned char`.
// Arithmetic is done in f32 whatever the storage (f16 storage, f32 accumulation).

typedef unsigned short half_t;
typedef long long i64;

#define MAX_RANK 8

__device__ __forceinline__ float h2f(half_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ half_t f2h(float f) {
    half_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Loads and stores in compute precision, overloaded on the storage type.
__device__ __forceinline__ float load(const float* p, i64 i) { return p[i]; }
__device__ __forceinline__ float load(const half_t* p, i64 i) { return h2f(p[i]); }
__device__ __forceinline__ void store(float* p, i64 i, float v) { p[i] = v; }
__device__ __forceinline__ void store(half_t* p, i64 i, float v) { p[i] = f2h(v); }

__device__ __forceinline__ float f32_nan() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ float f32_inf() { return __int_as_float(0x7f800000); }

// max that propagates NaN from either side, as numpy's maximum does (fmaxf drops it).
__device__ __forceinline__ float nan_max(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    return a >= b ? a : b;
}

__device__ __forceinline__ float nan_min(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    return a <= b ? a : b;
}

// A row-major iteration space of up to MAX_RANK axes with up to three operand stride sets
// (0 for a broadcast axis). Laid out exactly as the host's `Strided` struct.
struct Strided {
    i64 rank;
    i64 n;
    i64 dims[MAX_RANK];
    i64 a[MAX_RANK];
    i64 b[MAX_RANK];
    i64 c[MAX_RANK];
    i64 a_offset;
    i64 b_offset;
    i64 c_offset;
};

// Offsets of flat index `i` in the three stride sets.
__device__ __forceinline__ void strided_offsets(const Strided& s, i64 i, i64* oa, i64* ob, i64* oc) {
    i64 a = s.a_offset, b = s.b_offset, c = s.c_offset;
    for (int d = (int)s.rank - 1; d >= 0; --d) {
        i64 coord = i % s.dims[d];
        i /= s.dims[d];
        a += coord * s.a[d];
        b += coord * s.b[d];
        c += coord * s.c[d];
    }
    *oa = a;
    *ob = b;
    *oc = c;
}

#define GRID_STRIDE(i, n) \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)blockDim.x * gridDim.x)

// Status codes a kernel reports through the run's status word (first error wins).
#define STATUS_INDEX_OUT_OF_RANGE 1
#define STATUS_DIVISION_BY_ZERO 2

__device__ __forceinline__ void report(int* status, int code) {
    atomicCAS(status, 0, code);
}

// Block-wide reductions for kernels launched with REDUCE_THREADS threads per block. Every
// thread of the block must call them; each returns the result to every thread.
#define REDUCE_THREADS 256

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int half = REDUCE_THREADS / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
        __syncthreads();
    }
    float total = scratch[0];
    __syncthreads();
    return total;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int half = REDUCE_THREADS / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half)
            scratch[threadIdx.x] = nan_max(scratch[threadIdx.x], scratch[threadIdx.x + half]);
        __syncthreads();
    }
    float total = scratch[0];
    __syncthreads();
    return total;
}
