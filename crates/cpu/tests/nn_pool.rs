//! MaxPool (and its Indices), MaxUnpool, AveragePool, LpPool and the global pools: kernel
//! tests with hand-computed windows, and a direct per-tap oracle for the 2-D and 3-D cases.

mod nn_support;

use concord_core::op::{AutoPad, Pool};
use concord_core::{DType, Op, OpError};
use nn_support::{check, check_error, f16s, f32s, f64s_as_f32, i64s, ok, run, values, Tolerance};

fn pool(kernel: &[usize]) -> Pool {
    Pool {
        kernel_shape: kernel.to_vec(),
        ..Pool::default()
    }
}

fn one_to(n: usize) -> Vec<f32> {
    (1..=n).map(|v| v as f32).collect()
}

#[test]
fn max_pool_two_by_two_stride_two() {
    let x = f32s(&[1, 1, 4, 4], &one_to(16));
    let attrs = Pool {
        strides: vec![2, 2],
        ..pool(&[2, 2])
    };
    let y = ok(&Op::MaxPool(attrs), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 2, 2],
        &[6., 8., 14., 16.],
        Tolerance::Exact,
    );
}

#[test]
fn max_pool_ceil_mode_keeps_the_partial_last_window() {
    // x[r][c] = 5r + c + 1 on 5x5; kernel 2, stride 2. Floor mode drops row and column 4;
    // ceil mode keeps a third window per axis that covers only index 4.
    let x = f32s(&[1, 1, 5, 5], &one_to(25));
    let floor = Pool {
        strides: vec![2, 2],
        ..pool(&[2, 2])
    };
    let y = ok(&Op::MaxPool(floor.clone()), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 2, 2],
        &[7., 9., 17., 19.],
        Tolerance::Exact,
    );
    let ceil = Pool {
        ceil_mode: true,
        ..floor
    };
    let y = ok(&Op::MaxPool(ceil), &[Some(&x)]);
    #[rustfmt::skip]
    let want = [
        7., 9., 10.,
        17., 19., 20.,
        22., 24., 25.,
    ];
    check(&y, DType::F32, &[1, 1, 3, 3], &want, Tolerance::Exact);
}

#[test]
fn max_pool_dilation_skips_cells() {
    // Kernel 2 dilated by 3 reads x[o] and x[o + 3].
    let x = f32s(&[1, 1, 7], &[1., 5., 2., 8., 3., 0., 4.]);
    let attrs = Pool {
        dilations: vec![3],
        ..pool(&[2])
    };
    let y = ok(&Op::MaxPool(attrs), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[8., 5., 2., 8.],
        Tolerance::Exact,
    );
}

#[test]
fn max_pool_ceil_mode_with_dilation_and_begin_padding() {
    // len 7, kernel 2 dilated by 2 (extent 3), stride 2, pads (1, 0): padded length 8,
    // floor((8 − 3) / 2) + 1 = 3 windows, ceil gives 4; the fourth starts at padded 6 < 7 + 1
    // so it is kept. Window taps (padded → input = padded − 1):
    // {0→pad, 2→1}, {2→1, 4→3}, {4→3, 6→5}, {6→5, 8→past the end}.
    let x = f32s(&[1, 1, 7], &[1., 5., 2., 8., 3., 0., 4.]);
    let attrs = Pool {
        dilations: vec![2],
        strides: vec![2],
        pads: vec![1, 0],
        ceil_mode: true,
        ..pool(&[2])
    };
    let y = ok(&Op::MaxPool(attrs), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[5., 8., 8., 0.],
        Tolerance::Exact,
    );
}

#[test]
fn max_pool_never_takes_a_padded_zero() {
    // All inputs negative: a padded 0 winning any window would show.
    let x = f32s(&[1, 1, 2, 2], &[-1., -2., -3., -4.]);
    let attrs = Pool {
        pads: vec![1, 1, 1, 1],
        ..pool(&[2, 2])
    };
    let y = ok(&Op::MaxPool(attrs), &[Some(&x)]);
    #[rustfmt::skip]
    let want = [
        -1., -1., -2.,
        -1., -1., -2.,
        -3., -3., -4.,
    ];
    check(&y, DType::F32, &[1, 1, 3, 3], &want, Tolerance::Exact);
}

