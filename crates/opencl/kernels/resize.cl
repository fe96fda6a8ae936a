// resize.cl: Resize along one axis at a time, with a tap table made on the host (the
// source indices i0, i1 and weights w0, w1 of every output coordinate, nearest being
// w1 == 0). X is viewed as (outer, in_len, inner) and Y as (outer, out_len, inner). CPU
// devices resize the last two axes in one pass instead (resize_hw, below).

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

// The CPU-device kernel for Resize of the last two axes only (what image models do): both
// axes in one pass, one work-item per output row of one plane, the row's two source rows
// and its weights read once and the columns walked in a loop, so the per-element index
// arithmetic and the intermediate image of two passes are gone. Each axis blends as
// resize_axis does (w1 == 0 takes the first source alone), the rows' blend of the columns'
// blends in acc_t without rounding between. X is (planes, H, W), Y (planes, OH, OW); the
// tables are resize_axis's, per axis. Global (OH, planes).
__kernel void resize_hw(CTPTR X, TPTR Y, __global const long* h0, __global const long* h1,
                        __global const float* hw0, __global const float* hw1,
                        __global const long* c0, __global const long* c1,
                        __global const float* cw0, __global const float* cw1, int H, int W,
                        int OH, int OW, int planes) {
    const int oh = get_global_id(0);
    const int p = get_global_id(1);
    if (oh >= OH || p >= planes) return;
    CTPTR x = X + (long)p * H * W;
    CTPTR r0 = x + h0[oh] * W;
    CTPTR r1 = x + h1[oh] * W;
    const acc_t v0 = hw0[oh], v1 = hw1[oh];
    const long y_row = ((long)p * OH + oh) * OW;
    for (int ow = 0; ow < OW; ++ow) {
        const long j0 = c0[ow], j1 = c1[ow];
        const acc_t u0 = cw0[ow], u1 = cw1[ow];
        acc_t top = LD(r0, j0);
        if (u1 != 0) top = u0 * top + u1 * (acc_t)LD(r0, j1);
        acc_t v = top;
        if (v1 != 0) {
            acc_t bottom = LD(r1, j0);
            if (u1 != 0) bottom = u0 * bottom + u1 * (acc_t)LD(r1, j1);
            v = v0 * top + v1 * bottom;
        }
        ST(Y, y_row + ow, (float)v);
    }
}
