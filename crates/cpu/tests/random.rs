//! Reference kernels of the Random family: no oracle knows their values (ONNX leaves the
//! generator to each runtime), so these tests check what must hold whatever the generator:
//! the moments and frequencies of many draws, within bounds derived below; the documented
//! stream (ChaCha20 words mapped as crates/cpu/src/ops/random.rs says); reproducibility for
//! a seed, across runs and threads and through folding; shapes and dtypes; and typed errors.
//!
//! Every statistical bound is k = 5 standard errors of the statistic under the stated
//! distribution: a correct kernel fails one with probability below 6·10⁻⁷, and as the
//! streams are fixed by their seeds, a passing test passes on every run.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::fold::Evaluator;
use concord_core::infer::infer_on_tensors;
use concord_core::op::{Distribution, Random, RandomSeed};
use concord_core::{DType, Graph, Node, Op, OpError, Tensor, ValueInfo};
use concord_cpu::run_op;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Standard errors allowed before a statistic counts as wrong.
const K: f64 = 5.0;

fn run(op: &Op, inputs: &[Option<&Tensor>]) -> Result<Tensor, OpError> {
    let mut out = run_op(op, inputs, 1)?;
    // The inferred type is the kernel's: dtype and every extent.
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

fn draw(op: &Op, inputs: &[Option<&Tensor>]) -> Tensor {
    match run(op, inputs) {
        Ok(t) => t,
        Err(e) => panic!("{op:?}: {e}"),
    }
}

fn tensor(result: Result<Tensor, concord_core::Error>) -> Tensor {
    match result {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn normal(mean: f32, scale: f32, shape: &[usize], seed: f32) -> Op {
    Op::Random(Random {
        distribution: Distribution::Normal { mean, scale },
        shape: Some(shape.to_vec()),
        dtype: Some(DType::F64),
        seed: RandomSeed::Given(seed),
    })
}

fn uniform(low: f32, high: f32, shape: &[usize], seed: f32) -> Op {
    Op::Random(Random {
        distribution: Distribution::Uniform { low, high },
        shape: Some(shape.to_vec()),
        dtype: Some(DType::F64),
        seed: RandomSeed::Given(seed),
    })
}

/// The sample mean and the (population) variance of `v`.
fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var)
}

fn within(what: &str, got: f64, want: f64, bound: f64) {
    assert!(
        (got - want).abs() <= bound,
        "{what}: got {got}, expected {want} ± {bound}"
    );
}

#[test]
fn random_uniform_has_its_mean_and_spread() {
    // U[−1, 3): mean (a + b)/2 = 1, variance (b − a)²/12 = 4/3, fourth central moment
    // (b − a)⁴/80 = 3.2. Over N draws the mean's standard error is √(σ²/N) and the sample
    // variance's √((μ₄ − σ⁴)/N).
    let n = 20_000;
    let v = draw(&uniform(-1.0, 3.0, &[100, 200], 11.0), &[]).to_f64_vec();
    assert_eq!(v.len(), n);
    assert!(
        v.iter().all(|&x| (-1.0..3.0).contains(&x)),
        "a draw outside [−1, 3)"
    );
    let (mean, var) = moments(&v);
    let nf = n as f64;
    within("mean", mean, 1.0, K * (4.0 / 3.0 / nf).sqrt());
    within(
        "variance",
        var,
        4.0 / 3.0,
        K * ((3.2 - 16.0 / 9.0) / nf).sqrt(),
    );
    // Each quarter of the range holds a quarter of the draws: binomial, p = 1/4.
    for q in 0..4 {
        let lo = -1.0 + q as f64;
        let share = v.iter().filter(|&&x| x >= lo && x < lo + 1.0).count() as f64 / nf;
        within("quarter share", share, 0.25, K * (0.25 * 0.75 / nf).sqrt());
    }
    // The default dtype is f32 (ONNX's `dtype` default, 1), and a scalar shape is one draw.
    let op = Op::Random(Random {
        distribution: Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        },
        shape: Some(Vec::new()),
        dtype: None,
        seed: RandomSeed::Given(1.0),
    });
    let scalar = draw(&op, &[]);
    assert_eq!((scalar.dtype(), scalar.dims()), (DType::F32, &[][..]));
}

