// recurrent.cl: GRU and LSTM with any of ONNX's activation functions (`acts`: kind, alpha
// and beta of each function, per direction). X's part of every gate's pre-activation does
// not depend on the state: rnn_project computes it for every step at once, a launch ahead
// of the walk, or with INLINE_X (the CPU-device kernels, for which a launch costs more than
// this part of a step) the walk computes it step by step. One work-group per (direction,
// batch entry) walks the whole sequence: its work-items share the hidden rows, add R times
// the state to X's part, and barriers separate the steps. The state lives in a scratch buffer of acc_t (double where
// the device has it, like the reference's f64 state), one region per work-group: h, the
// next h, and three rows of GRU intermediates; LSTM keeps its cell state c in the third.
// Outputs are rounded once, when stored.
//
// A work-item takes RNN_ROWS consecutive hidden rows (a build define: 4 with the CPU-device
// kernels, else 1), and for each of them the row of every gate: the rows' sums,
// activations and updates are vectors of accv_t, so a CPU device loads four rows at once
// and computes their transcendental functions at once, and the gates' sums are
// independent chains that keep its floating-point units busy where one sum would wait on
// each addition. Each lane still sums its row in order, as the reference does, so both
// builds give the same bits. A block's lanes past the last hidden row repeat the last
// row's reads and are never stored.
//
// Layouts follow the reference (crates/cpu/src/ops/recurrent.rs) except for W and R, which
// the kernels read transposed (WT: [dirs][input][gates · hidden], RT: [dirs][hidden][gates ·
// hidden]): neighbouring work-items read neighbouring addresses (a GPU coalesces them).
// Gate blocks of W, R and B are in ONNX's order (GRU z, r, h; LSTM i, o, f, c), B holds W's
// biases then R's, and with BATCH_MAJOR (layout 1) X, Y and the states are batch-first.
// A gate's pre-activation is ((X·W + R·h) + W's bias) + R's bias, the reference's grouping.

#ifndef RNN_ROWS
#define RNN_ROWS 1
#endif

#if RNN_ROWS == 4
#ifdef USE_FP64
typedef double4 accv_t;
#else
typedef float4 accv_t;
#endif
// A block's lanes to and from a private array.
#define RNN_SPILL(v, a) vstore4((v), 0, (a))
#define RNN_FILL(a) vload4(0, (a))
// Four consecutive stored elements as accv_t.
#if defined(T_F16)
#define RNN_LD4_F(p, at) vload_half4(0, (p) + (at))
#else
#define RNN_LD4_F(p, at) vload4(0, (p) + (at))
#endif
#ifdef USE_FP64
#define RNN_LD4(p, at) convert_double4(RNN_LD4_F(p, at))
#else
#define RNN_LD4(p, at) RNN_LD4_F(p, at)
#endif
#elif RNN_ROWS == 1
typedef acc_t accv_t;
#define RNN_SPILL(v, a) ((a)[0] = (v))
#define RNN_FILL(a) ((a)[0])
#else
#error "RNN_ROWS must be 1 or 4"
#endif

// Flags: which optional operands and outputs are present, and the attributes.
#define HAS_B 1
#define HAS_H0 2
#define HAS_C0 4
#define HAS_P 8
#define HAS_Y 16
#define HAS_YH 32
#define HAS_YC 64
#define BATCH_MAJOR 128
#define LINEAR_BEFORE_RESET 256
#define INPUT_FORGET 512
#define HAS_CLIP 1024
#define INLINE_X 2048

// Scratch rows per work-group (SCRATCH_ROWS in ops/recurrent.rs).
#define SCRATCH_ROWS 5

// The activation functions, by their position in concord-core's RnnActivationKind::ALL
// (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu,
// Softsign, Softplus), with the reference's NaN behaviour: Relu of NaN is 0, a clamp keeps
// NaN. A vector's comparisons select lane by lane.
inline accv_t rnn_act(accv_t x, __global const float* acts, int which) {
    const int kind = (int)acts[3 * which];
    const acc_t a = acts[3 * which + 1], b = acts[3 * which + 2];
    const accv_t zero = (accv_t)(0), one = (accv_t)(1);
    switch (kind) {
    case 0: return x > 0 ? x : zero;
    case 1: return tanh(x);
    case 2: return one / (one + exp(-x));
    case 3: return a * x + b;
    case 4: return x >= 0 ? x : a * x;
    case 5: return x > a ? x : zero;
    case 6: return a * tanh(b * x);
    case 7: { const accv_t v = a * x + b; return v < 0 ? zero : (v > 1 ? one : v); }
    case 8: return x >= 0 ? x : a * expm1(x);
    case 9: return x / (one + fabs(x));
    default: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    }
}

