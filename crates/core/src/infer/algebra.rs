//! Inference for the LinearAlgebra family: Einsum (through the one equation parser,
//! [`crate::einsum::EinsumPlan`]) and Det.

use super::{expect_dtype, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::einsum::EinsumPlan;
use crate::error::OpError;
use crate::op::Op;
use crate::shape::{format_sym, Dim};

/// The types Einsum multiplies: every numeric type ONNX defines it on.
const EINSUM_TYPES: [DType; 12] = [
    DType::F64,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I64,
    DType::I32,
    DType::I16,
    DType::I8,
    DType::U64,
    DType::U32,
    DType::U16,
    DType::U8,
];

/// The one output of `op`; [`super::infer_op`] checks the node declares one.
pub(super) fn infer(op: &Op, inputs: &[Option<ValueFact>]) -> Result<Vec<OutputFact>, OpError> {
    let fact = match op {
        Op::Einsum { equation } => einsum(equation, inputs)?,
        Op::Det => {
            let x = required(inputs, 0, "X")?;
            expect_dtype(&x, 0, "X", &DType::FLOATS)?;
            let rank = x.shape.len();
            if rank < 2 {
                return Err(OpError::Shape(format!(
                    "Det needs X of rank 2 or more (…, M, M), got {}",
                    format_sym(x.shape)
                )));
            }
            if let (Dim::Fixed(m), Dim::Fixed(n)) = (&x.shape[rank - 2], &x.shape[rank - 1]) {
                if m != n {
                    return Err(OpError::Shape(format!(
                        "Det needs square matrices (…, M, M), got X {}",
                        format_sym(x.shape)
                    )));
                }
            }
            OutputFact::new(x.dtype, x.shape[..rank - 2].to_vec())
        }
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not linear algebra",
                other.name()
            )))
        }
    };
    Ok(vec![fact])
}

fn einsum(equation: &str, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    if inputs.is_empty() {
        return Err(OpError::MissingInput {
            index: 0,
            name: "Inputs",
        });
    }
    let mut facts = Vec::with_capacity(inputs.len());
    for index in 0..inputs.len() {
        let f = required(inputs, index, "Inputs")?;
        expect_dtype(&f, index, "Inputs", &EINSUM_TYPES)?;
        if f.dtype != facts.first().map_or(f.dtype, |g: &ValueFact| g.dtype) {
            return Err(OpError::DType {
                index,
                name: "Inputs",
                expected: format!("{} (input 0's)", facts[0].dtype),
                actual: f.dtype,
            });
        }
        facts.push(f);
    }
    let ranks: Vec<usize> = facts.iter().map(|f| f.shape.len()).collect();
    let plan = EinsumPlan::new(equation, &ranks)?;
    let shapes: Vec<&[Dim]> = facts.iter().map(|f| f.shape).collect();
    let extents = plan.extents(&shapes, Dim::Fixed(1), merge, format_sym)?;
    let dims = plan.output.iter().map(|&l| extents[l].clone()).collect();
    Ok(OutputFact::new(facts[0].dtype, dims))
}

/// Two extents of one Einsum label: equal, or one of them 1 (which stretches). An unknown
/// extent against a known one other than 1 takes the known one.
fn merge(a: &Dim, b: &Dim) -> Option<Dim> {
    match (a, b) {
        (Dim::Fixed(1), other) | (other, Dim::Fixed(1)) => Some(other.clone()),
        (Dim::Fixed(x), Dim::Fixed(y)) => (x == y).then(|| a.clone()),
        (Dim::Fixed(_), _) => Some(a.clone()),
        (_, Dim::Fixed(_)) => Some(b.clone()),
        (Dim::Named(x), Dim::Named(y)) if x == y => Some(a.clone()),
        _ => Some(Dim::Unknown),
    }
}
