//! Inference for the Signal family: the window functions (HannWindow, HammingWindow,
//! BlackmanWindow), DFT, STFT and MelWeightMatrix.

use super::{expect_dtype, optional, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::Op;
use crate::shape::{format_sym, Dim};

const SIZES: [DType; 2] = [DType::I64, DType::I32];

/// The one output of `op`; [`super::infer_op`] checks the node declares one.
pub(super) fn infer(op: &Op, inputs: &[Option<ValueFact>]) -> Result<Vec<OutputFact>, OpError> {
    let fact = match op {
        Op::Window { dtype, .. } => {
            let size = required(inputs, 0, "size")?;
            expect_dtype(&size, 0, "size", &SIZES)?;
            let len = match scalar(&size) {
                Some(n) if n < 0 => {
                    return Err(OpError::Shape(format!(
                        "{} needs a size of 0 or more, got {n}",
                        op.name()
                    )))
                }
                Some(n) => Dim::Fixed(n as usize),
                None => Dim::Unknown,
            };
            OutputFact::new(*dtype, vec![len])
        }
        Op::Dft {
            axis,
            onesided,
            inverse,
        } => dft(*axis, *onesided, *inverse, inputs)?,
        Op::Stft { onesided } => stft(*onesided, inputs)?,
        Op::MelWeightMatrix { dtype } => mel_weight_matrix(*dtype, inputs)?,
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not signal processing",
                other.name()
            )))
        }
    };
    Ok(vec![fact])
}

/// The value of a constant one-element integer input.
fn scalar(fact: &ValueFact) -> Option<i64> {
    let v = fact.value?.to_i64_vec()?;
    match v.as_slice() {
        [n] => Some(*n),
        _ => None,
    }
}

/// DFT's signal axis for an input of rank `rank` (the trailing real/imaginary axis
/// excluded): `axis` may count from the end, where -1 is that trailing axis and so not
/// allowed.
fn dft_axis(axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    let resolved = if axis < 0 { axis + r } else { axis };
    if rank < 2 || resolved < 0 || resolved > r - 2 {
        return Err(OpError::Shape(format!(
            "DFT axis {axis} is out of range for an input of rank {rank} (the last axis holds \
             the real and imaginary parts)"
        )));
    }
    Ok(resolved as usize)
}

/// DFT's output: the transformed axis holds dft_length bins (N/2 + 1 when one-sided), and
/// the last axis the (real, imaginary) pair; the one-sided inverse (IRFFT) gives a real
/// signal of dft_length samples (by default 2 · (N - 1)) with a last axis of 1.
fn dft(
    axis: Option<i64>,
    onesided: bool,
    inverse: bool,
    inputs: &[Option<ValueFact>],
) -> Result<OutputFact, OpError> {
    let irfft = onesided && inverse;
    let x = required(inputs, 0, "input")?;
    expect_dtype(&x, 0, "input", &DType::FLOATS)?;
    let rank = x.shape.len();
    match x.shape.last() {
        Some(Dim::Fixed(1 | 2)) | Some(Dim::Named(_) | Dim::Unknown) if rank >= 2 => {}
        _ => {
            return Err(OpError::Shape(format!(
                "DFT needs input (…, N, 1) real or (…, N, 2) complex, got {}",
                format_sym(x.shape)
            )))
        }
    }
    let length = match optional(inputs, 1) {
        Some(l) => {
            expect_dtype(&l, 1, "dft_length", &SIZES)?;
            match scalar(&l) {
                Some(n) if n < 1 => {
                    return Err(OpError::Shape(format!(
                        "DFT needs a dft_length of 1 or more, got {n}"
                    )))
                }
                Some(n) => Some(Dim::Fixed(n as usize)),
                None => Some(Dim::Unknown),
            }
        }
        None => None,
    };
    let axis = match axis {
        Some(a) => Some(a),
        None => match optional(inputs, 2) {
            Some(a) => {
                expect_dtype(&a, 2, "axis", &SIZES)?;
                scalar(&a)
            }
            None => Some(-2),
        },
    };
    let Some(axis) = axis else {
        // The axis is computed at run time: only the rank and the complex pair are known.
        let mut shape = vec![Dim::Unknown; rank];
        shape[rank - 1] = Dim::Fixed(if irfft { 1 } else { 2 });
        return Ok(OutputFact::new(x.dtype, shape));
    };
    let axis = dft_axis(axis, rank)?;
    let mut shape = x.shape.to_vec();
    if irfft {
        shape[axis] = match (length, &shape[axis]) {
            (Some(n), _) => n,
            (None, Dim::Fixed(n)) if *n >= 2 => Dim::Fixed(2 * (n - 1)),
            (None, Dim::Fixed(n)) => {
                return Err(OpError::Shape(format!(
                    "an inverse one-sided DFT (IRFFT) of {n} bins needs dft_length: its \
                     default 2 · (bins - 1) is 0"
                )))
            }
            (None, _) => Dim::Unknown,
        };
        shape[rank - 1] = Dim::Fixed(1);
        return Ok(OutputFact::new(x.dtype, shape));
    }
    let n = length.unwrap_or_else(|| shape[axis].clone());
    shape[axis] = match (onesided, n) {
        (true, Dim::Fixed(n)) => Dim::Fixed(n / 2 + 1),
        (true, _) => Dim::Unknown,
        (false, n) => n,
    };
    shape[rank - 1] = Dim::Fixed(2);
    Ok(OutputFact::new(x.dtype, shape))
}

