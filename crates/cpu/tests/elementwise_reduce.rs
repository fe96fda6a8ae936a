//! Reference kernels for ReduceMean, ReduceSum and ReduceMax: axes from the attribute or
//! the input, keepdims, noop_with_empty_axes, negative axes, empty reductions and errors;
//! ArgMax and ArgMin: ties, select_last_index, NaN and exact integers.

mod elementwise_support;

use concord_core::op::{ArgReduce, Reduce, ReduceKind};
use concord_core::{DType, Op, Tensor};
use elementwise_support::{
    check_err, check_float, check_i64, f16s, f32s, i64s, ok, run, run_opt, Failure,
    Tolerance::{Exact, RoundedOnce},
};

fn attrs(axes: Option<&[i64]>, keepdims: bool) -> Reduce {
    Reduce {
        axes: axes.map(|a| a.to_vec()),
        keepdims,
        noop_with_empty_axes: false,
    }
}

/// [[1, 2, 3], [4, 5, 6]].
fn two_by_three() -> Tensor {
    f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
}

#[test]
fn sum_over_one_axis_with_and_without_keepdims() {
    let x = two_by_three();
    let y = ok(&Op::Reduce(ReduceKind::Sum, attrs(Some(&[0]), true)), &[&x]);
    check_float(&y, DType::F32, &[1, 3], &[5.0, 7.0, 9.0], Exact);
    let y = ok(
        &Op::Reduce(ReduceKind::Sum, attrs(Some(&[-1]), false)),
        &[&x],
    );
    check_float(&y, DType::F32, &[2], &[6.0, 15.0], Exact);
}

#[test]
fn axes_from_the_input_operand() {
    let x = two_by_three();
    let axes = i64s(&[1], &[1]);
    let y = ok(
        &Op::Reduce(ReduceKind::Mean, attrs(None, true)),
        &[&x, &axes],
    );
    check_float(&y, DType::F32, &[2, 1], &[2.0, 5.0], Exact);
    let axes = i64s(&[2], &[-2, 1]);
    let y = ok(
        &Op::Reduce(ReduceKind::Max, attrs(None, false)),
        &[&x, &axes],
    );
    check_float(&y, DType::F32, &[], &[6.0], Exact);
}

#[test]
fn no_axes_reduces_everything_unless_noop() {
    let x = two_by_three();
    let y = run_opt(
        &Op::Reduce(ReduceKind::Sum, attrs(None, true)),
        &[Some(&x), None],
    )
    .expect("ReduceSum");
    check_float(&y, DType::F32, &[1, 1], &[21.0], Exact);
    let y = ok(
        &Op::Reduce(ReduceKind::Mean, attrs(Some(&[]), false)),
        &[&x],
    );
    check_float(&y, DType::F32, &[], &[3.5], Exact);
    let noop = Reduce {
        axes: None,
        keepdims: false,
        noop_with_empty_axes: true,
    };
    let y = ok(
        &Op::Reduce(ReduceKind::Sum, noop.clone()),
        &[&x, &i64s(&[0], &[])],
    );
    check_float(
        &y,
        DType::F32,
        &[2, 3],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        Exact,
    );
    let y = ok(&Op::Reduce(ReduceKind::Max, noop), &[&x]);
    check_float(
        &y,
        DType::F32,
        &[2, 3],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        Exact,
    );
}

