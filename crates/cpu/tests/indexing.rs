//! Reference kernels of the indexing family (Range, GatherElements, GatherND, the scatters,
//! OneHot, Trilu, NonZero, DepthToSpace, SpaceToDepth, TopK) against values worked out by
//! hand from the ONNX definitions in the comments, or by naive loops over them, and typed
//! errors on operands they refuse. The conformance cases and the ONNX node tests check the
//! cases ONNX ships; these pin what those leave open. Every success is also checked against
//! inference on the same operands.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

mod movement_support;

use concord_core::op::ScatterReduction;
use concord_core::{MemoryBudget, Op, OpError, Tensor};
use concord_cpu::{run_op, run_op_within};
use movement_support::*;

#[test]
fn range_refuses_more_elements_than_it_materialises() {
    // Under a budget that allows any size, Range still refuses 2^60 elements (f64 and i64
    // alike: 2^63 bytes, which the budget takes) with a shape error, before allocating
    // anything.
    let unlimited = MemoryBudget::new(u64::MAX);
    let huge = (1u64 << 60) as f64;
    let f64s = |v: f64| Tensor::from_vec(Vec::<usize>::new(), vec![v]).expect("a scalar");
    for (start, limit, delta) in [
        (f64s(0.0), f64s(huge), f64s(1.0)),
        (
            Tensor::scalar_i64(0),
            Tensor::scalar_i64(1 << 60),
            Tensor::scalar_i64(1),
        ),
    ] {
        let got = run_op_within(
            &Op::Range,
            &[Some(&start), Some(&limit), Some(&delta)],
            1,
            unlimited,
        );
        match got {
            Err(e @ OpError::Shape(_)) => assert_mentions(&e, &["more than Concord materialises"]),
            other => panic!("Range of 2^60 elements: {other:?}"),
        }
    }
    // Below the bound it counts ceil((limit - start) / delta) elements, start + i·delta:
    // 10 down to 4 by -2 is 10, 8, 6.
    let got = ok(
        &Op::Range,
        &[
            &Tensor::scalar_i64(10),
            &Tensor::scalar_i64(4),
            &Tensor::scalar_i64(-2),
        ],
    );
    assert_same(&got, &ints(&[10, 8, 6]));
}

#[test]
fn gather_elements_refuses_indices_past_data_off_the_axis() {
    // out[0][j] = data[idx[0][j]][j] along axis 0 (the ONNX definition), so indices may be
    // smaller than data off the axis: [[1, 0]] over [[1, 2], [3, 4]] gives [[3, 2]].
    let data = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let op = Op::GatherElements { axis: 0 };
    assert_same(
        &ok(&op, &[&data, &i64s(&[1, 2], &[1, 0])]),
        &f32s(&[1, 2], &[3.0, 2.0]),
    );
    // A third column of indices names data[idx][2], which does not exist.
    let e = err(&op, &[&data, &i64s(&[1, 3], &[0, 0, 0])]);
    assert!(matches!(e, OpError::Shape(_)), "{e}");
    assert_mentions(&e, &["exceed data"]);
}

#[test]
fn gather_nd_takes_tuples_under_one_and_two_batch_dims() {
    // batch_dims 1, data (2, 3) = 0..6, indices (2, 2, 1): out[b][k] = data[b][idx[b][k]];
    // idx = [[2], [0]] | [[1], [2]] gives [2, 0] | [3 + 1, 3 + 2] = [4, 5].
    let data = i64s(&[2, 3], &[0, 1, 2, 3, 4, 5]);
    let idx = i64s(&[2, 2, 1], &[2, 0, 1, 2]);
    let got = ok(&Op::GatherND { batch_dims: 1 }, &[&data, &idx]);
    assert_same(&got, &i64s(&[2, 2], &[2, 0, 4, 5]));
    // batch_dims 2, data (2, 3, 2) = 0..12, indices (2, 3, 1): out[i][j] =
    // data[i][j][idx[i][j]] = (3i + j)·2 + idx[i][j]; idx = 1 0 1 | 0 1 1.
    let data = i64s(&[2, 3, 2], &(0..12).collect::<Vec<_>>());
    let idx = i64s(&[2, 3, 1], &[1, 0, 1, 0, 1, 1]);
    let got = ok(&Op::GatherND { batch_dims: 2 }, &[&data, &idx]);
    assert_same(&got, &i64s(&[2, 3], &[1, 2, 5, 6, 9, 11]));
}

