//! LinearAlgebra kernels: Einsum and Det.
//!
//! Einsum reads its equation through concord-core's one parser
//! ([`concord_core::einsum::EinsumPlan`]) and sums every product term directly, in f64 for
//! floats and exactly in i128 for integers (wrapping once, when stored, as numpy does). Det
//! factors each matrix as P·L·U with partial pivoting in f64 and rounds the product of U's
//! diagonal once.

use super::required;
use concord_core::einsum::EinsumPlan;
use concord_core::op::Op;
use concord_core::{OpError, Shape, Tensor};

pub(crate) fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, OpError> {
    match op {
        Op::Einsum { equation } => Ok(vec![einsum(equation, inputs)?]),
        Op::Det => Ok(vec![det(inputs)?]),
        other => Err(super::not_in_family(other)),
    }
}

/// How many product terms Einsum sums into each output element: the product of the
/// extents of the labels absent from the output (1 when none is).
pub(crate) fn einsum_terms(equation: &str, inputs: &[Option<&Tensor>]) -> Result<usize, OpError> {
    let xs = (0..inputs.len())
        .map(|i| required(inputs, i, "Inputs"))
        .collect::<Result<Vec<_>, _>>()?;
    let ranks: Vec<usize> = xs.iter().map(|x| x.rank()).collect();
    let plan = EinsumPlan::new(equation, &ranks)?;
    let dims: Vec<&[usize]> = xs.iter().map(|x| x.dims()).collect();
    let extents = label_extents(&plan, &dims)?;
    Ok((0..plan.labels)
        .filter(|l| !plan.output.contains(l))
        .map(|l| extents[l])
        .product::<usize>()
        .max(1))
}

/// Every label's extent: equal wherever it appears, or 1 (which broadcasts).
fn label_extents(plan: &EinsumPlan, dims: &[&[usize]]) -> Result<Vec<usize>, OpError> {
    plan.extents(
        dims,
        1,
        |&a, &b| match (a, b) {
            (a, b) if a == b => Some(a),
            (1, b) => Some(b),
            (a, 1) => Some(a),
            _ => None,
        },
        |d| Shape::from(d).to_string(),
    )
}

/// The operand values of one Einsum, in the arithmetic they are summed in.
enum Operands {
    Float(Vec<Vec<f64>>),
    Int(Vec<Vec<i128>>),
}

