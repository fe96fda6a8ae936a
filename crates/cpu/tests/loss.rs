//! Reference kernels for NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: values
//! worked out by hand from the ONNX definition (element loss −weight[t]·input[n, t, d],
//! `mean` dividing by the weights applied, `ignore_index` contributing nothing), and the
//! typed errors for targets outside the classes and weights of the wrong shape or type. The
//! ONNX node tests and the onnxruntime op/ cases check larger inputs.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::op::LossReduction;
use concord_core::{Op, OpError, Tensor};
use concord_cpu::run_op;

fn tensor(result: Result<Tensor, concord_core::Error>) -> Tensor {
    match result {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn nll(reduction: LossReduction, ignore_index: Option<i64>) -> Op {
    Op::NegativeLogLikelihoodLoss {
        reduction,
        ignore_index,
    }
}

fn loss(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Vec<f64>, OpError> {
    let mut out = run_op(op, inputs, 1)?;
    match out.pop() {
        Some(t) if out.is_empty() => Ok(t.to_f64_vec()),
        _ => panic!("{op:?} did not produce one output"),
    }
}

fn value(op: &Op, inputs: &[Option<&Tensor>]) -> Vec<f64> {
    match loss(op, inputs) {
        Ok(v) => v,
        Err(e) => panic!("{op:?}: {e}"),
    }
}

/// Log-probabilities (N = 2, C = 3), exact in f32.
fn log_prob() -> Tensor {
    tensor(Tensor::from_vec(
        [2, 3],
        vec![-1.0f32, -2.0, -3.0, -0.5, -1.5, -2.5],
    ))
}

#[test]
fn nll_weighs_and_reduces_as_onnx_defines() {
    let x = log_prob();
    let targets = Tensor::from_i64([2], vec![2, 0]);
    let targets = tensor(targets);
    let weight = tensor(Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]));
    let inputs = [Some(&x), Some(&targets), Some(&weight)];
    // Element losses: −w[2]·x[0, 2] = 3·3 = 9 and −w[0]·x[1, 0] = 1·0.5 = 0.5.
    assert_eq!(value(&nll(LossReduction::None, None), &inputs), [9.0, 0.5]);
    assert_eq!(value(&nll(LossReduction::Sum, None), &inputs), [9.5]);
    // Mean divides by the weights applied, 3 + 1.
    assert_eq!(value(&nll(LossReduction::Mean, None), &inputs), [9.5 / 4.0]);
    // Target 2 ignored: its element contributes 0 and weighs 0, so the mean is 0.5 / 1.
    let ignore = Some(2);
    assert_eq!(
        value(&nll(LossReduction::None, ignore), &inputs),
        [0.0, 0.5]
    );
    assert_eq!(value(&nll(LossReduction::Mean, ignore), &inputs), [0.5]);
    // Without weights the mean divides by the count: (3 + 0.5) / 2.
    let unweighted = [Some(&x), Some(&targets)];
    assert_eq!(
        value(&nll(LossReduction::Mean, None), &unweighted),
        [3.5 / 2.0]
    );
}

#[test]
fn a_target_outside_the_classes_is_an_error() {
    let x = log_prob();
    // Class C (3) is one past the last class; −1 is outside too unless it is the
    // ignore_index.
    for bad in [3, 4, -1] {
        let targets = tensor(Tensor::from_i64([2], vec![0, bad]));
        let got = loss(&nll(LossReduction::None, None), &[Some(&x), Some(&targets)]);
        assert!(
            matches!(&got, Err(OpError::Shape(m)) if m.contains(&format!("holds {bad} at flat index 1"))),
            "target {bad}: {got:?}"
        );
    }
    let targets = tensor(Tensor::from_i64([2], vec![0, -1]));
    assert_eq!(
        value(
            &nll(LossReduction::None, Some(-1)),
            &[Some(&x), Some(&targets)]
        ),
        [1.0, 0.0]
    );
    // The same check in SoftmaxCrossEntropyLoss, which shares it.
    let targets = tensor(Tensor::from_i64([2], vec![3, 0]));
    let sce = Op::SoftmaxCrossEntropyLoss {
        reduction: LossReduction::None,
        ignore_index: None,
    };
    assert!(matches!(
        loss(&sce, &[Some(&x), Some(&targets)]),
        Err(OpError::Shape(m)) if m.contains("outside the 3 classes")
    ));
}

#[test]
fn a_weight_needs_one_value_per_class_of_the_input_type() {
    let x = log_prob();
    let targets = tensor(Tensor::from_i64([2], vec![2, 0]));
    let op = nll(LossReduction::Sum, None);
    // Too short (class 2 would have no weight), too long, and the right length in f64 for
    // an f32 input: each alone is refused.
    let bad = [
        tensor(Tensor::from_vec([2], vec![1.0f32, 2.0])),
        tensor(Tensor::from_vec([4], vec![1.0f32; 4])),
        tensor(Tensor::from_vec([3], vec![1.0f64; 3])),
    ];
    for w in &bad {
        let got = loss(&op, &[Some(&x), Some(&targets), Some(w)]);
        assert!(
            matches!(&got, Err(OpError::Shape(m)) if m.contains("one weight per class (3)")),
            "weight {} {}: {got:?}",
            w.dtype(),
            w.shape()
        );
    }
}
