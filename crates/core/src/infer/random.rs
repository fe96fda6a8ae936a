//! Inference for the Random family: RandomNormal and RandomUniform (the shape an attribute),
//! RandomNormalLike and RandomUniformLike (the input's shape), Multinomial and Bernoulli.
//! Only types and shapes are inferred here: the values are drawn by the reference.

use super::{expect_dtype, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::{Op, Random};
use crate::shape::{format_sym, Dim};

/// The one output of `op`; [`super::infer_op`] checks the node declares one.
pub(super) fn infer(op: &Op, inputs: &[Option<ValueFact>]) -> Result<Vec<OutputFact>, OpError> {
    let fact = match op {
        Op::Random(r) => random(r, inputs)?,
        Op::Multinomial {
            sample_size, dtype, ..
        } => {
            let x = required(inputs, 0, "input")?;
            expect_dtype(&x, 0, "input", &DType::FLOATS)?;
            let [batch, _classes] = x.shape else {
                return Err(OpError::Shape(format!(
                    "Multinomial needs input (batch, classes), got {}",
                    format_sym(x.shape)
                )));
            };
            expect_output(op, *dtype, &[DType::I32, DType::I64])?;
            OutputFact::new(*dtype, vec![batch.clone(), Dim::Fixed(*sample_size)])
        }
        Op::Bernoulli { dtype, .. } => {
            let x = required(inputs, 0, "input")?;
            expect_dtype(&x, 0, "input", &DType::FLOATS)?;
            OutputFact::new(dtype.unwrap_or(x.dtype), x.shape.to_vec())
        }
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a random op",
                other.name()
            )))
        }
    };
    Ok(vec![fact])
}

fn random(r: &Random, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let op = r.name();
    let (dtype, shape) = match &r.shape {
        Some(shape) => (
            r.dtype.unwrap_or(DType::F32),
            shape.iter().map(|&d| Dim::Fixed(d)).collect(),
        ),
        None => {
            let x = required(inputs, 0, "input")?;
            (r.dtype.unwrap_or(x.dtype), x.shape.to_vec())
        }
    };
    if !dtype.is_float() {
        return Err(OpError::Attribute {
            name: "dtype",
            detail: format!(
                "{op} draws floats, but its output would be {dtype} (the input's when `dtype` \
                 is absent): give `dtype` as a float type"
            ),
        });
    }
    Ok(OutputFact::new(dtype, shape))
}

/// Checks an op's output dtype attribute against the types ONNX allows for it.
fn expect_output(op: &Op, dtype: DType, allowed: &[DType]) -> Result<(), OpError> {
    if allowed.contains(&dtype) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
    Err(OpError::Attribute {
        name: "dtype",
        detail: format!("{} outputs {}, not {dtype}", op.name(), names.join(" or ")),
    })
}
