//! Reference kernels for the window functions and DFT: hand-computed values at sizes where
//! the cosines are exact (multiples of π/2), DFT's forward and inverse transforms of a
//! short signal, onesided output, dft_length truncation and padding, the axis forms, and
//! typed errors for bad inputs. The ONNX node tests check larger inputs.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::op::WindowKind;
use concord_core::{DType, Op, OpError, Tensor};
use concord_cpu::run_op;

fn tensor(result: Result<Tensor, concord_core::Error>) -> Tensor {
    match result {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn f64s(dims: &[usize], v: &[f64]) -> Tensor {
    tensor(Tensor::from_vec(dims.to_vec(), v.to_vec()))
}

fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let mut out = run_op(op, inputs, 1)?;
    match out.pop() {
        Some(t) if out.is_empty() => Ok(t),
        _ => panic!("{op:?} did not produce one output"),
    }
}

fn one(op: &Op, inputs: &[Option<&Tensor>]) -> Tensor {
    match run(op, inputs) {
        Ok(t) => t,
        Err(e) => panic!("{op:?}: {e}"),
    }
}

/// Values equal to within 1e-12 (the cosines of multiples of π/2 round in f64).
fn check(t: &Tensor, dims: &[usize], values: &[f64]) {
    assert_eq!(t.dims(), dims, "shape");
    let got = t.to_f64_vec();
    assert_eq!(got.len(), values.len(), "length");
    for (i, (g, e)) in got.iter().zip(values).enumerate() {
        assert!((g - e).abs() < 1e-12, "element {i}: got {g}, expected {e}");
    }
}

fn window(kind: WindowKind, periodic: bool) -> Op {
    Op::Window {
        kind,
        periodic,
        dtype: DType::F64,
    }
}

#[test]
fn windows_at_quarter_turns() {
    let four = Tensor::scalar_i64(4);
    let five = Tensor::scalar_i64(5);
    // Periodic size 4: cos(2πn/4) = 1, 0, −1, 0.
    // Hann 0.5 − 0.5·cos: 0, 0.5, 1, 0.5.
    let hann = window(WindowKind::Hann, true);
    check(&one(&hann, &[Some(&four)]), &[4], &[0.0, 0.5, 1.0, 0.5]);
    // Symmetric size 5 divides by 4 too, and ends where it started.
    let hann_sym = window(WindowKind::Hann, false);
    check(
        &one(&hann_sym, &[Some(&five)]),
        &[5],
        &[0.0, 0.5, 1.0, 0.5, 0.0],
    );
    // Hamming 25/46 − 21/46·cos: 4/46, 25/46, 1, 25/46.
    let hamming = window(WindowKind::Hamming, true);
    check(
        &one(&hamming, &[Some(&four)]),
        &[4],
        &[4.0 / 46.0, 25.0 / 46.0, 1.0, 25.0 / 46.0],
    );
    // Blackman 0.42 − 0.5·cos(x) + 0.08·cos(2x), cos(2x) = 1, −1, 1, −1: 0, 0.34, 1, 0.34.
    let blackman = window(WindowKind::Blackman, true);
    check(
        &one(&blackman, &[Some(&four)]),
        &[4],
        &[0.0, 0.34, 1.0, 0.34],
    );
    // A symmetric window of one sample is 0/0 in the spec's formula, NaN (as onnxruntime
    // gives); a periodic one is the window's value at 0 (0 for Hann); size 0 is empty.
    let single = one(&hann_sym, &[Some(&Tensor::scalar_i64(1))]);
    assert_eq!(single.dims(), &[1]);
    assert!(single.to_f64_vec()[0].is_nan(), "{:?}", single.to_f64_vec());
    check(&one(&hann, &[Some(&Tensor::scalar_i64(1))]), &[1], &[0.0]);
    check(&one(&hann, &[Some(&Tensor::scalar_i64(0))]), &[0], &[]);
    // The output type is the attribute's: f32 here.
    let f32_hann = Op::Window {
        kind: WindowKind::Hann,
        periodic: true,
        dtype: DType::F32,
    };
    assert_eq!(one(&f32_hann, &[Some(&four)]).dtype(), DType::F32);
}

#[test]
fn window_refuses_a_negative_or_non_integer_size() {
    let hann = window(WindowKind::Hann, true);
    assert!(matches!(
        run(&hann, &[Some(&Tensor::scalar_i64(-1))]),
        Err(OpError::Shape(_))
    ));
    assert!(matches!(
        run(&hann, &[Some(&Tensor::scalar_f32(4.0))]),
        Err(OpError::DType { index: 0, .. })
    ));
    assert!(matches!(
        run(&hann, &[None]),
        Err(OpError::MissingInput { index: 0, .. })
    ));
}

fn dft(axis: Option<i64>, inverse: bool, onesided: bool) -> Op {
    Op::Dft {
        axis,
        inverse,
        onesided,
    }
}

#[test]
fn dft_of_a_short_signal() {
    // x = 1, 2, 3, 4 (real, shape (1, 4, 1)): X_k = Σ x_n·(−i)^(kn):
    // X0 = 10, X1 = 1 − 2i − 3 + 4i = −2 + 2i, X2 = 1 − 2 + 3 − 4 = −2, X3 = −2 − 2i.
    let x = f64s(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    let spectrum = [10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0];
    check(
        &one(&dft(Some(1), false, false), &[Some(&x)]),
        &[1, 4, 2],
        &spectrum,
    );
    // Onesided: X0 … X(4/2).
    check(
        &one(&dft(Some(1), false, true), &[Some(&x)]),
        &[1, 3, 2],
        &spectrum[..6],
    );
    // The inverse of the spectrum (complex input) is x again, imaginary parts 0.
    let s = f64s(&[1, 4, 2], &spectrum);
    check(
        &one(&dft(Some(1), true, false), &[Some(&s)]),
        &[1, 4, 2],
        &[1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0],
    );
    // The opset 20 form: axis as input 2 (here −2, the signal axis), default −2.
    let minus_two = Tensor::scalar_i64(-2);
    check(
        &one(
            &dft(None, false, false),
            &[Some(&x), None, Some(&minus_two)],
        ),
        &[1, 4, 2],
        &spectrum,
    );
    check(
        &one(&dft(None, false, false), &[Some(&x)]),
        &[1, 4, 2],
        &spectrum,
    );
}

#[test]
fn inverse_onesided_dft_is_irfft() {
    // The onesided spectrum of x = 1, 2, 3, 4 (X0 = 10, X1 = −2 + 2i, X2 = −2) gives x back:
    // dft_length defaults to 2 · (3 − 1) = 4, and the output is real (last axis 1).
    let half = f64s(&[1, 3, 2], &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0]);
    check(
        &one(&dft(Some(1), true, true), &[Some(&half)]),
        &[1, 4, 1],
        &[1.0, 2.0, 3.0, 4.0],
    );
    // The imaginary parts of bin 0 and of the Nyquist bin (N even) drop out.
    let noisy = f64s(&[1, 3, 2], &[10.0, 7.0, -2.0, 2.0, -2.0, 5.0]);
    check(
        &one(&dft(Some(1), true, true), &[Some(&noisy)]),
        &[1, 4, 1],
        &[1.0, 2.0, 3.0, 4.0],
    );
    // dft_length 2 uses bins 0 and 1 only: (X0 + X1·(−1)^n) / 2, real parts: 4, 6.
    let two = Tensor::scalar_i64(2);
    check(
        &one(&dft(Some(1), true, true), &[Some(&half), Some(&two)]),
        &[1, 2, 1],
        &[4.0, 6.0],
    );
    // Two spectra along a leading axis, each inverted into its own slot: the one above and
    // that of the impulse 1, 0, 0, 0 (every bin 1); numpy's irfft gives the same.
    let two_spectra = f64s(
        &[2, 3, 2],
        &[
            10.0, 0.0, -2.0, 2.0, -2.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0,
        ],
    );
    check(
        &one(&dft(Some(1), true, true), &[Some(&two_spectra)]),
        &[2, 4, 1],
        &[1.0, 2.0, 3.0, 4.0, 1.0, 0.0, 0.0, 0.0],
    );
    // One bin has no default dft_length (2 · (1 − 1) = 0): it must be given. With it, the
    // single bin X0 = 6 is a constant signal of 6 / 3 = 2.
    let dc = f64s(&[1, 1, 2], &[6.0, 0.0]);
    let got = run(&dft(Some(1), true, true), &[Some(&dc)]);
    assert!(
        matches!(&got, Err(OpError::Shape(m)) if m.contains("needs dft_length")),
        "{got:?}"
    );
    let three = Tensor::scalar_i64(3);
    check(
        &one(&dft(Some(1), true, true), &[Some(&dc), Some(&three)]),
        &[1, 3, 1],
        &[2.0, 2.0, 2.0],
    );
    // A real input has no spectrum to invert.
    let real = f64s(&[1, 3, 1], &[1.0, 2.0, 3.0]);
    assert!(matches!(
        run(&dft(Some(1), true, true), &[Some(&real)]),
        Err(OpError::Shape(m)) if m.contains("complex")
    ));
}

#[test]
fn dft_length_truncates_and_pads() {
    let x = f64s(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    // Length 2 keeps 1, 2: X0 = 3, X1 = 1 − 2 = −1.
    let two = Tensor::scalar_i64(2);
    check(
        &one(&dft(Some(1), false, false), &[Some(&x), Some(&two)]),
        &[1, 2, 2],
        &[3.0, 0.0, -1.0, 0.0],
    );
    // A single 1 padded with zeros to length 3: every X_k = 1.
    let impulse = f64s(&[1, 1, 1], &[1.0]);
    let three = Tensor::scalar_i64(3);
    check(
        &one(&dft(Some(1), false, false), &[Some(&impulse), Some(&three)]),
        &[1, 3, 2],
        &[1.0, 0.0, 1.0, 0.0, 1.0, 0.0],
    );
}

#[test]
fn dft_along_another_axis() {
    // Shape (2, 2, 1): along axis 0 the pairs are (1, 3) and (2, 4): sums 4, 6 and
    // differences −2, −2. Along axis 1 the pairs are (1, 2) and (3, 4).
    let x = f64s(&[2, 2, 1], &[1.0, 2.0, 3.0, 4.0]);
    check(
        &one(&dft(Some(0), false, false), &[Some(&x)]),
        &[2, 2, 2],
        &[4.0, 0.0, 6.0, 0.0, -2.0, 0.0, -2.0, 0.0],
    );
    check(
        &one(&dft(Some(1), false, false), &[Some(&x)]),
        &[2, 2, 2],
        &[3.0, 0.0, -1.0, 0.0, 7.0, 0.0, -1.0, 0.0],
    );
}

#[test]
fn dft_axis_reaches_every_axis_but_the_last() {
    // The signal axis ranges over all but the last (parts) axis at any rank: axis 3 of a
    // rank-5 input, which holds x = 1, 2, 3, 4 (spectrum as in dft_of_a_short_signal).
    let x5 = f64s(&[1, 1, 1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    check(
        &one(&dft(Some(3), false, false), &[Some(&x5)]),
        &[1, 1, 1, 4, 2],
        &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0],
    );
    // At rank 2 only axis 0 is a signal axis: axis 1 is the parts axis.
    let x2 = f64s(&[4, 1], &[1.0, 2.0, 3.0, 4.0]);
    check(
        &one(&dft(Some(0), false, false), &[Some(&x2)]),
        &[4, 2],
        &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0],
    );
    for axis in [1, -1] {
        let got = run(&dft(Some(axis), false, false), &[Some(&x2)]);
        assert!(
            matches!(&got, Err(OpError::Shape(m)) if m.contains("out of range")),
            "axis {axis}: {got:?}"
        );
    }
    // A rank-1 input has no signal axis beside its parts: the error says what DFT needs,
    // not that some axis is out of range.
    let x1 = f64s(&[2], &[1.0, 2.0]);
    for axis in [None, Some(0)] {
        let got = run(&dft(axis, false, false), &[Some(&x1)]);
        assert!(
            matches!(&got, Err(OpError::Shape(m)) if m.contains("DFT needs input")),
            "axis {axis:?}: {got:?}"
        );
    }
}

/// DFT's twiddle tables and f64 output are checked against the memory budget, beyond the
/// output gate: a onesided f32 DFT of 1000 samples has an output of 501 × 2 elements
/// (12 bytes each with the f64 working copy the gate counts: 12,024 bytes) and scratch of
/// 8 · (2 · 1000 + 1002) = 24,016 bytes.
#[test]
fn dft_scratch_is_held_to_the_budget() {
    use concord_core::MemoryBudget;
    let x = tensor(Tensor::from_vec(vec![1, 1000, 1], vec![1.0f32; 1000]));
    let op = dft(Some(1), false, true);
    let got = concord_cpu::run_op_within(&op, &[Some(&x)], 1, MemoryBudget::new(24_015));
    assert!(
        matches!(&got, Err(OpError::MemoryBudget { what, bytes: Some(24_016), limit: 24_015 })
            if what.contains("twiddle tables of 1000 entries")),
        "{got:?}"
    );
    // At exactly the scratch's size it runs: all ones transform to 1000 at bin 0, 0 elsewhere.
    let out = match concord_cpu::run_op_within(&op, &[Some(&x)], 1, MemoryBudget::new(24_016)) {
        Ok(mut t) if t.len() == 1 => t.remove(0),
        other => panic!("{other:?}"),
    };
    assert_eq!(out.dims(), [1, 501, 2]);
    let v = out.to_f64_vec();
    assert!((v[0] - 1000.0).abs() < 1e-3, "bin 0: {}", v[0]);
    assert!(v[1..].iter().all(|e| e.abs() < 1e-3), "other bins not 0");
}

#[test]
fn dft_refuses_bad_inputs() {
    let x = f64s(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    // The last axis holds the real and imaginary parts: it cannot be the signal axis.
    assert!(matches!(
        run(&dft(Some(2), false, false), &[Some(&x)]),
        Err(OpError::Shape(_))
    ));
    assert!(matches!(
        run(&dft(Some(-1), false, false), &[Some(&x)]),
        Err(OpError::Shape(_))
    ));
    // A trailing axis of 3 is neither real nor complex.
    let bad = f64s(&[1, 1, 3], &[1.0, 2.0, 3.0]);
    assert!(matches!(
        run(&dft(Some(1), false, false), &[Some(&bad)]),
        Err(OpError::Shape(_))
    ));
    let zero = Tensor::scalar_i64(0);
    assert!(matches!(
        run(&dft(Some(1), false, false), &[Some(&x), Some(&zero)]),
        Err(OpError::Shape(_))
    ));
    let ints = tensor(Tensor::from_i64(vec![1, 2, 1], vec![1, 2]));
    assert!(matches!(
        run(&dft(Some(1), false, false), &[Some(&ints)]),
        Err(OpError::DType { index: 0, .. })
    ));
}

#[test]
fn stft_frames_a_signal() {
    // x = 1, 2, 3, 4 framed by 2 with step 2: frames (1, 2) and (3, 4); each frame's DFT
    // is (sum, difference): (3, −1) and (7, −1).
    let x = f64s(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
    let two = Tensor::scalar_i64(2);
    let one_step = Tensor::scalar_i64(1);
    let full = Op::Stft { onesided: false };
    check(
        &one(&full, &[Some(&x), Some(&two), None, Some(&two)]),
        &[1, 2, 2, 2],
        &[3.0, 0.0, -1.0, 0.0, 7.0, 0.0, -1.0, 0.0],
    );
    // Step 1 gives three frames; a window (1, 0) keeps each frame's first sample, so both
    // bins are that sample.
    let window = f64s(&[2], &[1.0, 0.0]);
    check(
        &one(&full, &[Some(&x), Some(&one_step), Some(&window)]),
        &[1, 3, 2, 2],
        &[1.0, 0.0, 1.0, 0.0, 2.0, 0.0, 2.0, 0.0, 3.0, 0.0, 3.0, 0.0],
    );
    // Onesided keeps bins 0 … 2/2: both, here.
    let half = Op::Stft { onesided: true };
    check(
        &one(&half, &[Some(&x), Some(&two), None, Some(&two)]),
        &[1, 2, 2, 2],
        &[3.0, 0.0, -1.0, 0.0, 7.0, 0.0, -1.0, 0.0],
    );
    // A complex signal 1+i, 2, 3−i, 4 (golden cannot check this path: onnxruntime 1.23.2's
    // STFT is wrong for complex signals): frames (1+i, 2) and (3−i, 4) transform to
    // (3+i, −1+i) and (7−i, −1−i).
    let complex = f64s(&[1, 4, 2], &[1.0, 1.0, 2.0, 0.0, 3.0, -1.0, 4.0, 0.0]);
    check(
        &one(&full, &[Some(&complex), Some(&two), None, Some(&two)]),
        &[1, 2, 2, 2],
        &[3.0, 1.0, -1.0, 1.0, 7.0, -1.0, -1.0, -1.0],
    );
    // One frame as long as the signal (frame_length 4 = L, implied by the window): the
    // complex signal 1+i, 2, 3−i, i windowed by (1, 2, 1, 2) is y = 1+i, 4, 3−i, 2i, and
    // Y_k = Σ y_n·(−i)^(kn): Y0 = 8 + 2i, Y1 = (1+i) − 4i − (3−i) − 2 = −4 − 2i,
    // Y2 = (1+i) − 4 + (3−i) − 2i = −2i, Y3 = (1+i) + 4i − (3−i) + 2 = 6i (numpy's fft of
    // x·w gives the same).
    let signal = f64s(&[1, 4, 2], &[1.0, 1.0, 2.0, 0.0, 3.0, -1.0, 0.0, 1.0]);
    let weights = f64s(&[4], &[1.0, 2.0, 1.0, 2.0]);
    check(
        &one(&full, &[Some(&signal), Some(&one_step), Some(&weights)]),
        &[1, 1, 4, 2],
        &[8.0, 2.0, -4.0, -2.0, 0.0, -2.0, 0.0, 6.0],
    );
    // A window that is not 1-D is refused as such when it would set frame_length.
    let square = f64s(&[2, 2], &[1.0; 4]);
    let got = run(&full, &[Some(&x), Some(&two), Some(&square)]);
    assert!(
        matches!(&got, Err(OpError::Shape(m)) if m.contains("1-D window")),
        "{got:?}"
    );
    // A frame longer than the signal, and neither window nor frame_length, are refused.
    let five = Tensor::scalar_i64(5);
    assert!(matches!(
        run(&full, &[Some(&x), Some(&two), None, Some(&five)]),
        Err(OpError::Shape(_))
    ));
    assert!(matches!(
        run(&full, &[Some(&x), Some(&two)]),
        Err(OpError::MissingInput { index: 3, .. })
    ));
}

fn mel_inputs(bins: i64, dft: i64, rate: i64, lower: f32, upper: f32) -> Vec<Tensor> {
    vec![
        Tensor::scalar_i64(bins),
        Tensor::scalar_i64(dft),
        Tensor::scalar_i64(rate),
        Tensor::scalar_f32(lower),
        Tensor::scalar_f32(upper),
    ]
}

fn mel(dtype: DType, inputs: &[Tensor]) -> Result<Tensor, OpError> {
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(Some).collect();
    let out = run(&Op::MelWeightMatrix { dtype }, &refs)?;
    // Inference on the same constant operands gives the kernel's type.
    let facts = concord_core::infer::infer_on_tensors(&Op::MelWeightMatrix { dtype }, &refs, 1)?;
    assert_eq!(facts[0].dtype, out.dtype());
    assert_eq!(facts[0].shape, out.shape().to_sym());
    Ok(out)
}

#[test]
fn mel_weight_matrix_triangles() {
    // 4 mel bins, dft_length 10 (6 spectrogram bins), 1000 Hz, 50 to 450 Hz. mel(f) =
    // 2595·log10(1 + f/700): mel(50) = 77.75, mel(450) = 559.49, cut into 4 + 2 = 6 steps of
    // 80.29; the points 77.75, 158.04, 238.33, 318.62, 398.91, 479.20 mel are 50, 105.4,
    // 164.9, 228.6, 297.2, 370.9 Hz, at bins floor(11·f/1000) = 0, 1, 1, 2, 3, 4. Filter m
    // spans points m, m+1, m+2: (0, 1, 1) rises to 1 at bin 1; (1, 1, 2) is 1 at bin 1;
    // (1, 2, 3) and (2, 3, 4) rise to 1 at bins 2 and 3. onnxruntime 1.23.2 gives the same.
    let t = match mel(DType::F32, &mel_inputs(4, 10, 1000, 50.0, 450.0)) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(t.dtype(), DType::F32);
    #[rustfmt::skip]
    let want = [
        0.0, 0.0, 0.0, 0.0,
        1.0, 1.0, 0.0, 0.0,
        0.0, 0.0, 1.0, 0.0,
        0.0, 0.0, 0.0, 1.0,
        0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0,
    ];
    check(&t, &[6, 4], &want);

    // 5 mel bins, dft_length 32 (17 bins), 16 kHz, 100 to 7000 Hz: 7 steps of 364.56 mel
    // from 150.49; the points are 100, 405.6, 827.6, 1411.1, 2217.9, 3332.6, 4871.0 Hz at
    // bins floor(33·f/16000) = 0, 0, 1, 2, 4, 6, 10. Filter 2 (1, 2, 4) is 1 at bin 2 and
    // (4 − 3)/(4 − 2) = 0.5 at bin 3; filter 3 (2, 4, 6) is 0.5, 1, 0.5 at bins 3 to 5;
    // filter 4 (4, 6, 10) rises 0.5, 1 and falls 0.75, 0.5, 0.25 at bins 7 to 9.
    // onnxruntime 1.23.2 gives the same matrix.
    let t = match mel(DType::F64, &mel_inputs(5, 32, 16000, 100.0, 7000.0)) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let mut want = vec![0.0; 17 * 5];
    for (bin, filter, value) in [
        (0, 0, 1.0),
        (1, 1, 1.0),
        (2, 2, 1.0),
        (3, 2, 0.5),
        (3, 3, 0.5),
        (4, 3, 1.0),
        (5, 3, 0.5),
        (5, 4, 0.5),
        (6, 4, 1.0),
        (7, 4, 0.75),
        (8, 4, 0.5),
        (9, 4, 0.25),
    ] {
        want[bin * 5 + filter] = value;
    }
    check(&t, &[17, 5], &want);
    // An integer output truncates each weight (onnxruntime divides in the output type):
    // only the peaks of 1 remain.
    let ints = match mel(DType::I64, &mel_inputs(5, 32, 16000, 100.0, 7000.0)) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let peaks: Vec<f64> = want
        .iter()
        .map(|&w| if w == 1.0 { 1.0 } else { 0.0 })
        .collect();
    assert_eq!(ints.to_f64_vec(), peaks);
}

#[test]
fn mel_weight_matrix_refuses_bad_operands() {
    // No mel bins, and a sample rate of 0.
    assert!(matches!(
        mel(DType::F32, &mel_inputs(0, 10, 1000, 0.0, 400.0)),
        Err(OpError::Shape(m)) if m.contains("num_mel_bins")
    ));
    assert!(matches!(
        mel(DType::F32, &mel_inputs(2, 10, 0, 0.0, 400.0)),
        Err(OpError::Shape(m)) if m.contains("sample_rate")
    ));
    // An upper edge far past sample_rate / 2 puts filters past the 5 bins of dft_length 8:
    // the points (0, 0.25, 0.5 and 0.75 of mel(2000) = 1521.4) are 0, 280.9, 675.1 and
    // 1226.9 Hz, at bins floor(9·f/1000) = 0, 2, 6, 11, so filter 0 already falls to bin 5.
    assert!(matches!(
        mel(DType::F32, &mel_inputs(2, 8, 1000, 0.0, 2000.0)),
        Err(OpError::Shape(m)) if m.contains("outside the 5 bins")
    ));
    // Edges must be finite floats; the counts integers.
    assert!(matches!(
        mel(DType::F32, &mel_inputs(2, 8, 1000, f32::NAN, 400.0)),
        Err(OpError::Shape(_))
    ));
    // The kernel itself refuses an integer edge. Run alone: through `mel`, whose inference
    // call refuses it too, a kernel that accepted it would go unseen.
    let mut int_edge = mel_inputs(2, 8, 1000, 0.0, 400.0);
    int_edge[3] = Tensor::scalar_i64(0);
    let refs: Vec<Option<&Tensor>> = int_edge.iter().map(Some).collect();
    let got = run(&Op::MelWeightMatrix { dtype: DType::F32 }, &refs);
    assert!(
        matches!(&got, Err(OpError::DType { index: 3, .. })),
        "{got:?}"
    );
    // An edge of the right type must still be one value.
    let mut two_edges = mel_inputs(2, 8, 1000, 0.0, 400.0);
    two_edges[4] = tensor(Tensor::from_vec(vec![2], vec![300.0f32, 400.0]));
    assert!(matches!(
        mel(DType::F32, &two_edges),
        Err(OpError::Shape(m)) if m.contains("input 4 (upper_edge_hertz) must hold one value")
    ));
    let mut float_count = mel_inputs(2, 8, 1000, 0.0, 400.0);
    float_count[1] = Tensor::scalar_f32(8.0);
    assert!(matches!(
        mel(DType::F32, &float_count),
        Err(OpError::DType { index: 1, .. })
    ));
}
