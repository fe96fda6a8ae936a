//! Conv kernel tests: hand-computed examples, and a straightforward direct convolution
//! (seven nested loops, no im2col, no blocking) as the oracle for everything else.

mod nn_support;

use concord_core::op::{AutoPad, Conv};
use concord_core::{DType, MemoryBudget, Op, OpError, Tensor};
use concord_cpu::run_op_within;
use nn_support::{
    check, check_error, f16s, f32s, f64s_as_f32, i64s, ok, run, run_and_check_inference, values,
    Tolerance,
};

fn conv(attrs: Conv) -> Op {
    Op::Conv(attrs)
}

fn plain() -> Conv {
    Conv {
        group: 1,
        ..Conv::default()
    }
}

/// One convolution problem with explicit geometry; `reference` is the oracle.
#[derive(Clone, Debug)]
struct ConvProblem {
    x_dims: Vec<usize>,
    w_dims: Vec<usize>,
    group: usize,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads_begin: Vec<usize>,
    pads_end: Vec<usize>,
    bias: bool,
}

impl ConvProblem {
    fn new(x_dims: &[usize], w_dims: &[usize]) -> Self {
        let n = x_dims.len() - 2;
        ConvProblem {
            x_dims: x_dims.to_vec(),
            w_dims: w_dims.to_vec(),
            group: 1,
            strides: vec![1; n],
            dilations: vec![1; n],
            pads_begin: vec![0; n],
            pads_end: vec![0; n],
            bias: false,
        }
    }

    fn attrs(&self) -> Conv {
        let mut pads = self.pads_begin.clone();
        pads.extend(&self.pads_end);
        Conv {
            group: self.group,
            strides: self.strides.clone(),
            dilations: self.dilations.clone(),
            pads,
            ..Conv::default()
        }
    }

    /// The direct definition: y[n, m, o…] = b[m] + Σ_c Σ_k x[n, c, o·s + k·d − pb] · w[m, c, k],
    /// with out-of-range input coordinates reading 0.
    fn reference(&self, x: &[f64], w: &[f64], b: &[f64]) -> (Vec<usize>, Vec<f64>) {
        let spatial = self.x_dims.len() - 2;
        let (batch, channels) = (self.x_dims[0], self.x_dims[1]);
        let (m_total, cg) = (self.w_dims[0], self.w_dims[1]);
        let mg = m_total / self.group;
        let in_sp = &self.x_dims[2..];
        let k_sp = &self.w_dims[2..];
        let out_sp: Vec<usize> = (0..spatial)
            .map(|i| {
                let dilated = (k_sp[i] - 1) * self.dilations[i] + 1;
                (in_sp[i] + self.pads_begin[i] + self.pads_end[i] - dilated) / self.strides[i] + 1
            })
            .collect();
        let out_count: usize = out_sp.iter().product();
        let k_count: usize = k_sp.iter().product();
        let in_count: usize = in_sp.iter().product();
        let mut y = Vec::new();
        for n in 0..batch {
            for m in 0..m_total {
                let g = m / mg;
                for o_flat in 0..out_count {
                    let o = unravel(o_flat, &out_sp);
                    let mut acc = if self.bias { b[m] } else { 0.0 };
                    for cl in 0..cg {
                        let c = g * cg + cl;
                        for k_flat in 0..k_count {
                            let k = unravel(k_flat, k_sp);
                            let mut in_flat = 0usize;
                            let mut inside = true;
                            for i in 0..spatial {
                                let coord = (o[i] * self.strides[i] + k[i] * self.dilations[i])
                                    as i64
                                    - self.pads_begin[i] as i64;
                                if coord < 0 || coord >= in_sp[i] as i64 {
                                    inside = false;
                                }
                                in_flat = in_flat * in_sp[i] + coord.max(0) as usize;
                            }
                            if inside {
                                let xv = x[(n * channels + c) * in_count + in_flat];
                                let wv = w[(m * cg + cl) * k_count + k_flat];
                                acc += xv * wv;
                            }
                        }
                    }
                    y.push(acc);
                }
            }
        }
        let mut dims = vec![batch, m_total];
        dims.extend(out_sp);
        (dims, y)
    }