#[test]
fn random_normal_has_its_mean_and_spread() {
    // N(2, 0.5²): the sample mean's standard error is σ/√N, the sample variance's
    // σ²·√(2/N); the share within one σ of the mean is erf(1/√2) = 0.682689…, binomial.
    let n = 20_000;
    let v = draw(&normal(2.0, 0.5, &[n], 5.0), &[]).to_f64_vec();
    let (mean, var) = moments(&v);
    let nf = n as f64;
    within("mean", mean, 2.0, K * 0.5 / nf.sqrt());
    within("variance", var, 0.25, K * 0.25 * (2.0 / nf).sqrt());
    let p = 0.682_689_492_137_086;
    let share = v.iter().filter(|&&x| (x - 2.0).abs() < 0.5).count() as f64 / nf;
    within(
        "share within one σ",
        share,
        p,
        K * (p * (1.0 - p) / nf).sqrt(),
    );
    // Symmetry: the third central moment is 0, its standard error √(15σ⁶/N).
    let third = v.iter().map(|x| (x - mean).powi(3)).sum::<f64>() / nf;
    within(
        "third moment",
        third,
        0.0,
        K * (15.0 * 0.5f64.powi(6) / nf).sqrt(),
    );
    // f16 and bf16 outputs round the same draws once.
    for dtype in [DType::F16, DType::BF16, DType::F32] {
        let op = Op::Random(Random {
            dtype: Some(dtype),
            ..match normal(2.0, 0.5, &[3, 4], 5.0) {
                Op::Random(r) => r,
                other => panic!("{other:?}"),
            }
        });
        let t = draw(&op, &[]);
        assert_eq!((t.dtype(), t.dims()), (dtype, &[3, 4][..]));
        let wide = draw(&normal(2.0, 0.5, &[3, 4], 5.0), &[]);
        let rounded = tensor(Tensor::new(
            [3, 4],
            concord_core::TensorData::from_f64(dtype, &wide.to_f64_vec()),
        ));
        assert!(
            t.bit_identical(&rounded),
            "{dtype}: one rounding of the f64 draws"
        );
    }
}

#[test]
fn like_forms_take_the_input_shape_and_dtype() {
    let x16 = tensor(Tensor::from_vec([2, 3], vec![half::f16::from_f32(0.0); 6]));
    let ints = tensor(Tensor::from_i64([4, 5], vec![7; 20]));
    let like = |distribution, dtype| {
        Op::Random(Random {
            distribution,
            shape: None,
            dtype,
            seed: RandomSeed::Given(2.0),
        })
    };
    let normal_like = Distribution::Normal {
        mean: 0.0,
        scale: 1.0,
    };
    let uniform_like = Distribution::Uniform {
        low: 10.0,
        high: 20.0,
    };
    // No dtype: the input's (a float).
    let t = draw(&like(normal_like, None), &[Some(&x16)]);
    assert_eq!((t.dtype(), t.dims()), (DType::F16, &[2, 3][..]));
    // An integer input with a float dtype: the shape is copied, the values ignored.
    let t = draw(&like(uniform_like, Some(DType::F64)), &[Some(&ints)]);
    assert_eq!((t.dtype(), t.dims()), (DType::F64, &[4, 5][..]));
    assert!(t.to_f64_vec().iter().all(|&v| (10.0..20.0).contains(&v)));
    // RandomNormalLike of N(0, 1) over 20 000 elements: mean within 5/√N of 0, variance
    // within 5·√(2/N) of 1.
    let big = tensor(Tensor::from_vec([20_000], vec![0.0f64; 20_000]));
    let v = draw(&like(normal_like, None), &[Some(&big)]).to_f64_vec();
    let (mean, var) = moments(&v);
    within("mean", mean, 0.0, K / 20_000f64.sqrt());
    within("variance", var, 1.0, K * (2.0 / 20_000f64).sqrt());
    // An integer input without dtype would make an integer output, which ONNX forbids.
    assert!(matches!(
        run(&like(normal_like, None), &[Some(&ints)]),
        Err(OpError::Attribute { name: "dtype", .. })
    ));
    assert!(matches!(
        run(&like(uniform_like, None), &[None]),
        Err(OpError::MissingInput { index: 0, .. })
    ));
}

