// conv.cl: depthwise (and channel-multiplier) convolution, where every output channel
// reads one input channel, so there is nothing to share between channels and a GEMM would
// waste its tile. One work-item computes one output element; consecutive work-items take
// consecutive output columns, so neighbouring loads are contiguous.
//
// geo0 = (H, W, KH, KW, SH, SW, PH, PW), geo1 = (DH, DW, OH, OW, C_in, multiplier).
// Global size (OW, OH, N · C_out). Epilogue as in gemm.cl.

__kernel void depthwise(CTPTR X, CTPTR Wt, TPTR Y, CTPTR bias, int has_bias, CTPTR R,
                        int has_res, int act, float act_a, float act_b, int8 geo0,
                        int8 geo1) {
    const int ow = get_global_id(0);
    const int oh = get_global_id(1);
    const int plane = get_global_id(2);
    const int OH = geo1.s2, OW = geo1.s3;
    if (ow >= OW || oh >= OH) return;
    const int H = geo0.s0, W = geo0.s1, KH = geo0.s2, KW = geo0.s3;
    const int c_out_total = geo1.s4 * geo1.s5;
    const int n = plane / c_out_total;
    const int co = plane - n * c_out_total;
    const int ci = co / geo1.s5;
    const long x_base = ((long)n * geo1.s4 + ci) * H * W;
    const long w_base = (long)co * KH * KW;
    const int ih0 = oh * geo0.s4 - geo0.s6;
    const int iw0 = ow * geo0.s5 - geo0.s7;
    float acc = 0.0f;
    for (int kh = 0; kh < KH; ++kh) {
        const int ih = ih0 + kh * geo1.s0;
        if (ih < 0 || ih >= H) continue;
        for (int kw = 0; kw < KW; ++kw) {
            const int iw = iw0 + kw * geo1.s1;
            if (iw < 0 || iw >= W) continue;
            acc = fma(LD(X, x_base + (long)ih * W + iw), LD(Wt, w_base + kh * KW + kw), acc);
        }
    }
    if (has_bias) acc += LD(bias, co);
    const long at = ((long)plane * OH + oh) * OW + ow;
    if (has_res) acc += LD(R, at);
    ST(Y, at, activate(acc, act, act_a, act_b));
}
