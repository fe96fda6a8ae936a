//! Property tests: per op, random shapes, attributes and values, each generated case
//! compared with the reference under the op's tolerance level.
//!
//! A strategy generates [`OpCase`] values — the same data as a hand-written case in
//! conformance/cases/ — one strategy per op family (`nn`, `elementwise`, `movement`), with
//! values given as a fill and a seed so that cases stay small and shrink by shape and
//! attribute. A trial runs `SuiteConfig::prop_cases` cases through
//! [`Suite::check_op_case`]; seeds of past failures replay first. A failure is shrunk to a
//! minimal case, its seed persisted, and written out as a standalone repro
//! ([`crate::repro`]) with the one command that replays it.
//!
//! Seeds live in two places ([`RegressionFiles`]): the ones this crate ships
//! (conformance/regressions/<op>.txt, replayed on every executor), and, for an executor that
//! is not Concord's own, the author's `conformance/regressions/<op>.txt` beside their
//! expectations file. A new failure of an author's executor is persisted in the author's
//! file; the shipped one is only read (for a registry dependency it is cargo's read-only
//! copy). Concord's own executors read and write the shipped file.
//!
//! Every run searches anew: the run's seed ([`run_seed`]) is drawn at random, printed once,
//! and mixed with the op's name, so each run generates other cases. `CONCORD_PROP_SEED=<n>`
//! fixes it, which replays a run's generated cases exactly; a failure's message names the
//! seed, and its shrunk case is persisted besides, so it replays on every later run
//! whatever the seed.
//!
//! A trial must execute at least [`SuiteConfig::prop_min_executed`] cases (or all it asked
//! for, if fewer): an executor that declines so many that proptest gives up fails rather
//! than passing on a handful. Shapes reach the lengths where device kernels change code
//! path ([`gen::EDGES`]: 1, 15–17, 31–33, 64–65) in every family, one long axis at a time.
//!
//! [`SuiteConfig::prop_min_executed`]: crate::SuiteConfig::prop_min_executed

mod elementwise;
pub(crate) mod gen;
mod movement;
mod nn;

use crate::case::{stable_seed, OpCase};
use crate::compare::Comparison;
use crate::outcome::Outcome;
use crate::suite::{Suite, SuiteConfig};
use concord::Target;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::{
    Config, FailurePersistence, FileFailurePersistence, PersistedSeed, RngSeed, TestCaseError,
    TestError, TestRunner,
};
use std::any::Any;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable that fixes the property seed of a run.
pub const SEED_VARIABLE: &str = "CONCORD_PROP_SEED";

/// This run's property seed: `CONCORD_PROP_SEED` when set (an unparsable value is an
/// error, so a typo cannot quietly replay nothing), otherwise drawn at random once per
/// process and printed to stderr, so that any run can be replayed.
pub fn run_seed() -> Result<u64, String> {
    static SEED: OnceLock<Result<u64, String>> = OnceLock::new();
    SEED.get_or_init(|| match std::env::var(SEED_VARIABLE) {
        Ok(text) => text.trim().parse::<u64>().map_err(|e| {
            format!("{SEED_VARIABLE}={text:?} is not a seed (an unsigned 64-bit integer): {e}")
        }),
        Err(_) => {
            let seed = rand::random::<u64>();
            eprintln!(
                "concord-conformance: property seed {seed} ({SEED_VARIABLE}={seed} replays this run's generated cases)"
            );
            Ok(seed)
        }
    })
    .clone()
}

/// The ops with a property strategy: every op of concord-core's op table
/// ([`concord::op::supported_names`]) except those in [`NOT_GENERATED`]. A unary op
/// added to the table is generated with the activation recipes and its parameters drawn
/// from the table, with no change here.
pub fn ops() -> Vec<&'static str> {
    concord::op::supported_names()
        .iter()
        .copied()
        .filter(|op| not_generated(op).is_none())
        .collect()
}