#[test]
fn bernoulli_frequencies_follow_p() {
    // Row r holds N copies of p_r; its share of ones is binomial: standard error
    // √(p(1 − p)/N), so p = 0 and p = 1 must be exact.
    let ps = [0.0, 0.1, 0.5, 0.9, 1.0];
    let n = 10_000;
    let x = tensor(Tensor::from_vec(
        [ps.len(), n],
        ps.iter().flat_map(|&p| vec![p; n]).collect::<Vec<f64>>(),
    ));
    let op = Op::Bernoulli {
        dtype: None,
        seed: RandomSeed::Given(0.0),
    };
    let y = draw(&op, &[Some(&x)]);
    assert_eq!((y.dtype(), y.dims()), (DType::F64, &[5, n][..]));
    let v = y.to_f64_vec();
    assert!(v.iter().all(|&b| b == 0.0 || b == 1.0), "only 0 and 1");
    for (row, &p) in ps.iter().enumerate() {
        let share = v[row * n..(row + 1) * n].iter().sum::<f64>() / n as f64;
        within(
            &format!("share of ones at p = {p}"),
            share,
            p,
            K * (p * (1.0 - p) / n as f64).sqrt(),
        );
    }
    // `dtype` picks any output type: the same draws as bool and as i32.
    for dtype in [DType::Bool, DType::I32, DType::U8, DType::F16] {
        let op = Op::Bernoulli {
            dtype: Some(dtype),
            seed: RandomSeed::Given(0.0),
        };
        let t = draw(&op, &[Some(&x)]);
        assert_eq!(t.dtype(), dtype);
        assert_eq!(t.to_f64_vec(), v, "{dtype}: the same draws");
    }
    // A value outside [0, 1], or NaN, is not a probability.
    for bad in [1.5, -0.1, f64::NAN] {
        let x = tensor(Tensor::from_vec([2], vec![0.5, bad]));
        assert!(matches!(run(&op, &[Some(&x)]), Err(OpError::Shape(m)) if m.contains("element 1")));
    }
    let ints = Tensor::vec_i64(vec![0, 1]);
    assert!(matches!(
        run(&op, &[Some(&ints)]),
        Err(OpError::DType { index: 0, .. })
    ));
}

#[test]
fn multinomial_counts_follow_the_softmax() {
    // Row 0: logits ln 1 … ln 4, so softmax p = 0.1, 0.2, 0.3, 0.4. Row 1: a logit of −inf
    // (or NaN, as onnxruntime treats any non-finite logit) has no weight, so the two finite
    // equal logits share the draws, 1/2 each. Each class count over N samples is binomial:
    // standard error √(p(1 − p)/N).
    let n = 20_000;
    let logits = tensor(Tensor::from_vec(
        [2, 4],
        vec![
            1f32.ln(),
            2f32.ln(),
            3f32.ln(),
            4f32.ln(),
            5.0,
            f32::NEG_INFINITY,
            5.0,
            f32::NAN,
        ],
    ));
    let op = Op::Multinomial {
        sample_size: n,
        dtype: DType::I32,
        seed: RandomSeed::Given(3.0),
    };
    let y = draw(&op, &[Some(&logits)]);
    assert_eq!((y.dtype(), y.dims()), (DType::I32, &[2, n][..]));
    let v = y.to_f64_vec();
    let expected = [[0.1, 0.2, 0.3, 0.4], [0.5, 0.0, 0.5, 0.0]];
    for (row, want) in expected.iter().enumerate() {
        for (class, &p) in want.iter().enumerate() {
            let count = v[row * n..(row + 1) * n]
                .iter()
                .filter(|&&c| c == class as f64)
                .count();
            within(
                &format!("row {row}, class {class}"),
                count as f64 / n as f64,
                p,
                K * (p * (1.0 - p) / n as f64).sqrt(),
            );
        }
    }
    // i64 output draws the same classes; sample_size 0 draws none.
    let wide = Op::Multinomial {
        sample_size: n,
        dtype: DType::I64,
        seed: RandomSeed::Given(3.0),
    };
    assert_eq!(draw(&wide, &[Some(&logits)]).to_f64_vec(), v);
    let none = Op::Multinomial {
        sample_size: 0,
        dtype: DType::I64,
        seed: RandomSeed::Given(3.0),
    };
    assert_eq!(draw(&none, &[Some(&logits)]).dims(), &[2, 0]);
    // A row without a finite logit has nothing to draw; the input must be 2-D floats.
    let dead = tensor(Tensor::from_vec([1, 2], vec![f32::NEG_INFINITY, f32::NAN]));
    assert!(matches!(run(&op, &[Some(&dead)]), Err(OpError::Shape(m)) if m.contains("row 0")));
    let flat = tensor(Tensor::from_vec([4], vec![0.0f32; 4]));
    assert!(matches!(run(&op, &[Some(&flat)]), Err(OpError::Shape(_))));
    let ints = tensor(Tensor::from_i64([1, 2], vec![0, 1]));
    assert!(matches!(
        run(&op, &[Some(&ints)]),
        Err(OpError::DType { index: 0, .. })
    ));
}

