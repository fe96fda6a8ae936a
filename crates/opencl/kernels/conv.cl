// conv.cl: depthwise (and channel-multiplier) convolution, where every output channel
// reads one input channel, so there is nothing to share between channels and a GEMM would
// waste its tile. Four kernels: `depthwise` (any geometry; what GPUs run), and for CPU
// devices `depthwise_inplace` (width stride 1 or 2, the image read in place),
// `depthwise_rows` (width stride 1 or 2, rows padded in a private buffer, for left pads
// wider than 3) and `depthwise_flat` (small planes at stride 1, the plane one flat run),
// described where they are defined.
// ConvTranspose lives here too: `conv_transpose` (any geometry, one output per work-item)
// and, for CPU devices, `conv_transpose_rows` (kernel == stride, one tap per output).
//
// `depthwise`: one work-item computes one output row of one plane, DW_CHUNK columns at
// a time in a private accumulator row: for each tap it sweeps the columns whose input is
// inside the image (a range computed up front, so the sweep has no bounds checks and reads
// contiguously for stride 1), which compilers turn into vector code.
//
// geo0 = (H, W, KH, KW, SH, SW, PH, PW), geo1 = (DH, DW, OH, OW, C_in, multiplier).
// Global (OH, N · C_out). Epilogue as in gemm.cl.

// Output plane `plane` of a depthwise conv (N · C_out planes, C_out = C_in · geo1.s5, the
// channel multiplier; geo1.s4 = C_in): its output channel, and where its input plane of
// H·W = geo0.s0 · geo0.s1 values starts in X.
inline int dw_out_channel(int8 geo1, int plane) { return plane % (geo1.s4 * geo1.s5); }

inline long dw_input_plane(int8 geo0, int8 geo1, int plane) {
    const int c_out_total = geo1.s4 * geo1.s5;
    const int n = plane / c_out_total;
    const int ci = (plane - n * c_out_total) / geo1.s5;
    return ((long)n * geo1.s4 + ci) * geo0.s0 * geo0.s1;
}

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
    const int co = dw_out_channel(geo1, plane);
    CTPTR x = X + dw_input_plane(geo0, geo1, plane);
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

// The CPU variant of depthwise for width strides 1 and 2. A work-item owns `rpi`
// consecutive output rows of one plane (small planes are one work-item each, so the
// per-item cost is spread over enough work); for each kernel row it copies the input row
// into a private zero-padded row buffer (cached memory on a CPU, so the padding costs no
// pass over the image), then every tap is an unconditional 16-lane load from that buffer
// (stride 2 takes the even lanes of two loads) and a multiply-add into the row's
// accumulators, taps in the same order as `depthwise`. span = the buffer length a row
// needs (padded width plus the last chunk's reach), at most DW_BUF; the host uses
// `depthwise` for wider rows.
// geo0 = (H, W, KH, KW, SH, SW, PH, PW), geo1 = (DH, DW, OH, OW, C_in, multiplier, chunks,
// span), rpi = rows per item, planes = N · C_out. Global (ceil(OH / rpi), planes).

#define DW_BUF 640
#define DW_CHUNKS 32

