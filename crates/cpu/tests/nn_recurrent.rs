//! Reference kernels for LSTM, GRU and RNN: values derived by hand from the spec's
//! equations on hidden size 1 (and Relu or Affine where the result should be exact), the
//! direction, sequence_lens and layout rules, and typed errors on bad operands. The ONNX node
//! tests and the onnxruntime golden cases check them on larger inputs.

mod nn_support;

use concord_core::infer::infer_on_tensors;
use concord_core::op::{Recurrent, RecurrentCell, RnnActivation, RnnActivationKind, RnnDirection};
use concord_core::{DType, Op, OpError, Tensor};
use concord_cpu::run_op;
use nn_support::{
    check, f16s, f32s,
    Tolerance::{Exact, RoundedOnce},
};

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn i32s(dims: &[usize], values: &[i32]) -> Tensor {
    Tensor::from_vec(dims, values.to_vec()).expect("test tensor shape matches its data")
}

fn op(r: Recurrent) -> Op {
    Op::Recurrent(r)
}

/// An RNN with Relu in every direction.
fn relu_rnn(direction: RnnDirection) -> Recurrent {
    let mut r = Recurrent::new(RecurrentCell::Rnn, direction);
    r.activations = vec![RnnActivation::new(RnnActivationKind::Relu); direction.count()];
    r
}

/// Runs the kernel for `n` outputs and checks that inference predicts every output's dtype
/// and shape.
fn run_all(op: &Op, inputs: &[Option<&Tensor>], n: usize) -> Result<Vec<Tensor>, OpError> {
    let out = run_op(op, inputs, n)?;
    let inferred = infer_on_tensors(op, inputs, n)?;
    assert_eq!(inferred.len(), out.len());
    for (fact, t) in inferred.iter().zip(&out) {
        assert_eq!(fact.dtype, t.dtype());
        assert_eq!(fact.shape, t.shape().to_sym());
    }
    Ok(out)
}

#[test]
fn rnn_relu_forward_and_reverse_walk_the_sequence() -> Result<(), OpError> {
    // W = 2, R = 0.5, x = [1, 1]: forward h1 = 2, h2 = 2 + 0.5·2 = 3.
    let x = f32s(&[2, 1, 1], &[1.0, 1.0]);
    let w = f32s(&[1, 1, 1], &[2.0]);
    let r = f32s(&[1, 1, 1], &[0.5]);
    let out = run_all(
        &op(relu_rnn(RnnDirection::Forward)),
        &[Some(&x), Some(&w), Some(&r)],
        2,
    )?;
    check(&out[0], DType::F32, &[2, 1, 1, 1], &[2.0, 3.0], Exact);
    check(&out[1], DType::F32, &[1, 1, 1], &[3.0], Exact);
    // Reverse walks t = 1 first: Y[1] = 2, Y[0] = 3, and Y_h is the state at t = 0.
    let out = run_all(
        &op(relu_rnn(RnnDirection::Reverse)),
        &[Some(&x), Some(&w), Some(&r)],
        2,
    )?;
    check(&out[0], DType::F32, &[2, 1, 1, 1], &[3.0, 2.0], Exact);
    check(&out[1], DType::F32, &[1, 1, 1], &[3.0], Exact);
    Ok(())
}

#[test]
fn bias_and_initial_state_enter_every_step() -> Result<(), OpError> {
    // Wb = 1, Rb = -0.5, h0 = 4: h1 = 2·1 + 0.5·4 + 0.5 = 4.5.
    let x = f32s(&[1, 1, 1], &[1.0]);
    let w = f32s(&[1, 1, 1], &[2.0]);
    let r = f32s(&[1, 1, 1], &[0.5]);
    let b = f32s(&[1, 2], &[1.0, -0.5]);
    let h0 = f32s(&[1, 1, 1], &[4.0]);
    let inputs = [Some(&x), Some(&w), Some(&r), Some(&b), None, Some(&h0)];
    let out = run_all(&op(relu_rnn(RnnDirection::Forward)), &inputs, 2)?;
    check(&out[1], DType::F32, &[1, 1, 1], &[4.5], Exact);
    Ok(())
}

