// movement.cl: data movement that only moves bits, built per element size (ELEM is uchar,
// ushort, uint or ulong), so one build serves every dtype of that size: Transpose, Slice,
// Expand, Concat and Split are strided copies (copy_nd, or copy_runs on CPU devices); Pad
// and Gather have their own kernels.

// For every index of the iteration space `dims` (rank ≤ 8): dst[dst_off + Σ c·ds] =
// src[src_off + Σ c·ss]. Strides may be negative (Slice with negative steps) or 0 (Expand).
// rank == 0 is a flat copy of n elements.
__kernel void copy_nd(__global const ELEM* src, __global ELEM* dst, int n, int rank,
                      int8 dims, int8 ss, int8 ds, int src_off, int dst_off) {
    int i = get_global_id(0);
    if (i >= n) return;
    int is = i, id = i;
    if (rank > 0) offsets2(i, rank, dims, ss, ds, &is, &id);
    dst[dst_off + id] = src[src_off + is];
}

// copy_nd with the iteration space's last axis walked in a loop (the CPU-device kernels):
// one work-item per run of `inner` elements, whose start is found from the outer axes
// (`dims`, `ss`, `ds`), its elements `ss_in` and `ds_in` apart, so the index arithmetic is
// paid once per run instead of once per element.
__kernel void copy_runs(__global const ELEM* src, __global ELEM* dst,
                        __global const long* restrict P) {
    const int runs = P_INT(0);
    const int rank = P_INT(1);
    const int8 dims = P_INT8(2);
    const int8 ss = P_INT8(10);
    const int8 ds = P_INT8(18);
    const int src_off = P_INT(26);
    const int dst_off = P_INT(27);
    const int inner = P_INT(28);
    const int ss_in = P_INT(29);
    const int ds_in = P_INT(30);
    int r = get_global_id(0);
    if (r >= runs) return;
    int is = r, id = r;
    offsets2(r, rank, dims, ss, ds, &is, &id);
    __global const ELEM* s = src + src_off + is;
    __global ELEM* d = dst + dst_off + id;
    for (int j = 0; j < inner; ++j) d[j * ds_in] = s[j * ss_in];
}

// Constant Pad: the output element at coordinate c comes from the input at c - begin when
// that is inside the input, and is `fill` (the constant's bits) otherwise. Negative begin
// pads crop.
__kernel void pad_constant(__global const ELEM* src, __global ELEM* dst, int n, int rank,
                           int8 out_dims, int8 in_dims, int8 begin, int8 in_strides,
                           long fill) {
    int i = get_global_id(0);
    if (i >= n) return;
    int od[8], id[8], b[8], s[8];
    vstore8(out_dims, 0, od);
    vstore8(in_dims, 0, id);
    vstore8(begin, 0, b);
    vstore8(in_strides, 0, s);
    int rest = i, offset = 0, inside = 1;
    for (int k = rank - 1; k >= 0; --k) {
        int c = rest % od[k] - b[k];
        rest /= od[k];
        inside = inside && c >= 0 && c < id[k];
        offset += c * s[k];
    }
    dst[i] = inside ? src[offset] : (ELEM)fill;
}

// Gather along one axis: data viewed as (outer, axis_len, inner), indices flattened to
// n_idx entries (negative ones count from the end); out is (outer, n_idx, inner). An index
// out of range sets status[0] and writes 0.
__kernel void gather(__global const ELEM* data, __global const long* indices,
                     __global ELEM* out, int n, int n_idx, int axis_len, int inner,
                     __global int* status) {
    int i = get_global_id(0);
    if (i >= n) return;
    int k = i % inner;
    int j = (i / inner) % n_idx;
    int o = i / (inner * n_idx);
    long idx = indices[j];
    if (idx < 0) idx += axis_len;
    if (idx < 0 || idx >= axis_len) {
        status[0] = 2;
        out[i] = (ELEM)0;
        return;
    }
    out[i] = data[((long)o * axis_len + idx) * inner + k];
}

// gather with one work-item per (outer, index) pair, copying its run of `inner` elements
// (the CPU-device kernels): the index arithmetic is paid once per run instead of once per
// element. Arguments as gather's, less n plus runs = outer · n_idx.
__kernel void gather_runs(__global const ELEM* data, __global const long* indices,
                          __global ELEM* out, int runs, int n_idx, int axis_len, int inner,
                          __global int* status) {
    const int r = get_global_id(0);
    if (r >= runs) return;
    const int o = r / n_idx;
    const int j = r - o * n_idx;
    long idx = indices[j];
    if (idx < 0) idx += axis_len;
    __global ELEM* d = out + (long)r * inner;
    if (idx < 0 || idx >= axis_len) {
        status[0] = 2;
        for (int k = 0; k < inner; ++k) d[k] = (ELEM)0;
        return;
    }
    __global const ELEM* s = data + ((long)o * axis_len + idx) * inner;
    for (int k = 0; k < inner; ++k) d[k] = s[k];
}

// Pads planes of H×W into planes of rows×Wp with `fill` (an element's bits): PH rows and
// PW columns before, the rest after (rows and Wp may leave room past the pad, for kernels
// that read a vector past a row's end). One output row per work-item: contiguous reads and
// writes, no per-element index arithmetic. With `split`, each padded row is stored with its
// columns de-interleaved: the even ones first (ceil(Wp / 2) of them), then the odd ones,
// so that a stride-2 kernel reads its taps as contiguous vectors. Global (rows, planes).
__kernel void pad_planes(__global const ELEM* src, __global ELEM* dst,
                         __global const long* restrict P) {
    const int H = P_INT(0);
    const int W = P_INT(1);
    const int rows = P_INT(2);
    const int Wp = P_INT(3);
    const int PH = P_INT(4);
    const int PW = P_INT(5);
    const long fill = P[6];
    const int split = P_INT(7);
    const int r = get_global_id(0);
    const int plane = get_global_id(1);
    if (r >= rows) return;
    __global ELEM* d = dst + ((long)plane * rows + r) * Wp;
    const int ih = r - PH;
    if (ih < 0 || ih >= H) {
        for (int j = 0; j < Wp; ++j) d[j] = (ELEM)fill;
        return;
    }
    __global const ELEM* s = src + ((long)plane * H + ih) * W;
    if (split) {
        // Phase q (0 even, 1 odd) holds padded columns 2j + q, source column 2j + q - PW:
        // inside the image for j in [lo, hi), fill elsewhere.
        const int even = (Wp + 1) / 2;
        for (int q = 0; q < 2; ++q) {
            __global ELEM* dq = d + q * even;
            const int n = q == 0 ? even : Wp - even;
            const int lo = min(n, (PW - q + 1) / 2);
            const int hi = max(lo, min(n, (W + PW - q + 1) / 2));
            for (int j = 0; j < lo; ++j) dq[j] = (ELEM)fill;
            for (int j = lo; j < hi; ++j) dq[j] = s[2 * j + q - PW];
            for (int j = hi; j < n; ++j) dq[j] = (ELEM)fill;
        }
        return;
    }
    for (int j = 0; j < PW; ++j) d[j] = (ELEM)fill;
    for (int j = 0; j < W; ++j) d[PW + j] = s[j];
    for (int j = PW + W; j < Wp; ++j) d[j] = (ELEM)fill;
}