__kernel void depthwise_rows(CTPTR X, CTPTR Wt, TPTR Y, CTPTR bias, int has_bias, CTPTR R,
                             int has_res, int act, float act_a, float act_b, int8 geo0,
                             int8 geo1, int rpi, int planes) {
    const int oh_begin = get_global_id(0) * rpi;
    const int plane = get_global_id(1);
    const int OH = geo1.s2, OW = geo1.s3;
    if (oh_begin >= OH || plane >= planes) return;
    const int H = geo0.s0, W = geo0.s1, KH = geo0.s2, KW = geo0.s3;
    const int SH = geo0.s4, SW = geo0.s5, PH = geo0.s6, PW = geo0.s7;
    const int DH = geo1.s0, DW = geo1.s1, chunks = geo1.s6, span = geo1.s7;
    const int co = dw_out_channel(geo1, plane);
    CTPTR x = X + dw_input_plane(geo0, geo1, plane);
    CTPTR w = Wt + (long)co * KH * KW;
    const float b = has_bias ? LD(bias, co) : 0.0f;
    float buf[DW_BUF];
    float16 acc[DW_CHUNKS];
    // Rows only ever write [PW, PW + W): the padding stays zero.
    for (int j = 0; j < span; ++j) buf[j] = 0.0f;
    const int oh_end = min(OH, oh_begin + rpi);
    for (int oh = oh_begin; oh < oh_end; ++oh) {
        for (int c = 0; c < chunks; ++c) acc[c] = 0.0f;
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = oh * SH - PH + kh * DH;
            if (ih < 0 || ih >= H) continue;
            CTPTR xr = x + (long)ih * W;
            for (int j = 0; j < W; ++j) buf[PW + j] = LD(xr, j);
            for (int c = 0; c < chunks; ++c) {
                float16 a = acc[c];
                const float* br = buf + c * 16 * SW;
                for (int kw = 0; kw < KW; ++kw) {
                    const float wv = LD(w, kh * KW + kw);
                    float16 xv;
                    if (SW == 1) {
                        xv = vload16(0, br + kw * DW);
                    } else {
                        const float16 lo = vload16(0, br + kw * DW);
                        const float16 hi = vload16(0, br + kw * DW + 16);
                        xv = (float16)(lo.even, hi.even);
                    }
                    a = fma(xv, (float16)wv, a);
                }
                acc[c] = a;
            }
        }
        const long y_row = ((long)plane * OH + oh) * OW;
        for (int c = 0; c < chunks; ++c) {
            const int ow0 = c * 16;
            float16 v = acc[c] + b;
            if (ow0 + 16 <= OW) {
                if (has_res) v += LD16(R, y_row + ow0);
                ST16(activate16(v, act, act_a, act_b), Y, y_row + ow0);
            } else {
                store_prefix16(v, OW - ow0, has_res, R, Y, y_row + ow0, act, act_a, act_b);
            }
        }
    }
}

// The CPU variant of depthwise for width strides 1 and 2, reading the image in place. A
// tap of a 16-column chunk is one 16-lane load at its offset o (stride 2: two loads, their
// even lanes), with the lanes outside the row (o + SW·j < 0 or >= W) set to zero. Loads
// may run past a row's end (into the next row, or past the buffer's end into the slack
// every slot has, see Builder::slot_bytes) but never before its start: a chunk starting
// left of the row (o < 0, only the first chunk, for taps inside the left pad) loads at the
// row's start and shifts the lanes right with a constant swizzle (pads up to 3; wider left
// pads use depthwise_rows). A work-item owns rpi consecutive output rows of one plane and
// walks them chunk by chunk, DWI_ROWS rows at a time where all their taps lie inside the
// image (rows at the top and bottom edges one at a time, their taps checked): the rows'
// accumulators are independent chains that keep the core's multiply-add units busy, and
// no branch depends on the row. Each output takes its taps in the order of `depthwise`
// (kh, then kw), so the bits are those of one row at a time.
// Square 3×3 and 5×5 kernels with equal strides of 1 or 2, dilation 1 and a left pad of
// K / 2 (every depthwise conv of the exported models) take dwf_walk instead, with K and S
// constants: all rows in blocks of DWI_ROWS, each input row loaded once per block and fed
// to every output row it reaches, and only the first and last chunks of a row checked.
// geo0 and geo1 as in `depthwise` (the last two entries unused), rpi = rows per item,
// planes = N · C_out. Global (ceil(OH / rpi), planes).

#define DWI_ROWS 4

#define SHIFT1(v) (float16)(0.0f, v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7, v.s8, \
                            v.s9, v.sa, v.sb, v.sc, v.sd, v.se)
#define SHIFT2(v) (float16)(0.0f, 0.0f, v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7, \
                            v.s8, v.s9, v.sa, v.sb, v.sc, v.sd)
#define SHIFT3(v) (float16)(0.0f, 0.0f, 0.0f, v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, \
                            v.s7, v.s8, v.s9, v.sa, v.sb, v.sc)

// Lanes j = 0..15 of input row xr at columns o + SW·j (SW 1 or 2, o >= -3), zero outside
// [0, W).
inline float16 dwi_taps(CTPTR xr, int o, int W, int SW, int16 lane) {
    float16 xv;
    if (SW == 1) {
        if (o >= 0) {
            xv = LD16(xr, o);
        } else {
            const float16 v = LD16(xr, 0);
            xv = o == -1 ? SHIFT1(v) : o == -2 ? SHIFT2(v) : SHIFT3(v);
        }
    } else {
        const int at = max(o, 0);
        const float16 lo = LD16(xr, at), hi = LD16(xr, at + 16);
        if (o >= 0) {
            xv = (float16)(lo.even, hi.even);
        } else if (o == -2) {
            // Column 2j - 2: lane j is the (j - 1)th even column.
            const float16 e = (float16)(lo.even, hi.even);
            xv = SHIFT1(e);
        } else {
            // Columns 2j - 1 (o = -1) and 2j - 3 (o = -3): the odd columns, shifted.
            const float16 od = (float16)(lo.odd, hi.odd);
            xv = o == -1 ? SHIFT1(od) : SHIFT2(od);
        }
    }
    if (o + SW * 15 >= W) xv = select((float16)0.0f, xv, lane * SW + o < W);
    return xv;
}