#[test]
fn gather_nd_with_empty_tuples_takes_the_whole_of_data() {
    // Indices (2, 0): two empty tuples, each naming all of data, so the output is data
    // twice, of shape (2) + data's (2, 2).
    let data = i64s(&[2, 2], &[1, 2, 3, 4]);
    let idx = i64s(&[2, 0], &[]);
    let got = ok(&Op::GatherND { batch_dims: 0 }, &[&data, &idx]);
    assert_same(&got, &i64s(&[2, 2, 2], &[1, 2, 3, 4, 1, 2, 3, 4]));
}

#[test]
fn gather_nd_refuses_tuples_that_do_not_fit_data() {
    let op = |batch_dims| Op::GatherND { batch_dims };
    // batch_dims must leave the tuple axis: indices (2) under batch_dims 1, though
    // 1 + 2 ≤ rank 3.
    let data = i64s(&[2, 2, 2], &[0; 8]);
    let e = err(&op(1), &[&data, &i64s(&[2], &[0, 1])]);
    assert_mentions(&e, &["do not fit"]);
    // A tuple longer than data's rank: 3 indices into a rank-2 data.
    let data = i64s(&[2, 2], &[1, 2, 3, 4]);
    let e = err(&op(0), &[&data, &i64s(&[1, 3], &[0, 0, 0])]);
    assert_mentions(&e, &["do not fit"]);
    // A tuple as long as data's rank names one element: data[1][0] = 3.
    assert_same(
        &ok(&op(0), &[&data, &i64s(&[1, 2], &[1, 0])]),
        &i64s(&[1], &[3]),
    );
}

#[test]
fn scatter_elements_refuses_indices_and_updates_of_other_shapes() {
    let data = f32s(&[2, 2], &[0.0; 4]);
    let op = Op::ScatterElements {
        axis: 0,
        reduction: ScatterReduction::None,
    };
    // Indices (1, 2) and updates (2, 1): the same count, not the same shape.
    let e = err(
        &op,
        &[&data, &i64s(&[1, 2], &[0, 1]), &f32s(&[2, 1], &[5.0, 6.0])],
    );
    assert_mentions(&e, &["must have one shape"]);
    // Indices and updates of one shape, of another rank than data.
    let e = err(
        &op,
        &[&data, &i64s(&[2], &[0, 1]), &f32s(&[2], &[5.0, 6.0])],
    );
    assert_mentions(&e, &["must have one shape"]);
}

#[test]
fn scatter_reductions_on_bools_are_or_and_and() {
    // numpy on bools, as the ONNX reference implementation computes the reductions: add and
    // max are or, mul and min are and. data [t, t, f, f], every element updated once by
    // [t, f, t, f].
    let data = bools(&[4], &[true, true, false, false]);
    let idx = i64s(&[4], &[0, 1, 2, 3]);
    let updates = bools(&[4], &[true, false, true, false]);
    let or = bools(&[4], &[true, true, true, false]);
    let and = bools(&[4], &[true, false, false, false]);
    for (reduction, want) in [
        (ScatterReduction::Add, &or),
        (ScatterReduction::Max, &or),
        (ScatterReduction::Mul, &and),
        (ScatterReduction::Min, &and),
        (ScatterReduction::None, &updates),
    ] {
        let op = Op::ScatterElements { axis: 0, reduction };
        assert_same(&ok(&op, &[&data, &idx, &updates]), want);
        let op = Op::ScatterND { reduction };
        let tuples = i64s(&[4, 1], &[0, 1, 2, 3]);
        assert_same(&ok(&op, &[&data, &tuples, &updates]), want);
    }
}

#[test]
fn one_hot_counts_negative_indices_from_the_end_and_drops_out_of_range_ones() {
    // depth 3, values [off 0, on 9]; indices truncated toward zero: 0, 2.7 → 2, -1 → 2,
    // -3 → 0, 3 and -4 out of range (every element off).
    let idx = f32s(&[6], &[0.0, 2.7, -1.0, -3.0, 3.0, -4.0]);
    let depth = i64s(&[], &[3]);
    let values = i64s(&[2], &[0, 9]);
    let got = ok(&Op::OneHot { axis: -1 }, &[&idx, &depth, &values]);
    #[rustfmt::skip]
    let want = i64s(&[6, 3], &[
        9, 0, 0,
        0, 0, 9,
        0, 0, 9,
        9, 0, 0,
        0, 0, 0,
        0, 0, 0,
    ]);
    assert_same(&got, &want);
}