#[test]
fn max_pool_same_upper_and_lower_differ_on_an_odd_pad() {
    // len 3, kernel 2, stride 1: output 3, one pad cell, at the end (UPPER) or start (LOWER).
    let x = f32s(&[1, 1, 3], &[1., 3., 2.]);
    let upper = Pool {
        auto_pad: AutoPad::SameUpper,
        ..pool(&[2])
    };
    let y = ok(&Op::MaxPool(upper), &[Some(&x)]);
    check(&y, DType::F32, &[1, 1, 3], &[3., 3., 2.], Tolerance::Exact);
    let lower = Pool {
        auto_pad: AutoPad::SameLower,
        ..pool(&[2])
    };
    let y = ok(&Op::MaxPool(lower), &[Some(&x)]);
    check(&y, DType::F32, &[1, 1, 3], &[1., 3., 3.], Tolerance::Exact);
}

#[test]
fn max_pool_propagates_nan() {
    let x = f32s(&[1, 1, 4], &[1., f32::NAN, 3., 2.]);
    let attrs = Pool {
        strides: vec![2],
        ..pool(&[2])
    };
    let y = ok(&Op::MaxPool(attrs), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 2],
        &[f64::NAN, 3.],
        Tolerance::Exact,
    );
}

#[test]
fn windows_entirely_in_padding_give_lowest_for_max_and_zero_for_average() {
    // Pads as large as the kernel (onnxruntime refuses these; the reference computes them):
    // the first and last windows read only padding.
    let x = f32s(&[1, 1, 1], &[7.]);
    let attrs = Pool {
        pads: vec![1, 1],
        ..pool(&[1])
    };
    let y = ok(&Op::MaxPool(attrs.clone()), &[Some(&x)]);
    let lowest = f32::MIN as f64;
    check(
        &y,
        DType::F32,
        &[1, 1, 3],
        &[lowest, 7., lowest],
        Tolerance::Exact,
    );
    let y = ok(&Op::AveragePool(attrs), &[Some(&x)]);
    check(&y, DType::F32, &[1, 1, 3], &[0., 7., 0.], Tolerance::Exact);
}

#[test]
fn average_pool_count_include_pad_both_ways_in_one_d() {
    // [1, 2, 3, 4], kernel 3, pads (1, 1): window sums 3, 6, 9, 7 over 2, 3, 3, 2 real cells.
    let x = f32s(&[1, 1, 4], &[1., 2., 3., 4.]);
    let attrs = Pool {
        pads: vec![1, 1],
        ..pool(&[3])
    };
    let y = ok(&Op::AveragePool(attrs.clone()), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[1.5, 2., 3., 3.5],
        Tolerance::Exact,
    );
    let include = Pool {
        count_include_pad: true,
        ..attrs
    };
    let y = ok(&Op::AveragePool(include), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[1., 2., 3., 7. / 3.],
        Tolerance::RoundedOnce,
    );
}

#[test]
fn average_pool_count_include_pad_both_ways_in_two_d() {
    // [[1, 2], [3, 4]], kernel 2x2, stride 1, one pad cell on every side: 3x3 windows.
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let attrs = Pool {
        pads: vec![1, 1, 1, 1],
        ..pool(&[2, 2])
    };
    let y = ok(&Op::AveragePool(attrs.clone()), &[Some(&x)]);
    // Sums [[1, 3, 2], [4, 10, 6], [3, 7, 4]] over real cells [[1, 2, 1], [2, 4, 2], [1, 2, 1]].
    let want = [1., 1.5, 2., 2., 2.5, 3., 3., 3.5, 4.];
    check(&y, DType::F32, &[1, 1, 3, 3], &want, Tolerance::Exact);
    let include = Pool {
        count_include_pad: true,
        ..attrs
    };
    let y = ok(&Op::AveragePool(include), &[Some(&x)]);
    let want = [0.25, 0.75, 0.5, 1., 2.5, 1.5, 0.75, 1.75, 1.];
    check(&y, DType::F32, &[1, 1, 3, 3], &want, Tolerance::Exact);
}

