// resize.cl: Resize along one axis at a time, with a tap table made on the host (the
// source indices i0, i1 and weights w0, w1 of every output coordinate, nearest being
// w1 == 0). X is viewed as (outer, in_len, inner) and Y as (outer, out_len, inner).

__kernel void resize_axis(CTPTR X, TPTR Y, __global const long* i0, __global const long* i1,
                          __global const float* w0, __global const float* w1, int outer,
                          int in_len, int out_len, int inner) {
    const int idx = get_global_id(0);
    if (idx >= outer * out_len * inner) return;
    const int k = idx % inner;
    const int o = (idx / inner) % out_len;
    const int p = idx / (inner * out_len);
    const long base = (long)p * in_len * inner + k;
    const float a = LD(X, base + i0[o] * inner);
    float v = a;
    if (w1[o] != 0.0f) {
        const float b = LD(X, base + i1[o] * inner);
        v = (float)((acc_t)w0[o] * a + (acc_t)w1[o] * b);
    }
    ST(Y, idx, v);
}
