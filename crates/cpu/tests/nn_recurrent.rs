//! Reference kernels for LSTM, GRU and RNN: values derived by hand from the spec's
//! equations on hidden size 1 (and Relu or Affine where the result should be exact), the
//! direction, sequence_lens and layout rules, every activation function by its definition,
//! bidirectional nodes of each cell against the spec's equations written out step by step in
//! this file (`naive`, with distinct weights, biases, peepholes and functions per
//! direction, in both layouts), and typed errors on bad operands. The ONNX node tests and
//! the onnxruntime golden cases check them on larger inputs.

mod nn_support;

use concord_core::infer::infer_on_tensors;
use concord_core::op::{Recurrent, RecurrentCell, RnnActivation, RnnActivationKind, RnnDirection};
use concord_core::{DType, Op, OpError, Tensor};
use concord_cpu::run_op;
use nn_support::{
    check, f16s, f32s, f64s_as_f32, values,
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

#[test]
fn every_activation_follows_its_definition() -> Result<(), OpError> {
    // An RNN with W = 1, R = 0 and no bias gives Y[t] = f(x[t]): each function of the ONNX
    // definitions (alpha and beta as given) at seven points.
    let points = [-5.0, -2.0, -0.5, 0.0, 0.5, 2.0, 5.0];
    let x = f64s_as_f32(&[7, 1, 1], &points);
    let w = f32s(&[1, 1, 1], &[1.0]);
    let r = f32s(&[1, 1, 1], &[0.0]);
    let act = |kind, alpha, beta| RnnActivation { kind, alpha, beta };
    use RnnActivationKind as K;
    type Definition = fn(f64) -> f64;
    let cases: [(RnnActivation, Definition); 11] = [
        (act(K::Relu, 0.0, 0.0), |v| if v > 0.0 { v } else { 0.0 }),
        (act(K::Tanh, 0.0, 0.0), f64::tanh),
        (act(K::Sigmoid, 0.0, 0.0), sigmoid),
        (act(K::Affine, 2.0, -1.0), |v| 2.0 * v - 1.0),
        (act(K::LeakyRelu, 0.125, 0.0), |v| {
            if v < 0.0 {
                0.125 * v
            } else {
                v
            }
        }),
        // x > alpha, so 0.5 itself gives 0.
        (act(K::ThresholdedRelu, 0.5, 0.0), |v| {
            if v <= 0.5 {
                0.0
            } else {
                v
            }
        }),
        (act(K::ScaledTanh, 2.0, 0.5), |v| 2.0 * (0.5 * v).tanh()),
        // 0.25·x + 0.5 leaves [0, 1] at -2 and 2.
        (act(K::HardSigmoid, 0.25, 0.5), |v| {
            (0.25 * v + 0.5).clamp(0.0, 1.0)
        }),
        (act(K::Elu, 1.5, 0.0), |v| {
            if v < 0.0 {
                1.5 * (v.exp() - 1.0)
            } else {
                v
            }
        }),
        (act(K::Softsign, 0.0, 0.0), |v| v / (1.0 + v.abs())),
        (act(K::Softplus, 0.0, 0.0), |v| (1.0 + v.exp()).ln()),
    ];
    for (a, f) in cases {
        let mut rnn = Recurrent::new(RecurrentCell::Rnn, RnnDirection::Forward);
        rnn.activations = vec![a];
        let out = run_all(&op(rnn), &[Some(&x), Some(&w), Some(&r)], 1)?;
        let want: Vec<f64> = points.iter().map(|&v| f(v)).collect();
        check(&out[0], DType::F32, &[7, 1, 1, 1], &want, RoundedOnce);
    }
    // f(x) = x for x >= 0 in LeakyRelu and Elu: a zero stays +0 even under a negative
    // alpha, which would turn alpha·0 into -0.
    for kind in [K::LeakyRelu, K::Elu] {
        let mut rnn = Recurrent::new(RecurrentCell::Rnn, RnnDirection::Forward);
        rnn.activations = vec![act(kind, -0.5, 0.0)];
        let out = run_all(&op(rnn), &[Some(&x), Some(&w), Some(&r)], 1)?;
        let zero = out[0].to_f64_vec()[3];
        assert!(
            zero == 0.0 && zero.is_sign_positive(),
            "{kind:?}(0) = {zero:e}"
        );
    }
    Ok(())
}

/// A recurrent node's operands in layout 0, as f64: W (dirs, gates·hidden, input), R (dirs,
/// gates·hidden, hidden), B (dirs, 2·gates·hidden), P (dirs, 3·hidden), initial H and C
/// (dirs, batch, hidden).
struct Operands {
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    x: Vec<f64>,
    w: Vec<f64>,
    r: Vec<f64>,
    b: Vec<f64>,
    p: Vec<f64>,
    h0: Vec<f64>,
    c0: Vec<f64>,
    lens: Vec<usize>,
}

impl Operands {
    /// Distinct multiples of 1/64 for every operand, so that no index mix-up goes unseen.
    fn new(cell: RecurrentCell, dirs: usize, [seq, batch, input, hidden]: [usize; 4]) -> Self {
        let rows = cell.gates() * hidden;
        Operands {
            seq,
            batch,
            input,
            hidden,
            x: values(seq * batch * input, 1),
            w: values(dirs * rows * input, 2),
            r: values(dirs * rows * hidden, 3),
            b: values(dirs * 2 * rows, 4),
            p: values(dirs * 3 * hidden, 5),
            h0: values(dirs * batch * hidden, 6),
            c0: values(dirs * batch * hidden, 7),
            lens: vec![seq; batch],
        }
    }
}

/// An activation by its ONNX definition.
fn apply(a: RnnActivation, v: f64) -> f64 {
    let (alpha, beta) = (f64::from(a.alpha), f64::from(a.beta));
    match a.kind {
        RnnActivationKind::Relu => v.max(0.0),
        RnnActivationKind::Tanh => v.tanh(),
        RnnActivationKind::Sigmoid => sigmoid(v),
        RnnActivationKind::Affine => alpha * v + beta,
        RnnActivationKind::LeakyRelu => {
            if v < 0.0 {
                alpha * v
            } else {
                v
            }
        }
        RnnActivationKind::ThresholdedRelu => {
            if v > alpha {
                v
            } else {
                0.0
            }
        }
        RnnActivationKind::ScaledTanh => alpha * (beta * v).tanh(),
        RnnActivationKind::HardSigmoid => (alpha * v + beta).clamp(0.0, 1.0),
        RnnActivationKind::Elu => {
            if v < 0.0 {
                alpha * (v.exp() - 1.0)
            } else {
                v
            }
        }
        RnnActivationKind::Softsign => v / (1.0 + v.abs()),
        RnnActivationKind::Softplus => (1.0 + v.exp()).ln(),
    }
}

/// The spec's equations, one direction, batch entry and step at a time, in layout 0: Y
/// (seq, dirs, batch, hidden), Y_h and Y_c (dirs, batch, hidden). Steps at or past an
/// entry's length are zeros in Y; the reverse direction starts at its last valid step.
fn naive(rec: &Recurrent, o: &Operands) -> [Vec<f64>; 3] {
    let (seq, batch, input, hs) = (o.seq, o.batch, o.input, o.hidden);
    let dirs = rec.direction.count();
    let gates = rec.cell.gates();
    let functions = rec.activations.len() / dirs;
    let mut y = vec![0.0; seq * dirs * batch * hs];
    let mut yh = vec![0.0; dirs * batch * hs];
    let mut yc = vec![0.0; dirs * batch * hs];
    for d in 0..dirs {
        let acts = &rec.activations[d * functions..(d + 1) * functions];
        let reverse = rec.direction == RnnDirection::Reverse || d == 1;
        // Row j of gate g: W·x, R·h and the two biases, each its own term.
        let wx = |g: usize, j: usize, xt: &[f64]| -> f64 {
            let row = (d * gates + g) * hs + j;
            (0..input).map(|i| o.w[row * input + i] * xt[i]).sum()
        };
        let rh = |g: usize, j: usize, h: &[f64]| -> f64 {
            let row = (d * gates + g) * hs + j;
            (0..hs).map(|k| o.r[row * hs + k] * h[k]).sum()
        };
        let wb = |g: usize, j: usize| o.b[d * 2 * gates * hs + g * hs + j];
        let rb = |g: usize, j: usize| o.b[d * 2 * gates * hs + gates * hs + g * hs + j];
        let p = |g: usize, j: usize| o.p[d * 3 * hs + g * hs + j];
        for n in 0..batch {
            let s = (d * batch + n) * hs;
            let mut h = o.h0[s..s + hs].to_vec();
            let mut c = o.c0[s..s + hs].to_vec();
            for step in 0..o.lens[n] {
                let t = if reverse { o.lens[n] - 1 - step } else { step };
                let xt = &o.x[(t * batch + n) * input..][..input];
                let mut next_h = vec![0.0; hs];
                match rec.cell {
                    RecurrentCell::Rnn => {
                        for (j, next) in next_h.iter_mut().enumerate() {
                            *next =
                                apply(acts[0], wx(0, j, xt) + rh(0, j, &h) + wb(0, j) + rb(0, j));
                        }
                    }
                    RecurrentCell::Gru => {
                        // Gates z, r, h.
                        let rg: Vec<f64> = (0..hs)
                            .map(|j| {
                                apply(acts[0], wx(1, j, xt) + rh(1, j, &h) + wb(1, j) + rb(1, j))
                            })
                            .collect();
                        let rh_scaled: Vec<f64> = (0..hs).map(|k| rg[k] * h[k]).collect();
                        for j in 0..hs {
                            let z =
                                apply(acts[0], wx(0, j, xt) + rh(0, j, &h) + wb(0, j) + rb(0, j));
                            let recur = if rec.linear_before_reset {
                                rg[j] * (rh(2, j, &h) + rb(2, j))
                            } else {
                                rh(2, j, &rh_scaled) + rb(2, j)
                            };
                            let cand = apply(acts[1], wx(2, j, xt) + wb(2, j) + recur);
                            next_h[j] = (1.0 - z) * cand + z * h[j];
                        }
                    }
                    RecurrentCell::Lstm => {
                        // Gates i, o, f, c; peepholes i, o, f.
                        for j in 0..hs {
                            let pre = |g: usize| wx(g, j, xt) + rh(g, j, &h) + wb(g, j) + rb(g, j);
                            let i = apply(acts[0], pre(0) + p(0, j) * c[j]);
                            let f = apply(acts[0], pre(2) + p(2, j) * c[j]);
                            let cell = f * c[j] + i * apply(acts[1], pre(3));
                            let og = apply(acts[0], pre(1) + p(1, j) * cell);
                            next_h[j] = og * apply(acts[2], cell);
                            c[j] = cell;
                        }
                    }
                }
                h = next_h;
                let at = ((t * dirs + d) * batch + n) * hs;
                y[at..at + hs].copy_from_slice(&h);
            }
            yh[s..s + hs].copy_from_slice(&h);
            yc[s..s + hs].copy_from_slice(&c);
        }
    }
    [y, yh, yc]
}

/// A row-major array of extents `dims` with axes `a` and `b` swapped (layout 0 to 1).
fn swap_axes(v: &[f64], dims: &[usize], a: usize, b: usize) -> Vec<f64> {
    let mut out_dims = dims.to_vec();
    out_dims.swap(a, b);
    let stride = |dims: &[usize], k: usize| dims[k + 1..].iter().product::<usize>();
    let mut out = vec![0.0; v.len()];
    for (flat, value) in v.iter().enumerate() {
        let mut idx: Vec<usize> = (0..dims.len())
            .map(|k| flat / stride(dims, k) % dims[k])
            .collect();
        idx.swap(a, b);
        let to: usize = (0..dims.len()).map(|k| idx[k] * stride(&out_dims, k)).sum();
        out[to] = *value;
    }
    out
}

/// Runs `rec` on `o` in layout 0 and in layout 1 (every operand transposed in the test) and
/// checks every output against [`naive`].
fn check_both_layouts(
    rec: &Recurrent,
    o: &Operands,
    tol: nn_support::Tolerance,
) -> Result<(), OpError> {
    let dirs = rec.direction.count();
    let (seq, batch, input, hs) = (o.seq, o.batch, o.input, o.hidden);
    let rows = rec.cell.gates() * hs;
    let [y, yh, yc] = naive(rec, o);
    let outputs = rec.cell.max_outputs();
    for batch_major in [false, true] {
        let mut rec = rec.clone();
        rec.batch_major = batch_major;
        let (x, h0, c0) = if batch_major {
            (
                swap_axes(&o.x, &[seq, batch, input], 0, 1),
                swap_axes(&o.h0, &[dirs, batch, hs], 0, 1),
                swap_axes(&o.c0, &[dirs, batch, hs], 0, 1),
            )
        } else {
            (o.x.clone(), o.h0.clone(), o.c0.clone())
        };
        let (x_dims, state_dims) = if batch_major {
            ([batch, seq, input], [batch, dirs, hs])
        } else {
            ([seq, batch, input], [dirs, batch, hs])
        };
        let x = f64s_as_f32(&x_dims, &x);
        let w = f64s_as_f32(&[dirs, rows, input], &o.w);
        let r = f64s_as_f32(&[dirs, rows, hs], &o.r);
        let b = f64s_as_f32(&[dirs, 2 * rows], &o.b);
        let lens: Vec<i32> = o.lens.iter().map(|&l| l as i32).collect();
        let lens = i32s(&[batch], &lens);
        let h0 = f64s_as_f32(&state_dims, &h0);
        let c0 = f64s_as_f32(&state_dims, &c0);
        let p = f64s_as_f32(&[dirs, 3 * hs], &o.p);
        let mut inputs = vec![
            Some(&x),
            Some(&w),
            Some(&r),
            Some(&b),
            Some(&lens),
            Some(&h0),
        ];
        if rec.cell == RecurrentCell::Lstm {
            inputs.extend([Some(&c0), Some(&p)]);
        }
        let out = run_all(&op(rec.clone()), &inputs, outputs)?;
        let (y, yh, yc, y_dims) = if batch_major {
            (
                swap_axes(
                    &swap_axes(&y, &[seq, dirs, batch, hs], 1, 2),
                    &[seq, batch, dirs, hs],
                    0,
                    1,
                ),
                swap_axes(&yh, &[dirs, batch, hs], 0, 1),
                swap_axes(&yc, &[dirs, batch, hs], 0, 1),
                [batch, seq, dirs, hs],
            )
        } else {
            (y.clone(), yh.clone(), yc.clone(), [seq, dirs, batch, hs])
        };
        check(&out[0], DType::F32, &y_dims, &y, tol);
        check(&out[1], DType::F32, &state_dims, &yh, tol);
        if rec.cell == RecurrentCell::Lstm {
            check(&out[2], DType::F32, &state_dims, &yc, tol);
        }
    }
    Ok(())
}

#[test]
fn bidirectional_rnn_matches_the_equations_in_both_layouts() -> Result<(), OpError> {
    // Relu on multiples of 1/64: every sum is exact, so the comparison is too. Lengths 3
    // and 2 of 3 steps; distinct weights, biases and initial state per direction.
    let mut rnn = relu_rnn(RnnDirection::Bidirectional);
    rnn.activations[1] = RnnActivation::new(RnnActivationKind::Affine);
    let mut o = Operands::new(RecurrentCell::Rnn, 2, [3, 2, 3, 2]);
    o.lens = vec![3, 2];
    check_both_layouts(&rnn, &o, Exact)
}

#[test]
fn bidirectional_gru_matches_the_equations_in_both_layouts() -> Result<(), OpError> {
    // The reverse direction with its own functions (HardSigmoid, Softsign) and biases.
    let mut gru = Recurrent::new(RecurrentCell::Gru, RnnDirection::Bidirectional);
    gru.activations[2] = RnnActivation::new(RnnActivationKind::HardSigmoid);
    gru.activations[3] = RnnActivation::new(RnnActivationKind::Softsign);
    let mut o = Operands::new(RecurrentCell::Gru, 2, [3, 2, 3, 2]);
    o.lens = vec![2, 3];
    for linear_before_reset in [false, true] {
        gru.linear_before_reset = linear_before_reset;
        check_both_layouts(&gru, &o, RoundedOnce)?;
    }
    Ok(())
}

#[test]
fn bidirectional_lstm_with_peepholes_matches_the_equations_in_both_layouts() -> Result<(), OpError>
{
    // Peepholes differ per row, gate and direction; the reverse direction has its own
    // functions (HardSigmoid, Softsign, ScaledTanh).
    let mut lstm = Recurrent::new(RecurrentCell::Lstm, RnnDirection::Bidirectional);
    lstm.activations[3] = RnnActivation::new(RnnActivationKind::HardSigmoid);
    lstm.activations[4] = RnnActivation::new(RnnActivationKind::Softsign);
    lstm.activations[5] = RnnActivation {
        kind: RnnActivationKind::ScaledTanh,
        alpha: 1.5,
        beta: 0.5,
    };
    let mut o = Operands::new(RecurrentCell::Lstm, 2, [3, 2, 3, 2]);
    o.lens = vec![3, 1];
    check_both_layouts(&lstm, &o, RoundedOnce)
}

#[test]
fn size_and_attribute_errors_count_every_direction() {
    let x = f32s(&[1, 1, 1], &[1.0]);
    let w = f32s(&[2, 4, 1], &[1.0; 8]);
    let r = f32s(&[2, 4, 1], &[1.0; 8]);
    // A bidirectional LSTM of hidden_size 2^60: W has 4·2^60 = 2^62 rows per direction and
    // B 2·2 times that, 2^64, past usize: an error naming hidden_size.
    let mut huge = Recurrent::new(RecurrentCell::Lstm, RnnDirection::Bidirectional);
    huge.hidden_size = Some(1 << 60);
    let err = run_op(&op(huge), &[Some(&x), Some(&w), Some(&r)], 1);
    assert!(
        matches!(&err, Err(OpError::Shape(m)) if m.contains("hidden_size")),
        "{err:?}"
    );
    // A forward RNN of hidden_size 2^63 - 1: B's 2·(2^63 - 1) values still fit (3 times
    // that would not), so the error is W's shape, which cannot match.
    let mut big = relu_rnn(RnnDirection::Forward);
    big.hidden_size = Some((1 << 63) - 1);
    let w1 = f32s(&[1, 1, 1], &[1.0]);
    let err = run_op(&op(big), &[Some(&x), Some(&w1), Some(&w1)], 1);
    assert!(
        matches!(&err, Err(OpError::Shape(m)) if m.contains("(W)") && m.contains("[1, 9223372036854775807, 1]")),
        "{err:?}"
    );
    // A bidirectional LSTM takes 3 activations per direction: 6, not 3.
    let mut lstm = Recurrent::new(RecurrentCell::Lstm, RnnDirection::Bidirectional);
    lstm.activations.truncate(3);
    let err = run_op(&op(lstm), &[Some(&x), Some(&w), Some(&r)], 1);
    assert!(
        matches!(&err, Err(OpError::Attribute { name: "activations", detail }) if detail.contains("takes 6 activations, the node has 3")),
        "{err:?}"
    );
}
