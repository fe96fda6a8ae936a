//! Reference kernels for Einsum, Det, NonMaxSuppression and Unique: hand-computed values
//! for the equation forms (implicit output, ellipsis, diagonal, broadcasting), the
//! determinant's pivoting and sign, onnxruntime's NMS tie and threshold rules, and Unique's
//! four outputs. The ONNX node tests and onnxruntime golden cases check larger inputs.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::{Op, OpError, Tensor};
use concord_cpu::run_op;

fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
    match Tensor::from_f32(dims.to_vec(), v.to_vec()) {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn i64s(dims: &[usize], v: &[i64]) -> Tensor {
    match Tensor::from_i64(dims.to_vec(), v.to_vec()) {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn run(op: &Op, inputs: &[Option<&Tensor>], outputs: usize) -> Result<Vec<Tensor>, OpError> {
    run_op(op, inputs, outputs)
}

fn one(op: &Op, inputs: &[&Tensor]) -> Tensor {
    let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
    match run(op, &inputs, 1) {
        Ok(mut v) if v.len() == 1 => v.remove(0),
        other => panic!("{op:?}: {other:?}"),
    }
}

fn einsum(eq: &str) -> Op {
    Op::Einsum {
        equation: eq.into(),
    }
}

fn check(t: &Tensor, dims: &[usize], values: &[f64]) {
    assert_eq!(t.dims(), dims, "shape");
    assert_eq!(t.to_f64_vec(), values, "values");
}

#[test]
fn einsum_forms() {
    // a = [[1, 2], [3, 4]], b = [[5, 6], [7, 8]].
    let a = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let b = f32s(&[2, 2], &[5.0, 6.0, 7.0, 8.0]);
    // Matrix product: [[1·5+2·7, 1·6+2·8], [3·5+4·7, 3·6+4·8]].
    check(
        &one(&einsum("ij,jk->ik"), &[&a, &b]),
        &[2, 2],
        &[19.0, 22.0, 43.0, 50.0],
    );
    // Implicit output "ij,jk" is "ik" too.
    check(
        &one(&einsum("ij,jk"), &[&a, &b]),
        &[2, 2],
        &[19.0, 22.0, 43.0, 50.0],
    );
    // Implicit output in ASCII order: "ji" has output "ij", the transpose.
    check(&one(&einsum("ji"), &[&a]), &[2, 2], &[1.0, 3.0, 2.0, 4.0]);
    // Trace (repeated label, scalar output) and diagonal.
    check(&one(&einsum("ii"), &[&a]), &[], &[5.0]);
    check(&one(&einsum("ii->i"), &[&a]), &[2], &[1.0, 4.0]);
    // Sum of every element, with spaces.
    check(&one(&einsum(" i j -> "), &[&a]), &[], &[10.0]);
    // Ellipsis: batched rows dotted with one vector broadcast over the batch.
    let v = f32s(&[2], &[1.0, -1.0]);
    check(&one(&einsum("...j,j->..."), &[&a, &v]), &[2], &[-1.0, -1.0]);
    // A label of extent 1 broadcasts: [[1], [2]] times rows of a, summed over j.
    let c = f32s(&[2, 1], &[1.0, 2.0]);
    check(&one(&einsum("ij,ij->i"), &[&c, &a]), &[2], &[3.0, 14.0]);
    // In either operand.
    check(&one(&einsum("ij,ij->i"), &[&a, &c]), &[2], &[3.0, 14.0]);
    // Integers are exact.
    let big = i64s(&[2], &[1 << 40, 3]);
    let out = one(&einsum("i,i->"), &[&big, &big]);
    assert_eq!(
        out.to_i64_vec(),
        Some(vec![(1i64 << 40).wrapping_mul(1 << 40) + 9])
    );
}

#[test]
fn einsum_refuses_bad_equations() {
    let a = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let b = f32s(&[3], &[1.0, 2.0, 3.0]);
    for (eq, inputs) in [
        ("ij,jk->ik", vec![&a]),
        ("ijk", vec![&a]),
        ("ij->ii", vec![&a]),
        ("ij,j->i", vec![&a, &b]),
    ] {
        let inputs: Vec<Option<&Tensor>> = inputs.into_iter().map(Some).collect();
        assert!(run(&einsum(eq), &inputs, 1).is_err(), "{eq}");
    }
}

#[test]
fn det_pivots_and_batches() {
    // [[0, 1], [1, 0]] needs a row swap: det = -1. [[2, 0], [0, 3]]: det = 6.
    let x = f32s(&[2, 2, 2], &[0.0, 1.0, 1.0, 0.0, 2.0, 0.0, 0.0, 3.0]);
    check(&one(&Op::Det, &[&x]), &[2], &[-1.0, 6.0]);
    // 3×3: [[2, 0, 1], [1, 3, 2], [1, 1, 1]] = 2(3-2) - 0 + 1(1-3) = 0.
    let s = f32s(&[3, 3], &[2.0, 0.0, 1.0, 1.0, 3.0, 2.0, 1.0, 1.0, 1.0]);
    check(&one(&Op::Det, &[&s]), &[], &[0.0]);
    // [[1, 2], [3, 4]] = -2.
    let t = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    check(&one(&Op::Det, &[&t]), &[], &[-2.0]);
    let not_square = f32s(&[2, 3], &[0.0; 6]);
    assert!(run(&Op::Det, &[Some(&not_square)], 1).is_err());
    // Det is defined for floats only: square integer matrices are refused too.
    let ints = i64s(&[2, 2], &[1, 2, 3, 4]);
    assert!(matches!(
        run(&Op::Det, &[Some(&ints)], 1),
        Err(OpError::Shape(m)) if m.contains("float X")
    ));
}

#[test]
fn det_pivots_on_the_largest_magnitude_first_on_ties() {
    // Column 0 holds 3, −3 and 2: the pivot is row 0 (the first of the tie), then the
    // larger remaining magnitude of column 1. The determinant, summed exactly over the six
    // permutations in rationals, is 5/16; that pivot order gives it exactly in f64, while
    // pivoting on the tie's second row, or on the wrong column's entries, ends an ulp or more
    // off. The input is f64 so that the result is not rounded to f32.
    let x = match Tensor::from_vec(
        [3, 3],
        vec![3.0f64, 0.25, -0.25, -3.0, 0.125, -1.0, 2.0, 0.5, -1.0],
    ) {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    };
    check(&one(&Op::Det, &[&x]), &[], &[0.3125]);
}

#[test]
fn einsum_accumulation_counts_the_summed_terms() {
    // The tolerance model's K for Einsum: the product of the extents of the labels that are
    // summed (absent from the output), 1 when none is.
    let a = f32s(&[2, 3], &[1.0; 6]);
    let b = f32s(&[3, 4], &[1.0; 12]);
    for (eq, inputs, k) in [
        ("ij,jk->ik", vec![Some(&a), Some(&b)], 3),
        ("ij->", vec![Some(&a)], 6),
        ("ij->ji", vec![Some(&a)], 1),
        ("ij,jk", vec![Some(&a), Some(&b)], 3),
    ] {
        match concord_cpu::accumulation(&einsum(eq), &inputs) {
            Ok(Some(figures)) => assert_eq!(figures.k, k, "{eq}"),
            other => panic!("{eq}: {other:?}"),
        }
    }
}

#[test]
fn nms_ties_thresholds_and_limits() {
    let op = Op::NonMaxSuppression {
        center_point_box: false,
    };
    // Three unit boxes [y1, x1, y2, x2]: 0 and 1 overlap with IoU 0.5/1.5 = 1/3 (shifted by
    // half a unit), 2 is disjoint. Scores tie between 0 and 2; 1 scores highest.
    let boxes = f32s(
        &[1, 3, 4],
        &[
            0.0, 0.0, 1.0, 1.0, //
            0.0, 0.5, 1.0, 1.5, //
            5.0, 5.0, 6.0, 6.0,
        ],
    );
    let scores = f32s(&[1, 1, 3], &[0.5, 0.9, 0.5]);
    let max = i64s(&[1], &[10]);
    let run_nms = |iou: f32, score: Option<f32>, max: &Tensor| {
        let iou = f32s(&[1], &[iou]);
        let score = score.map(|s| f32s(&[1], &[s]));
        match run(
            &op,
            &[
                Some(&boxes),
                Some(&scores),
                Some(max),
                Some(&iou),
                score.as_ref(),
            ],
            1,
        ) {
            Ok(v) => v[0].to_i64_vec().unwrap_or_default(),
            Err(e) => panic!("{e}"),
        }
    };
    // IoU 1/3 > 0.3 suppresses box 0; the tie between 0 and 2 goes to the lower index,
    // but 0 is suppressed, so 1 then 2.
    assert_eq!(run_nms(0.3, None, &max), vec![0, 0, 1, 0, 0, 2]);
    // IoU 1/3 is not > 0.4: all three, 1 first, then the tie 0 before 2.
    assert_eq!(run_nms(0.4, None, &max), vec![0, 0, 1, 0, 0, 0, 0, 0, 2]);
    // A score must be strictly greater than score_threshold.
    assert_eq!(run_nms(0.4, Some(0.5), &max), vec![0, 0, 1]);
    // At most one per class.
    assert_eq!(run_nms(0.4, None, &i64s(&[1], &[1])), vec![0, 0, 1]);
    // Without max_output_boxes_per_class nothing is selected: shape (0, 3).
    let out = one(&op, &[&boxes, &scores]);
    assert_eq!(out.dims(), &[0, 3]);
}

#[test]
fn nms_center_point_boxes_span_half_their_size_each_way() {
    // [x_centre, y_centre, width, height]: A = (0, 0.5, 2, 2) spans x in [-1, 1] and y in
    // [-0.5, 1.5]; B = (1.5, 1, 2, 2) spans x in [0.5, 2.5] and y in [0, 2]. Their IoU is
    // (0.5 · 1.5) / (4 + 4 − 0.75) = 0.103…, above 0.1, so B (the lower score) is
    // suppressed; at 0.2 both are kept. The same boxes as corners [y1, x1, y2, x2] select
    // the same.
    let centred = f32s(&[1, 2, 4], &[0.0, 0.5, 2.0, 2.0, 1.5, 1.0, 2.0, 2.0]);
    let corners = f32s(&[1, 2, 4], &[-0.5, -1.0, 1.5, 1.0, 0.0, 0.5, 2.0, 2.5]);
    let scores = f32s(&[1, 1, 2], &[0.9, 0.8]);
    let max = i64s(&[1], &[10]);
    for (center_point_box, boxes) in [(true, &centred), (false, &corners)] {
        let op = Op::NonMaxSuppression { center_point_box };
        for (iou, want) in [(0.1, vec![0, 0, 0]), (0.2, vec![0, 0, 0, 0, 0, 1])] {
            let iou = f32s(&[1], &[iou]);
            let got = one(&op, &[boxes, &scores, &max, &iou]);
            assert_eq!(
                got.to_i64_vec().unwrap_or_default(),
                want,
                "center_point_box {center_point_box}"
            );
        }
    }
}

#[test]
fn nms_selects_per_batch_and_class_from_their_own_boxes_and_scores() {
    // Batch 0: three disjoint unit boxes. Batch 1: boxes 0 and 1 the same (IoU 1), box 2
    // apart. Rows come batch-major, then class, then in selection order.
    let boxes = f32s(
        &[2, 3, 4],
        &[
            0.0, 0.0, 1.0, 1.0, 0.0, 2.0, 1.0, 3.0, 0.0, 4.0, 1.0, 5.0, //
            0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 4.0, 1.0, 5.0,
        ],
    );
    let scores = f32s(
        &[2, 2, 3],
        &[
            0.1, 0.9, 0.5, 0.8, 0.2, 0.3, //
            0.6, 0.7, 0.1, 0.9, 0.4, 0.95,
        ],
    );
    let op = Op::NonMaxSuppression {
        center_point_box: false,
    };
    let got = one(
        &op,
        &[&boxes, &scores, &i64s(&[1], &[10]), &f32s(&[1], &[0.5])],
    );
    #[rustfmt::skip]
    let want = vec![
        0, 0, 1, 0, 0, 2, 0, 0, 0, // batch 0, class 0: all three by score
        0, 1, 0, 0, 1, 2, 0, 1, 1, // batch 0, class 1
        1, 0, 1, 1, 0, 2, // batch 1, class 0: 0 is box 1's twin, suppressed
        1, 1, 2, 1, 1, 0, // batch 1, class 1: 1 is box 0's twin, suppressed
    ];
    assert_eq!(got.to_i64_vec().unwrap_or_default(), want);
}

#[test]
fn nms_refuses_boxes_and_scores_that_do_not_match() {
    let op = Op::NonMaxSuppression {
        center_point_box: false,
    };
    let refused = |boxes: &Tensor, scores: &Tensor| {
        matches!(
            run(&op, &[Some(boxes), Some(scores)], 1),
            Err(OpError::Shape(m)) if m.contains("must be (batches, spatial, 4)")
        )
    };
    let boxes = f32s(&[1, 2, 4], &[0.0; 8]);
    let scores = f32s(&[1, 1, 2], &[0.5; 2]);
    assert!(run(&op, &[Some(&boxes), Some(&scores)], 1).is_ok());
    // Each condition broken alone: boxes not rank 3, scores not rank 3, boxes' last dim not
    // 4, different batches, different spatial counts.
    assert!(refused(&f32s(&[2, 4], &[0.0; 8]), &scores));
    assert!(refused(&boxes, &f32s(&[1, 2], &[0.5; 2])));
    assert!(refused(&f32s(&[1, 2, 5], &[0.0; 10]), &scores));
    assert!(refused(&f32s(&[2, 2, 4], &[0.0; 16]), &scores));
    assert!(refused(&boxes, &f32s(&[1, 1, 3], &[0.5; 3])));
    // Both must be f32: the error names the one that is not, and its type.
    let wide = |dims: &[usize], len: usize| match Tensor::from_vec(dims.to_vec(), vec![0.0f64; len])
    {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    };
    assert!(matches!(
        run(&op, &[Some(&wide(&[1, 2, 4], 8)), Some(&scores)], 1),
        Err(OpError::DType {
            index: 0,
            name: "boxes",
            actual: concord_core::DType::F64,
            ..
        })
    ));
    assert!(matches!(
        run(&op, &[Some(&boxes), Some(&wide(&[1, 1, 2], 2))], 1),
        Err(OpError::DType {
            index: 1,
            name: "scores",
            actual: concord_core::DType::F64,
            ..
        })
    ));
}

#[test]
fn nms_orders_nan_scores_after_every_number() {
    let op = Op::NonMaxSuppression {
        center_point_box: false,
    };
    // Eight disjoint unit boxes along x, so no IoU suppresses any: the output is the
    // candidate order alone.
    let scores = [
        0.3,
        0.9,
        f32::NAN,
        0.5,
        f32::NAN,
        f32::NEG_INFINITY,
        0.1,
        f32::NAN,
    ];
    let n = scores.len();
    let corners: Vec<f32> = (0..n)
        .flat_map(|i| [0.0, 2.0 * i as f32, 1.0, 2.0 * i as f32 + 1.0])
        .collect();
    let boxes = f32s(&[1, n, 4], &corners);
    let scores = f32s(&[1, 1, n], &scores);
    let max = i64s(&[1], &[100]);
    let iou = f32s(&[1], &[0.5]);
    let selected = |threshold: Option<f32>| -> Vec<i64> {
        let threshold = threshold.map(|t| f32s(&[1], &[t]));
        let inputs = [
            Some(&boxes),
            Some(&scores),
            Some(&max),
            Some(&iou),
            threshold.as_ref(),
        ];
        match run(&op, &inputs, 1) {
            Ok(v) => v[0]
                .to_i64_vec()
                .unwrap_or_default()
                .chunks(3)
                .map(|row| row[2])
                .collect(),
            Err(e) => panic!("{e}"),
        }
    };
    // Without a score_threshold every box is a candidate: the spec's descending scores
    // (-∞ last among the numbers), then the NaN scores in index order. (onnxruntime 1.23
    // gives 6, 2, 3, 0, 1, 5, 4, 7 here: NaN breaks its queue's order; see selection.rs.)
    assert_eq!(selected(None), vec![1, 3, 0, 6, 5, 2, 4, 7]);
    // A NaN score is not greater than any threshold: dropped, as onnxruntime drops it
    // (it selects 1, 3, 0, 6 here).
    assert_eq!(selected(Some(0.0)), vec![1, 3, 0, 6]);
}

#[test]
fn unique_outputs() {
    // X = [2, 1, 1, 3, 4, 3].
    let x = f32s(&[6], &[2.0, 1.0, 1.0, 3.0, 4.0, 3.0]);
    let outs = |sorted: bool, axis: Option<i64>, x: &Tensor| -> Vec<Vec<f64>> {
        match run(&Op::Unique { axis, sorted }, &[Some(x)], 4) {
            Ok(v) => v.iter().map(Tensor::to_f64_vec).collect(),
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(
        outs(true, None, &x),
        vec![
            vec![1.0, 2.0, 3.0, 4.0],
            vec![1.0, 0.0, 3.0, 4.0],
            vec![1.0, 0.0, 0.0, 2.0, 3.0, 2.0],
            vec![2.0, 1.0, 2.0, 1.0],
        ]
    );
    assert_eq!(
        outs(false, None, &x),
        vec![
            vec![2.0, 1.0, 3.0, 4.0],
            vec![0.0, 1.0, 3.0, 4.0],
            vec![0.0, 1.0, 1.0, 2.0, 3.0, 2.0],
            vec![1.0, 2.0, 2.0, 1.0],
        ]
    );
    // Rows of [[1, 0], [0, 1], [1, 0]] along axis 0: [0, 1] sorts first.
    let m = f32s(&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 0.0]);
    assert_eq!(
        outs(true, Some(0), &m),
        vec![
            vec![0.0, 1.0, 1.0, 0.0],
            vec![1.0, 0.0],
            vec![1.0, 0.0, 1.0],
            vec![1.0, 2.0],
        ]
    );
    // Only Y requested.
    match run(
        &Op::Unique {
            axis: None,
            sorted: true,
        },
        &[Some(&x)],
        1,
    ) {
        Ok(v) => assert_eq!(v.len(), 1),
        Err(e) => panic!("{e}"),
    }
}