// Adds bias, residual and activation to a block row's chunk and stores its lanes that are
// inside the row; with `spill`, a short row is stored as one whole vector, whose lanes past
// the row's end land on the next row of the same plane (the caller's to allow: see
// DWI_SPILL).
__attribute__((always_inline)) inline void dwi_store(TPTR Y, CTPTR R, int has_res, long y_row,
                                                     int ow0, int OW, float16 acc, float b,
                                                     int act, float act_a, float act_b,
                                                     int spill) {
    float16 v = acc + b;
    if (ow0 + 16 <= OW || spill) {
        if (has_res) v += LD16(R, y_row + ow0);
        ST16(activate16(v, act, act_a, act_b), Y, y_row + ow0);
    } else {
        float t[16];
        const int left = OW - ow0;
        if (has_res) {
            for (int j = 0; j < 16; ++j) t[j] = j < left ? LD(R, y_row + ow0 + j) : 0.0f;
            v += vload16(0, t);
        }
        vstore16(activate16(v, act, act_a, act_b), 0, t);
        for (int j = 0; j < left; ++j) ST(Y, y_row + ow0 + j, t[j]);
    }
}

// Whether output row oh may be stored as a whole vector past its end (dwi_store's spill):
// only where a row is one chunk (so nothing of the rows after it is stored before it),
// without a residual (which may share the output's memory, and would be overwritten before
// it is read), and only when every row the vector's 16 lanes reach (15 / OW rows past oh:
// two for rows of 7) is this work-item's, not another work-item's or another plane's.
// Those rows are stored after this one, so every lane spilled onto them is overwritten
// with its own value.
#define DWI_SPILL(oh) (!has_res && OW <= 16 && (oh) + 15 / OW < oh_end)

// One output row's chunk at ow0, its taps checked against the image's rows.
#define DWI_ROW(oh)                                                                         \
    do {                                                                                    \
        float16 acc = 0.0f;                                                                 \
        for (int kh = 0; kh < KH; ++kh) {                                                   \
            const int ih = (oh) * SH - PH + kh * DH;                                        \
            if (ih < 0 || ih >= H) continue;                                                \
            CTPTR xr = x + (long)ih * W;                                                    \
            for (int kw = 0; kw < KW; ++kw) {                                               \
                const int o = ow0 * SW - PW + kw * DW;                                      \
                if (o >= W) continue;                                                       \
                acc = fma(dwi_taps(xr, o, W, SW, lane), (float16)LD(w, kh * KW + kw), acc); \
            }                                                                               \
        }                                                                                   \
        dwi_store(Y, R, has_res, ((long)plane * OH + (oh)) * OW, ow0, OW, acc, b, act,      \
                  act_a, act_b, DWI_SPILL(oh));                                             \
    } while (0)

// Lanes j = 0..15 of input row xr at columns o + S·j for a chunk that starts inside the
// row (o >= 0), those past its end zero.
inline float16 dwf_taps_right(CTPTR xr, int o, int W, const int S, int16 lane) {
    float16 xv;
    if (S == 1) {
        xv = LD16(xr, o);
    } else {
        const float16 lo = LD16(xr, o), hi = LD16(xr, o + 16);
        xv = (float16)(lo.even, hi.even);
    }
    return select((float16)0.0f, xv, lane * S + o < W);
}

