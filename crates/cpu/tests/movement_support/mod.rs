//! Shared helpers for the data-movement kernel tests: tensor constructors, runners that
//! also check shape inference agrees with the kernel, and exact (bitwise) comparison.

#![allow(dead_code)]
// Test helpers report a failed expectation by panicking, as assertions do.
#![allow(clippy::panic)]

use concord_core::infer::{infer_op, ValueFact};
use concord_core::{Op, OpError, SymShape, Tensor};
use concord_cpu::run_op;
use half::f16;

pub fn f32s(dims: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_f32(dims, values.to_vec()).expect("test tensor shape matches its data")
}

pub fn f16s(dims: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_f16(dims, values.iter().map(|&v| f16::from_f32(v)).collect())
        .expect("test tensor shape matches its data")
}

pub fn i64s(dims: &[usize], values: &[i64]) -> Tensor {
    Tensor::from_i64(dims, values.to_vec()).expect("test tensor shape matches its data")
}

pub fn bools(dims: &[usize], values: &[bool]) -> Tensor {
    Tensor::from_bool(dims, values.to_vec()).expect("test tensor shape matches its data")
}

/// A 1-D i64 operand (shape, axes, starts, pads…).
pub fn ints(values: &[i64]) -> Tensor {
    Tensor::vec_i64(values.to_vec())
}

/// Runs an op with `num_outputs` outputs on inputs (None for omitted optional ones). On
/// success, shape inference given every input as a constant must predict exactly the
/// dtype and shape of each output, so kernel and inference are held to each other.
pub fn run_n(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let outputs = run_op(op, inputs, num_outputs)?;
    let shapes: Vec<Option<SymShape>> = inputs
        .iter()
        .map(|t| t.map(|t| t.shape().to_sym()))
        .collect();
    let facts: Vec<Option<ValueFact>> = inputs
        .iter()
        .zip(&shapes)
        .map(|(t, shape)| match (t, shape) {
            (Some(t), Some(shape)) => Some(ValueFact {
                dtype: t.dtype(),
                shape,
                value: Some(*t),
            }),
            _ => None,
        })
        .collect();
    let inferred = infer_op(op, &facts, num_outputs)
        .unwrap_or_else(|e| panic!("{} ran but its inference failed: {e}", op.name()));
    for (i, (fact, out)) in inferred.iter().zip(&outputs).enumerate() {
        assert_eq!(
            (fact.dtype, fact.shape.clone()),
            (out.dtype(), out.shape().to_sym()),
            "{} output {i}: inferred type differs from the kernel's output",
            op.name()
        );
    }
    Ok(outputs)
}

/// Runs a single-output op on inputs (None for omitted optional ones).
pub fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let mut outputs = run_n(op, inputs, 1)?;
    assert_eq!(
        outputs.len(),
        1,
        "{} returned {} outputs",
        op.name(),
        outputs.len()
    );
    Ok(outputs.remove(0))
}

/// Runs a single-output op on present inputs; it must succeed.
pub fn ok(op: &Op, inputs: &[&Tensor]) -> Tensor {
    let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|&t| Some(t)).collect();
    run(op, &inputs).unwrap_or_else(|e| panic!("{} failed: {e}", op.name()))
}

/// Runs a single-output op on present inputs; it must fail, and the error is returned.
pub fn err(op: &Op, inputs: &[&Tensor]) -> OpError {
    let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|&t| Some(t)).collect();
    match run_op(op, &inputs, 1) {
        Ok(out) => panic!("{} should have failed, produced {out:?}", op.name()),
        Err(e) => e,
    }
}

/// Asserts dtype, shape and element bits equal.
#[track_caller]
pub fn assert_same(got: &Tensor, want: &Tensor) {
    assert!(
        got.bit_identical(want),
        "got {:?} {} {:?}\nwant {:?} {} {:?}",
        got.dtype(),
        got.shape(),
        got.data(),
        want.dtype(),
        want.shape(),
        want.data()
    );
}

/// Asserts that an error's message mentions every fragment.
#[track_caller]
pub fn assert_mentions(e: &OpError, fragments: &[&str]) {
    let msg = e.to_string();
    for f in fragments {
        assert!(msg.contains(f), "error `{msg}` does not mention `{f}`");
    }
}