// Clamps a gate's pre-activation to [-clip, clip]; a NaN stays NaN, as in the reference.
inline accv_t rnn_clip(accv_t v, int flags, float clip) {
    if (!(flags & HAS_CLIP)) return v;
    const accv_t c = (accv_t)((acc_t)clip);
    return v < -c ? -c : (v > c ? c : v);
}

// Flat offsets: X[t, n, i] (or X[n, t, i]); Y[t, d, n, j] (or Y[n, t, d, j]); a state's
// [d, n, j] (or [n, d, j]).
inline long rnn_x_at(int t, int n, int seq, int batch, int input, int flags) {
    return (flags & BATCH_MAJOR) ? ((long)n * seq + t) * input : ((long)t * batch + n) * input;
}

inline long rnn_y_at(int t, int d, int n, int j, int seq, int dirs, int batch, int hidden,
                     int flags) {
    return (flags & BATCH_MAJOR) ? (((long)n * seq + t) * dirs + d) * hidden + j
                                 : (((long)t * dirs + d) * batch + n) * hidden + j;
}

inline long rnn_state_at(int d, int n, int j, int dirs, int batch, int hidden, int flags) {
    return (flags & BATCH_MAJOR) ? ((long)n * dirs + d) * hidden + j
                                 : ((long)d * batch + n) * hidden + j;
}

// XW[d][t][n][g·H + j]: X's part of gate row g·H + j's pre-activation at step t of batch
// entry n in direction d (W's bias is added later, where the reference adds it).
inline long rnn_xw_at(int d, int t, int n, int seq, int batch, int rows) {
    return (((long)d * seq + t) * batch + n) * rows;
}

// A block of `valid` (1 to RNN_ROWS) consecutive elements from `at`, as accv_t lanes; lanes
// past `valid` repeat the last element.
inline accv_t rnn_ld(CTPTR p, long at, int valid) {
#if RNN_ROWS == 4
    if (valid == 4) return RNN_LD4(p, at);
#endif
    acc_t v[RNN_ROWS];
    for (int l = 0; l < RNN_ROWS; ++l) v[l] = (acc_t)LD(p, at + min(l, valid - 1));
    return RNN_FILL(v);
}

inline accv_t rnn_ld_acc(__global const acc_t* p, int valid) {
#if RNN_ROWS == 4
    if (valid == 4) return vload4(0, p);
#endif
    acc_t v[RNN_ROWS];
    for (int l = 0; l < RNN_ROWS; ++l) v[l] = p[min(l, valid - 1)];
    return RNN_FILL(v);
}

// Stores a block's `valid` lanes.
inline void rnn_st_acc(__global acc_t* p, accv_t x, int valid) {
#if RNN_ROWS == 4
    if (valid == 4) {
        vstore4(x, 0, p);
        return;
    }
#endif
    acc_t v[RNN_ROWS];
    RNN_SPILL(x, v);
    for (int l = 0; l < valid; ++l) p[l] = v[l];
}

// An optional operand's block (zeros when its flag is clear).
inline accv_t rnn_opt(CTPTR p, long at, int valid, int flags, int flag) {
    return (flags & flag) ? rnn_ld(p, at, valid) : (accv_t)(0);
}

// X's part of hidden rows j to j + valid - 1 of every gate at X's row `xb`:
// s[g] = Σ_i W[d][g·H + j][i] · X[xb + i], each sum over i in order (`w` is direction d's
// base in WT plus j). The fourth gate of a GRU (three gates) repeats its third.
inline void rnn_x_part(CTPTR X, long xb, CTPTR WT, long w, int rows, int hidden, int gates,
                       int input, int valid, accv_t* s) {
    const long o1 = hidden, o2 = 2L * hidden, o3 = (long)min(3, gates - 1) * hidden;
    accv_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int i = 0; i < input; ++i) {
        const long at = w + (long)i * rows;
        const acc_t x = (acc_t)LD(X, xb + i);
        s0 += rnn_ld(WT, at, valid) * x;
        s1 += rnn_ld(WT, at + o1, valid) * x;
        s2 += rnn_ld(WT, at + o2, valid) * x;
        s3 += rnn_ld(WT, at + o3, valid) * x;
    }
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
}

