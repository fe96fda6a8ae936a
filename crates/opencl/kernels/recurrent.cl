// recurrent.cl: GRU and LSTM with any of ONNX's activation functions (`acts`: kind, alpha
// and beta of each function, per direction). A node is two launches. rnn_project computes
// X's part of every gate's pre-activation for every step at once (it does not depend on
// the state), one work-item per (gate row, step and batch entry, direction). Then one
// work-group per (direction, batch entry) walks the whole sequence: its work-items share
// the hidden rows (item j takes rows j, j + L, …), add R times the state to the projected
// rows, and barriers separate the steps. The state lives in a scratch buffer of acc_t
// (double where the device has it, like the reference's f64 state), one region per
// work-group: h, the next h, and three rows of GRU intermediates; LSTM keeps its cell
// state c in the third. Outputs are rounded once, when stored.
//
// Layouts follow the reference (crates/cpu/src/ops/recurrent.rs) except for W and R, which
// the kernels read transposed (WT: [dirs][input][gates · hidden], RT: [dirs][hidden][gates ·
// hidden]): work-item j then reads element j of a row, so neighbouring work-items read
// neighbouring addresses (a GPU coalesces them, a CPU device loads them as one vector). Gate
// blocks of W, R and B are in ONNX's order (GRU z, r, h; LSTM i, o, f, c), B holds W's
// biases then R's, and with BATCH_MAJOR (layout 1) X, Y and the states are batch-first.
//
// Every sum keeps the reference's order and grouping: each dot product runs over its
// columns in order, and a gate's pre-activation is ((X·W + R·h) + W's bias) + R's bias.

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

// Scratch rows per work-group (see rnn_scratch_rows in ops/recurrent.rs).
#define SCRATCH_ROWS 5

// The activation functions, by their position in concord-core's RnnActivationKind::ALL
// (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu,
// Softsign, Softplus), with the reference's NaN behaviour: Relu of NaN is 0, a clamp keeps
// NaN.
inline acc_t rnn_act(acc_t x, __global const float* acts, int which) {
    const int kind = (int)acts[3 * which];
    const acc_t a = acts[3 * which + 1], b = acts[3 * which + 2];
    switch (kind) {
    case 0: return x > 0 ? x : 0;
    case 1: return tanh(x);
    case 2: return 1 / (1 + exp(-x));
    case 3: return a * x + b;
    case 4: return x >= 0 ? x : a * x;
    case 5: return x > a ? x : 0;
    case 6: return a * tanh(b * x);
    case 7: { const acc_t v = a * x + b; return v < 0 ? 0 : (v > 1 ? 1 : v); }
    case 8: return x >= 0 ? x : a * expm1(x);
    case 9: return x / (1 + fabs(x));
    default: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    }
}