#[test]
fn sequence_lens_zero_fill_y_and_keep_the_last_valid_state() -> Result<(), OpError> {
    // Two batch entries, lengths 1 and 2, x all ones; bidirectional with equal weights.
    let x = f32s(&[2, 2, 1], &[1.0; 4]);
    let w = f32s(&[2, 1, 1], &[2.0, 2.0]);
    let r = f32s(&[2, 1, 1], &[0.5, 0.5]);
    let lens = i32s(&[2], &[1, 2]);
    let inputs = [Some(&x), Some(&w), Some(&r), None, Some(&lens)];
    let out = run_all(&op(relu_rnn(RnnDirection::Bidirectional)), &inputs, 2)?;
    // Y (seq, dir, batch, hidden). Entry 0 has one step in each direction (h = 2), then
    // zeros; entry 1 walks forward 2, 3 and in reverse t = 1 (2) then t = 0 (3).
    let y = [
        2.0, 2.0, // t 0, forward
        2.0, 3.0, // t 0, reverse
        0.0, 3.0, // t 1, forward
        0.0, 2.0, // t 1, reverse
    ];
    check(&out[0], DType::F32, &[2, 2, 2, 1], &y, Exact);
    check(
        &out[1],
        DType::F32,
        &[2, 2, 1],
        &[2.0, 3.0, 2.0, 3.0],
        Exact,
    );
    // A length of 0 leaves the initial state (zeros here) and a zero Y.
    let lens = i32s(&[2], &[0, 2]);
    let w1 = f32s(&[1, 1, 1], &[2.0]);
    let r1 = f32s(&[1, 1, 1], &[0.5]);
    let inputs = [Some(&x), Some(&w1), Some(&r1), None, Some(&lens)];
    let out = run_all(&op(relu_rnn(RnnDirection::Forward)), &inputs, 2)?;
    check(
        &out[0],
        DType::F32,
        &[2, 1, 2, 1],
        &[0.0, 2.0, 0.0, 3.0],
        Exact,
    );
    check(&out[1], DType::F32, &[1, 2, 1], &[0.0, 3.0], Exact);
    Ok(())
}

#[test]
fn layout_one_puts_batch_first() -> Result<(), OpError> {
    // Batch 2, one step: h = relu(2·x) = [2, 6]; initial_h is (batch, dir, hidden) too.
    let mut rnn = relu_rnn(RnnDirection::Forward);
    rnn.batch_major = true;
    let x = f32s(&[2, 1, 1], &[1.0, 3.0]);
    let w = f32s(&[1, 1, 1], &[2.0]);
    let r = f32s(&[1, 1, 1], &[1.0]);
    let h0 = f32s(&[2, 1, 1], &[0.0, 1.0]);
    let inputs = [Some(&x), Some(&w), Some(&r), None, None, Some(&h0)];
    let out = run_all(&op(rnn), &inputs, 2)?;
    check(&out[0], DType::F32, &[2, 1, 1, 1], &[2.0, 7.0], Exact);
    check(&out[1], DType::F32, &[2, 1, 1], &[2.0, 7.0], Exact);
    Ok(())
}

#[test]
fn activation_alpha_and_beta_reach_the_function() -> Result<(), OpError> {
    // Affine 3·v + 1 on v = 2·x: x = -1 gives -5.
    let mut rnn = Recurrent::new(RecurrentCell::Rnn, RnnDirection::Forward);
    rnn.activations = vec![RnnActivation {
        kind: RnnActivationKind::Affine,
        alpha: 3.0,
        beta: 1.0,
    }];
    let x = f32s(&[1, 1, 1], &[-1.0]);
    let w = f32s(&[1, 1, 1], &[2.0]);
    let r = f32s(&[1, 1, 1], &[0.0]);
    let out = run_all(&op(rnn.clone()), &[Some(&x), Some(&w), Some(&r)], 1)?;
    check(&out[0], DType::F32, &[1, 1, 1, 1], &[-5.0], Exact);
    // ThresholdedRelu with alpha 2.5 zeroes v = -2 and v = 2, keeps v = 3.
    rnn.activations[0] = RnnActivation {
        kind: RnnActivationKind::ThresholdedRelu,
        alpha: 2.5,
        beta: 0.0,
    };
    let x = f32s(&[1, 3, 1], &[-1.0, 1.0, 1.5]);
    let out = run_all(&op(rnn), &[Some(&x), Some(&w), Some(&r)], 1)?;
    check(&out[0], DType::F32, &[1, 1, 3, 1], &[0.0, 0.0, 3.0], Exact);
    Ok(())
}

