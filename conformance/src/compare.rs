//! Element-wise comparison of an executor's output with the expected one, under a
//! per-element error allowance. Records the figures every report shows: max abs error, max
//! rel error, the worst element and how much it was allowed.

use concord_core::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// The result of comparing one output. Its floats are written losslessly to
/// conformance.json (an infinite relative error is common), so a merged report shows the
/// figures the run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub output: String,
    pub elements: usize,
    /// Elements whose error exceeded their allowance.
    pub violations: usize,
    #[serde(with = "crate::report::json_float")]
    pub max_abs_error: f64,
    #[serde(with = "crate::report::json_float")]
    pub max_rel_error: f64,
    /// Row-major coordinates of the element with the largest error-to-allowance ratio.
    pub worst_index: Option<Vec<usize>>,
    #[serde(with = "crate::report::json_float::option")]
    pub worst_actual: Option<f64>,
    #[serde(with = "crate::report::json_float::option")]
    pub worst_expected: Option<f64>,
    #[serde(with = "crate::report::json_float::option")]
    pub worst_allowed: Option<f64>,
    /// Why the comparison failed outright (dtype, shape, NaN placement), if it did.
    pub mismatch: Option<String>,
}

impl Comparison {
    pub fn passed(&self) -> bool {
        self.mismatch.is_none() && self.violations == 0
    }

    /// One line for a failing trial's message.
    pub fn describe(&self) -> String {
        if let Some(m) = &self.mismatch {
            return format!("output `{}`: {m}", self.output);
        }
        let worst = match (
            &self.worst_index,
            self.worst_actual,
            self.worst_expected,
            self.worst_allowed,
        ) {
            (Some(i), Some(a), Some(e), Some(t)) => {
                format!("; worst at {i:?}: got {a:e}, expected {e:e}, allowed error {t:e}")
            }
            _ => String::new(),
        };
        format!(
            "output `{}`: {} of {} elements out of tolerance; max abs error {:e}, max rel error {:e}{worst}",
            self.output, self.violations, self.elements, self.max_abs_error, self.max_rel_error
        )
    }
}

/// Whether the sign of a zero is compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Zeros {
    /// −0 equals +0: where ONNX leaves the sign of a zero result open (a sum, a maximum).
    #[default]
    Unsigned,
    /// An expected zero must be met by a zero of the same sign: where ONNX (through IEEE
    /// 754) defines it — Neg, Abs, a product, a copy. Cases opt in (`signed_zero = true`).
    Signed,
}

/// Compares `actual` with `expected`; `allowed(i, expected_i)` is the absolute error
/// allowed at flat index `i`. NaN must meet NaN; infinities must match exactly; integers
/// and bools must be equal; −0 equals +0 ([`compare_zeros`] compares their signs).
pub fn compare(
    output: &str,
    actual: &Tensor,
    expected: &Tensor,
    allowed: &dyn Fn(usize, f64) -> f64,
) -> Comparison {
    compare_zeros(output, actual, expected, allowed, Zeros::Unsigned)
}

/// [`compare`], with the sign of zeros compared when `zeros` says so: an expected zero met
/// by a zero of the other sign is an element out of tolerance (its allowance is no help).
pub fn compare_zeros(
    output: &str,
    actual: &Tensor,
    expected: &Tensor,
    allowed: &dyn Fn(usize, f64) -> f64,
    zeros: Zeros,
) -> Comparison {
    let mut c = Comparison {
        output: output.to_string(),
        elements: expected.len(),
        ..Comparison::default()
    };
    if actual.dtype() != expected.dtype() {
        c.mismatch = Some(format!(
            "dtype {} but expected {}",
            actual.dtype(),
            expected.dtype()
        ));
        return c;
    }
    if actual.shape() != expected.shape() {
        c.mismatch = Some(format!(
            "shape {} but expected {}",
            actual.shape(),
            expected.shape()
        ));
        return c;
    }
    let exact = matches!(expected.data(), TensorData::I64(_) | TensorData::Bool(_));
    let a = actual.to_f64_vec();
    let e = expected.to_f64_vec();
    let dims = expected.dims().to_vec();
    let mut worst_ratio = -1.0f64;
    for (i, (&x, &y)) in a.iter().zip(&e).enumerate() {
        if exact {
            if !integer_equal(actual, expected, i) {
                c.violations += 1;
                note_worst(&mut c, &mut worst_ratio, f64::INFINITY, i, &dims, x, y, 0.0);
            }
            continue;
        }
        if y.is_nan() || x.is_nan() {
            if y.is_nan() != x.is_nan() {
                c.violations += 1;
                note_worst(&mut c, &mut worst_ratio, f64::INFINITY, i, &dims, x, y, 0.0);
            }
            continue;
        }
        if y.is_infinite() || x.is_infinite() {
            if x != y {
                c.violations += 1;
                note_worst(&mut c, &mut worst_ratio, f64::INFINITY, i, &dims, x, y, 0.0);
            }
            continue;
        }
        if zeros == Zeros::Signed
            && x == 0.0
            && y == 0.0
            && x.is_sign_negative() != y.is_sign_negative()
        {
            c.violations += 1;
            note_worst(&mut c, &mut worst_ratio, f64::INFINITY, i, &dims, x, y, 0.0);
            continue;
        }
        let abs = (x - y).abs();
        let rel = if y != 0.0 {
            abs / y.abs()
        } else if abs == 0.0 {
            0.0
        } else {
            f64::INFINITY
        };
        c.max_abs_error = c.max_abs_error.max(abs);
        c.max_rel_error = c.max_rel_error.max(rel);
        let tol = allowed(i, y);
        let ratio = if tol > 0.0 {
            abs / tol
        } else if abs == 0.0 {
            0.0
        } else {
            f64::INFINITY
        };
        if abs > tol {
            c.violations += 1;
        }
        note_worst(&mut c, &mut worst_ratio, ratio, i, &dims, x, y, tol);
    }
    c
}

