//! LSTM, GRU and RNN (opsets 7 and 14), following the ONNX spec's equations and, where the
//! spec is silent, onnxruntime. Everything is computed in f64, the state included, and each
//! output is rounded once to X's dtype.
//!
//! Gate blocks of W, R and B are in the spec's orders: LSTM i, o, f, c; GRU z, r, h. B is
//! W's biases then R's. Each batch entry walks its own length (`sequence_lens`, else the
//! whole sequence): the reverse direction walks it from its last valid step back to 0,
//! steps at or past the length are zeros in Y, and Y_h and Y_c hold the state after the
//! last step walked, as in onnxruntime. For a length of 0 they hold the initial state
//! (onnxruntime 1.23 leaves RNN's Y_h uninitialised there; the ONNX reference ignores
//! sequence_lens). `clip` clamps every gate's
//! pre-activation (bias and peephole terms included) before its activation, as
//! onnxruntime does. `input_forget` makes the forget gate 1 - the input gate, which is how
//! onnxruntime couples them (the spec does not say).

use super::{expect_float, optional, required};
use concord_core::op::{Recurrent, RecurrentCell, RnnActivation, RnnActivationKind};
use concord_core::{DType, Op, OpError, Shape, Tensor};

pub(crate) fn run(
    op: &Op,
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, OpError> {
    let Op::Recurrent(r) = op else {
        return Err(super::not_in_family(op));
    };
    if num_outputs > r.cell.max_outputs() {
        return Err(OpError::Unsupported(format!(
            "{} has at most {} outputs, the node declares {num_outputs}",
            r.cell.name(),
            r.cell.max_outputs()
        )));
    }
    let problem = Problem::new(r, inputs)?;
    let outputs = problem.run();
    let dtype = problem.dtype;
    let (seq, batch, dirs, hidden) = (problem.seq, problem.batch, problem.dirs, problem.hidden);
    let mut tensors = Vec::with_capacity(num_outputs);
    for (index, values) in [outputs.y, outputs.h, outputs.c]
        .into_iter()
        .take(num_outputs)
        .enumerate()
    {
        let (shape, values) = if index == 0 {
            if r.batch_major {
                (
                    Shape::new([batch, seq, dirs, hidden]),
                    permute(&values, [seq, dirs, batch, hidden], [2, 0, 1, 3]),
                )
            } else {
                (Shape::new([seq, dirs, batch, hidden]), values)
            }
        } else if r.batch_major {
            (
                Shape::new([batch, dirs, hidden]),
                permute(&values, [1, dirs, batch, hidden], [0, 2, 1, 3]),
            )
        } else {
            (Shape::new([dirs, batch, hidden]), values)
        };
        tensors.push(Tensor::from_f64(dtype, shape, values)?);
    }
    Ok(tensors)
}

/// A recurrent node's operands, read into f64 in the layout-0 order.
struct Problem<'a> {
    r: &'a Recurrent,
    dtype: DType,
    seq: usize,
    batch: usize,
    input: usize,
    dirs: usize,
    hidden: usize,
    /// (seq, batch, input).
    x: Vec<f64>,
    /// (dirs, gates · hidden, input).
    w: Vec<f64>,
    /// (dirs, gates · hidden, hidden).
    rw: Vec<f64>,
    /// (dirs, 2 · gates · hidden); zeros when absent.
    b: Vec<f64>,
    /// Per batch entry.
    lens: Vec<usize>,
    /// (dirs, batch, hidden); zeros when absent.
    h0: Vec<f64>,
    c0: Vec<f64>,
    /// (dirs, 3 · hidden); zeros when absent.
    p: Vec<f64>,
}

/// Y (seq, dirs, batch, hidden), Y_h and Y_c (dirs, batch, hidden), in the layout-0 order.
struct Outputs {
    y: Vec<f64>,
    h: Vec<f64>,
    c: Vec<f64>,
}