/// Why `op` has no property strategy, if it has none: it is in [`NOT_GENERATED`], or it
/// runs on the reference only ([`REFERENCE_ONLY`], and the unary and binary table rows
/// without device kernels), where a property trial would compare the reference with itself;
/// those are held to ONNX's node tests and onnxruntime's outputs instead.
pub fn not_generated(op: &str) -> Option<&'static str> {
    const REFERENCE_ONLY_REASON: &str = "no device executor implements it, so a property trial \
        would compare the reference with itself; the ONNX node tests (conformance/onnx-node.toml) \
        and golden cases from onnxruntime check it instead";
    if let Some((_, why)) = NOT_GENERATED.iter().find(|(name, _)| *name == op) {
        return Some(why);
    }
    let device = match (
        concord::op::Unary::from_name(op),
        concord::op::Binary::from_name(op),
    ) {
        (Some(u), _) => u.def().device,
        (_, Some(b)) => b.def().device,
        _ => !REFERENCE_ONLY.contains(&op),
    };
    (!device).then_some(REFERENCE_ONLY_REASON)
}

/// The ops outside the unary and binary tables that no device executor implements yet.
pub const REFERENCE_ONLY: &[&str] = &[
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "ArgMin",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "LogSoftmax",
    "Hardmax",
    "ConstantOfShape",
    "Tile",
    "CumSum",
    "CumProd",
    "BitCast",
    "GatherElements",
    "GatherND",
    "ScatterElements",
    "ScatterND",
    "OneHot",
    "Trilu",
    "NonZero",
    "Size",
    "DepthToSpace",
    "SpaceToDepth",
    "EyeLike",
    "TopK",
    "CastLike",
    "Compress",
    "CenterCropPad",
    "ReverseSequence",
    "NegativeLogLikelihoodLoss",
    "SoftmaxCrossEntropyLoss",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "QLinearMatMul",
    "ConvInteger",
    "QLinearConv",
    "GlobalMaxPool",
    "LpPool",
    "GlobalLpPool",
    "InstanceNormalization",
    "GroupNormalization",
    "RMSNormalization",
    "LpNormalization",
    "MeanVarianceNormalization",
    "LRN",
    "Attention",
    "RotaryEmbedding",
    "RNN",
    "Einsum",
    "Det",
    "NonMaxSuppression",
    "Unique",
    "MaxUnpool",
    "If",
    "Loop",
    "Scan",
    "GridSample",
    "AffineGrid",
    "RoiAlign",
    "MaxRoiPool",
    "DeformConv",
    "Col2Im",
    "HannWindow",
    "HammingWindow",
    "BlackmanWindow",
    "DFT",
    "STFT",
    "MelWeightMatrix",
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
    "TensorScatter",
    "TfIdfVectorizer",
    "SwiGLU",
    "LinearAttention",
    "CausalConvWithState",
];

/// Supported ops without a property strategy, and why.
pub const NOT_GENERATED: &[(&str, &str)] = &[
    (
        "Shape",
        "every generated input has a static shape, so Shape folds to a constant when the net is built and no executor ever runs it",
    ),
    (
        "Constant",
        "it has no inputs: it folds when the net is built, and a case needs a runtime input",
    ),
    (
        "Range",
        "device executors take it only when its operands are constants, computing it when the plan is made, and a case needs a runtime input; the ONNX node tests (conformance/onnx-node.toml) and golden cases from onnxruntime check it",
    ),
];

/// The strategy generating cases of `op`, if it has one.
pub fn strategy(op: &str) -> Option<BoxedStrategy<OpCase>> {
    nn::strategy(op)
        .or_else(|| elementwise::strategy(op))
        .or_else(|| movement::strategy(op))
}

/// The file of `op`'s persisted failure seeds that this crate ships, in the suite's data
/// (`conformance_dir`): replayed by every executor's trial.
pub fn regression_file(conformance_dir: &Path, op: &str) -> PathBuf {
    conformance_dir
        .join("regressions")
        .join(format!("{op}.txt"))
}

