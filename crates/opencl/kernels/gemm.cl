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
// sa = (a_sm, a_sk, a_s0, a_s1, a_offset), sb = (b_sk, b_sn, b_s0, b_s1, b_offset) (b_sk/b_sn
// unused for conv; the offsets place a view's first element),
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
    const long a_base = (long)b0 * sa.s2 + (long)b1 * sa.s3 + sa.s4;
    const long b_base = (long)b0 * sb.s2 + (long)b1 * sb.s3 + sb.s4;

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
// variant instead gives each work-item MR × NR blocks of Y (MR = 8 rows of A, each
// broadcast into a multiply-add, NR = 16 columns of B in one float16 load), summed HR rows
// at a time in registers, and makes both
// operands stream: A is packed (per batch) as [ceil(M / MR)][K][MR] panels and B as
// [ceil(N / NR)][K][NR] panels, zero-padded, so a work-item reads two contiguous runs and
// the ragged edges need no special case. Packing (and im2col, which writes B panels
// directly) are separate kernels below.

#define MR 8
#define NR 16

// Rows of a register block: a work-item sums HR rows × NR columns at a time, HR float16
// accumulators. On AVX2 a float16 is two of its sixteen vector registers, so eight rows
// (sixteen registers of sums, plus the B vector and a broadcast) spilled on every
// multiply-add; four rows fit, and measured 1.6-2.8x faster on PoCL. A device whose native
// float vectors are 16 lanes (AVX-512: 32 registers, each a whole float16) gets -DHR=8 from
// the host (`device_options`): eight independent sums keep its multiply-add units busy
// where four wait on each other's latency, and the B vector is loaded once per panel
// instead of twice. Each sum is the same multiply-adds in the same order at either HR, so
// the values are unchanged.
#ifndef HR
#define HR 4
#endif

#if HR == 8
#define ACC_DECL float16 c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0
#define FMA_ROWS()                                                                          \
    FMA_ROW(0); FMA_ROW(1); FMA_ROW(2); FMA_ROW(3); FMA_ROW(4); FMA_ROW(5); FMA_ROW(6);      \
    FMA_ROW(7)
#define FMA_ROWS_IN()                                                                       \
    FMA_ROW_IN(0); FMA_ROW_IN(1); FMA_ROW_IN(2); FMA_ROW_IN(3); FMA_ROW_IN(4);               \
    FMA_ROW_IN(5); FMA_ROW_IN(6); FMA_ROW_IN(7)
#define ACC_STORE(s)                                                                        \
    do {                                                                                    \
        (s)[0] = c0; (s)[1] = c1; (s)[2] = c2; (s)[3] = c3;                                 \
        (s)[4] = c4; (s)[5] = c5; (s)[6] = c6; (s)[7] = c7;                                 \
    } while (0)
// Two panels or chunks side by side (PAIR in gemm_block, conv_taps_pair): a second set of
// eight sums d0..d7 over the B vector bw, each A value at ak loaded once for both.
#define ACC_PAIR_DECL                                                                       \
    ACC_DECL;                                                                               \
    float16 d0 = 0, d1 = 0, d2 = 0, d3 = 0, d4 = 0, d5 = 0, d6 = 0, d7 = 0
#define FMA_PAIR(i)                                                                         \
    do {                                                                                    \
        const float16 a = (float16)LD(ak, i);                                               \
        c##i = fma(a, bv, c##i);                                                            \
        d##i = fma(a, bw, d##i);                                                            \
    } while (0)
#define FMA_PAIRS()                                                                         \
    FMA_PAIR(0); FMA_PAIR(1); FMA_PAIR(2); FMA_PAIR(3); FMA_PAIR(4); FMA_PAIR(5);           \
    FMA_PAIR(6); FMA_PAIR(7)
#define ACC_PAIR_STORE(s)                                                                   \
    do {                                                                                    \
        ACC_STORE(s);                                                                       \
        (s)[8] = d0; (s)[9] = d1; (s)[10] = d2; (s)[11] = d3;                               \
        (s)[12] = d4; (s)[13] = d5; (s)[14] = d6; (s)[15] = d7;                             \
    } while (0)
#elif HR == 4
#define ACC_DECL float16 c0 = 0, c1 = 0, c2 = 0, c3 = 0
#define FMA_ROWS() FMA_ROW(0); FMA_ROW(1); FMA_ROW(2); FMA_ROW(3)
#define FMA_ROWS_IN() FMA_ROW_IN(0); FMA_ROW_IN(1); FMA_ROW_IN(2); FMA_ROW_IN(3)
#define ACC_STORE(s)                                                                        \
    do {                                                                                    \
        (s)[0] = c0; (s)[1] = c1; (s)[2] = c2; (s)[3] = c3;                                 \
    } while (0)