// A block of DWI_ROWS output rows' chunk at ow0 for a fixed kernel size K, stride S and
// left pad K / 2 (constants where the kernel calls this, so every loop unrolls): each input
// row the block reaches is loaded once, its K taps, and multiplied into the accumulator of
// every output row it feeds (output row j takes kernel row r - j·S); rows outside the image
// are skipped. Each output still takes its taps in `depthwise`'s order (kh, then kw). Rows
// past oh_end are computed and not stored. `edge` says where the chunk lies: 0 wholly
// inside its row (plain loads), 1 the first chunk (its taps' offsets are constants, the
// lanes left of the row shifted in as zeros by dwi_taps, those right of it zeroed), 2 a
// chunk reaching past the row's end (those lanes zeroed, taps wholly past it skipped).
__attribute__((always_inline)) inline void dwf_block(
    CTPTR x, CTPTR w, TPTR Y, CTPTR R, int has_res, int act, float act_a, float act_b,
    float b, long y_plane, int oh, int oh_end, int ow0, int OW, int H, int W, int PH,
    const int K, const int S, const int edge, int16 lane) {
    float16 acc[DWI_ROWS];
    for (int j = 0; j < DWI_ROWS; ++j) acc[j] = 0.0f;
    const int ih0 = oh * S - PH;
    const int o0 = ow0 * S - K / 2;
#pragma unroll
    for (int r = 0; r < (DWI_ROWS - 1) * S + K; ++r) {
        const int ih = ih0 + r;
        if (ih < 0 || ih >= H) continue;
        CTPTR xr = x + (long)ih * W;
        float16 t[5];
#pragma unroll
        for (int kw = 0; kw < K; ++kw) {
            const int o = o0 + kw;
            if (edge == 1) {
                t[kw] = o < W ? dwi_taps(xr, o, W, S, lane) : (float16)0.0f;
            } else if (edge == 2) {
                t[kw] = o < W ? dwf_taps_right(xr, o, W, S, lane) : (float16)0.0f;
            } else if (S == 1) {
                t[kw] = LD16(xr, o);
            } else {
                const float16 lo = LD16(xr, o), hi = LD16(xr, o + 16);
                t[kw] = (float16)(lo.even, hi.even);
            }
        }
#pragma unroll
        for (int j = 0; j < DWI_ROWS; ++j) {
            const int kh = r - j * S;
            if (kh < 0 || kh >= K) continue;
#pragma unroll
            for (int kw = 0; kw < K; ++kw) {
                if (edge != 0 && o0 + kw >= W) continue;
                acc[j] = fma(t[kw], (float16)LD(w, kh * K + kw), acc[j]);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < DWI_ROWS; ++j) {
        if (oh + j < oh_end) {
            dwi_store(Y, R, has_res, y_plane + (long)(oh + j) * OW, ow0, OW, acc[j], b, act,
                      act_a, act_b, DWI_SPILL(oh + j));
        }
    }
}

// depthwise_inplace's walk for a fixed K and S, left pad K / 2 and dilation 1: the
// work-item's rows in blocks of DWI_ROWS, each block chunk by chunk along its rows.
__attribute__((always_inline)) inline void dwf_walk(
    CTPTR x, CTPTR w, TPTR Y, CTPTR R, int has_res, int act, float act_a, float act_b,
    float b, long y_plane, int oh_begin, int oh_end, int OW, int H, int W, int PH,
    const int K, const int S) {
    const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int oh = oh_begin; oh < oh_end; oh += DWI_ROWS) {
        dwf_block(x, w, Y, R, has_res, act, act_a, act_b, b, y_plane, oh, oh_end, 0, OW, H, W,
                  PH, K, S, 1, lane);
        for (int ow0 = 16; ow0 < OW; ow0 += 16) {
            if (ow0 * S - K / 2 + K - 1 + S * 15 < W) {
                dwf_block(x, w, Y, R, has_res, act, act_a, act_b, b, y_plane, oh, oh_end, ow0,
                          OW, H, W, PH, K, S, 0, lane);
            } else {
                dwf_block(x, w, Y, R, has_res, act, act_a, act_b, b, y_plane, oh, oh_end, ow0,
                          OW, H, W, PH, K, S, 2, lane);
            }
        }
    }
}

__kernel void depthwise_inplace(CTPTR X, CTPTR Wt, TPTR Y, CTPTR bias, CTPTR R,
                                __global const long* restrict P) {
    const int has_bias = P_INT(0);
    const int has_res = P_INT(1);
    const int act = P_INT(2);
    const float act_a = P_FLOAT(3);
    const float act_b = P_FLOAT(4);
    const int8 geo0 = P_INT8(5);
    const int8 geo1 = P_INT8(13);
    const int rpi = P_INT(21);
    const int planes = P_INT(22);
    const int OH = geo1.s2, OW = geo1.s3;
    const int oh_begin = get_global_id(0) * rpi;
    const int plane = get_global_id(1);
    if (oh_begin >= OH || plane >= planes) return;
    const int H = geo0.s0, W = geo0.s1, KH = geo0.s2, KW = geo0.s3;
    const int SH = geo0.s4, SW = geo0.s5, PH = geo0.s6, PW = geo0.s7;
    const int DH = geo1.s0, DW = geo1.s1;
    const int co = dw_out_channel(geo1, plane);
    CTPTR x = X + dw_input_plane(geo0, geo1, plane);
    CTPTR w = Wt + (long)co * KH * KW;
    const float b = has_bias ? LD(bias, co) : 0.0f;
    const int oh_end = min(OH, oh_begin + rpi);
    const long y_plane = (long)plane * OH * OW;
#define DWF_CASE(k, s)                                                                      \
    if (KH == k && KW == k && SH == s && SW == s && DH == 1 && DW == 1 && PW == k / 2) { \
        dwf_walk(x, w, Y, R, has_res, act, act_a, act_b, b, y_plane, oh_begin, oh_end, OW, \
                 H, W, PH, k, s);                                                          \
        return;                                                                            \
    }
    DWF_CASE(3, 1)
    DWF_CASE(3, 2)
    DWF_CASE(5, 1)
    DWF_CASE(5, 2)
#undef DWF_CASE
    const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int ow0 = 0; ow0 < OW; ow0 += 16) {
        int oh = oh_begin;
        // Rows whose taps reach above the image, one at a time.
        for (; oh < oh_end && oh * SH - PH < 0; ++oh) {
            DWI_ROW(oh);
        }
        // Blocks of DWI_ROWS rows whose taps all lie inside the image: no row checks.
        for (; oh + DWI_ROWS <= oh_end; oh += DWI_ROWS) {
            const int ih0 = oh * SH - PH;
            if (ih0 + (DWI_ROWS - 1) * SH + (KH - 1) * DH >= H) break;
            float16 acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
            for (int kh = 0; kh < KH; ++kh) {
                CTPTR x0 = x + (long)(ih0 + kh * DH) * W;
                CTPTR x1 = x0 + (long)SH * W;
                CTPTR x2 = x1 + (long)SH * W;
                CTPTR x3 = x2 + (long)SH * W;
                for (int kw = 0; kw < KW; ++kw) {
                    const int o = ow0 * SW - PW + kw * DW;
                    if (o >= W) continue;
                    const float16 wv = (float16)LD(w, kh * KW + kw);
                    acc0 = fma(dwi_taps(x0, o, W, SW, lane), wv, acc0);
                    acc1 = fma(dwi_taps(x1, o, W, SW, lane), wv, acc1);
                    acc2 = fma(dwi_taps(x2, o, W, SW, lane), wv, acc2);
                    acc3 = fma(dwi_taps(x3, o, W, SW, lane), wv, acc3);
                }
            }
            const long y_row = ((long)plane * OH + oh) * OW;
            dwi_store(Y, R, has_res, y_row, ow0, OW, acc0, b, act, act_a, act_b, DWI_SPILL(oh));
            dwi_store(Y, R, has_res, y_row + OW, ow0, OW, acc1, b, act, act_a, act_b,
                      DWI_SPILL(oh + 1));
            dwi_store(Y, R, has_res, y_row + 2L * OW, ow0, OW, acc2, b, act, act_a, act_b,
                      DWI_SPILL(oh + 2));
            dwi_store(Y, R, has_res, y_row + 3L * OW, ow0, OW, acc3, b, act, act_a, act_b,
                      DWI_SPILL(oh + 3));
        }
        // The rest (rows whose taps reach below the image, a short last block).
        for (; oh < oh_end; ++oh) {
            DWI_ROW(oh);
        }
    }
}

