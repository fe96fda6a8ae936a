//! The failure path of the property trials, driven by planted-fault executors: a wrong
//! Conv is caught, shrunk to the smallest Conv there is, persisted (in the suite's
//! regressions/ for Concord's own executors, in the author's crate for anyone else's), and
//! written out as a repro whose files decode and whose replay shows the same error;
//! declined cases never count as passes.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord::{
    Availability, Backend, Executor, ExecutorRegistry, Graph, PreparedPartition, ProfileSink,
    Support, Target, TargetSpec, Tensor,
};
use concord_conformance::case::{CaseFile, OpCase};
use concord_conformance::golden::read_npy;
use concord_conformance::{prop, repro, Outcome, Suite, SuiteConfig};
use concord_core::{Error, Node, Op};
use concord_cpu::CpuExecutor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What a planted-fault executor does to Conv nodes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// Runs Conv like the reference, then adds 1.0 to every output element.
    PlusOne,
    /// Declines every Conv.
    DeclineConv,
    /// Declines ungrouped Convs and adds 1.0 to grouped ones.
    PlusOneOnGroupedOnly,
    /// Declines grouped Convs and runs the others correctly.
    DeclineGrouped,
    /// Takes the first few Convs it is asked about, correctly, and declines every later one.
    DeclineAfterAFew,
}

/// How many Convs the DeclineAfterAFew fault takes before it declines the rest.
const TAKEN_BEFORE_DECLINING: usize = 5;

/// The reference executor with a planted fault, under its own backend name.
#[derive(Debug)]
struct Planted {
    name: String,
    fault: Fault,
    inner: CpuExecutor,
    /// Convs taken so far (DeclineAfterAFew).
    taken: AtomicUsize,
}

#[derive(Debug)]
struct PlantedPartition {
    inner: Box<dyn PreparedPartition>,
    plus_one: bool,
}

impl Planted {
    fn new(name: &str, fault: Fault) -> Planted {
        Planted {
            name: name.to_string(),
            fault,
            inner: CpuExecutor::new(),
            taken: AtomicUsize::new(0),
        }
    }
}

fn grouped(node: &Node) -> Option<bool> {
    match &node.op {
        Op::Conv(c) => Some(c.group > 1),
        _ => None,
    }
}

impl Executor for Planted {
    fn name(&self) -> &str {
        &self.name
    }

    fn probe(&self) -> Availability {
        self.inner.probe()
    }

    fn targets(&self) -> Vec<TargetSpec> {
        vec![cpu_spec()]
    }

    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support {
        let declined = match (self.fault, grouped(node)) {
            (Fault::DeclineConv, Some(_))
            | (Fault::PlusOneOnGroupedOnly, Some(false))
            | (Fault::DeclineGrouped, Some(true)) => true,
            (Fault::DeclineAfterAFew, Some(_)) => {
                self.taken.fetch_add(1, Ordering::Relaxed) >= TAKEN_BEFORE_DECLINING
            }
            _ => false,
        };
        if declined {
            Support::No(format!("{} declines this Conv on purpose", self.name))
        } else {
            self.inner.supports(graph, node, target)
        }
    }

    fn prepare(
        &self,
        partition: &Graph,
        target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        let plus_one = matches!(self.fault, Fault::PlusOne | Fault::PlusOneOnGroupedOnly)
            && partition.nodes.iter().any(|n| grouped(n).is_some());
        Ok(Box::new(PlantedPartition {
            inner: self.inner.prepare(partition, target)?,
            plus_one,
        }))
    }
}

impl PreparedPartition for PlantedPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let outputs = self.inner.run(inputs, profile)?;
        if !self.plus_one {
            return Ok(outputs);
        }
        outputs
            .into_iter()
            .map(|t| match t.as_f32() {
                Some(v) => Tensor::from_f32(t.shape().clone(), v.iter().map(|x| x + 1.0).collect()),
                None => Ok(t),
            })
            .collect()
    }
}