#[test]
fn one_hot_refuses_a_depth_below_one() {
    let idx = i64s(&[2], &[0, 1]);
    let values = i64s(&[2], &[0, 1]);
    for depth in [0, -2] {
        let e = err(
            &Op::OneHot { axis: -1 },
            &[&idx, &i64s(&[], &[depth]), &values],
        );
        assert!(matches!(e, OpError::Shape(_)), "depth {depth}: {e}");
        assert_mentions(&e, &["not a positive size"]);
    }
}

#[test]
fn trilu_refuses_inputs_below_rank_two() {
    for x in [f32s(&[3], &[1.0, 2.0, 3.0]), f32s(&[], &[1.0])] {
        let e = err(&Op::Trilu { upper: true }, &[&x]);
        assert_mentions(&e, &["Trilu needs rank 2"]);
    }
}

#[test]
fn non_zero_of_a_scalar_has_no_rows_and_one_column_if_it_is_nonzero() {
    // NonZero gives (rank, count) coordinates: a scalar has rank 0, so (0, 1) when it is
    // nonzero and (0, 0) when it is zero.
    for (v, count) in [(5.0, 1), (0.0, 0)] {
        let out = run_op(&Op::NonZero, &[Some(&f32s(&[], &[v]))], 1)
            .unwrap_or_else(|e| panic!("NonZero of {v}: {e}"));
        assert_same(&out[0], &i64s(&[0, count], &[]));
    }
}

/// DepthToSpace by the ONNX definition, one output element at a time: DCR reads depth
/// (bh, bw, c), CRD (c, bh, bw).
fn depth_to_space_naive(x: &[i64], dims: [usize; 4], b: usize, crd: bool) -> Vec<i64> {
    let [n, c, h, w] = dims;
    let oc = c / (b * b);
    let mut out = Vec::new();
    for ni in 0..n {
        for ci in 0..oc {
            for y in 0..h * b {
                for xx in 0..w * b {
                    let (bh, bw) = (y % b, xx % b);
                    let depth = if crd {
                        ci * b * b + bh * b + bw
                    } else {
                        (bh * b + bw) * oc + ci
                    };
                    out.push(x[((ni * c + depth) * h + y / b) * w + xx / b]);
                }
            }
        }
    }
    out
}