fn stft(onesided: bool, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "signal")?;
    expect_dtype(&x, 0, "signal", &DType::FLOATS)?;
    if x.shape.len() != 3 {
        return Err(OpError::Shape(format!(
            "STFT needs signal (batch, L, 1) or (batch, L, 2), got {}",
            format_sym(x.shape)
        )));
    }
    let step = required(inputs, 1, "frame_step")?;
    expect_dtype(&step, 1, "frame_step", &SIZES)?;
    let window = optional(inputs, 2);
    if let Some(w) = &window {
        expect_dtype(w, 2, "window", &[x.dtype])?;
    }
    let length = optional(inputs, 3);
    if let Some(l) = &length {
        expect_dtype(l, 3, "frame_length", &SIZES)?;
    }
    let frame = match (&window, &length) {
        (_, Some(l)) => scalar(l).map(|n| n.max(0) as usize),
        (Some(w), None) => match w.shape {
            [Dim::Fixed(n)] => Some(*n),
            _ => None,
        },
        (None, None) => {
            return Err(OpError::MissingInput {
                index: 3,
                name: "frame_length (or window)",
            })
        }
    };
    let frames = match (&x.shape[1], frame, scalar(&step)) {
        (Dim::Fixed(l), Some(f), Some(s)) if s > 0 && f >= 1 && f <= *l => {
            Dim::Fixed((l - f) / s as usize + 1)
        }
        _ => Dim::Unknown,
    };
    let bins = match frame {
        Some(f) if onesided => Dim::Fixed(f / 2 + 1),
        Some(f) => Dim::Fixed(f),
        None => Dim::Unknown,
    };
    Ok(OutputFact::new(
        x.dtype,
        vec![x.shape[0].clone(), frames, bins, Dim::Fixed(2)],
    ))
}

/// MelWeightMatrix: (dft_length/2 + 1, num_mel_bins), each extent known when its operand
/// is a constant.
fn mel_weight_matrix(dtype: DType, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    if dtype == DType::Bool {
        return Err(OpError::Attribute {
            name: "output_datatype",
            detail: "MelWeightMatrix outputs a numeric type, not bool".to_string(),
        });
    }
    let mut extents = [Dim::Unknown, Dim::Unknown];
    for (index, name) in [(0, "num_mel_bins"), (1, "dft_length"), (2, "sample_rate")] {
        let fact = required(inputs, index, name)?;
        expect_dtype(&fact, index, name, &SIZES)?;
        match scalar(&fact) {
            Some(n) if n < 1 => {
                return Err(OpError::Shape(format!(
                    "MelWeightMatrix needs a {name} of 1 or more, got {n}"
                )))
            }
            Some(n) if index == 0 => extents[1] = Dim::Fixed(n as usize),
            Some(n) if index == 1 => extents[0] = Dim::Fixed(n as usize / 2 + 1),
            _ => {}
        }
    }
    let lower = required(inputs, 3, "lower_edge_hertz")?;
    expect_dtype(&lower, 3, "lower_edge_hertz", &DType::FLOATS)?;
    let upper = required(inputs, 4, "upper_edge_hertz")?;
    expect_dtype(&upper, 4, "upper_edge_hertz", &DType::FLOATS)?;
    Ok(OutputFact::new(dtype, extents.to_vec()))
}
