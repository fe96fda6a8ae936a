// norm.cl: Softmax (one work-item per (outer, inner) lane along the axis), LayerNorm (one
// work-item per normalised row) and BatchNormalization in inference mode (one work-item
// per element). Sums run in acc_t (double where the device has it).

__kernel void softmax(CTPTR X, TPTR Y, int outer, int len, int inner) {
    const int lane = get_global_id(0);
    if (lane >= outer * inner) return;
    const int o = lane / inner, i = lane - o * inner;
    const long base = (long)o * len * inner + i;
    float m = -INFINITY;
    for (int k = 0; k < len; ++k) m = fmax(m, LD(X, base + (long)k * inner));
    acc_t sum = 0;
    for (int k = 0; k < len; ++k) sum += exp((acc_t)LD(X, base + (long)k * inner) - (acc_t)m);
    for (int k = 0; k < len; ++k) {
        const acc_t e = exp((acc_t)LD(X, base + (long)k * inner) - (acc_t)m);
        ST(Y, base + (long)k * inner, (float)(e / sum));
    }
}

// Scale and B broadcast to the normalised shape (rank nrank, dims ndims): element c of a
// row reads them at the offsets their strides (0 on broadcast axes) give; has_bias == 0
// means no B.
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
        int is = 0, ib = 0;
        offsets2(c, nrank, ndims, sscale, sbias, &is, &ib);
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
