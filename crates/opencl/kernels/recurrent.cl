// recurrent.cl: GRU and LSTM with any of ONNX's activation functions (`acts`: kind, alpha
// and beta of each function, per direction). One work-group per
// (direction, batch entry) walks the whole sequence: its work-items share the hidden rows
// (item j takes rows j, j + L, …), and barriers separate the steps, so a forward is one
// launch however long the sequence. The state lives in a scratch buffer of acc_t (double
// where the device has it, like the reference's f64 state), one region per work-group:
// h, the next h, and three rows of GRU intermediates; LSTM keeps its cell state c in the
// third. Outputs are rounded once, when stored.
//
// Layouts follow the reference (crates/cpu/src/ops/recurrent.rs): gate blocks of W, R and B
// in ONNX's order (GRU z, r, h; LSTM i, o, f, c), B holding W's biases then R's, and with
// BATCH_MAJOR (layout 1) X, Y and the states batch-first.

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

// Row `row` of W (input columns) times X's row at `xb`, in order, as the reference sums.
inline acc_t rnn_dot_x(CTPTR W, long row, int input, CTPTR X, long xb) {
    acc_t sum = 0;
    const long wb = row * input;
    for (int i = 0; i < input; ++i) sum += (acc_t)LD(W, wb + i) * (acc_t)LD(X, xb + i);
    return sum;
}

// Row `row` of R (hidden columns) times a state row in scratch.
inline acc_t rnn_dot_h(CTPTR R, long row, int hidden, __global const acc_t* h) {
    acc_t sum = 0;
    const long rb = row * hidden;
    for (int k = 0; k < hidden; ++k) sum += (acc_t)LD(R, rb + k) * h[k];
    return sum;
}

inline acc_t rnn_bias(CTPTR B, long at, int flags) {
    return (flags & HAS_B) ? (acc_t)LD(B, at) : 0;
}

