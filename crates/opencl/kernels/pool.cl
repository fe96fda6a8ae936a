// pool.cl: MaxPool and AveragePool over 1-D and 2-D windows (one work-item per output
// element), and GlobalAveragePool (one work-item per (image, channel) plane).
//
// geo0 = (H, W, KH, KW, SH, SW, PH, PW), geo1 = (DH, DW, OH, OW, PEH, PEW, include_pad).
// Global size (OW, OH, planes).

#if defined(T_F16)
#define LOWEST -65504.0f
#else
#define LOWEST -FLT_MAX
#endif

__kernel void max_pool(CTPTR X, TPTR Y, int8 geo0, int8 geo1) {
    const int ow = get_global_id(0), oh = get_global_id(1), plane = get_global_id(2);
    const int OH = geo1.s2, OW = geo1.s3;
    if (ow >= OW || oh >= OH) return;
    const int H = geo0.s0, W = geo0.s1;
    const long base = (long)plane * H * W;
    float best = 0.0f;
    int any = 0;
    for (int kh = 0; kh < geo0.s2; ++kh) {
        const int ih = oh * geo0.s4 - geo0.s6 + kh * geo1.s0;
        if (ih < 0 || ih >= H) continue;
        for (int kw = 0; kw < geo0.s3; ++kw) {
            const int iw = ow * geo0.s5 - geo0.s7 + kw * geo1.s1;
            if (iw < 0 || iw >= W) continue;
            const float v = LD(X, base + (long)ih * W + iw);
            // The first NaN wins, as in the reference.
            if (!any) { best = v; any = 1; }
            else if (!(isnan(best) || best >= v)) best = v;
        }
    }
    ST(Y, ((long)plane * OH + oh) * OW + ow, any ? best : LOWEST);
}

__kernel void average_pool(CTPTR X, TPTR Y, int8 geo0, int8 geo1) {
    const int ow = get_global_id(0), oh = get_global_id(1), plane = get_global_id(2);
    const int OH = geo1.s2, OW = geo1.s3;
    if (ow >= OW || oh >= OH) return;
    const int H = geo0.s0, W = geo0.s1;
    const long base = (long)plane * H * W;
    acc_t sum = 0;
    int count = 0, padded_h = 0, padded_w = 0;
    for (int kh = 0; kh < geo0.s2; ++kh) {
        const int ph = oh * geo0.s4 + kh * geo1.s0;  // coordinate in the padded input
        if (ph < geo0.s6 + H + geo1.s4) padded_h++;
    }
    for (int kw = 0; kw < geo0.s3; ++kw) {
        const int pw = ow * geo0.s5 + kw * geo1.s1;
        if (pw < geo0.s7 + W + geo1.s5) padded_w++;
    }
    for (int kh = 0; kh < geo0.s2; ++kh) {
        const int ih = oh * geo0.s4 - geo0.s6 + kh * geo1.s0;
        if (ih < 0 || ih >= H) continue;
        for (int kw = 0; kw < geo0.s3; ++kw) {
            const int iw = ow * geo0.s5 - geo0.s7 + kw * geo1.s1;
            if (iw < 0 || iw >= W) continue;
            sum += LD(X, base + (long)ih * W + iw);
            count++;
        }
    }
    const int divisor = geo1.s6 ? padded_h * padded_w : count;
    ST(Y, ((long)plane * OH + oh) * OW + ow, count == 0 ? 0.0f : (float)(sum / divisor));
}

__kernel void global_average_pool(CTPTR X, TPTR Y, int planes, int size) {
    const int plane = get_global_id(0);
    if (plane >= planes) return;
    const long base = (long)plane * size;
    acc_t sum = 0;
    for (int i = 0; i < size; ++i) sum += LD(X, base + i);
    ST(Y, plane, (float)(sum / size));
}

