//! Broadcasting binary kernels: arithmetic (Add, Sub, Mul, Div, Pow, Mod, PRelu),
//! comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), logical (And, Or, Xor)
//! and bitwise ops (BitwiseAnd/Or/Xor, BitShift).
//!
//! Floats widen to f64 (exactly), compute there and round once at the output. Integers of
//! every width compute exactly in i128 and wrap once to their width, as two's-complement
//! hardware and numpy do; integer division by zero is an error naming the element.

use super::{
    broadcast_map, broadcast_operands, expect_accepts, expect_dtype_in, expect_same_dtype,
};
use crate::ops::required;
use concord_core::op::Binary;
use concord_core::{DType, OpError, Shape, Tensor, TensorData};

/// Runs one binary op on inputs A and B.
pub(super) fn run(op: Binary, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let a = required(inputs, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    let def = op.def();
    expect_accepts(a, 0, "A", def.accepts)?;
    if op == Binary::Pow {
        expect_dtype_in(b, 1, "Y", &DType::NUMERIC)?;
    } else {
        expect_same_dtype(b, 1, "B", a.dtype(), "input 0 (A)")?;
    }
    let out = broadcast_operands(op.name(), &[(0, "A", a), (1, "B", b)])?;
    let a_map = broadcast_map(&out, a.shape())?;
    let b_map = broadcast_map(&out, b.shape())?;
    let pairs = Pairs {
        a_map: &a_map,
        b_map: &b_map,
    };

    if def.bool_output {
        let values = match (a.as_bool(), b.as_bool()) {
            (Some(x), Some(y)) => pairs.map(x, y, |p, q| logical(op, p, q)),
            _ => match (a.to_i128_vec(), b.to_i128_vec()) {
                // Integers compare exactly.
                (Some(x), Some(y)) => pairs.map(&x, &y, |p, q| compare(op, p, q)),
                // Floats compare by value (NaN is unordered and unequal to itself, -0
                // equals +0); widening to f64 is exact, so comparing there is comparing the
                // originals.
                _ => pairs.map(&a.to_f64_vec(), &b.to_f64_vec(), |p, q| compare(op, p, q)),
            },
        };
        return Tensor::from_parts(
            out,
            TensorData::Bool(values.into_iter().collect::<Result<_, _>>()?),
        );
    }

    match (a.to_i128_vec(), b.to_i128_vec()) {
        (Some(x), Some(y)) => {
            let bits = a.dtype().size_in_bytes() as u32 * 8;
            let values = pairs.try_map(&x, &y, |p, q| integer_op(op, p, q, bits))?;
            Tensor::from_i128(a.dtype(), out, values)
        }
        _ => float_result(op, a, b, out, &pairs),
    }
}

/// And, Or, Xor on bool; Equal on bool.
fn logical(op: Binary, p: bool, q: bool) -> Result<bool, OpError> {
    match op {
        Binary::And => Ok(p && q),
        Binary::Or => Ok(p || q),
        Binary::Xor => Ok(p != q),
        Binary::Equal => Ok(p == q),
        other => Err(not_this_kind(other, "a logical op")),
    }
}

/// A comparison of two exact integers or two floats (every comparison with NaN is false).
fn compare<T: PartialOrd>(op: Binary, p: T, q: T) -> Result<bool, OpError> {
    match op {
        Binary::Equal => Ok(p == q),
        Binary::Less => Ok(p < q),
        Binary::Greater => Ok(p > q),
        Binary::LessOrEqual => Ok(p <= q),
        Binary::GreaterOrEqual => Ok(p >= q),
        other => Err(not_this_kind(other, "a comparison")),
    }
}

fn not_this_kind(op: Binary, kind: &str) -> OpError {
    OpError::Unsupported(format!("{} is not {kind}", op.name()))
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

/// An op whose result has A's float dtype (or is Pow with an integer base and a float
/// exponent, whose result has the base's type): computed in f64, rounded once.
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
        Binary::Mod { fmod: true } => pairs.map(&x, &y, |p, q| p % q),
        Binary::Mod { fmod: false } => pairs.map(&x, &y, floored_remainder),
        Binary::PRelu => pairs.map(&x, &y, |p, q| if p < 0.0 { q * p } else { p }),
        other => return Err(not_this_kind(other, "float arithmetic")),
    };
    // Pow keeps the base's dtype even when the exponent's differs; an integer base with a
    // float exponent truncates toward zero (saturating), as a C cast of pow() would.
    Tensor::from_f64(a.dtype(), out, values)
}

