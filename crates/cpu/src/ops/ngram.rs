//! TfIdfVectorizer over integer tokens: counts, in each row of X, every n-gram of the pool
//! that occurs with any skip from 0 to `max_skip_count` between its tokens, and writes the
//! (weighted) counts to the pool n-grams' output columns.
//!
//! The counting follows onnxruntime and the ONNX reference implementation: 1-grams are
//! counted once (a skip does not change them); an n-gram of length n with skip s is the
//! tokens at i, i + (s + 1), …, i + (n − 1)(s + 1), for every start i where they fit; and
//! an n-gram listed twice in the pool counts at its last listing's column.

use super::required;
use concord_core::op::{TfIdf, TfIdfMode};
use concord_core::{DType, OpError, Shape, Tensor};
use std::collections::HashMap;

pub(crate) fn tf_idf_vectorizer(t: &TfIdf, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let tokens = match x.dtype() {
        DType::I32 | DType::I64 => x.to_i64_vec().unwrap_or_default(),
        actual => {
            return Err(OpError::DType {
                index: 0,
                name: "X",
                expected: "i32 or i64".to_string(),
                actual,
            })
        }
    };
    let (rows, columns, out_dims) = match *x.dims() {
        [c] => (1, c, vec![t.output_size()]),
        [n, c] if n >= 1 => (n, c, vec![n, t.output_size()]),
        _ => {
            return Err(OpError::Shape(format!(
                "TfIdfVectorizer needs X (C) or (N, C) with N ≥ 1, got {}",
                x.shape()
            )))
        }
    };
    let width = t.output_size();
    let weights_needed = t.mode != TfIdfMode::Tf && !t.weights.is_empty();
    if weights_needed && t.weights.len() < width {
        return Err(OpError::Attribute {
            name: "weights",
            detail: format!(
                "has {} values, but the output has {width} columns and each needs a weight",
                t.weights.len()
            ),
        });
    }
    let grams = t.pool_ngrams().ok_or_else(|| OpError::Attribute {
        name: "ngram_counts",
        detail: format!(
            "the starts {:?} do not split the pool of {} tokens into n-grams that \
             ngram_indexes ({} values) can place",
            t.ngram_counts,
            t.pool.len(),
            t.ngram_indexes.len()
        ),
    })?;
    // Later listings replace earlier ones, as in onnxruntime's pool map.
    let columns_of: HashMap<&[i64], usize> = grams.into_iter().collect();
    let size = rows.checked_mul(width).ok_or_else(|| {
        OpError::Shape(format!(
            "TfIdfVectorizer: {rows} × {width} outputs is too many"
        ))
    })?;
    let mut counts = vec![0u64; size];
    if columns > 0 {
        for (row, line) in tokens.chunks_exact(columns).enumerate() {
            let counts = &mut counts[row * width..(row + 1) * width];
            count_row(t, line, &columns_of, counts);
        }
    }
    let values = counts
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let weight = if weights_needed {
                f64::from(t.weights[i % width])
            } else {
                1.0
            };
            match t.mode {
                TfIdfMode::Tf => count as f64,
                TfIdfMode::Idf if count > 0 => weight,
                TfIdfMode::Idf => 0.0,
                TfIdfMode::TfIdf => count as f64 * weight,
            }
        })
        .collect();
    Tensor::from_f64(DType::F32, Shape::new(out_dims), values)
}

/// Adds one row's n-gram counts to `counts` (one per output column).
fn count_row(t: &TfIdf, line: &[i64], columns_of: &HashMap<&[i64], usize>, counts: &mut [u64]) {
    let mut shortest = t.min_gram_length.max(1);
    let mut gram = Vec::with_capacity(t.max_gram_length.min(line.len()));
    // A skip as long as the row fits no n-gram of two or more tokens.
    for skip in 0..=t.max_skip_count.min(line.len()) {
        if shortest > t.max_gram_length {
            break;
        }
        let distance = skip + 1;
        for start in 0..line.len() {
            for length in shortest..=t.max_gram_length {
                let last = (length - 1)
                    .checked_mul(distance)
                    .and_then(|d| d.checked_add(start));
                if !last.is_some_and(|l| l < line.len()) {
                    break;
                }
                gram.clear();
                gram.extend((0..length).map(|k| line[start + k * distance]));
                if let Some(&column) = columns_of.get(gram.as_slice()) {
                    if let Some(c) = counts.get_mut(column) {
                        *c += 1;
                    }
                }
            }
        }
        // 1-grams are the same at every skip: count them in the first pass only.
        if shortest == 1 {
            shortest = 2;
        }
    }
}