// The CPU variant of max_pool for width stride 1 or 2, used when every window holds at
// least one pixel of the image: X is first padded with -inf into planes of rows×Wp
// (pad_planes in movement.cl, room past the last row), so each tap is an unconditional
// 16-lane load (the even lanes of two for stride 2), compared as in max_pool (the first
// NaN wins; a -inf pad never beats a pixel, so the result is max_pool's). One output row
// of one plane per work-item.
// geo = (KH, KW, SH, SW, DH, DW, rows, Wp). Global (OH, planes).
__attribute__((always_inline)) inline void max_pool_padded_run(CTPTR Xp, TPTR Y, int8 geo,
                                                                int OH, int OW) {
    const int oh = get_global_id(0);
    const int plane = get_global_id(1);
    if (oh >= OH) return;
    const int KH = geo.s0, KW = geo.s1, SH = geo.s2, SW = geo.s3, DH = geo.s4, DW = geo.s5;
    const int rows = geo.s6, Wp = geo.s7;
    CTPTR x = Xp + (long)plane * rows * Wp;
    const long y_row = ((long)plane * OH + oh) * OW;
    for (int ow0 = 0; ow0 < OW; ow0 += 16) {
        // -inf, the identity of the comparison below: the first tap always replaces it (a
        // NaN or -inf tap too), so no tap needs a special case.
        float16 best = (float16)(-INFINITY);
        for (int kh = 0; kh < KH; ++kh) {
            CTPTR xr = x + (long)(oh * SH + kh * DH) * Wp + ow0 * SW;
            for (int kw = 0; kw < KW; ++kw) {
                float16 v;
                if (SW == 1) {
                    v = LD16(xr, kw * DW);
                } else {
                    const float16 lo = LD16(xr, kw * DW);
                    const float16 hi = LD16(xr, kw * DW + 16);
                    v = (float16)(lo.even, hi.even);
                }
                // best != best is isnan(best) without a call: with the call, Oclgrind
                // 21.10's uninitialized-value check reported "Controlflow depends on
                // uninitialized value" here on every MaxPool trial and on tiny_fpn.
                best = select(v, best, (best != best) | (best >= v));
            }
        }
        if (ow0 + 16 <= OW) {
            ST16(best, Y, y_row + ow0);
        } else {
            float t[16];
            vstore16(best, 0, t);
            for (int j = 0; ow0 + j < OW; ++j) ST(Y, y_row + ow0 + j, t[j]);
        }
    }
}

__kernel void max_pool_padded(CTPTR Xp, TPTR Y, int8 geo, int OH, int OW) {
    max_pool_padded_run(Xp, Y, geo, OH, OW);
}

// max_pool_padded of a pool small enough to be one work-group, padding its image X with
// -inf into Xp first (pad_in_group in common.cl): one command where there were two.
__kernel void max_pool_padding(CTPTR X, TPTR Xp, TPTR Y, int8 geo, int OH, int OW,
                               int8 pad) {
    pad_in_group(X, Xp, pad, -INFINITY);
    barrier(CLK_GLOBAL_MEM_FENCE);
    max_pool_padded_run(Xp, Y, geo, OH, OW);
}

// squeeze_excite: GlobalAveragePool with a squeeze-excite block's two 1×1 convs folded in
// (fuse.rs, absorb_excite): per batch entry, the C plane means as global_average_pool
// computes them (a sum in acc_t over the plane, divided once, rounded to float), then
// m = act1(W1·means + b1) over M channels and y = act2(W2·m + b2) over C, each sum a chain
// of float multiply-adds in channel order, the bias added after it, as the GEMM kernels'
// epilogue does. With `apply`, Y is X times y (the block's Mul folded in too, each product
// rounded once, as the Mul kernel's), else y itself. One work-group per batch entry; its
// work-items share the channels, and the vectors live in local memory (at most SE_MAX
// each, which the host checks). W1 is [M][C], W2 [C][M] (the convs' [out, in, 1, 1]
// weights).

#define SE_MAX 2048

__kernel void squeeze_excite(CTPTR X, CTPTR W1, CTPTR B1, CTPTR W2, CTPTR B2, TPTR Y,
                             __global const long* restrict P) {
    const int has_b1 = P_INT(0);
    const int has_b2 = P_INT(1);
    const int apply = P_INT(2);
    const int C = P_INT(3);
    const int M = P_INT(4);
    const int size = P_INT(5);
    const int act1 = P_INT(6);
    const float act1_a = P_FLOAT(7);
    const float act1_b = P_FLOAT(8);
    const int act2 = P_INT(9);
    const float act2_a = P_FLOAT(10);
    const float act2_b = P_FLOAT(11);
    __local float means[SE_MAX];
    __local float mid[SE_MAX];
    const int n = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    const long base = (long)n * C * size;
    for (int c = lid; c < C; c += L) {
        acc_t sum = 0;
        for (int i = 0; i < size; ++i) sum += LD(X, base + (long)c * size + i);
        means[c] = (float)(sum / size);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = lid; j < M; j += L) {
        float acc = 0.0f;
        for (int c = 0; c < C; ++c) acc = fma(LD(W1, (long)j * C + c), means[c], acc);
        const float v = has_b1 ? acc + LD(B1, j) : acc;
        mid[j] = activate(v, act1, act1_a, act1_b);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int c = lid; c < C; c += L) {
        float acc = 0.0f;
        for (int j = 0; j < M; ++j) acc = fma(LD(W2, (long)c * M + j), mid[j], acc);
        const float v = has_b2 ? acc + LD(B2, c) : acc;
        const float s = activate(v, act2, act2_a, act2_b);
        if (apply) {
            means[c] = s;
        } else {
            ST(Y, (long)n * C + c, s);
        }
    }
    if (!apply) return;
    barrier(CLK_LOCAL_MEM_FENCE);
    // X · scale, the work-group's items taking consecutive elements of each plane in turn.
    for (int c = 0; c < C; ++c) {
        const float s = means[c];
        const long at = base + (long)c * size;
        for (int i = lid; i < size; i += L) ST(Y, at + i, LD(X, at + i) * s);
    }
}