/// A scratch copy of the conformance data (without its regressions, so the planted
/// failures persist somewhere harmless) and a repro directory, for one test.
fn scratch(test: &str) -> (PathBuf, SuiteConfig) {
    let root = std::env::temp_dir().join(format!("concord-prop-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let conformance = root.join("conformance");
    let mut config = SuiteConfig::from_env();
    copy_data(&config.conformance_dir, &conformance);
    config.conformance_dir = conformance;
    config.repro_dir = root.join("repro");
    config.prop_cases = 24;
    (root, config)
}

/// Copies the suite's data files (not sources, tests or regressions) from `from` to `to`.
/// The golden cases (10 MB) stay where they are: `golden_dir` keeps pointing at them.
fn copy_data(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("scratch dir");
    for entry in std::fs::read_dir(from).expect("conformance dir").flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let target = to.join(&name);
        if path.is_dir() {
            if !matches!(
                name.to_str(),
                Some("src" | "tests" | "examples" | "regressions" | "target" | "golden")
            ) {
                copy_data(&path, &target);
            }
        } else {
            std::fs::copy(&path, &target).expect("copy a data file");
        }
    }
}

fn suite(executor: Planted, config: SuiteConfig) -> Suite {
    Suite::new(Arc::new(executor), config).expect("suite")
}

fn only_repro(root: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(root.join("repro"))
        .expect("the repro directory exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(dirs.len(), 1, "one repro per failing trial: {dirs:?}");
    dirs.into_iter().next().expect("one")
}

fn read_case_file(path: &Path) -> OpCase {
    let text = std::fs::read_to_string(path).expect("case.toml");
    let file: CaseFile = toml::from_str(&text).expect("case.toml parses as a case file");
    assert_eq!(file.cases.len(), 1);
    file.cases.into_iter().next().expect("one case")
}

#[test]
fn a_wrong_conv_is_shrunk_persisted_and_written_out_as_a_repro() {
    let (root, config) = scratch("plus-one");
    let conformance = config.conformance_dir.clone();
    let s = suite(Planted::new("plusone", Fault::PlusOne), config.clone());
    let Outcome::Fail {
        message,
        comparisons,
    } = prop::run(&s, "Conv", &concord::targets::CPU)
    else {
        panic!("a Conv that adds 1.0 must fail its property trial");
    };
    println!("{message}");

    // The comparison names the error the fault plants: 1.0, up to the f32 rounding of
    // y + 1.
    assert_eq!(comparisons.len(), 1);
    assert!(!comparisons[0].passed());
    assert!((comparisons[0].max_abs_error - 1.0).abs() < 1e-6);

    // The message carries the minimal case, the comparison, the repro and its command.
    assert!(message.contains("[[case]]"), "{message}");
    assert!(message.contains("op = \"Conv\""), "{message}");
    assert!(message.contains("out of tolerance"), "{message}");
    let dir = only_repro(&root);
    let dir_name = dir
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(dir_name.starts_with("plusone-cpu-Conv-"), "{dir_name}");
    let command = format!(
        "concord repro {} --backend plusone --target cpu",
        dir.display()
    );
    assert!(message.contains(&command), "{message}");
    assert!(message.contains(&dir.display().to_string()), "{message}");

    // Shrunk to the smallest Conv there is: one batch, one channel, one spatial element,
    // a 1-wide kernel, no bias and no attributes.
    let case = read_case_file(&dir.join(repro::CASE));
    assert_eq!(case.op, "Conv");
    assert!(case.name.starts_with("regression_"), "{}", case.name);
    assert_eq!(case.inputs.len(), 2, "{case:?}");
    assert_eq!(case.inputs[0].shape, vec![1, 1, 1]);
    assert_eq!(case.inputs[1].shape, vec![1, 1, 1]);
    assert!(case.attributes.is_empty(), "{case:?}");

    // Every file is there and decodes; the model is exactly the case's model.
    let readme = std::fs::read_to_string(dir.join(repro::README)).expect("README.txt");
    assert!(readme.contains(&command), "{readme}");
    // The source-checkout command needs no cargo feature: opencl and cuda are defaults.
    assert!(
        readme.contains(&format!(
            "cargo run -p concord-cli -- repro {} --backend plusone --target cpu",
            dir.display()
        )),
        "{readme}"
    );
    assert!(!readme.contains("--features"), "{readme}");
    let model = std::fs::read(dir.join(repro::MODEL)).expect("model.onnx");
    let graph = concord_onnx::load(&model).expect("model.onnx loads");
    assert_eq!(graph.nodes.len(), 1);
    assert!(matches!(graph.nodes[0].op, Op::Conv(_)));
    let rebuilt = case.build().expect("the case builds");
    assert_eq!(prost::Message::encode_to_vec(&rebuilt.model), model);
    let x = read_npy(&dir.join(repro::INPUTS).join("x.npy")).expect("x.npy");
    assert_eq!(x.dims(), &[1, 1, 1]);
    let expected = read_npy(&dir.join(repro::EXPECTED).join("out0.npy")).expect("out0.npy");
    assert_eq!(expected.dims(), &[1, 1, 1]);
    // A 1×1 convolution is one product: y = x·w, with w from the model (it is an
    // initializer in the minimal case) or from the inputs.
    let w = graph
        .initializers
        .get("w")
        .cloned()
        .unwrap_or_else(|| read_npy(&dir.join(repro::INPUTS).join("w.npy")).expect("w.npy"));
    let want = x.to_f64_vec()[0] * w.to_f64_vec()[0];
    assert!((expected.to_f64_vec()[0] - want).abs() <= 1e-6 * want.abs().max(1.0));

    // The failing seed is persisted; with no new cases at all it still replays and fails.
    let regressions = prop::regression_file(&conformance, "Conv");
    let persisted = std::fs::read_to_string(&regressions).expect("regression file written");
    assert!(
        persisted.lines().any(|l| l.starts_with("cc ")),
        "{persisted}"
    );
    let mut replay_only = config.clone();
    replay_only.prop_cases = 0;
    let again = suite(Planted::new("plusone", Fault::PlusOne), replay_only.clone());
    assert!(matches!(
        prop::run(&again, "Conv", &concord::targets::CPU),
        Outcome::Fail { .. }
    ));
    // Without the regression file, zero new cases find nothing.
    std::fs::remove_file(&regressions).expect("remove");
    assert!(matches!(
        prop::run(&again, "Conv", &concord::targets::CPU),
        Outcome::Pass { .. }
    ));

    // Replaying the repro on the faulty executor shows the error; on the reference it
    // passes, since the expected outputs are the reference's.
    let faulty =
        ExecutorRegistry::reference_only().with(Arc::new(Planted::new("plusone", Fault::PlusOne)));
    let replay = repro::replay(
        &dir,
        faulty,
        &Backend::named("plusone"),
        Some(concord::targets::CPU),
    )
    .expect("replay runs");
    assert!(!replay.passed(), "{}", replay.describe());
    assert!((replay.comparisons[0].max_abs_error - 1.0).abs() < 1e-6);
    assert!(replay.describe().contains("out of tolerance"));
    let clean = repro::replay(
        &dir,
        ExecutorRegistry::reference_only(),
        &concord::backends::CPU,
        None,
    )
    .expect("replay runs");
    assert!(clean.passed(), "{}", clean.describe());
    assert_eq!(clean.level, "accumulate");
    if std::env::var_os("CONCORD_KEEP_REPRO").is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
}

#[test]
fn an_authors_failing_seed_lands_in_the_authors_crate_and_the_shipped_seeds_replay() {
    // An executor configured as a backend author's is (Conformance's default): its seeds
    // belong in `conformance/regressions/` of the author's crate, and the suite's own
    // regressions/ (cargo's read-only copy, for a registry dependency) is only read.
    let (root, mut config) = scratch("author-seeds");
    let author = root
        .join("toy-backend")
        .join("conformance")
        .join("regressions");
    config.author_regressions = Some(author.clone());
    let files = prop::regression_files(&config, "Conv");
    assert_eq!(files.written, author.join("Conv.txt"));
    assert_eq!(
        files.shipped,
        prop::regression_file(&config.conformance_dir, "Conv")
    );
    let shipped_dir = config.conformance_dir.join("regressions");
    assert!(
        !shipped_dir.exists(),
        "the scratch data has no regressions/"
    );

    let s = suite(Planted::new("plusone", Fault::PlusOne), config.clone());
    let Outcome::Fail { message, .. } = prop::run(&s, "Conv", &concord::targets::CPU) else {
        panic!("a Conv that adds 1.0 must fail its property trial");
    };
    // The seed is in the author's file, which the message names; nothing was written into
    // the suite's data.
    let persisted = std::fs::read_to_string(&files.written).unwrap_or_else(|e| {
        panic!(
            "the seed was not persisted in {}: {e}
{message}",
            files.written.display()
        )
    });
    assert!(
        persisted.lines().any(|l| l.starts_with("cc ")),
        "{persisted}"
    );
    assert!(
        message.contains(&files.written.display().to_string()),
        "{message}"
    );
    assert!(!shipped_dir.exists(), "the suite wrote into its own data");

    // The same seed shipped with the suite instead replays for the author's executor, with
    // no new cases, and is not copied into the author's file.
    let mut replay_only = config.clone();
    replay_only.prop_cases = 0;
    std::fs::create_dir_all(&shipped_dir).expect("shipped regressions dir");
    std::fs::write(&files.shipped, &persisted).expect("ship the seed");
    std::fs::remove_file(&files.written).expect("remove the author's seed");
    let again = suite(Planted::new("plusone", Fault::PlusOne), replay_only.clone());
    assert!(matches!(
        prop::run(&again, "Conv", &concord::targets::CPU),
        Outcome::Fail { .. }
    ));
    assert!(
        !files.written.exists(),
        "a replayed shipped seed was copied"
    );
    assert_eq!(
        std::fs::read_to_string(&files.shipped).expect("shipped file"),
        persisted,
        "the shipped file changed"
    );

    // The author's own seed replays too; with neither file, zero new cases find nothing.
    std::fs::remove_file(&files.shipped).expect("remove the shipped seed");
    std::fs::write(&files.written, &persisted).expect("restore the author's seed");
    assert!(matches!(
        prop::run(&again, "Conv", &concord::targets::CPU),
        Outcome::Fail { .. }
    ));
    std::fs::remove_file(&files.written).expect("remove the author's seed");
    assert!(matches!(
        prop::run(&again, "Conv", &concord::targets::CPU),
        Outcome::Pass { .. }
    ));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn an_executor_that_declines_every_case_is_unsupported_not_passed() {
    let (root, config) = scratch("decline-all");
    let s = suite(Planted::new("declineconv", Fault::DeclineConv), config);
    match prop::run(&s, "Conv", &concord::targets::CPU) {
        Outcome::Unsupported { reason } => {
            assert!(
                reason.contains("declined every generated Conv case"),
                "{reason}"
            );
            assert!(reason.contains("declines this Conv on purpose"), "{reason}");
        }
        other => panic!("expected unsupported, got {other:?}"),
    }
    // Other ops are unaffected.
    assert!(matches!(
        prop::run(&s, "Relu", &concord::targets::CPU),
        Outcome::Pass { .. }
    ));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_trial_that_executes_fewer_cases_than_its_floor_fails() {
    // Correct on the few cases it takes, then declining: proptest gives up after its
    // rejects, and a handful of passes is not a passing trial.
    let (root, config) = scratch("decline-after-a-few");
    let floor = config.prop_min_executed.min(config.prop_cases as usize);
    assert!(
        TAKEN_BEFORE_DECLINING < floor,
        "the fault must take fewer cases than the floor ({floor})"
    );
    let s = suite(
        Planted::new("declineafterafew", Fault::DeclineAfterAFew),
        config,
    );
    match prop::run(&s, "Conv", &concord::targets::CPU) {
        Outcome::Fail { message, .. } => {
            assert!(
                message.contains(&format!(
                    "fewer than the {floor} a property trial must execute"
                )),
                "{message}"
            );
            assert!(message.contains("CONCORD_PROP_SEED="), "{message}");
            assert!(
                message.contains("declines this Conv on purpose"),
                "{message}"
            );
        }
        other => panic!("expected a failure below the floor, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn declined_cases_are_regenerated_and_shrinking_steps_around_them() {
    // Correct on the cases it takes: the trial passes on those alone.
    let (root, config) = scratch("decline-grouped");
    let s = suite(
        Planted::new("declinegrouped", Fault::DeclineGrouped),
        config,
    );
    assert!(matches!(
        prop::run(&s, "Conv", &concord::targets::CPU),
        Outcome::Pass { .. }
    ));
    let _ = std::fs::remove_dir_all(&root);

    // Wrong only on grouped Convs and declining the rest: the minimal case cannot shrink
    // to group 1 (declined), so it stops at the smallest grouped Conv.
    let (root, config) = scratch("grouped-plus-one");
    let s = suite(
        Planted::new("groupedplusone", Fault::PlusOneOnGroupedOnly),
        config,
    );
    let Outcome::Fail { message, .. } = prop::run(&s, "Conv", &concord::targets::CPU) else {
        panic!("a grouped Conv that adds 1.0 must fail");
    };
    let case = read_case_file(&only_repro(&root).join(repro::CASE));
    assert!(
        matches!(
            case.attributes.get("group"),
            Some(concord_conformance::case::AttributeValue::Int(2))
        ),
        "{message}"
    );
    // Two groups of one channel each: x is [1, 2, 1] and w is [2, 1, 1].
    assert_eq!(case.inputs[0].shape, vec![1, 2, 1], "{message}");
    assert_eq!(case.inputs[1].shape, vec![2, 1, 1], "{message}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn repros_of_every_op_round_trip_and_replay_on_the_reference() {
    use proptest::strategy::{Strategy, ValueTree};
    let root = std::env::temp_dir().join(format!("concord-prop-every-op-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for op in prop::ops() {
        let strategy = prop::strategy(op).expect("a strategy");
        for _ in 0..4 {
            let case = strategy.new_tree(&mut runner).expect("a case").current();
            let written = repro::write(&root, "cpu", &cpu_spec(), &case, "a planted failure")
                .unwrap_or_else(|e| panic!("{op}: {e}\n{case:?}"));
            // case.toml reads back as the same case: the same model and the same inputs.
            let read = repro::read_case(&written.dir).expect("case.toml reads");
            let (a, b) = (
                written.case.build().expect("builds"),
                read.build().expect("builds"),
            );
            assert_eq!(
                prost::Message::encode_to_vec(&a.model),
                prost::Message::encode_to_vec(&b.model),
                "{op}: case.toml changes the model:\n{}",
                written.case_toml
            );
            // Bit for bit, so that NaN inputs compare equal to themselves.
            let bits = |inputs: &[(String, Tensor)]| -> Vec<(String, String, Vec<u64>)> {
                inputs
                    .iter()
                    .map(|(n, t)| {
                        let v = t.to_f64_vec().iter().map(|x| x.to_bits()).collect();
                        (n.clone(), format!("{}{}", t.dtype(), t.shape()), v)
                    })
                    .collect()
            };
            assert_eq!(
                bits(&a.inputs),
                bits(&b.inputs),
                "{op}: case.toml changes the inputs"
            );
            // The model loads, and every file replays to a pass on the reference.
            let model = std::fs::read(written.dir.join(repro::MODEL)).expect("model.onnx");
            concord_onnx::load(&model).unwrap_or_else(|e| panic!("{op}: {e}"));
            let replay = repro::replay(
                &written.dir,
                ExecutorRegistry::reference_only(),
                &concord::backends::CPU,
                None,
            )
            .unwrap_or_else(|e| panic!("{op}: {e}"));
            assert!(replay.passed(), "{op}: {}", replay.describe());
            assert_eq!(replay.comparisons.len(), case.outputs, "{op}");
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// The reference's one target, as the planted executors here declare it.
fn cpu_spec() -> TargetSpec {
    TargetSpec::new(
        concord::targets::CPU,
        concord::DType::F32,
        concord::DType::F32,
    )
}