// X's part of every gate row for every step, batch entry and direction, into XW. Global
// size (blocks of RNN_ROWS hidden rows, seq · batch, dirs); a work-item takes its block's
// rows of every gate. (With INLINE_X the walk computes it step by step instead.)
__kernel void rnn_project(CTPTR X, CTPTR WT, __global acc_t* XW, int seq, int batch,
                          int input, int hidden, int gates, int flags) {
    const int j = get_global_id(0) * RNN_ROWS, tn = get_global_id(1), d = get_global_id(2);
    if (j >= hidden || tn >= seq * batch) return;
    const int valid = min(RNN_ROWS, hidden - j);
    const int t = tn / batch, n = tn - t * batch;
    const int rows = gates * hidden;
    accv_t s[4];
    rnn_x_part(X, rnn_x_at(t, n, seq, batch, input, flags), WT, (long)d * input * rows + j,
               rows, hidden, gates, input, valid, s);
    __global acc_t* xw = XW + rnn_xw_at(d, t, n, seq, batch, rows) + j;
    for (int g = 0; g < gates; ++g) rnn_st_acc(xw + (long)g * hidden, s[g], valid);
}

// X's part of the rows j.. of every gate at step t: computed here with INLINE_X, else
// read from rnn_project's XW.
inline void rnn_x_rows(CTPTR X, CTPTR WT, __global const acc_t* XW, int d, int t, int n,
                       int j, int valid, int seq, int batch, int input, int hidden,
                       int gates, int flags, accv_t* s) {
    const int rows = gates * hidden;
    if (flags & INLINE_X) {
        rnn_x_part(X, rnn_x_at(t, n, seq, batch, input, flags), WT,
                   (long)d * input * rows + j, rows, hidden, gates, input, valid, s);
    } else {
        __global const acc_t* xw = XW + rnn_xw_at(d, t, n, seq, batch, rows) + j;
        for (int g = 0; g < gates; ++g) s[g] = rnn_ld_acc(xw + (long)g * hidden, valid);
    }
}