// The CPU variant of depthwise for small planes at stride 1 with "same" padding (a K×K
// kernel, K 3 or 5, pad K / 2 on every side, dilation 1, so the output plane is the input's
// shape): the plane is one flat run of OH·OW values, and a 16-lane chunk of it is 16
// consecutive outputs, whatever the row width (a 7×7 plane is four chunks, where rows of 7
// in 16 lanes are seven). The work-item copies its plane into a private buffer between
// zero margins of K / 2 rows and K / 2 values, so tap (kh, kw) of a chunk starting at
// output p is one 16-lane load at p + (kh − K / 2)·W + kw − K / 2 of the copy: rows above
// and below the image read the zero margins, and the lanes whose column plus kw − K / 2
// falls outside the row (they would read the next or previous row) are set to zero. Taps
// in the order of `depthwise` (kh, then kw). One work-item per plane; the host chooses this
// kernel for planes of at most DWF_PLANE values in rows of at most 8 (where depthwise_inplace
// fills at most half of a vector's lanes; with rows of 14 or 28 it measured faster).
// geo0, geo1 as in depthwise_inplace, rpi unused, planes = N · C_out. Global (1, planes).
#define DWF_PLANE 1024
// Vectors of zeros before and after the plane: K / 2 rows and K / 2 values of rows up to
// 8 wide, rounded up to whole vectors (so the plane starts on one).
#define DWF_MARGIN_VECS 2
#define DWF_CHAINS 4
#define DWF_VECS (DWF_PLANE / 16 + 2 * DWF_MARGIN_VECS + DWF_CHAINS)