impl<'a> Problem<'a> {
    fn new(r: &'a Recurrent, inputs: &[Option<&Tensor>]) -> Result<Self, OpError> {
        let name = r.cell.name();
        let x = required(inputs, 0, "X")?;
        let w = required(inputs, 1, "W")?;
        let rw = required(inputs, 2, "R")?;
        expect_float(x, 0, "X")?;
        let dtype = x.dtype();
        let shape_error = |index: usize, input: &str, t: &Tensor, want: String| {
            OpError::Shape(format!(
                "{name}: input {index} ({input}) has shape {}; it needs {want}",
                t.shape()
            ))
        };
        let (seq, batch, input) = match *x.dims() {
            [a, b, i] if r.batch_major => (b, a, i),
            [s, b, i] => (s, b, i),
            _ => {
                return Err(shape_error(
                    0,
                    "X",
                    x,
                    "rank 3 (seq, batch, input), or (batch, seq, input) with layout 1".into(),
                ))
            }
        };
        let dirs = r.direction.count();
        let gates = r.cell.gates();
        let hidden = match (r.hidden_size, rw.dims()) {
            (Some(h), _) => h,
            (None, [_, _, h]) => *h,
            (None, _) => return Err(shape_error(2, "R", rw, "rank 3".into())),
        };
        let expect = |index: usize, input: &'static str, t: &Tensor, want: &[usize]| {
            if t.dtype() != x.dtype() {
                return Err(OpError::DType {
                    index,
                    name: input,
                    expected: x.dtype().name().into(),
                    actual: t.dtype(),
                });
            }
            if t.dims() == want {
                Ok(t.to_f64_vec())
            } else {
                Err(shape_error(
                    index,
                    input,
                    t,
                    format!("{}", Shape::new(want)),
                ))
            }
        };
        // hidden_size comes from the model: a product that overflows is a bad model, not a
        // wrapped shape that might happen to match W.
        let rows = gates
            .checked_mul(hidden)
            .filter(|r| r.checked_mul(2 * dirs).is_some())
            .ok_or_else(|| {
                OpError::Shape(format!(
                    "{}: hidden_size {hidden} is too large ({gates} gates of {hidden} rows \
                     overflow)",
                    r.cell.name()
                ))
            })?;
        let w = expect(1, "W", w, &[dirs, rows, input])?;
        let rw = expect(2, "R", rw, &[dirs, rows, hidden])?;
        let b = match optional(inputs, 3) {
            Some(t) => expect(3, "B", t, &[dirs, 2 * rows])?,
            None => vec![0.0; dirs * 2 * rows],
        };
        let lens = match optional(inputs, 4) {
            Some(t) => {
                if t.dtype() != DType::I32 {
                    return Err(OpError::DType {
                        index: 4,
                        name: "sequence_lens",
                        expected: DType::I32.name().into(),
                        actual: t.dtype(),
                    });
                }
                if t.dims() != [batch] {
                    return Err(shape_error(4, "sequence_lens", t, format!("[{batch}]")));
                }
                let values = t.to_i128_vec().unwrap_or_default();
                values
                    .iter()
                    .map(|&l| {
                        usize::try_from(l)
                            .ok()
                            .filter(|&l| l <= seq)
                            .ok_or_else(|| {
                                OpError::Shape(format!(
                                    "{name}: sequence_lens holds {l}; each length must be 0 to \
                                 the sequence length {seq}"
                                ))
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
            None => vec![seq; batch],
        };
        let state_dims = if r.batch_major {
            [batch, dirs, hidden]
        } else {
            [dirs, batch, hidden]
        };
        let state = |index: usize, input: &'static str| -> Result<Vec<f64>, OpError> {
            match optional(inputs, index) {
                Some(t) => {
                    let v = expect(index, input, t, &state_dims)?;
                    Ok(if r.batch_major {
                        permute(&v, [1, batch, dirs, hidden], [0, 2, 1, 3])
                    } else {
                        v
                    })
                }
                None => Ok(vec![0.0; dirs * batch * hidden]),
            }
        };
        let h0 = state(5, "initial_h")?;
        let (c0, p) = if r.cell == RecurrentCell::Lstm {
            let p = match optional(inputs, 7) {
                Some(t) => expect(7, "P", t, &[dirs, 3 * hidden])?,
                None => vec![0.0; dirs * 3 * hidden],
            };
            (state(6, "initial_c")?, p)
        } else {
            (Vec::new(), Vec::new())
        };
        let functions = r.cell.functions();
        if r.activations.len() != functions * dirs {
            return Err(OpError::Attribute {
                name: "activations",
                detail: format!(
                    "{name} with {} direction(s) takes {} activations, the node has {}",
                    dirs,
                    functions * dirs,
                    r.activations.len()
                ),
            });
        }
        let xv = x.to_f64_vec();
        let x = if r.batch_major {
            permute(&xv, [1, batch, seq, input], [0, 2, 1, 3])
        } else {
            xv
        };
        Ok(Problem {
            r,
            dtype,
            seq,
            batch,
            input,
            dirs,
            hidden,
            x,
            w,
            rw,
            b,
            lens,
            h0,
            c0,
            p,
        })
    }

    fn run(&self) -> Outputs {
        let (seq, batch, dirs, hidden) = (self.seq, self.batch, self.dirs, self.hidden);
        let mut out = Outputs {
            y: vec![0.0; seq * dirs * batch * hidden],
            h: vec![0.0; dirs * batch * hidden],
            c: vec![0.0; dirs * batch * hidden],
        };
        for d in 0..dirs {
            let reverse = match self.r.direction {
                concord_core::op::RnnDirection::Forward => false,
                concord_core::op::RnnDirection::Reverse => true,
                concord_core::op::RnnDirection::Bidirectional => d == 1,
            };
            let functions = self.r.cell.functions();
            let acts = &self.r.activations[d * functions..(d + 1) * functions];
            for n in 0..batch {
                let state = (d * batch + n) * hidden;
                let mut h = self.h0[state..state + hidden].to_vec();
                let mut c = if self.r.cell == RecurrentCell::Lstm {
                    self.c0[state..state + hidden].to_vec()
                } else {
                    Vec::new()
                };
                let len = self.lens[n];
                for k in 0..len {
                    let t = if reverse { len - 1 - k } else { k };
                    let xt = &self.x[(t * batch + n) * self.input..][..self.input];
                    match self.r.cell {
                        RecurrentCell::Lstm => self.lstm_step(d, acts, xt, &mut h, &mut c),
                        RecurrentCell::Gru => h = self.gru_step(d, acts, xt, &h),
                        RecurrentCell::Rnn => h = self.rnn_step(d, acts, xt, &h),
                    }
                    let at = ((t * dirs + d) * batch + n) * hidden;
                    out.y[at..at + hidden].copy_from_slice(&h);
                }
                out.h[state..state + hidden].copy_from_slice(&h);
                if self.r.cell == RecurrentCell::Lstm {
                    out.c[state..state + hidden].copy_from_slice(&c);
                }
            }
        }
        out
    }

    /// Row `row` of gate block `gate` of W times x, plus R's times h, plus both biases.
    fn pre(&self, d: usize, gate: usize, row: usize, xt: &[f64], h: &[f64]) -> f64 {
        let gh = self.r.cell.gates() * self.hidden;
        let j = gate * self.hidden + row;
        self.w_dot(d, j, xt)
            + self.r_dot(d, j, h)
            + self.b[d * 2 * gh + j]
            + self.b[d * 2 * gh + gh + j]
    }

    fn w_dot(&self, d: usize, j: usize, xt: &[f64]) -> f64 {
        let gh = self.r.cell.gates() * self.hidden;
        let w = &self.w[(d * gh + j) * self.input..][..self.input];
        w.iter().zip(xt).map(|(a, b)| a * b).sum()
    }

    fn r_dot(&self, d: usize, j: usize, h: &[f64]) -> f64 {
        let gh = self.r.cell.gates() * self.hidden;
        let rw = &self.rw[(d * gh + j) * self.hidden..][..self.hidden];
        rw.iter().zip(h).map(|(a, b)| a * b).sum()
    }

    fn clip(&self, v: f64) -> f64 {
        match self.r.clip {
            Some(c) => v.clamp(-f64::from(c), f64::from(c)),
            None => v,
        }
    }

    /// One LSTM step: gates i, o, f, c (blocks 0 to 3), peepholes i, o, f.
    fn lstm_step(
        &self,
        d: usize,
        acts: &[RnnActivation],
        xt: &[f64],
        h: &mut [f64],
        c: &mut [f64],
    ) {
        let hs = self.hidden;
        let p = &self.p[d * 3 * hs..][..3 * hs];
        let mut next_h = vec![0.0; hs];
        for j in 0..hs {
            let i = activate(acts[0], self.clip(self.pre(d, 0, j, xt, h) + p[j] * c[j]));
            let f = if self.r.input_forget {
                1.0 - i
            } else {
                activate(
                    acts[0],
                    self.clip(self.pre(d, 2, j, xt, h) + p[2 * hs + j] * c[j]),
                )
            };
            let cand = activate(acts[1], self.clip(self.pre(d, 3, j, xt, h)));
            let cell = f * c[j] + i * cand;
            let o = activate(
                acts[0],
                self.clip(self.pre(d, 1, j, xt, h) + p[hs + j] * cell),
            );
            next_h[j] = o * activate(acts[2], cell);
            c[j] = cell;
        }
        h.copy_from_slice(&next_h);
    }

    /// One GRU step: gates z, r, h (blocks 0 to 2).
    fn gru_step(&self, d: usize, acts: &[RnnActivation], xt: &[f64], h: &[f64]) -> Vec<f64> {
        let hs = self.hidden;
        let gh = 3 * hs;
        let bias = |j: usize| self.b[d * 2 * gh + j];
        let r_bias = |j: usize| self.b[d * 2 * gh + gh + j];
        let reset: Vec<f64> = (0..hs)
            .map(|j| activate(acts[0], self.clip(self.pre(d, 1, j, xt, h))))
            .collect();
        let scaled: Vec<f64> = reset.iter().zip(h).map(|(r, h)| r * h).collect();
        (0..hs)
            .map(|j| {
                let z = activate(acts[0], self.clip(self.pre(d, 0, j, xt, h)));
                let k = 2 * hs + j;
                let recurrent = if self.r.linear_before_reset {
                    reset[j] * (self.r_dot(d, k, h) + r_bias(k))
                } else {
                    self.r_dot(d, k, &scaled) + r_bias(k)
                };
                let cand = activate(
                    acts[1],
                    self.clip(self.w_dot(d, k, xt) + bias(k) + recurrent),
                );
                (1.0 - z) * cand + z * h[j]
            })
            .collect()
    }

    fn rnn_step(&self, d: usize, acts: &[RnnActivation], xt: &[f64], h: &[f64]) -> Vec<f64> {
        (0..self.hidden)
            .map(|j| activate(acts[0], self.clip(self.pre(d, 0, j, xt, h))))
            .collect()
    }
}

/// Applies one activation function, in f64.
fn activate(a: RnnActivation, x: f64) -> f64 {
    let (alpha, beta) = (f64::from(a.alpha), f64::from(a.beta));
    match a.kind {
        RnnActivationKind::Relu => x.max(0.0),
        RnnActivationKind::Tanh => x.tanh(),
        RnnActivationKind::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        RnnActivationKind::Affine => alpha * x + beta,
        RnnActivationKind::LeakyRelu => {
            if x >= 0.0 {
                x
            } else {
                alpha * x
            }
        }
        RnnActivationKind::ThresholdedRelu => {
            if x > alpha {
                x
            } else {
                0.0
            }
        }
        RnnActivationKind::ScaledTanh => alpha * (beta * x).tanh(),
        RnnActivationKind::HardSigmoid => (alpha * x + beta).clamp(0.0, 1.0),
        RnnActivationKind::Elu => {
            if x >= 0.0 {
                x
            } else {
                alpha * x.exp_m1()
            }
        }
        RnnActivationKind::Softsign => x / (1.0 + x.abs()),
        // log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|), the same operations
        // as x + log(1 + e^-x) for positive x and log(1 + e^x) otherwise. Written without a
        // branch on the sign: at x = 0 both branches give log 2, so a test of `x > 0` and one
        // of `x >= 0` would be one function, which no test can tell apart.
        RnnActivationKind::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
    }
}

/// Permutes a row-major 4-D array of extents `dims` so that output axis k is input axis
/// `order[k]`.
fn permute(values: &[f64], dims: [usize; 4], order: [usize; 4]) -> Vec<f64> {
    let out_dims = order.map(|a| dims[a]);
    let strides = [dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1];
    let mut out = Vec::with_capacity(values.len());
    for i0 in 0..out_dims[0] {
        for i1 in 0..out_dims[1] {
            for i2 in 0..out_dims[2] {
                for i3 in 0..out_dims[3] {
                    let idx = [i0, i1, i2, i3];
                    let mut at = 0;
                    for k in 0..4 {
                        at += idx[k] * strides[order[k]];
                    }
                    out.push(values[at]);
                }
            }
        }
    }
    out
}