/// Mod with `fmod = 0` on floats, which opset 28 defines (before it, `fmod = 0` was for
/// integers only; the reference computes it at every opset, as onnxruntime and numpy do):
/// `x - floor(x / y) * y`, with the divisor's sign. It is C's fmod moved by one divisor
/// when the signs differ, and a zero takes the divisor's sign, which gives the spec's
/// special cases: an infinite or NaN operand or a zero divisor gives NaN through fmod, and
/// an infinite divisor gives x (same signs) or y (moved by y).
fn floored_remainder(x: f64, y: f64) -> f64 {
    let r = x % y;
    if r == 0.0 {
        0f64.copysign(y)
    // Either `<` here could be `<=` (an equivalent mutant, excluded in .cargo/mutants.toml):
    // r is nonzero past the test above, and a zero y has made r NaN, which r + y keeps.
    } else if (r < 0.0) != (y < 0.0) {
        r + y
    } else {
        r
    }
}

/// One integer element of an arithmetic or bitwise op, exactly; the caller wraps the result
/// to the operands' width of `bits` bits.
fn integer_op(op: Binary, p: i128, q: i128, bits: u32) -> Result<i128, OpError> {
    match op {
        Binary::Add => Ok(p.wrapping_add(q)),
        Binary::Sub => Ok(p.wrapping_sub(q)),
        // Wrapping modulo 2^128 keeps the low 64 bits exact.
        Binary::Mul => Ok(p.wrapping_mul(q)),
        Binary::Div => {
            nonzero_divisor(op, p, q)?;
            // Integer division truncates toward zero, as ONNX and C do; the most negative
            // value over -1 is one past the type's range and wraps back to itself.
            Ok(p.wrapping_div(q))
        }
        Binary::Mod { fmod } => {
            nonzero_divisor(op, p, q)?;
            let r = p.wrapping_rem(q);
            // Signs compared with `signum`, not `< 0`: r and q are nonzero here, so `<= 0`
            // would mean the same, a mutant no test could kill.
            if !fmod && r != 0 && r.signum() != q.signum() {
                // The truncated remainder has the dividend's sign; moving it by one divisor
                // gives the divisor's sign (Python's `%`), and |r| < |q| keeps it in range.
                Ok(r.wrapping_add(q))
            } else {
                Ok(r)
            }
        }
        Binary::Pow => integer_pow(p, q),
        // `is_negative`, not `p < 0`: at p = 0 both arms give 0, so `p <= 0` would be an
        // equivalent mutant.
        Binary::PRelu => Ok(if p.is_negative() {
            p.wrapping_mul(q)
        } else {
            p
        }),
        // On sign-extended values, bitwise ops keep the low bits right.
        Binary::BitwiseAnd => Ok(p & q),
        Binary::BitwiseOr => Ok(p | q),
        Binary::BitwiseXor => Ok(p ^ q),
        // Signed operands from opset 28: a right shift is arithmetic (on the sign-extended
        // value) and a left shift drops what passes the sign bit (the caller's wrap). A
        // negative shift, or one by the width or more, gives what the sign extension alone
        // gives: -1 for a right shift of a negative value, else 0.
        Binary::BitShift { left } => {
            if q < 0 || q >= i128::from(bits) {
                Ok(if !left && p < 0 { -1 } else { 0 })
            } else if left {
                Ok(p << q)
            } else {
                Ok(p >> q)
            }
        }
        other => Err(not_this_kind(other, "integer arithmetic")),
    }
}

fn nonzero_divisor(op: Binary, p: i128, q: i128) -> Result<(), OpError> {
    if q == 0 {
        return Err(OpError::Unsupported(format!(
            "{}: integer division by zero (input 0 (A) element {p}, input 1 (B) element 0)",
            op.name()
        )));
    }
    Ok(())
}

/// `base` to the power `exp`, wrapping on overflow. A negative exponent gives the reciprocal
/// truncated toward zero: 0 unless the base is 1 or -1; zero to a negative power is a
/// division by zero and an error.
fn integer_pow(base: i128, exp: i128) -> Result<i128, OpError> {
    if exp < 0 {
        return match base {
            0 => Err(OpError::Unsupported(format!(
                "Pow: 0 raised to the negative power {exp} is a division by zero in integers"
            ))),
            1 => Ok(1),
            -1 => Ok(if exp % 2 == 0 { 1 } else { -1 }),
            _ => Ok(0),
        };
    }
    // Square-and-multiply over the exponent's bits, wrapping modulo 2^128, which keeps the
    // low 64 bits (every width here) exact.
    let mut result: i128 = 1;
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