// depthwise_flat's taps for a fixed K (a constant where the kernel calls this, so every
// tap loop unrolls and the column masks are computed once per chunk).
__attribute__((always_inline)) inline void dwf_flat_plane(CTPTR x, CTPTR w, TPTR Y, CTPTR R,
                                                          int has_res, int act, float act_a,
                                                          float act_b, float b, long y_plane,
                                                          int H, int W, const int K) {
    const int pad = K / 2;
    const int HW = H * W;
    const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const int chunks = (HW + 15) / 16;
    // The copy, whole vectors: DWF_MARGIN_VECS of zeros, the plane (the last chunk's loads
    // run past it, into the next plane or the slot's slack; those lanes become zeros),
    // then zeros past the reach of the last group of DWF_CHAINS chunks.
    float16 copy[DWF_VECS];
    for (int i = 0; i < DWF_MARGIN_VECS; ++i) copy[i] = 0.0f;
    for (int c = 0; c < chunks; ++c) {
        copy[DWF_MARGIN_VECS + c] = select((float16)0.0f, LD16(x, 16 * c), 16 * c + lane < HW);
    }
    for (int i = DWF_MARGIN_VECS + chunks; i < 2 * DWF_MARGIN_VECS + chunks + DWF_CHAINS; ++i)
        copy[i] = 0.0f;
    const float* plane = (const float*)copy + 16 * DWF_MARGIN_VECS;
    float wk[25];
    for (int t = 0; t < K * K; ++t) wk[t] = LD(w, t);
    // DWF_CHAINS chunks at a time, their sums independent chains (one chain would wait on
    // each multiply-add's latency); chunks past the plane are computed from zeros and not
    // stored.
    for (int c0 = 0; c0 < chunks; c0 += DWF_CHAINS) {
        float16 acc[DWF_CHAINS];
        int16 inside[DWF_CHAINS][5];
#pragma unroll
        for (int j = 0; j < DWF_CHAINS; ++j) {
            acc[j] = 0.0f;
            // Each lane's column: (p + 0.5) / W in float is never within rounding of a
            // whole number for planes this small, so its floor is the row.
            const int16 pos = 16 * (c0 + j) + lane;
            const int16 row = convert_int16(floor((convert_float16(pos) + 0.5f) / (float)W));
            const int16 col = pos - row * W;
#pragma unroll
            for (int kw = 0; kw < K; ++kw)
                inside[j][kw] = (col + kw - pad >= 0) & (col + kw - pad < W);
        }
#pragma unroll
        for (int kh = 0; kh < K; ++kh) {
            const float* xr = plane + 16 * c0 + (kh - pad) * W - pad;
#pragma unroll
            for (int kw = 0; kw < K; ++kw) {
                const float16 wv = (float16)wk[kh * K + kw];
#pragma unroll
                for (int j = 0; j < DWF_CHAINS; ++j) {
                    float16 v = vload16(0, xr + 16 * j + kw);
                    if (kw != pad) v = select((float16)0.0f, v, inside[j][kw]);
                    acc[j] = fma(v, wv, acc[j]);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < DWF_CHAINS; ++j) {
            if (c0 + j < chunks) {
                dwi_store(Y, R, has_res, y_plane, 16 * (c0 + j), HW, acc[j], b, act, act_a,
                          act_b, 0);
            }
        }
    }
}

__kernel void depthwise_flat(CTPTR X, CTPTR Wt, TPTR Y, CTPTR bias, CTPTR R,
                             __global const long* restrict P) {
    const int has_bias = P_INT(0);
    const int has_res = P_INT(1);
    const int act = P_INT(2);
    const float act_a = P_FLOAT(3);
    const float act_b = P_FLOAT(4);
    const int8 geo0 = P_INT8(5);
    const int8 geo1 = P_INT8(13);
    const int planes = P_INT(22);
    const int plane = get_global_id(1);
    if (get_global_id(0) > 0 || plane >= planes) return;
    const int H = geo0.s0, W = geo0.s1, K = geo0.s2;
    const int co = dw_out_channel(geo1, plane);
    CTPTR x = X + dw_input_plane(geo0, geo1, plane);
    CTPTR w = Wt + (long)co * K * K;
    const float b = has_bias ? LD(bias, co) : 0.0f;
    const long y_plane = (long)plane * H * W;
    if (K == 3) {
        dwf_flat_plane(x, w, Y, R, has_res, act, act_a, act_b, b, y_plane, H, W, 3);
    } else {
        dwf_flat_plane(x, w, Y, R, has_res, act, act_a, act_b, b, y_plane, H, W, 5);
    }
}

// The smallest tap k < K with q − k·D a non-negative multiple of S, or K when there is none:
// k·D modulo S repeats with a period of at most S, so only k < S need be tried.
inline int ct_first_tap(int q, int K, int S, int D) {
    for (int k = 0; k < min(K, S); ++k) {
        const int p = q - k * D;
        if (p < 0) return K;
        if (p % S == 0) return k;
    }
    return K;
}

// The distance between consecutive contributing taps: the smallest t > 0 with t·D a
// multiple of S, i.e. S / gcd(S, D).
inline int ct_tap_step(int S, int D) {
    int t = 1;
    while ((t * D) % S != 0) ++t;
    return t;
}

// conv_transpose: ConvTranspose as a gather, one work-item per output element: input
// position i and tap k of a spatial axis write output position i·stride + k·dilation −
// pad_begin (core's TransposedAxis), so output o takes, per axis, the taps k whose
// o + pad_begin − k·dilation is a non-negative multiple of the stride below the input extent.
// Only those taps are visited: the first one (ct_first_tap) and then every
// stride / gcd(stride, dilation)-th (ct_tap_step), the period of k·dilation modulo the stride.
// Taps outside, inner sum over the group's input channels, in acc_t, as the reference
// scatters them. Spatial axes are padded to three (leading axes of extent 1, kernel 1).
// gi = (I0, I1, I2, O0, O1, O2, C, M), gk = (K0, K1, K2, S0, S1, S2, C/group, M/group),
// gd = (D0, D1, D2, P0, P1, P2, N, 0). Global (N · M · O0 · O1 · O2).
__kernel void conv_transpose(CTPTR X, CTPTR Wt, CTPTR bias, int has_bias, TPTR Y, int8 gi,
                             int8 gk, int8 gd) {
    const int I0 = gi.s0, I1 = gi.s1, I2 = gi.s2, O0 = gi.s3, O1 = gi.s4, O2 = gi.s5;
    const int C = gi.s6, M = gi.s7;
    const int K0 = gk.s0, K1 = gk.s1, K2 = gk.s2, S0 = gk.s3, S1 = gk.s4, S2 = gk.s5;
    const int CG = gk.s6, MG = gk.s7;
    const int D0 = gd.s0, D1 = gd.s1, D2 = gd.s2, P0 = gd.s3, P1 = gd.s4, P2 = gd.s5;
    const int N = gd.s6;
    const long idx = get_global_id(0);
    const long plane = (long)O0 * O1 * O2;
    if (idx >= (long)N * M * plane) return;
    long rest = idx;
    const int o2 = rest % O2;
    rest /= O2;
    const int o1 = rest % O1;
    rest /= O1;
    const int o0 = rest % O0;
    rest /= O0;
    const int m = rest % M;
    const int n = rest / M;
    const int g = m / MG, mo = m - g * MG;
    const long in_plane = (long)I0 * I1 * I2, taps = (long)K0 * K1 * K2;
    acc_t y = has_bias ? (acc_t)LD(bias, m) : 0;
    const int t0 = ct_tap_step(S0, D0), t1 = ct_tap_step(S1, D1), t2 = ct_tap_step(S2, D2);
    const int f1 = ct_first_tap(o1 + P1, K1, S1, D1), f2 = ct_first_tap(o2 + P2, K2, S2, D2);
    for (int k0 = ct_first_tap(o0 + P0, K0, S0, D0); k0 < K0; k0 += t0) {
        const int p0 = o0 + P0 - k0 * D0;
        if (p0 < 0) break;
        if (p0 / S0 >= I0) continue;
        for (int k1 = f1; k1 < K1; k1 += t1) {
            const int p1 = o1 + P1 - k1 * D1;
            if (p1 < 0) break;
            if (p1 / S1 >= I1) continue;
            for (int k2 = f2; k2 < K2; k2 += t2) {
                const int p2 = o2 + P2 - k2 * D2;
                if (p2 < 0) break;
                if (p2 / S2 >= I2) continue;
                const long at = ((long)(p0 / S0) * I1 + p1 / S1) * I2 + p2 / S2;
                const long tap = ((long)k0 * K1 + k1) * K2 + k2;
                acc_t sum = 0;
                for (int ic = 0; ic < CG; ++ic) {
                    const long c = (long)g * CG + ic;
                    sum += (acc_t)LD(X, ((long)n * C + c) * in_plane + at)
                           * (acc_t)LD(Wt, (c * MG + mo) * taps + tap);
                }
                y += sum;
            }
        }
    }
    ST(Y, idx, (float)y);
}

// The CPU variant of conv_transpose where every spatial axis has kernel == stride and
// dilation 1 (the U-Net upsampling): an output position o + pad_begin = i·stride + k then
// takes exactly one tap per axis, so an output row is, per innermost tap k2, a sum over the
// group's input channels of one input row times one weight. A work-item owns 16 input
// columns of one input row of one output channel and keeps one 16-lane accumulator per
// innermost tap (at most CT_MAX_S2), summed over the input channels in order with fma;
// output columns i2·S2 + k2 − P2 outside [0, O2) are cropped by the pads, and the last
// chunk writes the bias into the columns no input reaches (output_padding), as does a
// row whose input row is past the input (accumulators stay zero there). A chunk shorter
// than 16 columns still loads 16 lanes, past its row's end: into the next row, or past the
// value's end into the slack every slot has (see Builder::slot_bytes), so X must be a slot;
// those lanes are never stored.
// Arguments as in conv_transpose (the dilations all 1, kernel == stride, S2 <= CT_MAX_S2).
// Global (max(1, ceil(I2 / 16)), O0 · O1, N · M).

#define CT_MAX_S2 4

__kernel void conv_transpose_rows(CTPTR X, CTPTR Wt, CTPTR bias, int has_bias, TPTR Y,
                                  int8 gi, int8 gk, int8 gd) {
    const int I0 = gi.s0, I1 = gi.s1, I2 = gi.s2, O0 = gi.s3, O1 = gi.s4, O2 = gi.s5;
    const int C = gi.s6, M = gi.s7;
    const int K1 = gk.s1, K2 = gk.s2, S0 = gk.s3, S1 = gk.s4, S2 = gk.s5;
    const int CG = gk.s6, MG = gk.s7;
    const int P0 = gd.s3, P1 = gd.s4, P2 = gd.s5, N = gd.s6;
    const int chunk = get_global_id(0);
    const int row = get_global_id(1);
    const int plane = get_global_id(2);
    const int chunks = max(1, (I2 + 15) / 16);
    if (chunk >= chunks || row >= O0 * O1 || plane >= N * M) return;
    const int o0 = row / O1, o1 = row - o0 * O1;
    const int n = plane / M, m = plane - n * M;
    const int g = m / MG, mo = m - g * MG;
    const int q0 = o0 + P0, q1 = o1 + P1;
    const int i0 = q0 / S0, i1 = q1 / S1;
    const int k0 = q0 - i0 * S0, k1 = q1 - i1 * S1;
    const int c0 = chunk * 16;
    const int len = min(16, I2 - c0);
    const long in_plane = (long)I0 * I1 * I2, taps = (long)gk.s0 * K1 * K2;
    // One accumulator per innermost tap, named rather than an array so that they stay in
    // registers.
    float16 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    if (i0 < I0 && i1 < I1 && len > 0) {
        CTPTR xr = X + ((long)n * C + (long)g * CG) * in_plane + ((long)i0 * I1 + i1) * I2 + c0;
        CTPTR wr = Wt + ((long)g * CG * MG + mo) * taps + ((long)k0 * K1 + k1) * K2;
        const long w_step = (long)MG * taps;
        for (int ic = 0; ic < CG; ++ic) {
            const float16 xv = LD16(xr, 0);
            a0 = fma(xv, (float16)LD(wr, 0), a0);
            if (S2 > 1) a1 = fma(xv, (float16)LD(wr, 1), a1);
            if (S2 > 2) a2 = fma(xv, (float16)LD(wr, 2), a2);
            if (S2 > 3) a3 = fma(xv, (float16)LD(wr, 3), a3);
            xr += in_plane;
            wr += w_step;
        }
    }
    const float b = has_bias ? LD(bias, m) : 0.0f;
    TPTR y = Y + ((long)plane * O0 * O1 + row) * O2;
    for (int s = 0; s < S2; ++s) {
        float t[16];
        vstore16((s == 0 ? a0 : s == 1 ? a1 : s == 2 ? a2 : a3) + b, 0, t);
        for (int j = 0; j < len; ++j) {
            const int o2 = (c0 + j) * S2 + s - P2;
            if (o2 >= 0 && o2 < O2) ST(y, o2, t[j]);
        }
    }
    if (chunk == chunks - 1) {
        for (int o2 = max(0, I2 * S2 - P2); o2 < O2; ++o2) ST(y, o2, b);
    }
}
