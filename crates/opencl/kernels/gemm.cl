// gemm.cl: the tiled matrix multiply behind Gemm, MatMul and every non-depthwise Conv.
//
//   Y[b][m][n] = act(alpha * Σ_k A[b](m, k) · B[b](k, n) + beta * bias(b, m, n) + R[b][m][n])
//
// Tiling: a work-group computes a TSM × TSN tile of Y. Each step stages a TSM × TSK slice
// of A and a TSK × TSN slice of B in local memory (every work-item loads a share), then
// each work-item accumulates a WPTM × WPTN register block from local memory, reading its
// rows and columns as vectors. The work-group is (TSN / WPTN) × (TSM / WPTM).
//
// Operands are addressed by strides, so transposed and broadcast operands need no copy.
// The batch index b is split as (b0, b1) = (b / batch1, b % batch1), each with its own
// stride, which covers MatMul's broadcast batch and Conv's (image, group) pairs.
// With conv != 0, B is never materialised: B(k, n) is read from the image X (im2col on the
// fly) with the geometry in geo0 = (H, W, KH, KW, SH, SW, PH, PW) and
// geo1 = (DH, DW, OW, KH·KW).
//
// sa = (a_sm, a_sk, a_s0, a_s1), sb = (b_sk, b_sn, b_s0, b_s1) (b_sk/b_sn unused for conv),
// sbias = (bias_sm, bias_sn, bias_s1, has_bias). Y and R are contiguous (batch, M, N).

#ifndef TSM
#define TSM 64
#endif
#ifndef TSN
#define TSN 64
#endif
#ifndef TSK
#define TSK 16
#endif
#ifndef WPTM
#define WPTM 4
#endif
#ifndef WPTN
#define WPTN 4
#endif
#define RTSM (TSM / WPTM)
#define RTSN (TSN / WPTN)
#define THREADS (RTSM * RTSN)

