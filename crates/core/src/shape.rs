//! Concrete shapes ([`Shape`]), possibly-symbolic shapes ([`SymShape`]) and the ONNX
//! multidirectional broadcasting rule shared by shape inference and every executor.

use crate::error::OpError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A concrete shape: one extent per axis, row-major.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape(pub Vec<usize>);

/// One axis of a shape known at graph-build time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dim {
    /// A known extent.
    Fixed(usize),
    /// A named, unknown extent (an ONNX `dim_param` such as "batch").
    Named(String),
    /// An extent nobody could determine before run time.
    Unknown,
}

/// A shape whose rank is known but whose extents may be symbolic.
pub type SymShape = Vec<Dim>;

impl Shape {
    pub fn new(dims: impl Into<Vec<usize>>) -> Self {
        Shape(dims.into())
    }

    /// The shape of a scalar (rank 0, one element).
    pub fn scalar() -> Self {
        Shape(Vec::new())
    }

    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements, or None when the product overflows `usize`.
    pub fn checked_numel(&self) -> Option<usize> {
        self.0.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// Number of elements. Callers hold shapes whose tensors exist, so the product fits
    /// when no dim is 0; with a 0 it is 0 even where the other dims' product would not fit
    /// (an empty tensor may have a 2^63 axis).
    pub fn numel(&self) -> usize {
        if self.0.contains(&0) {
            return 0;
        }
        self.0.iter().product()
    }

    /// Row-major element strides. A tensor that exists with elements has strides that
    /// fit (each is at most its element count); an empty one may have dims whose trailing
    /// products do not (`[0, 2^40, 2^40]`), and those strides saturate at `usize::MAX`:
    /// they address no element, so no caller reads through them.
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![1usize; self.0.len()];
        for axis in (0..self.0.len().saturating_sub(1)).rev() {
            strides[axis] = strides[axis + 1].saturating_mul(self.0[axis + 1]);
        }
        strides
    }

    /// The same shape as fully known symbolic dims.
    pub fn to_sym(&self) -> SymShape {
        self.0.iter().map(|&d| Dim::Fixed(d)).collect()
    }

    /// The concrete shape of a symbolic one, when every dim is fixed.
    pub fn from_sym(dims: &[Dim]) -> Option<Shape> {
        dims.iter()
            .map(|d| match d {
                Dim::Fixed(n) => Some(*n),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(Shape)
    }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Self {
        Shape(v)
    }
}

impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Self {
        Shape(v.to_vec())
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Self {
        Shape(v.to_vec())
    }
}

impl fmt::Display for Shape {
    /// "[1, 3, 224, 224]"; a shape of more than [`crate::text::LIST_ITEMS`] dims (only a
    /// hostile model has one) is cut with a count.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}]",
            crate::text::list(&self.0, crate::text::LIST_ITEMS)
        )
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Named(s) => write!(f, "{s}"),
            Dim::Unknown => write!(f, "?"),
        }
    }
}

/// Formats a symbolic shape as `[batch, 3, 224, ?]`.
pub fn format_sym(dims: &[Dim]) -> String {
    format!("[{}]", crate::text::list(dims, crate::text::LIST_ITEMS))
}

/// ONNX multidirectional (numpy) broadcasting of concrete shapes.
pub fn broadcast_shapes(shapes: &[&Shape]) -> Result<Shape, OpError> {
    let rank = shapes.iter().map(|s| s.rank()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for shape in shapes {
        let offset = rank - shape.rank();
        for (i, &d) in shape.dims().iter().enumerate() {
            let o = &mut out[offset + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                let all: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
                return Err(OpError::Shape(format!(
                    "shapes {} cannot be broadcast together (axis {} has {} and {})",
                    all.join(" and "),
                    offset + i,
                    *o,
                    d
                )));
            }
        }
    }
    Ok(Shape(out))
}

/// Broadcasting of symbolic shapes: fixed dims follow [`broadcast_shapes`]; a symbolic dim
/// against 1 stays symbolic; two different symbols give [`Dim::Unknown`].
pub fn broadcast_sym(shapes: &[&[Dim]]) -> Result<SymShape, OpError> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![Dim::Fixed(1); rank];
    for shape in shapes {
        let offset = rank - shape.len();
        for (i, d) in shape.iter().enumerate() {
            let o = &mut out[offset + i];
            *o = match (&*o, d) {
                (Dim::Fixed(1), d) => d.clone(),
                (o, Dim::Fixed(1)) => o.clone(),
                (Dim::Fixed(a), Dim::Fixed(b)) if a == b => Dim::Fixed(*a),
                (Dim::Fixed(a), Dim::Fixed(b)) => {
                    return Err(OpError::Shape(format!(
                        "dims {a} and {b} at axis {} cannot be broadcast together",
                        offset + i
                    )))
                }
                (Dim::Named(a), Dim::Named(b)) if a == b => Dim::Named(a.clone()),
                (Dim::Fixed(a), _) | (_, Dim::Fixed(a)) => Dim::Fixed(*a),
                _ => Dim::Unknown,
            };
        }
    }
    Ok(out)
}