/// SpaceToDepth by the ONNX definition: output channel (bh, bw, c) in DCR, (c, bh, bw) in
/// CRD, reading input (c, hi·b + bh, wi·b + bw).
fn space_to_depth_naive(x: &[i64], dims: [usize; 4], b: usize, crd: bool) -> Vec<i64> {
    let [n, c, h, w] = dims;
    let mut out = vec![0; x.len()];
    let (oh, ow) = (h / b, w / b);
    for ni in 0..n {
        for ci in 0..c {
            for bh in 0..b {
                for bw in 0..b {
                    let depth = if crd {
                        (ci * b + bh) * b + bw
                    } else {
                        (bh * b + bw) * c + ci
                    };
                    for hi in 0..oh {
                        for wi in 0..ow {
                            let from = ((ni * c + ci) * h + hi * b + bh) * w + wi * b + bw;
                            out[((ni * c * b * b + depth) * oh + hi) * ow + wi] = x[from];
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn depth_to_space_and_space_to_depth_follow_both_modes() {
    // Distinct values everywhere, N = 2 and unequal extents so that a swapped axis shows;
    // blocksize 3 too, where b·b and b + b differ.
    for b in [2usize, 3] {
        let dims = [2, 2 * b * b, 2, 3];
        let x: Vec<i64> = (0..dims.iter().product::<usize>() as i64).collect();
        let xt = i64s(&dims, &x);
        let sdims = [2, 3, 2 * b, 3 * b];
        let s: Vec<i64> = (0..sdims.iter().product::<usize>() as i64).collect();
        for crd in [false, true] {
            let got = ok(&Op::DepthToSpace { blocksize: b, crd }, &[&xt]);
            let want = depth_to_space_naive(&x, dims, b, crd);
            assert_same(&got, &i64s(&[2, 2, 2 * b, 3 * b], &want));
            let got = ok(
                &Op::SpaceToDepth { blocksize: b, crd },
                &[&i64s(&sdims, &s)],
            );
            let want = space_to_depth_naive(&s, sdims, b, crd);
            assert_same(&got, &i64s(&[2, 3 * b * b, 2, 3], &want));
        }
    }
}

#[test]
fn depth_to_space_and_space_to_depth_refuse_extents_the_block_does_not_divide() {
    // DepthToSpace: channels must be a multiple of b², and b positive.
    let x = i64s(&[1, 3, 1, 1], &[1, 2, 3]);
    for blocksize in [2, 0] {
        let e = err(
            &Op::DepthToSpace {
                blocksize,
                crd: false,
            },
            &[&x],
        );
        assert_mentions(&e, &["not a multiple of blocksize"]);
    }
    // SpaceToDepth: height and width each a multiple of b, and b positive.
    let s2d = |blocksize| Op::SpaceToDepth {
        blocksize,
        crd: false,
    };
    for (dims, blocksize) in [([1, 1, 3, 2], 2), ([1, 1, 2, 3], 2), ([1, 1, 2, 2], 0)] {
        let x = i64s(&dims, &vec![0; dims.iter().product()]);
        let e = err(&s2d(blocksize), &[&x]);
        assert_mentions(&e, &["not multiples of blocksize"]);
    }
}

#[test]
fn top_k_along_a_middle_axis_keeps_lower_indices_first_on_ties() {
    // x (2, 3, 2), K = 2 along axis 1. Columns of block 0: [1, 3, 2] and [6, 4, 5]; of
    // block 1: [9, 7, 9] and [0, 8, 2]. Largest two: 3 (1), 2 (2) | 6 (0), 5 (2) | 9 (0),
    // 9 (2), the tie in index order | 8 (1), 2 (2).
    #[rustfmt::skip]
    let x = f32s(&[2, 3, 2], &[
        1.0, 6.0,  3.0, 4.0,  2.0, 5.0,
        9.0, 0.0,  7.0, 8.0,  9.0, 2.0,
    ]);
    let op = |largest| Op::TopK {
        axis: 1,
        largest,
        sorted: true,
    };
    let out = run_n(&op(true), &[Some(&x), Some(&ints(&[2]))], 2).expect("TopK");
    assert_same(
        &out[0],
        &f32s(&[2, 2, 2], &[3.0, 6.0, 2.0, 5.0, 9.0, 8.0, 9.0, 2.0]),
    );
    assert_same(&out[1], &i64s(&[2, 2, 2], &[1, 0, 2, 2, 0, 1, 2, 2]));
    // Smallest one: 1 (0) | 4 (1) | 7 (1) | 0 (0).
    let out = run_n(&op(false), &[Some(&x), Some(&ints(&[1]))], 2).expect("TopK");
    assert_same(&out[0], &f32s(&[2, 1, 2], &[1.0, 4.0, 7.0, 0.0]));
    assert_same(&out[1], &i64s(&[2, 1, 2], &[0, 1, 1, 0]));
}

#[test]
fn top_k_compares_integers_exactly() {
    // 2^53 and 2^53 + 1 are one value in f64; as i64 the second is larger.
    let x = i64s(&[2], &[1 << 53, (1 << 53) + 1]);
    let op = Op::TopK {
        axis: 0,
        largest: true,
        sorted: true,
    };
    let out = run_n(&op, &[Some(&x), Some(&ints(&[1]))], 2).expect("TopK");
    assert_same(&out[0], &i64s(&[1], &[(1 << 53) + 1]));
    assert_same(&out[1], &i64s(&[1], &[1]));
}

#[test]
fn trilu_counts_rows_of_a_tall_matrix() {
    // x = [[1, 2], [3, 4], [5, 6]] has more rows than columns. Upper keeps column - row ≥ 0:
    // [[1, 2], [0, 4], [0, 0]]; lower keeps column - row ≤ 0: [[1, 0], [3, 4], [5, 6]].
    let x = i64s(&[3, 2], &[1, 2, 3, 4, 5, 6]);
    let upper = ok(&Op::Trilu { upper: true }, &[&x]);
    assert_same(&upper, &i64s(&[3, 2], &[1, 2, 0, 4, 0, 0]));
    let lower = ok(&Op::Trilu { upper: false }, &[&x]);
    assert_same(&lower, &i64s(&[3, 2], &[1, 0, 3, 4, 5, 6]));
}