__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void gemm_tiled(CTPTR A, CTPTR B, TPTR Y, int M, int N, int K, int8 sa, int8 sb, int batch1,
                CTPTR bias, int8 sbias, float alpha, float beta, CTPTR R, int has_res,
                int act, float act_a, float act_b, int conv, int8 geo0, int8 geo1) {
    const int tn = get_local_id(0);
    const int tm = get_local_id(1);
    const int tid = tm * RTSN + tn;
    const int n0 = get_group_id(0) * TSN;
    const int m0 = get_group_id(1) * TSM;
    const int batch = get_global_id(2);
    const int b0 = batch / batch1;
    const int b1 = batch % batch1;
    const long a_base = (long)b0 * sa.s2 + (long)b1 * sa.s3;
    const long b_base = (long)b0 * sb.s2 + (long)b1 * sb.s3;

    __local float As[TSK][TSM];
    __local float Bs[TSK][TSN];

    float acc[WPTM][WPTN];
    for (int i = 0; i < WPTM; ++i)
        for (int j = 0; j < WPTN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TSK) {
        for (int l = tid; l < TSM * TSK; l += THREADS) {
            const int k = l % TSK;
            const int m = l / TSK;
            const int gm = m0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? LD(A, a_base + (long)gm * sa.s0 + (long)gk * sa.s1)
                                          : 0.0f;
        }
        for (int l = tid; l < TSK * TSN; l += THREADS) {
            const int n = l % TSN;
            const int k = l / TSN;
            const int gn = n0 + n, gk = k0 + k;
            float v = 0.0f;
            if (gn < N && gk < K) {
                if (conv) {
                    const int c = gk / geo1.s3;
                    const int r = gk - c * geo1.s3;
                    const int kh = r / geo0.s3;
                    const int kw = r - kh * geo0.s3;
                    const int oh = gn / geo1.s2;
                    const int ow = gn - oh * geo1.s2;
                    const int ih = oh * geo0.s4 - geo0.s6 + kh * geo1.s0;
                    const int iw = ow * geo0.s5 - geo0.s7 + kw * geo1.s1;
                    if (ih >= 0 && ih < geo0.s0 && iw >= 0 && iw < geo0.s1)
                        v = LD(B, b_base + ((long)c * geo0.s0 + ih) * geo0.s1 + iw);
                } else {
                    v = LD(B, b_base + (long)gk * sb.s0 + (long)gn * sb.s1);
                }
            }
            Bs[k][n] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TSK; ++k) {
            float a[WPTM], bv[WPTN];
            for (int i = 0; i < WPTM; ++i) a[i] = As[k][tm + i * RTSM];
            for (int j = 0; j < WPTN; ++j) bv[j] = Bs[k][tn + j * RTSN];
            for (int i = 0; i < WPTM; ++i)
                for (int j = 0; j < WPTN; ++j) acc[i][j] = fma(a[i], bv[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    const long y_base = (long)batch * M * N;
    for (int i = 0; i < WPTM; ++i) {
        const int m = m0 + tm + i * RTSM;
        if (m >= M) continue;
        for (int j = 0; j < WPTN; ++j) {
            const int n = n0 + tn + j * RTSN;
            if (n >= N) continue;
            float v = alpha * acc[i][j];
            if (sbias.s3) v += beta * LD(bias, (long)b1 * sbias.s2 + (long)m * sbias.s0
                                                   + (long)n * sbias.s1);
            const long at = y_base + (long)m * N + n;
            if (has_res) v += LD(R, at);
            ST(Y, at, activate(v, act, act_a, act_b));
        }
    }
}

// ---------------------------------------------------------------------------------------
// The CPU variant. On a CPU device (PoCL) local memory is ordinary cached memory and
// barriers split the work-group into separate loops, so staging tiles buys nothing; this
// variant instead gives each work-item an MR × NR register block (MR = 8 rows of A
// broadcast from one vector load of a packed panel, NR = 16 columns of B in one float16),
// and leaves the reuse of A panels and B column blocks to the caches. A is packed (per
// batch b1) as [ceil(M / MR)][K][MR], zero-padded; B is row-major [K][N] with row stride
// ldb. Packing and im2col are separate kernels below.

#define MR 8
#define NR 16

#if defined(T_F16)
#define LOAD_NR(p, i) vload_half16(0, (p) + (i))
#define LOAD_MR(p, i) vload_half8(0, (p) + (i))
#define STORE_NR(v, p, i) vstore_half16_rte((v), 0, (p) + (i))
#else
#define LOAD_NR(p, i) vload16(0, (p) + (i))
#define LOAD_MR(p, i) vload8(0, (p) + (i))
#define STORE_NR(v, p, i) vstore16((v), 0, (p) + (i))
#endif

// Global (ceil(N / NR), ceil(ceil(M / MR) / MBLOCKS), batch): a work-item owns NR columns
// and MBLOCKS row blocks, so its B column block stays in cache while it walks the rows.
// p = (ldb, b_s0, b_s1, ap_s1, ap_s0): B's row stride and per-batch offsets, and packed
// A's offsets per b1 and per b0 (0 for a conv's weights); sbias as in
// gemm_tiled. A values are read as scalars so the compiler can fold each broadcast into
// its multiply-add.
#ifndef MBLOCKS
#define MBLOCKS 4
#endif

#define FMA_ROW(i) c##i = fma((float16)LD(a, k * MR + i), bv, c##i)

__kernel void gemm_block(CTPTR Ap, CTPTR B, TPTR Y, int M, int N, int K, int8 p, int batch1,
                         CTPTR bias, int8 sbias, float alpha, float beta, CTPTR R,
                         int has_res, int act, float act_a, float act_b) {
    const int nb = get_global_id(0);
    const int mg = get_global_id(1);
    const int batch = get_global_id(2);
    const int n0 = nb * NR;
    if (n0 >= N) return;
    const int b0 = batch / batch1, b1 = batch % batch1;
    CTPTR bp = B + (long)b0 * p.s1 + (long)b1 * p.s2 + n0;
    const int ldb = p.s0;
    const int full = n0 + NR <= N;
    const int left = N - n0;
    const long y_base = (long)batch * M * N;
    for (int mb = mg * MBLOCKS; mb < mg * MBLOCKS + MBLOCKS; ++mb) {
        const int m0 = mb * MR;
        if (m0 >= M) break;
        CTPTR a = Ap + (long)b0 * p.s4 + (long)b1 * p.s3 + (long)mb * K * MR;
        float16 c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0;
        if (full) {
            for (int k = 0; k < K; ++k) {
                const float16 bv = LOAD_NR(bp, (long)k * ldb);
                FMA_ROW(0); FMA_ROW(1); FMA_ROW(2); FMA_ROW(3);
                FMA_ROW(4); FMA_ROW(5); FMA_ROW(6); FMA_ROW(7);
            }
        } else {
            for (int k = 0; k < K; ++k) {
                float t[NR];
                for (int j = 0; j < NR; ++j) t[j] = j < left ? LD(bp, (long)k * ldb + j) : 0.0f;
                const float16 bv = vload16(0, t);
                FMA_ROW(0); FMA_ROW(1); FMA_ROW(2); FMA_ROW(3);
                FMA_ROW(4); FMA_ROW(5); FMA_ROW(6); FMA_ROW(7);
            }
        }
        float16 rows[MR] = {c0, c1, c2, c3, c4, c5, c6, c7};
        for (int i = 0; i < MR; ++i) {
            const int m = m0 + i;
            if (m >= M) break;
            float t[NR];
            vstore16(rows[i], 0, t);
            const long row = y_base + (long)m * N;
            for (int j = 0; j < NR; ++j) {
                const int n = n0 + j;
                if (n >= N) break;
                float v = alpha * t[j];
                if (sbias.s3) v += beta * LD(bias, (long)b1 * sbias.s2 + (long)m * sbias.s0
                                                       + (long)n * sbias.s1);
                if (has_res) v += LD(R, row + n);
                t[j] = activate(v, act, act_a, act_b);
            }
            if (full) {
                STORE_NR(vload16(0, t), Y, row + n0);
            } else {
                for (int j = 0; j < left; ++j) ST(Y, row + n0 + j, t[j]);
            }
        }
    }
}

// Packs A (strided, per batch b = (b0, b1) offsets from sa) into [ceil(M / MR)][K][MR]
// blocks for gemm_block. Global (MR · ceil(M / MR), K, batches of A).
__kernel void pack_a(CTPTR A, TPTR Ap, int M, int K, int8 sa, int batch1, int packed_per_batch) {
    const int m = get_global_id(0);
    const int k = get_global_id(1);
    const int batch = get_global_id(2);
    if (k >= K) return;
    const int b0 = batch / batch1, b1 = batch % batch1;
    const float v = m < M ? LD(A, (long)b0 * sa.s2 + (long)b1 * sa.s3 + (long)m * sa.s0
                                  + (long)k * sa.s1)
                          : 0.0f;
    ST(Ap, (long)batch * packed_per_batch + ((long)(m / MR) * K + k) * MR + m % MR, v);
}

// Copies a strided B (per batch offsets from sb) into row-major [K][N] per batch.
// Global (N, K, batches).
__kernel void pack_b(CTPTR B, TPTR Bp, int K, int N, int8 sb, int batch1) {
    const int n = get_global_id(0);
    const int k = get_global_id(1);
    const int batch = get_global_id(2);
    if (n >= N || k >= K) return;
    const int b0 = batch / batch1, b1 = batch % batch1;
    ST(Bp, ((long)batch * K + k) * N + n,
       LD(B, (long)b0 * sb.s2 + (long)b1 * sb.s3 + (long)k * sb.s0 + (long)n * sb.s1));
}

// im2col: the column matrix [K = Cg·KH·KW][N = OH·OW] of one (image, group) per global z,
// zeros where the window reads padding. One work-item writes one row k (all N columns),
// so a work-group does enough work to be worth scheduling on a CPU device and the inner
// loop over output columns reads the input contiguously for stride 1. geo0, geo1 as in
// gemm_tiled; x_s0 / x_s1 are the per-image and per-group offsets into X.
// Global (K, 1, images · groups).
__kernel void im2col(CTPTR X, TPTR Col, int K, int N, int8 geo0, int8 geo1, int x_s0, int x_s1,
                     int groups) {
    const int k = get_global_id(0);
    const int batch = get_global_id(2);
    if (k >= K) return;
    const int b0 = batch / groups, b1 = batch % groups;
    const int c = k / geo1.s3;
    const int r = k - c * geo1.s3;
    const int kh = r / geo0.s3;
    const int kw = r - kh * geo0.s3;
    const int H = geo0.s0, W = geo0.s1, OW = geo1.s2, OH = N / OW;
    CTPTR x = X + (long)b0 * x_s0 + (long)b1 * x_s1 + (long)c * H * W;
    const long row = ((long)batch * K + k) * N;
    for (int oh = 0; oh < OH; ++oh) {
        const int ih = oh * geo0.s4 - geo0.s6 + kh * geo1.s0;
        const long out = row + (long)oh * OW;
        if (ih < 0 || ih >= H) {
            for (int ow = 0; ow < OW; ++ow) ST(Col, out + ow, 0.0f);
            continue;
        }
        for (int ow = 0; ow < OW; ++ow) {
            const int iw = ow * geo0.s5 - geo0.s7 + kw * geo1.s1;
            ST(Col, out + ow, (iw >= 0 && iw < W) ? LD(x, (long)ih * W + iw) : 0.0f);
        }
    }
}