/// Where the property trial of one op reads and persists failure seeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegressionFiles {
    /// The seeds this crate ships ([`regression_file`]), read by every executor's trial
    /// and written only by Concord's own executors' (then it is [`Self::written`] too).
    pub shipped: PathBuf,
    /// Where a new failure's seed is appended (created with its directory when missing),
    /// and read as well: the author's `<op>.txt` when [`SuiteConfig::author_regressions`]
    /// is set, else the shipped file.
    pub written: PathBuf,
}

/// The regression files of `op`'s trial under `config`.
pub fn regression_files(config: &SuiteConfig, op: &str) -> RegressionFiles {
    let shipped = regression_file(&config.conformance_dir, op);
    let written = match &config.author_regressions {
        Some(dir) => dir.join(format!("{op}.txt")),
        None => shipped.clone(),
    };
    RegressionFiles { shipped, written }
}

/// Runs the property trial of `op` on `target`.
pub fn run(suite: &Suite, op: &str, target: &Target) -> Outcome {
    let Some(strategy) = strategy(op) else {
        return Outcome::Fail {
            message: format!("no property strategy for {op}"),
            comparisons: Vec::new(),
        };
    };
    let seed = match run_seed() {
        Ok(seed) => seed,
        Err(message) => {
            return Outcome::Fail {
                message,
                comparisons: Vec::new(),
            }
        }
    };
    let regressions = regression_files(&suite.config, op);
    let mut runner = TestRunner::new(runner_config(
        suite.config.prop_cases,
        &regressions,
        op,
        seed,
    ));
    let tally = RefCell::new(Tally::default());
    let result = runner.run(&strategy, |case| {
        let mut notices = Vec::new();
        let outcome = suite.check_op_case(&case, target, &mut notices);
        tally.borrow_mut().note(&outcome);
        match outcome {
            Outcome::Pass { .. } => Ok(()),
            // A declined case is rejected: proptest generates another in its place, so
            // declined cases never count as passes and shrinking steps around them.
            Outcome::Unsupported { reason } => Err(TestCaseError::reject(reason)),
            Outcome::Fail { message, .. } => Err(TestCaseError::fail(message)),
        }
    });
    let tally = tally.into_inner();
    let floor = suite
        .config
        .prop_min_executed
        .min(suite.config.prop_cases as usize);
    match result {
        Ok(()) | Err(TestError::Abort(_)) if tally.executed == 0 && tally.unsupported > 0 => {
            tally.all_unsupported(suite, op)
        }
        Ok(()) | Err(TestError::Abort(_)) if tally.executed < floor => Outcome::Fail {
            message: format!(
                "prop/{op}: only {} generated cases executed on {}/{target}, fewer than the {floor} a property trial must execute; {} were declined (the first: {}); seed {SEED_VARIABLE}={seed}",
                tally.executed,
                suite.executor.name(),
                tally.unsupported,
                tally.first_unsupported.as_deref().unwrap_or("none"),
            ),
            comparisons: tally.worst,
        },
        Ok(()) => Outcome::Pass {
            comparisons: tally.worst,
        },
        Err(TestError::Abort(why)) => {
            if tally.unsupported > 0 {
                // At least the floor ran and passed, but the executor declined so many that
                // proptest gave up before reaching the configured count.
                Outcome::Pass {
                    comparisons: tally.worst,
                }
            } else {
                Outcome::Fail {
                    message: format!(
                        "prop/{op}: the property run was aborted: {why}; seed {SEED_VARIABLE}={seed}"
                    ),
                    comparisons: Vec::new(),
                }
            }
        }
        Err(TestError::Fail(why, minimal)) => failure(
            suite,
            op,
            target,
            &minimal,
            &why.to_string(),
            &regressions,
            seed,
        ),
    }
}

