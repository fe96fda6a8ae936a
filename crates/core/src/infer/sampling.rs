//! Inference for the Sampling family: GridSample and AffineGrid.

use super::{expect_dtype, required, OutputFact, ValueFact};
use crate::dtype::DType;
use crate::error::OpError;
use crate::op::Op;
use crate::shape::{format_sym, Dim, SymShape};

/// The one output of `op`; [`super::infer_op`] checks the node declares one.
pub(super) fn infer(op: &Op, inputs: &[Option<ValueFact>]) -> Result<Vec<OutputFact>, OpError> {
    let fact = match op {
        Op::GridSample { .. } => grid_sample(inputs)?,
        Op::AffineGrid { .. } => affine_grid(inputs)?,
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a sampling op",
                other.name()
            )))
        }
    };
    Ok(vec![fact])
}

/// The one extent two facts must share: fixed ones must agree.
fn agree(a: &Dim, b: &Dim, what: impl FnOnce() -> String) -> Result<Dim, OpError> {
    match (a, b) {
        (Dim::Fixed(x), Dim::Fixed(y)) if x != y => Err(OpError::Shape(what())),
        (Dim::Fixed(_), _) => Ok(a.clone()),
        (_, Dim::Fixed(_)) => Ok(b.clone()),
        _ => Ok(a.clone()),
    }
}

/// GridSample: Y is (N, C, H1…Hr) for X (N, C, D1…Dr) and grid (N, H1…Hr, r).
fn grid_sample(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let x = required(inputs, 0, "X")?;
    let grid = required(inputs, 1, "grid")?;
    expect_dtype(&x, 0, "X", &DType::FLOATS)?;
    expect_dtype(&grid, 1, "grid", &DType::FLOATS)?;
    let bad = || {
        format!(
            "GridSample needs X (N, C, D1…Dr) and grid (N, H1…Hr, r) with r ≥ 1, got X {} and \
             grid {}",
            format_sym(x.shape),
            format_sym(grid.shape)
        )
    };
    let rank = x.shape.len();
    if rank < 3 || grid.shape.len() != rank {
        return Err(OpError::Shape(bad()));
    }
    if let Dim::Fixed(r) = grid.shape[rank - 1] {
        if r != rank - 2 {
            return Err(OpError::Shape(bad()));
        }
    }
    let mut out: SymShape = vec![agree(&x.shape[0], &grid.shape[0], bad)?, x.shape[1].clone()];
    out.extend(grid.shape[1..rank - 1].iter().cloned());
    Ok(OutputFact::new(x.dtype, out))
}

/// AffineGrid: grid (N, H, W, 2) or (N, D, H, W, 3) from theta (N, r, r+1) and size
/// [N, C, spatial…]. The spatial extents come from size's values: known when it is a
/// constant, unknown (of known rank) when it is a runtime input.
fn affine_grid(inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    let theta = required(inputs, 0, "theta")?;
    let size = required(inputs, 1, "size")?;
    expect_dtype(&theta, 0, "theta", &DType::FLOATS)?;
    expect_dtype(&size, 1, "size", &[DType::I64])?;
    let bad = || {
        format!(
            "AffineGrid needs theta (N, 2, 3) with size [N, C, H, W], or theta (N, 3, 4) with \
             size [N, C, D, H, W], got theta {} and size {}",
            format_sym(theta.shape),
            format_sym(size.shape)
        )
    };
    if theta.shape.len() != 3 || size.shape.len() != 1 {
        return Err(OpError::Shape(bad()));
    }
    // The spatial rank r, from size's length or else theta's extents.
    let r = match (&size.shape[0], &theta.shape[1], &theta.shape[2]) {
        (Dim::Fixed(n), _, _) => n.checked_sub(2).ok_or_else(|| OpError::Shape(bad()))?,
        (_, Dim::Fixed(r), _) => *r,
        (_, _, Dim::Fixed(c)) => c.checked_sub(1).ok_or_else(|| OpError::Shape(bad()))?,
        _ => {
            return Err(OpError::NotConstant {
                index: 1,
                name: "size",
            })
        }
    };
    if !(r == 2 || r == 3) {
        return Err(OpError::Shape(bad()));
    }
    for (d, want) in [(&theta.shape[1], r), (&theta.shape[2], r + 1)] {
        if matches!(d, Dim::Fixed(e) if *e != want) {
            return Err(OpError::Shape(bad()));
        }
    }
    let values = size.value.and_then(|t| t.to_i64_vec());
    let mut out: SymShape = Vec::with_capacity(r + 2);
    match values {
        Some(v) => {
            if v.len() != r + 2 || v.iter().any(|&e| e < 0) {
                return Err(OpError::Shape(format!("{}: size is {v:?}", bad())));
            }
            let n = Dim::Fixed(v[0] as usize);
            out.push(agree(&theta.shape[0], &n, bad)?);
            out.extend(v[2..].iter().map(|&e| Dim::Fixed(e as usize)));
        }
        None => {
            out.push(theta.shape[0].clone());
            out.extend((0..r).map(|_| Dim::Unknown));
        }
    }
    out.push(Dim::Fixed(r));
    Ok(OutputFact::new(theta.dtype, out))
}
