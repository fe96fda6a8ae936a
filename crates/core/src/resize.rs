//! Resize's per-axis sampling: for each output index along one axis, which input indices it
//! reads and with what weight, and whether it lies outside the input (tf_crop_and_resize
//! writes `extrapolation_value` there). The coordinate mapping is [`CoordinateTransform`]
//! and the rounding [`NearestMode`]; this is the rest, one function each that every
//! executor calls so that they all pick the same pixels.
//!
//! [`CoordinateTransform`]: crate::op::CoordinateTransform
//! [`NearestMode`]: crate::op::NearestMode

use crate::op::{CoordinateTransform, Resize, ResizeMode};

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

/// The region of interest of an axis that is not cropped: all of it.
pub const WHOLE_AXIS: (f32, f32) = (0.0, 1.0);

/// One axis of a resize: its input and output extents, the f32 coordinate scale (as
/// [`Resize::plan`] gives it), and its region of interest as (start, end) in normalised
/// input coordinates, which only tf_crop_and_resize reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResizeAxis {
    pub in_len: usize,
    pub out_len: usize,
    pub scale: f32,
    pub roi: (f32, f32),
}

impl ResizeAxis {
    /// An axis resized as a whole ([`WHOLE_AXIS`]).
    pub fn new(in_len: usize, out_len: usize, scale: f32) -> Self {
        ResizeAxis {
            in_len,
            out_len,
            scale,
            roi: WHOLE_AXIS,
        }
    }

    /// The same axis cropped to `roi` (tf_crop_and_resize).
    pub fn with_roi(self, roi: (f32, f32)) -> Self {
        ResizeAxis { roi, ..self }
    }

    /// The (fractional, unclamped) input coordinate output index `o` maps to, in f32.
    pub fn original(&self, attrs: &Resize, o: usize) -> f32 {
        attrs.coordinate_transformation_mode.original(
            o as f32,
            self.scale,
            self.out_len as f32,
            self.in_len as f32,
            self.roi,
        )
    }
}

/// For every output index along `axis`, whether tf_crop_and_resize writes
/// `extrapolation_value` there rather than sampling: its coordinate lies outside
/// [0, in_len − 1]. The spec says so per axis, and an output element takes the value when
/// any of its axes is outside, as onnxruntime decides it (per element, on the f32
/// coordinate) and the ONNX reference implementation agrees. Every other mode clamps onto
/// the edge instead, so this is all false for them.
pub fn extrapolated(attrs: &Resize, axis: &ResizeAxis) -> Vec<bool> {
    let crops = attrs.coordinate_transformation_mode == CoordinateTransform::TfCropAndResize;
    let last = axis.in_len as f32 - 1.0;
    (0..axis.out_len)
        .map(|o| {
            crops && {
                let x = axis.original(attrs, o);
                x < 0.0 || x > last
            }
        })
        .collect()
}

/// The tap of every output index along one whole axis of length `in_len` resized to
/// `out_len` with `scale` (output over input): [`resize_axis_taps`] of a [`ResizeAxis`]
/// without a crop.
pub fn resize_taps(attrs: &Resize, in_len: usize, out_len: usize, scale: f32) -> Vec<Tap> {
    resize_axis_taps(attrs, &ResizeAxis::new(in_len, out_len, scale))
}

/// The tap of every output index along `axis`. Linear and cubic both take the two
/// neighbours (the reference computes cubic's four itself; the device executors decline
/// cubic). A coordinate outside the input is clamped onto the edge; where
/// tf_crop_and_resize extrapolates instead, [`extrapolated`] says so. `in_len` is at
/// least 1 wherever the result is used; an empty axis gives taps onto index 0.
pub fn resize_axis_taps(attrs: &Resize, axis: &ResizeAxis) -> Vec<Tap> {
    let last = axis.in_len.saturating_sub(1);
    (0..axis.out_len)
        .map(|o| {
            let x = axis.original(attrs, o);
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
/// computed in f32 as onnxruntime does, the weights in f64. With tf_crop_and_resize the
/// window is centred on the cropped coordinate, as in both; an output index outside the
/// input is [`extrapolated`].
pub fn antialias_taps(attrs: &Resize, axis: &ResizeAxis) -> Vec<Vec<(usize, f64)>> {
    let (in_len, out_len, scale) = (axis.in_len, axis.out_len, axis.scale);
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
                    axis.original(attrs, o)
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
        let taps = antialias_taps(&a, &ResizeAxis::new(4, 2, 0.5));
        assert_eq!(
            taps[0],
            vec![(0, 0.125), (0, 0.375), (1, 0.375), (2, 0.125)]
        );
        let excluded = Resize {
            exclude_outside: true,
            ..a
        };
        let taps = antialias_taps(&excluded, &ResizeAxis::new(4, 2, 0.5));
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

    #[test]
    fn tf_crop_and_resize_maps_into_the_roi_and_flags_what_falls_outside() {
        // ONNX: x = start·(in − 1) + o·(end − start)·(in − 1) / (out − 1). Cropping
        // [0.4, 0.6] of an axis of 4 to 3 outputs: x = 1.2 + 0.3·o = 1.2, 1.5, 1.8, so every
        // output blends inputs 1 and 2 with weights 0.2, 0.5 and 0.8 on input 2.
        let a = attrs(
            ResizeMode::Linear,
            CoordinateTransform::TfCropAndResize,
            NearestMode::RoundPreferFloor,
        );
        let axis = ResizeAxis::new(4, 3, 0.75).with_roi((0.4, 0.6));
        let taps = resize_axis_taps(&a, &axis);
        for (tap, w1) in taps.iter().zip([0.2f32, 0.5, 0.8]) {
            assert_eq!((tap.i0, tap.i1), (1, 2));
            assert!((tap.w1 - w1).abs() < 1e-6, "{tap:?}");
        }
        assert_eq!(extrapolated(&a, &axis), vec![false, false, false]);
        // [0.6, 1.7]: x = 1.8 + 1.65·o = 1.8, 3.45, 5.1; the last input is 3.
        let beyond = ResizeAxis::new(4, 3, 0.75).with_roi((0.6, 1.7));
        assert_eq!(extrapolated(&a, &beyond), vec![false, true, true]);
        // One output samples the middle of the roi: 0.5·(0.4 + 0.6)·3 = 1.5.
        let single = ResizeAxis::new(4, 1, 0.25).with_roi((0.4, 0.6));
        assert_eq!(single.original(&a, 0), 1.5);
        // Other modes clamp rather than extrapolate.
        let half = attrs(
            ResizeMode::Linear,
            CoordinateTransform::HalfPixel,
            NearestMode::RoundPreferFloor,
        );
        assert_eq!(
            extrapolated(&half, &ResizeAxis::new(2, 4, 2.0)),
            vec![false; 4]
        );
    }
}
