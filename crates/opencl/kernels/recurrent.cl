// recurrent.cl: GRU and LSTM with any of ONNX's activation functions (`acts`: kind, alpha
// and beta of each function, per direction). X's part of every gate's pre-activation does
// not depend on the state: rnn_project computes it for every step at once, a launch ahead
// of the walk, or with INLINE_X (the CPU-device kernels, for which a launch costs more than
// this part of a step) the walk computes it step by step. One work-group per (direction,
// batch entry) walks the whole sequence: its work-items share the hidden rows, add R times
// the state to X's part, and barriers separate the steps. The state lives in a scratch
// buffer of acc_t (double where the device has it, like the reference's f64 state), one
// region per work-group: h, the next h, and three rows of GRU intermediates; LSTM keeps
// its cell state c in the third. Outputs are rounded once, when stored.
//
// A work-item takes a span of RNN_BLOCKS blocks of RNN_ROWS consecutive hidden rows (build
// defines: 3 blocks of 8 with the CPU-device kernels, one row else), and for each of them
// the row of every gate: a block's sums, activations and updates are vectors of accv_t, so
// a CPU device loads eight rows at once and computes their transcendental functions at
// once, and the sums of every block and gate are independent chains that keep its
// floating-point units busy where one sum would wait on each addition. Each lane still
// sums its row in order, as the reference does, so both builds give the same bits. A
// block's lanes past the last hidden row repeat the last row's reads and are never stored;
// a block wholly past it repeats the span's first block and is not stored either.
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

