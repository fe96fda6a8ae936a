//! Shape and dtype inference for LSTM, GRU and RNN (opsets 7 and 14). With `layout = 0`
//! X is (seq, batch, input), Y is (seq, num_directions, batch, hidden) and Y_h and Y_c are
//! (num_directions, batch, hidden); `layout = 1` puts batch first: X (batch, seq, input),
//! Y (batch, seq, num_directions, hidden), Y_h and Y_c (batch, num_directions, hidden).
//! Extents known on both sides must agree; symbolic ones pass through.

use super::{expect_dtype, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::{Op, Recurrent, RecurrentCell};
use crate::shape::{format_sym, Dim};

pub(super) fn infer(
    op: &Op,
    inputs: &[Option<ValueFact>],
    num_outputs: usize,
) -> Result<Vec<OutputFact>, OpError> {
    let Op::Recurrent(r) = op else {
        return Err(OpError::Unsupported(format!(
            "{} is not a recurrent op",
            op.name()
        )));
    };
    let name = r.cell.name();
    if num_outputs > r.cell.max_outputs() {
        return Err(OpError::Unsupported(format!(
            "{name} has at most {} outputs, the node declares {num_outputs}",
            r.cell.max_outputs()
        )));
    }
    let dims = RecurrentDims::infer(r, inputs)?;
    let (seq, batch, dirs, hidden) = (dims.seq, dims.batch, dims.directions, dims.hidden);
    let (y, state) = if r.batch_major {
        (
            vec![batch.clone(), seq, dirs.clone(), hidden.clone()],
            vec![batch, dirs, hidden],
        )
    } else {
        (
            vec![seq, dirs.clone(), batch.clone(), hidden.clone()],
            vec![dirs, batch, hidden],
        )
    };
    let dtype = dims.dtype;
    Ok((0..num_outputs)
        .map(|i| {
            if i == 0 {
                OutputFact::new(dtype, y.clone())
            } else {
                OutputFact::new(dtype, state.clone())
            }
        })
        .collect())
}

/// The extents a recurrent node's inputs imply, checked against each other.
struct RecurrentDims {
    dtype: DType,
    seq: Dim,
    batch: Dim,
    directions: Dim,
    hidden: Dim,
}

impl RecurrentDims {
    fn infer(r: &Recurrent, inputs: &[Option<ValueFact>]) -> Result<Self, OpError> {
        let name = r.cell.name();
        let x = required(inputs, 0, "X")?;
        let w = required(inputs, 1, "W")?;
        let rr = required(inputs, 2, "R")?;
        expect_dtype(&x, 0, "X", &DType::FLOATS)?;
        let rank = |f: &ValueFact, index: usize, input: &str, want: usize| {
            if f.shape.len() == want {
                Ok(())
            } else {
                Err(OpError::Shape(format!(
                    "{name}: input {index} ({input}) has shape {}; it needs rank {want}",
                    format_sym(f.shape)
                )))
            }
        };
        rank(&x, 0, "X", 3)?;
        rank(&w, 1, "W", 3)?;
        rank(&rr, 2, "R", 3)?;
        let (seq, batch) = if r.batch_major {
            (x.shape[1].clone(), x.shape[0].clone())
        } else {
            (x.shape[0].clone(), x.shape[1].clone())
        };
        let directions = Dim::Fixed(r.direction.count());
        let hidden = match r.hidden_size {
            Some(h) => Dim::Fixed(h),
            None => rr.shape[2].clone(),
        };
        let gates = r.cell.gates();
        let rows = times(&hidden, gates)?;
        let same_dtype = |f: &ValueFact, index: usize, input: &'static str| {
            if f.dtype == x.dtype {
                Ok(())
            } else {
                Err(OpError::DType {
                    index,
                    name: input,
                    expected: x.dtype.name().into(),
                    actual: f.dtype,
                })
            }
        };
        same_dtype(&w, 1, "W")?;
        same_dtype(&rr, 2, "R")?;
        check_shape(
            name,
            &w,
            1,
            "W",
            &[directions.clone(), rows.clone(), x.shape[2].clone()],
        )?;
        check_shape(
            name,
            &rr,
            2,
            "R",
            &[directions.clone(), rows, hidden.clone()],
        )?;
        if let Some(b) = optional(inputs, 3) {
            same_dtype(&b, 3, "B")?;
            check_shape(
                name,
                &b,
                3,
                "B",
                &[directions.clone(), times(&hidden, 2 * gates)?],
            )?;
        }
        if let Some(lens) = optional(inputs, 4) {
            expect_dtype(&lens, 4, "sequence_lens", &[DType::I32])?;
            check_shape(
                name,
                &lens,
                4,
                "sequence_lens",
                std::slice::from_ref(&batch),
            )?;
        }
        let state = if r.batch_major {
            [batch.clone(), directions.clone(), hidden.clone()]
        } else {
            [directions.clone(), batch.clone(), hidden.clone()]
        };
        let state_inputs: &[(usize, &'static str)] = if r.cell == RecurrentCell::Lstm {
            &[(5, "initial_h"), (6, "initial_c")]
        } else {
            &[(5, "initial_h")]
        };
        for &(index, input) in state_inputs {
            if let Some(h) = optional(inputs, index) {
                same_dtype(&h, index, input)?;
                check_shape(name, &h, index, input, &state)?;
            }
        }
        if r.cell == RecurrentCell::Lstm {
            if let Some(p) = optional(inputs, 7) {
                same_dtype(&p, 7, "P")?;
                check_shape(name, &p, 7, "P", &[directions.clone(), times(&hidden, 3)?])?;
            }
        } else if inputs.len() > 6 {
            return Err(OpError::Shape(format!(
                "{name} has 6 inputs, the node gives {}",
                inputs.len()
            )));
        }
        Ok(RecurrentDims {
            dtype: x.dtype,
            seq,
            batch,
            directions,
            hidden,
        })
    }
}

/// `d · k` where `d` is known, else unknown; a product past usize (a `hidden_size` from
/// the model may be anything) is an error.
fn times(d: &Dim, k: usize) -> Result<Dim, OpError> {
    match d {
        Dim::Fixed(n) => n.checked_mul(k).map(Dim::Fixed).ok_or_else(|| {
            OpError::Shape(format!(
                "a hidden size of {n} times {k} gates overflows a 64-bit extent"
            ))
        }),
        _ => Ok(Dim::Unknown),
    }
}

/// Checks an input's shape against the one the other inputs imply, where both are known.
fn check_shape(
    name: &str,
    f: &ValueFact,
    index: usize,
    input: &str,
    want: &[Dim],
) -> Result<(), OpError> {
    let agrees = f.shape.len() == want.len()
        && f.shape.iter().zip(want).all(|(a, b)| match (a, b) {
            (Dim::Fixed(a), Dim::Fixed(b)) => a == b,
            _ => true,
        });
    if agrees {
        Ok(())
    } else {
        Err(OpError::Shape(format!(
            "{name}: input {index} ({input}) has shape {}; the other inputs and the \
             attributes imply {}",
            format_sym(f.shape),
            format_sym(want)
        )))
    }
}
