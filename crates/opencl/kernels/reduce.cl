// reduce.cl: ReduceSum, ReduceMean and ReduceMax over any set of axes. One work-item per
// output element: its input offset comes from the kept axes (out_dims with their input
// strides), and it walks the reduced axes (red_dims with their input strides).
// op: 0 sum, 1 mean, 2 max (the first NaN wins).

__kernel void reduce(CTPTR X, TPTR Y, int n_out, int out_rank, int8 out_dims, int8 out_strides,
                     int red_rank, int8 red_dims, int8 red_strides, int n_red, int op) {
    const int o = get_global_id(0);
    if (o >= n_out) return;
    const int base = offset1(o, out_rank, out_dims, out_strides);
    if (op == 2) {
        float best = -INFINITY;
        for (int j = 0; j < n_red; ++j) {
            const float v = LD(X, base + offset1(j, red_rank, red_dims, red_strides));
            if (j == 0 || !(isnan(best) || best >= v)) best = v;
        }
        ST(Y, o, best);
        return;
    }
    acc_t sum = 0;
    for (int j = 0; j < n_red; ++j) sum += LD(X, base + offset1(j, red_rank, red_dims, red_strides));
    ST(Y, o, (float)(op == 1 ? sum / n_red : sum));
}
