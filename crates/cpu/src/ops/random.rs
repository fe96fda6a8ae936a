//! Random kernels: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike,
//! Multinomial and Bernoulli.
//!
//! Every run draws from a fresh ChaCha20 generator (`rand_chacha::ChaCha20Rng`) keyed by
//! the op's seed ([`RandomSeed::key`]), and keeps nothing between runs: a node's values are
//! a pure function of its seed, attributes and input, bit-identical on every forward and
//! every thread, and a node folded when the net is built holds exactly the values a
//! forward would compute. The stream, in row-major output order:
//!
//! - a uniform u in [0, 1) is the top 53 bits of the generator's next 64-bit word, times
//!   2⁻⁵³;
//! - RandomUniform: low + (high − low)·u, one u per element;
//! - RandomNormal: mean + scale·√(−2 ln(1 − u₁))·cos(2π u₂) (Box–Muller), two u per element
//!   (1 − u₁ lies in (0, 1], so the logarithm is finite);
//! - Bernoulli: 1 when u < p, one u per element (so p = 0 never and p = 1 always gives 1);
//! - Multinomial: for each row, then each sample, the first class whose cumulative weight
//!   exceeds u·total, weights exp(x − max x) (the softmax of the row, unnormalised).
//!
//! Values are computed in f64 and rounded once to the output type, so a narrow type (f16,
//! bf16) may round a uniform value up to `high`.

use super::required;
use concord_core::op::{Distribution, Op, Random, RandomSeed};
use concord_core::{DType, OpError, Shape, Tensor};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::f64::consts::PI;

pub(crate) fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    match op {
        Op::Random(r) => random(r, inputs),
        Op::Multinomial {
            sample_size,
            dtype,
            seed,
        } => multinomial(*sample_size, *dtype, *seed, inputs),
        Op::Bernoulli { dtype, seed } => bernoulli(*dtype, *seed, inputs),
        other => Err(super::not_in_family(other)),
    }
}

/// The seeded stream every random kernel draws from.
struct Stream(ChaCha20Rng);

impl Stream {
    fn new(seed: RandomSeed) -> Self {
        Stream(ChaCha20Rng::from_seed(seed.key()))
    }

    /// A uniform value in [0, 1): 53 random bits, the precision of an f64.
    fn uniform(&mut self) -> f64 {
        const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
        (self.0.next_u64() >> 11) as f64 * SCALE
    }

    /// A standard normal value (Box–Muller, the cosine branch).
    fn normal(&mut self) -> f64 {
        let radius = (-2.0 * (1.0 - self.uniform()).ln()).sqrt();
        radius * (2.0 * PI * self.uniform()).cos()
    }
}

fn float_input<'a>(inputs: &[Option<&'a Tensor>]) -> Result<&'a Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    if x.dtype().is_float() {
        Ok(x)
    } else {
        Err(OpError::DType {
            index: 0,
            name: "input",
            expected: "a float type".to_string(),
            actual: x.dtype(),
        })
    }
}

fn element_count(shape: &Shape, op: &str) -> Result<usize, OpError> {
    shape
        .checked_numel()
        .ok_or_else(|| OpError::Shape(format!("{op}: output {shape} has too many elements")))
}

fn random(r: &Random, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let op = r.name();
    let (shape, dtype) = match &r.shape {
        Some(dims) => (Shape::new(dims.clone()), r.dtype.unwrap_or(DType::F32)),
        None => {
            let x = required(inputs, 0, "input")?;
            (x.shape().clone(), r.dtype.unwrap_or(x.dtype()))
        }
    };
    if !dtype.is_float() {
        return Err(OpError::Attribute {
            name: "dtype",
            detail: format!("{op} draws floats, not {dtype}: give `dtype` as a float type"),
        });
    }
    let n = element_count(&shape, op)?;
    let mut stream = Stream::new(r.seed);
    let values = match r.distribution {
        Distribution::Normal { mean, scale } => {
            let (mean, scale) = (f64::from(mean), f64::from(scale));
            (0..n).map(|_| mean + scale * stream.normal()).collect()
        }
        Distribution::Uniform { low, high } => {
            let (low, high) = (f64::from(low), f64::from(high));
            (0..n)
                .map(|_| low + (high - low) * stream.uniform())
                .collect()
        }
    };
    Tensor::from_f64(dtype, shape, values)
}

/// Bernoulli gives 1 with probability p, as the spec's text and onnxruntime do. ONNX's
/// function body for it (what the `_expanded` node tests run) computes
/// Greater(RandomUniformLike(p), p), which is 1 with probability 1 − p; those tests compare
/// shape and dtype only, so they cannot tell, and Concord follows the text.
fn bernoulli(
    dtype: Option<DType>,
    seed: RandomSeed,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = float_input(inputs)?;
    let mut stream = Stream::new(seed);
    let values = x
        .to_f64_vec()
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            if !(0.0..=1.0).contains(&p) {
                return Err(OpError::Shape(format!(
                    "Bernoulli: input element {i} is {p}, not a probability in [0, 1]"
                )));
            }
            Ok(if stream.uniform() < p { 1.0 } else { 0.0 })
        })
        .collect::<Result<Vec<f64>, OpError>>()?;
    Tensor::from_f64(dtype.unwrap_or(x.dtype()), x.shape().clone(), values)
}

fn multinomial(
    sample_size: usize,
    dtype: DType,
    seed: RandomSeed,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = float_input(inputs)?;
    if !matches!(dtype, DType::I32 | DType::I64) {
        return Err(OpError::Attribute {
            name: "dtype",
            detail: format!("Multinomial outputs i32 or i64, not {dtype}"),
        });
    }
    let &[batch, classes] = x.dims() else {
        return Err(OpError::Shape(format!(
            "Multinomial needs input (batch, classes), got {}",
            x.shape()
        )));
    };
    let shape = Shape::new(vec![batch, sample_size]);
    let n = element_count(&shape, "Multinomial")?;
    if classes == 0 && batch > 0 {
        return Err(OpError::Shape(format!(
            "Multinomial needs at least one class, got input {}",
            x.shape()
        )));
    }
    let logits = x.to_f64_vec();
    let mut stream = Stream::new(seed);
    let mut out = Vec::with_capacity(n);
    for (row, logits) in logits.chunks_exact(classes.max(1)).enumerate() {
        // As onnxruntime: a logit that is not finite (NaN, ±inf) carries no weight.
        let max = logits
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(f64::NEG_INFINITY, f64::max);
        let mut total = 0.0;
        let cumulative: Vec<f64> = logits
            .iter()
            .map(|&v| {
                if v.is_finite() {
                    total += (v - max).exp();
                }
                total
            })
            .collect();
        // The class that reaches the total has weight; it takes a target that rounding
        // lifts to the total itself.
        let Some(last) = cumulative.iter().position(|&c| c >= total && c > 0.0) else {
            return Err(OpError::Shape(format!(
                "Multinomial: row {row} of input {} has no class with a finite logit to draw",
                x.shape()
            )));
        };
        for _ in 0..sample_size {
            let target = stream.uniform() * total;
            let class = cumulative.iter().position(|&c| c > target).unwrap_or(last);
            out.push(class as f64);
        }
    }
    Tensor::from_f64(dtype, shape, out)
}
