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

/// The antialiased taps (`antialias` = 1, linear or cubic mode) of every output index along
/// one axis: `(input index, weight)` pairs whose weights sum to 1. This is onnxruntime's
/// rule, which the ONNX reference implementation agrees with: the filter (triangle for
/// linear, Keys' cubic with `cubic_coeff_a` for cubic) is evaluated at `(i − x)·s` for
/// s = min(scale, 1), over the inputs within its support (1 or 2) / s of the original
/// coordinate x. Inputs outside the axis are dropped with `exclude_outside`, else their
/// weight goes to the nearest edge; then the weights are normalised. The window bounds are
/// computed in f32 as onnxruntime does, the weights in f64.
pub fn antialias_taps(
    attrs: &Resize,
    in_len: usize,
    out_len: usize,
    scale: f32,
) -> Vec<Vec<(usize, f64)>> {
    let cubic = attrs.mode == ResizeMode::Cubic;
    let a = f64::from(attrs.cubic_coeff_a);
    let filter = |t: f64| -> f64 {
        let t = t.abs();
        if !cubic {
            return (1.0 - t).max(0.0);
        }
        if t <= 1.0 {
            ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
        } else if t < 2.0 {
            ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
        } else {
            0.0
        }
    };
    let half_support: f32 = if cubic { 2.0 } else { 1.0 };
    let (support, s) = if scale < 1.0 {
        (half_support / scale, f64::from(scale))
    } else {
        (half_support, 1.0)
    };
    let last = in_len.saturating_sub(1) as i64;
    (0..out_len)
        .map(|o| {
            let center = 0.5
                + if scale == 1.0 {
                    o as f32
                } else {
                    attrs.coordinate_transformation_mode.original(
                        o as f32,
                        scale,
                        out_len as f32,
                        in_len as f32,
                    )
                };
            let start = (center - support + 0.5).floor() as i64;
            let end = (center + support + 0.5).floor() as i64;
            let mut taps: Vec<(usize, f64)> = Vec::new();
            for i in start..end {
                let inside = (0..=last).contains(&i);
                if attrs.exclude_outside && !inside {
                    continue;
                }
                let w = filter((i as f64 - f64::from(center) + 0.5) * s);
                taps.push((i.clamp(0, last.max(0)) as usize, w));
            }
            let total: f64 = taps.iter().map(|t| t.1).sum();
            let norm = if total == 0.0 { 1.0 } else { total };
            taps.iter_mut().for_each(|t| t.1 /= norm);
            taps
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
    fn antialiased_linear_halving_averages_a_widened_triangle() {
        // Halving 4 inputs with half_pixel: output 0 maps to x = 0.5, so the triangle of
        // half-width 2 centred there weighs inputs -1, 0, 1, 2 by (1 - |i - 0.5| / 2):
        // 0.25, 0.75, 0.75, 0.25; input -1 folds onto 0, and the sum 2 normalises.
        let a = Resize {
            mode: ResizeMode::Linear,
            antialias: true,
            ..Resize::default()
        };
        let taps = antialias_taps(&a, 4, 2, 0.5);
        assert_eq!(
            taps[0],
            vec![(0, 0.125), (0, 0.375), (1, 0.375), (2, 0.125)]
        );
        let excluded = Resize {
            exclude_outside: true,
            ..a
        };
        let taps = antialias_taps(&excluded, 4, 2, 0.5);
        assert_eq!(
            taps[0],
            vec![(0, 0.75 / 1.75), (1, 0.75 / 1.75), (2, 0.25 / 1.75)]
        );
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