// The recurrent walk of both cells. XW is rnn_project's output, RT the transposed R.
// mode: 0 forward, 1 reverse, 2 bidirectional (direction 1 walks in reverse).
__kernel void gru(CTPTR X, CTPTR WT, __global const acc_t* XW, CTPTR RT, CTPTR B, CTPTR H0,
                  TPTR Y, TPTR YH, __global acc_t* S, __global const float* acts, int seq,
                  int batch, int input, int hidden, int dirs, int mode, int flags,
                  float clip) {
    const int lid = get_local_id(0), L = get_local_size(0);
    const int group = get_group_id(1);
    if (group >= dirs * batch) return;
    const int d = group / batch, n = group - d * batch;
    const int reverse = mode == 1 || (mode == 2 && d == 1);
    const int gh = 3 * hidden;
    const int fa = 2 * d, ga = 2 * d + 1;
    const int lbr = flags & LINEAR_BEFORE_RESET;
    __global acc_t* h = S + (long)group * SCRATCH_ROWS * hidden;
    __global acc_t* next = h + hidden;
    __global acc_t* scaled = next + hidden;
    __global acc_t* zs = scaled + hidden;
    __global acc_t* xs = zs + hidden;
    const long rt = (long)d * hidden * gh, bw = (long)d * 2 * gh, br = bw + gh;
    for (int j = lid; j < hidden; j += L) {
        h[j] = (flags & HAS_H0) ? (acc_t)LD(H0, rnn_state_at(d, n, j, dirs, batch, hidden, flags))
                                : 0;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (int k = 0; k < seq; ++k) {
        const int t = reverse ? seq - 1 - k : k;
        for (int j = lid * RNN_ROWS; j < hidden; j += L * RNN_ROWS) {
            const int valid = min(RNN_ROWS, hidden - j);
            const long jz = j, jr = hidden + j, jh = 2 * hidden + j;
            accv_t xp[4];
            rnn_x_rows(X, WT, XW, d, t, n, j, valid, seq, batch, input, hidden, 3, flags, xp);
            // R_h times h only with linear_before_reset; else after the barrier, times r ⊙ h.
            accv_t rz = 0, rr = 0, rh = 0;
            for (int c = 0; c < hidden; ++c) {
                const long at = rt + (long)c * gh;
                const acc_t hc = h[c];
                rz += rnn_ld(RT, at + jz, valid) * hc;
                rr += rnn_ld(RT, at + jr, valid) * hc;
                if (lbr) rh += rnn_ld(RT, at + jh, valid) * hc;
            }
            const accv_t hj = rnn_ld_acc(h + j, valid);
            const accv_t z = rnn_act(rnn_clip(
                xp[0] + rz + rnn_opt(B, bw + jz, valid, flags, HAS_B)
                    + rnn_opt(B, br + jz, valid, flags, HAS_B),
                flags, clip), acts, fa);
            const accv_t r = rnn_act(rnn_clip(
                xp[1] + rr + rnn_opt(B, bw + jr, valid, flags, HAS_B)
                    + rnn_opt(B, br + jr, valid, flags, HAS_B),
                flags, clip), acts, fa);
            const accv_t xh = xp[2] + rnn_opt(B, bw + jh, valid, flags, HAS_B);
            if (lbr) {
                const accv_t rec = r * (rh + rnn_opt(B, br + jh, valid, flags, HAS_B));
                const accv_t cand = rnn_act(rnn_clip(xh + rec, flags, clip), acts, ga);
                rnn_st_acc(next + j, (1 - z) * cand + z * hj, valid);
            } else {
                rnn_st_acc(scaled + j, r * hj, valid);
                rnn_st_acc(zs + j, z, valid);
                rnn_st_acc(xs + j, xh, valid);
            }
        }
        // Without linear_before_reset the candidate needs R_h times the whole of r ⊙ h.
        barrier(CLK_GLOBAL_MEM_FENCE);
        if (!lbr) {
            for (int j = lid * RNN_ROWS; j < hidden; j += L * RNN_ROWS) {
                const int valid = min(RNN_ROWS, hidden - j);
                const long jh = 2 * hidden + j;
                accv_t rh = 0;
                for (int c = 0; c < hidden; ++c) {
                    rh += rnn_ld(RT, rt + (long)c * gh + jh, valid) * scaled[c];
                }
                const accv_t rec = rh + rnn_opt(B, br + jh, valid, flags, HAS_B);
                const accv_t cand =
                    rnn_act(rnn_clip(rnn_ld_acc(xs + j, valid) + rec, flags, clip), acts, ga);
                const accv_t z = rnn_ld_acc(zs + j, valid);
                rnn_st_acc(next + j, (1 - z) * cand + z * rnn_ld_acc(h + j, valid), valid);
            }
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
        for (int j = lid; j < hidden; j += L) {
            h[j] = next[j];
            if (flags & HAS_Y) {
                ST(Y, rnn_y_at(t, d, n, j, seq, dirs, batch, hidden, flags), (float)next[j]);
            }
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
    }
    if (flags & HAS_YH) {
        for (int j = lid; j < hidden; j += L) {
            ST(YH, rnn_state_at(d, n, j, dirs, batch, hidden, flags), (float)h[j]);
        }
    }
}

// LSTM gates i, o, f, c are W's row blocks 0 to 3; peepholes P hold i, o, f.
__kernel void lstm(CTPTR X, CTPTR WT, __global const acc_t* XW, CTPTR RT, CTPTR B, CTPTR H0,
                   CTPTR C0, CTPTR P, TPTR Y, TPTR YH, TPTR YC, __global acc_t* S,
                   __global const float* acts, int seq, int batch, int input, int hidden,
                   int dirs, int mode, int flags, float clip) {
    const int lid = get_local_id(0), L = get_local_size(0);
    const int group = get_group_id(1);
    if (group >= dirs * batch) return;
    const int d = group / batch, n = group - d * batch;
    const int reverse = mode == 1 || (mode == 2 && d == 1);
    const int gh = 4 * hidden;
    const int fa = 3 * d, ga = 3 * d + 1, ha = 3 * d + 2;
    __global acc_t* h = S + (long)group * SCRATCH_ROWS * hidden;
    __global acc_t* next = h + hidden;
    __global acc_t* c = next + hidden;
    const long rt = (long)d * hidden * gh, bw = (long)d * 2 * gh, br = bw + gh;
    const long pb = (long)d * 3 * hidden;
    for (int j = lid; j < hidden; j += L) {
        const long at = rnn_state_at(d, n, j, dirs, batch, hidden, flags);
        h[j] = (flags & HAS_H0) ? (acc_t)LD(H0, at) : 0;
        c[j] = (flags & HAS_C0) ? (acc_t)LD(C0, at) : 0;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (int k = 0; k < seq; ++k) {
        const int t = reverse ? seq - 1 - k : k;
        for (int j = lid * RNN_ROWS; j < hidden; j += L * RNN_ROWS) {
            const int valid = min(RNN_ROWS, hidden - j);
            const long ji = j, jo = hidden + j, jf = 2 * hidden + j, jc = 3 * hidden + j;
            accv_t xp[4];
            rnn_x_rows(X, WT, XW, d, t, n, j, valid, seq, batch, input, hidden, 4, flags, xp);
            accv_t ri = 0, ro = 0, rf = 0, rc = 0;
            for (int q = 0; q < hidden; ++q) {
                const long at = rt + (long)q * gh;
                const acc_t hq = h[q];
                ri += rnn_ld(RT, at + ji, valid) * hq;
                ro += rnn_ld(RT, at + jo, valid) * hq;
                rf += rnn_ld(RT, at + jf, valid) * hq;
                rc += rnn_ld(RT, at + jc, valid) * hq;
            }
            const accv_t pi = rnn_opt(P, pb + j, valid, flags, HAS_P);
            const accv_t po = rnn_opt(P, pb + hidden + j, valid, flags, HAS_P);
            const accv_t pf = rnn_opt(P, pb + 2 * hidden + j, valid, flags, HAS_P);
            const accv_t cj = rnn_ld_acc(c + j, valid);
            const accv_t i = rnn_act(rnn_clip(
                xp[0] + ri + rnn_opt(B, bw + ji, valid, flags, HAS_B)
                    + rnn_opt(B, br + ji, valid, flags, HAS_B) + pi * cj,
                flags, clip), acts, fa);
            accv_t f;
            if (flags & INPUT_FORGET) {
                f = 1 - i;
            } else {
                f = rnn_act(rnn_clip(
                    xp[2] + rf + rnn_opt(B, bw + jf, valid, flags, HAS_B)
                        + rnn_opt(B, br + jf, valid, flags, HAS_B) + pf * cj,
                    flags, clip), acts, fa);
            }
            const accv_t cand = rnn_act(rnn_clip(
                xp[3] + rc + rnn_opt(B, bw + jc, valid, flags, HAS_B)
                    + rnn_opt(B, br + jc, valid, flags, HAS_B),
                flags, clip), acts, ga);
            const accv_t cell = f * cj + i * cand;
            const accv_t o = rnn_act(rnn_clip(
                xp[1] + ro + rnn_opt(B, bw + jo, valid, flags, HAS_B)
                    + rnn_opt(B, br + jo, valid, flags, HAS_B) + po * cell,
                flags, clip), acts, fa);
            // Rows j to j + valid - 1 of the cell state are read and written by this
            // work-item only.
            rnn_st_acc(c + j, cell, valid);
            rnn_st_acc(next + j, o * rnn_act(cell, acts, ha), valid);
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
        for (int j = lid; j < hidden; j += L) {
            h[j] = next[j];
            if (flags & HAS_Y) {
                ST(Y, rnn_y_at(t, d, n, j, seq, dirs, batch, hidden, flags), (float)next[j]);
            }
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
    }
    for (int j = lid; j < hidden; j += L) {
        const long at = rnn_state_at(d, n, j, dirs, batch, hidden, flags);
        if (flags & HAS_YH) ST(YH, at, (float)h[j]);
        if (flags & HAS_YC) ST(YC, at, (float)c[j]);
    }
}
