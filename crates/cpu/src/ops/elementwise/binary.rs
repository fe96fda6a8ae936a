//! Broadcasting binary kernels: Add, Sub, Mul, Div, Pow, Mod and Equal.

use super::{broadcast_map, broadcast_operands, expect_dtype_in, expect_same_dtype};
use crate::ops::required;
use concord_core::op::Binary;
use concord_core::{DType, OpError, Shape, Tensor, TensorData};

/// The arithmetic dtypes: every binary op but Equal accepts exactly these.
const NUMERIC: [DType; 3] = [DType::F32, DType::F16, DType::I64];

/// Runs one binary op on inputs A and B.
pub(super) fn run(op: Binary, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let a = required(inputs, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    match op {
        Binary::Equal => {
            expect_same_dtype(b, 1, "B", a.dtype(), "input 0 (A)")?;
        }
        Binary::Pow => {
            expect_dtype_in(a, 0, "X", &NUMERIC)?;
            expect_dtype_in(b, 1, "Y", &NUMERIC)?;
        }
        _ => {
            expect_dtype_in(a, 0, "A", &NUMERIC)?;
            expect_same_dtype(b, 1, "B", a.dtype(), "input 0 (A)")?;
        }
    }
    if let Binary::Mod { fmod: false } = op {
        if a.dtype().is_float() {
            return Err(OpError::Attribute {
                name: "fmod",
                detail: format!(
                    "Mod on {} needs fmod=1; the integer remainder (fmod=0) is only defined \
                     for integer inputs",
                    a.dtype()
                ),
            });
        }
    }
    let out = broadcast_operands(op.name(), &[(0, "A", a), (1, "B", b)])?;
    let a_map = broadcast_map(&out, a.shape())?;
    let b_map = broadcast_map(&out, b.shape())?;
    let pairs = Pairs {
        a_map: &a_map,
        b_map: &b_map,
    };

    if let Binary::Equal = op {
        let equal = match (a.data(), b.data()) {
            (TensorData::I64(x), TensorData::I64(y)) => pairs.map(x, y, |p, q| p == q),
            (TensorData::Bool(x), TensorData::Bool(y)) => pairs.map(x, y, |p, q| p == q),
            // Floats compare by value (NaN is unequal to itself, -0 equals +0); widening
            // f32 and f16 to f64 is exact, so comparing there is comparing the originals.
            _ => pairs.map(&a.to_f64_vec(), &b.to_f64_vec(), |p, q| p == q),
        };
        return Tensor::from_parts(out, TensorData::Bool(equal));
    }

    match (a.data(), b.data()) {
        (TensorData::I64(x), TensorData::I64(y)) => {
            let values = pairs.try_map(x, y, |p, q| integer_op(op, p, q))?;
            Tensor::from_parts(out, TensorData::I64(values))
        }
        _ => float_result(op, a, b, out, &pairs),
    }
}

/// The broadcast index maps of A and B, one entry per output element.
struct Pairs<'m> {
    a_map: &'m [usize],
    b_map: &'m [usize],
}

impl Pairs<'_> {
    /// Applies `f` to the broadcast pairs of elements.
    ///
    /// The maps come from `broadcast_map` over the operands' own shapes, so every index is
    /// in bounds.
    fn map<T: Copy, U>(&self, x: &[T], y: &[T], f: impl Fn(T, T) -> U) -> Vec<U> {
        self.a_map
            .iter()
            .zip(self.b_map)
            .map(|(&i, &j)| f(x[i], y[j]))
            .collect()
    }

    /// As [`Pairs::map`], for an operation that can fail.
    fn try_map<T: Copy, U>(
        &self,
        x: &[T],
        y: &[T],
        f: impl Fn(T, T) -> Result<U, OpError>,
    ) -> Result<Vec<U>, OpError> {
        self.a_map
            .iter()
            .zip(self.b_map)
            .map(|(&i, &j)| f(x[i], y[j]))
            .collect()
    }
}