/// Compares only the dtype and shape of `actual` with `expected`: for an output whose
/// values no oracle can give (one drawn by a random op), what can still be checked.
pub fn compare_type(output: &str, actual: &Tensor, expected: &Tensor) -> Comparison {
    let mismatch = if actual.dtype() != expected.dtype() {
        Some(format!(
            "dtype {} but expected {}",
            actual.dtype(),
            expected.dtype()
        ))
    } else if actual.shape() != expected.shape() {
        Some(format!(
            "shape {} but expected {}",
            actual.shape(),
            expected.shape()
        ))
    } else {
        None
    };
    Comparison {
        output: output.to_string(),
        elements: expected.len(),
        mismatch,
        ..Comparison::default()
    }
}

fn integer_equal(a: &Tensor, b: &Tensor, i: usize) -> bool {
    match (a.data(), b.data()) {
        (TensorData::I64(x), TensorData::I64(y)) => x.get(i) == y.get(i),
        (TensorData::Bool(x), TensorData::Bool(y)) => x.get(i) == y.get(i),
        _ => false,
    }
}

#[allow(clippy::too_many_arguments)]
fn note_worst(
    c: &mut Comparison,
    worst: &mut f64,
    ratio: f64,
    i: usize,
    dims: &[usize],
    x: f64,
    y: f64,
    tol: f64,
) {
    if ratio > *worst {
        *worst = ratio;
        c.worst_index = Some(unravel(i, dims));
        c.worst_actual = Some(x);
        c.worst_expected = Some(y);
        c.worst_allowed = Some(tol);
    }
}

/// Row-major coordinates of flat index `i`.
pub fn unravel(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut out = vec![0; dims.len()];
    for (axis, &d) in dims.iter().enumerate().rev() {
        if d > 0 {
            out[axis] = i % d;
            i /= d;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_must_meet_nan_and_worst_is_reported() {
        let e = Tensor::from_f32([2, 2], vec![1.0, f32::NAN, 3.0, 4.0]).expect("t");
        let a = Tensor::from_f32([2, 2], vec![1.0, f32::NAN, 3.5, 4.0]).expect("t");
        let c = compare("y", &a, &e, &|_, _| 0.1);
        assert_eq!(c.violations, 1);
        assert_eq!(c.worst_index, Some(vec![1, 0]));
        assert!((c.max_abs_error - 0.5).abs() < 1e-12);
        let a2 = Tensor::from_f32([2, 2], vec![1.0, 2.0, 3.0, 4.0]).expect("t");
        assert_eq!(
            compare("y", &a2, &e, &|_, _| 1.0).violations,
            1,
            "NaN turned into a number must fail"
        );
    }

    #[test]
    fn the_sign_of_zero_is_compared_only_when_asked() {
        let e = Tensor::from_f32([3], vec![-0.0, 0.0, 1.0]).expect("t");
        let a = Tensor::from_f32([3], vec![0.0, 0.0, 1.0]).expect("t");
        assert!(
            compare("y", &a, &e, &|_, _| 1.0).passed(),
            "-0 == +0 by default"
        );
        let c = compare_zeros("y", &a, &e, &|_, _| 1.0, Zeros::Signed);
        assert_eq!(c.violations, 1);
        assert_eq!(c.worst_index, Some(vec![0]));
        assert!(
            c.describe().contains("got 0e0, expected -0e0"),
            "{}",
            c.describe()
        );
        let same = Tensor::from_f32([3], vec![-0.0, 0.0, 1.0]).expect("t");
        assert!(compare_zeros("y", &same, &e, &|_, _| 0.0, Zeros::Signed).passed());
        let f16 = |v: &[f32]| {
            Tensor::from_f16(
                [v.len()],
                v.iter().map(|&x| half::f16::from_f32(x)).collect(),
            )
            .expect("t")
        };
        assert_eq!(
            compare_zeros("y", &f16(&[0.0]), &f16(&[-0.0]), &|_, _| 1.0, Zeros::Signed).violations,
            1,
            "half precision keeps the sign too"
        );
    }

    #[test]
    fn shape_and_dtype_mismatches_fail_outright() {
        let e = Tensor::from_f32([2], vec![1.0, 2.0]).expect("t");
        let a = Tensor::from_f32([1, 2], vec![1.0, 2.0]).expect("t");
        assert!(!compare("y", &a, &e, &|_, _| 1.0).passed());
    }

    #[test]
    fn a_type_comparison_ignores_values_only() {
        let e = Tensor::from_f32([2], vec![1.0, 0.0]).expect("t");
        let other_values = Tensor::from_f32([2], vec![0.0, 1.0]).expect("t");
        let c = compare_type("y", &other_values, &e);
        assert!(c.passed(), "{c:?}");
        assert_eq!(c.elements, 2);
        let other_shape = Tensor::from_f32([1, 2], vec![1.0, 0.0]).expect("t");
        assert!(!compare_type("y", &other_shape, &e).passed());
        let other_dtype = Tensor::from_i64([2], vec![1, 0]).expect("t");
        assert!(!compare_type("y", &other_dtype, &e).passed());
    }
}
