//! Element types a [`crate::Tensor`] can hold.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The element type of a tensor.
///
/// Bool exists because `Equal` produces it and `Where` consumes it; it is not a compute type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    I64,
    Bool,
}

impl DType {
    /// Every element type, in a stable order.
    pub const ALL: [DType; 4] = [DType::F32, DType::F16, DType::I64, DType::Bool];

    /// Size of one element in bytes, as stored.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 => 2,
            DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// True for the floating-point types (f32, f16).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16)
    }

    /// Unit roundoff of the type: 2^-24 for f32, 2^-11 for f16, 0 for exact types.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::F32 => f64::powi(2.0, -24),
            DType::F16 => f64::powi(2.0, -11),
            DType::I64 | DType::Bool => 0.0,
        }
    }

    /// The lower-case name used in reports and error messages ("f32", "f16", "i64", "bool").
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
