// norm.cl: Softmax (one work-item per (outer, inner) lane along the axis), LayerNorm (one
// work-item per normalised row) and BatchNormalization in inference mode (one work-item
// per element). Sums run in acc_t (double where the device has it); Softmax's exp runs
// in float (each term at most a few ulp off, well inside the tolerance model's normalize
// level; exp in double cost PoCL twice as much on attention's short rows). Softmax over a
// contiguous axis and LayerNorm also have a work-group-per-row form (softmax_rows,
// layer_norm_rows) that reduces in local memory, and Softmax over a contiguous axis a
// CPU-device form with vector exps (softmax_vec).

// Work-items of a row kernel's work-group at most; the launch's local size is a power of
// two no larger.
#define ROW_GROUP 64

// The work-group's maximum (op 0) or sum (op 1) of each item's `v`, in every item. The
// local size must be a power of two; every item of the group must call it.
inline acc_t group_reduce(__local acc_t *part, acc_t v, int op) {
    const int t = get_local_id(0);
    part[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (t < s) part[t] = op == 0 ? fmax(part[t], part[t + s]) : part[t] + part[t + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const acc_t r = part[0];
    // No item may overwrite part[0] (the next reduction) before every item has read it.
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

__kernel void softmax(CTPTR X, TPTR Y, int outer, int len, int inner) {
    const int lane = get_global_id(0);
    if (lane >= outer * inner) return;
    const int o = lane / inner, i = lane - o * inner;
    const long base = (long)o * len * inner + i;
    float m = -INFINITY;
    for (int k = 0; k < len; ++k) m = fmax(m, LD(X, base + (long)k * inner));
    acc_t sum = 0;
#if defined(T_F32)
    // Each exp once: Y holds the float terms until they are divided (exactly what the
    // third pass of the f16 form recomputes; f16 storage would round them).
    for (int k = 0; k < len; ++k) {
        const float e = exp(LD(X, base + (long)k * inner) - m);
        sum += e;
        ST(Y, base + (long)k * inner, e);
    }
    for (int k = 0; k < len; ++k) {
        const long at = base + (long)k * inner;
        ST(Y, at, (float)((acc_t)LD(Y, at) / sum));
    }
#else
    for (int k = 0; k < len; ++k) sum += exp(LD(X, base + (long)k * inner) - m);
    for (int k = 0; k < len; ++k) {
        const acc_t e = exp(LD(X, base + (long)k * inner) - m);
        ST(Y, base + (long)k * inner, (float)(e / sum));
    }
#endif
}

// The exps of x[k0 .. k0 + 16) - m on one float16 (lanes past len are exp(-inf) = 0): the
// vector exp, which on PoCL cost half the scalar one per value.
inline float16 exp16_row(CTPTR x, int k0, int len, float m) {
    float t[16];
    const int left = min(16, len - k0);
    for (int j = 0; j < 16; ++j) t[j] = j < left ? LD(x, k0 + j) - m : -INFINITY;
    return exp(vload16(0, t));
}

// Softmax over a contiguous axis (inner == 1) on CPU devices: one work-item per row, its
// exps computed 16 at a time. Each term may differ from the scalar exp's by an ulp or two;
// the tolerance model's normalize level allows about a hundred.
__kernel void softmax_vec(CTPTR X, TPTR Y, int rows, int len) {
    const int r = get_global_id(0);
    if (r >= rows) return;
    CTPTR x = X + (long)r * len;
    TPTR y = Y + (long)r * len;
    float m = -INFINITY;
    for (int k = 0; k < len; ++k) m = fmax(m, LD(x, k));
    acc_t sum = 0;
    for (int k0 = 0; k0 < len; k0 += 16) {
        float t[16];
        vstore16(exp16_row(x, k0, len, m), 0, t);
        const int left = min(16, len - k0);
        for (int j = 0; j < left; ++j) {
            sum += t[j];
#if defined(T_F32)
            // Y holds the float terms until they are divided.
            ST(y, k0 + j, t[j]);
#endif
        }
    }
#if defined(T_F32)
    for (int k = 0; k < len; ++k) ST(y, k, (float)((acc_t)LD(y, k) / sum));
#else
    // f16 storage would round the terms: compute them again (the same vector exps).
    for (int k0 = 0; k0 < len; k0 += 16) {
        float t[16];
        vstore16(exp16_row(x, k0, len, m), 0, t);
        for (int j = 0; j < min(16, len - k0); ++j) ST(y, k0 + j, (float)((acc_t)t[j] / sum));
    }
#endif
}

// Softmax over a contiguous axis (inner == 1): work-group r normalises row r, its items
// striding over the row. The launch has exactly rows work-groups.
__kernel void softmax_rows(CTPTR X, TPTR Y, int len) {
    __local acc_t part[ROW_GROUP];
    const int t = get_local_id(0), step = get_local_size(0);
    const long base = (long)get_group_id(0) * len;
    float m = -INFINITY;
    for (int k = t; k < len; k += step) m = fmax(m, LD(X, base + k));
    // Exact: the maximum of floats is one of them.
    const float mx = (float)group_reduce(part, m, 0);
    acc_t sum = 0;
    for (int k = t; k < len; k += step) sum += exp(LD(X, base + k) - mx);
    const acc_t total = group_reduce(part, sum, 1);
    for (int k = t; k < len; k += step) ST(Y, base + k, (float)(exp(LD(X, base + k) - mx) / total));
}

// Scale and B broadcast to the normalised shape (rank nrank, dims ndims): element c of a
// row reads them at the offsets their strides (0 on broadcast axes) give, or at c itself
// with nrank 0 (both of the normalised shape, the usual case: no index arithmetic per
// element); has_bias == 0 means no B.
__kernel void layer_norm(CTPTR X, CTPTR scale, CTPTR bias, TPTR Y, int rows, int cols,
                         int nrank, int8 ndims, int8 sscale, int8 sbias, int has_bias,
                         float epsilon) {
    const int r = get_global_id(0);
    if (r >= rows) return;
    const long base = (long)r * cols;
    acc_t sum = 0;
    for (int c = 0; c < cols; ++c) sum += LD(X, base + c);
    const acc_t mean = sum / cols;
    acc_t sq = 0;
    for (int c = 0; c < cols; ++c) {
        const acc_t d = LD(X, base + c) - mean;
        sq += d * d;
    }
    const acc_t inv = 1 / sqrt(sq / cols + (acc_t)epsilon);
    for (int c = 0; c < cols; ++c) {
        int is = c, ib = c;
        if (nrank > 0) offsets2(c, nrank, ndims, sscale, sbias, &is, &ib);
        acc_t v = ((acc_t)LD(X, base + c) - mean) * inv * (acc_t)LD(scale, is);
        if (has_bias) v += (acc_t)LD(bias, ib);
        ST(Y, base + c, (float)v);
    }
}

// layer_norm with work-group r normalising row r (arguments as there, less rows); the
// launch has exactly rows work-groups.
__kernel void layer_norm_rows(CTPTR X, CTPTR scale, CTPTR bias, TPTR Y,
                              __global const long* restrict P) {
    const int cols = P_INT(0);
    const int nrank = P_INT(1);
    const int8 ndims = P_INT8(2);
    const int8 sscale = P_INT8(10);
    const int8 sbias = P_INT8(18);
    const int has_bias = P_INT(26);
    const float epsilon = P_FLOAT(27);
    __local acc_t part[ROW_GROUP];
    const int t = get_local_id(0), step = get_local_size(0);
    const long base = (long)get_group_id(0) * cols;
    acc_t sum = 0;
    for (int c = t; c < cols; c += step) sum += LD(X, base + c);
    const acc_t mean = group_reduce(part, sum, 1) / cols;
    acc_t sq = 0;
    for (int c = t; c < cols; c += step) {
        const acc_t d = LD(X, base + c) - mean;
        sq += d * d;
    }
    const acc_t inv = 1 / sqrt(group_reduce(part, sq, 1) / cols + (acc_t)epsilon);
    for (int c = t; c < cols; c += step) {
        int is = c, ib = c;
        if (nrank > 0) offsets2(c, nrank, ndims, sscale, sbias, &is, &ib);
        acc_t v = ((acc_t)LD(X, base + c) - mean) * inv * (acc_t)LD(scale, is);
        if (has_bias) v += (acc_t)LD(bias, ib);
        ST(Y, base + c, (float)v);
    }
}

__kernel void batch_norm(CTPTR X, CTPTR scale, CTPTR bias, CTPTR mean, CTPTR var, TPTR Y,
                         int n, int channels, int inner, float epsilon) {
    const int i = get_global_id(0);
    if (i >= n) return;
    const int c = (i / inner) % channels;
    const acc_t v = ((acc_t)LD(X, i) - (acc_t)LD(mean, c))
                    / sqrt((acc_t)LD(var, c) + (acc_t)epsilon) * (acc_t)LD(scale, c)
                    + (acc_t)LD(bias, c);
    ST(Y, i, (float)v);
}