#[test]
fn middle_axis_of_a_rank3_tensor() {
    // Shape [2, 2, 2]; reducing axis 1 sums x[i, 0, k] + x[i, 1, k].
    let x = f32s(&[2, 2, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    let y = ok(
        &Op::Reduce(ReduceKind::Sum, attrs(Some(&[1]), false)),
        &[&x],
    );
    check_float(&y, DType::F32, &[2, 2], &[4.0, 6.0, 12.0, 14.0], Exact);
    let y = ok(
        &Op::Reduce(ReduceKind::Max, attrs(Some(&[0, 2]), true)),
        &[&x],
    );
    check_float(&y, DType::F32, &[1, 2, 1], &[6.0, 8.0], Exact);
}

#[test]
fn rank0_data_reduces_to_itself() {
    let x = f32s(&[], &[5.0]);
    check_float(
        &ok(&Op::Reduce(ReduceKind::Sum, attrs(None, true)), &[&x]),
        DType::F32,
        &[],
        &[5.0],
        Exact,
    );
    check_float(
        &ok(&Op::Reduce(ReduceKind::Mean, attrs(None, false)), &[&x]),
        DType::F32,
        &[],
        &[5.0],
        Exact,
    );
}

#[test]
fn nan_and_inf_propagate() {
    let x = f32s(&[2, 2], &[f32::NAN, 1.0, f32::INFINITY, f32::NEG_INFINITY]);
    let y = ok(
        &Op::Reduce(ReduceKind::Max, attrs(Some(&[1]), false)),
        &[&x],
    );
    check_float(&y, DType::F32, &[2], &[f64::NAN, f64::INFINITY], Exact);
    let y = ok(
        &Op::Reduce(ReduceKind::Sum, attrs(Some(&[1]), false)),
        &[&x],
    );
    check_float(&y, DType::F32, &[2], &[f64::NAN, f64::NAN], Exact);
}

#[test]
fn f32_sums_accumulate_in_f64() {
    // 1e8 + 1 - 1e8 is 0 in f32 arithmetic but 1 when accumulated in f64.
    let x = f32s(&[3], &[1e8, 1.0, -1e8]);
    check_float(
        &ok(&Op::Reduce(ReduceKind::Sum, attrs(None, false)), &[&x]),
        DType::F32,
        &[],
        &[1.0],
        Exact,
    );
    // f16 in, f16 out: the mean of [1, 2, 2] is 5/3, rounded once to f16.
    let y = ok(
        &Op::Reduce(ReduceKind::Mean, attrs(None, false)),
        &[&f16s(&[3], &[1.0, 2.0, 2.0])],
    );
    check_float(&y, DType::F16, &[], &[5.0 / 3.0], RoundedOnce);
}

#[test]
fn empty_reductions_follow_the_onnx_spec() {
    // Shape [2, 0] reduced over axis 1: each output cell sees no values.
    let x = f32s(&[2, 0], &[]);
    let y = ok(
        &Op::Reduce(ReduceKind::Sum, attrs(Some(&[1]), false)),
        &[&x],
    );
    check_float(&y, DType::F32, &[2], &[0.0, 0.0], Exact);
    let y = ok(
        &Op::Reduce(ReduceKind::Max, attrs(Some(&[1]), false)),
        &[&x],
    );
    check_float(
        &y,
        DType::F32,
        &[2],
        &[f64::NEG_INFINITY, f64::NEG_INFINITY],
        Exact,
    );
    let y = ok(
        &Op::Reduce(ReduceKind::Mean, attrs(Some(&[1]), true)),
        &[&x],
    );
    check_float(&y, DType::F32, &[2, 1], &[f64::NAN, f64::NAN], Exact);
    let xi = i64s(&[2, 0], &[]);
    check_i64(
        &ok(
            &Op::Reduce(ReduceKind::Max, attrs(Some(&[1]), false)),
            &[&xi],
        ),
        &[2],
        &[i64::MIN, i64::MIN],
    );
    check_i64(
        &ok(
            &Op::Reduce(ReduceKind::Sum, attrs(Some(&[1]), false)),
            &[&xi],
        ),
        &[2],
        &[0, 0],
    );
    check_err(
        run(
            &Op::Reduce(ReduceKind::Mean, attrs(Some(&[1]), false)),
            &[&xi],
        ),
        Failure::Shape,
        "empty set",
    );
    // Reducing the non-empty axis leaves an empty output and nothing to be undefined.
    check_i64(
        &ok(
            &Op::Reduce(ReduceKind::Mean, attrs(Some(&[0]), false)),
            &[&xi],
        ),
        &[0],
        &[],
    );
}

#[test]
fn i64_reductions_are_exact() {
    // 2^53 + 1 + 1 is exact in i64 but 2^53 + 2 ≠ the f64 sum 2^53.
    let x = i64s(&[3], &[9_007_199_254_740_993, 1, 0]);
    check_i64(
        &ok(&Op::Reduce(ReduceKind::Sum, attrs(None, false)), &[&x]),
        &[],
        &[9_007_199_254_740_994],
    );
    check_i64(
        &ok(&Op::Reduce(ReduceKind::Max, attrs(None, true)), &[&x]),
        &[1],
        &[9_007_199_254_740_993],
    );
    // The mean truncates toward zero: -7/2 = -3.5 → -3; (i64::MAX + i64::MAX)/2 does not
    // overflow.
    let x = i64s(&[2, 2], &[-7, 0, i64::MAX, i64::MAX]);
    check_i64(
        &ok(
            &Op::Reduce(ReduceKind::Mean, attrs(Some(&[1]), false)),
            &[&x],
        ),
        &[2],
        &[-3, i64::MAX],
    );
}

#[test]
fn reduce_errors_are_typed() {
    let x = two_by_three();
    check_err(
        run(&Op::Reduce(ReduceKind::Sum, attrs(Some(&[2]), true)), &[&x]),
        Failure::Attribute,
        "[2, 3]",
    );
    check_err(
        run(
            &Op::Reduce(ReduceKind::Sum, attrs(Some(&[1, -1]), true)),
            &[&x],
        ),
        Failure::Attribute,
        "repeated",
    );
    check_err(
        run(
            &Op::Reduce(ReduceKind::Mean, attrs(None, true)),
            &[&x, &f32s(&[1], &[0.0])],
        ),
        Failure::DType { index: 1 },
        "axes",
    );
    check_err(
        run(
            &Op::Reduce(ReduceKind::Mean, attrs(None, true)),
            &[&x, &i64s(&[1, 1], &[0])],
        ),
        Failure::Shape,
        "1-D",
    );
    check_err(
        run(
            &Op::Reduce(ReduceKind::Max, attrs(Some(&[0]), true)),
            &[&x, &i64s(&[1], &[1])],
        ),
        Failure::Attribute,
        "disagree",
    );
    let b = Tensor::from_bool([1], vec![true]).expect("bool tensor");
    check_err(
        run(&Op::Reduce(ReduceKind::Sum, attrs(None, true)), &[&b]),
        Failure::DType { index: 0 },
        "bool",
    );
}

/// An i64 ReduceMean whose output has no cell is not a mean of nothing: [0, 0] reduced over
/// axis 1 (zero values a cell) with keepdims is an empty [0, 1], with no cell to be
/// undefined.
#[test]
fn an_integer_mean_with_no_output_cell_is_empty_not_an_error() {
    let xi = i64s(&[0, 0], &[]);
    check_i64(
        &ok(
            &Op::Reduce(ReduceKind::Mean, attrs(Some(&[1]), true)),
            &[&xi],
        ),
        &[0, 1],
        &[],
    );
}

fn arg(axis: i64, select_last_index: bool) -> ArgReduce {
    ArgReduce {
        axis,
        keepdims: false,
        select_last_index,
    }
}

/// ArgMax and ArgMin on integers (compared exactly, not through f64): the index of the
/// largest (smallest) value along the axis, the first of equal ones, the last with
/// select_last_index (the ONNX definition). Rows of [[3, 1, 3, 2], [-5, 7, -5, 7]]:
/// the max 3 sits at 0 and 2, 7 at 1 and 3; the min 1 at 1, -5 at 0 and 2.
#[test]
fn integer_arg_max_and_min_take_the_first_or_last_of_equal_extremes() {
    let x = i64s(&[2, 4], &[3, 1, 3, 2, -5, 7, -5, 7]);
    check_i64(&ok(&Op::ArgMax(arg(1, false)), &[&x]), &[2], &[0, 1]);
    check_i64(&ok(&Op::ArgMax(arg(1, true)), &[&x]), &[2], &[2, 3]);
    check_i64(&ok(&Op::ArgMin(arg(1, false)), &[&x]), &[2], &[1, 0]);
    check_i64(&ok(&Op::ArgMin(arg(-1, true)), &[&x]), &[2], &[1, 2]);
    // Along axis 0, columns (3, -5), (1, 7), (3, -5), (2, 7).
    check_i64(&ok(&Op::ArgMin(arg(0, false)), &[&x]), &[4], &[1, 0, 1, 0]);
    check_i64(&ok(&Op::ArgMax(arg(0, false)), &[&x]), &[4], &[0, 1, 0, 1]);
    // 2^53 + 1 and 2^53 are equal in f64; exactly, the second is the smaller.
    let big = i64s(&[2], &[9_007_199_254_740_993, 9_007_199_254_740_992]);
    check_i64(&ok(&Op::ArgMin(arg(0, false)), &[&big]), &[], &[1]);
    check_i64(&ok(&Op::ArgMax(arg(0, true)), &[&big]), &[], &[0]);
}

/// A NaN counts as the most extreme value and, with select_last_index, the last of several
/// NaNs wins, as the ONNX reference implementation's numpy argmax over the reversed axis has
/// it: over [NaN, 1, 2] both pick index 0, where no later value equals the NaN.
#[test]
fn a_nan_wins_arg_max_and_min_even_with_select_last_index() {
    let x = f32s(&[3], &[f32::NAN, 1.0, 2.0]);
    for op in [Op::ArgMax(arg(0, true)), Op::ArgMin(arg(0, true))] {
        check_i64(&ok(&op, &[&x]), &[], &[0]);
    }
    let x = f32s(&[4], &[2.0, f32::NAN, 1.0, f32::NAN]);
    check_i64(&ok(&Op::ArgMax(arg(0, true)), &[&x]), &[], &[3]);
    check_i64(&ok(&Op::ArgMin(arg(0, false)), &[&x]), &[], &[1]);
}