/// The stream's first 64-bit words for `seed`, by the documented construction: ChaCha20
/// keyed by [kind 0, the seed's f32 bits as a little-endian u64, zeros].
fn documented_words(seed: f32, count: usize) -> Vec<u64> {
    let mut key = [0u8; 32];
    key[1..9].copy_from_slice(&u64::from(seed.to_bits()).to_le_bytes());
    let mut rng = ChaCha20Rng::from_seed(key);
    (0..count).map(|_| rng.next_u64()).collect()
}

fn unit(word: u64) -> f64 {
    (word >> 11) as f64 / (1u64 << 53) as f64
}

#[test]
fn a_seed_fixes_the_documented_stream() {
    // RandomUniform: low + (high − low)·u, one word per element.
    let words = documented_words(3.0, 8);
    let got = draw(&uniform(-1.0, 3.0, &[4], 3.0), &[]).to_f64_vec();
    let want: Vec<f64> = words[..4].iter().map(|&w| -1.0 + 4.0 * unit(w)).collect();
    assert_eq!(got, want);
    // RandomNormal: Box–Muller on two words per element.
    let got = draw(&normal(1.0, 2.0, &[4], 3.0), &[]).to_f64_vec();
    let want: Vec<f64> = words
        .chunks(2)
        .map(|w| {
            let r = (-2.0 * (1.0 - unit(w[0])).ln()).sqrt();
            1.0 + 2.0 * r * (2.0 * std::f64::consts::PI * unit(w[1])).cos()
        })
        .collect();
    assert_eq!(got, want);
    // Bernoulli: 1 where u < p.
    let p = tensor(Tensor::from_vec([8], vec![0.5f64; 8]));
    let bern = Op::Bernoulli {
        dtype: None,
        seed: RandomSeed::Given(3.0),
    };
    let want: Vec<f64> = words
        .iter()
        .map(|&w| if unit(w) < 0.5 { 1.0 } else { 0.0 })
        .collect();
    assert_eq!(draw(&bern, &[Some(&p)]).to_f64_vec(), want);
    // `u < p` is strict: a p equal to its element's u gives 0 (as p = 0 never gives 1).
    let at_u = tensor(Tensor::from_vec(
        [8],
        words.iter().map(|&w| unit(w)).collect::<Vec<f64>>(),
    ));
    assert_eq!(draw(&bern, &[Some(&at_u)]).to_f64_vec(), vec![0.0; 8]);
}

/// Multinomial's classes by the documented construction: per row, then per sample, one u;
/// weights exp(x − max x) of the finite logits, summed left to right; the first class whose
/// cumulative weight exceeds u·total, or, where rounding lifts u·total to the total, the
/// first class that reaches it.
fn documented_classes(logits: &[f64], classes: usize, samples: usize, seed: f32) -> Vec<f64> {
    let rows = logits.len() / classes;
    let mut words = documented_words(seed, rows * samples).into_iter();
    let mut out = Vec::new();
    for row in logits.chunks(classes) {
        let max = row
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .fold(f64::NEG_INFINITY, f64::max);
        let mut cumulative = Vec::new();
        let mut total = 0.0;
        for &v in row {
            if v.is_finite() {
                total += (v - max).exp();
            }
            cumulative.push(total);
        }
        for w in words.by_ref().take(samples) {
            let target = unit(w) * total;
            let class = match cumulative.iter().position(|&c| c > target) {
                Some(class) => class,
                None => cumulative.iter().position(|&c| c >= total).unwrap_or(0),
            };
            out.push(class as f64);
        }
    }
    out
}

