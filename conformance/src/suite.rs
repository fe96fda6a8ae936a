//! The suite object: given an executor, the list of cases for each of its targets, and how
//! to run one. Both drivers — the libtest-mimic harness ([`crate::main`]) and
//! `concord conform` ([`crate::run`]) — go through here, so there is one suite.

use crate::case::{load_cases, OpCase};
use crate::compare::{compare, compare_zeros, Comparison, Zeros};
use crate::config::ExpectationsSource;
use crate::error::SuiteError;
use crate::expectations::Expectations;
use crate::golden::{read_npy, GoldenCase, Manifest};
use crate::op_oracle::OracleManifest;
use crate::outcome::{DeclinedNode, NodeCoverage, Outcome, Record, Verdict};
use crate::report::{DeviceEntry, Floor};
use crate::tolerance::{allowance, Level, ToleranceTable};
use concord::{
    resolve_target, Availability, Backend, Capability, Executor, ExecutorRegistry, FallbackPolicy,
    Net, NetBuilder, Overrides, Support, Target, TargetSpec, Tensor,
};
use concord_core::DType;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Where the suite's data and the executor's own files live, and how much property testing
/// to do.
#[derive(Clone, Debug)]
pub struct SuiteConfig {
    /// The suite's data, packaged with this crate: conformance/ (cases/, golden/,
    /// expectations/ of Concord's executors, regressions/, onnx-node.toml).
    pub conformance_dir: PathBuf,
    /// conformance/golden/ (manifest.json and the cases).
    pub golden_dir: PathBuf,
    /// Generated cases per property trial.
    pub prop_cases: u32,
    /// The fewest generated cases a property trial must execute (not declined) to pass; a
    /// trial asking for fewer cases must execute all of them.
    pub prop_min_executed: usize,
    /// Where failing property cases are written as standalone repros.
    pub repro_dir: PathBuf,
    /// Where the seeds of failing property cases are persisted, one `<op>.txt` per op, for
    /// an executor that is not Concord's own: the author's directory
    /// (`conformance/regressions/` of their crate, see [`crate::Conformance`]), replayed
    /// after the seeds this crate ships in `conformance_dir/regressions/`, which are only
    /// read. `None`: the shipped directory itself, read and written (Concord's executors).
    pub author_regressions: Option<PathBuf>,
    /// Where the executor's expectations file is (see [`crate::config`]).
    pub expectations: ExpectationsSource,
    /// The author's tolerance levels and overrides, added to the shipped table.
    pub tolerance_overrides: Option<PathBuf>,
    /// The floor on executed trials when it is given in code rather than in the
    /// expectations file.
    pub min_executed: Option<usize>,
    /// Set by a run that records the floors (`--record-floors`): an expectations file
    /// without any floor yet is read rather than refused.
    pub recording_floors: bool,
}

/// Generated cases per property trial unless `CONCORD_PROP_CASES` says otherwise: enough
/// that every run reaches the edge lengths of most ops (a case has a long axis about half
/// the time), few enough that the property trials of Concord's executors take a few
/// seconds on PoCL.
pub const DEFAULT_PROP_CASES: u32 = 64;

/// The fewest executed cases per property trial unless `CONCORD_PROP_MIN_EXECUTED` says
/// otherwise: half the default count, so an executor may decline half the cases of an op
/// (a dtype it lacks) and still have its kernels searched.
pub const DEFAULT_PROP_MIN_EXECUTED: usize = 32;

impl Default for SuiteConfig {
    fn default() -> Self {
        Self::from_env()
    }
}

