//! Reference kernels for Softmax, Hardmax, LayerNormalization, BatchNormalization
//! (inference), InstanceNormalization, GroupNormalization, MeanVarianceNormalization and
//! LRN: hand-computed values, axis handling, numerical stability and typed errors.

mod elementwise_support;

use concord_core::{DType, Op, Tensor};
use elementwise_support::{
    check_err, check_float, f16s, f32s, i64s, ok, run, run_opt, Failure,
    Tolerance::{Exact, RoundedOnce},
};

/// softmax([1, 2, 3]) = [e^-2, e^-1, 1] / (1 + e^-1 + e^-2).
const SOFTMAX_123: [f64; 3] = [0.09003057317038046, 0.24472847105479764, 0.6652409557748218];
/// σ(1) and 1 - σ(1): the softmax of [1, 0].
const SIGMOID_1: f64 = 0.7310585786300049;
const SIGMOID_MINUS_1: f64 = 0.2689414213699951;

#[test]
fn softmax_along_the_last_axis() {
    let x = f32s(&[2, 3], &[1.0, 2.0, 3.0, 1.0, 1.0, 1.0]);
    let y = ok(&Op::Softmax { axis: -1 }, &[&x]);
    let third = 1.0 / 3.0;
    let want = [
        SOFTMAX_123[0],
        SOFTMAX_123[1],
        SOFTMAX_123[2],
        third,
        third,
        third,
    ];
    check_float(&y, DType::F32, &[2, 3], &want, RoundedOnce);
}

#[test]
fn softmax_along_leading_and_middle_axes() {
    let x = f32s(&[2, 2], &[0.0, 1.0, 1.0, 1.0]);
    let y = ok(&Op::Softmax { axis: 0 }, &[&x]);
    check_float(
        &y,
        DType::F32,
        &[2, 2],
        &[SIGMOID_MINUS_1, 0.5, SIGMOID_1, 0.5],
        RoundedOnce,
    );
    // Shape [1, 2, 2], axis 1 (written as -2): columns (0, 0) and (1, 0).
    let x = f32s(&[1, 2, 2], &[0.0, 1.0, 0.0, 0.0]);
    let y = ok(&Op::Softmax { axis: -2 }, &[&x]);
    check_float(
        &y,
        DType::F32,
        &[1, 2, 2],
        &[0.5, SIGMOID_1, 0.5, SIGMOID_MINUS_1],
        RoundedOnce,
    );
}

#[test]
fn softmax_is_stable_for_large_inputs() {
    // Shifting by 1e4 changes nothing; a naive exp(1e4) would be inf and give NaN.
    let x = f32s(&[3], &[10000.0, 10001.0, 10002.0]);
    check_float(
        &ok(&Op::Softmax { axis: 0 }, &[&x]),
        DType::F32,
        &[3],
        &SOFTMAX_123,
        RoundedOnce,
    );
    let x = f32s(&[2], &[1e4, -1e4]);
    check_float(
        &ok(&Op::Softmax { axis: 0 }, &[&x]),
        DType::F32,
        &[2],
        &[1.0, 0.0],
        Exact,
    );
    let x = f32s(&[2], &[f32::NEG_INFINITY, 0.0]);
    check_float(
        &ok(&Op::Softmax { axis: 0 }, &[&x]),
        DType::F32,
        &[2],
        &[0.0, 1.0],
        Exact,
    );
}

#[test]
fn softmax_nan_poisons_only_its_slice() {
    let x = f32s(&[2, 2], &[f32::NAN, 0.0, 0.0, 0.0]);
    let y = ok(&Op::Softmax { axis: 1 }, &[&x]);
    check_float(
        &y,
        DType::F32,
        &[2, 2],
        &[f64::NAN, f64::NAN, 0.5, 0.5],
        Exact,
    );
    // A slice of only -inf has no maximum to subtract: 0/0, NaN, as numpy gives.
    let x = f32s(&[2], &[f32::NEG_INFINITY, f32::NEG_INFINITY]);
    let y = ok(&Op::Softmax { axis: 0 }, &[&x]);
    check_float(&y, DType::F32, &[2], &[f64::NAN, f64::NAN], Exact);
}