fn multinomial(samples: usize, seed: f32) -> Op {
    Op::Multinomial {
        sample_size: samples,
        dtype: DType::I64,
        seed: RandomSeed::Given(seed),
    }
}

#[test]
fn multinomial_follows_the_documented_stream() {
    // Three rows of 4 logits, 16 samples each, against the documented construction. The
    // logits are exact in f64, and so are their differences after a shift of 1024.
    let rows = [
        [0.0, 0.5, 1.0, -2.0],
        [3.0, f64::NEG_INFINITY, 3.0, -1.5],
        [-0.25, 2.0, 0.0, 2.0],
    ];
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    let x = tensor(Tensor::from_vec([3, 4], flat.clone()));
    let got = draw(&multinomial(16, 5.0), &[Some(&x)]).to_f64_vec();
    assert_eq!(got, documented_classes(&flat, 4, 16, 5.0));
    // Only the logits' differences count: 1024 added to every logit (exp(1024) would
    // overflow) draws the same classes.
    let shifted = tensor(Tensor::from_vec(
        [3, 4],
        flat.iter().map(|v| v + 1024.0).collect::<Vec<f64>>(),
    ));
    assert_eq!(
        draw(&multinomial(16, 5.0), &[Some(&shifted)]).to_f64_vec(),
        got
    );
    // One class: every draw is class 0.
    let one = tensor(Tensor::from_vec([2, 1], vec![-3.0f32, 7.0]));
    assert_eq!(
        draw(&multinomial(5, 5.0), &[Some(&one)]).to_f64_vec(),
        vec![0.0; 10]
    );
    // No rows: an empty [0, samples] output, whatever the class count.
    for classes in [0, 3] {
        let empty = tensor(Tensor::from_vec([0, classes], Vec::<f32>::new()));
        assert_eq!(draw(&multinomial(4, 5.0), &[Some(&empty)]).dims(), &[0, 4]);
    }
    // Rows but no class: nothing to draw from.
    let classless = tensor(Tensor::from_vec([2, 0], Vec::<f32>::new()));
    assert!(matches!(
        run(&multinomial(4, 5.0), &[Some(&classless)]),
        Err(OpError::Shape(m)) if m.contains("at least one class")
    ));
}

#[test]
fn a_multinomial_target_on_a_class_edge_takes_the_next_class() {
    // "Exceeds" is strict: where u·total lands exactly on class 0's cumulative weight, the
    // draw is class 1. Logits [x, 0] give weights [e^x, 1] and total e^x + 1, so the edge is
    // at e^x = u/(1 − u). For a u in [1/3, 1/2) that puts e^x in [1/2, 1), where neighbouring
    // f64 values of x step e^x by less than its ulp; x is searched there until u·(e^x + 1)
    // rounds to e^x exactly. The draw taken is the first of the seed's stream with such a u.
    let seed = 5.0;
    let words = documented_words(seed, 64);
    let Some(k) = words
        .iter()
        .position(|&w| (1.0 / 3.0..0.5).contains(&unit(w)))
    else {
        panic!("none of seed {seed}'s first 64 draws is in [1/3, 1/2)");
    };
    let u = unit(words[k]);
    let start = (u / (1.0 - u)).ln();
    let edge = (0..100_000u64)
        .flat_map(|i| [start.to_bits() + i, start.to_bits() - i])
        .map(f64::from_bits)
        .find(|&x| u * (x.exp() + 1.0) == x.exp());
    let Some(x) = edge else {
        panic!("no x near {start} puts u·total on class 0's edge (u = {u})");
    };
    let logits = tensor(Tensor::from_vec([1, 2], vec![x, 0.0]));
    let classes = draw(&multinomial(k + 1, seed), &[Some(&logits)]).to_f64_vec();
    assert_eq!(classes[k], 1.0, "draw {k}, u = {u}, x = {x}");
}

