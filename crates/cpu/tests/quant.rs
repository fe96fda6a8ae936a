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
