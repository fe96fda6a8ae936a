//! [`Tensor`]: a shape plus a typed, row-major buffer of one of the [`DType`]s.
//!
//! Code that does not care which element type it moves (gathers, concatenations, selects)
//! uses the generic [`TensorData`] helpers below, so that a new dtype is one line in
//! [`for_each_dtype!`] rather than a new arm in every kernel.

use crate::dtype::DType;
use crate::error::{Error, OpError};
use crate::shape::Shape;
use half::{bf16, f16};

/// Invokes `$mac!` with the list of every `(variant, element type)` pair: the one place
/// the dtypes and their Rust element types are listed.
#[macro_export]
macro_rules! for_each_dtype {
    ($mac:ident) => {
        $mac! {
            (F32, f32),
            (F16, half::f16),
            (I64, i64),
            (Bool, bool),
            (F64, f64),
            (BF16, half::bf16),
            (I8, i8),
            (I16, i16),
            (I32, i32),
            (U8, u8),
            (U16, u16),
            (U32, u32),
            (U64, u64),
        }
    };
}

/// A dense row-major tensor that owns its elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Shape,
    data: TensorData,
}

macro_rules! define_data {
    ($(($variant:ident, $t:ty)),* $(,)?) => {
        /// The typed element buffer of a [`Tensor`].
        #[derive(Clone, Debug, PartialEq)]
        pub enum TensorData {
            $($variant(Vec<$t>),)*
        }

        impl TensorData {
            pub fn len(&self) -> usize {
                match self {
                    $(TensorData::$variant(v) => v.len(),)*
                }
            }

            pub fn dtype(&self) -> DType {
                match self {
                    $(TensorData::$variant(_) => DType::$variant,)*
                }
            }

            /// `n` copies of the default element (zero, false) of `dtype`.
            pub fn zeros(dtype: DType, n: usize) -> TensorData {
                match dtype {
                    $(DType::$variant => TensorData::$variant(vec![<$t>::default(); n]),)*
                }
            }

            /// A new buffer whose element `i` is `self[sources[i]]`, bits unchanged; a
            /// source out of range is an error, never a panic.
            pub fn gather(&self, sources: &[usize]) -> Result<TensorData, OpError> {
                Ok(match self {
                    $(TensorData::$variant(v) => TensorData::$variant(pick(v, sources)?),)*
                })
            }

            /// Like [`TensorData::gather`], but a `None` source is filled with the first
            /// element of `fill`, which must have this buffer's dtype.
            pub fn gather_or_fill(
                &self,
                sources: &[Option<usize>],
                fill: &TensorData,
            ) -> Result<TensorData, OpError> {
                Ok(match (self, fill) {
                    $((TensorData::$variant(v), TensorData::$variant(f)) => {
                        TensorData::$variant(pick_or_fill(v, sources, f)?)
                    })*
                    (d, f) => {
                        return Err(OpError::Shape(format!(
                            "the fill value is {} but the data is {}",
                            f.dtype(),
                            d.dtype()
                        )))
                    }
                })
            }

            /// Element `i` is `x[xs[i]]` where `take_x[i]`, else `y[ys[i]]`; x and y share
            /// a dtype.
            pub fn choose(
                take_x: &[bool],
                x: &TensorData,
                xs: &[usize],
                y: &TensorData,
                ys: &[usize],
            ) -> Result<TensorData, OpError> {
                Ok(match (x, y) {
                    $((TensorData::$variant(a), TensorData::$variant(b)) => {
                        TensorData::$variant(choose(take_x, a, xs, b, ys)?)
                    })*
                    (a, b) => {
                        return Err(OpError::Shape(format!(
                            "cannot choose between {} and {} elements",
                            a.dtype(),
                            b.dtype()
                        )))
                    }
                })
            }

            /// The buffers of `parts` one after another; all parts share `dtype`.
            pub fn concat(dtype: DType, parts: &[&TensorData]) -> Result<TensorData, OpError> {
                let mismatch = || {
                    let dtypes: Vec<&str> = parts.iter().map(|p| p.dtype().name()).collect();
                    OpError::Shape(format!(
                        "inputs must share one dtype, got {}",
                        dtypes.join(", ")
                    ))
                };
                Ok(match dtype {
                    $(DType::$variant => {
                        let mut out = Vec::new();
                        for part in parts {
                            match part {
                                TensorData::$variant(v) => out.extend_from_slice(v),
                                _ => return Err(mismatch()),
                            }
                        }
                        TensorData::$variant(out)
                    })*
                })
            }

            /// Every element widened to f64 (exact for every type but i64 and u64 beyond
            /// 2^53, which round).
            pub fn to_f64_vec(&self) -> Vec<f64> {
                match self {
                    $(TensorData::$variant(v) => v.iter().map(|&x| Scalar::to_f64(x)).collect(),)*
                }
            }

            /// Every element of an integer or bool buffer, exactly; None for floats.
            pub fn to_i128_vec(&self) -> Option<Vec<i128>> {
                if self.dtype().is_float() {
                    // An empty float buffer would otherwise collect to Some(empty).
                    return None;
                }
                match self {
                    $(TensorData::$variant(v) => v.iter().map(|&x| Scalar::to_i128(x)).collect(),)*
                }
            }

            /// A buffer of `dtype` from f64 values, rounding once: round-to-nearest for
            /// floats, truncation toward zero saturating at the type's range for integers
            /// (NaN becomes 0), `!= 0` for bool.
            pub fn from_f64(dtype: DType, values: &[f64]) -> TensorData {
                match dtype {
                    $(DType::$variant => TensorData::$variant(
                        values.iter().map(|&x| <$t as Scalar>::from_f64(x)).collect(),
                    ),)*
                }
            }

            /// A buffer of `dtype` from exact integers, wrapping modulo the type's width
            /// as two's-complement hardware and numpy do (`!= 0` for bool, nearest for
            /// floats).
            pub fn from_i128(dtype: DType, values: &[i128]) -> TensorData {
                match dtype {
                    $(DType::$variant => TensorData::$variant(
                        values.iter().map(|&x| <$t as Scalar>::from_i128(x)).collect(),
                    ),)*
                }
            }

            /// True when both buffers have one dtype and the same bits (NaN payloads
            /// included).
            pub fn bit_identical(&self, other: &TensorData) -> bool {
                match (self, other) {
                    $((TensorData::$variant(a), TensorData::$variant(b)) => {
                        a.len() == b.len()
                            && a.iter().zip(b).all(|(x, y)| Scalar::bits(*x) == Scalar::bits(*y))
                    })*
                    _ => false,
                }
            }

            /// The elements as little-endian bytes (bool as one byte, 0 or 1).
            pub fn to_le_bytes(&self) -> Vec<u8> {
                match self {
                    $(TensorData::$variant(v) => {
                        let mut out = Vec::with_capacity(v.len() * DType::$variant.size_in_bytes());
                        for x in v {
                            out.extend_from_slice(&Scalar::to_le(*x)[..DType::$variant.size_in_bytes()]);
                        }
                        out
                    })*
                }
            }

            /// A buffer of `dtype` from little-endian bytes; None when the byte count is
            /// not a whole number of elements.
            pub fn from_le_bytes(dtype: DType, bytes: &[u8]) -> Option<TensorData> {
                let size = dtype.size_in_bytes();
                if bytes.len() % size != 0 {
                    return None;
                }
                Some(match dtype {
                    $(DType::$variant => TensorData::$variant(
                        bytes.chunks_exact(size).map(<$t as Scalar>::from_le).collect(),
                    ),)*
                })
            }
        }

        $(impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn wrap(values: Vec<Self>) -> TensorData {
                TensorData::$variant(values)
            }
            fn slice(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        })*
    };
}