/// The proptest configuration of one trial: `cases` new cases after the persisted ones,
/// failures persisted as `regressions` says, and the run's seed mixed with the op's name
/// (so the ops of one run draw different cases, and one op draws the same under one seed).
fn runner_config(cases: u32, regressions: &RegressionFiles, op: &str, seed: u64) -> Config {
    let defaults = Config::default();
    let rng_seed = RngSeed::Fixed(stable_seed("prop", op, seed as usize));
    Config {
        cases,
        failure_persistence: Some(Box::new(SeedFiles::new(regressions))),
        // An executor that declines most cases of an op still gets to run the ones it
        // takes; one that declines all of them is found out after this many tries.
        max_global_rejects: cases.saturating_mul(4).saturating_add(32),
        max_shrink_iters: 2048,
        max_shrink_time: 60_000,
        rng_seed,
        fork: false,
        timeout: 0,
        verbose: 0,
        source_file: None,
        ..defaults
    }
}

/// Proptest's persistence over [`RegressionFiles`]: seeds are loaded from the shipped file
/// (if it is not the written one) and then the written one, and saved to the written one
/// only, in proptest's own file format.
#[derive(Clone, Debug, PartialEq)]
struct SeedFiles {
    /// The shipped file, when only read.
    read_only: Option<FileFailurePersistence>,
    written: FileFailurePersistence,
}

impl SeedFiles {
    fn new(files: &RegressionFiles) -> SeedFiles {
        // FileFailurePersistence takes a `&'static str`; one or two short paths per trial
        // are leaked, a few hundred bytes per suite run.
        let leak = |path: &Path| -> &'static str {
            Box::leak(path.to_string_lossy().into_owned().into_boxed_str())
        };
        SeedFiles {
            read_only: (files.shipped != files.written)
                .then(|| FileFailurePersistence::Direct(leak(&files.shipped))),
            written: FileFailurePersistence::Direct(leak(&files.written)),
        }
    }
}

impl FailurePersistence for SeedFiles {
    fn load_persisted_failures2(&self, source_file: Option<&'static str>) -> Vec<PersistedSeed> {
        let mut seeds = self
            .read_only
            .map(|f| f.load_persisted_failures2(source_file))
            .unwrap_or_default();
        for seed in self.written.load_persisted_failures2(source_file) {
            // A seed the author copied from the shipped file replays once.
            if !seeds.contains(&seed) {
                seeds.push(seed);
            }
        }
        seeds
    }

    fn save_persisted_failure2(
        &mut self,
        source_file: Option<&'static str>,
        seed: PersistedSeed,
        shrunken_value: &dyn std::fmt::Debug,
    ) {
        self.written
            .save_persisted_failure2(source_file, seed, shrunken_value);
    }

    fn box_clone(&self) -> Box<dyn FailurePersistence> {
        Box::new(self.clone())
    }

