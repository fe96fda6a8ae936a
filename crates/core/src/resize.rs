//! Resize's per-axis sampling: for each output index along one axis, which input indices it
//! reads and with what weight. The coordinate mapping is [`CoordinateTransform`] and the
//! rounding [`NearestMode`]; this is the rest, one function that every executor calls so
//! that they all pick the same pixels.
//!
//! [`CoordinateTransform`]: crate::op::CoordinateTransform
//! [`NearestMode`]: crate::op::NearestMode

use crate::op::{Resize, ResizeMode};

/// Where one output index along an axis reads from: `(1 - w1)·x[i0] + w1·x[i1]`.
/// `i0 == i1` (and `w1 == 0`) is a plain copy of `x[i0]`: nearest mode, or a linear
/// coordinate clamped onto the last input, where blending would turn an infinite input
/// into NaN through `0·inf`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tap {
    pub i0: usize,
    pub i1: usize,
    /// The weight of `x[i1]`. Computed in f32 with onnxruntime's coordinate arithmetic;
    /// `x - floor(x)` is exact in f32 (Sterbenz), so widening it to f64 gives the same value
    /// as subtracting in f64, and an executor blending in f64 loses nothing.
    pub w1: f32,
}

impl Tap {
    /// Whether the tap copies one input rather than blending two.
    pub fn is_copy(&self) -> bool {
        self.i0 == self.i1
    }
}

/// The tap of every output index along one axis of length `in_len` resized to `out_len`
/// with `scale` (output over input). Linear and cubic both take the two neighbours (cubic
/// is declined by the executors before this is reached). `in_len` is at least 1 wherever
/// the result is used; an empty axis gives taps onto index 0.
pub fn resize_taps(attrs: &Resize, in_len: usize, out_len: usize, scale: f32) -> Vec<Tap> {
    let last = in_len.saturating_sub(1);
    (0..out_len)
        .map(|o| {
            let x = attrs.coordinate_transformation_mode.original(
                o as f32,
                scale,
                out_len as f32,
                in_len as f32,
            );
            match attrs.mode {
                ResizeMode::Linear | ResizeMode::Cubic => {
                    let x = x.clamp(0.0, last as f32);
                    let i0 = (x.floor() as usize).min(last);
                    let i1 = (i0 + 1).min(last);
                    if i0 == i1 {
                        return Tap { i0, i1, w1: 0.0 };
                    }
                    Tap {
                        i0,
                        i1,
                        w1: x - i0 as f32,
                    }
                }
                ResizeMode::Nearest => {
                    let r = attrs.nearest_mode.round(x);
                    let i = if r <= 0.0 { 0 } else { (r as usize).min(last) };
                    Tap {
                        i0: i,
                        i1: i,
                        w1: 0.0,
                    }
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{CoordinateTransform, NearestMode};

    fn attrs(mode: ResizeMode, ct: CoordinateTransform, nearest: NearestMode) -> Resize {
        Resize {
            mode,
            coordinate_transformation_mode: ct,
            nearest_mode: nearest,
            ..Resize::default()
        }
    }

    #[test]
    fn asymmetric_floor_nearest_doubling_repeats_each_input() {
        // ONNX: x_original = x_resized / scale; floor(o / 2) = 0 0 1 1 2 2.
        let a = attrs(
            ResizeMode::Nearest,
            CoordinateTransform::Asymmetric,
            NearestMode::Floor,
        );
        let picked: Vec<usize> = resize_taps(&a, 3, 6, 2.0).iter().map(|t| t.i0).collect();
        assert_eq!(picked, vec![0, 0, 1, 1, 2, 2]);
        assert!(resize_taps(&a, 3, 6, 2.0).iter().all(Tap::is_copy));
    }

    #[test]
    fn half_pixel_linear_doubling_blends_quarter_and_three_quarters() {
        // ONNX half_pixel: x_original = (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25;
        // clamped to [0, 1]: 0 (copy of x[0]), 0.25, 0.75, 1 (copy of x[1]).
        let a = attrs(
            ResizeMode::Linear,
            CoordinateTransform::HalfPixel,
            NearestMode::RoundPreferFloor,
        );
        let taps = resize_taps(&a, 2, 4, 2.0);
        assert_eq!(
            taps,
            vec![
                Tap {
                    i0: 0,
                    i1: 1,
                    w1: 0.0
                },
                Tap {
                    i0: 0,
                    i1: 1,
                    w1: 0.25
                },
                Tap {
                    i0: 0,
                    i1: 1,
                    w1: 0.75
                },
                Tap {
                    i0: 1,
                    i1: 1,
                    w1: 0.0
                },
            ]
        );
    }
}