// mode: 0 forward, 1 reverse, 2 bidirectional (direction 1 walks in reverse).
__kernel void gru(CTPTR X, CTPTR W, CTPTR R, CTPTR B, CTPTR H0, TPTR Y, TPTR YH,
                  __global acc_t* S, __global const float* acts, int seq, int batch,
                  int input, int hidden, int dirs, int mode, int flags, float clip) {
    const int lid = get_local_id(0), L = get_local_size(0);
    const int group = get_group_id(1);
    if (group >= dirs * batch) return;
    const int d = group / batch, n = group - d * batch;
    const int reverse = mode == 1 || (mode == 2 && d == 1);
    const int gh = 3 * hidden;
    const int fa = 2 * d, ga = 2 * d + 1;
    __global acc_t* h = S + (long)group * SCRATCH_ROWS * hidden;
    __global acc_t* next = h + hidden;
    __global acc_t* scaled = next + hidden;
    __global acc_t* zs = scaled + hidden;
    __global acc_t* xs = zs + hidden;
    const long wrow = (long)d * gh, bw = (long)d * 2 * gh, br = bw + gh;
    for (int j = lid; j < hidden; j += L) {
        h[j] = (flags & HAS_H0) ? (acc_t)LD(H0, rnn_state_at(d, n, j, dirs, batch, hidden, flags))
                                : 0;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (int k = 0; k < seq; ++k) {
        const int t = reverse ? seq - 1 - k : k;
        const long xb = rnn_x_at(t, n, seq, batch, input, flags);
        for (int j = lid; j < hidden; j += L) {
            const long jz = j, jr = hidden + j, jh = 2 * hidden + j;
            const acc_t z = rnn_act(rnn_clip(
                rnn_dot_x(W, wrow + jz, input, X, xb) + rnn_dot_h(R, wrow + jz, hidden, h)
                    + rnn_bias(B, bw + jz, flags) + rnn_bias(B, br + jz, flags),
                flags, clip), acts, fa);
            const acc_t r = rnn_act(rnn_clip(
                rnn_dot_x(W, wrow + jr, input, X, xb) + rnn_dot_h(R, wrow + jr, hidden, h)
                    + rnn_bias(B, bw + jr, flags) + rnn_bias(B, br + jr, flags),
                flags, clip), acts, fa);
            const acc_t xh = rnn_dot_x(W, wrow + jh, input, X, xb) + rnn_bias(B, bw + jh, flags);
            if (flags & LINEAR_BEFORE_RESET) {
                const acc_t rec =
                    r * (rnn_dot_h(R, wrow + jh, hidden, h) + rnn_bias(B, br + jh, flags));
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
        if (!(flags & LINEAR_BEFORE_RESET)) {
            for (int j = lid; j < hidden; j += L) {
                const long jh = 2 * hidden + j;
                const acc_t rec =
                    rnn_dot_h(R, wrow + jh, hidden, scaled) + rnn_bias(B, br + jh, flags);
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
__kernel void lstm(CTPTR X, CTPTR W, CTPTR R, CTPTR B, CTPTR H0, CTPTR C0, CTPTR P, TPTR Y,
                   TPTR YH, TPTR YC, __global acc_t* S, __global const float* acts, int seq,
                   int batch, int input, int hidden, int dirs, int mode, int flags,
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
    const long wrow = (long)d * gh, bw = (long)d * 2 * gh, br = bw + gh, pb = (long)d * 3 * hidden;
    for (int j = lid; j < hidden; j += L) {
        const long at = rnn_state_at(d, n, j, dirs, batch, hidden, flags);
        h[j] = (flags & HAS_H0) ? (acc_t)LD(H0, at) : 0;
        c[j] = (flags & HAS_C0) ? (acc_t)LD(C0, at) : 0;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (int k = 0; k < seq; ++k) {
        const int t = reverse ? seq - 1 - k : k;
        const long xb = rnn_x_at(t, n, seq, batch, input, flags);
        for (int j = lid; j < hidden; j += L) {
            const long ji = j, jo = hidden + j, jf = 2 * hidden + j, jc = 3 * hidden + j;
            const acc_t pi = (flags & HAS_P) ? (acc_t)LD(P, pb + j) : 0;
            const acc_t po = (flags & HAS_P) ? (acc_t)LD(P, pb + hidden + j) : 0;
            const acc_t pf = (flags & HAS_P) ? (acc_t)LD(P, pb + 2 * hidden + j) : 0;
            const acc_t cj = c[j];
            const acc_t i = rnn_act(rnn_clip(
                rnn_dot_x(W, wrow + ji, input, X, xb) + rnn_dot_h(R, wrow + ji, hidden, h)
                    + rnn_bias(B, bw + ji, flags) + rnn_bias(B, br + ji, flags) + pi * cj,
                flags, clip), acts, fa);
            acc_t f;
            if (flags & INPUT_FORGET) {
                f = 1 - i;
            } else {
                f = rnn_act(rnn_clip(
                    rnn_dot_x(W, wrow + jf, input, X, xb) + rnn_dot_h(R, wrow + jf, hidden, h)
                        + rnn_bias(B, bw + jf, flags) + rnn_bias(B, br + jf, flags) + pf * cj,
                    flags, clip), acts, fa);
            }
            const acc_t cand = rnn_act(rnn_clip(
                rnn_dot_x(W, wrow + jc, input, X, xb) + rnn_dot_h(R, wrow + jc, hidden, h)
                    + rnn_bias(B, bw + jc, flags) + rnn_bias(B, br + jc, flags),
                flags, clip), acts, ga);
            const acc_t cell = f * cj + i * cand;
            const acc_t o = rnn_act(rnn_clip(
                rnn_dot_x(W, wrow + jo, input, X, xb) + rnn_dot_h(R, wrow + jo, hidden, h)
                    + rnn_bias(B, bw + jo, flags) + rnn_bias(B, br + jo, flags) + po * cell,
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