// The kernels compute in acc_t: double where the device has it, like the reference's f64
// state (Tanh and Sigmoid excepted, in float: see rnn_act). A block of RNN_ROWS rows is one
// vector of it, accfv_t its float counterpart.
#if RNN_ROWS == 8
typedef float8 accfv_t;
#ifdef USE_FP64
typedef double8 accv_t;
#define RNN_WIDEN(v) convert_double8(v)
#define RNN_NARROW(v) convert_float8(v)
#else
typedef float8 accv_t;
#define RNN_WIDEN(v) (v)
#define RNN_NARROW(v) (v)
#endif
#define RNN_VLOAD(p) vload8(0, (p))
#define RNN_VSTORE(v, p) vstore8((v), 0, (p))
#if defined(T_F16)
#define RNN_VLOAD_T(p) RNN_WIDEN(vload_half8(0, (p)))
#else
#define RNN_VLOAD_T(p) RNN_WIDEN(vload8(0, (p)))
#endif
#elif RNN_ROWS == 1
typedef acc_t accv_t;
typedef float accfv_t;
#define RNN_WIDEN(v) ((acc_t)(v))
#define RNN_NARROW(v) ((float)(v))
#define RNN_VLOAD(p) ((p)[0])
#define RNN_VSTORE(v, p) ((p)[0] = (v))
#define RNN_VLOAD_T(p) ((acc_t)LD((p), 0))
#else
#error "RNN_ROWS must be 1 or 8"
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
// NaN. A vector's comparisons select lane by lane. `kind` is the function's kind when the
// build fixed it (RNN_KIND_F, _G, _H: every direction has the same kinds), so that the
// switch folds away and the function inlines; -1 reads it from the table.
//
// Tanh and Sigmoid (every gate of every exported model) are evaluated in float on the
// double sum rounded once to float: their slopes are at most 1 and x·f'(x) stays below
// 0.45, so that rounding moves a result by under 3e-8, and float's own functions are
// within a few ulp of 1, the per-step error the `recurrent` tolerance level allows; an
// argument past float's range rounds to an infinity, where both give the f64 limit (±1,
// 0 or 1). Double tanh and exp were about a third of a small LSTM's kernel time on PoCL
// (torch_lstm_lm's two layers: 69 → 47–57 µs of device time under `concord run
// --profile`). The unbounded functions stay in acc_t, where float could overflow. Only where
// the build says every direction has its cell's default functions (RNN_FLOAT_ACTS): with
// an unbounded gate (Softplus, Relu…) a gate above 1 multiplies the state, and the float
// rounding with it, at every step; those nodes take Tanh and Sigmoid in acc_t too.
#ifndef RNN_FLOAT_ACTS
#define RNN_FLOAT_ACTS 0
#endif
#ifndef RNN_KIND_F
#define RNN_KIND_F -1
#endif
#ifndef RNN_KIND_G
#define RNN_KIND_G -1
#endif
#ifndef RNN_KIND_H
#define RNN_KIND_H -1
#endif
inline __attribute__((always_inline)) accv_t rnn_act(accv_t x, __global const float* acts,
                                                     int which, int fixed) {
    const int kind = fixed >= 0 ? fixed : (int)acts[3 * which];
    const acc_t a = acts[3 * which + 1], b = acts[3 * which + 2];
    const accv_t zero = (accv_t)(0), one = (accv_t)(1);
    switch (kind) {
    case 0: return x > 0 ? x : zero;
    case 1:
#if RNN_FLOAT_ACTS
        return RNN_WIDEN(tanh(RNN_NARROW(x)));
#else
        return tanh(x);
#endif
    case 2: {
#if RNN_FLOAT_ACTS
        const accfv_t f = RNN_NARROW(x);
        return RNN_WIDEN((accfv_t)(1.0f) / ((accfv_t)(1.0f) + exp(-f)));
#else
        return one / (one + exp(-x));
#endif
    }
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

// Flat offsets: X[t, n, i] (or X[n, t, i]); a state's [d, n, j] (or [n, d, j]).
inline long rnn_x_at(int t, int n, int seq, int batch, int input, int flags) {
    return (flags & BATCH_MAJOR) ? ((long)n * seq + t) * input : ((long)t * batch + n) * input;
}

// Y[t, d, n, j] is at t·ys.s0 + d·ys.s1 + n·ys.s2 + j·ys.s3: the strides of Y's layout
// (seq-first, or batch-first with BATCH_MAJOR), or of the Transpose folded into the node.
inline long rnn_y_at(int t, int d, int n, int j, int8 ys) {
    return (long)t * ys.s0 + (long)d * ys.s1 + (long)n * ys.s2 + (long)j * ys.s3;
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
    if (valid == RNN_ROWS) return RNN_VLOAD_T(p + at);
    acc_t v[RNN_ROWS];
    for (int l = 0; l < RNN_ROWS; ++l) v[l] = (acc_t)LD(p, at + min(l, valid - 1));
    return RNN_VLOAD(v);
}

inline accv_t rnn_ld_acc(__global const acc_t* p, int valid) {
    if (valid == RNN_ROWS) return RNN_VLOAD(p);
    acc_t v[RNN_ROWS];
    for (int l = 0; l < RNN_ROWS; ++l) v[l] = p[min(l, valid - 1)];
    return RNN_VLOAD(v);
}

// Stores a block's `valid` lanes.
inline void rnn_st_acc(__global acc_t* p, accv_t x, int valid) {
    if (valid == RNN_ROWS) {
        RNN_VSTORE(x, p);
        return;
    }
    acc_t v[RNN_ROWS];
    RNN_VSTORE(x, v);
    for (int l = 0; l < valid; ++l) p[l] = v[l];
}

// An optional operand's block (zeros when its flag is clear).
inline accv_t rnn_opt(CTPTR p, long at, int valid, int flags, int flag) {
    return (flags & flag) ? rnn_ld(p, at, valid) : (accv_t)(0);
}

#ifndef RNN_BLOCKS
#define RNN_BLOCKS 1
#endif
// A work-item's span of hidden rows: RNN_BLOCKS blocks of RNN_ROWS.
#define RNN_SPAN (RNN_ROWS * RNN_BLOCKS)

// The blocks of the span that starts at row j: block k's first row jb[k] and its rows in
// range vb[k]. A block wholly past the last row repeats block 0's reads, so that its sums
// stay in bounds; they are computed and dropped (the kernels store blocks whose first row
// is in range only).
inline void rnn_span(int j, int hidden, int* jb, int* vb) {
    for (int k = 0; k < RNN_BLOCKS; ++k) {
        const int jk = j + k * RNN_ROWS < hidden ? j + k * RNN_ROWS : j;
        jb[k] = jk;
        vb[k] = min(RNN_ROWS, hidden - jk);
    }
}

// Sums over `terms` terms, each in order: for each block k of a span and each of NG gates
// (row offsets go[g]), s[4·k + g] = Σ_e M[m + e·stride + go[g] + jb[k]] · v_e, where v_e
// is X[x + e], or state[e] where `state` is given. Every block and gate is an independent
// chain, RNN_BLOCKS · NG of them, which keeps a CPU's floating-point units busy where one
// chain would wait on each addition. One function per count of gates (rnn_sums1 to 4), so
// that the loops unroll and the sums stay in registers.
#define RNN_SUMS(NG)                                                                        \
    inline __attribute__((always_inline)) void rnn_sums##NG(                                \
        CTPTR M, long m, long stride, int terms, const long* go, const int* jb,             \
        const int* vb, CTPTR X, long x, __global const acc_t* state, accv_t* s) {           \
        accv_t acc[RNN_BLOCKS][NG];                                                         \
        _Pragma("unroll") for (int k = 0; k < RNN_BLOCKS; ++k) {                            \
            _Pragma("unroll") for (int g = 0; g < NG; ++g) acc[k][g] = 0;                   \
        }                                                                                   \
        for (int e = 0; e < terms; ++e) {                                                   \
            const acc_t v = state ? state[e] : (acc_t)LD(X, x + e);                         \
            const long at = m + (long)e * stride;                                           \
            _Pragma("unroll") for (int k = 0; k < RNN_BLOCKS; ++k) {                        \
                _Pragma("unroll") for (int g = 0; g < NG; ++g) {                            \
                    acc[k][g] += rnn_ld(M, at + go[g] + jb[k], vb[k]) * v;                  \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
        _Pragma("unroll") for (int k = 0; k < RNN_BLOCKS; ++k) {                            \
            _Pragma("unroll") for (int g = 0; g < NG; ++g) s[4 * k + g] = acc[k][g];        \
        }                                                                                   \
    }
RNN_SUMS(1)
RNN_SUMS(2)
RNN_SUMS(3)
RNN_SUMS(4)

// X's part of a span's rows of every gate at step t of batch entry n in direction d:
// s[4·k + g] = Σ_i W[d][g·H + row][i] · X[t, n, i] for block k's rows, each sum over i in
// order. Computed here with INLINE_X, else read from rnn_project's XW.
inline __attribute__((always_inline)) void rnn_x_rows(
    CTPTR X, CTPTR WT, __global const acc_t* XW, int d, int t, int n, const int* jb,
    const int* vb, int seq, int batch, int input, int hidden, int gates, int flags,
    accv_t* s) {
    const int rows = gates * hidden;
    if (flags & INLINE_X) {
        const long go[4] = {0, hidden, 2L * hidden, 3L * hidden};
        const long w = (long)d * input * rows, x = rnn_x_at(t, n, seq, batch, input, flags);
        if (gates == 4) {
            rnn_sums4(WT, w, rows, input, go, jb, vb, X, x, 0, s);
        } else {
            rnn_sums3(WT, w, rows, input, go, jb, vb, X, x, 0, s);
        }
    } else {
        __global const acc_t* xw = XW + rnn_xw_at(d, t, n, seq, batch, rows);
        for (int k = 0; k < RNN_BLOCKS; ++k) {
            for (int g = 0; g < gates; ++g) {
                s[4 * k + g] = rnn_ld_acc(xw + (long)g * hidden + jb[k], vb[k]);
            }
        }
    }
}

// X's part of every gate row for every step, batch entry and direction, into XW. Global
// size (spans of RNN_SPAN hidden rows, seq · batch, dirs); a work-item takes its span's
// rows of every gate. (With INLINE_X the walk computes it step by step instead.)
__kernel void rnn_project(CTPTR X, CTPTR WT, __global acc_t* XW, int seq, int batch,
                          int input, int hidden, int gates, int flags) {
    const int j = get_global_id(0) * RNN_SPAN, tn = get_global_id(1), d = get_global_id(2);
    if (j >= hidden || tn >= seq * batch) return;
    const int t = tn / batch, n = tn - t * batch;
    const int rows = gates * hidden;
    int jb[RNN_BLOCKS], vb[RNN_BLOCKS];
    rnn_span(j, hidden, jb, vb);
    accv_t s[4 * RNN_BLOCKS];
    rnn_x_rows(X, WT, 0, d, t, n, jb, vb, seq, batch, input, hidden, gates, flags | INLINE_X,
               s);
    __global acc_t* xw = XW + rnn_xw_at(d, t, n, seq, batch, rows);
    for (int k = 0; k < RNN_BLOCKS && j + k * RNN_ROWS < hidden; ++k) {
        for (int g = 0; g < gates; ++g) {
            rnn_st_acc(xw + (long)g * hidden + jb[k], s[4 * k + g], vb[k]);
        }
    }
}

// The recurrent walk of both cells. XW is rnn_project's output, RT the transposed R.
// mode: 0 forward, 1 reverse, 2 bidirectional (direction 1 walks in reverse).
__kernel void gru(CTPTR X, CTPTR WT, __global const acc_t* XW, CTPTR RT, CTPTR B, CTPTR H0,
                  TPTR Y, TPTR YH, __global acc_t* S, __global const float* acts, int seq,
                  int batch, int input, int hidden, int dirs, int mode, int flags,
                  float clip, int8 ys) {
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
        for (int span = lid * RNN_SPAN; span < hidden; span += L * RNN_SPAN) {
            int jb[RNN_BLOCKS], vb[RNN_BLOCKS];
            rnn_span(span, hidden, jb, vb);
            accv_t xp[4 * RNN_BLOCKS], rs[4 * RNN_BLOCKS];
            rnn_x_rows(X, WT, XW, d, t, n, jb, vb, seq, batch, input, hidden, 3, flags, xp);
            // R_h times h only with linear_before_reset; else after the barrier, times r ⊙ h.
            const long go[3] = {0, hidden, 2L * hidden};
            if (lbr) {
                rnn_sums3(RT, rt, gh, hidden, go, jb, vb, X, 0, h, rs);
            } else {
                rnn_sums2(RT, rt, gh, hidden, go, jb, vb, X, 0, h, rs);
            }
            for (int b = 0; b < RNN_BLOCKS && span + b * RNN_ROWS < hidden; ++b) {
                const int j = jb[b], valid = vb[b];
                const long jz = j, jr = hidden + j, jh = 2 * hidden + j;
                const accv_t rz = rs[4 * b], rr = rs[4 * b + 1];
                const accv_t hj = rnn_ld_acc(h + j, valid);
                const accv_t z = rnn_act(rnn_clip(
                    xp[4 * b] + rz + rnn_opt(B, bw + jz, valid, flags, HAS_B)
                        + rnn_opt(B, br + jz, valid, flags, HAS_B),
                    flags, clip), acts, fa, RNN_KIND_F);
                const accv_t r = rnn_act(rnn_clip(
                    xp[4 * b + 1] + rr + rnn_opt(B, bw + jr, valid, flags, HAS_B)
                        + rnn_opt(B, br + jr, valid, flags, HAS_B),
                    flags, clip), acts, fa, RNN_KIND_F);
                const accv_t xh = xp[4 * b + 2] + rnn_opt(B, bw + jh, valid, flags, HAS_B);
                if (lbr) {
                    const accv_t rh = rs[4 * b + 2];
                    const accv_t rec = r * (rh + rnn_opt(B, br + jh, valid, flags, HAS_B));
                    const accv_t cand =
                        rnn_act(rnn_clip(xh + rec, flags, clip), acts, ga, RNN_KIND_G);
                    rnn_st_acc(next + j, (1 - z) * cand + z * hj, valid);
                } else {
                    rnn_st_acc(scaled + j, r * hj, valid);
                    rnn_st_acc(zs + j, z, valid);
                    rnn_st_acc(xs + j, xh, valid);
                }
            }
        }
        // Without linear_before_reset the candidate needs R_h times the whole of r ⊙ h.
        barrier(CLK_GLOBAL_MEM_FENCE);
        if (!lbr) {
            for (int span = lid * RNN_SPAN; span < hidden; span += L * RNN_SPAN) {
                int jb[RNN_BLOCKS], vb[RNN_BLOCKS];
                rnn_span(span, hidden, jb, vb);
                accv_t rs[4 * RNN_BLOCKS];
                const long go[1] = {2L * hidden};
                rnn_sums1(RT, rt, gh, hidden, go, jb, vb, X, 0, scaled, rs);
                for (int b = 0; b < RNN_BLOCKS && span + b * RNN_ROWS < hidden; ++b) {
                    const int j = jb[b], valid = vb[b];
                    const long jh = 2 * hidden + j;
                    const accv_t rec = rs[4 * b] + rnn_opt(B, br + jh, valid, flags, HAS_B);
                    const accv_t cand = rnn_act(
                        rnn_clip(rnn_ld_acc(xs + j, valid) + rec, flags, clip), acts, ga,
                        RNN_KIND_G);
                    const accv_t z = rnn_ld_acc(zs + j, valid);
                    rnn_st_acc(next + j, (1 - z) * cand + z * rnn_ld_acc(h + j, valid), valid);
                }
            }
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
        for (int j = lid; j < hidden; j += L) {
            h[j] = next[j];
            if (flags & HAS_Y) {
                ST(Y, rnn_y_at(t, d, n, j, ys), (float)next[j]);
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
                   int dirs, int mode, int flags, float clip, int8 ys) {
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
        for (int span = lid * RNN_SPAN; span < hidden; span += L * RNN_SPAN) {
            int jb[RNN_BLOCKS], vb[RNN_BLOCKS];
            rnn_span(span, hidden, jb, vb);
            accv_t xp[4 * RNN_BLOCKS], rs[4 * RNN_BLOCKS];
            rnn_x_rows(X, WT, XW, d, t, n, jb, vb, seq, batch, input, hidden, 4, flags, xp);
            const long go[4] = {0, hidden, 2L * hidden, 3L * hidden};
            rnn_sums4(RT, rt, gh, hidden, go, jb, vb, X, 0, h, rs);
            for (int b = 0; b < RNN_BLOCKS && span + b * RNN_ROWS < hidden; ++b) {
                const int j = jb[b], valid = vb[b];
                const long ji = j, jo = hidden + j, jf = 2 * hidden + j, jc = 3 * hidden + j;
                const accv_t pi = rnn_opt(P, pb + j, valid, flags, HAS_P);
                const accv_t po = rnn_opt(P, pb + hidden + j, valid, flags, HAS_P);
                const accv_t pf = rnn_opt(P, pb + 2 * hidden + j, valid, flags, HAS_P);
                const accv_t cj = rnn_ld_acc(c + j, valid);
                const accv_t i = rnn_act(rnn_clip(
                    xp[4 * b] + rs[4 * b] + rnn_opt(B, bw + ji, valid, flags, HAS_B)
                        + rnn_opt(B, br + ji, valid, flags, HAS_B) + pi * cj,
                    flags, clip), acts, fa, RNN_KIND_F);
                accv_t f;
                if (flags & INPUT_FORGET) {
                    f = 1 - i;
                } else {
                    f = rnn_act(rnn_clip(
                        xp[4 * b + 2] + rs[4 * b + 2] + rnn_opt(B, bw + jf, valid, flags, HAS_B)
                            + rnn_opt(B, br + jf, valid, flags, HAS_B) + pf * cj,
                        flags, clip), acts, fa, RNN_KIND_F);
                }
                const accv_t cand = rnn_act(rnn_clip(
                    xp[4 * b + 3] + rs[4 * b + 3] + rnn_opt(B, bw + jc, valid, flags, HAS_B)
                        + rnn_opt(B, br + jc, valid, flags, HAS_B),
                    flags, clip), acts, ga, RNN_KIND_G);
                const accv_t cell = f * cj + i * cand;
                const accv_t o = rnn_act(rnn_clip(
                    xp[4 * b + 1] + rs[4 * b + 1] + rnn_opt(B, bw + jo, valid, flags, HAS_B)
                        + rnn_opt(B, br + jo, valid, flags, HAS_B) + po * cell,
                    flags, clip), acts, fa, RNN_KIND_F);
                // Rows j to j + valid - 1 of the cell state are read and written by this
                // work-item only.
                rnn_st_acc(c + j, cell, valid);
                rnn_st_acc(next + j, o * rnn_act(cell, acts, ha, RNN_KIND_H), valid);
            }
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
        for (int j = lid; j < hidden; j += L) {
            h[j] = next[j];
            if (flags & HAS_Y) {
                ST(Y, rnn_y_at(t, d, n, j, ys), (float)next[j]);
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
