//! Reference kernels for TensorScatter (a KV-cache update, linear and circular) and
//! TfIdfVectorizer over integer tokens, against values worked out by hand in the comments;
//! the ONNX node tests check the cases ONNX ships. Each output's type is also checked
//! against inference on the same operands.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::infer::infer_on_tensors;
use concord_core::op::{TfIdf, TfIdfMode};
use concord_core::{DType, Op, OpError, Tensor};
use concord_cpu::run_op;

fn tensor(result: Result<Tensor, concord_core::Error>) -> Tensor {
    match result {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let mut out = run_op(op, inputs, 1)?;
    let inferred = infer_on_tensors(op, inputs, 1)?;
    match (out.pop(), inferred.first()) {
        (Some(t), Some(fact)) if out.is_empty() => {
            assert_eq!(fact.dtype, t.dtype(), "{op:?}: inferred dtype");
            assert_eq!(fact.shape, t.shape().to_sym(), "{op:?}: inferred shape");
            Ok(t)
        }
        _ => panic!("{op:?} did not produce one output"),
    }
}

fn one(op: &Op, inputs: &[Option<&Tensor>]) -> Tensor {
    match run(op, inputs) {
        Ok(t) => t,
        Err(e) => panic!("{op:?}: {e}"),
    }
}

fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
    tensor(Tensor::from_vec(dims.to_vec(), v.to_vec()))
}

fn scatter(axis: i64, circular: bool) -> Op {
    Op::TensorScatter { axis, circular }
}