#[test]
fn average_pool_ceil_mode_divisor_stops_at_the_padded_end() {
    // [1..6], kernel 3, stride 2, pads (1, 1): padded length 8, ceil mode gives 4 windows
    // starting at padded 0, 2, 4, 6. The last covers padded 6 (input 5), 7 (end pad) and 8,
    // which is past the padded input: with count_include_pad it divides by 2, not 3
    // (the ONNX reference implementation and onnxruntime agree on this).
    let x = f32s(&[1, 1, 6], &one_to(6));
    let attrs = Pool {
        strides: vec![2],
        pads: vec![1, 1],
        ceil_mode: true,
        ..pool(&[3])
    };
    let y = ok(&Op::AveragePool(attrs.clone()), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[1.5, 3., 5., 6.],
        Tolerance::Exact,
    );
    let include = Pool {
        count_include_pad: true,
        ..attrs
    };
    let y = ok(&Op::AveragePool(include), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[1., 3., 5., 3.],
        Tolerance::Exact,
    );
}

#[test]
fn average_pool_with_dilation() {
    let x = f32s(&[1, 1, 6], &one_to(6));
    let attrs = Pool {
        dilations: vec![2],
        ..pool(&[2])
    };
    let y = ok(&Op::AveragePool(attrs), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[2., 3., 4., 5.],
        Tolerance::Exact,
    );
}

/// A direct per-tap pooling oracle for any rank: every tap of every window is classified
/// as input, padding, or past the padded end, following the ONNX definition.
struct PoolProblem {
    x_dims: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads_begin: Vec<usize>,
    pads_end: Vec<usize>,
    ceil_mode: bool,
}

impl PoolProblem {
    fn attrs(&self) -> Pool {
        let mut pads = self.pads_begin.clone();
        pads.extend(&self.pads_end);
        Pool {
            kernel_shape: self.kernel.clone(),
            strides: self.strides.clone(),
            dilations: self.dilations.clone(),
            pads,
            ceil_mode: self.ceil_mode,
            ..Pool::default()
        }
    }

    fn output_len(&self, i: usize) -> usize {
        let input = self.x_dims[i + 2];
        let dilated = (self.kernel[i] - 1) * self.dilations[i] + 1;
        let span = input + self.pads_begin[i] + self.pads_end[i] - dilated;
        let s = self.strides[i];
        if self.ceil_mode {
            let out = span.div_ceil(s) + 1;
            if (out - 1) * s >= input + self.pads_begin[i] {
                out - 1
            } else {
                out
            }
        } else {
            span / s + 1
        }
    }

    /// (output dims, max, average excluding pad, average including pad)
    fn reference(&self, x: &[f64]) -> (Vec<usize>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let spatial = self.kernel.len();
        let out_sp: Vec<usize> = (0..spatial).map(|i| self.output_len(i)).collect();
        let in_sp = &self.x_dims[2..];
        let planes = self.x_dims[0] * self.x_dims[1];
        let in_count: usize = in_sp.iter().product();
        let out_count: usize = out_sp.iter().product();
        let k_count: usize = self.kernel.iter().product();
        let (mut max, mut avg, mut avg_pad) = (Vec::new(), Vec::new(), Vec::new());
        for plane in 0..planes {
            for o_flat in 0..out_count {
                let o = unravel(o_flat, &out_sp);
                let (mut best, mut sum, mut real, mut padded) = (f64::NEG_INFINITY, 0.0, 0, 0);
                for k_flat in 0..k_count {
                    let k = unravel(k_flat, &self.kernel);
                    let mut in_flat = 0;
                    let (mut is_real, mut in_padded) = (true, true);
                    for i in 0..spatial {
                        let p = o[i] * self.strides[i] + k[i] * self.dilations[i];
                        if p >= self.pads_begin[i] + in_sp[i] + self.pads_end[i] {
                            in_padded = false;
                        }
                        if p < self.pads_begin[i] || p >= self.pads_begin[i] + in_sp[i] {
                            is_real = false;
                        }
                        in_flat = in_flat * in_sp[i] + p.saturating_sub(self.pads_begin[i]);
                    }
                    if in_padded {
                        padded += 1;
                    }
                    if is_real {
                        let v = x[plane * in_count + in_flat];
                        best = best.max(v);
                        sum += v;
                        real += 1;
                    }
                }
                max.push(best);
                avg.push(sum / real as f64);
                avg_pad.push(sum / padded as f64);
            }
        }
        let mut dims = self.x_dims[..2].to_vec();
        dims.extend(out_sp);
        (dims, max, avg, avg_pad)
    }