#[test]
fn softmax_f16_empty_and_errors() {
    let y = ok(&Op::Softmax { axis: -1 }, &[&f16s(&[1, 2], &[0.0, 0.0])]);
    check_float(&y, DType::F16, &[1, 2], &[0.5, 0.5], Exact);
    let y = ok(&Op::Softmax { axis: 1 }, &[&f32s(&[2, 0], &[])]);
    check_float(&y, DType::F32, &[2, 0], &[], Exact);
    check_err(
        run(&Op::Softmax { axis: 0 }, &[&f32s(&[], &[1.0])]),
        Failure::Attribute,
        "rank 0",
    );
    check_err(
        run(&Op::Softmax { axis: 2 }, &[&f32s(&[1, 1], &[1.0])]),
        Failure::Attribute,
        "axis 2",
    );
    check_err(
        run(&Op::Softmax { axis: -1 }, &[&i64s(&[1], &[1])]),
        Failure::DType { index: 0 },
        "i64",
    );
}

#[test]
fn layer_norm_over_the_last_axis_with_scale_and_bias() {
    // Rows [1, 2, 3] and [2, 4, 6] both normalise to [-√1.5, 0, √1.5] (biased variance
    // 2/3 and 8/3); then · [1, 2, 0.5] + [0, 1, -1].
    let x = f32s(&[2, 3], &[1.0, 2.0, 3.0, 2.0, 4.0, 6.0]);
    let scale = f32s(&[3], &[1.0, 2.0, 0.5]);
    let bias = f32s(&[3], &[0.0, 1.0, -1.0]);
    let op = Op::LayerNormalization {
        axis: -1,
        epsilon: 0.0,
    };
    let y = ok(&op, &[&x, &scale, &bias]);
    let row = [-1.224744871391589, 1.0, -0.38762756430420553];
    let want: Vec<f64> = row.iter().chain(&row).copied().collect();
    check_float(&y, DType::F32, &[2, 3], &want, RoundedOnce);
}

#[test]
fn layer_norm_uses_epsilon_and_broadcasts_scale() {
    // [1, 2, 3, 4]: mean 2.5, variance 1.25; ε = f32(1e-5) inside the square root.
    let x = f32s(&[1, 4], &[1.0, 2.0, 3.0, 4.0]);
    let op = Op::LayerNormalization {
        axis: 1,
        epsilon: 1e-5,
    };
    let y = run_opt(&op, &[Some(&x), Some(&f32s(&[1], &[1.0])), None]).expect("LayerNorm");
    let want = [
        -1.3416354199690625,
        -0.4472118066563542,
        0.4472118066563542,
        1.3416354199690625,
    ];
    check_float(&y, DType::F32, &[1, 4], &want, RoundedOnce);
}

#[test]
fn layer_norm_over_several_axes() {
    // Axis 0 normalises the whole [2, 2]: mean 1, variance 1.
    let x = f32s(&[2, 2], &[0.0, 0.0, 2.0, 2.0]);
    let scale = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let op = Op::LayerNormalization {
        axis: 0,
        epsilon: 0.0,
    };
    check_float(
        &ok(&op, &[&x, &scale]),
        DType::F32,
        &[2, 2],
        &[-1.0, -2.0, 3.0, 4.0],
        Exact,
    );
    let y = ok(&op, &[&f16s(&[1, 2], &[1.0, 3.0]), &f16s(&[], &[1.0])]);
    check_float(&y, DType::F16, &[1, 2], &[-1.0, 1.0], Exact);
}

#[test]
fn layer_norm_empty_and_errors() {
    let op = Op::LayerNormalization {
        axis: -1,
        epsilon: 1e-5,
    };
    let y = ok(&op, &[&f32s(&[0, 4], &[]), &f32s(&[4], &[1.0; 4])]);
    check_float(&y, DType::F32, &[0, 4], &[], Exact);
    let y = ok(&op, &[&f32s(&[2, 0], &[]), &f32s(&[0], &[])]);
    check_float(&y, DType::F32, &[2, 0], &[], Exact);
    let x = f32s(&[2, 3], &[0.0; 6]);
    check_err(
        run(&op, &[&x, &f32s(&[2], &[1.0; 2])]),
        Failure::Shape,
        "input 1 (Scale)",
    );
    // A Scale of the full [2, 3] does not fit the normalised shape [3].
    check_err(
        run(&op, &[&x, &f32s(&[2, 3], &[1.0; 6])]),
        Failure::Shape,
        "normalised shape [3]",
    );
    check_err(
        run(&op, &[&x, &f32s(&[3], &[1.0; 3]), &f16s(&[3], &[0.0; 3])]),
        Failure::DType { index: 2 },
        "B",
    );
    check_err(
        run_opt(&op, &[Some(&x)]),
        Failure::Missing { index: 1 },
        "Scale",
    );
    check_err(
        run(
            &Op::LayerNormalization {
                axis: 2,
                epsilon: 0.0,
            },
            &[&x, &x],
        ),
        Failure::Attribute,
        "axis 2",
    );
}