#[test]
fn tensor_scatter_writes_from_each_write_index() {
    // past (2, 4, 1) = batch 0: 0 1 2 3, batch 1: 4 5 6 7; update (2, 2, 1) = 10 11 | 20 21
    // along the default axis −2 (the sequence).
    let past = f32s(&[2, 4, 1], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let update = f32s(&[2, 2, 1], &[10.0, 11.0, 20.0, 21.0]);
    // Linear, write indices 1 and 2: batch 0 gets 10, 11 at 1, 2; batch 1 gets 20, 21 at
    // 2, 3.
    let at = Tensor::vec_i64(vec![1, 2]);
    let t = one(
        &scatter(-2, false),
        &[Some(&past), Some(&update), Some(&at)],
    );
    assert_eq!(t.dims(), &[2, 4, 1]);
    assert_eq!(t.to_f64_vec(), [0.0, 10.0, 11.0, 3.0, 4.0, 5.0, 20.0, 21.0]);
    // Without write indices every batch entry writes from 0.
    let t = one(&scatter(-2, false), &[Some(&past), Some(&update)]);
    assert_eq!(t.to_f64_vec(), [10.0, 11.0, 2.0, 3.0, 20.0, 21.0, 6.0, 7.0]);
    // Circular, write indices 3 and −1: batch 0 writes 3 and 4 mod 4 = 0; batch 1 writes
    // −1 mod 4 = 3 and 0.
    let around = Tensor::vec_i64(vec![3, -1]);
    let t = one(
        &scatter(1, true),
        &[Some(&past), Some(&update), Some(&around)],
    );
    assert_eq!(t.to_f64_vec(), [11.0, 1.0, 2.0, 10.0, 21.0, 5.0, 6.0, 20.0]);
    // Linear mode may not run past the cache: 3 + 2 > 4.
    let past_end = Tensor::vec_i64(vec![3, 0]);
    assert!(matches!(
        run(&scatter(-2, false), &[Some(&past), Some(&update), Some(&past_end)]),
        Err(OpError::Shape(m)) if m.contains("batch entry 0")
    ));
}

#[test]
fn tensor_scatter_on_a_middle_axis_moves_values_exactly() {
    // past (1, 3, 2) i64 with the sequence on axis 1 and a trailing axis of 2: update
    // (1, 1, 2) = 8 9 written at sequence index 2 replaces the last row.
    let past = tensor(Tensor::from_i64([1, 3, 2], vec![1, 2, 3, 4, 5, 6]));
    let update = tensor(Tensor::from_i64([1, 1, 2], vec![8, 9]));
    let at = Tensor::vec_i64(vec![2]);
    let t = one(&scatter(1, false), &[Some(&past), Some(&update), Some(&at)]);
    assert_eq!(t.dtype(), DType::I64);
    assert_eq!(t.to_i64_vec(), Some(vec![1, 2, 3, 4, 8, 9]));
    // Bool caches move too.
    let past = tensor(Tensor::from_bool([1, 2], vec![false, false]));
    let update = tensor(Tensor::from_bool([1, 1], vec![true]));
    let at = Tensor::vec_i64(vec![1]);
    let t = one(
        &scatter(-1, false),
        &[Some(&past), Some(&update), Some(&at)],
    );
    assert_eq!(t.as_bool(), Some(&[false, true][..]));
}

#[test]
fn tensor_scatter_wraps_write_indices_at_the_ends_of_i64() {
    // Circular mode writes step s at (write index + s) mod max_sequence, taken exactly:
    // from i64::MAX = 2^63 - 1 over a cache of 4, steps 0 and 1 land at 3 and 2^63 mod 4 =
    // 0; from i64::MIN = -2^63, at 0 and 1.
    let past = f32s(&[1, 4, 1], &[0.0, 1.0, 2.0, 3.0]);
    let update = f32s(&[1, 2, 1], &[10.0, 11.0]);
    let from = |w: i64| Tensor::vec_i64(vec![w]);
    let t = one(
        &scatter(-2, true),
        &[Some(&past), Some(&update), Some(&from(i64::MAX))],
    );
    assert_eq!(t.to_f64_vec(), [11.0, 1.0, 2.0, 10.0]);
    let t = one(
        &scatter(-2, true),
        &[Some(&past), Some(&update), Some(&from(i64::MIN))],
    );
    assert_eq!(t.to_f64_vec(), [10.0, 11.0, 2.0, 3.0]);
    // Linear mode from i64::MAX runs past the cache.
    assert!(matches!(
        run(&scatter(-2, false), &[Some(&past), Some(&update), Some(&from(i64::MAX))]),
        Err(OpError::Shape(m)) if m.contains("batch entry 0")
    ));
}

#[test]
fn tensor_scatter_refuses_mismatched_operands() {
    let past = f32s(&[2, 4, 1], &[0.0; 8]);
    let update = f32s(&[2, 2, 1], &[0.0; 4]);
    let at = Tensor::vec_i64(vec![0, 0]);
    // The batch axis cannot be the sequence axis.
    assert!(matches!(
        run(&scatter(0, false), &[Some(&past), Some(&update)]),
        Err(OpError::Attribute { name: "axis", .. })
    ));
    // An update longer than the cache, or differing off the sequence axis, of the cache's
    // rank: refused by the shape check, which names both shapes.
    let long = f32s(&[2, 5, 1], &[0.0; 10]);
    let wide = f32s(&[2, 2, 2], &[0.0; 8]);
    for bad in [&long, &wide] {
        match run(&scatter(-2, false), &[Some(&past), Some(bad)]) {
            Err(OpError::Shape(m)) => assert!(
                m.contains("on every axis but the sequence axis")
                    && m.contains(&bad.shape().to_string())
                    && m.contains(&past.shape().to_string()),
                "{m}"
            ),
            other => panic!("update {}: {other:?}", bad.shape()),
        }
    }
    // One write index per batch entry, as i64; the update of the cache's dtype.
    let three = Tensor::vec_i64(vec![0, 0, 0]);
    assert!(matches!(
        run(
            &scatter(-2, false),
            &[Some(&past), Some(&update), Some(&three)]
        ),
        Err(OpError::Shape(_))
    ));
    // ONNX types write_indices as int64 only: f32 and i32 alike are refused, naming i64.
    let as_f32 = f32s(&[2], &[0.0, 0.0]);
    let as_i32 = tensor(Tensor::from_vec([2], vec![0i32, 0]));
    for bad in [&as_f32, &as_i32] {
        match run(
            &scatter(-2, false),
            &[Some(&past), Some(&update), Some(bad)],
        ) {
            Err(OpError::DType {
                index: 2, expected, ..
            }) => assert_eq!(expected, "i64"),
            other => panic!("write_indices of {:?}: {other:?}", bad.dtype()),
        }
    }
    let ints = tensor(Tensor::from_i64([2, 2, 1], vec![0; 4]));
    assert!(matches!(
        run(&scatter(-2, false), &[Some(&past), Some(&ints), Some(&at)]),
        Err(OpError::DType { index: 1, .. })
    ));
}

/// The node tests' pool: 1-grams 2, 3, 5, 4 (n-grams 0 to 3), 2-grams (5, 6), (7, 8),
/// (6, 7) (n-grams 4 to 6), each n-gram at the column of its position.
fn tfidf(mode: TfIdfMode, min: usize, max: usize, skip: usize, weights: &[f32]) -> Op {
    Op::TfIdfVectorizer(TfIdf {
        mode,
        min_gram_length: min,
        max_gram_length: max,
        max_skip_count: skip,
        ngram_counts: vec![0, 4],
        ngram_indexes: (0..7).collect(),
        pool: vec![2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
        weights: weights.to_vec(),
    })
}

#[test]
fn tfidf_counts_unigrams_and_skipped_bigrams() {
    // X = 2 3 2 5 6 4: 1-grams 2 (twice), 3, 5, 4; the 2-grams without a skip are (2, 3),
    // (3, 2), (2, 5), (5, 6), (6, 4), of which (5, 6) is in the pool; with a skip of 1,
    // (2, 2), (3, 5), (2, 6), (5, 4), none in the pool.
    let x = tensor(Tensor::from_i64([6], vec![2, 3, 2, 5, 6, 4]));
    let t = one(&tfidf(TfIdfMode::Tf, 1, 2, 1, &[]), &[Some(&x)]);
    assert_eq!((t.dtype(), t.dims()), (DType::F32, &[7][..]));
    assert_eq!(t.to_f64_vec(), [2.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
    // X = 7 0 8 6 9 7 (i32): no pool 2-gram is adjacent; a skip of 1 reads (7, 8), (0, 6),
    // (8, 9), (6, 7): (7, 8) and (6, 7) count. Without skips (max_skip_count 0) nothing does.
    let x = tensor(Tensor::from_vec([6], vec![7i32, 0, 8, 6, 9, 7]));
    let t = one(&tfidf(TfIdfMode::Tf, 2, 2, 1, &[]), &[Some(&x)]);
    assert_eq!(t.to_f64_vec(), [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
    let t = one(&tfidf(TfIdfMode::Tf, 2, 2, 0, &[]), &[Some(&x)]);
    assert_eq!(t.to_f64_vec(), [0.0; 7]);
    // 1-grams are counted once whatever the skips: X = 2 2 with max_skip_count 3 counts
    // the 1-gram 2 twice, not once per skip.
    let x = tensor(Tensor::from_i64([2], vec![2, 2]));
    let t = one(&tfidf(TfIdfMode::Tf, 1, 1, 3, &[]), &[Some(&x)]);
    assert_eq!(t.to_f64_vec(), [2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
}

#[test]
fn tfidf_weights_and_rows() {
    let weights = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
    // Two rows: 2 3 2 5 6 4 (counts 2 1 1 1 1 0 0, as above) and 7 8 7 8 0 0 (the 2-gram
    // (7, 8) twice; (8, 7) is not in the pool).
    let x = tensor(Tensor::from_i64(
        [2, 6],
        vec![2, 3, 2, 5, 6, 4, 7, 8, 7, 8, 0, 0],
    ));
    let counts = [
        2.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0,
    ];
    let tf = one(&tfidf(TfIdfMode::Tf, 1, 2, 0, &weights), &[Some(&x)]);
    assert_eq!(tf.dims(), &[2, 7]);
    assert_eq!(tf.to_f64_vec(), counts, "TF ignores the weights");
    // IDF: the weight wherever the count is non-zero.
    let idf = one(&tfidf(TfIdfMode::Idf, 1, 2, 0, &weights), &[Some(&x)]);
    assert_eq!(
        idf.to_f64_vec(),
        [0.5, 1.0, 2.0, 4.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 16.0, 0.0]
    );
    // TFIDF: count × weight; without weights, IDF is 1 per hit and TFIDF the count.
    let tfidf_w = one(&tfidf(TfIdfMode::TfIdf, 1, 2, 0, &weights), &[Some(&x)]);
    assert_eq!(
        tfidf_w.to_f64_vec(),
        [1.0, 1.0, 2.0, 4.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 32.0, 0.0]
    );
    let idf_1 = one(&tfidf(TfIdfMode::Idf, 1, 2, 0, &[]), &[Some(&x)]);
    let hits: Vec<f64> = counts
        .iter()
        .map(|&c| if c > 0.0 { 1.0 } else { 0.0 })
        .collect();
    assert_eq!(idf_1.to_f64_vec(), hits);
    let tfidf_1 = one(&tfidf(TfIdfMode::TfIdf, 1, 2, 0, &[]), &[Some(&x)]);
    assert_eq!(tfidf_1.to_f64_vec(), counts);
}

#[test]
fn tfidf_pool_layouts() {
    // A 3-gram pool (no 1- or 2-grams: ngram_counts 0, 0, 0): (1, 2, 3) at column 1 of 2.
    // X = 1 9 2 9 3 1 2 3: adjacent once (at 5); with a skip of 1 once more (at 0).
    let op = Op::TfIdfVectorizer(TfIdf {
        mode: TfIdfMode::Tf,
        min_gram_length: 3,
        max_gram_length: 3,
        max_skip_count: 1,
        ngram_counts: vec![0, 0, 0],
        ngram_indexes: vec![1],
        pool: vec![1, 2, 3],
        weights: Vec::new(),
    });
    let x = tensor(Tensor::from_i64([8], vec![1, 9, 2, 9, 3, 1, 2, 3]));
    assert_eq!(one(&op, &[Some(&x)]).to_f64_vec(), [0.0, 2.0]);
    // Permuted columns, and a 1-gram listed twice: the later listing's column counts it
    // (as in onnxruntime's pool map). Pool 4, 5, 4 at columns 2, 1, 0.
    let op = Op::TfIdfVectorizer(TfIdf {
        mode: TfIdfMode::Tf,
        min_gram_length: 1,
        max_gram_length: 1,
        max_skip_count: 0,
        ngram_counts: vec![0],
        ngram_indexes: vec![2, 1, 0],
        pool: vec![4, 5, 4],
        weights: Vec::new(),
    });
    let x = tensor(Tensor::from_i64([3], vec![4, 5, 5]));
    assert_eq!(one(&op, &[Some(&x)]).to_f64_vec(), [1.0, 2.0, 0.0]);
    // An empty row counts nothing.
    let empty = tensor(Tensor::from_i64([0], Vec::new()));
    assert_eq!(one(&op, &[Some(&empty)]).to_f64_vec(), [0.0, 0.0, 0.0]);
}

#[test]
fn tfidf_refuses_bad_operands() {
    let op = tfidf(TfIdfMode::Tf, 1, 2, 0, &[]);
    let floats = f32s(&[2], &[2.0, 3.0]);
    assert!(matches!(
        run(&op, &[Some(&floats)]),
        Err(OpError::DType { index: 0, .. })
    ));
    let cube = tensor(Tensor::from_i64([1, 1, 2], vec![2, 3]));
    assert!(matches!(run(&op, &[Some(&cube)]), Err(OpError::Shape(_))));
    let no_rows = tensor(Tensor::from_i64([0, 2], Vec::new()));
    assert!(matches!(
        run_op(&op, &[Some(&no_rows)], 1),
        Err(OpError::Shape(_))
    ));
    // Fewer weights than output columns, with a mode that reads them.
    let short = tfidf(TfIdfMode::Idf, 1, 2, 0, &[1.0, 2.0]);
    let x = tensor(Tensor::from_i64([2], vec![2, 3]));
    assert!(matches!(
        run(&short, &[Some(&x)]),
        Err(OpError::Attribute {
            name: "weights",
            ..
        })
    ));
}