impl SuiteConfig {
    /// The data packaged with this crate (`env!("CARGO_MANIFEST_DIR")` is this crate's
    /// directory wherever cargo keeps it: a checkout, a git checkout or the registry cache),
    /// unless `CONCORD_CONFORMANCE_DIR` / `CONCORD_GOLDEN_DIR` point elsewhere (a GPU bundle
    /// without the source tree). Expectations come from the shipped files, as `concord
    /// conform` reads them for Concord's executors, and failing property seeds are persisted
    /// in the shipped regressions/; the test harness points both at the author's crate
    /// instead ([`crate::Conformance`]).
    pub fn from_env() -> SuiteConfig {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let conformance_dir = std::env::var_os("CONCORD_CONFORMANCE_DIR")
            .map(PathBuf::from)
            .unwrap_or(here);
        let golden_dir = std::env::var_os("CONCORD_GOLDEN_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| conformance_dir.join("golden"));
        let prop_cases = std::env::var("CONCORD_PROP_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_PROP_CASES);
        let prop_min_executed = std::env::var("CONCORD_PROP_MIN_EXECUTED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_PROP_MIN_EXECUTED);
        let repro_dir = std::env::var_os("CONCORD_REPRO_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("concord-repro"));
        SuiteConfig {
            conformance_dir,
            golden_dir,
            prop_cases,
            prop_min_executed,
            repro_dir,
            author_regressions: None,
            expectations: ExpectationsSource::Shipped,
            tolerance_overrides: None,
            min_executed: None,
            recording_floors: false,
        }
    }
}

/// The reference executor's name: its op/ trials compare with the op cases' independent
/// oracle ([`crate::op_oracle`]) instead of with the reference.
const REFERENCE: &str = "cpu";

/// One executor's suite.
#[derive(Debug)]
pub struct Suite {
    pub executor: Arc<dyn Executor>,
    registry: ExecutorRegistry,
    reference: ExecutorRegistry,
    pub availability: Availability,
    /// The first device's name ("" when unavailable), for expectation matchers.
    pub device: String,
    pub tolerances: ToleranceTable,
    pub expectations: Expectations,
    pub op_cases: Vec<Arc<OpCase>>,
    pub golden: Vec<Arc<GoldenCase>>,
    golden_manifest: Manifest,
    /// The op cases' onnxruntime outputs, loaded for the reference executor only: its op/
    /// trials compare with these, never with itself.
    op_oracle: Option<OracleManifest>,
    pub node_tests: crate::node_tests::NodeTests,
    pub config: SuiteConfig,
}

/// What a case does when run.
#[derive(Clone, Debug)]
pub enum Job {
    Op(Arc<OpCase>),
    Golden(Arc<GoldenCase>),
    Prop(&'static str),
    Concurrency(&'static str),
    Fallback(&'static str),
    /// The executor (or this target) cannot run here: a visible skip locally, a failure
    /// when `CI` is set or `CONCORD_REQUIRE` names it.
    Unavailable(String),
    Node(crate::node_tests::NodeJob),
}

/// One trial of the suite.
#[derive(Clone, Debug)]
pub struct Case {
    /// `<executor>/<target>/<category>/<case>`.
    pub name: String,
    pub target: Target,
    pub category: &'static str,
    pub subject: String,
    pub job: Job,
    /// Known before running: the reason this trial will not execute.
    pub skip: Option<String>,
}

impl Suite {
    /// Loads the suite's data and probes the executor.
    pub fn new(executor: Arc<dyn Executor>, config: SuiteConfig) -> Result<Suite, SuiteError> {
        let availability = executor.probe();
        let device = match &availability {
            Availability::Available { devices } => {
                devices.first().map(|d| d.name.clone()).unwrap_or_default()
            }
            Availability::Unavailable { .. } => String::new(),
        };
        let registry = ExecutorRegistry::reference_only().with(executor.clone());
        let golden_manifest = Manifest::load(&config.golden_dir)?;
        let targets: Vec<Target> = executor.targets().into_iter().map(|s| s.target).collect();
        let op_oracle = if executor.name() == REFERENCE {
            Some(OracleManifest::load(&config.golden_dir)?)
        } else {
            None
        };
        Ok(Suite {
            registry,
            reference: ExecutorRegistry::reference_only(),
            availability,
            device,
            tolerances: crate::config::load_tolerances(&config, &targets)?,
            expectations: crate::config::load_expectations(&config, executor.name(), &targets)?,
            op_cases: load_cases(&config.conformance_dir.join("cases"))?
                .into_iter()
                .map(Arc::new)
                .collect(),
            golden: golden_manifest
                .cases
                .iter()
                .cloned()
                .map(Arc::new)
                .collect(),
            golden_manifest,
            op_oracle,
            node_tests: crate::node_tests::NodeTests::load(&config.conformance_dir)?,
            executor,
            config,
        })
    }

    /// Every trial, for every target of the executor.
    pub fn cases(&self) -> Vec<Case> {
        let name = self.executor.name().to_string();
        let mut out = Vec::new();
        for spec in self.executor.targets() {
            let target = &spec.target;
            let prefix = format!("{name}/{target}");
            if let Some(reason) = self.target_unavailable(target) {
                out.push(Case {
                    name: format!("{prefix}/unavailable/probe"),
                    target: target.clone(),
                    category: "unavailable",
                    subject: String::new(),
                    job: Job::Unavailable(reason),
                    skip: None,
                });
                continue;
            }
            out.extend(self.offered_cases(target));
        }
        out
    }

    /// The trials of one target as if the executor and target were available here, with
    /// the skips decided before running (expectations, and what `supports()` declines):
    /// what [`crate::floors::derive`] counts for an executor this machine cannot run.
    pub fn offered_cases(&self, target: &Target) -> Vec<Case> {
        let name = self.executor.name().to_string();
        let mut out = Vec::new();
        let prefix = format!("{name}/{target}");
        for case in &self.op_cases {
            let trial = format!("{prefix}/op/{}/{}", case.op, case.name);
            let skip = self
                .known_skip(&trial, target)
                .or_else(|| self.unsupported_op(case, target));
            out.push(Case {
                name: trial,
                target: target.clone(),
                category: "op",
                subject: case.op.clone(),
                job: Job::Op(case.clone()),
                skip,
            });
        }
        for op in crate::prop::ops() {
            let trial = format!("{prefix}/prop/{op}");
            let skip = self.known_skip(&trial, target);
            out.push(Case {
                name: trial,
                target: target.clone(),
                category: "prop",
                subject: op.to_string(),
                job: Job::Prop(op),
                skip,
            });
        }
        for scenario in crate::fallback::SCENARIOS {
            let trial = format!("{prefix}/fallback/{scenario}");
            let skip = self.known_skip(&trial, target);
            out.push(Case {
                name: trial,
                target: target.clone(),
                category: "fallback",
                subject: scenario.to_string(),
                job: Job::Fallback(scenario),
                skip,
            });
        }
        for scenario in crate::concurrency::SCENARIOS {
            let trial = format!("{prefix}/concurrency/{scenario}");
            let skip = self.known_skip(&trial, target);
            out.push(Case {
                name: trial,
                target: target.clone(),
                category: "concurrency",
                subject: scenario.to_string(),
                job: Job::Concurrency(scenario),
                skip,
            });
        }
        for g in &self.golden {
            let category = if g.kind == "model" { "model" } else { "golden" };
            let trial = format!("{prefix}/{category}/{}", g.name);
            // A model of which the executor declines only some nodes runs partly on
            // the reference (a partial trial); one it declines whole is a skip.
            let skip = self.known_skip(&trial, target).or_else(|| {
                std::fs::read(&g.model)
                    .ok()
                    .and_then(|bytes| self.declined_whole(&bytes, target))
            });
            let subject = if g.kind == "model" {
                g.name.clone()
            } else {
                g.op_types.join("+")
            };
            out.push(Case {
                name: trial,
                target: target.clone(),
                category,
                subject,
                job: Job::Golden(g.clone()),
                skip,
            });
        }
        out.extend(self.node_tests.cases(self, target, &prefix));
        out
    }

    /// Runs one trial and applies the expectations.
    pub fn run_case(&self, case: &Case) -> Record {
        let started = Instant::now();
        let mut notices = Vec::new();
        let mut coverage = None;
        let (outcome, skip) = match (&case.skip, &case.job) {
            (Some(reason), _) => (None, Some(reason.clone())),
            (None, Job::Unavailable(reason)) => {
                if let Some(why) = required_here(
                    self.executor.name(),
                    &case.target,
                    self.spec(&case.target).needs,
                    &self.registry,
                    self.expectations.unavailable_in_ci.as_deref(),
                ) {
                    let message =
                        format!("{reason} — and {why}, so an unavailable executor fails the run");
                    (
                        Some(Outcome::Fail {
                            message,
                            comparisons: Vec::new(),
                        }),
                        None,
                    )
                } else {
                    (None, Some(reason.clone()))
                }
            }
            (None, Job::Op(op_case)) => (
                Some(self.check_op_trial(op_case, &case.target, &mut notices)),
                None,
            ),
            (None, Job::Golden(g)) => (
                Some(self.check_golden(g, &case.target, &mut notices, &mut coverage)),
                None,
            ),
            (None, Job::Node(job)) => {
                self.node_tests
                    .run(self, job, &case.target, &mut notices, &mut coverage)
            }
            (None, Job::Prop(op)) => (Some(crate::prop::run(self, op, &case.target)), None),
            (None, Job::Fallback(scenario)) => (
                Some(crate::fallback::run(
                    self,
                    scenario,
                    &case.target,
                    &mut notices,
                )),
                None,
            ),
            (None, Job::Concurrency(scenario)) => (
                Some(crate::concurrency::run(
                    self,
                    scenario,
                    &case.target,
                    &mut notices,
                )),
                None,
            ),
        };
        let verdict = match (outcome.as_ref(), skip) {
            (_, Some(reason)) => Verdict::Skip { reason },
            (Some(Outcome::Unsupported { reason }), None) => Verdict::Skip {
                reason: reason.clone(),
            },
            (Some(o), None) => match &case.job {
                Job::Node(job) => self.node_tests.judge(self, case, job, o),
                _ => self.judge(&case.name, &case.target, o),
            },
            (None, None) => Verdict::Skip {
                reason: "not run".into(),
            },
        };
        let verdict = partial_verdict(verdict, coverage.as_ref(), self.executor.name());
        let comparisons = match outcome {
            Some(Outcome::Pass { comparisons }) | Some(Outcome::Fail { comparisons, .. }) => {
                comparisons
            }
            _ => Vec::new(),
        };
        Record {
            name: case.name.clone(),
            executor: self.executor.name().to_string(),
            target: case.target.name().to_string(),
            device: self.device.clone(),
            category: case.category.to_string(),
            subject: case.subject.clone(),
            verdict,
            comparisons,
            notices,
            coverage,
            duration_ms: started.elapsed().as_secs_f64() * 1e3,
        }
    }

    /// Run-level failures after all trials: too few executed, node coverage below its
    /// floor, stale expectations. `filtered` is true when a name filter selected only some
    /// trials (then none of these apply).
    pub fn finish(&self, cases: &[Case], records: &[Record], filtered: bool) -> Vec<String> {
        if filtered {
            return Vec::new();
        }
        let mut failures = self.stale_entries(cases);
        failures.extend(self.floor().check(records));
        failures
    }

    /// Run-level failures that need the list of every trial but no result: list and
    /// expectation entries that match no trial. A shard (`--shard K/N`) has every trial's
    /// name, so it checks these itself; its floors wait for the merge ([`Suite::floor`]).
    pub fn stale_entries(&self, cases: &[Case]) -> Vec<String> {
        let mut failures = self.node_tests.stale_entries(self.executor.name());
        let trials: Vec<(String, String, String)> = cases
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    c.target.name().to_string(),
                    self.device.clone(),
                )
            })
            .collect();
        for entry in self.expectations.stale(&trials) {
            failures.push(format!(
                "{}: expectation `{}` ({}) matches no trial: remove it",
                self.executor.name(),
                entry.pattern,
                entry.reason
            ));
        }
        failures
    }

    /// The floors of this executor's expectations file, on this machine's device. The
    /// floor guards a suite that shrank on a working executor; an executor that is not
    /// available here executes nothing, and its `unavailable` trial already says so (and
    /// fails where CI or `CONCORD_REQUIRE` demands the executor).
    pub fn floor(&self) -> Floor {
        Floor {
            executor: self.executor.name().to_string(),
            device: self.device.clone(),
            available: matches!(&self.availability, Availability::Available { devices } if !devices.is_empty()),
            min_executed: self.expectations.min_executed,
            min_node_coverage: self.expectations.min_node_coverage,
            recorded: self.expectations.floors.clone(),
            trials: self.expectations.trials.clone(),
            expectations: self
                .expectations
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        }
    }

    /// What the probe found, for the report: the device the records name, or why none.
    pub fn device_entry(&self) -> DeviceEntry {
        let mut entry = DeviceEntry {
            executor: self.executor.name().to_string(),
            device: self.device.clone(),
            ..DeviceEntry::default()
        };
        match &self.availability {
            Availability::Available { devices } => {
                if let Some(d) = devices.first() {
                    entry.vendor = d.vendor.clone();
                    entry.driver_version = d.driver_version.clone();
                } else {
                    entry.unavailable = Some("the probe found no device".to_string());
                }
            }
            Availability::Unavailable { reason, .. } => entry.unavailable = Some(reason.clone()),
        }
        entry
    }

    pub(crate) fn judge(&self, trial: &str, target: &Target, outcome: &Outcome) -> Verdict {
        let expected = self
            .expectations
            .expected_failure(trial, target.name(), &self.device);
        match (outcome, expected) {
            (Outcome::Pass { .. }, None) => Verdict::Pass,
            (Outcome::Pass { .. }, Some(e)) => Verdict::UnexpectedPass {
                reason: e.reason.clone(),
            },
            (Outcome::Fail { .. }, Some(e)) => match e.failure.as_ref().map(|m| m.check(outcome)) {
                Some(Err(why)) => Verdict::Fail {
                    message: format!(
                        "expected to fail because {} ({}), {why}",
                        e.reason,
                        self.expectations
                            .path
                            .as_ref()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default()
                    ),
                },
                _ => Verdict::ExpectedFail {
                    reason: e.reason.clone(),
                },
            },
            (Outcome::Fail { message, .. }, None) => Verdict::Fail {
                message: message.clone(),
            },
            (Outcome::Unsupported { reason }, _) => Verdict::Skip {
                reason: reason.clone(),
            },
        }
    }

    pub(crate) fn known_skip(&self, trial: &str, target: &Target) -> Option<String> {
        self.expectations
            .skip(trial, target.name(), &self.device)
            .map(|e| format!("skipped by expectations: {}", e.reason))
    }

    /// Why this target cannot run here, if it cannot: [`resolve_target`]'s reasons, the
    /// same the planner and `concord info --require` give. A target that runs only as
    /// another (a capability the device lacks) is unavailable as itself.
    pub fn target_unavailable(&self, target: &Target) -> Option<String> {
        let resolved = resolve_target(
            self.executor.name(),
            &self.executor.targets(),
            &self.availability,
            Some(target),
        );
        let capability_only = resolved
            .fallbacks
            .iter()
            .all(|f| f.cause == concord::FallbackCause::Fp16Unsupported);
        resolved.refusal().map(|why| {
            if capability_only {
                format!("unsupported: {why} (target {target})")
            } else {
                why
            }
        })
    }

    /// The declared spec of one of the executor's targets (precision, needed capability).
    /// A target it does not declare is taken as f32 storage, which is what the tolerance
    /// model assumes of a name it knows nothing about.
    pub fn spec(&self, target: &Target) -> TargetSpec {
        self.executor
            .targets()
            .into_iter()
            .find(|s| s.target == *target)
            .unwrap_or_else(|| TargetSpec::new(target.clone(), DType::F32, DType::F32))
    }

    /// Whether `target` stores tensors in f16 (so the reference sees f16-rounded inputs).
    pub fn stores_f16(&self, target: &Target) -> bool {
        self.spec(target).stores_f16()
    }

    /// The backend the suite asks its nets for: the executor's own name.
    pub fn backend(&self) -> Backend {
        Backend::named(self.executor.name())
    }

    /// Why the executor declines this case's node, decided before running.
    fn unsupported_op(&self, case: &OpCase, target: &Target) -> Option<String> {
        let built = case.build().ok()?;
        self.unsupported_model(&prost::Message::encode_to_vec(&built.model), target)
    }

    /// Why the executor declines a node of this model, decided before running, so the
    /// trial shows as skipped rather than "ok". A model that does not load is left to the
    /// trial, which reports the error.
    pub(crate) fn unsupported_model(&self, bytes: &[u8], target: &Target) -> Option<String> {
        let net = self.reference_net(bytes).ok()?;
        let graph = net.graph();
        for node in &graph.nodes {
            if let Support::No(why) = self.executor.supports(graph, node, target) {
                return Some(format!(
                    "unsupported: {} declines {}: {why}",
                    self.executor.name(),
                    node.op.name()
                ));
            }
        }
        None
    }

    /// Why the executor declines every node of this model, if it does (a model it takes
    /// even one node of runs partly on the reference instead), decided before running so
    /// that the trial shows as skipped rather than "ok". The reason names the first
    /// declined node, as [`Suite::unsupported_model`]'s does. A model without nodes (all
    /// folded at build) or that does not load is left to the trial.
    pub(crate) fn declined_whole(&self, bytes: &[u8], target: &Target) -> Option<String> {
        let net = self.reference_net(bytes).ok()?;
        let graph = net.graph();
        let mut first = None;
        for node in &graph.nodes {
            match self.executor.supports(graph, node, target) {
                Support::Yes => return None,
                Support::No(why) => {
                    first.get_or_insert_with(|| (node.op.name().to_string(), why));
                }
            }
        }
        first.map(|(op, why)| format!("unsupported: {} declines {op}: {why}", self.executor.name()))
    }

    fn reference_net(&self, model: &[u8]) -> Result<Net, concord::Error> {
        NetBuilder::from_onnx_bytes(model.to_vec())
            .registry(self.reference.clone())
            .overrides(Overrides::default())
            .fallback(FallbackPolicy::Deny)
            .build()
    }

    /// Builds the executor's net for `target`, checking that every node really runs on the
    /// executor; a node placed elsewhere makes the case unsupported (named, never a pass).
    pub fn executor_net(
        &self,
        model: &[u8],
        target: &Target,
        notices: &mut Vec<String>,
    ) -> Result<Net, Outcome> {
        let net = NetBuilder::from_onnx_bytes(model.to_vec())
            .registry(self.registry.clone())
            .backend(self.backend())
            .target(target.clone())
            .fallback(FallbackPolicy::Allow)
            .overrides(Overrides::default())
            .build()
            .map_err(|e| Outcome::Fail {
                message: format!("building the net failed: {e}"),
                comparisons: Vec::new(),
            })?;
        notices.extend(
            net.placement()
                .notices
                .iter()
                .map(|n| format!("{}: {} ({} nodes)", n.asked, n.reason, n.nodes)),
        );
        if let Some(node) = net
            .placement()
            .nodes
            .iter()
            .find(|n| n.executor != self.executor.name() || n.target != *target)
        {
            return Err(Outcome::Unsupported {
                reason: format!(
                    "unsupported: node `{}` ({}) was placed on {}/{}: {}",
                    node.name,
                    node.op,
                    node.executor,
                    node.target,
                    node.reason.as_deref().unwrap_or("no reason given")
                ),
            });
        }
        Ok(net)
    }

    /// Builds the executor's net for `target` for a golden, model or node trial: nodes the
    /// executor declines run on the reference, as the planner placed them, and the
    /// placement comes back as the trial's node coverage. The policy is Allow (recorded,
    /// not refused) and `CONCORD_REQUIRE` is not applied to the net: whether the executor is
    /// available at all is the `unavailable/probe` trial's business, which fails where CI or
    /// `CONCORD_REQUIRE` demands the executor, so partial placement on an available
    /// executor cannot hide an unavailable one. A net with no node on the executor and
    /// target under test (every node declined, or the target itself fell back) is
    /// unsupported, a skip.
    pub fn executor_net_partial(
        &self,
        model: &[u8],
        target: &Target,
        notices: &mut Vec<String>,
    ) -> Result<(Net, NodeCoverage), Outcome> {
        let net = NetBuilder::from_onnx_bytes(model.to_vec())
            .registry(self.registry.clone())
            .backend(self.backend())
            .target(target.clone())
            .fallback(FallbackPolicy::Allow)
            .overrides(Overrides::default())
            .build()
            .map_err(|e| Outcome::Fail {
                message: format!("building the net failed: {e}"),
                comparisons: Vec::new(),
            })?;
        notices.extend(
            net.placement()
                .notices
                .iter()
                .map(|n| format!("{}: {} ({} nodes)", n.asked, n.reason, n.nodes)),
        );
        let coverage = node_coverage(&net, self.executor.name(), target);
        if coverage.on_executor == 0 {
            if let Some(node) = coverage.declined.first() {
                return Err(Outcome::Unsupported {
                    reason: format!(
                        "unsupported: node `{}` ({}) was placed on {}: {}",
                        node.node, node.op, node.placed_on, node.reason
                    ),
                });
            }
        }
        Ok((net, coverage))
    }

    /// Runs a single-node case against the reference, with the op's tolerance level.
    pub fn check_op_case(
        &self,
        case: &OpCase,
        target: &Target,
        notices: &mut Vec<String>,
    ) -> Outcome {
        let built = match case.build() {
            Ok(b) => b,
            Err(e) => {
                return Outcome::Fail {
                    message: e.to_string(),
                    comparisons: Vec::new(),
                }
            }
        };
        if built.inputs.is_empty() {
            return Outcome::Fail {
                message: "the case has no runtime input: constant folding would run it at build time, not on the executor".into(),
                comparisons: Vec::new(),
            };
        }
        let bytes = prost::Message::encode_to_vec(&built.model);
        let zeros = if case.signed_zero {
            Zeros::Signed
        } else {
            Zeros::Unsigned
        };
        self.compare_with_reference(&bytes, &built.inputs, &case.op, target, notices, zeros)
    }

    /// An op/ trial: a listed case (conformance/cases/) against the reference, or, on the
    /// reference itself, against the case's independent oracle ([`crate::op_oracle`]), so
    /// that no op/ trial compares the reference with itself. Generated (prop/) cases have no
    /// oracle output and go through [`Suite::check_op_case`].
    pub fn check_op_trial(
        &self,
        case: &OpCase,
        target: &Target,
        notices: &mut Vec<String>,
    ) -> Outcome {
        let Some(oracle) = &self.op_oracle else {
            return self.check_op_case(case, target, notices);
        };
        let built = match case.build() {
            Ok(b) => b,
            Err(e) => {
                return Outcome::Fail {
                    message: e.to_string(),
                    comparisons: Vec::new(),
                }
            }
        };
        if built.inputs.is_empty() {
            return Outcome::Fail {
                message: "the case has no runtime input: constant folding would run it at build time, not on the executor".into(),
                comparisons: Vec::new(),
            };
        }
        let bytes = prost::Message::encode_to_vec(&built.model);
        self.check_against_oracle(oracle, case, &built, &bytes, target, notices)
    }

    /// The reference's op/ trial: the case's outputs against the independent oracle's
    /// (onnxruntime, or the oracle the case names with its reason), under the op's level
    /// with the reference's own accumulation figures. Each comparison names the oracle.
    fn check_against_oracle(
        &self,
        oracle: &OracleManifest,
        case: &OpCase,
        built: &crate::case::BuiltCase,
        model: &[u8],
        target: &Target,
        notices: &mut Vec<String>,
    ) -> Outcome {
        let fail = |message: String| Outcome::Fail {
            message,
            comparisons: Vec::new(),
        };
        let expected = match oracle.outputs_for(case, built) {
            Ok(e) => e,
            Err(message) => return fail(message),
        };
        let net = match self.executor_net(model, target, notices) {
            Ok(n) => n,
            Err(outcome) => return outcome,
        };
        let actual = match net.forward(built.inputs.clone()) {
            Ok(o) => o,
            Err(e) => return fail(format!("forward failed: {e}")),
        };
        let Some(level) = self.tolerances.level_for(&case.op, target) else {
            return fail(format!(
                "no tolerance level for {} in tolerances.toml",
                case.op
            ));
        };
        let accumulation = node_accumulation(net.graph(), &built.inputs);
        let mut comparisons = Vec::new();
        for (name, want) in &expected.outputs {
            let Some(got) = actual.get(name) else {
                return fail(format!("no output `{name}`"));
            };
            let allowed =
                match allowance(level.level, &self.spec(target), want, accumulation.as_ref()) {
                    Ok(a) => a,
                    Err(e) => {
                        return Outcome::Fail {
                            message: e,
                            comparisons,
                        }
                    }
                };
            comparisons.push(compare(
                &format!("{name} ({})", expected.describe),
                got,
                want,
                &|i, _| allowed.get(i).copied().unwrap_or(0.0),
            ));
        }
        verdict_of(comparisons)
    }

    /// Runs a model on the executor and on the reference and compares every output under
    /// the tolerance level of `op` (or the model level for multi-node graphs).
    pub fn check_against_reference(
        &self,
        model: &[u8],
        inputs: &[(String, Tensor)],
        op: &str,
        target: &Target,
        notices: &mut Vec<String>,
    ) -> Outcome {
        self.compare_with_reference(model, inputs, op, target, notices, Zeros::Unsigned)
    }

    /// [`Suite::check_against_reference`], comparing the sign of zeros where `zeros` says.
    fn compare_with_reference(
        &self,
        model: &[u8],
        inputs: &[(String, Tensor)],
        op: &str,
        target: &Target,
        notices: &mut Vec<String>,
        zeros: Zeros,
    ) -> Outcome {
        let reference = match self.reference_net(model) {
            Ok(n) => n,
            Err(e) => {
                return Outcome::Fail {
                    message: format!("the reference cannot build the case: {e}"),
                    comparisons: Vec::new(),
                }
            }
        };
        let net = match self.executor_net(model, target, notices) {
            Ok(n) => n,
            Err(outcome) => return outcome,
        };
        // On a half-precision target the executor stores inputs and weights in f16; the
        // reference sees the same rounded values, so only computation error is measured.
        let reference_inputs: Vec<(String, Tensor)> = inputs
            .iter()
            .map(|(n, t)| {
                (
                    n.clone(),
                    if self.stores_f16(target) {
                        round_through_f16(t)
                    } else {
                        t.clone()
                    },
                )
            })
            .collect();
        let reference = if self.stores_f16(target) {
            rounded_reference(&reference).unwrap_or(reference)
        } else {
            reference
        };
        let expected = match reference.forward(reference_inputs.clone()) {
            Ok(o) => o,
            Err(e) => {
                return Outcome::Fail {
                    message: format!("the reference failed: {e}"),
                    comparisons: Vec::new(),
                }
            }
        };
        let actual = match net.forward(inputs.to_vec()) {
            Ok(o) => o,
            Err(e) => {
                return Outcome::Fail {
                    message: format!("forward failed: {e}"),
                    comparisons: Vec::new(),
                }
            }
        };
        let graph = reference.graph();
        let single = graph.nodes.len() == 1;
        let level: &Level = match if single {
            self.tolerances.level_for(op, target)
        } else {
            self.tolerances.level("model")
        } {
            Some(c) => c.level,
            None => {
                return Outcome::Fail {
                    message: format!("no tolerance level for {op} in tolerances.toml"),
                    comparisons: Vec::new(),
                }
            }
        };
        let accumulation = if single {
            node_accumulation(graph, &reference_inputs)
        } else {
            None
        };
        let mut comparisons = Vec::new();
        for ((name, want), (_, got)) in expected.iter().zip(actual.iter()) {
            let allowed = match allowance(
                level,
                &self.spec(target),
                want,
                if single { accumulation.as_ref() } else { None },
            ) {
                Ok(a) => a,
                Err(e) => {
                    return Outcome::Fail {
                        message: e,
                        comparisons,
                    }
                }
            };
            comparisons.push(compare_zeros(
                name,
                got,
                &self.as_stored(target, want),
                &|i, _| allowed.get(i).copied().unwrap_or(0.0),
                zeros,
            ));
        }
        verdict_of(comparisons)
    }

    /// Runs a golden case and compares with the oracle's outputs: the allowance is the
    /// oracle's own level plus the executor's level against the exact result. Nodes the
    /// executor declines run on the reference; `coverage` receives where the nodes ran.
    pub fn check_golden(
        &self,
        case: &GoldenCase,
        target: &Target,
        notices: &mut Vec<String>,
        coverage: &mut Option<NodeCoverage>,
    ) -> Outcome {
        let fail = |message: String| Outcome::Fail {
            message,
            comparisons: Vec::new(),
        };
        let model = match std::fs::read(&case.model) {
            Ok(b) => b,
            Err(e) => return fail(format!("{}: {e}", case.model.display())),
        };
        let mut inputs = Vec::new();
        for (name, path) in &case.inputs {
            match read_npy(path) {
                Ok(t) => inputs.push((name.clone(), t)),
                Err(e) => return fail(e),
            }
        }
        let net = match self.executor_net_partial(&model, target, notices) {
            Ok((net, placed)) => {
                *coverage = Some(placed);
                net
            }
            Err(outcome) => return outcome,
        };
        let actual = match net.forward(inputs.clone()) {
            Ok(o) => o,
            Err(e) => return fail(format!("forward failed: {e}")),
        };
        let Some(oracle) = self.golden_manifest.tolerances.get(&case.tolerance) else {
            return fail(format!("unknown golden tolerance {}", case.tolerance));
        };
        let single_op = case.kind != "model" && case.op_types.len() == 1;
        let level = if single_op {
            self.tolerances.level_for(&case.op_types[0], target)
        } else {
            self.tolerances.level("model")
        };
        let Some(level) = level else {
            return fail(format!("no tolerance level for {:?}", case.op_types));
        };
        let accumulation = if single_op && net.graph().nodes.len() == 1 {
            node_accumulation(net.graph(), &inputs)
        } else {
            None
        };
        let storage_effect = match self.f16_storage_effect(&model, &inputs, target) {
            Ok(e) => e,
            Err(e) => return fail(e),
        };
        let mut comparisons = Vec::new();
        for (name, path) in &case.outputs {
            let want = match read_npy(path) {
                Ok(t) => t,
                Err(e) => return fail(e),
            };
            let Some(got) = actual.get(name) else {
                return fail(format!("no output `{name}`"));
            };
            // The executor's own allowance needs accumulation figures; without them (a
            // multi-node model) the fixed model level applies.
            let executor_allowance = if self.executor.name() == "cpu" {
                vec![0.0; want.len()]
            } else {
                match allowance(
                    level.level,
                    &self.spec(target),
                    &want,
                    accumulation.as_ref(),
                ) {
                    Ok(a) => a,
                    Err(_) => allowance(
                        self.tolerances
                            .level("model")
                            .map(|c| c.level)
                            .unwrap_or(level.level),
                        &self.spec(target),
                        &want,
                        None,
                    )
                    .unwrap_or_else(|_| vec![0.0; want.len()]),
                }
            };
            let (abs, rel) = (oracle.abs, oracle.rel);
            let storage = storage_effect.get(name);
            comparisons.push(compare(
                name,
                got,
                &self.as_stored(target, &want),
                &|i, y| {
                    abs + rel * y.abs()
                        + executor_allowance.get(i).copied().unwrap_or(0.0)
                        + storage.and_then(|s| s.get(i)).copied().unwrap_or(0.0)
                },
            ));
        }
        verdict_of(comparisons)
    }

    /// An expected output as `target` can store it: on an f16-storage target an f32
    /// value beyond f16's range (±65504, rounding to nearest) is stored as ±inf, which is
    /// the f16 value nearest to it; every other value, and every other target, unchanged.
    /// Only the range changes here: the rounding of in-range values is the tolerance
    /// levels' business (their unit roundoff is f16's on such a target).
    pub fn as_stored(&self, target: &Target, expected: &Tensor) -> Tensor {
        let Some(values) = expected.as_f32().filter(|_| self.stores_f16(target)) else {
            return expected.clone();
        };
        let beyond = |x: f32| x.is_finite() && half::f16::from_f32(x).is_infinite();
        if !values.iter().any(|&x| beyond(x)) {
            return expected.clone();
        }
        Tensor::from_f32(
            expected.shape().clone(),
            values
                .iter()
                .map(|&x| {
                    if beyond(x) {
                        half::f16::from_f32(x).to_f32()
                    } else {
                        x
                    }
                })
                .collect(),
        )
        .unwrap_or_else(|_| expected.clone())
    }

    /// What storing in f16 alone does to a golden or node case's outputs, per element of
    /// each float output, as the reference computes it: |ref(x) − ref(f16(x))|, with the
    /// inputs and float initializers rounded through f16 as an f16-storage target stores
    /// them. Those cases' expected outputs are the oracle's for the unrounded values, so on
    /// such a target this is added to the allowance — the same thing the op and model trials
    /// do by handing the reference the rounded values, with the oracle kept as the expected
    /// output. Empty on any other target. An effect the reference cannot compute finitely
    /// (f16 overflow) allows nothing: such an element is held to the oracle as it is.
    pub fn f16_storage_effect(
        &self,
        model: &[u8],
        inputs: &[(String, Tensor)],
        target: &Target,
    ) -> Result<BTreeMap<String, Vec<f64>>, String> {
        if !self.stores_f16(target) {
            return Ok(BTreeMap::new());
        }
        let reference = self
            .reference_net(model)
            .map_err(|e| format!("the reference cannot build the case: {e}"))?;
        let exact = reference
            .forward(inputs.to_vec())
            .map_err(|e| format!("the reference failed: {e}"))?;
        let rounded_net = rounded_reference(&reference)
            .ok_or("the reference cannot build the case with f16-rounded initializers")?;
        let rounded_inputs: Vec<(String, Tensor)> = inputs
            .iter()
            .map(|(n, t)| (n.clone(), round_through_f16(t)))
            .collect();
        let rounded = rounded_net
            .forward(rounded_inputs)
            .map_err(|e| format!("the reference failed on f16-rounded inputs: {e}"))?;
        let mut effect = BTreeMap::new();
        for (name, a) in exact {
            let Some(b) = rounded.get(&name) else {
                continue;
            };
            if !a.dtype().is_float() || a.len() != b.len() {
                continue;
            }
            let diff = a
                .to_f64_vec()
                .iter()
                .zip(b.to_f64_vec())
                .map(|(x, y)| {
                    let d = (x - y).abs();
                    if d.is_finite() {
                        d
                    } else {
                        0.0
                    }
                })
                .collect();
            effect.insert(name, diff);
        }
        Ok(effect)
    }

    /// The registry the suite builds executor nets from (reference + the executor).
    pub fn registry(&self) -> &ExecutorRegistry {
        &self.registry
    }
}

/// Where `net`'s nodes ran, against the executor and target under test.
fn node_coverage(net: &Net, executor: &str, target: &Target) -> NodeCoverage {
    let nodes = &net.placement().nodes;
    let declined: Vec<DeclinedNode> = nodes
        .iter()
        .filter(|n| n.executor != executor || n.target != *target)
        .map(|n| DeclinedNode {
            node: n.name.clone(),
            op: n.op.clone(),
            placed_on: format!("{}/{}", n.executor, n.target),
            reason: n
                .reason
                .clone()
                .unwrap_or_else(|| "no reason given".to_string()),
        })
        .collect();
    NodeCoverage {
        on_executor: nodes.len() - declined.len(),
        nodes: nodes.len(),
        declined,
    }
}

/// A pass whose net ran partly on the reference is a partial, never a pass; a failure of
/// such a net says where its nodes ran, since the cause may be at a partition boundary.
/// Every other verdict (an expected failure that passed partially included: strict
/// expectations still apply) is kept.
fn partial_verdict(verdict: Verdict, coverage: Option<&NodeCoverage>, executor: &str) -> Verdict {
    let Some(coverage) = coverage.filter(|c| c.is_partial()) else {
        return verdict;
    };
    match verdict {
        Verdict::Pass => Verdict::Partial {
            on_executor: coverage.on_executor,
            nodes: coverage.nodes,
        },
        Verdict::Fail { message } => Verdict::Fail {
            message: format!(
                "{message}\n(partial placement: {}; declined {})",
                coverage.describe(executor),
                coverage.declined_ops()
            ),
        },
        other => other,
    }
}

pub(crate) fn verdict_of(comparisons: Vec<Comparison>) -> Outcome {
    let failures: Vec<String> = comparisons
        .iter()
        .filter(|c| !c.passed())
        .map(|c| c.describe())
        .collect();
    if failures.is_empty() {
        Outcome::Pass { comparisons }
    } else {
        Outcome::Fail {
            message: failures.join("\n"),
            comparisons,
        }
    }
}

/// Accumulation figures for the single node of `graph`.
pub(crate) fn node_accumulation(
    graph: &concord::Graph,
    inputs: &[(String, Tensor)],
) -> Option<concord_cpu::Accumulation> {
    let node = graph.nodes.first()?;
    let operands: Vec<Option<&Tensor>> = node
        .inputs
        .iter()
        .map(|i| {
            i.as_ref().and_then(|name| {
                inputs
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, t)| t)
                    .or_else(|| graph.initializers.get(name))
            })
        })
        .collect();
    concord_cpu::accumulation(&node.op, &operands)
        .ok()
        .flatten()
}

/// The same values rounded to f16 and back (f32 tensors only).
pub fn round_through_f16(t: &Tensor) -> Tensor {
    match t.as_f32() {
        Some(v) => Tensor::from_f32(
            t.shape().clone(),
            v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect(),
        )
        .unwrap_or_else(|_| t.clone()),
        None => t.clone(),
    }
}

/// The reference net with its float initializers rounded through f16, as an f16-storage
/// target stores them. Resize's roi and scales are left alone: they place the samples
/// rather than hold data (ONNX types scales as float whatever the data's type), and an
/// executor reads them as parameters; rounding 1.6 to f16's 1.5996 would change the
/// output's size.
fn rounded_reference(net: &Net) -> Option<Net> {
    let mut graph = net.graph().clone();
    let parameters: HashSet<String> = graph
        .nodes
        .iter()
        .filter(|n| matches!(n.op, concord::Op::Resize(_)))
        .flat_map(|n| n.inputs.iter().skip(1).take(2).flatten().cloned())
        .collect();
    for (name, t) in graph.initializers.iter_mut() {
        if t.dtype() == DType::F32 && !parameters.contains(name) {
            *t = round_through_f16(t);
        }
    }
    NetBuilder::from_graph(graph)
        .registry(ExecutorRegistry::reference_only())
        .overrides(Overrides::default())
        .build()
        .ok()
}

/// Why an unavailable executor must fail the run here, if it must. `needs` is the
/// capability the target's spec declares: naming the executor in `CONCORD_REQUIRE`
/// requires its targets that need none; a target that needs one (fp16) is required only
/// when named itself, since a device without fp16 is not a broken installation. The list
/// is read by [`concord::parse_require`] against `registry`, as a net's build reads it; a
/// name it does not know fails the run rather than loosening the gate.
pub fn required_here(
    executor: &str,
    target: &Target,
    needs: Capability,
    registry: &ExecutorRegistry,
    unavailable_in_ci: Option<&str>,
) -> Option<String> {
    if let Ok(list) = std::env::var("CONCORD_REQUIRE") {
        let requirements = match concord::parse_require(&list, registry) {
            Ok(r) => r,
            Err(e) => return Some(e.to_string()),
        };
        let named = requirements.iter().any(|r| {
            r.target.as_ref() == Some(target)
                || (r.backend.as_ref().is_some_and(|b| b.name() == executor)
                    && needs == Capability::None)
        });
        if named {
            return Some(format!("CONCORD_REQUIRE={list} names it"));
        }
    }
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false" && v != "0");
    if ci && needs == Capability::None && unavailable_in_ci.is_none() {
        return Some("CI is set".to_string());
    }
    None
}