#[test]
fn batch_norm_normalises_each_channel() {
    // X (1, 2, 1, 2) = channel 0: [1, 2], channel 1: [3, 4].
    // Channel 0: (x - 1) / √4 · 2 + 0.5; channel 1: (x - 3) / √0.25 · 1 - 1.
    let x = f32s(&[1, 2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
    let scale = f32s(&[2], &[2.0, 1.0]);
    let bias = f32s(&[2], &[0.5, -1.0]);
    let mean = f32s(&[2], &[1.0, 3.0]);
    let var = f32s(&[2], &[4.0, 0.25]);
    let y = ok(
        &Op::BatchNormalization { epsilon: 0.0 },
        &[&x, &scale, &bias, &mean, &var],
    );
    check_float(&y, DType::F32, &[1, 2, 1, 2], &[0.5, 1.5, -1.0, 1.0], Exact);
    // ε = 1 inside the square root: √(3 + 1) = 2 and √(0 + 1) = 1.
    let var = f32s(&[2], &[3.0, 0.0]);
    let y = ok(
        &Op::BatchNormalization { epsilon: 1.0 },
        &[&x, &scale, &bias, &mean, &var],
    );
    check_float(&y, DType::F32, &[1, 2, 1, 2], &[0.5, 1.5, -1.0, 0.0], Exact);
}

#[test]
fn batch_norm_on_rank2_and_f16_with_f32_parameters() {
    // (N, C) = (2, 2), the output of a Gemm; parameters may have another float dtype.
    let x = f16s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let one = f32s(&[2], &[1.0, 1.0]);
    let zero = f32s(&[2], &[0.0, 0.0]);
    let mean = f32s(&[2], &[1.0, 2.0]);
    let y = ok(
        &Op::BatchNormalization { epsilon: 0.0 },
        &[&x, &one, &zero, &mean, &one],
    );
    check_float(&y, DType::F16, &[2, 2], &[0.0, 0.0, 2.0, 2.0], Exact);
}

#[test]
fn batch_norm_errors() {
    let op = Op::BatchNormalization { epsilon: 1e-5 };
    let p = f32s(&[2], &[1.0, 1.0]);
    let x = f32s(&[1, 2, 2], &[0.0; 4]);
    check_err(
        run(&op, &[&f32s(&[2], &[0.0; 2]), &p, &p, &p, &p]),
        Failure::Shape,
        "rank 2",
    );
    let bad = f32s(&[3], &[1.0; 3]);
    check_err(
        run(&op, &[&x, &p, &p, &bad, &p]),
        Failure::Shape,
        "input 3 (input_mean)",
    );
    check_err(
        run(&op, &[&x, &p, &p, &p, &i64s(&[2], &[1, 1])]),
        Failure::DType { index: 4 },
        "input_var",
    );
    check_err(
        run(&op, &[&x, &p, &p, &p]),
        Failure::Missing { index: 4 },
        "input_var",
    );
}

fn f64s(dims: &[usize], values: &[f64]) -> Tensor {
    Tensor::from_vec(dims, values.to_vec()).expect("test tensor shape matches its data")
}

#[test]
fn layer_norm_variance_is_taken_about_the_mean() {
    // The ONNX definition's variance is ReduceMean((X - Mean)²), two passes. Row [2^53 - 2,
    // 2^53] in f64: the sum 2^54 - 2 and the mean 2^53 - 1 are exact, the deviations are ±1,
    // so the variance is 1 and Y = [-1, 1]. The one-pass form Σ(x² - mean²) would round
    // x + mean (2^54 - 3 and 2^54 - 1, between f64's steps of 2) and find a variance of 2.
    let top = 9_007_199_254_740_992.0; // 2^53
    let x = f64s(&[1, 2], &[top - 2.0, top]);
    let op = Op::LayerNormalization {
        axis: -1,
        epsilon: 0.0,
    };
    let y = ok(&op, &[&x, &f64s(&[2], &[1.0, 1.0])]);
    check_float(&y, DType::F64, &[1, 2], &[-1.0, 1.0], Exact);
}

#[test]
fn hardmax_marks_the_first_largest_value_and_a_nan_counts_as_largest() {
    // One-hot of the first maximum along the axis; a NaN wins, as numpy's argmax (the ONNX
    // reference implementation's) has it, wherever it stands: [1, NaN, 2] marks index 1,
    // [NaN, 3, NaN] index 0, [2, 5, 5] index 1 (the first of two equal maxima).
    let x = f32s(
        &[3, 3],
        &[1.0, f32::NAN, 2.0, f32::NAN, 3.0, f32::NAN, 2.0, 5.0, 5.0],
    );
    let y = ok(&Op::Hardmax { axis: 1 }, &[&x]);
    check_float(
        &y,
        DType::F32,
        &[3, 3],
        &[0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
        Exact,
    );
}

#[test]
fn instance_and_group_norm_of_rank_two_give_the_bias() {
    // X (N, C) has no spatial axis: each instance (and, with one channel per group, each
    // group) is one value x, so mean = x, variance 0 and y = 0 · scale / √ε + B = B.
    let x = f32s(&[2, 2], &[3.0, -7.0, 0.5, 100.0]);
    let scale = f32s(&[2], &[2.0, 3.0]);
    let bias = f32s(&[2], &[0.25, -1.0]);
    let want = [0.25, -1.0, 0.25, -1.0];
    let y = ok(
        &Op::InstanceNormalization { epsilon: 1e-5 },
        &[&x, &scale, &bias],
    );
    check_float(&y, DType::F32, &[2, 2], &want, Exact);
    let op = Op::GroupNormalization {
        epsilon: 1e-5,
        num_groups: 2,
    };
    let y = ok(&op, &[&x, &scale, &bias]);
    check_float(&y, DType::F32, &[2, 2], &want, Exact);
    // Below rank 2 there is no channel axis.
    for op in [Op::InstanceNormalization { epsilon: 1e-5 }, op] {
        check_err(
            run(&op, &[&f32s(&[2], &[1.0, 2.0]), &scale, &bias]),
            Failure::Shape,
            "rank 2",
        );
        check_err(
            run(&op, &[&f32s(&[], &[1.0]), &scale, &bias]),
            Failure::Shape,
            "rank 2",
        );
    }
}

#[test]
fn group_norm_takes_scale_and_bias_per_group_or_per_channel() {
    // X (1, 4, 2), two groups of two channels. Group 0 (channels 0 and 1) holds [1, 1, 3, 3]:
    // mean 2, variance 1, normalised [-1, -1, 1, 1]. Group 1 holds [2, 2, 6, 6]: mean 4,
    // variance 4, normalised [-1, -1, 1, 1] too. ε = 0.
    let x = f32s(&[1, 4, 2], &[1.0, 1.0, 3.0, 3.0, 2.0, 2.0, 6.0, 6.0]);
    let op = Op::GroupNormalization {
        epsilon: 0.0,
        num_groups: 2,
    };
    // Opset 18: scale and bias of one entry per group, [1, 2] and [0, 1].
    let y = ok(
        &op,
        &[&x, &f32s(&[2], &[1.0, 2.0]), &f32s(&[2], &[0.0, 1.0])],
    );
    let want = [-1.0, -1.0, 1.0, 1.0, -1.0, -1.0, 3.0, 3.0];
    check_float(&y, DType::F32, &[1, 4, 2], &want, Exact);
    // Opset 21: one entry per channel, [1, 2, 3, 4] and [0, 0, 0, 1].
    let y = ok(
        &op,
        &[
            &x,
            &f32s(&[4], &[1.0, 2.0, 3.0, 4.0]),
            &f32s(&[4], &[0.0, 0.0, 0.0, 1.0]),
        ],
    );
    let want = [-1.0, -1.0, 2.0, 2.0, -3.0, -3.0, 5.0, 5.0];
    check_float(&y, DType::F32, &[1, 4, 2], &want, Exact);
    // Three entries fit neither form.
    check_err(
        run(&op, &[&x, &f32s(&[3], &[1.0; 3]), &f32s(&[3], &[0.0; 3])]),
        Failure::Shape,
        "input 1 (scale)",
    );
}

#[test]
fn group_norm_groups_must_divide_the_channels() {
    let x = f32s(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    let p = f32s(&[4], &[1.0; 4]);
    for groups in [0, 3, 5] {
        let op = Op::GroupNormalization {
            epsilon: 1e-5,
            num_groups: groups,
        };
        check_err(
            run(&op, &[&x, &p, &p]),
            Failure::Attribute,
            &format!("{groups} groups do not divide 4 channels"),
        );
    }
}

#[test]
fn instance_and_group_norm_variance_is_taken_about_the_mean() {
    // As for LayerNormalization: the ONNX function bodies take ReduceMean((X - Mean)²). One
    // instance [2^53 - 2, 2^53] in f64 has the exact mean 2^53 - 1, deviations ±1 and
    // variance 1, so Y = [-1, 1] · scale + B; the one-pass Σ(x² - mean²) would find 2.
    let top = 9_007_199_254_740_992.0; // 2^53
    let x = f64s(&[1, 1, 2], &[top - 2.0, top]);
    let (scale, bias) = (f64s(&[1], &[3.0]), f64s(&[1], &[0.5]));
    for op in [
        Op::InstanceNormalization { epsilon: 0.0 },
        Op::GroupNormalization {
            epsilon: 0.0,
            num_groups: 1,
        },
    ] {
        let y = ok(&op, &[&x, &scale, &bias]);
        check_float(&y, DType::F64, &[1, 1, 2], &[-2.5, 3.5], Exact);
    }
}

#[test]
fn mean_variance_normalization_keeps_a_cell_per_kept_coordinate() {
    // Axes [2] of X (2, 2, 2) leave two kept axes, so each of the four (i, j) pairs [a, b]
    // is normalised on its own: mean (a + b)/2, E[x²] - mean² = s² with s = |b - a|/2, and
    // y = (x - mean)/(s + 1e-9) = ∓s/(s + 1e-9). The pairs' means differ, so pairs that
    // shared statistics would give other values.
    let x = f32s(&[2, 2, 2], &[0.0, 2.0, 1.0, 5.0, 10.0, 12.0, -3.0, 3.0]);
    let op = Op::MeanVarianceNormalization { axes: vec![2] };
    let y = ok(&op, &[&x]);
    let want: Vec<f64> = [1.0f64, 2.0, 1.0, 3.0]
        .iter()
        .flat_map(|&s| [-s / (s + 1e-9), s / (s + 1e-9)])
        .collect();
    check_float(&y, DType::F32, &[2, 2, 2], &want, RoundedOnce);
    // In f64 the 1e-9 added to the standard deviation shows: ∓1/(1 + 1e-9) for s = 1.
    let x = f64s(&[1, 2], &[0.0, 2.0]);
    let op = Op::MeanVarianceNormalization { axes: vec![1] };
    let y = ok(&op, &[&x]);
    let s = 1.0 / (1.0 + 1e-9);
    check_float(&y, DType::F64, &[1, 2], &[-s, s], RoundedOnce);
}

#[test]
fn lrn_sums_squares_over_the_channels_around_each() {
    // ONNX LRN: Y = X / (bias + alpha/size · Σ x²)^beta, the sum over channels
    // [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to [0, C-1]. X (1, 3, 1, 1) =
    // [1, 2, 3], bias 1, beta 1, alpha = size (so alpha/size = 1):
    // size 3 sums channels {0,1}, {0,1,2}, {1,2}: 5, 14, 13, so Y = [1/6, 2/15, 3/14];
    // size 2 sums {0,1}, {1,2}, {2}: 5, 13, 9, so Y = [1/6, 2/14, 3/10].
    let x = f32s(&[1, 3, 1, 1], &[1.0, 2.0, 3.0]);
    let lrn = |size: usize| Op::LRN {
        alpha: size as f32,
        beta: 1.0,
        bias: 1.0,
        size,
    };
    let want3 = [1.0 / 6.0, 2.0 / 15.0, 3.0 / 14.0];
    check_float(
        &ok(&lrn(3), &[&x]),
        DType::F32,
        &[1, 3, 1, 1],
        &want3,
        RoundedOnce,
    );
    let want2 = [1.0 / 6.0, 2.0 / 14.0, 3.0 / 10.0];
    check_float(
        &ok(&lrn(2), &[&x]),
        DType::F32,
        &[1, 3, 1, 1],
        &want2,
        RoundedOnce,
    );
    // Rank 2 (N, C) has one value per channel: the same sums.
    let x2 = f32s(&[1, 3], &[1.0, 2.0, 3.0]);
    check_float(
        &ok(&lrn(3), &[&x2]),
        DType::F32,
        &[1, 3],
        &want3,
        RoundedOnce,
    );
    // No channel axis, or a window of no channels, is an error.
    check_err(
        run(&lrn(3), &[&f32s(&[3], &[1.0, 2.0, 3.0])]),
        Failure::Shape,
        "rank 2",
    );
    check_err(run(&lrn(0), &[&x]), Failure::Shape, "size >= 1");
}