/// One LSTM step, hidden 1, input 1: W = (i, o, f, c) = (0, 0, 0, 1), R = 0, x = 1, so the
/// gate pre-activations are their biases and the candidate is g(1).
fn lstm_one_step(
    lstm: Recurrent,
    bias: [f32; 4],
    p: Option<[f32; 3]>,
) -> Result<Vec<Tensor>, OpError> {
    let x = f32s(&[1, 1, 1], &[1.0]);
    let w = f32s(&[1, 4, 1], &[0.0, 0.0, 0.0, 1.0]);
    let r = f32s(&[1, 4, 1], &[0.0; 4]);
    let mut b = bias.to_vec();
    b.extend([0.0; 4]);
    let b = f32s(&[1, 8], &b);
    let h0 = f32s(&[1, 1, 1], &[0.0]);
    let c0 = f32s(&[1, 1, 1], &[2.0]);
    let p = p.map(|p| f32s(&[1, 3], &p));
    let inputs = [
        Some(&x),
        Some(&w),
        Some(&r),
        Some(&b),
        None,
        Some(&h0),
        Some(&c0),
        p.as_ref(),
    ];
    run_all(&op(lstm), &inputs, 3)
}

#[test]
fn lstm_gates_follow_the_spec() -> Result<(), OpError> {
    let lstm = Recurrent::new(RecurrentCell::Lstm, RnnDirection::Forward);
    // Biases i = 0.3, o = -0.2, f = 1, c = 0; c0 = 2.
    let out = lstm_one_step(lstm.clone(), [0.3, -0.2, 1.0, 0.0], None)?;
    let (i, o, f) = (sigmoid(0.3), sigmoid(-0.2), sigmoid(1.0));
    let c = f * 2.0 + i * 1f64.tanh();
    let h = o * c.tanh();
    check(&out[0], DType::F32, &[1, 1, 1, 1], &[h], RoundedOnce);
    check(&out[1], DType::F32, &[1, 1, 1], &[h], RoundedOnce);
    check(&out[2], DType::F32, &[1, 1, 1], &[c], RoundedOnce);
    // Peepholes: i and f see c0, o sees the new cell state.
    let out = lstm_one_step(lstm.clone(), [0.0; 4], Some([0.5, -1.0, 0.25]))?;
    let (i, f) = (sigmoid(0.5 * 2.0), sigmoid(0.25 * 2.0));
    let c = f * 2.0 + i * 1f64.tanh();
    let o = sigmoid(-c);
    check(
        &out[1],
        DType::F32,
        &[1, 1, 1],
        &[o * c.tanh()],
        RoundedOnce,
    );
    check(&out[2], DType::F32, &[1, 1, 1], &[c], RoundedOnce);
    Ok(())
}

#[test]
fn lstm_input_forget_and_clip() -> Result<(), OpError> {
    // input_forget: f = 1 - i (onnxruntime's coupling), whatever f's own bias.
    let mut lstm = Recurrent::new(RecurrentCell::Lstm, RnnDirection::Forward);
    lstm.input_forget = true;
    let out = lstm_one_step(lstm, [0.3, 0.0, 2.0, 0.0], None)?;
    let i = sigmoid(0.3);
    let c = (1.0 - i) * 2.0 + i * 1f64.tanh();
    check(&out[2], DType::F32, &[1, 1, 1], &[c], RoundedOnce);
    check(
        &out[1],
        DType::F32,
        &[1, 1, 1],
        &[0.5 * c.tanh()],
        RoundedOnce,
    );
    // clip 1 clamps i's pre-activation 10 to 1.
    let mut lstm = Recurrent::new(RecurrentCell::Lstm, RnnDirection::Forward);
    lstm.clip = Some(1.0);
    let out = lstm_one_step(lstm, [10.0, 0.0, 0.0, 0.0], None)?;
    let c = 0.5 * 2.0 + sigmoid(1.0) * 1f64.tanh();
    check(&out[2], DType::F32, &[1, 1, 1], &[c], RoundedOnce);
    Ok(())
}