#else
#error "HR must be 4 or 8"
#endif

#ifndef MBLOCKS
#define MBLOCKS 8
#endif

// ak points at the current k's MR values of the A panel (constant offsets, no index
// arithmetic per multiply-add).
#define FMA_ROW(i) c##i = fma((float16)LD(ak, i), bv, c##i)
// The same with A read in place: a##i points at row m0 + i's current k.
#define FMA_ROW_IN(i) c##i = fma((float16)LD(a##i, k), bv, c##i)

// HR consecutive values of an A panel as one vector (rows m0 .. m0 + HR - 1 at one k), and
// such a vector into a private array.
#if HR == 8
typedef float8 hrv_t;
#define HR_SPILL(v, t) vstore8((v), 0, (t))
#if defined(T_F16)
#define HR_LOAD(p) vload_half8(0, (p))
#else
#define HR_LOAD(p) vload8(0, (p))
#endif
#else
typedef float4 hrv_t;
#define HR_SPILL(v, t) vstore4((v), 0, (t))
#if defined(T_F16)
#define HR_LOAD(p) vload_half4(0, (p))
#else
#define HR_LOAD(p) vload4(0, (p))
#endif
#endif

// gemm_block's HR rows of columns n0 .. n0 + left - 1 one column at a time (see `narrow`
// there): each output's multiply-adds are those of the 16-column tiles, in the same order,
// and the epilogue is theirs too (bias, residual, then activate16 over the column's rows).
inline void gemm_block_columns(CTPTR ak, CTPTR bp, int ldb, TPTR Y, int M, int N, int K,
                               int m0, int n0, int left, int b1, long y_base, int ldy,
                               CTPTR bias,
                               int8 sbias, float alpha, float beta, CTPTR R, int has_res,
                               int act, float act_a, float act_b) {
    for (int j = 0; j < left; ++j) {
        hrv_t acc = 0;
        CTPTR a = ak;
        CTPTR bk = bp + j;
        for (int k = 0; k < K; ++k, a += MR, bk += ldb) {
            acc = fma(HR_LOAD(a), (hrv_t)LD(bk, 0), acc);
        }
        float t[NR];
        for (int i = 0; i < NR; ++i) t[i] = 0.0f;
        HR_SPILL(acc, t);
        const int n = n0 + j;
        for (int i = 0; i < HR && m0 + i < M; ++i) {
            const int m = m0 + i;
            float v = alpha * t[i];
            if (sbias.s3) {
                v += beta * LD(bias, (long)b1 * sbias.s2 + (long)m * sbias.s0
                                         + (long)n * sbias.s1);
            }
            if (has_res) v += LD(R, y_base + (long)m * ldy + n);
            t[i] = v;
        }
        vstore16(activate16(vload16(0, t), act, act_a, act_b), 0, t);
        for (int i = 0; i < HR && m0 + i < M; ++i) ST(Y, y_base + (long)(m0 + i) * ldy + n, t[i]);
    }
}

// One row of a register block: `v` (alpha times the row's sums over NR columns from n0)
// plus bias, residual and activation, stored where the columns are inside N (`left` of
// them).
__attribute__((always_inline)) inline void gemm_block_row(float16 v, TPTR Y, CTPTR bias,
                                                          int8 sbias, float beta, CTPTR R,
                                                          int has_res, int act, float act_a,
                                                          float act_b, int b1, int m, long row,
                                                          int n0, int left) {
    if (sbias.s3) {
        const long bias_row = (long)b1 * sbias.s2 + (long)m * sbias.s0;
        if (sbias.s1 == 0) {
            v += beta * LD(bias, bias_row);
        } else if (sbias.s1 == 1 && left == NR) {
            v += beta * LD16(bias, bias_row + n0);
        } else {
            float t[NR];
            for (int j = 0; j < NR; ++j)
                t[j] = j < left ? LD(bias, bias_row + (long)(n0 + j) * sbias.s1) : 0.0f;
            v += beta * vload16(0, t);
        }
    }
    if (left == NR) {
        if (has_res) v += LD16(R, row + n0);
        ST16(activate16(v, act, act_a, act_b), Y, row + n0);
    } else {
        float t[NR];
        if (has_res) {
            for (int j = 0; j < NR; ++j) t[j] = j < left ? LD(R, row + n0 + j) : 0.0f;
            v += vload16(0, t);
        }
        vstore16(activate16(v, act, act_a, act_b), 0, t);
        for (int j = 0; j < left; ++j) ST(Y, row + n0 + j, t[j]);
    }
}