/// An op whose result has A's float dtype (or is Pow with an i64 base and a float
/// exponent, whose result is i64): computed in f64, rounded once.
fn float_result(
    op: Binary,
    a: &Tensor,
    b: &Tensor,
    out: Shape,
    pairs: &Pairs,
) -> Result<Tensor, OpError> {
    let x = a.to_f64_vec();
    let y = b.to_f64_vec();
    let values = match op {
        Binary::Add => pairs.map(&x, &y, |p, q| p + q),
        Binary::Sub => pairs.map(&x, &y, |p, q| p - q),
        Binary::Mul => pairs.map(&x, &y, |p, q| p * q),
        Binary::Div => pairs.map(&x, &y, |p, q| p / q),
        Binary::Pow => pairs.map(&x, &y, f64::powf),
        // Rust's `%` on floats is C's fmod: the remainder takes the dividend's sign, and
        // it is exact, so rounding the f64 result loses nothing.
        Binary::Mod { .. } => pairs.map(&x, &y, |p, q| p % q),
        other => {
            return Err(OpError::Unsupported(format!(
                "{} is not a binary arithmetic op",
                other.name()
            )))
        }
    };
    // Pow keeps the base's dtype even when the exponent's differs; an i64 base with a
    // float exponent truncates toward zero (saturating), as a C cast of pow() would.
    Tensor::from_f64(a.dtype(), out, values)
}

/// One i64 element of an arithmetic op, exactly.
fn integer_op(op: Binary, p: i64, q: i64) -> Result<i64, OpError> {
    match op {
        Binary::Add => Ok(p.wrapping_add(q)),
        Binary::Sub => Ok(p.wrapping_sub(q)),
        Binary::Mul => Ok(p.wrapping_mul(q)),
        Binary::Div => {
            nonzero_divisor(op, p, q)?;
            // Rust's integer division truncates toward zero, as ONNX and C do; only
            // i64::MIN / -1 overflows, and it wraps back to i64::MIN.
            Ok(p.wrapping_div(q))
        }
        Binary::Mod { fmod } => {
            nonzero_divisor(op, p, q)?;
            let r = p.wrapping_rem(q);
            if !fmod && r != 0 && (r < 0) != (q < 0) {
                // The truncated remainder has the dividend's sign; moving it by one divisor
                // gives the divisor's sign (Python's `%`), and |r| < |q| keeps it in range.
                Ok(r.wrapping_add(q))
            } else {
                Ok(r)
            }
        }
        Binary::Pow => integer_pow(p, q),
        other => Err(OpError::Unsupported(format!(
            "{} is not a binary arithmetic op on i64",
            other.name()
        ))),
    }
}

fn nonzero_divisor(op: Binary, p: i64, q: i64) -> Result<(), OpError> {
    if q == 0 {
        return Err(OpError::Unsupported(format!(
            "{}: integer division by zero (input 0 (A) element {p}, input 1 (B) element 0)",
            op.name()
        )));
    }
    Ok(())
}

/// `base` to the power `exp` in i64, wrapping on overflow. A negative exponent gives the
/// reciprocal truncated toward zero: 0 unless the base is 1 or -1; zero to a negative power
/// is a division by zero and an error.
fn integer_pow(base: i64, exp: i64) -> Result<i64, OpError> {
    if exp < 0 {
        return match base {
            0 => Err(OpError::Unsupported(format!(
                "Pow: 0 raised to the negative power {exp} is a division by zero in i64"
            ))),
            1 => Ok(1),
            -1 => Ok(if exp % 2 == 0 { 1 } else { -1 }),
            _ => Ok(0),
        };
    }
    // Square-and-multiply over the exponent's bits, wrapping like every other i64 op here.
    let mut result: i64 = 1;
    let mut square = base;
    let mut e = exp;
    while e > 0 {
        if e & 1 == 1 {
            result = result.wrapping_mul(square);
        }
        square = square.wrapping_mul(square);
        e >>= 1;
    }
    Ok(result)
}