#[test]
fn gru_linear_before_reset_moves_the_reset_gate() -> Result<(), OpError> {
    // Hidden 1, W = 0, R = (z, r, h) = (0, 0, 1), h0 = 1, Rb_h = 1: z = r = 1/2.
    let x = f32s(&[1, 1, 1], &[1.0]);
    let w = f32s(&[1, 3, 1], &[0.0; 3]);
    let r = f32s(&[1, 3, 1], &[0.0, 0.0, 1.0]);
    let b = f32s(&[1, 6], &[0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    let h0 = f32s(&[1, 1, 1], &[1.0]);
    let inputs = [Some(&x), Some(&w), Some(&r), Some(&b), None, Some(&h0)];
    // Default: h~ = tanh(R_h·(r ⊙ h0) + Rb_h) = tanh(1.5).
    let mut gru = Recurrent::new(RecurrentCell::Gru, RnnDirection::Forward);
    let out = run_all(&op(gru.clone()), &inputs, 2)?;
    check(
        &out[1],
        DType::F32,
        &[1, 1, 1],
        &[0.5 * 1.5f64.tanh() + 0.5],
        RoundedOnce,
    );
    // linear_before_reset: h~ = tanh(r ⊙ (R_h·h0 + Rb_h)) = tanh(1).
    gru.linear_before_reset = true;
    let out = run_all(&op(gru), &inputs, 2)?;
    check(
        &out[1],
        DType::F32,
        &[1, 1, 1],
        &[0.5 * 1f64.tanh() + 0.5],
        RoundedOnce,
    );
    Ok(())
}

#[test]
fn f16_inputs_give_f16_outputs() -> Result<(), OpError> {
    let x = f16s(&[2, 1, 1], &[1.0, 1.0]);
    let w = f16s(&[1, 1, 1], &[2.0]);
    let r = f16s(&[1, 1, 1], &[0.5]);
    let out = run_all(
        &op(relu_rnn(RnnDirection::Forward)),
        &[Some(&x), Some(&w), Some(&r)],
        2,
    )?;
    check(&out[0], DType::F16, &[2, 1, 1, 1], &[2.0, 3.0], Exact);
    Ok(())
}

#[test]
fn bad_operands_are_typed_errors() {
    let x = f32s(&[2, 1, 1], &[1.0, 1.0]);
    let w = f32s(&[1, 1, 1], &[2.0]);
    let r = f32s(&[1, 1, 1], &[0.5]);
    let rnn = op(relu_rnn(RnnDirection::Forward));
    // W for two directions on a forward node.
    let w2 = f32s(&[2, 1, 1], &[2.0, 2.0]);
    let err = run_op(&rnn, &[Some(&x), Some(&w2), Some(&r)], 2);
    assert!(
        matches!(&err, Err(OpError::Shape(m)) if m.contains("W") && m.contains("[1, 1, 1]")),
        "{err:?}"
    );
    // A length past the sequence.
    let lens = i32s(&[1], &[3]);
    let err = run_op(&rnn, &[Some(&x), Some(&w), Some(&r), None, Some(&lens)], 2);
    assert!(
        matches!(&err, Err(OpError::Shape(m)) if m.contains("sequence_lens")),
        "{err:?}"
    );
    // W of another dtype than X.
    let w16 = f16s(&[1, 1, 1], &[2.0]);
    let err = run_op(&rnn, &[Some(&x), Some(&w16), Some(&r)], 2);
    assert!(
        matches!(err, Err(OpError::DType { index: 1, .. })),
        "{err:?}"
    );
    // Y_c on an RNN.
    let err = run_op(&rnn, &[Some(&x), Some(&w), Some(&r)], 3);
    assert!(matches!(err, Err(OpError::Unsupported(_))), "{err:?}");
    // A hidden_size whose four LSTM gates overflow: 4 · (2^62 + 1) wraps to 4, which a W of
    // shape [1, 4, 1] would match. A typed error, not a wrapped shape or a panic.
    let mut huge = Recurrent::new(RecurrentCell::Lstm, RnnDirection::Forward);
    huge.hidden_size = Some((1usize << 62) + 1);
    let w4 = f32s(&[1, 4, 1], &[1.0; 4]);
    let r4 = f32s(&[1, 4, 1], &[1.0; 4]);
    let err = run_op(&op(huge), &[Some(&x), Some(&w4), Some(&r4)], 1);
    assert!(
        matches!(&err, Err(OpError::Shape(m)) if m.contains("hidden_size")),
        "{err:?}"
    );
}