for_each_dtype!(define_data);

/// A Rust element type of a [`TensorData`] buffer: its dtype, and typed access.
pub trait Element: Scalar {
    const DTYPE: DType;
    /// The buffer holding `values`.
    fn wrap(values: Vec<Self>) -> TensorData;
    /// The elements of `data` if it holds this type.
    fn slice(data: &TensorData) -> Option<&[Self]>;
}

/// The conversions every element type has, each rounding once (see
/// [`TensorData::from_f64`] and [`TensorData::from_i128`] for the rules).
pub trait Scalar: Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    /// The exact integer value; None for float types.
    fn to_i128(self) -> Option<i128>;
    fn from_i128(v: i128) -> Self;
    /// The bit pattern, widened.
    fn bits(self) -> u64;
    /// The little-endian bytes in the low `size_in_bytes` entries.
    fn to_le(self) -> [u8; 8];
    /// The element of little-endian `bytes` (exactly `size_in_bytes` of them).
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                // `as` truncates toward zero, saturates at the range and maps NaN to 0.
                v as $t
            }
            fn to_i128(self) -> Option<i128> {
                Some(self as i128)
            }
            fn from_i128(v: i128) -> Self {
                // Truncation to the low bits: wrapping, as two's-complement arithmetic.
                v as $t
            }
            fn bits(self) -> u64 {
                self as u64
            }
            fn to_le(self) -> [u8; 8] {
                let mut out = [0u8; 8];
                let bytes = self.to_le_bytes();
                out[..bytes.len()].copy_from_slice(&bytes);
                out
            }
            fn from_le(bytes: &[u8]) -> Self {
                let mut word = [0u8; std::mem::size_of::<$t>()];
                word.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_le_bytes(word)
            }
        }
    )*};
}