fn einsum(equation: &str, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let mut xs = Vec::with_capacity(inputs.len());
    for index in 0..inputs.len() {
        xs.push(required(inputs, index, "Inputs")?);
    }
    let Some(first) = xs.first() else {
        return Err(OpError::MissingInput {
            index: 0,
            name: "Inputs",
        });
    };
    let dtype = first.dtype();
    if let Some((index, x)) = xs.iter().enumerate().find(|(_, x)| x.dtype() != dtype) {
        return Err(OpError::DType {
            index,
            name: "Inputs",
            expected: format!("{dtype} (input 0's)"),
            actual: x.dtype(),
        });
    }
    let ranks: Vec<usize> = xs.iter().map(|x| x.rank()).collect();
    let plan = EinsumPlan::new(equation, &ranks)?;
    let dims: Vec<&[usize]> = xs.iter().map(|x| x.dims()).collect();
    let extents = label_extents(&plan, &dims)?;
    // Each operand's stride per label: the sum of the strides of its axes with that label
    // (a repeated label walks the diagonal), 0 where the axis has extent 1 and broadcasts.
    let strides: Vec<Vec<usize>> = xs
        .iter()
        .zip(&plan.inputs)
        .map(|(x, axes)| {
            let mut per_label = vec![0usize; plan.labels];
            for ((&label, stride), &extent) in axes.iter().zip(x.shape().strides()).zip(x.dims()) {
                if extent != 1 {
                    per_label[label] += stride;
                }
            }
            per_label
        })
        .collect();
    // Walk the output labels outermost, then the summed ones.
    let mut order = plan.output.clone();
    order.extend((0..plan.labels).filter(|l| !plan.output.contains(l)));
    let out_dims: Vec<usize> = plan.output.iter().map(|&l| extents[l]).collect();
    let out_len: usize = out_dims.iter().product();
    let summed: usize = order[plan.output.len()..]
        .iter()
        .map(|&l| extents[l])
        .product();
    let operands = if dtype.is_float() {
        Operands::Float(xs.iter().map(|x| x.to_f64_vec()).collect())
    } else {
        Operands::Int(
            xs.iter()
                .map(|x| {
                    x.to_i128_vec().ok_or(OpError::DType {
                        index: 0,
                        name: "Inputs",
                        expected: "a numeric type".into(),
                        actual: dtype,
                    })
                })
                .collect::<Result<_, _>>()?,
        )
    };
    let mut coord = vec![0usize; plan.labels];
    let mut offsets = vec![0usize; xs.len()];
    let shape = Shape::new(out_dims);
    // One odometer step over `order`: the innermost label advances, carrying outward, and
    // every operand offset moves with it.
    let step = |coord: &mut [usize], offsets: &mut [usize]| {
        for &label in order.iter().rev() {
            coord[label] += 1;
            for (o, s) in offsets.iter_mut().zip(&strides) {
                *o += s[label];
            }
            if coord[label] < extents[label] {
                return;
            }
            for (o, s) in offsets.iter_mut().zip(&strides) {
                *o -= s[label] * extents[label];
            }
            coord[label] = 0;
        }
    };
    // An empty output, or a summed label of extent 0, needs no case of its own: the loops
    // below then give no element, or every element the empty sum 0.
    match operands {
        Operands::Float(values) => {
            let mut out = Vec::with_capacity(out_len);
            for _ in 0..out_len {
                let mut acc = 0.0f64;
                for _ in 0..summed {
                    let mut term = 1.0f64;
                    for (v, &o) in values.iter().zip(&offsets) {
                        term *= v[o];
                    }
                    acc += term;
                    step(&mut coord, &mut offsets);
                }
                out.push(acc);
            }
            Tensor::from_f64(dtype, shape, out)
        }
        Operands::Int(values) => {
            let mut out = Vec::with_capacity(out_len);
            for _ in 0..out_len {
                let mut acc = 0i128;
                for _ in 0..summed {
                    let mut term = 1i128;
                    for (v, &o) in values.iter().zip(&offsets) {
                        term = term.wrapping_mul(v[o]);
                    }
                    acc = acc.wrapping_add(term);
                    step(&mut coord, &mut offsets);
                }
                out.push(acc);
            }
            Tensor::from_i128(dtype, shape, out)
        }
    }
}

fn det(inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let rank = x.rank();
    if !x.dtype().is_float() || rank < 2 || x.dims()[rank - 1] != x.dims()[rank - 2] {
        return Err(OpError::Shape(format!(
            "Det needs a float X of square matrices (…, M, M), got {} {}",
            x.dtype(),
            x.shape()
        )));
    }
    let m = x.dims()[rank - 1];
    let values = x.to_f64_vec();
    let batch: Vec<usize> = x.dims()[..rank - 2].to_vec();
    let out: Vec<f64> = if m == 0 {
        // The determinant of the empty matrix is 1.
        vec![1.0; batch.iter().product()]
    } else {
        values.chunks(m * m).map(|a| lu_det(a, m)).collect()
    };
    Tensor::from_f64(x.dtype(), Shape::new(batch), out)
}

/// The determinant of the m×m row-major matrix `a`: Gaussian elimination with partial
/// pivoting (the largest magnitude in the column, first one on ties), the sign flipping
/// with each row swap.
fn lu_det(a: &[f64], m: usize) -> f64 {
    let mut lu = a.to_vec();
    let mut det = 1.0f64;
    for k in 0..m {
        let mut pivot = k;
        // `k + 1` with `k * 1` (cargo-mutants) only adds r = k, which compares the pivot
        // with itself: equivalent, excluded in .cargo/mutants.toml.
        for r in k + 1..m {
            if lu[r * m + k].abs() > lu[pivot * m + k].abs() {
                pivot = r;
            }
        }
        if pivot != k {
            for c in 0..m {
                lu.swap(k * m + c, pivot * m + c);
            }
            det = -det;
        }
        let p = lu[k * m + k];
        if p == 0.0 {
            return 0.0;
        }
        det *= p;
        for r in k + 1..m {
            let factor = lu[r * m + k] / p;
            if factor != 0.0 {
                // From k + 1: column k below the pivot is never read again (later pivot
                // searches read later columns), so `k + 1` with `k * 1` (cargo-mutants),
                // which also updates it, is equivalent, excluded in .cargo/mutants.toml.
                for c in k + 1..m {
                    lu[r * m + c] -= factor * lu[k * m + c];
                }
            }
        }
    }
    det
}
