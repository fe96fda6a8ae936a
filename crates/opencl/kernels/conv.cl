// conv.cl: depthwise (and channel-multiplier) convolution, where every output channel
// reads one input channel, so there is nothing to share between channels and a GEMM would
// waste its tile. One work-item computes one output row of one plane, DW_CHUNK columns at
// a time in a private accumulator row: for each tap it sweeps the columns whose input is
// inside the image (a range computed up front, so the sweep has no bounds checks and reads
// contiguously for stride 1), which compilers turn into vector code.
//
// geo0 = (H, W, KH, KW, SH, SW, PH, PW), geo1 = (DH, DW, OH, OW, C_in, multiplier).
// Global (OH, N · C_out). Epilogue as in gemm.cl.

#define DW_CHUNK 64

__kernel void depthwise(CTPTR X, CTPTR Wt, TPTR Y, CTPTR bias, int has_bias, CTPTR R,
                        int has_res, int act, float act_a, float act_b, int8 geo0,
                        int8 geo1) {
    const int oh = get_global_id(0);
    const int plane = get_global_id(1);
    const int OH = geo1.s2, OW = geo1.s3;
    if (oh >= OH) return;
    const int H = geo0.s0, W = geo0.s1, KH = geo0.s2, KW = geo0.s3;
    const int SH = geo0.s4, SW = geo0.s5, PH = geo0.s6, PW = geo0.s7;
    const int DH = geo1.s0, DW = geo1.s1;
    const int c_out_total = geo1.s4 * geo1.s5;
    const int n = plane / c_out_total;
    const int co = plane - n * c_out_total;
    const int ci = co / geo1.s5;
    CTPTR x = X + ((long)n * geo1.s4 + ci) * H * W;
    CTPTR w = Wt + (long)co * KH * KW;
    const float b = has_bias ? LD(bias, co) : 0.0f;
    const long y_row = ((long)plane * OH + oh) * OW;
    for (int c0 = 0; c0 < OW; c0 += DW_CHUNK) {
        const int len = min(DW_CHUNK, OW - c0);
        float acc[DW_CHUNK];
        for (int j = 0; j < DW_CHUNK; ++j) acc[j] = 0.0f;
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = oh * SH - PH + kh * DH;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                const float wv = LD(w, kh * KW + kw);
                // Columns c0 + j with 0 <= (c0 + j)·SW - PW + kw·DW < W.
                const int lo_num = PW - kw * DW;
                const int hi_num = W - 1 + PW - kw * DW;
                const int jlo = max(0, (lo_num > 0 ? (lo_num + SW - 1) / SW : 0) - c0);
                const int jhi = min(len, (hi_num >= 0 ? hi_num / SW + 1 : 0) - c0);
                CTPTR xr = x + (long)ih * W + kw * DW - PW;
                for (int j = jlo; j < jhi; ++j)
                    acc[j] = fma(LD(xr, (long)(c0 + j) * SW), wv, acc[j]);
            }
        }
        for (int j = 0; j < len; ++j) {
            float v = acc[j] + b;
            if (has_res) v += LD(R, y_row + c0 + j);
            ST(Y, y_row + c0 + j, activate(v, act, act_a, act_b));
        }
    }
}