int_scalar!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_scalar {
    ($($t:ty => $to:expr, $from:expr, $bits:expr;)*) => {$(
        impl Scalar for $t {
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            fn to_i128(self) -> Option<i128> {
                None
            }
            fn from_i128(v: i128) -> Self {
                $from(v as f64)
            }
            fn bits(self) -> u64 {
                $bits(self)
            }
            fn to_le(self) -> [u8; 8] {
                let mut out = [0u8; 8];
                let bytes = self.to_le_bytes();
                out[..bytes.len()].copy_from_slice(&bytes);
                out
            }
            fn from_le(bytes: &[u8]) -> Self {
                let mut word = [0u8; std::mem::size_of::<$t>()];
                word.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_le_bytes(word)
            }
        }
    )*};
}

float_scalar! {
    f64 => |x: f64| x, |v: f64| v, |x: f64| x.to_bits();
    f32 => |x: f32| x as f64, |v: f64| v as f32, |x: f32| u64::from(x.to_bits());
    f16 => |x: f16| x.to_f64(), f16::from_f64, |x: f16| u64::from(x.to_bits());
    bf16 => |x: bf16| x.to_f64(), bf16::from_f64, |x: bf16| u64::from(x.to_bits());
}

impl Scalar for bool {
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_i128(self) -> Option<i128> {
        Some(i128::from(self))
    }
    fn from_i128(v: i128) -> Self {
        v != 0
    }
    fn bits(self) -> u64 {
        u64::from(self)
    }
    fn to_le(self) -> [u8; 8] {
        [u8::from(self), 0, 0, 0, 0, 0, 0, 0]
    }
    fn from_le(bytes: &[u8]) -> Self {
        bytes.first().is_some_and(|&b| b != 0)
    }
}

fn out_of_range(i: usize, len: usize) -> OpError {
    OpError::Shape(format!("internal: source element {i} of a buffer of {len}"))
}

fn pick<T: Copy>(values: &[T], sources: &[usize]) -> Result<Vec<T>, OpError> {
    sources
        .iter()
        .map(|&i| {
            values
                .get(i)
                .copied()
                .ok_or_else(|| out_of_range(i, values.len()))
        })
        .collect()
}

fn pick_or_fill<T: Copy>(
    values: &[T],
    sources: &[Option<usize>],
    fill: &[T],
) -> Result<Vec<T>, OpError> {
    let fill = fill
        .first()
        .copied()
        .ok_or_else(|| OpError::Shape("the fill value has no element".to_string()))?;
    sources
        .iter()
        .map(|s| match s {
            None => Ok(fill),
            Some(i) => values
                .get(*i)
                .copied()
                .ok_or_else(|| out_of_range(*i, values.len())),
        })
        .collect()
}

fn choose<T: Copy>(
    take_x: &[bool],
    x: &[T],
    xs: &[usize],
    y: &[T],
    ys: &[usize],
) -> Result<Vec<T>, OpError> {
    take_x
        .iter()
        .zip(xs)
        .zip(ys)
        .map(|((&t, &i), &j)| {
            if t {
                x.get(i).copied().ok_or_else(|| out_of_range(i, x.len()))
            } else {
                y.get(j).copied().ok_or_else(|| out_of_range(j, y.len()))
            }
        })
        .collect()
}

