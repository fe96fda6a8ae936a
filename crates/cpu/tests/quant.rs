//! Reference kernels of the quantization family: the typed errors for operands of the wrong
//! type. Their values are checked by the ONNX node tests and the onnxruntime op/ cases (the
//! conformance binary).

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::{Op, OpError, Tensor};
use concord_cpu::run_op;

fn tensor(result: Result<Tensor, concord_core::Error>) -> Tensor {
    match result {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

#[test]
fn a_scale_must_be_f32_f16_or_bf16() {
    let x = tensor(Tensor::from_vec([2], vec![1.0f32, -2.0]));
    let q = tensor(Tensor::from_vec([2], vec![3u8, 4]));
    let quantize = Op::QuantizeLinear {
        axis: 1,
        block_size: 0,
        output_dtype: None,
        precision: None,
    };
    let dequantize = Op::DequantizeLinear {
        axis: 1,
        block_size: 0,
        output_dtype: None,
    };
    // An f32 scale works; an f64 or integer one is refused, naming the scale input.
    let good = Tensor::scalar_f32(0.5);
    assert!(run_op(&quantize, &[Some(&x), Some(&good)], 1).is_ok());
    assert!(run_op(&dequantize, &[Some(&q), Some(&good)], 1).is_ok());
    for bad in [
        tensor(Tensor::from_vec(Vec::<usize>::new(), vec![0.5f64])),
        Tensor::scalar_i64(2),
    ] {
        let got = run_op(&quantize, &[Some(&x), Some(&bad)], 1);
        assert!(
            matches!(&got, Err(OpError::DType { index: 1, name: "y_scale", actual, .. }) if *actual == bad.dtype()),
            "{got:?}"
        );
        let got = run_op(&dequantize, &[Some(&q), Some(&bad)], 1);
        assert!(
            matches!(&got, Err(OpError::DType { index: 1, name: "x_scale", actual, .. }) if *actual == bad.dtype()),
            "{got:?}"
        );
    }
}

fn u8s(shape: &[usize], values: &[u8]) -> Tensor {
    tensor(Tensor::from_vec(shape.to_vec(), values.to_vec()))
}

fn f32s(shape: &[usize], values: &[f32]) -> Tensor {
    tensor(Tensor::from_vec(shape.to_vec(), values.to_vec()))
}

/// Runs `op` and returns its one output's values and dims.
fn values(op: &Op, inputs: &[Option<&Tensor>]) -> (Vec<i128>, Vec<usize>) {
    match run_op(op, inputs, 1) {
        Ok(out) => (
            out[0].to_i128_vec().unwrap_or_default(),
            out[0].dims().to_vec(),
        ),
        Err(e) => panic!("{op:?} failed: {e}"),
    }
}

#[test]
fn matmul_integer_zero_points_per_row_of_a_and_per_column_of_b() {
    // (A - a_zp[row]) · (B - b_zp[column]), summed by hand over k in the comments.
    let a_zp = u8s(&[2], &[1, 2]);
    let b_zp = u8s(&[2], &[0, 1]);
    // A - a_zp = [[0, 1, 2], [2, 3, 4]]; B - b_zp = [[1, -1], [0, 0], [2, 2]].
    let a = u8s(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let b = u8s(&[3, 2], &[1, 0, 0, 1, 2, 3]);
    let (y, dims) = values(
        &Op::MatMulInteger,
        &[Some(&a), Some(&b), Some(&a_zp), Some(&b_zp)],
    );
    assert_eq!((y, dims), (vec![4, 4, 10, 6], vec![2, 2]));
    // Batched: the zero points apply to every matrix of the batch along the same axes. The
    // second matrices: A - a_zp = [[6, 7, 8], [-2, -1, 0]], B - b_zp = [[3, 0], [1, 1],
    // [0, -1]].
    let a3 = u8s(&[2, 2, 3], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2]);
    let b3 = u8s(&[2, 3, 2], &[1, 0, 0, 1, 2, 3, 3, 1, 1, 2, 0, 0]);
    let (y, dims) = values(
        &Op::MatMulInteger,
        &[Some(&a3), Some(&b3), Some(&a_zp), Some(&b_zp)],
    );
    assert_eq!(
        (y, dims),
        (vec![4, 4, 10, 6, 25, -1, -7, -1], vec![2, 2, 2])
    );
    // A zero point that is neither a scalar nor one value per row (or column) is refused:
    // one per column of A, a [2, 1] matrix, and a vector for a 1-D A (it has one row).
    let per_column_of_a = u8s(&[3], &[1, 2, 3]);
    let matrix = u8s(&[2, 1], &[1, 2]);
    for (a, zp) in [(&a, &per_column_of_a), (&a, &matrix), (&b_zp, &b_zp)] {
        let got = run_op(&Op::MatMulInteger, &[Some(a), Some(&b), Some(zp)], 1);
        assert!(
            matches!(&got, Err(OpError::Shape(m)) if m.contains("input 2 (a_zero_point)")),
            "{got:?}"
        );
    }
}

#[test]
fn qlinear_matmul_scales_must_be_single_values() {
    let a = u8s(&[1, 2], &[3, 5]);
    let b = u8s(&[2, 1], &[2, 4]);
    let zp = u8s(&[], &[0]);
    // (3·2 + 5·4) · 0.5 · 1 / 1 = 13.
    let run = |a_scale: &Tensor| {
        let one = Tensor::scalar_f32(1.0);
        run_op(
            &Op::QLinearMatMul,
            &[
                Some(&a),
                Some(a_scale),
                Some(&zp),
                Some(&b),
                Some(&one),
                Some(&zp),
                Some(&one),
                Some(&zp),
            ],
            1,
        )
    };
    let got = run(&f32s(&[1], &[0.5]));
    assert_eq!(
        got.map(|y| y[0].to_i128_vec()),
        Ok(Some(vec![13])),
        "a one-element a_scale"
    );
    for bad in [f32s(&[2], &[0.5, 0.5]), f32s(&[1, 1], &[0.5])] {
        let got = run(&bad);
        assert!(
            matches!(&got, Err(OpError::Unsupported(m)) if m.contains("input 1 (a_scale)")),
            "{:?}: {got:?}",
            bad.dims()
        );
    }
}

#[test]
fn conv_integer_takes_one_x_zero_point() {
    // (x - 1) · w over a 1×1 image of two channels and a 1×1 kernel: (3 - 1)·2 + (5 - 1)·1.
    let x = u8s(&[1, 2, 1, 1], &[3, 5]);
    let w = u8s(&[1, 2, 1, 1], &[2, 1]);
    let op = Op::ConvInteger(Default::default());
    let (y, dims) = values(&op, &[Some(&x), Some(&w), Some(&u8s(&[1], &[1]))]);
    assert_eq!((y, dims), (vec![8], vec![1, 1, 1, 1]));
    // One zero point per channel is not ONNX's ConvInteger (x_zero_point is per tensor),
    // though it has a value per channel here; nor is a [1, 1] matrix.
    for bad in [u8s(&[2], &[1, 1]), u8s(&[1, 1], &[1])] {
        let got = run_op(&op, &[Some(&x), Some(&w), Some(&bad)], 1);
        assert!(
            matches!(&got, Err(OpError::Shape(m))
                if m.contains("input 2 (x_zero_point)") && m.ends_with("it must be a scalar")),
            "{:?}: {got:?}",
            bad.dims()
        );
    }
}

#[test]
fn qlinear_conv_w_scale_is_one_value_or_one_per_output_channel() {
    // Two output channels of a 1×1 kernel, weights 1 and 2, over the image [3, 5]:
    // accumulators [3, 5] and [6, 10], requantised by x_scale · w_scale / y_scale with
    // ties to even.
    let x = u8s(&[1, 1, 1, 2], &[3, 5]);
    let w = u8s(&[2, 1, 1, 1], &[1, 2]);
    let zp = u8s(&[], &[0]);
    let one = Tensor::scalar_f32(1.0);
    let op = Op::QLinearConv(Default::default());
    let run = |w_scale: &Tensor| {
        run_op(
            &op,
            &[
                Some(&x),
                Some(&one),
                Some(&zp),
                Some(&w),
                Some(w_scale),
                Some(&zp),
                Some(&one),
                Some(&zp),
            ],
            1,
        )
        .map(|y| y[0].to_i128_vec())
    };
    // One scale 0.5 for both: [1.5, 2.5] → [2, 2], [3, 5].
    assert_eq!(run(&f32s(&[1], &[0.5])), Ok(Some(vec![2, 2, 3, 5])));
    // One per channel, 0.5 and 1: [2, 2], [6, 10].
    assert_eq!(run(&f32s(&[2], &[0.5, 1.0])), Ok(Some(vec![2, 2, 6, 10])));
    for bad in [f32s(&[1, 1], &[0.5]), f32s(&[3], &[0.5, 1.0, 1.0])] {
        let got = run(&bad);
        assert!(
            matches!(&got, Err(OpError::Shape(m)) if m.contains("input 4 (w_scale)")),
            "{:?}: {got:?}",
            bad.dims()
        );
    }
    // The bias is i32 (added to the accumulators before requantising): 1 and -2 per channel
    // at scale 1 give [4, 6], [4, 8]; an i64 bias is refused, naming B.
    let with_bias = |bias: &Tensor| {
        let w_scale = f32s(&[1], &[1.0]);
        run_op(
            &op,
            &[
                Some(&x),
                Some(&one),
                Some(&zp),
                Some(&w),
                Some(&w_scale),
                Some(&zp),
                Some(&one),
                Some(&zp),
                Some(bias),
            ],
            1,
        )
    };
    let bias = tensor(Tensor::from_vec([2], vec![1i32, -2]));
    assert_eq!(
        with_bias(&bias).map(|y| y[0].to_i128_vec()),
        Ok(Some(vec![4, 6, 4, 8]))
    );
    let wide = tensor(Tensor::from_vec([2], vec![1i64, -2]));
    let got = with_bias(&wide);
    assert!(
        matches!(&got, Err(OpError::DType { index: 8, name: "B", actual, .. }) if *actual == wide.dtype()),
        "{got:?}"
    );
}
