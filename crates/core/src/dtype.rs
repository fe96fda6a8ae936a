//! Element types a [`crate::Tensor`] can hold: every dense numeric type ONNX ops use, and
//! bool. (Strings, complex numbers and the 4- and 8-bit float formats are not dense
//! numeric types Concord computes with; the importer names them when it refuses them.)

use serde::{Deserialize, Serialize};
use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    I64,
    Bool,
    F64,
    BF16,
    I8,
    I16,
    I32,
    U8,
    U16,
    U32,
    U64,
}

impl DType {
    /// Every element type, in a stable order.
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F16,
        DType::I64,
        DType::Bool,
        DType::F64,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The floating-point types.
    pub const FLOATS: [DType; 4] = [DType::F64, DType::F32, DType::F16, DType::BF16];

    /// The integer types (bool is not one).
    pub const INTEGERS: [DType; 8] = [
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// Every type but bool: what arithmetic ops accept.
    pub const NUMERIC: [DType; 12] = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// Size of one element in bytes, as stored.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// True for the floating-point types (f64, f32, f16, bf16).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
    }

    /// True for the integer types (signed and unsigned; not bool).
    pub fn is_integer(self) -> bool {
        DType::INTEGERS.contains(&self)
    }

    /// True for the signed integer types.
    pub fn is_signed_integer(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// The smallest and largest value of an integer type (bool is 0..=1), None for floats.
    pub fn integer_range(self) -> Option<(i128, i128)> {
        Some(match self {
            DType::I8 => (i8::MIN.into(), i8::MAX.into()),
            DType::I16 => (i16::MIN.into(), i16::MAX.into()),
            DType::I32 => (i32::MIN.into(), i32::MAX.into()),
            DType::I64 => (i64::MIN.into(), i64::MAX.into()),
            DType::U8 => (0, u8::MAX.into()),
            DType::U16 => (0, u16::MAX.into()),
            DType::U32 => (0, u32::MAX.into()),
            DType::U64 => (0, u64::MAX.into()),
            DType::Bool => (0, 1),
            DType::F64 | DType::F32 | DType::F16 | DType::BF16 => return None,
        })
    }

    /// Unit roundoff of the type: 2^-53 for f64, 2^-24 for f32, 2^-11 for f16, 2^-8 for
    /// bf16, 0 for exact types.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::F64 => f64::powi(2.0, -53),
            DType::F32 => f64::powi(2.0, -24),
            DType::F16 => f64::powi(2.0, -11),
            DType::BF16 => f64::powi(2.0, -8),
            _ => 0.0,
        }
    }

    /// The lower-case name used in reports and error messages ("f32", "u8", "bool", …).
    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "bool",
        }
    }

    /// The dtype of a name as [`DType::name`] writes it.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sizes_match_the_rust_types() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::U64.size_in_bytes(), std::mem::size_of::<u64>());
        assert_eq!(
            DType::BF16.size_in_bytes(),
            std::mem::size_of::<half::bf16>()
        );
        assert_eq!(DType::U8.integer_range(), Some((0, 255)));
        assert!(DType::F64.integer_range().is_none());
        assert_eq!(
            DType::NUMERIC.len() + 1,
            DType::ALL.len(),
            "NUMERIC is ALL but bool"
        );
    }
}