#[test]
fn draws_are_reproducible_across_runs_and_threads() {
    let op = normal(0.0, 1.0, &[64, 64], 42.0);
    let first = draw(&op, &[]);
    assert!(draw(&op, &[]).bit_identical(&first), "a second run");
    // Many threads at once: no state is shared, so every one draws the same values.
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| draw(&op, &[]))).collect();
        for h in handles {
            match h.join() {
                Ok(t) => assert!(t.bit_identical(&first), "a concurrent run"),
                Err(_) => panic!("a drawing thread panicked"),
            }
        }
    });
    // Another seed draws other values.
    assert!(!draw(&normal(0.0, 1.0, &[64, 64], 43.0), &[]).bit_identical(&first));
}

#[test]
fn unseeded_nodes_draw_by_their_name() {
    // FNV-1a 64 test vectors (the FNV authors' tables): "" is the offset basis, "a" and
    // "foobar" their listed hashes.
    assert_eq!(
        RandomSeed::from_node_name(""),
        RandomSeed::FromName(0xcbf2_9ce4_8422_2325)
    );
    assert_eq!(
        RandomSeed::from_node_name("a"),
        RandomSeed::FromName(0xaf63_dc4c_8601_ec8c)
    );
    assert_eq!(
        RandomSeed::from_node_name("foobar"),
        RandomSeed::FromName(0x8594_4171_f739_67e8)
    );
    let named = |name: &str| {
        Op::Random(Random {
            distribution: Distribution::Uniform {
                low: 0.0,
                high: 1.0,
            },
            shape: Some(vec![16]),
            dtype: Some(DType::F64),
            seed: RandomSeed::from_node_name(name),
        })
    };
    let a = draw(&named("noise_a"), &[]);
    assert!(draw(&named("noise_a"), &[]).bit_identical(&a), "same name");
    assert!(
        !draw(&named("noise_b"), &[]).bit_identical(&a),
        "other name"
    );
    // A name's key is marked apart from a given seed with the same bits.
    let RandomSeed::FromName(hash) = RandomSeed::from_node_name("noise_a") else {
        panic!("from_node_name gives FromName");
    };
    assert_ne!(
        RandomSeed::FromName(hash & 0xffff_ffff).key(),
        RandomSeed::Given(f32::from_bits((hash & 0xffff_ffff) as u32)).key()
    );
}

/// Folds with the reference kernels, as the facade does when it builds a net.
struct Reference;

impl Evaluator for Reference {
    fn evaluate(
        &self,
        op: &Op,
        inputs: &[Option<&Tensor>],
        num_outputs: usize,
    ) -> Result<Vec<Tensor>, OpError> {
        run_op(op, inputs, num_outputs)
    }
}

#[test]
fn folding_keeps_the_values_a_forward_draws() {
    // y = Bernoulli(RandomUniformLike(c)) of a constant c folds to initializers; z =
    // RandomNormal has no input and stays a node. Both are pure functions of their seeds,
    // so the folded values are the ones the kernels give at run time.
    let c = tensor(Tensor::from_vec([3, 5], vec![0.25f32; 15]));
    let like = Op::Random(Random {
        distribution: Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        },
        shape: None,
        dtype: None,
        seed: RandomSeed::from_node_name("u"),
    });
    let bern = Op::Bernoulli {
        dtype: Some(DType::Bool),
        seed: RandomSeed::Given(9.0),
    };
    let z = normal(0.0, 1.0, &[2], 1.0);
    let mut graph = Graph {
        inputs: Vec::<ValueInfo>::new(),
        outputs: vec!["y".into(), "z".into()],
        nodes: vec![
            Node::new("u", like.clone(), &["c"], &["p"]),
            Node::new("b", bern.clone(), &["p"], &["y"]),
            Node::new("z", z.clone(), &[], &["z"]),
        ],
        opset: 22,
        ..Graph::default()
    };
    graph.initializers.insert("c".into(), c.clone());
    let summary = match graph.fold_constants(&Reference) {
        Ok(s) => s,
        Err(e) => panic!("folding: {e}"),
    };
    assert_eq!(
        summary.folded_nodes, 1,
        "the like node folds; y is a graph output"
    );
    let p = draw(&like, &[Some(&c)]);
    assert!(graph
        .initializers
        .get("p")
        .is_some_and(|t| t.bit_identical(&p)));
    assert!(
        graph.nodes.iter().any(|n| n.name == "z"),
        "RandomNormal has no input to fold from"
    );
    let y = draw(&bern, &[Some(&p)]);
    assert_eq!(y.dtype(), DType::Bool);
}
