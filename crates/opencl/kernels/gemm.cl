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