// Clamps a gate's pre-activation to [-clip, clip]; a NaN stays NaN, as in the reference.
inline acc_t rnn_clip(acc_t v, int flags, float clip) {
    if (!(flags & HAS_CLIP)) return v;
    const acc_t c = clip;
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

// Four sums at once: a work-item takes hidden row j of every gate, the rows j, j + H,
// j + 2H and j + 3H of W or R (`lanes` of them; lanes past it repeat the last row and are
// ignored by the caller). Independent sums keep a CPU's floating-point units busy where
// one sum would wait on each addition, and each lane still sums its row in order, as the
// reference does.
#ifdef USE_FP64
typedef double4 acc4_t;
#else
typedef float4 acc4_t;
#endif

// The gate rows' offsets (lanes 1 to 3) from row j.
inline long rnn_lane(int lane, int lanes, int hidden) {
    return (long)min(lane, lanes - 1) * hidden;
}

// Rows j + g·H of W (columns of WT: [input][rows], from `col` = its direction's base + j)
// times X's row at `xb`.
inline acc4_t rnn_dot_x(CTPTR WT, long col, int rows, int hidden, int lanes, int input,
                        CTPTR X, long xb) {
    const long o1 = rnn_lane(1, lanes, hidden), o2 = rnn_lane(2, lanes, hidden),
               o3 = rnn_lane(3, lanes, hidden);
    acc4_t sum = 0;
    for (int i = 0; i < input; ++i) {
        const long at = col + (long)i * rows;
        const acc4_t w = (acc4_t)((acc_t)LD(WT, at), (acc_t)LD(WT, at + o1),
                                  (acc_t)LD(WT, at + o2), (acc_t)LD(WT, at + o3));
        sum += w * (acc_t)LD(X, xb + i);
    }
    return sum;
}

// Rows j + g·H of R (columns of RT: [hidden][rows]) times a state row in scratch.
inline acc4_t rnn_dot_h(CTPTR RT, long col, int rows, int hidden, int lanes,
                        __global const acc_t* h) {
    const long o1 = rnn_lane(1, lanes, hidden), o2 = rnn_lane(2, lanes, hidden),
               o3 = rnn_lane(3, lanes, hidden);
    acc4_t sum = 0;
    for (int k = 0; k < hidden; ++k) {
        const long at = col + (long)k * rows;
        const acc4_t r = (acc4_t)((acc_t)LD(RT, at), (acc_t)LD(RT, at + o1),
                                  (acc_t)LD(RT, at + o2), (acc_t)LD(RT, at + o3));
        sum += r * h[k];
    }
    return sum;
}

// One row of R (a column of RT) times a state row in scratch.
inline acc_t rnn_dot_h1(CTPTR RT, long col, int rows, int hidden, __global const acc_t* h) {
    acc_t sum = 0;
    for (int k = 0; k < hidden; ++k) sum += (acc_t)LD(RT, col + (long)k * rows) * h[k];
    return sum;
}

// XW[d][t][n][row]: X's part of gate row `row`'s pre-activation at step t of batch entry n
// in direction d (W's bias is added later, where the reference adds it).
inline long rnn_xw_at(int d, int t, int n, int seq, int batch, int rows) {
    return (((long)d * seq + t) * batch + n) * rows;
}

// X's part of every gate row for every step, batch entry and direction:
// XW[d][t][n][g·H + j] = Σ_i W[d][g·H + j][i] · X[t][n][i]. Global size (hidden, seq · batch,
// dirs); work-item j computes row j of every gate.
__kernel void rnn_project(CTPTR X, CTPTR WT, __global acc_t* XW, int seq, int batch,
                          int input, int hidden, int gates, int flags) {
    const int j = get_global_id(0), tn = get_global_id(1), d = get_global_id(2);
    if (j >= hidden || tn >= seq * batch) return;
    const int t = tn / batch, n = tn - t * batch;
    const int rows = gates * hidden;
    const acc4_t sum = rnn_dot_x(WT, (long)d * input * rows + j, rows, hidden, gates, input,
                                 X, rnn_x_at(t, n, seq, batch, input, flags));
    __global acc_t* xw = XW + rnn_xw_at(d, t, n, seq, batch, rows) + j;
    xw[0] = sum.s0;
    xw[hidden] = sum.s1;
    xw[2 * hidden] = sum.s2;
    if (gates > 3) xw[3 * hidden] = sum.s3;
}

inline acc_t rnn_bias(CTPTR B, long at, int flags) {
    return (flags & HAS_B) ? (acc_t)LD(B, at) : 0;
}

// The recurrent walk of both cells. XW is rnn_project's output, RT the transposed R.
// mode: 0 forward, 1 reverse, 2 bidirectional (direction 1 walks in reverse).
__kernel void gru(__global const acc_t* XW, CTPTR RT, CTPTR B, CTPTR H0, TPTR Y, TPTR YH,
                  __global acc_t* S, __global const float* acts, int seq, int batch,
                  int hidden, int dirs, int mode, int flags, float clip) {
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
        __global const acc_t* xw = XW + rnn_xw_at(d, t, n, seq, batch, gh);
        for (int j = lid; j < hidden; j += L) {
            const long jz = j, jr = hidden + j, jh = 2 * hidden + j;
            // R_h times h only with linear_before_reset; else after the barrier, times r ⊙ h.
            const acc4_t rh = rnn_dot_h(RT, rt + j, gh, hidden, lbr ? 3 : 2, h);
            const acc_t z = rnn_act(rnn_clip(
                xw[jz] + rh.s0 + rnn_bias(B, bw + jz, flags) + rnn_bias(B, br + jz, flags),
                flags, clip), acts, fa);
            const acc_t r = rnn_act(rnn_clip(
                xw[jr] + rh.s1 + rnn_bias(B, bw + jr, flags) + rnn_bias(B, br + jr, flags),
                flags, clip), acts, fa);
            const acc_t xh = xw[jh] + rnn_bias(B, bw + jh, flags);
            if (lbr) {
                const acc_t rec = r * (rh.s2 + rnn_bias(B, br + jh, flags));
                const acc_t cand = rnn_act(rnn_clip(xh + rec, flags, clip), acts, ga);
                next[j] = (1 - z) * cand + z * h[j];
            } else {
                scaled[j] = r * h[j];
                zs[j] = z;
                xs[j] = xh;
            }
        }
        // Without linear_before_reset the candidate needs R_h times the whole of r ⊙ h.
        barrier(CLK_GLOBAL_MEM_FENCE);
        if (!lbr) {
            for (int j = lid; j < hidden; j += L) {
                const long jh = 2 * hidden + j;
                const acc_t rec =
                    rnn_dot_h1(RT, rt + jh, gh, hidden, scaled) + rnn_bias(B, br + jh, flags);
                const acc_t cand = rnn_act(rnn_clip(xs[j] + rec, flags, clip), acts, ga);
                next[j] = (1 - zs[j]) * cand + zs[j] * h[j];
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
__kernel void lstm(__global const acc_t* XW, CTPTR RT, CTPTR B, CTPTR H0, CTPTR C0, CTPTR P,
                   TPTR Y, TPTR YH, TPTR YC, __global acc_t* S, __global const float* acts,
                   int seq, int batch, int hidden, int dirs, int mode, int flags,
                   float clip) {
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
        __global const acc_t* xw = XW + rnn_xw_at(d, t, n, seq, batch, gh);
        for (int j = lid; j < hidden; j += L) {
            const long ji = j, jo = hidden + j, jf = 2 * hidden + j, jc = 3 * hidden + j;
            const acc_t pi = (flags & HAS_P) ? (acc_t)LD(P, pb + j) : 0;
            const acc_t po = (flags & HAS_P) ? (acc_t)LD(P, pb + hidden + j) : 0;
            const acc_t pf = (flags & HAS_P) ? (acc_t)LD(P, pb + 2 * hidden + j) : 0;
            const acc_t cj = c[j];
            const acc4_t rh = rnn_dot_h(RT, rt + j, gh, hidden, 4, h);
            const acc_t i = rnn_act(rnn_clip(
                xw[ji] + rh.s0 + rnn_bias(B, bw + ji, flags) + rnn_bias(B, br + ji, flags)
                    + pi * cj,
                flags, clip), acts, fa);
            acc_t f;
            if (flags & INPUT_FORGET) {
                f = 1 - i;
            } else {
                f = rnn_act(rnn_clip(
                    xw[jf] + rh.s2 + rnn_bias(B, bw + jf, flags) + rnn_bias(B, br + jf, flags)
                        + pf * cj,
                    flags, clip), acts, fa);
            }
            const acc_t cand = rnn_act(rnn_clip(
                xw[jc] + rh.s3 + rnn_bias(B, bw + jc, flags) + rnn_bias(B, br + jc, flags),
                flags, clip), acts, ga);
            const acc_t cell = f * cj + i * cand;
            const acc_t o = rnn_act(rnn_clip(
                xw[jo] + rh.s1 + rnn_bias(B, bw + jo, flags) + rnn_bias(B, br + jo, flags)
                    + po * cell,
                flags, clip), acts, fa);
            // Row j's cell state is read and written by this work-item only.
            c[j] = cell;
            next[j] = o * rnn_act(cell, acts, ha);
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