    fn check(&self, seed: u64) {
        let x = values(self.x_dims.iter().product(), seed);
        let (dims, max, avg, avg_pad) = self.reference(&x);
        let xt = f64s_as_f32(&self.x_dims, &x);
        let y = ok(&Op::MaxPool(self.attrs()), &[Some(&xt)]);
        check(&y, DType::F32, &dims, &max, Tolerance::Exact);
        let y = ok(&Op::AveragePool(self.attrs()), &[Some(&xt)]);
        check(&y, DType::F32, &dims, &avg, Tolerance::RoundedOnce);
        let include = Pool {
            count_include_pad: true,
            ..self.attrs()
        };
        let y = ok(&Op::AveragePool(include), &[Some(&xt)]);
        check(&y, DType::F32, &dims, &avg_pad, Tolerance::RoundedOnce);
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
fn pools_match_the_direct_oracle_in_two_and_three_dimensions() {
    PoolProblem {
        x_dims: vec![2, 3, 9, 8],
        kernel: vec![3, 2],
        strides: vec![2, 3],
        dilations: vec![1, 2],
        pads_begin: vec![1, 0],
        pads_end: vec![2, 1],
        ceil_mode: true,
    }
    .check(1);
    PoolProblem {
        x_dims: vec![1, 2, 7, 7],
        kernel: vec![3, 3],
        strides: vec![2, 2],
        dilations: vec![1, 1],
        pads_begin: vec![1, 1],
        pads_end: vec![1, 1],
        ceil_mode: false,
    }
    .check(2);
    PoolProblem {
        x_dims: vec![1, 2, 5, 4, 6],
        kernel: vec![2, 3, 2],
        strides: vec![2, 1, 3],
        dilations: vec![1, 1, 2],
        pads_begin: vec![1, 1, 0],
        pads_end: vec![0, 1, 1],
        ceil_mode: true,
    }
    .check(3);
}

#[test]
fn global_average_pool_averages_each_plane() {
    let x = f32s(&[1, 2, 2, 2], &one_to(8));
    let y = ok(&Op::GlobalAveragePool, &[Some(&x)]);
    check(&y, DType::F32, &[1, 2, 1, 1], &[2.5, 6.5], Tolerance::Exact);
    let x = f32s(&[2, 1, 3], &[1., 2., 6., -1., -2., -6.]);
    let y = ok(&Op::GlobalAveragePool, &[Some(&x)]);
    check(&y, DType::F32, &[2, 1, 1], &[3., -3.], Tolerance::Exact);
}

#[test]
fn f16_pools_give_f16() {
    let x = f16s(&[1, 1, 2, 2], &[1., 2., 3., 4.5]);
    let y = ok(&Op::MaxPool(pool(&[2, 2])), &[Some(&x)]);
    check(&y, DType::F16, &[1, 1, 1, 1], &[4.5], Tolerance::Exact);
    let y = ok(&Op::AveragePool(pool(&[2, 2])), &[Some(&x)]);
    check(&y, DType::F16, &[1, 1, 1, 1], &[2.625], Tolerance::Exact);
    let y = ok(&Op::GlobalAveragePool, &[Some(&x)]);
    check(&y, DType::F16, &[1, 1, 1, 1], &[2.625], Tolerance::Exact);
}

#[test]
fn pool_errors_name_what_is_wrong() {
    let x = f32s(&[1, 1, 4, 4], &[0.; 16]);
    check_error(
        run(&Op::MaxPool(pool(&[2])), &[Some(&x)]),
        |e| {
            matches!(
                e,
                OpError::Attribute {
                    name: "kernel_shape",
                    ..
                }
            )
        },
        &["[1, 1, 4, 4]"],
    );
    check_error(
        run(&Op::AveragePool(pool(&[5, 5])), &[Some(&x)]),
        |e| matches!(e, OpError::Shape(_)),
        &["kernel"],
    );
    let strides = Pool {
        strides: vec![0, 1],
        ..pool(&[2, 2])
    };
    check_error(
        run(&Op::MaxPool(strides), &[Some(&x)]),
        |e| {
            matches!(
                e,
                OpError::Attribute {
                    name: "strides",
                    ..
                }
            )
        },
        &[],
    );
    let absurd = Pool {
        pads: vec![usize::MAX / 2, 0, usize::MAX / 2, 0],
        ..pool(&[2, 2])
    };
    check_error(
        run(&Op::MaxPool(absurd), &[Some(&x)]),
        |e| matches!(e, OpError::Shape(_)),
        &["overflow"],
    );
    let flat = f32s(&[4, 4], &[0.; 16]);
    check_error(
        run(&Op::MaxPool(pool(&[2])), &[Some(&flat)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[4, 4]"],
    );
    // An empty spatial axis, even with pads that would give every window a padded tap, is
    // refused before any window is made (`Windows::apply` walks planes of the input).
    let empty = f32s(&[1, 1, 0], &[]);
    for op in [
        Op::MaxPool(Pool {
            pads: vec![1, 1],
            ..pool(&[1])
        }),
        Op::AveragePool(Pool {
            pads: vec![1, 1],
            ..pool(&[1])
        }),
    ] {
        check_error(
            run(&op, &[Some(&empty)]),
            |e| matches!(e, OpError::Shape(_)),
            &["has extent 0"],
        );
    }
    let xi = i64s(&[1, 1, 2], &[1, 2]);
    check_error(
        run(&Op::GlobalAveragePool, &[Some(&xi)]),
        |e| matches!(e, OpError::DType { index: 0, .. }),
        &[],
    );
}

// MaxPool's Indices and MaxUnpool.

/// Runs MaxPool with both outputs, returning (Y values, Indices).
fn max_pool_with_indices(attrs: Pool, x: &concord_core::Tensor) -> (Vec<f64>, Vec<i64>) {
    let outputs =
        concord_cpu::run_op(&Op::MaxPool(attrs), &[Some(x)], 2).expect("MaxPool with Indices runs");
    assert_eq!(outputs.len(), 2);
    assert_eq!(outputs[1].dtype(), DType::I64);
    assert_eq!(outputs[1].shape(), outputs[0].shape());
    (
        outputs[0].to_f64_vec(),
        outputs[1].to_i64_vec().unwrap_or_default(),
    )
}

/// Two planes (N = 1, C = 2) of 1..=6 as 2x3 (the second plane + 100), 2x2 windows with
/// stride 1: the maxima sit at the bottom-right of each window, (1, 1) and (1, 2).
/// Row-major they are cells 4 and 5 of a plane; column-major (h + 2·w) 3 and 5; the
/// second plane adds its offset 6.
#[test]
fn max_pool_indices_count_row_or_column_major_over_the_whole_tensor() {
    let mut data = one_to(6);
    data.extend(one_to(6).iter().map(|v| v + 100.0));
    let x = f32s(&[1, 2, 2, 3], &data);
    let (y, rows) = max_pool_with_indices(pool(&[2, 2]), &x);
    assert_eq!(y, vec![5., 6., 105., 106.]);
    assert_eq!(rows, vec![4, 5, 10, 11]);
    let column_major = Pool {
        column_major_indices: true,
        ..pool(&[2, 2])
    };
    let (_, columns) = max_pool_with_indices(column_major, &x);
    assert_eq!(columns, vec![3, 5, 9, 11]);
}

/// Equal maxima: the first tap in window order wins, as in onnxruntime.
#[test]
fn max_pool_indices_pick_the_first_of_equal_maxima() {
    let attrs = Pool {
        strides: vec![2],
        ..pool(&[2])
    };
    let x3 = f32s(&[1, 1, 4], &[7., 7., 2., 7.]);
    let (y, i) = max_pool_with_indices(attrs, &x3);
    assert_eq!((y, i), (vec![7., 7.], vec![0, 3]));
}

/// MaxUnpool puts each value back at its index and zeros elsewhere; the default output is
/// stride·(in − 1) + kernel − pads per axis, `output_shape` may make it larger.
#[test]
fn max_unpool_scatters_values_at_their_indices() {
    let op = Op::MaxUnpool {
        kernel_shape: vec![2, 2],
        pads: vec![],
        strides: vec![2, 2],
    };
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let i = i64s(&[1, 1, 2, 2], &[5, 7, 13, 15]);
    let y = ok(&op, &[Some(&x), Some(&i)]);
    let mut want = vec![0.0; 16];
    for (&at, v) in [5usize, 7, 13, 15].iter().zip([1., 2., 3., 4.]) {
        want[at] = v;
    }
    check(&y, DType::F32, &[1, 1, 4, 4], &want, Tolerance::Exact);
    let shape = i64s(&[4], &[1, 1, 5, 5]);
    let y = ok(&op, &[Some(&x), Some(&i), Some(&shape)]);
    let mut want = vec![0.0; 25];
    for (&at, v) in [5usize, 7, 13, 15].iter().zip([1., 2., 3., 4.]) {
        want[at] = v;
    }
    check(&y, DType::F32, &[1, 1, 5, 5], &want, Tolerance::Exact);
    // An index past the output is an error naming it.
    let far = i64s(&[1, 1, 2, 2], &[5, 7, 13, 16]);
    check_error(
        run(&op, &[Some(&x), Some(&far)]),
        |e| matches!(e, OpError::Shape(_)),
        &["index 16", "[1, 1, 4, 4]"],
    );
}

/// A window that reads no input cell (kernel 2 dilated by 2 under pads (1, 1) over one
/// cell: its taps fall on the two pads) gives the lowest finite value and index -1;
/// onnxruntime 1.23 gives the same Y and I for this single plane (MaxPool-18,
/// `python -c` with onnxruntime on this model). Over two cells the windows read x[1] and
/// x[0] alone.
#[test]
fn max_pool_indices_of_a_window_in_the_padding_are_minus_one() {
    let attrs = Pool {
        dilations: vec![2],
        pads: vec![1, 1],
        ..pool(&[2])
    };
    let (y, i) = max_pool_with_indices(attrs.clone(), &f32s(&[1, 1, 1], &[7.]));
    assert_eq!((y, i), (vec![f32::MIN as f64], vec![-1]));
    let (y, i) = max_pool_with_indices(attrs, &f32s(&[1, 1, 2], &[7., 3.]));
    assert_eq!((y, i), (vec![3., 7.], vec![1, 0]));
}

/// MaxUnpool over one and three spatial axes (X of rank 3 and 5): the default output
/// extent of an axis is stride·(in − 1) + kernel − pads (the ONNX definition), here
/// 2·(2 − 1) + 2 = 4 on the last axis and 1·(1 − 1) + 1 = 1 on the others, and each value
/// lands at the flat position its index names.
#[test]
fn max_unpool_over_one_and_three_spatial_axes() {
    let x = f32s(&[1, 1, 2], &[1., 2.]);
    let i = i64s(&[1, 1, 2], &[1, 3]);
    let op = Op::MaxUnpool {
        kernel_shape: vec![2],
        pads: vec![],
        strides: vec![2],
    };
    let y = ok(&op, &[Some(&x), Some(&i)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 4],
        &[0., 1., 0., 2.],
        Tolerance::Exact,
    );
    let x = f32s(&[1, 1, 1, 1, 2], &[1., 2.]);
    let i = i64s(&[1, 1, 1, 1, 2], &[0, 2]);
    let op = Op::MaxUnpool {
        kernel_shape: vec![1, 1, 2],
        pads: vec![],
        strides: vec![1, 1, 2],
    };
    let y = ok(&op, &[Some(&x), Some(&i)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 1, 1, 4],
        &[1., 0., 2., 0.],
        Tolerance::Exact,
    );
}

/// MaxUnpool's X is (N, C, spatial…) with one kernel_shape value per spatial axis, and
/// `output_shape` names every axis of the output, X's rank of them (the ONNX definition):
/// anything else is refused, naming the shapes.
#[test]
fn max_unpool_refuses_ranks_that_do_not_line_up() {
    // Rank 2: no spatial axis, even with no kernel value for it.
    let x = f32s(&[1, 2], &[1., 2.]);
    let i = i64s(&[1, 2], &[0, 1]);
    let op = Op::MaxUnpool {
        kernel_shape: vec![],
        pads: vec![],
        strides: vec![],
    };
    check_error(
        run(&op, &[Some(&x), Some(&i)]),
        |e| matches!(e, OpError::Shape(_)),
        &["rank 3 or more", "[1, 2]"],
    );
    // Rank 4 with one kernel value for two spatial axes.
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let i = i64s(&[1, 1, 2, 2], &[0, 1, 2, 3]);
    let op = Op::MaxUnpool {
        kernel_shape: vec![2],
        pads: vec![],
        strides: vec![2],
    };
    check_error(
        run(&op, &[Some(&x), Some(&i)]),
        |e| matches!(e, OpError::Shape(_)),
        &["one kernel_shape value per spatial axis", "[1, 1, 2, 2]"],
    );
    // An output_shape of three extents for an X of rank 4.
    let op = Op::MaxUnpool {
        kernel_shape: vec![2, 2],
        pads: vec![],
        strides: vec![2, 2],
    };
    let shape = i64s(&[3], &[1, 4, 4]);
    check_error(
        run(&op, &[Some(&x), Some(&i), Some(&shape)]),
        |e| matches!(e, OpError::Shape(_)),
        &["output_shape [1, 4, 4]", "4 non-negative extents"],
    );
}

/// GlobalMaxPool, GlobalAveragePool and GlobalLpPool reduce each (N, C) plane of the
/// spatial axes; an X of rank 2 has no spatial axis, so each plane is the one value
/// X[n][c] (a product of no extents is 1), and Y is (N, C): the max and the mean of one
/// value are itself, its 2-norm its magnitude. ONNX's shape inference gives (N, C) for a
/// rank-2 X and the ONNX reference implementation's GlobalAveragePool these values (onnx
/// 1.x `ReferenceEvaluator`); onnxruntime 1.23 refuses a rank below 3 for all three. An X of rank 1 has no C axis
/// and is refused.
#[test]
fn global_pools_of_rank_two_reduce_planes_of_one_value() {
    let x = f32s(&[2, 3], &[3., -4., 1., 0., 2., -2.]);
    for op in [Op::GlobalMaxPool, Op::GlobalAveragePool] {
        let y = ok(&op, &[Some(&x)]);
        check(
            &y,
            DType::F32,
            &[2, 3],
            &[3., -4., 1., 0., 2., -2.],
            Tolerance::Exact,
        );
    }
    let y = ok(&Op::GlobalLpPool { p: 2 }, &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[2, 3],
        &[3., 4., 1., 0., 2., 2.],
        Tolerance::Exact,
    );
    let line = f32s(&[2], &[1., 2.]);
    for op in [
        Op::GlobalMaxPool,
        Op::GlobalAveragePool,
        Op::GlobalLpPool { p: 2 },
    ] {
        check_error(
            run(&op, &[Some(&line)]),
            |e| matches!(e, OpError::Shape(_)),
            &["rank 2 or more", "[2]"],
        );
    }
}

/// LpPool with p = 1 is each window's sum of magnitudes, (Σ |x|^1)^(1/1): over
/// [1, -2, 3] with kernel 2, |1| + |-2| = 3 and |-2| + |3| = 5; with p = 2 the first
/// window is √(1 + 4) = √5. A p below 1 has no norm ((Σ |x|^0)^(1/0) divides by zero) and
/// is refused, naming the attribute.
#[test]
fn lp_pool_takes_p_from_one_up() {
    let x = f32s(&[1, 1, 3], &[1., -2., 3.]);
    let y = ok(&Op::LpPool(pool(&[2]), 1), &[Some(&x)]);
    check(&y, DType::F32, &[1, 1, 2], &[3., 5.], Tolerance::Exact);
    let y = ok(&Op::LpPool(pool(&[2]), 2), &[Some(&x)]);
    check(
        &y,
        DType::F32,
        &[1, 1, 2],
        &[5f64.sqrt(), 13f64.sqrt()],
        Tolerance::RoundedOnce,
    );
    for p in [0, -1] {
        check_error(
            run(&Op::LpPool(pool(&[2]), p), &[Some(&x)]),
            |e| matches!(e, OpError::Attribute { name: "p", .. }),
            &["at least 1"],
        );
    }
}

/// A kernel of 2^40 taps is valid under SAME padding, which pads the input to fit it: over
/// [1, 2, 3] every window then covers the whole input (its taps start 2^39 − 1 or so cells
/// before it and end as far after), so MaxPool gives 3 and AveragePool, counting real
/// cells only, (1 + 2 + 3) / 3 = 2 at each of the 3 outputs. The kernel works the taps out
/// from each window's bounds; one that visited every tap would not finish.
#[test]
fn a_kernel_of_two_to_the_forty_taps_under_same_padding_reads_the_whole_input() {
    let x = f32s(&[1, 1, 3], &[1., 2., 3.]);
    let attrs = Pool {
        auto_pad: AutoPad::SameUpper,
        ..pool(&[1 << 40])
    };
    let y = ok(&Op::MaxPool(attrs.clone()), &[Some(&x)]);
    check(&y, DType::F32, &[1, 1, 3], &[3., 3., 3.], Tolerance::Exact);
    let y = ok(&Op::AveragePool(attrs), &[Some(&x)]);
    check(&y, DType::F32, &[1, 1, 3], &[2., 2., 2.], Tolerance::Exact);
}
