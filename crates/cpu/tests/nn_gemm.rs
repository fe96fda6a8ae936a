//! Gemm and MatMul kernel tests: hand-computed products, and a triple-loop oracle written
//! here for transposes, alpha/beta, C broadcasting and numpy-style batch broadcasting.

mod nn_support;

use concord_core::op::Gemm;
use concord_core::{DType, Op, OpError};
use nn_support::{check, check_error, f16s, f32s, f64s_as_f32, i64s, ok, run, values, Tolerance};

fn gemm(alpha: f32, beta: f32, trans_a: bool, trans_b: bool) -> Op {
    Op::Gemm(Gemm {
        alpha,
        beta,
        trans_a,
        trans_b,
    })
}

/// Row-major transpose of a rows×cols matrix.
fn transpose(m: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; m.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = m[r * cols + c];
        }
    }
    t
}

/// The definition: (A·B)[i, j] = Σ_p A[i, p]·B[p, j].
fn product(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                y[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    y
}

#[test]
fn gemm_by_hand_with_alpha_beta_and_full_c() {
    // A·B = [[19, 22], [43, 50]]; 2·AB + 0.5·C with C = [[2, 4], [6, 8]].
    let a = f32s(&[2, 2], &[1., 2., 3., 4.]);
    let b = f32s(&[2, 2], &[5., 6., 7., 8.]);
    let c = f32s(&[2, 2], &[2., 4., 6., 8.]);
    let y = ok(
        &gemm(2.0, 0.5, false, false),
        &[Some(&a), Some(&b), Some(&c)],
    );
    check(
        &y,
        DType::F32,
        &[2, 2],
        &[39., 46., 89., 104.],
        Tolerance::Exact,
    );
}

#[test]
fn gemm_every_transpose_combination_matches_the_definition() {
    let (m, k, n) = (5, 7, 3);
    let a = values(m * k, 1);
    let b = values(k * n, 2);
    let c = values(m * n, 3);
    let ab = product(&a, &b, m, k, n);
    let want: Vec<f64> = ab.iter().zip(&c).map(|(p, c)| 0.5 * p + 2.0 * c).collect();
    for trans_a in [false, true] {
        for trans_b in [false, true] {
            let (a_stored, a_dims) = if trans_a {
                (transpose(&a, m, k), [k, m])
            } else {
                (a.clone(), [m, k])
            };
            let (b_stored, b_dims) = if trans_b {
                (transpose(&b, k, n), [n, k])
            } else {
                (b.clone(), [k, n])
            };
            let at = f64s_as_f32(&a_dims, &a_stored);
            let bt = f64s_as_f32(&b_dims, &b_stored);
            let ct = f64s_as_f32(&[m, n], &c);
            let y = ok(
                &gemm(0.5, 2.0, trans_a, trans_b),
                &[Some(&at), Some(&bt), Some(&ct)],
            );
            check(&y, DType::F32, &[m, n], &want, Tolerance::Exact);
        }
    }
}

/// Which of C's values lands at output (i, j) under unidirectional broadcasting.
type CElement = fn(&[f64], usize, usize) -> f64;

#[test]
fn gemm_c_broadcasts_from_scalar_row_column_and_full() {
    let (m, k, n) = (3, 4, 5);
    let a = values(m * k, 4);
    let b = values(k * n, 5);
    let ab = product(&a, &b, m, k, n);
    let at = f64s_as_f32(&[m, k], &a);
    let bt = f64s_as_f32(&[k, n], &b);
    // (shape of C, C[i, j] as a function of C's values)
    let cases: Vec<(Vec<usize>, CElement)> = vec![
        (vec![], |c, _, _| c[0]),
        (vec![1], |c, _, _| c[0]),
        (vec![5], |c, _, j| c[j]),
        (vec![1, 5], |c, _, j| c[j]),
        (vec![3, 1], |c, i, _| c[i]),
        (vec![1, 1], |c, _, _| c[0]),
        (vec![3, 5], |c, i, j| c[i * 5 + j]),
    ];
    for (dims, at_ij) in cases {
        let len: usize = dims.iter().product();
        let c = values(len, 6);
        let ct = f64s_as_f32(&dims, &c);
        let want: Vec<f64> = (0..m * n)
            .map(|idx| ab[idx] + at_ij(&c, idx / n, idx % n))
            .collect();
        let y = ok(
            &gemm(1.0, 1.0, false, false),
            &[Some(&at), Some(&bt), Some(&ct)],
        );
        check(&y, DType::F32, &[m, n], &want, Tolerance::Exact);
    }
}

#[test]
fn gemm_without_c_and_with_beta_zero_ignore_c() {
    let a = f32s(&[1, 2], &[1., 2.]);
    let b = f32s(&[2, 1], &[3., 4.]);
    let y = ok(&gemm(1.0, 1.0, false, false), &[Some(&a), Some(&b), None]);
    check(&y, DType::F32, &[1, 1], &[11.], Tolerance::Exact);
    // beta = 0: C is not read, as in onnxruntime, so an infinite C does not give NaN.
    let c = f32s(&[1, 1], &[f32::INFINITY]);
    let y = ok(
        &gemm(1.0, 0.0, false, false),
        &[Some(&a), Some(&b), Some(&c)],
    );
    check(&y, DType::F32, &[1, 1], &[11.], Tolerance::Exact);
}

#[test]
fn gemm_in_f16_gives_f16() {
    let a = f16s(&[1, 2], &[0.5, 1.5]);
    let b = f16s(&[2, 2], &[2., 4., 6., 8.]);
    let c = f16s(&[2], &[0.25, -0.25]);
    let y = ok(
        &gemm(1.0, 1.0, false, false),
        &[Some(&a), Some(&b), Some(&c)],
    );
    check(&y, DType::F16, &[1, 2], &[10.25, 13.75], Tolerance::Exact);
}

#[test]
fn gemm_shape_errors_name_the_shapes() {
    let a = f32s(&[2, 3], &[0.; 6]);
    let b = f32s(&[4, 2], &[0.; 8]);
    check_error(
        run(&gemm(1.0, 1.0, false, false), &[Some(&a), Some(&b)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[2, 3]", "[4, 2]"],
    );
    let b = f32s(&[3, 2], &[0.; 6]);
    let c = f32s(&[3, 2], &[0.; 6]);
    check_error(
        run(
            &gemm(1.0, 1.0, false, false),
            &[Some(&a), Some(&b), Some(&c)],
        ),
        |e| matches!(e, OpError::Shape(_)),
        &["C [3, 2]", "(2, 2)"],
    );
    let a3 = f32s(&[1, 2, 3], &[0.; 6]);
    check_error(
        run(&gemm(1.0, 1.0, false, false), &[Some(&a3), Some(&b)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[1, 2, 3]"],
    );
    let ai = i64s(&[2, 3], &[0; 6]);
    check_error(
        run(&gemm(1.0, 1.0, false, false), &[Some(&ai), Some(&b)]),
        |e| matches!(e, OpError::DType { index: 0, .. }),
        &[],
    );
}

/// ONNX Gemm takes A and B of rank 2 exactly ("A: input tensor A. The shape of A should be
/// (M, K) if transA is 0, or (K, M) if transA is non-zero"; B likewise). A rank-3 A whose
/// first two dims would line up with B as a 2×3 matrix (its six elements are enough for
/// one) must still be refused, and so must a 1-D B next to a 2-D A: either operand alone of
/// the wrong rank is an error.
#[test]
fn gemm_refuses_either_operand_of_rank_other_than_2() {
    let a3 = f32s(&[2, 3, 1], &[0.; 6]);
    let b = f32s(&[3, 2], &[0.; 6]);
    check_error(
        run(&gemm(1.0, 1.0, false, false), &[Some(&a3), Some(&b)]),
        |e| matches!(e, OpError::Shape(_)),
        &["2-D", "[2, 3, 1]"],
    );
    let a = f32s(&[2, 3], &[0.; 6]);
    let b1 = f32s(&[3], &[0.; 3]);
    check_error(
        run(&gemm(1.0, 1.0, false, false), &[Some(&a), Some(&b1)]),
        |e| matches!(e, OpError::Shape(_)),
        &["2-D", "[3]"],
    );
}

/// C must broadcast one way ("unidirectional broadcasting") to (M, N): a 1-D C is a row of N
/// values or a single value. C of length 3 next to a 2×2 output is neither, though it has
/// enough values for a row of 2, so it must be refused rather than read in part.
#[test]
fn gemm_refuses_a_1d_c_longer_than_a_row() {
    let a = f32s(&[2, 3], &[0.; 6]);
    let b = f32s(&[3, 2], &[0.; 6]);
    let c = f32s(&[3], &[0.; 3]);
    check_error(
        run(
            &gemm(1.0, 1.0, false, false),
            &[Some(&a), Some(&b), Some(&c)],
        ),
        |e| matches!(e, OpError::Shape(_)),
        &["C [3]", "(2, 2)"],
    );
}

/// numpy `matmul`, written from its documentation: 1-D operands are promoted and the added
/// axis removed, leading axes broadcast.
fn matmul_reference(
    a: &[f64],
    a_dims: &[usize],
    b: &[f64],
    b_dims: &[usize],
) -> (Vec<usize>, Vec<f64>) {
    let a2: Vec<usize> = if a_dims.len() == 1 {
        vec![1, a_dims[0]]
    } else {
        a_dims.to_vec()
    };
    let b2: Vec<usize> = if b_dims.len() == 1 {
        vec![b_dims[0], 1]
    } else {
        b_dims.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let n = b2[b2.len() - 1];
    let a_batch = &a2[..a2.len() - 2];
    let b_batch = &b2[..b2.len() - 2];
    let rank = a_batch.len().max(b_batch.len());
    let pad = |s: &[usize]| {
        let mut v = vec![1; rank - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (ab, bb) = (pad(a_batch), pad(b_batch));
    let batch: Vec<usize> = ab.iter().zip(&bb).map(|(&x, &y)| x.max(y)).collect();
    let count: usize = batch.iter().product();
    let mut y = Vec::new();
    for flat in 0..count {
        // Unravel the batch index, then read each operand's batch with size-1 axes pinned.
        let mut rest = flat;
        let mut coords = vec![0; rank];
        for (c, &d) in coords.iter_mut().zip(&batch).rev() {
            *c = rest % d;
            rest /= d;
        }
        let index = |dims: &[usize]| {
            coords
                .iter()
                .zip(dims)
                .fold(0, |acc, (&c, &d)| acc * d + if d == 1 { 0 } else { c })
        };
        let (ai, bi) = (index(&ab), index(&bb));
        y.extend(product(
            &a[ai * m * k..(ai + 1) * m * k],
            &b[bi * k * n..(bi + 1) * k * n],
            m,
            k,
            n,
        ));
    }
    let mut dims = batch;
    if a_dims.len() > 1 {
        dims.push(m);
    }
    if b_dims.len() > 1 {
        dims.push(n);
    }
    (dims, y)
}

fn check_matmul(a_dims: &[usize], b_dims: &[usize], expected_dims: &[usize], seed: u64) {
    let a = values(a_dims.iter().product(), seed);
    let b = values(b_dims.iter().product(), seed + 1);
    let (dims, want) = matmul_reference(&a, a_dims, &b, b_dims);
    assert_eq!(dims, expected_dims, "the oracle's own output shape");
    let y = ok(
        &Op::MatMul,
        &[
            Some(&f64s_as_f32(a_dims, &a)),
            Some(&f64s_as_f32(b_dims, &b)),
        ],
    );
    check(&y, DType::F32, &dims, &want, Tolerance::Exact);
}

#[test]
fn matmul_of_vectors_by_hand() {
    let a = f32s(&[3], &[1., 2., 3.]);
    let b = f32s(&[3], &[4., 5., 6.]);
    let y = ok(&Op::MatMul, &[Some(&a), Some(&b)]);
    check(&y, DType::F32, &[], &[32.], Tolerance::Exact);

    let v = f32s(&[2], &[1., 2.]);
    let m = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let y = ok(&Op::MatMul, &[Some(&v), Some(&m)]);
    check(&y, DType::F32, &[3], &[9., 12., 15.], Tolerance::Exact);

    let ones = f32s(&[3], &[1., 1., 1.]);
    let y = ok(&Op::MatMul, &[Some(&m), Some(&ones)]);
    check(&y, DType::F32, &[2], &[6., 15.], Tolerance::Exact);
}

#[test]
fn matmul_batched_and_broadcast_match_numpy_semantics() {
    check_matmul(&[2, 3, 4], &[2, 4, 5], &[2, 3, 5], 10);
    check_matmul(&[2, 1, 3, 4], &[3, 4, 5], &[2, 3, 3, 5], 20);
    check_matmul(&[3, 4], &[2, 4, 5], &[2, 3, 5], 30);
    check_matmul(&[2, 3, 4], &[4, 5], &[2, 3, 5], 40);
    check_matmul(&[2, 3, 4], &[4], &[2, 3], 50);
    check_matmul(&[4], &[2, 4, 5], &[2, 5], 60);
    check_matmul(&[1, 3, 4], &[2, 1, 4, 2], &[2, 1, 3, 2], 70);
    // Large enough to cross the blocked multiply's tiles, on the shared-B fast path.
    check_matmul(&[2, 70, 130], &[130, 33], &[2, 70, 33], 80);
}

#[test]
fn matmul_errors_name_the_shapes() {
    let a = f32s(&[2, 3], &[0.; 6]);
    let b = f32s(&[2, 3], &[0.; 6]);
    check_error(
        run(&Op::MatMul, &[Some(&a), Some(&b)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[2, 3]"],
    );
    let a = f32s(&[2, 3, 4], &[0.; 24]);
    let b = f32s(&[3, 4, 5], &[0.; 60]);
    check_error(
        run(&Op::MatMul, &[Some(&a), Some(&b)]),
        |e| matches!(e, OpError::Shape(_)),
        &["[2, 3, 4]", "[3, 4, 5]"],
    );
    let s = f32s(&[], &[1.]);
    check_error(
        run(&Op::MatMul, &[Some(&s), Some(&b)]),
        |e| matches!(e, OpError::Shape(_)),
        &["rank"],
    );
}