    /// Runs the kernel on deterministic values and compares with the oracle, exactly.
    fn check(&self, seed: u64) {
        let x_len: usize = self.x_dims.iter().product();
        let w_len: usize = self.w_dims.iter().product();
        let x = values(x_len, seed);
        let w = values(w_len, seed + 1);
        let b = values(self.w_dims[0], seed + 2);
        let (dims, want) = self.reference(&x, &w, &b);
        let xt = f64s_as_f32(&self.x_dims, &x);
        let wt = f64s_as_f32(&self.w_dims, &w);
        let bt = f64s_as_f32(&[self.w_dims[0]], &b);
        let inputs = [Some(&xt), Some(&wt), self.bias.then_some(&bt)];
        let got = ok(&conv(self.attrs()), &inputs);
        check(&got, DType::F32, &dims, &want, Tolerance::Exact);
    }
}

fn unravel(mut index: usize, dims: &[usize]) -> Vec<usize> {
    let mut coords = vec![0; dims.len()];
    for (c, &d) in coords.iter_mut().zip(dims).rev() {
        *c = index % d;
        index /= d;
    }
    coords
}

#[test]
fn two_by_two_ones_kernel_sums_each_window() {
    // x = 1..9 as 3x3; a 2x2 kernel of ones sums each 2x2 block.
    let x = f32s(&[1, 1, 3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
    let w = f32s(&[1, 1, 2, 2], &[1.; 4]);
    let y = ok(&conv(plain()), &[Some(&x), Some(&w)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 2, 2],
        &[12., 16., 24., 28.],
        Tolerance::Exact,
    );
}

#[test]
fn asymmetric_pads_add_rows_and_columns_on_the_named_side_only() {
    // pads [top 1, left 0, bottom 0, right 1] around 1..9, kernel 1x1 of weight 2 and bias 1:
    // a padded row on top and a padded column on the right produce the bias alone.
    let x = f32s(&[1, 1, 3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
    let w = f32s(&[1, 1, 1, 1], &[2.]);
    let b = f32s(&[1], &[1.]);
    let attrs = Conv {
        pads: vec![1, 0, 0, 1],
        ..plain()
    };
    let y = ok(&conv(attrs), &[Some(&x), Some(&w), Some(&b)]);
    #[rustfmt::skip]
    let want = [
        1., 1., 1., 1.,
        3., 5., 7., 1.,
        9., 11., 13., 1.,
        15., 17., 19., 1.,
    ];
    check(&y, DType::F32, &[1, 1, 4, 4], &want, Tolerance::Exact);
}

#[test]
fn one_d_conv_with_stride_and_dilation_by_hand() {
    // x = [1, 2, 3, 4, 5, 6, 7], kernel [1, 10] dilated by 2, stride 2:
    // y[o] = x[2o] + 10·x[2o + 2] for o = 0, 1, 2.
    let x = f32s(&[1, 1, 7], &[1., 2., 3., 4., 5., 6., 7.]);
    let w = f32s(&[1, 1, 2], &[1., 10.]);
    let attrs = Conv {
        strides: vec![2],
        dilations: vec![2],
        ..plain()
    };
    let y = ok(&conv(attrs), &[Some(&x), Some(&w)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 3],
        &[31., 53., 75.],
        Tolerance::Exact,
    );
}

#[test]
fn same_upper_and_same_lower_put_the_odd_pad_on_opposite_ends() {
    // x = [1, 2, 3, 4], kernel [1, 1]: output length 4 needs one pad cell.
    let x = f32s(&[1, 1, 4], &[1., 2., 3., 4.]);
    let w = f32s(&[1, 1, 2], &[1., 1.]);
    let upper = Conv {
        auto_pad: AutoPad::SameUpper,
        ..plain()
    };
    let y = ok(&conv(upper), &[Some(&x), Some(&w)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[3., 5., 7., 4.],
        Tolerance::Exact,
    );
    let lower = Conv {
        auto_pad: AutoPad::SameLower,
        ..plain()
    };
    let y = ok(&conv(lower), &[Some(&x), Some(&w)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[1., 3., 5., 7.],
        Tolerance::Exact,
    );
}

#[test]
fn same_padding_with_stride_matches_explicit_pads() {
    // in 6, kernel 3, stride 2: output ceil(6/2) = 3, total pad (3-1)·2 + 3 − 6 = 1,
    // so SAME_UPPER is pads (0, 1) and SAME_LOWER is pads (1, 0) on each spatial axis.
    let mut problem = ConvProblem::new(&[1, 2, 6, 6], &[3, 2, 3, 3]);
    problem.strides = vec![2, 2];
    for (auto_pad, begin, end) in [(AutoPad::SameUpper, 0, 1), (AutoPad::SameLower, 1, 0)] {
        problem.pads_begin = vec![begin; 2];
        problem.pads_end = vec![end; 2];
        let x = values(72, 5);
        let w = values(54, 6);
        let (dims, want) = problem.reference(&x, &w, &[]);
        assert_eq!(dims, [1, 3, 3, 3]);
        let attrs = Conv {
            auto_pad,
            strides: vec![2, 2],
            // Explicit pads are ignored when auto_pad is set.
            pads: vec![3, 3, 3, 3],
            ..plain()
        };
        let got = ok(
            &conv(attrs),
            &[
                Some(&f64s_as_f32(&[1, 2, 6, 6], &x)),
                Some(&f64s_as_f32(&[3, 2, 3, 3], &w)),
            ],
        );
        check(&got, DType::F32, &dims, &want, Tolerance::Exact);
    }
}

#[test]
fn valid_padding_ignores_explicit_pads() {
    let x = f32s(&[1, 1, 3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
    let w = f32s(&[1, 1, 2, 2], &[1.; 4]);
    let attrs = Conv {
        auto_pad: AutoPad::Valid,
        pads: vec![1, 1, 1, 1],
        ..plain()
    };
    let y = ok(&conv(attrs), &[Some(&x), Some(&w)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 2, 2],
        &[12., 16., 24., 28.],
        Tolerance::Exact,
    );
}

#[test]
fn matches_direct_convolution_on_strides_dilations_and_asymmetric_pads() {
    let mut p = ConvProblem::new(&[2, 3, 9, 8], &[4, 3, 3, 2]);
    p.strides = vec![2, 1];
    p.dilations = vec![1, 2];
    p.pads_begin = vec![2, 0];
    p.pads_end = vec![1, 3];
    p.bias = true;
    p.check(10);
}

#[test]
fn matches_direct_convolution_with_groups() {
    let mut p = ConvProblem::new(&[1, 6, 7, 7], &[4, 3, 3, 3]);
    p.group = 2;
    p.pads_begin = vec![1, 1];
    p.pads_end = vec![1, 1];
    p.bias = true;
    p.check(20);
}

#[test]
fn matches_direct_convolution_depthwise_with_channel_multiplier() {
    // group == C == 4, two filters per channel (M = 8, W[1] = 1).
    let mut p = ConvProblem::new(&[2, 4, 6, 5], &[8, 1, 3, 3]);
    p.group = 4;
    p.strides = vec![2, 2];
    p.pads_begin = vec![1, 0];
    p.pads_end = vec![0, 1];
    p.check(30);
}

#[test]
fn matches_direct_convolution_in_one_and_three_dimensions() {
    let mut p1 = ConvProblem::new(&[2, 3, 11], &[5, 3, 4]);
    p1.strides = vec![3];
    p1.dilations = vec![2];
    p1.pads_begin = vec![2];
    p1.pads_end = vec![1];
    p1.bias = true;
    p1.check(40);

    let mut p3 = ConvProblem::new(&[1, 2, 4, 5, 3], &[3, 2, 2, 3, 2]);
    p3.strides = vec![1, 2, 1];
    p3.pads_begin = vec![1, 0, 1];
    p3.pads_end = vec![0, 1, 1];
    p3.check(50);
}

#[test]
fn matches_direct_convolution_on_sizes_that_cross_the_multiply_blocks() {
    // K = 20·3·3 = 180 rows and 19·19 = 361 columns, M = 70: partial register tiles and
    // several packed blocks in every direction.
    let mut p = ConvProblem::new(&[1, 20, 19, 19], &[70, 20, 3, 3]);
    p.pads_begin = vec![1, 1];
    p.pads_end = vec![1, 1];
    p.bias = true;
    p.check(60);
    // A pointwise (1x1) conv takes the no-im2col path.
    let p = ConvProblem::new(&[2, 300, 3, 5], &[7, 300, 1, 1]);
    p.check(70);
}

/// A 1×1 kernel with stride 1 reads its input unchanged only when nothing is padded: padding
/// at the beginning or the end of an axis alone, or at the beginning (or the end) of every
/// axis, adds rows and columns of bias alone around the product. Each against the direct
/// definition.
#[test]
fn matches_direct_convolution_on_one_by_one_kernels_padded_on_one_side() {
    let pads: [([usize; 2], [usize; 2]); 4] = [
        ([1, 0], [0, 0]),
        ([0, 0], [0, 1]),
        ([1, 2], [0, 0]),
        ([0, 0], [2, 1]),
    ];
    for (seed, (begin, end)) in pads.into_iter().enumerate() {
        let mut p = ConvProblem::new(&[1, 3, 4, 5], &[2, 3, 1, 1]);
        p.pads_begin = begin.to_vec();
        p.pads_end = end.to_vec();
        p.bias = true;
        p.check(40 + seed as u64);
    }
}

/// A pointwise Conv (1×1 kernel, stride 1, no padding: a ResNet projection) multiplies its
/// input as it is, without an im2col copy of it, so it runs within a budget its output fits
/// though a copy of the input would not: 64 channels × 32×32 positions of f64 are 524,288
/// bytes, over the 200,000-byte limit, while the output, 8×32×32 f32 values with the f64
/// working copy beside them, is 98,304 bytes.
#[test]
fn pointwise_conv_needs_no_copy_of_its_input() {
    let p = ConvProblem::new(&[1, 64, 32, 32], &[8, 64, 1, 1]);
    let x = values(64 * 32 * 32, 50);
    let w = values(8 * 64, 51);
    let (dims, want) = p.reference(&x, &w, &[]);
    let xt = f64s_as_f32(&p.x_dims, &x);
    let wt = f64s_as_f32(&p.w_dims, &w);
    let outputs = run_op_within(
        &conv(p.attrs()),
        &[Some(&xt), Some(&wt)],
        1,
        MemoryBudget::new(200_000),
    );
    assert!(
        outputs.is_ok(),
        "a pointwise Conv within 200,000 bytes failed: {outputs:?}"
    );
    let got = outputs.expect("checked just above").remove(0);
    check(&got, DType::F32, &dims, &want, Tolerance::Exact);
}

/// With no input channels (C = 0) each output is a sum over nothing, 0, plus its channel's
/// bias: a 4×4 input under a 3×3 kernel still gives 2×2 outputs, each the bias alone.
#[test]
fn no_input_channels_give_the_bias_alone() {
    let x = f32s(&[1, 0, 4, 4], &[]);
    let w = f32s(&[2, 0, 3, 3], &[]);
    let b = f32s(&[2], &[1.5, -2.0]);
    let y = ok(&conv(plain()), &[Some(&x), Some(&w), Some(&b)]);
    check(
        &y,
        DType::F32,
        &[1, 2, 2, 2],
        &[1.5, 1.5, 1.5, 1.5, -2., -2., -2., -2.],
        Tolerance::Exact,
    );
}

#[test]
fn pads_larger_than_the_kernel_give_bias_only_borders() {
    let mut p = ConvProblem::new(&[1, 1, 3, 3], &[1, 1, 2, 2]);
    p.pads_begin = vec![3, 2];
    p.pads_end = vec![2, 3];
    p.bias = true;
    p.check(80);
}

#[test]
fn kernel_shape_attribute_must_agree_with_w() {
    let x = f32s(&[1, 1, 3, 3], &[0.; 9]);
    let w = f32s(&[1, 1, 2, 2], &[1.; 4]);
    let agreeing = Conv {
        kernel_shape: vec![2, 2],
        ..plain()
    };
    assert!(run(&conv(agreeing), &[Some(&x), Some(&w)]).is_ok());
    let disagreeing = Conv {
        kernel_shape: vec![3, 3],
        ..plain()
    };
    check_error(
        run(&conv(disagreeing), &[Some(&x), Some(&w)]),
        |e| {
            matches!(
                e,
                OpError::Attribute {
                    name: "kernel_shape",
                    ..
                }
            )
        },
        &["[3, 3]", "[1, 1, 2, 2]"],
    );
}

#[test]
fn f16_inputs_give_f16_outputs() {
    let x = f16s(&[1, 1, 3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
    let w = f16s(&[1, 1, 2, 2], &[0.5; 4]);
    let b = f16s(&[1], &[0.25]);
    let y = ok(&conv(plain()), &[Some(&x), Some(&w), Some(&b)]);
    check(
        &y,
        DType::F16,
        &[1, 1, 2, 2],
        &[6.25, 8.25, 12.25, 14.25],
        Tolerance::Exact,
    );
}

#[test]
fn empty_batch_gives_an_empty_output() {
    let x = f32s(&[0, 2, 4, 4], &[]);
    let w = f32s(&[3, 2, 3, 3], &[0.; 54]);
    let y = ok(&conv(plain()), &[Some(&x), Some(&w)]);
    assert_eq!(y.dims(), [0, 3, 2, 2]);
}

#[test]
fn weight_rank_mismatch_is_a_shape_error_naming_both_shapes() {
    let x = f32s(&[1, 3, 5, 5], &[0.; 75]);
    let w = f32s(&[2, 3, 3], &[0.; 18]);
    check_error(
        run(&conv(plain()), &[Some(&x), Some(&w)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[2, 3, 3]", "[1, 3, 5, 5]"],
    );
}

#[test]
fn channel_mismatch_is_a_shape_error_naming_both_shapes_and_group() {
    let x = f32s(&[1, 4, 5, 5], &[0.; 100]);
    let w = f32s(&[2, 3, 3, 3], &[0.; 54]);
    check_error(
        run(&conv(plain()), &[Some(&x), Some(&w)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[1, 4, 5, 5]", "[2, 3, 3, 3]", "group 1"],
    );
}

#[test]
fn group_that_does_not_divide_the_output_channels_is_an_error() {
    // C = 4 = W[1]·group = 2·2 is fine, but M = 3 is not a multiple of 2.
    let x = f32s(&[1, 4, 3, 3], &[0.; 36]);
    let w = f32s(&[3, 2, 1, 1], &[0.; 6]);
    let attrs = Conv {
        group: 2,
        ..plain()
    };
    check_error(
        run(&conv(attrs), &[Some(&x), Some(&w)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[3, 2, 1, 1]", "group 2"],
    );
    let zero = Conv {
        group: 0,
        ..plain()
    };
    check_error(
        run(&conv(zero), &[Some(&x), Some(&w)]),
        |e| matches!(e, OpError::Attribute { name: "group", .. }),
        &[],
    );
}

#[test]
fn bias_of_the_wrong_length_is_an_error() {
    let x = f32s(&[1, 1, 3, 3], &[0.; 9]);
    let w = f32s(&[2, 1, 1, 1], &[0.; 2]);
    let b = f32s(&[3], &[0.; 3]);
    check_error(
        run(&conv(plain()), &[Some(&x), Some(&w), Some(&b)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[3]", "[2, 1, 1, 1]"],
    );
}

#[test]
fn kernel_larger_than_the_padded_input_is_an_error() {
    let x = f32s(&[1, 1, 2, 2], &[0.; 4]);
    let w = f32s(&[1, 1, 3, 3], &[0.; 9]);
    check_error(
        run(&conv(plain()), &[Some(&x), Some(&w)]),
        |e| matches!(e, OpError::Shape(_)),
        &["kernel"],
    );
}

#[test]
fn non_float_and_mixed_dtypes_are_dtype_errors() {
    let xi = i64s(&[1, 1, 2, 2], &[0; 4]);
    let w = f32s(&[1, 1, 1, 1], &[1.]);
    check_error(
        run(&conv(plain()), &[Some(&xi), Some(&w)]),
        |e| matches!(e, OpError::DType { index: 0, .. }),
        &[],
    );
    let x16 = f16s(&[1, 1, 2, 2], &[0.; 4]);
    check_error(
        run(&conv(plain()), &[Some(&x16), Some(&w)]),
        |e| {
            matches!(
                e,
                OpError::DType {
                    index: 1,
                    actual: DType::F32,
                    ..
                }
            )
        },
        &[],
    );
}

#[test]
fn missing_weights_are_a_missing_input_error() {
    let x = f32s(&[1, 1, 2, 2], &[0.; 4]);
    let inputs: [Option<&Tensor>; 1] = [Some(&x)];
    check_error(
        run(&conv(plain()), &inputs),
        |e| matches!(e, OpError::MissingInput { index: 1, .. }),
        &[],
    );
}

// ConvTranspose.

fn conv_transpose(conv: Conv, output_padding: &[usize], output_shape: &[usize]) -> Op {
    Op::ConvTranspose(concord_core::op::ConvTranspose {
        conv,
        output_padding: output_padding.to_vec(),
        output_shape: output_shape.to_vec(),
    })
}

/// x = [1, 10, 100] and kernel [1, 2, 3] with stride 2: input i writes 1·x, 2·x, 3·x at
/// 2i, 2i + 1, 2i + 2, so the full output is [1, 2, 1+10, 20, 10·3+100, 200, 300].
#[test]
fn one_d_conv_transpose_scatters_each_input_by_hand() {
    let x = f32s(&[1, 1, 3], &[1., 10., 100.]);
    let w = f32s(&[1, 1, 3], &[1., 2., 3.]);
    let strided = |auto_pad| Conv {
        auto_pad,
        strides: vec![2],
        ..plain()
    };
    let full = [1., 2., 13., 20., 130., 200., 300.];
    let cases: [(Op, Vec<f64>); 6] = [
        (
            conv_transpose(strided(AutoPad::NotSet), &[], &[]),
            full.to_vec(),
        ),
        // SAME: output 3·2 = 6, one cell cropped, at the end (UPPER) or the beginning.
        (
            conv_transpose(strided(AutoPad::SameUpper), &[], &[]),
            full[..6].to_vec(),
        ),
        (
            conv_transpose(strided(AutoPad::SameLower), &[], &[]),
            full[1..].to_vec(),
        ),
        // output_shape 6 without auto_pad crops at the beginning, as onnxruntime does; a
        // larger one than the full output ends in zeros.
        (
            conv_transpose(strided(AutoPad::NotSet), &[], &[6]),
            full[1..].to_vec(),
        ),
        (
            conv_transpose(strided(AutoPad::NotSet), &[], &[9]),
            [&full[..], &[0., 0.]].concat(),
        ),
        // output_padding adds a cell no tap reaches.
        (
            conv_transpose(strided(AutoPad::NotSet), &[1], &[]),
            [&full[..], &[0.]].concat(),
        ),
    ];
    for (op, want) in cases {
        let y = run_and_check_inference(&op, &[Some(&x), Some(&w)], &[]);
        check(&y, DType::F32, &[1, 1, want.len()], &want, Tolerance::Exact);
    }
    // Pads 1 + 2 crop the full output; dilation 2 spreads the taps: input i writes at
    // i, i + 2, i + 4.
    let padded = Conv {
        pads: vec![1, 2],
        ..strided(AutoPad::NotSet)
    };
    let y = ok(&conv_transpose(padded, &[], &[]), &[Some(&x), Some(&w)]);
    check(&y, DType::F32, &[1, 1, 4], &full[1..5], Tolerance::Exact);
    let dilated = Conv {
        dilations: vec![2],
        ..plain()
    };
    let y = ok(&conv_transpose(dilated, &[], &[]), &[Some(&x), Some(&w)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 7],
        &[1., 10., 102., 20., 203., 30., 300.],
        Tolerance::Exact,
    );
}

/// Groups keep channels apart and the bias is added to every output cell: two groups of
/// one input and one output channel, 1x1 kernels of 2 and 3, biases 1 and -1.
#[test]
fn conv_transpose_groups_and_bias_by_hand() {
    let x = f32s(&[1, 2, 2], &[1., 2., 3., 4.]);
    let w = f32s(&[2, 1, 1], &[2., 3.]);
    let b = f32s(&[2], &[1., -1.]);
    let attrs = Conv {
        group: 2,
        ..plain()
    };
    let y = ok(
        &conv_transpose(attrs, &[], &[]),
        &[Some(&x), Some(&w), Some(&b)],
    );
    check(
        &y,
        DType::F32,
        &[1, 2, 2],
        &[3., 5., 8., 11.],
        Tolerance::Exact,
    );
}

/// ConvTranspose with W is the adjoint of Conv with the same W and geometry:
/// <Conv(x), y> = <x, ConvTranspose(y)> for every x and y, when output_padding makes the
/// transposed output as large as Conv's input. Checked over 1-, 2- and 3-D geometries with
/// groups, strides, dilations and asymmetric pads; the dyadic values keep both sides exact.
#[test]
fn conv_transpose_is_the_adjoint_of_conv() {
    // (x dims, w dims, group, strides, dilations, pads).
    type Geometry = (
        &'static [usize],
        &'static [usize],
        usize,
        &'static [usize],
        &'static [usize],
        &'static [usize],
    );
    let geometries: [Geometry; 5] = [
        (&[2, 3, 11], &[4, 3, 3], 1, &[2], &[1], &[1, 0]),
        (
            &[1, 4, 7, 6],
            &[6, 2, 3, 2],
            2,
            &[2, 3],
            &[1, 2],
            &[0, 1, 2, 0],
        ),
        (
            &[2, 2, 5, 5],
            &[2, 1, 2, 3],
            2,
            &[1, 1],
            &[2, 1],
            &[1, 1, 1, 1],
        ),
        (
            &[1, 2, 4, 5, 3],
            &[3, 2, 2, 2, 1],
            1,
            &[2, 1, 2],
            &[1, 2, 1],
            &[],
        ),
        (
            &[1, 3, 9, 4],
            &[3, 1, 3, 3],
            3,
            &[3, 2],
            &[2, 1],
            &[2, 1, 0, 2],
        ),
    ];
    for (seed, (x_dims, w_dims, group, strides, dilations, pads)) in
        geometries.into_iter().enumerate()
    {
        let conv_attrs = Conv {
            group,
            strides: strides.to_vec(),
            dilations: dilations.to_vec(),
            pads: pads.to_vec(),
            ..plain()
        };
        let x_len: usize = x_dims.iter().product();
        let w_len: usize = w_dims.iter().product();
        let x = f64s_as_f32(x_dims, &values(x_len, 3 * seed as u64));
        let w = f64s_as_f32(w_dims, &values(w_len, 3 * seed as u64 + 1));
        let forward = ok(&conv(conv_attrs.clone()), &[Some(&x), Some(&w)]);
        let y_dims = forward.shape().dims().to_vec();
        let y_len: usize = y_dims.iter().product();
        let y = f64s_as_f32(&y_dims, &values(y_len, 3 * seed as u64 + 2));
        // The transposed output's full extent falls short of Conv's input by the cells
        // Conv's last window skipped; output_padding adds them back.
        let spatial = x_dims.len() - 2;
        let output_padding: Vec<usize> = (0..spatial)
            .map(|i| {
                let pad = |j: usize| pads.get(j).copied().unwrap_or(0);
                let dilated = (w_dims[2 + i] - 1) * dilations[i] + 1;
                x_dims[2 + i] + pad(i) + pad(i + spatial)
                    - dilated
                    - strides[i] * (y_dims[2 + i] - 1)
            })
            .collect();
        let back = run_and_check_inference(
            &conv_transpose(conv_attrs, &output_padding, &[]),
            &[Some(&y), Some(&w)],
            &[],
        );
        assert_eq!(back.shape().dims(), x_dims, "geometry {seed}");
        let dot = |a: &Tensor, b: &Tensor| -> f64 {
            a.to_f64_vec()
                .iter()
                .zip(b.to_f64_vec())
                .map(|(p, q)| p * q)
                .sum()
        };
        assert_eq!(dot(&forward, &y), dot(&x, &back), "geometry {seed}");
    }
}

#[test]
fn conv_transpose_shape_errors_name_the_operands() {
    let x = f32s(&[1, 2, 3], &[0.; 6]);
    // W's first axis must be X's channel count.
    let w = f32s(&[3, 1, 2], &[0.; 6]);
    check_error(
        run(&conv_transpose(plain(), &[], &[]), &[Some(&x), Some(&w)]),
        |e| matches!(e, OpError::Shape(_)),
        &["channels", "[1, 2, 3]", "[3, 1, 2]"],
    );
    // Pads may not crop more than the full output (3 - 1 + 2 = 4 cells).
    let w = f32s(&[2, 1, 2], &[0.; 4]);
    let attrs = Conv {
        pads: vec![3, 2],
        ..plain()
    };
    check_error(
        run(&conv_transpose(attrs, &[], &[]), &[Some(&x), Some(&w)]),
        |e| matches!(e, OpError::Shape(_)),
        &["pads 3+2", "full output extent 4"],
    );
}

/// ConvTranspose with no input channels (C = 0) scatters nothing: each output is its
/// channel's bias. X (1, 0, 3) under W (0, 2, 2) at stride 1 gives (3 − 1) + 2 = 4 positions
/// per output channel.
#[test]
fn conv_transpose_with_no_input_channels_gives_the_bias_alone() {
    let x = f32s(&[1, 0, 3], &[]);
    let w = f32s(&[0, 2, 2], &[]);
    let b = f32s(&[2], &[0.5, -1.0]);
    let y = ok(
        &conv_transpose(plain(), &[], &[]),
        &[Some(&x), Some(&w), Some(&b)],
    );
    check(
        &y,
        DType::F32,
        &[1, 2, 4],
        &[0.5, 0.5, 0.5, 0.5, -1., -1., -1., -1.],
        Tolerance::Exact,
    );
}

/// ConvTranspose's W has X's rank (C, M/group, kernel…), whatever X's rank: a 2-D kernel
/// next to a 1-D input is refused as a rank mismatch.
#[test]
fn conv_transpose_refuses_w_of_another_rank_than_x() {
    let x = f32s(&[1, 1, 3], &[0.; 3]);
    let w = f32s(&[1, 1, 2, 2], &[0.; 4]);
    check_error(
        run(&conv_transpose(plain(), &[], &[]), &[Some(&x), Some(&w)]),
        |e| matches!(e, OpError::Shape(_)),
        &["same rank", "[1, 1, 3]", "[1, 1, 2, 2]"],
    );
}