// Global (ceil(ceil(N / NR) / per_item), ceil(ceil(M / MR) / mblocks), batch): a work-item
// owns per_item (1 or 2, see PAIR) B panels and mblocks (the launch's choice, MBLOCKS or
// fewer) A panels, so its B panels stay in cache while it walks the rows.
// p = (bp_s0, bp_s1, ap_s0, ap_s1, ldb, lda, a_offset, b_offset): panel offsets per b0 and
// b1 of B and of A (A's b0 offset is 0 for a conv's weights), B's row stride and first
// element when it is not packed but read in place (an image, or an activation with
// contiguous rows), and A's row stride and first element when A is not packed either, its
// k contiguous (a MatMul's or Gemm's activations, views included: packing them was one
// more launch and pass, which the packed loop did not win back); sbias as in gemm_tiled.
// A values are read as scalars so the compiler folds each broadcast into its
// multiply-add.
__kernel void gemm_block(CTPTR Ap, CTPTR Bp, TPTR Y, CTPTR bias, CTPTR R,
                         __global const long* restrict P) {
    const int M = P_INT(0), N = P_INT(1), K = P_INT(2);
    const int8 p = P_INT8(3);
    const int batch1 = P_INT(11);
    const int8 sbias = P_INT8(12);
    const float alpha = P_FLOAT(20), beta = P_FLOAT(21);
    const int has_res = P_INT(22), act = P_INT(23);
    const float act_a = P_FLOAT(24), act_b = P_FLOAT(25);
    const int mblocks = P_INT(26);
    // Where the output's rows go: (b0, b1, row) strides, or a row stride of 0 for the
    // contiguous (batch, M, N) (a Transpose folded into a MatMul permutes them; R, read
    // only without one, stays contiguous).
    const long ys0 = P[27], ys1 = P[28];
    const int ysm = P_INT(29);
    // Panels per work-item, 1 or 2 (see PAIR below).
    const int per_item = P_INT(30);
    const int nb = get_global_id(0);
    const int mg = get_global_id(1);
    const int batch = get_global_id(2);
    const int first = nb * per_item;
    if (first * NR >= N) return;
    const int panels = min(per_item, (N + NR - 1) / NR - first);
    const int b0 = batch / batch1, b1 = batch % batch1;
    // p.s4 > 0: B is not packed but row-major with that row stride, from element p.s7 on
    // (the image of a 1×1 conv, or a MatMul's activation). A ragged last panel then loads
    // past each row's end; those lanes are dropped.
    const int ldb = p.s4 > 0 ? p.s4 : NR;
    CTPTR b_base = Bp + (long)b0 * p.s0 + (long)b1 * p.s1;
    const long y_base = ysm > 0 ? (long)b0 * ys0 + (long)b1 * ys1 : (long)batch * M * N;
    const int ldy = ysm > 0 ? ysm : N;
    for (int mb = mg * mblocks; mb < mg * mblocks + mblocks; ++mb) {
        // A panel's MR rows in passes of HR (see HR): the B panel is read once per pass,
        // from cache.
        for (int h = 0; h < MR; h += HR) {
            const int m0 = mb * MR + h;
            if (m0 >= M) break;
#if HR == 8
            // PAIR: two B panels side by side with a packed A, sixteen sums: each A value
            // loaded feeds two multiply-adds and the B loads are two in ten, so the
            // multiply-add units, not the loads, set the pace (an AVX-512 core issues two
            // loads and two multiply-adds a cycle). Each sum is the same multiply-adds in
            // the same order as one panel at a time. The second panel must have 4 columns
            // or more (a narrower one goes one column at a time, below).
            if (panels == 2 && p.s5 == 0 && N - (first + 1) * NR >= 4) {
                const int n0 = first * NR;
                CTPTR bk = b_base + (p.s4 > 0 ? (long)n0 + p.s7 : (long)first * K * NR);
                const long b_next = p.s4 > 0 ? NR : (long)K * NR;
                CTPTR ak = Ap + (long)b0 * p.s2 + (long)b1 * p.s3 + (long)mb * K * MR + h;
                ACC_PAIR_DECL;
                for (int k = 0; k < K; ++k, ak += MR, bk += ldb) {
                    const float16 bv = LD16(bk, 0), bw = LD16(bk + b_next, 0);
                    FMA_PAIRS();
                }
                float16 rows[2 * HR];
                ACC_PAIR_STORE(rows);
                const int left = min(N - n0 - NR, NR);
                for (int i = 0; i < HR; ++i) {
                    const int m = m0 + i;
                    if (m >= M) break;
                    const long row = y_base + (long)m * ldy;
                    gemm_block_row(alpha * rows[i], Y, bias, sbias, beta, R, has_res, act,
                                   act_a, act_b, b1, m, row, n0, NR);
                    gemm_block_row(alpha * rows[HR + i], Y, bias, sbias, beta, R, has_res,
                                   act, act_a, act_b, b1, m, row, n0 + NR, left);
                }
                continue;
            }
#endif
            for (int q = first; q < first + panels; ++q) {
                const int n0 = q * NR;
                CTPTR bp = b_base + (p.s4 > 0 ? (long)n0 + p.s7 : (long)q * K * NR);
                const int left = min(N - n0, NR);
                // A ragged last panel of fewer than 4 columns (a 7×7 image's 49 is three
                // panels and one column) with A packed: one column at a time, its HR rows'
                // sums in one vector over the panel's consecutive A values, instead of HR
                // vectors of which `left` lanes count.
                if (left < 4 && p.s5 == 0) {
                    gemm_block_columns(Ap + (long)b0 * p.s2 + (long)b1 * p.s3
                                           + (long)mb * K * MR + h,
                                       bp, ldb, Y, M, N, K, m0, n0, left, b1, y_base, ldy,
                                       bias, sbias, alpha, beta, R, has_res, act, act_a,
                                       act_b);
                    continue;
                }
                ACC_DECL;
                if (p.s5 > 0) {
                    // A in place: rows past M read the last row, and their sums are never
                    // stored.
                    CTPTR a = Ap + (long)b0 * p.s2 + (long)b1 * p.s3 + p.s6;
                    CTPTR a0 = a + (long)min(m0, M - 1) * p.s5;
                    CTPTR a1 = a + (long)min(m0 + 1, M - 1) * p.s5;
                    CTPTR a2 = a + (long)min(m0 + 2, M - 1) * p.s5;
                    CTPTR a3 = a + (long)min(m0 + 3, M - 1) * p.s5;
#if HR == 8
                    CTPTR a4 = a + (long)min(m0 + 4, M - 1) * p.s5;
                    CTPTR a5 = a + (long)min(m0 + 5, M - 1) * p.s5;
                    CTPTR a6 = a + (long)min(m0 + 6, M - 1) * p.s5;
                    CTPTR a7 = a + (long)min(m0 + 7, M - 1) * p.s5;
#endif
                    CTPTR bk = bp;
                    for (int k = 0; k < K; ++k, bk += ldb) {
                        const float16 bv = LD16(bk, 0);
                        FMA_ROWS_IN();
                    }
                } else {
                    CTPTR ak = Ap + (long)b0 * p.s2 + (long)b1 * p.s3 + (long)mb * K * MR + h;
                    CTPTR bk = bp;
                    for (int k = 0; k < K; ++k, ak += MR, bk += ldb) {
                        const float16 bv = LD16(bk, 0);
                        FMA_ROWS();
                    }
                }
                float16 rows[HR];
                ACC_STORE(rows);
                for (int i = 0; i < HR; ++i) {
                    const int m = m0 + i;
                    if (m >= M) break;
                    gemm_block_row(alpha * rows[i], Y, bias, sbias, beta, R, has_res, act,
                                   act_a, act_b, b1, m, y_base + (long)m * ldy, n0, left);
                }
            }
        }
    }
}