    fn eq(&self, other: &dyn FailurePersistence) -> bool {
        other
            .as_any()
            .downcast_ref::<SeedFiles>()
            .is_some_and(|o| o == self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// What a trial's cases did, across generation and shrinking.
#[derive(Debug, Default)]
struct Tally {
    /// Cases the executor ran (passed or failed).
    executed: usize,
    /// Cases the executor declined.
    unsupported: usize,
    first_unsupported: Option<String>,
    /// Per output position, the passing comparison with the largest absolute error.
    worst: Vec<Comparison>,
}

impl Tally {
    fn note(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Pass { comparisons } => {
                self.executed += 1;
                for (i, c) in comparisons.iter().enumerate() {
                    match self.worst.get_mut(i) {
                        Some(w) if w.max_abs_error >= c.max_abs_error => {}
                        Some(w) => *w = c.clone(),
                        None => self.worst.push(c.clone()),
                    }
                }
            }
            Outcome::Fail { .. } => self.executed += 1,
            Outcome::Unsupported { reason } => {
                self.unsupported += 1;
                if self.first_unsupported.is_none() {
                    self.first_unsupported = Some(reason.clone());
                }
            }
        }
    }

    fn all_unsupported(&self, suite: &Suite, op: &str) -> Outcome {
        Outcome::Unsupported {
            reason: format!(
                "unsupported: {} declined every generated {op} case ({} tried); the first: {}",
                suite.executor.name(),
                self.unsupported,
                self.first_unsupported
                    .as_deref()
                    .unwrap_or("no reason given")
            ),
        }
    }
}

/// The outcome of a failed trial: the minimal case re-run for its comparisons, written
/// out as a repro, and a message with everything needed to act on it.
fn failure(
    suite: &Suite,
    op: &str,
    target: &Target,
    minimal: &OpCase,
    why: &str,
    regressions: &RegressionFiles,
    seed: u64,
) -> Outcome {
    let mut notices = Vec::new();
    let (detail, comparisons) = match suite.check_op_case(minimal, target, &mut notices) {
        Outcome::Fail {
            message,
            comparisons,
        } => (message, comparisons),
        // Proptest saw this case fail; a second run that passes means the executor is
        // not deterministic, which is a finding too.
        other => (
            format!(
                "{why}\n(re-running the minimal case gave {}: the executor's result changes from run to run)",
                match other {
                    Outcome::Pass { .. } => "a pass",
                    _ => "unsupported",
                }
            ),
            Vec::new(),
        ),
    };
    let executor = suite.executor.name();
    let repro = crate::repro::write(
        &suite.config.repro_dir,
        executor,
        &suite.spec(target),
        minimal,
        &detail,
    );
    let mut message = format!(
        "prop/{op}: a generated case fails on {executor}/{target}; shrunk to a minimal case:\n{detail}\n"
    );
    match repro {
        Ok(repro) => {
            message.push_str(&format!(
                "\nminimal case (paste into conformance/cases/ to keep it as a named regression case):\n{}\nrepro written to {}\nreplay: {}\n",
                repro.case_toml,
                repro.dir.display(),
                repro.command
            ));
        }
        Err(e) => {
            message.push_str(&format!(
                "\nminimal case:\n{}\nthe repro could not be written: {e}\n",
                crate::repro::case_toml(minimal)
            ));
        }
    }
    message.push_str(&format!(
        "new failing seeds are persisted in {} (commit it with the fix or the expectations entry) and replay first on every run; {SEED_VARIABLE}={seed} replays this run's generated cases",
        regressions.written.display()
    ));
    Outcome::Fail {
        message,
        comparisons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trial's seed; None if it were left to proptest (it never is).
    fn fixed_seed(op: &str, run: u64) -> Option<u64> {
        let unused = RegressionFiles {
            shipped: PathBuf::from("unused.txt"),
            written: PathBuf::from("unused.txt"),
        };
        match runner_config(24, &unused, op, run).rng_seed {
            RngSeed::Fixed(seed) => Some(seed),
            RngSeed::Random => None,
        }
    }

    #[test]
    fn the_run_seed_decides_each_trials_seed() {
        // One run seed gives each op its own seed, the same every time it is asked.
        assert!(fixed_seed("Conv", 7).is_some());
        assert_eq!(fixed_seed("Conv", 7), fixed_seed("Conv", 7));
        assert_ne!(fixed_seed("Conv", 7), fixed_seed("Gemm", 7));
        // Another run seed gives other cases.
        assert_ne!(fixed_seed("Conv", 7), fixed_seed("Conv", 8));
        // Within a process the run seed is drawn once.
        assert_eq!(run_seed(), run_seed());
    }

    #[test]
    fn families_and_ops_agree() {
        for op in ops() {
            assert!(strategy(op).is_some(), "{op} has no strategy");
        }
        assert!(strategy("Shape").is_none());
    }
}