impl TensorData {
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Tensor {
    /// A tensor from a shape and data; fails when the element count does not match.
    pub fn new(shape: impl Into<Shape>, data: TensorData) -> Result<Self, Error> {
        let shape = shape.into();
        let expected = shape.checked_numel().ok_or_else(|| Error::ShapeOverflow {
            name: String::new(),
            shape: shape.to_string(),
        })?;
        if expected != data.len() {
            return Err(Error::TensorData {
                name: String::new(),
                shape: shape.to_string(),
                expected,
                actual: data.len(),
            });
        }
        Ok(Tensor { shape, data })
    }

    /// Like [`Tensor::new`] but reporting a mismatch as an [`OpError`], for kernels.
    pub fn from_parts(shape: Shape, data: TensorData) -> Result<Self, OpError> {
        if shape.checked_numel() != Some(data.len()) {
            return Err(OpError::Shape(format!(
                "shape {shape} does not match {} elements",
                data.len()
            )));
        }
        Ok(Tensor { shape, data })
    }

    /// A tensor of any element type from a shape and its elements.
    pub fn from_vec<T: Element>(shape: impl Into<Shape>, data: Vec<T>) -> Result<Self, Error> {
        Self::new(shape, T::wrap(data))
    }

    pub fn from_f32(shape: impl Into<Shape>, data: Vec<f32>) -> Result<Self, Error> {
        Self::from_vec(shape, data)
    }

    pub fn from_f16(shape: impl Into<Shape>, data: Vec<f16>) -> Result<Self, Error> {
        Self::from_vec(shape, data)
    }

    pub fn from_i64(shape: impl Into<Shape>, data: Vec<i64>) -> Result<Self, Error> {
        Self::from_vec(shape, data)
    }

    pub fn from_bool(shape: impl Into<Shape>, data: Vec<bool>) -> Result<Self, Error> {
        Self::from_vec(shape, data)
    }

    /// A rank-0 f32 tensor.
    pub fn scalar_f32(v: f32) -> Self {
        Tensor {
            shape: Shape::scalar(),
            data: TensorData::F32(vec![v]),
        }
    }

    /// A rank-0 i64 tensor.
    pub fn scalar_i64(v: i64) -> Self {
        Tensor {
            shape: Shape::scalar(),
            data: TensorData::I64(vec![v]),
        }
    }

    /// A rank-1 i64 tensor, the usual form of shape, axes and index operands.
    pub fn vec_i64(v: Vec<i64>) -> Self {
        Tensor {
            shape: Shape(vec![v.len()]),
            data: TensorData::I64(v),
        }
    }

    /// A tensor of zeros (false for bool).
    pub fn zeros(dtype: DType, shape: impl Into<Shape>) -> Self {
        let shape = shape.into();
        let data = TensorData::zeros(dtype, shape.numel());
        Tensor { shape, data }
    }

    /// Builds a tensor of `dtype` from f64 values, rounding once to the target type
    /// (round-to-nearest for floats; saturating truncation toward zero for integers; != 0
    /// for bool). This is the single place the reference executor rounds its f64 results.
    pub fn from_f64(dtype: DType, shape: Shape, values: Vec<f64>) -> Result<Self, OpError> {
        Tensor::from_parts(shape, TensorData::from_f64(dtype, &values))
    }

    /// Builds a tensor of `dtype` from exact integer results, wrapping modulo the type's
    /// width (the reference's integer arithmetic is exact in i128, then wraps once).
    pub fn from_i128(dtype: DType, shape: Shape, values: Vec<i128>) -> Result<Self, OpError> {
        Tensor::from_parts(shape, TensorData::from_i128(dtype, &values))
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn data(&self) -> &TensorData {
        &self.data
    }

    pub fn into_data(self) -> TensorData {
        self.data
    }

    /// Size of the element buffer in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.len() * self.dtype().size_in_bytes()
    }

    /// The elements if the tensor holds `T`.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        T::slice(&self.data)
    }

    pub fn as_f32(&self) -> Option<&[f32]> {
        self.as_slice()
    }

    pub fn as_f16(&self) -> Option<&[f16]> {
        self.as_slice()
    }