// Values of k one packing work-item writes (pack_a, pack_b, im2col): a KC × NR block of a
// B panel is a contiguous run of memory.
#define KC 32

// Packs A (strided as sa says, offset included) into [ceil(M / MR)][K][MR]
// panels. A work-item packs KC values of k for one row m (so a small A, such as the one
// row of a classifier's Gemm, is not split into thousands of work-groups).
// Global (MR · ceil(M / MR), ceil(K / KC), batches of A).
__kernel void pack_a(CTPTR A, TPTR Ap, int M, int K, int8 sa, int batch1, int packed_per_batch) {
    const int m = get_global_id(0);
    const int kc = get_global_id(1);
    const int batch = get_global_id(2);
    const int b0 = batch / batch1, b1 = batch % batch1;
    const long src = (long)b0 * sa.s2 + (long)b1 * sa.s3 + (long)m * sa.s0 + sa.s4;
    const long dst = (long)batch * packed_per_batch + (long)(m / MR) * K * MR + m % MR;
    const int k_end = min(K, (kc + 1) * KC);
    for (int k = kc * KC; k < k_end; ++k)
        ST(Ap, dst + (long)k * MR, m < M ? LD(A, src + (long)k * sa.s1) : 0.0f);
}

// Packs a strided B (sb = (b_sk, b_sn, b_s0, b_s1, b_offset)) into
// [ceil(N / NR)][K][NR] panels per batch, zero-padded. Global (panels, ceil(K / KC), batches).
__kernel void pack_b(CTPTR B, TPTR Bp, int K, int N, int8 sb, int batch1) {
    const int nb = get_global_id(0);
    const int kc = get_global_id(1);
    const int batch = get_global_id(2);
    const int panels = (N + NR - 1) / NR;
    if (nb >= panels) return;
    const int b0 = batch / batch1, b1 = batch % batch1;
    const long src = (long)b0 * sb.s2 + (long)b1 * sb.s3 + sb.s4;
    const long dst = ((long)batch * panels + nb) * K * NR;
    const int k_end = min(K, (kc + 1) * KC);
    for (int k = kc * KC; k < k_end; ++k) {
        for (int j = 0; j < NR; ++j) {
            const int n = nb * NR + j;
            ST(Bp, dst + (long)k * NR + j,
               n < N ? LD(B, src + (long)k * sb.s0 + (long)n * sb.s1) : 0.0f);
        }
    }
}