/// Resolves a possibly-negative ONNX axis against `rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(OpError::Attribute {
            name: "axis",
            detail: format!("axis {axis} is out of range for rank {rank}"),
        });
    }
    Ok(a as usize)
}

/// Resolves an axis for ops that may address one past the end (Unsqueeze's output rank).
pub fn normalize_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, OpError> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(a, rank)?;
        if out.contains(&n) {
            return Err(OpError::Attribute {
                name: "axes",
                detail: format!("axis {a} is repeated"),
            });
        }
        out.push(n);
    }
    Ok(out)
}

/// The axes ONNX `Shape` (opset 15) returns for an input of rank `rank`: `start..end`,
/// where a negative bound counts from the back (`rank` is added once), both are then
/// clamped to `[0, rank]`, an omitted `end` is `rank`, and `start > end` is empty. Every
/// executor, shape inference and constant folding call this one function.
pub fn shape_range(rank: usize, start: i64, end: Option<i64>) -> std::ops::Range<usize> {
    let r = i64::try_from(rank).unwrap_or(i64::MAX);
    let clamp = |v: i64| {
        let v = if v < 0 { v.saturating_add(r) } else { v };
        // In [0, rank] after the clamp, so the conversion cannot fail.
        usize::try_from(v.clamp(0, r)).unwrap_or(rank)
    };
    let (s, e) = (clamp(start), clamp(end.unwrap_or(r)));
    s..e.max(s)
}

/// For an output index in `out` (row-major coordinates), the flat index into an input of
/// shape `input` that broadcasts to it. `out_coords` has `out.rank()` entries.
pub fn broadcast_index(out_coords: &[usize], input: &Shape) -> usize {
    let offset = out_coords.len() - input.rank();
    let mut idx = 0;
    for (i, &d) in input.dims().iter().enumerate() {
        let c = if d == 1 { 0 } else { out_coords[offset + i] };
        idx = idx * d + c;
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_range_follows_the_onnx_shape_rule() {
        // Expected values from the ONNX Shape (opset 15) operator spec and its node tests
        // for a rank-3 input [3, 4, 5].
        let cases: [(i64, Option<i64>, std::ops::Range<usize>); 9] = [
            (0, None, 0..3),     // test_shape: the whole shape
            (1, None, 1..3),     // test_shape_start_1: [4, 5]
            (0, Some(1), 0..1),  // test_shape_end_1: [3]
            (-1, None, 2..3),    // test_shape_start_negative_1: [5]
            (0, Some(-1), 0..2), // test_shape_end_negative_1: [3, 4]
            (-10, None, 0..3),   // test_shape_clip_start: start < -r is 0
            (0, Some(10), 0..3), // test_shape_clip_end: end > r is r
            (1, Some(1), 1..1),  // start == end: an empty shape
            (2, Some(1), 2..2),  // start > end: an empty shape
        ];
        for (start, end, want) in cases {
            assert_eq!(
                shape_range(3, start, end),
                want,
                "start {start}, end {end:?}"
            );
        }
        assert_eq!(shape_range(3, 1, Some(2)), 1..2); // test_shape_start_1_end_2: [4]
        assert_eq!(shape_range(3, 1, Some(-1)), 1..2); // test_shape_start_1_end_negative_1
        assert_eq!(shape_range(0, -1, None), 0..0); // a scalar's shape is empty
        assert_eq!(shape_range(3, i64::MIN, Some(i64::MAX)), 0..3);
        assert_eq!(shape_range(3, i64::MAX, Some(i64::MIN)), 3..3);
    }

    #[test]
    fn broadcast_follows_numpy() {
        let a = Shape::new([2, 1, 4]);
        let b = Shape::new([3, 1]);
        assert_eq!(
            broadcast_shapes(&[&a, &b]).ok(),
            Some(Shape::new([2, 3, 4]))
        );
        let c = Shape::new([5]);
        assert!(broadcast_shapes(&[&a, &c]).is_err());
    }

    #[test]
    fn strides_are_row_major() {
        assert_eq!(Shape::new([2, 3, 4]).strides(), vec![12, 4, 1]);
        assert_eq!(Shape::scalar().strides(), Vec::<usize>::new());
    }

    #[test]
    fn negative_axes_resolve() {
        assert_eq!(normalize_axis(-1, 4).ok(), Some(3));
        assert!(normalize_axis(4, 4).is_err());
        assert!(normalize_axis(-5, 4).is_err());
    }
}