    pub fn as_i64(&self) -> Option<&[i64]> {
        self.as_slice()
    }

    pub fn as_bool(&self) -> Option<&[bool]> {
        self.as_slice()
    }

    /// Every element widened to f64 (exact for every type but i64 and u64 beyond 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.data.to_f64_vec()
    }

    /// Every element of an integer or bool tensor, exactly; None for floats.
    pub fn to_i128_vec(&self) -> Option<Vec<i128>> {
        self.data.to_i128_vec()
    }

    /// The same elements under a new shape with the same element count.
    pub fn reshaped(&self, shape: Shape) -> Result<Tensor, OpError> {
        Tensor::from_parts(shape, self.data.clone())
    }

    /// Bitwise equality: same dtype, shape and bits (NaN payloads included). Used for the
    /// thread-safety promise, which is about identical bits, not close values.
    pub fn bit_identical(&self, other: &Tensor) -> bool {
        self.shape == other.shape && self.data.bit_identical(&other.data)
    }

    /// Reads an integer operand (shape, axes and index inputs) as a list: any integer
    /// dtype whose values fit in i64 (ONNX lets indices be int32 or int64).
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        if !self.dtype().is_integer() {
            return None;
        }
        self.data
            .to_i128_vec()?
            .into_iter()
            .map(|v| i64::try_from(v).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_length_is_checked() {
        assert!(Tensor::from_f32([2, 3], vec![0.0; 6]).is_ok());
        assert!(matches!(
            Tensor::from_f32([2, 3], vec![0.0; 5]),
            Err(Error::TensorData {
                expected: 6,
                actual: 5,
                ..
            })
        ));
    }

    #[test]
    fn from_f64_rounds_to_dtype() {
        let t = Tensor::from_f64(DType::F16, Shape::new([1]), vec![1.0 + 1e-4])
            .unwrap_or_else(|_| Tensor::zeros(DType::F16, [1]));
        assert_eq!(t.as_f16().map(|v| v[0]), Some(f16::ONE));
        let t = TensorData::from_f64(DType::U8, &[-3.7, 300.0, 7.9, f64::NAN]);
        assert_eq!(t, TensorData::U8(vec![0, 255, 7, 0]));
        let t = TensorData::from_f64(DType::BF16, &[1.0 + 1.0 / 512.0]);
        assert_eq!(t, TensorData::BF16(vec![bf16::ONE]));
    }

    #[test]
    fn from_i128_wraps_to_the_width() {
        let t = TensorData::from_i128(DType::I8, &[127 + 1, -129, 5]);
        assert_eq!(t, TensorData::I8(vec![-128, 127, 5]));
        let t = TensorData::from_i128(DType::U64, &[-1]);
        assert_eq!(t, TensorData::U64(vec![u64::MAX]));
    }

    #[test]
    fn bytes_round_trip_for_every_dtype() {
        for dtype in DType::ALL {
            let data = TensorData::from_f64(dtype, &[0.0, 1.0, 2.0]);
            let bytes = data.to_le_bytes();
            assert_eq!(bytes.len(), 3 * dtype.size_in_bytes(), "{dtype}");
            assert_eq!(
                TensorData::from_le_bytes(dtype, &bytes),
                Some(data),
                "{dtype}"
            );
        }
        assert_eq!(TensorData::from_le_bytes(DType::I32, &[0, 1, 2]), None);
    }

    #[test]
    fn integer_operands_of_any_width_read_as_i64() {
        let t = Tensor::from_vec([2], vec![-1i32, 7]).unwrap_or_else(|_| Tensor::scalar_i64(0));
        assert_eq!(t.to_i64_vec(), Some(vec![-1, 7]));
        let t = Tensor::from_vec([1], vec![u64::MAX]).unwrap_or_else(|_| Tensor::scalar_i64(0));
        assert_eq!(t.to_i64_vec(), None);
        assert_eq!(Tensor::scalar_f32(1.0).to_i64_vec(), None);
    }

    #[test]
    fn gather_is_checked_and_generic() {
        let d = TensorData::U16(vec![10, 20, 30]);
        assert_eq!(d.gather(&[2, 0]).ok(), Some(TensorData::U16(vec![30, 10])));
        assert!(d.gather(&[3]).is_err());
    }
}