// im2col straight into B panels: the column matrix [K = Cg·KH·KW][N = OH·OW] of one
// (image, group) per global z, as [ceil(N / NR)][K][NR], zeros where the window reads
// padding or past N. A work-item fills a KC × NR block of one panel (contiguous writes,
// and NR neighbouring output columns read neighbouring input columns). geo0, geo1 as in
// gemm_tiled; x_s0 / x_s1 are the per-image and per-group offsets into X.
// Global (panels, ceil(K / KC), images · groups).
__kernel void im2col(CTPTR X, TPTR Col, int K, int N, int8 geo0, int8 geo1, int x_s0, int x_s1,
                     int groups) {
    const int nb = get_global_id(0);
    const int kc = get_global_id(1);
    const int batch = get_global_id(2);
    const int panels = (N + NR - 1) / NR;
    if (nb >= panels) return;
    const int b0 = batch / groups, b1 = batch % groups;
    const int H = geo0.s0, W = geo0.s1, OW = geo1.s2;
    CTPTR x = X + (long)b0 * x_s0 + (long)b1 * x_s1;
    const long dst = ((long)batch * panels + nb) * K * NR;
    int ih0[NR], iw0[NR];
    for (int j = 0; j < NR; ++j) {
        const int n = min(nb * NR + j, N - 1);
        const int oh = n / OW;
        const int ow = n - oh * OW;
        ih0[j] = nb * NR + j < N ? oh * geo0.s4 - geo0.s6 : -(1 << 29);
        iw0[j] = ow * geo0.s5 - geo0.s7;
    }
    const int k_end = min(K, (kc + 1) * KC);
    for (int k = kc * KC; k < k_end; ++k) {
        const int c = k / geo1.s3;
        const int r = k - c * geo1.s3;
        const int kh = r / geo0.s3;
        const int kw = r - kh * geo0.s3;
        CTPTR xc = x + (long)c * H * W;
        for (int j = 0; j < NR; ++j) {
            const int ih = ih0[j] + kh * geo1.s0;
            const int iw = iw0[j] + kw * geo1.s1;
            ST(Col, dst + (long)k * NR + j,
               (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LD(xc, (long)ih * W + iw) : 0.0f);
        }
    }
}

// The multiply-adds conv_rows and conv_shift share: HR rows of the A panel at ak (k = (c,
// kh, kw) in that order, MR values apart) times, for each k, the NR columns of the padded
// copy at xb + c·plane + kh·DH·Wp + off(kw·DW), where off(t) is t for stride 1 and, for
// stride 2 (a copy with each row's columns de-interleaved, see pad_planes), column t / 2 of
// phase t % 2, which starts `even` values into the row.
inline void conv_taps(CTPTR ak, CTPTR xb, long plane, int C, int KH, int KW, int DH, int DW,
                      int Wp, int SW, int even, float16* rows) {
    ACC_DECL;
    for (int c = 0; c < C; ++c) {
        CTPTR xc = xb + (long)c * plane;
        for (int kh = 0; kh < KH; ++kh) {
            CTPTR xr = xc + kh * DH * Wp;
            for (int kw = 0; kw < KW; ++kw, ak += MR) {
                const int t = kw * DW;
                const float16 bv = LD16(xr, SW == 1 ? t : (t & 1) * even + (t >> 1));
                FMA_ROWS();
            }
        }
    }
    ACC_STORE(rows);
}

#if HR == 8
// conv_taps for two adjacent chunks of NR columns (xb the first one's), sixteen sums: as
// PAIR in gemm_block, each A value feeds two multiply-adds; each sum is the same
// multiply-adds in the same order as one chunk at a time.
inline void conv_taps_pair(CTPTR ak, CTPTR xb, long plane, int C, int KH, int KW, int DH,
                           int DW, int Wp, int SW, int even, float16* rows) {
    ACC_PAIR_DECL;
    for (int c = 0; c < C; ++c) {
        CTPTR xc = xb + (long)c * plane;
        for (int kh = 0; kh < KH; ++kh) {
            CTPTR xr = xc + kh * DH * Wp;
            for (int kw = 0; kw < KW; ++kw, ak += MR) {
                const int t = kw * DW;
                const int o = SW == 1 ? t : (t & 1) * even + (t >> 1);
                const float16 bv = LD16(xr, o), bw = LD16(xr, o + NR);
                FMA_PAIRS();
            }
        }
    }
    ACC_PAIR_STORE(rows);
}
#endif

// A convolution with width stride 1 or 2 over output rows: the image is zero-padded into
// Xp (planes of rows×Wp, room past the last row), and a work-item owns NR output columns
// ow0 .. ow0 + NR - 1 of one output row oh, or per_item such chunks in a row, two at a
// time with eight rows of sums (conv_taps_pair) (and MBLOCKS row panels of A). For k = (c, kh,
// kw) those columns read Xp at plane c, row oh·SH + kh·DH, columns (ow0 + j)·SW + kw·DW:
// one vector load, for stride 2 from a copy with each row's columns de-interleaved (even
// ones, then odd ones), where those columns are consecutive. Unlike conv_shift no
// column is computed past the image's edge, which suits strided convs (a wide row there
// would waste half its columns); lanes past OW in a row's last chunk are dropped.
// p = (x_s0, plane, Wp, OW, OH, chunks = ceil(OW / NR), per_item); geo = (C, KH, KW, DH,
// DW, SH, SW). Global (OH · ceil(chunks / per_item), ceil(ceil(M / MR) / MBLOCKS), images).
// One chunk of conv_rows' output row: `v` (sums plus bias) plus residual and activation,
// its first `left` lanes stored at `at`.
__attribute__((always_inline)) inline void conv_rows_store(float16 v, int left, int has_res,
                                                           CTPTR R, TPTR Y, long at, int act,
                                                           float act_a, float act_b) {
    if (left == NR) {
        if (has_res) v += LD16(R, at);
        ST16(activate16(v, act, act_a, act_b), Y, at);
    } else {
        store_prefix16(v, left, has_res, R, Y, at, act, act_a, act_b);
    }
}

__attribute__((always_inline)) inline void conv_rows_run(
    CTPTR Ap, CTPTR Xp, TPTR Y, int M, int K, int8 p, int8 geo, CTPTR bias, int has_bias,
    CTPTR R, int has_res, int act, float act_a, float act_b) {
    const int g0 = get_global_id(0);
    const int mg = get_global_id(1);
    const int batch = get_global_id(2);
    const int Wp = p.s2, OW = p.s3, OH = p.s4, chunks = p.s5;
    const int per_item = max(p.s6, 1);
    const int row_items = (chunks + per_item - 1) / per_item;
    const int oh = g0 / row_items;
    if (oh >= OH) return;
    const int q_first = (g0 - oh * row_items) * per_item;
    const int q_end = min(chunks, q_first + per_item);
    const int C = geo.s0, KH = geo.s1, KW = geo.s2, DH = geo.s3, DW = geo.s4;
    const int SH = geo.s5, SW = geo.s6;
    const int N = OH * OW;
    // Stride 2 reads a copy whose rows hold the even columns, then the odd ones (pad_planes
    // with split): tap offset t is column t / 2 of phase t % 2, so every tap is one vector.
    const int even = (Wp + 1) / 2;
    CTPTR xrow = Xp + (long)batch * p.s0 + (long)oh * SH * Wp;
    const long y_row = (long)batch * M * N + (long)oh * OW;
    for (int mb = mg * MBLOCKS; mb < mg * MBLOCKS + MBLOCKS; ++mb) {
        for (int h = 0; h < MR; h += HR) {
            const int m0 = mb * MR + h;
            if (m0 >= M) break;
            CTPTR ak = Ap + (long)mb * K * MR + h;
            for (int q = q_first; q < q_end;) {
                const int ow0 = q * NR;
#if HR == 8
                if (q + 1 < q_end) {
                    // Chunk q is whole (another follows it in the row).
                    float16 rows[2 * HR];
                    conv_taps_pair(ak, xrow + ow0, p.s1, C, KH, KW, DH, DW, Wp, SW, even, rows);
                    const int left = min(OW - ow0 - NR, NR);
                    for (int i = 0; i < HR && m0 + i < M; ++i) {
                        const int m = m0 + i;
                        const float bm = has_bias ? LD(bias, m) : 0.0f;
                        const long at = y_row + (long)m * N + ow0;
                        conv_rows_store(rows[i] + bm, NR, has_res, R, Y, at, act, act_a, act_b);
                        conv_rows_store(rows[HR + i] + bm, left, has_res, R, Y, at + NR, act,
                                        act_a, act_b);
                    }
                    q += 2;
                    continue;
                }
#endif
                ++q;
                float16 rows[HR];
                conv_taps(ak, xrow + ow0, p.s1, C, KH, KW, DH, DW, Wp, SW, even, rows);
                const int left = min(OW - ow0, NR);
                for (int i = 0; i < HR && m0 + i < M; ++i) {
                    const int m = m0 + i;
                    const float bm = has_bias ? LD(bias, m) : 0.0f;
                    conv_rows_store(rows[i] + bm, left, has_res, R, Y,
                                    y_row + (long)m * N + ow0, act, act_a, act_b);
                }
            }
        }
    }
}

__kernel void conv_rows(CTPTR Ap, CTPTR Xp, TPTR Y, int M, int K, int8 p, int8 geo,
                        CTPTR bias, int has_bias, CTPTR R, int has_res, int act, float act_a,
                        float act_b) {
    conv_rows_run(Ap, Xp, Y, M, K, p, geo, bias, has_bias, R, has_res, act, act_a, act_b);
}

// conv_rows of a conv small enough to be one work-group (see pad_in_group), padding its
// image X into Xp first: one command where there were two.
__kernel void conv_rows_padding(CTPTR Ap, CTPTR X, TPTR Xp, TPTR Y, int M, int K, int8 p,
                                int8 geo, CTPTR bias, int has_bias, CTPTR R, int has_res,
                                int act, float act_a, float act_b, int8 pad) {
    pad_in_group(X, Xp, pad, 0.0f);
    barrier(CLK_GLOBAL_MEM_FENCE);
    conv_rows_run(Ap, Xp, Y, M, K, p, geo, bias, has_bias, R, has_res, act, act_a, act_b);
}


// One output row's chunk of conv_shift: `v` (the sums of the NR wide columns from n0,
// bias added) plus residual and activation, stored where the columns are outputs.
__attribute__((always_inline)) inline void conv_shift_store(float16 v, TPTR Y, CTPTR R,
                                                            int has_res, int act, float act_a,
                                                            float act_b, long row, int n0,
                                                            int Wp, int OW, int NW) {
    const int oh0 = n0 / Wp;
    const int ow0 = n0 - oh0 * Wp;
    if (ow0 + NR <= OW) {
        const long at = row + (long)oh0 * OW + ow0;
        if (has_res) v += LD16(R, at);
        ST16(activate16(v, act, act_a, act_b), Y, at);
        return;
    }
    // A chunk that ends its row or straddles two: the residual's lanes gathered and the
    // activation applied to the whole vector (lane for lane what activate() gives), then
    // the lanes that are outputs stored one by one.
    float t[NR];
    if (has_res) {
        int oh = oh0, ow = ow0;
        for (int j = 0; j < NR; ++j) {
            t[j] = n0 + j < NW && ow < OW ? LD(R, row + (long)oh * OW + ow) : 0.0f;
            if (++ow == Wp) {
                ow = 0;
                ++oh;
            }
        }
        v += vload16(0, t);
    }
    vstore16(activate16(v, act, act_a, act_b), 0, t);
    int oh = oh0, ow = ow0;
    for (int j = 0; j < NR && n0 + j < NW; ++j) {
        if (ow < OW) ST(Y, row + (long)oh * OW + ow, t[j]);
        if (++ow == Wp) {
            ow = 0;
            ++oh;
        }
    }
}


// Whether conv_shift's chunk of wide columns from n0 lies wholly past its row's last output
// (planes widened to whole chunks), so is skipped.
#define CHUNK_SKIPPED(n0) ((n0) % Wp >= OW && (n0) % Wp + NR <= Wp)

// A stride-1 convolution without im2col. With the image zero-padded into Xp (rows of Wp
// columns, PW on each side, plus zero rows after the last), the column matrix row for
// k = (c, kh, kw) is Xp itself shifted by c·plane + kh·DH·Wp + kw·DW: contiguous, so a
// work-item loads its columns with vector loads per k, as from a packed panel. The GEMM
// runs over OH·Wp "wide" columns; the Wp - OW columns past each output row's end are
// computed and dropped in the epilogue. Where that costs no more chunks, the host widens
// Wp to a multiple of NR: every chunk then starts at a multiple of NR within its output row
// and stores whole vectors, and a chunk wholly past the row's end is skipped. A work-item
// owns `per_item` consecutive chunks of NR wide columns and MBLOCKS row panels of A, each
// summed in passes of HR rows, a pass over all its chunks (so a pass's A values come from
// cache for every chunk after the first); with eight rows of sums, two chunks at a time
// (conv_taps_pair) where neither is skipped.
// p = (x_s0, plane, Wp, OW, N_wide, N, per_item); geo = (C, KH, KW, DH, DW).
// Global (ceil(ceil(N_wide / NR) / per_item), ceil(ceil(M / MR) / MBLOCKS), images).
__attribute__((always_inline)) inline void conv_shift_run(
    CTPTR Ap, CTPTR Xp, TPTR Y, int M, int K, int8 p, int8 geo, CTPTR bias, int has_bias,
    CTPTR R, int has_res, int act, float act_a, float act_b) {
    const int nb = get_global_id(0);
    const int mg = get_global_id(1);
    const int batch = get_global_id(2);
    const int Wp = p.s2, OW = p.s3, NW = p.s4, N = p.s5;
    const int per_item = max(p.s6, 1);
    const int first = nb * per_item;
    if (first * NR >= NW) return;
    const int C = geo.s0, KH = geo.s1, KW = geo.s2, DH = geo.s3, DW = geo.s4;
    const long y_base = (long)batch * M * N;
    CTPTR xb = Xp + (long)batch * p.s0;
    // How many of the item's chunks exist.
    const int chunks = min(per_item, (NW - first * NR + NR - 1) / NR);
    for (int mb = mg * MBLOCKS; mb < mg * MBLOCKS + MBLOCKS; ++mb) {
        for (int h = 0; h < MR; h += HR) {
            const int m0 = mb * MR + h;
            if (m0 >= M) break;
            CTPTR ak = Ap + (long)mb * K * MR + h;
            for (int q = 0; q < chunks;) {
                const int n0 = (first + q) * NR;
#if HR == 8
                if (q + 1 < chunks && !CHUNK_SKIPPED(n0) && !CHUNK_SKIPPED(n0 + NR)) {
                    float16 rows[2 * HR];
                    conv_taps_pair(ak, xb + n0, p.s1, C, KH, KW, DH, DW, Wp, 1, 0, rows);
                    for (int i = 0; i < HR; ++i) {
                        const int m = m0 + i;
                        if (m >= M) break;
                        const float bm = has_bias ? LD(bias, m) : 0.0f;
                        const long row = y_base + (long)m * N;
                        conv_shift_store(rows[i] + bm, Y, R, has_res, act, act_a, act_b, row,
                                         n0, Wp, OW, NW);
                        conv_shift_store(rows[HR + i] + bm, Y, R, has_res, act, act_a, act_b,
                                         row, n0 + NR, Wp, OW, NW);
                    }
                    q += 2;
                    continue;
                }
#endif
                ++q;
                if (CHUNK_SKIPPED(n0)) continue;
                float16 rows[HR];
                conv_taps(ak, xb + n0, p.s1, C, KH, KW, DH, DW, Wp, 1, 0, rows);
                for (int i = 0; i < HR; ++i) {
                    const int m = m0 + i;
                    if (m >= M) break;
                    const float bm = has_bias ? LD(bias, m) : 0.0f;
                    conv_shift_store(rows[i] + bm, Y, R, has_res, act, act_a, act_b,
                                     y_base + (long)m * N, n0, Wp, OW, NW);
                }
            }
        }
    }
}

__kernel void conv_shift(CTPTR Ap, CTPTR Xp, TPTR Y, int M, int K, int8 p, int8 geo,
                         CTPTR bias, int has_bias, CTPTR R, int has_res, int act, float act_a,
                         float act_b) {
    conv_shift_run(Ap, Xp, Y, M, K, p, geo, bias, has_bias, R, has_res, act, act_a, act_b);
}

// conv_shift of a conv small enough to be one work-group (see pad_in_group), padding its
// image X into Xp first: one command where there were two.
__kernel void conv_shift_padding(CTPTR Ap, CTPTR X, TPTR Xp, TPTR Y, int M, int K, int8 p,
                                 int8 geo, CTPTR bias, int has_bias, CTPTR R, int has_res,
                                 int act, float act_a, float act_b, int8 pad) {
    pad_in_group(X, Xp, pad, 0.0f);
    barrier(CLK_GLOBAL_MEM_FENCE);
    conv_shift_run(Ap, Xp, Y, M, K, p, geo, bias, has_bias, R, has_res, act, act_a, act_b);
}

