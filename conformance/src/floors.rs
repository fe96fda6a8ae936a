//! Floors that ratchet: per target, how many trials of each category an unfiltered run
//! executed, the node coverage it reached, and the list of the executed trials' names, as
//! `cargo xtask conformance --record-floors` (`concord conform --record-floors`) recorded
//! them. A later run that executes fewer trials of a category fails, naming the trials that
//! went missing from the recorded list; a trial the list does not have is reported as new,
//! with the command that records it.
//!
//! The floors live in the executor's expectations file, in a block the recorder rewrites
//! (everything from [`BLOCK_MARKER`] to the end of the file); the trial list lives next to
//! it, in `<executor>.trials` (one name per line). An executor that is not available where
//! the floors are recorded (CUDA without a GPU) gets floors derived from what its
//! `supports()` takes ([`derive`]), so that on a machine where it is available, declining
//! everything fails.

use crate::outcome::Record;
use crate::suite::{Case, Job, Suite};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The line that opens the recorded block of an expectations file; the recorder replaces
/// everything from it to the end of the file.
pub const BLOCK_MARKER: &str =
    "# --- Floors recorded by `cargo xtask conformance --record-floors`; do not edit by hand. ---";

/// The command that records the floors, for messages.
pub const RECORD_COMMAND: &str = "cargo xtask conformance --record-floors";

/// How many missing or new trial names a message lists before it says "and N more".
const NAMES_SHOWN: usize = 40;

/// The recorded floors of one target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetFloor {
    /// The `[floors.<target>]` table's name.
    pub target: String,
    /// When set, the floors hold only on a device whose name contains this (a run on
    /// another device says that they were not checked); unset: on every device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// When the floors were not measured by a run: how they were derived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<String>,
    /// Executed trials per category (op, prop, golden, model, node, fallback, concurrency).
    pub executed: BTreeMap<String, usize>,
    /// Nodes on the executor over all nodes of the executed golden, model and node trials,
    /// rounded down to three decimals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_coverage: Option<f64>,
}

/// A `[floors.<target>]` table as the expectations file spells it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTargetFloor {
    #[serde(default)]
    device: Option<String>,
    #[serde(default)]
    derived: Option<String>,
    executed: BTreeMap<String, usize>,
    #[serde(default)]
    node_coverage: Option<f64>,
}

impl RawTargetFloor {
    pub(crate) fn node_coverage(&self) -> Option<f64> {
        self.node_coverage
    }

    pub(crate) fn named(self, target: &str) -> TargetFloor {
        TargetFloor {
            target: target.to_string(),
            device: self.device,
            derived: self.derived,
            executed: self.executed,
            node_coverage: self.node_coverage,
        }
    }
}

/// What the recorder writes for one executor.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recorded {
    pub targets: Vec<TargetFloor>,
    /// Every executed (or, derived, offered) trial's name, sorted.
    pub trials: Vec<String>,
}

/// The trial list beside an expectations file: `opencl.toml` → `opencl.trials`.
pub fn trial_list_path(expectations: &Path) -> PathBuf {
    expectations.with_extension("trials")
}

/// Reads a trial list (one name per line; `#` lines and blank lines ignored).
pub fn parse_trial_list(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Whether a category's trials are absent from this run because their data is: the node
/// tests without their generated data run as one `node/data-missing` trial (a failure
/// under CI, a visible skip elsewhere), so their floor is not applied.
fn data_missing(records: &[&Record], category: &str) -> bool {
    category == "node"
        && records
            .iter()
            .any(|r| r.category == "node" && r.name.ends_with("/node/data-missing"))
}

/// The run-level failures the recorded floors find in `records` (this executor's, on
/// `device`), and the notes a run prints without failing (new trials, floors not checked on
/// this device). A target whose only trial is `unavailable/probe` is not checked: that
/// trial already says why, and fails where CI or `CONCORD_REQUIRE` demands the target.
pub fn check(
    executor: &str,
    device: &str,
    floors: &[TargetFloor],
    trials: &[String],
    records: &[Record],
    source: &str,
) -> (Vec<String>, Vec<String>) {
    let mut failures = Vec::new();
    let mut notes = Vec::new();
    for floor in floors {
        let target = floor.target.as_str();
        let own: Vec<&Record> = records
            .iter()
            .filter(|r| r.executor == executor && r.device == device && r.target == target)
            .collect();
        if own.is_empty() || own.iter().all(|r| r.category == "unavailable") {
            continue;
        }
        if let Some(wanted) = &floor.device {
            if !device.contains(wanted.as_str()) {
                notes.push(format!(
                    "{executor}/{target}: the floors in {source} were recorded on a device \
                     named `{wanted}`, and this one is `{device}`: not checked here"
                ));
                continue;
            }
        }
        let exempt: BTreeSet<&str> = floor
            .executed
            .keys()
            .map(String::as_str)
            .filter(|c| data_missing(&own, c))
            .collect();
        for category in &exempt {
            notes.push(format!(
                "{executor}/{target}: the {category} data is missing, so the recorded {category} floor is not checked"
            ));
        }
        let executed: BTreeSet<&str> = own
            .iter()
            .filter(|r| r.verdict.executed())
            .map(|r| r.name.as_str())
            .collect();
        let prefix = format!("{executor}/{target}/");
        let in_category = |name: &str, category: &str| {
            name.strip_prefix(&prefix)
                .is_some_and(|rest| rest.split('/').next() == Some(category))
        };
        let recorded: Vec<&str> = trials
            .iter()
            .map(String::as_str)
            .filter(|t| t.starts_with(&prefix))
            .filter(|t| !exempt.iter().any(|c| in_category(t, c)))
            .collect();
        let missing: Vec<&str> = recorded
            .iter()
            .copied()
            .filter(|t| !executed.contains(t))
            .collect();
        for (category, &floor_count) in &floor.executed {
            if exempt.contains(category.as_str()) {
                continue;
            }
            let count = executed.iter().filter(|t| in_category(t, category)).count();
            if count < floor_count {
                let gone: Vec<&str> = missing
                    .iter()
                    .copied()
                    .filter(|t| in_category(t, category))
                    .collect();
                failures.push(format!(
                    "{executor}/{target}: {count} {category} trials executed, below the \
                     recorded floor of {floor_count} in {source}{}; missing from the recorded \
                     list: {}",
                    floor
                        .derived
                        .as_deref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default(),
                    name_list(&gone)
                ));
            }
        }
        // A recorded trial that no longer executes fails even when new trials make up the
        // count: the ratchet holds names, not only numbers.
        let uncounted: Vec<&str> = missing
            .iter()
            .copied()
            .filter(|t| {
                floor
                    .executed
                    .iter()
                    .all(|(c, &n)| !in_category(t, c) || executed_in(&executed, &prefix, c) >= n)
            })
            .collect();
        if !uncounted.is_empty() {
            failures.push(format!(
                "{executor}/{target}: {} recorded trial(s) did not execute (skipped, declined \
                 or gone) though the category counts hold: {} (fix the cause, or re-record \
                 with `{RECORD_COMMAND}` in the same change, with a reason)",
                uncounted.len(),
                name_list(&uncounted)
            ));
        }
        let known: BTreeSet<&str> = trials.iter().map(String::as_str).collect();
        let new: Vec<&str> = executed
            .iter()
            .copied()
            .filter(|t| !known.contains(t))
            .collect();
        if !new.is_empty() {
            notes.push(format!(
                "{executor}/{target}: {} new executed trial(s) not in the recorded list: {} \
                 (re-record with `{RECORD_COMMAND}` to hold them too)",
                new.len(),
                name_list(&new)
            ));
        }
        if let Some(min) = floor.node_coverage {
            let mut count = crate::report::NodeCount::default();
            for r in &own {
                count.add(r);
            }
            if let Some(f) = count.fraction() {
                if f < min {
                    failures.push(format!(
                        "{executor}/{target}: node coverage {} on golden, model and node \
                         trials is below the recorded {min} in {source}: the executor runs \
                         less of the models than it did (fix the cause, or re-record with \
                         `{RECORD_COMMAND}` in the same change, with a reason)",
                        count.describe()
                    ));
                }
            }
        }
    }
    (failures, notes)
}

fn executed_in(executed: &BTreeSet<&str>, prefix: &str, category: &str) -> usize {
    executed
        .iter()
        .filter(|t| {
            t.strip_prefix(prefix)
                .is_some_and(|rest| rest.split('/').next() == Some(category))
        })
        .count()
}

/// "a, b, c and 12 more".
fn name_list(names: &[&str]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    let shown = names[..names.len().min(NAMES_SHOWN)].join(", ");
    if names.len() > NAMES_SHOWN {
        format!("{shown} and {} more", names.len() - NAMES_SHOWN)
    } else {
        shown
    }
}

/// The floors a run measured: per target that executed anything, its executed trials per
/// category and its node coverage (rounded down to three decimals), on `device`.
pub fn measured(executor: &str, device: &str, records: &[Record]) -> Recorded {
    let own: Vec<&Record> = records.iter().filter(|r| r.executor == executor).collect();
    let mut per_target: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in &own {
        per_target.entry(r.target.as_str()).or_default().push(r);
    }
    let mut out = Recorded::default();
    for (target, recs) in per_target {
        let executed: Vec<&&Record> = recs.iter().filter(|r| r.verdict.executed()).collect();
        if executed.is_empty() {
            continue;
        }
        let mut floor = TargetFloor {
            target: target.to_string(),
            device: device_family(device),
            ..TargetFloor::default()
        };
        for r in &executed {
            *floor.executed.entry(r.category.clone()).or_default() += 1;
            out.trials.push(r.name.clone());
        }
        let mut count = crate::report::NodeCount::default();
        for r in &recs {
            count.add(r);
        }
        floor.node_coverage = count.fraction().map(|f| (f * 1000.0).floor() / 1000.0);
        out.targets.push(floor);
    }
    out.trials.sort();
    out
}

/// The part of a device name the floors are held to: its first word ("pthread" of PoCL's
/// "pthread-skylake-avx512-…", "NVIDIA" of "NVIDIA H200"). What an executor takes depends
/// on the kind of device (a CPU device of PoCL, a GPU), not on the CPU model of the machine
/// that recorded it, so a CI runner with another CPU is still held to them.
fn device_family(device: &str) -> Option<String> {
    device
        .split(|c: char| c == '-' || c.is_whitespace())
        .find(|w| !w.is_empty())
        .map(str::to_string)
}

/// Floors for an executor that is not available here, derived from the trials it would be
/// offered on each of its targets: every op, golden, model and node trial whose nodes its
/// `supports()` takes (the suite decides those skips before running, from `supports()`
/// alone), both fallback scenarios when it takes a node of the scenario models, and every
/// concurrency scenario (they always execute). Property trials are left out: whether any
/// generated case is taken is known only by generating them.
pub fn derive(suite: &Suite) -> Recorded {
    let mut out = Recorded::default();
    // The scenario models as the planner sees them: shape-inferred and folded by a build.
    let takes_a_scenario_node = |target: &concord::Target| {
        crate::concurrency::models().iter().any(|m| {
            let Ok(net) = concord::NetBuilder::from_graph(m.graph.clone())
                .registry(concord::ExecutorRegistry::reference_only())
                .overrides(concord::Overrides::default())
                .build()
            else {
                return false;
            };
            let graph = net.graph();
            graph
                .nodes
                .iter()
                .any(|n| suite.executor.supports(graph, n, target) == concord::Support::Yes)
        })
    };
    for spec in suite.executor.targets() {
        let cases: Vec<Case> = suite.offered_cases(&spec.target);
        let mut floor = TargetFloor {
            target: spec.target.name().to_string(),
            derived: Some(
                "derived from the trials supports() takes, the executor being unavailable where \
                 they were recorded; prop trials not counted"
                    .to_string(),
            ),
            ..TargetFloor::default()
        };
        for case in cases {
            let offered = match &case.job {
                Job::Op(_) | Job::Golden(_) | Job::Node(_) => case.skip.is_none(),
                Job::Fallback(scenario) => {
                    case.skip.is_none()
                        && (*scenario == "notice_once" || takes_a_scenario_node(&spec.target))
                }
                Job::Concurrency(_) => case.skip.is_none(),
                Job::Prop(_) | Job::Unavailable(_) => false,
            };
            // The data-missing trial of the node category is no trial of a test.
            let data_missing = case.name.ends_with("/node/data-missing");
            if offered && !data_missing {
                *floor.executed.entry(case.category.to_string()).or_default() += 1;
                out.trials.push(case.name);
            }
        }
        out.targets.push(floor);
    }
    out.trials.sort();
    out
}

/// Records `suite`'s floors from `records` (an unfiltered run's) into its expectations
/// file and trial list, measured where the executor is available and derived from
/// `supports()` where it is not; returns a line saying what was written. The node-test
/// data must be present, or the node trials would go unrecorded.
pub fn record(suite: &Suite, records: &[Record]) -> Result<String, String> {
    let executor = suite.executor.name();
    if records
        .iter()
        .any(|r| r.executor == executor && r.name.ends_with("/node/data-missing"))
    {
        return Err(format!(
            "{executor}: the ONNX node-test data is missing, so the node trials cannot be \
             recorded: run `{}` first",
            crate::node_tests::PRODUCE_COMMAND
        ));
    }
    let (path, _) = suite
        .config
        .expectations
        .path_for(&suite.config.conformance_dir, executor);
    let available = matches!(
        &suite.availability,
        concord::Availability::Available { devices } if !devices.is_empty()
    );
    let (recorded, how) = if available {
        (
            measured(executor, &suite.device, records),
            format!(
                "Measured on `{}` by an unfiltered run (held on devices named `{}…`)",
                suite.device,
                device_family(&suite.device).unwrap_or_default()
            ),
        )
    } else {
        let why = match &suite.availability {
            concord::Availability::Unavailable { reason, .. } => reason.clone(),
            concord::Availability::Available { .. } => "the probe found no device".to_string(),
        };
        // The first clause says enough ("the CUDA driver (libcuda) was not found").
        let first = why.split(';').next().unwrap_or_default();
        let first = first.split(" searched").next().unwrap_or_default().trim();
        (
            derive(suite),
            format!(
                "Derived from supports(), not measured: {executor} was unavailable here\n\
                 # ({first})"
            ),
        )
    };
    write(&path, &recorded, &how)
        .map_err(|e| format!("{executor}: writing {}: {e}", path.display()))?;
    let per_target: Vec<String> = recorded
        .targets
        .iter()
        .map(|t| {
            let total: usize = t.executed.values().sum();
            let counts: Vec<String> = t.executed.iter().map(|(c, n)| format!("{c} {n}")).collect();
            format!(
                "{}: {total} ({}{})",
                t.target,
                counts.join(", "),
                t.node_coverage
                    .map(|c| format!("; node coverage {c}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    Ok(format!(
        "{executor} ({}) -> {}: {}",
        if available {
            "measured"
        } else {
            "derived from supports()"
        },
        path.display(),
        per_target.join("; ")
    ))
}

/// Writes `recorded` into the expectations file at `path` (replacing its recorded block,
/// or appending one) and the trial list beside it. `how` says how they were recorded (the
/// device, or that they were derived), for the block's header.
pub fn write(path: &Path, recorded: &Recorded, how: &str) -> std::io::Result<()> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let kept = match text.find(BLOCK_MARKER) {
        Some(at) => text[..at].trim_end().to_string(),
        None => text.trim_end().to_string(),
    };
    let mut out = kept;
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(BLOCK_MARKER);
    out.push('\n');
    let _ = writeln!(
        out,
        "# {how}.\n# Executed trials per category and target; a run that executes fewer \
         fails and names\n# the trials missing from {} (the recorded list).",
        trial_list_path(path)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    for floor in &recorded.targets {
        let _ = writeln!(out, "[floors.{}]", toml_key(&floor.target));
        if let Some(d) = &floor.device {
            let _ = writeln!(out, "device = {}", toml_string(d));
        }
        if let Some(d) = &floor.derived {
            let _ = writeln!(out, "derived = {}", toml_string(d));
        }
        let counts: Vec<String> = floor
            .executed
            .iter()
            .map(|(c, n)| format!("{} = {n}", toml_key(c)))
            .collect();
        let _ = writeln!(out, "executed = {{ {} }}", counts.join(", "));
        if let Some(c) = floor.node_coverage {
            let _ = writeln!(out, "node_coverage = {c}");
        }
    }
    std::fs::write(path, out)?;
    let mut list = format!(
        "# The trials recorded by `{RECORD_COMMAND}`; a run in which one of them does\n\
         # not execute fails and names it.\n# {how}.\n"
    );
    for t in &recorded.trials {
        list.push_str(t);
        list.push('\n');
    }
    std::fs::write(trial_list_path(path), list)
}

/// A bare key when it is one, else a quoted one.
fn toml_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        key.to_string()
    } else {
        toml_string(key)
    }
}

fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Verdict;

    fn record(name: &str, verdict: Verdict) -> Record {
        let parts: Vec<&str> = name.split('/').collect();
        Record {
            name: name.to_string(),
            executor: parts[0].to_string(),
            target: parts[1].to_string(),
            device: "dev".to_string(),
            category: parts[2].to_string(),
            subject: String::new(),
            verdict,
            comparisons: Vec::new(),
            notices: Vec::new(),
            coverage: None,
            duration_ms: 0.0,
        }
    }

    fn skip() -> Verdict {
        Verdict::Skip {
            reason: "unsupported: declines it".into(),
        }
    }

    fn full_run() -> Vec<Record> {
        vec![
            record("x/t/op/Relu/a", Verdict::Pass),
            record("x/t/op/Relu/b", Verdict::Pass),
            record("x/t/golden/conv", Verdict::Pass),
            record("x/t/node/test_relu", Verdict::Pass),
        ]
    }

    #[test]
    fn a_run_matching_its_recording_passes_and_a_shrunk_one_names_what_went_missing() {
        let recorded = measured("x", "dev", &full_run());
        assert_eq!(recorded.targets.len(), 1);
        assert_eq!(recorded.targets[0].executed.get("op"), Some(&2));
        assert_eq!(recorded.trials.len(), 4);
        let (failures, notes) = check(
            "x",
            "dev",
            &recorded.targets,
            &recorded.trials,
            &full_run(),
            "x.toml",
        );
        assert!(failures.is_empty(), "{failures:?}");
        assert!(notes.is_empty(), "{notes:?}");

        let mut shrunk = full_run();
        shrunk[1] = record("x/t/op/Relu/b", skip());
        let (failures, _) = check(
            "x",
            "dev",
            &recorded.targets,
            &recorded.trials,
            &shrunk,
            "x.toml",
        );
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("1 op trials executed, below the recorded floor of 2"));
        assert!(failures[0].contains("x/t/op/Relu/b"), "{}", failures[0]);
    }

    #[test]
    fn a_swapped_trial_fails_by_name_and_a_new_one_is_a_note() {
        let recorded = measured("x", "dev", &full_run());
        let mut swapped = full_run();
        swapped[1] = record("x/t/op/Relu/b", skip());
        swapped.push(record("x/t/op/Relu/c", Verdict::Pass));
        let (failures, notes) = check(
            "x",
            "dev",
            &recorded.targets,
            &recorded.trials,
            &swapped,
            "x.toml",
        );
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("x/t/op/Relu/b") && failures[0].contains("did not execute"));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("x/t/op/Relu/c") && notes[0].contains(RECORD_COMMAND));
    }

    #[test]
    fn missing_node_data_exempts_the_node_floor_only() {
        let recorded = measured("x", "dev", &full_run());
        let mut no_data = full_run();
        no_data[3] = record("x/t/node/data-missing", skip());
        let (failures, notes) = check(
            "x",
            "dev",
            &recorded.targets,
            &recorded.trials,
            &no_data,
            "x.toml",
        );
        assert!(failures.is_empty(), "{failures:?}");
        assert!(
            notes.iter().any(|n| n.contains("node data is missing")),
            "{notes:?}"
        );
        no_data[0] = record("x/t/op/Relu/a", skip());
        let (failures, _) = check(
            "x",
            "dev",
            &recorded.targets,
            &recorded.trials,
            &no_data,
            "x.toml",
        );
        assert_eq!(failures.len(), 1, "{failures:?}");
    }

    #[test]
    fn an_executor_declining_everything_fails_its_floor() {
        let recorded = measured("x", "dev", &full_run());
        let declined: Vec<Record> = full_run()
            .into_iter()
            .map(|r| record(&r.name, skip()))
            .collect();
        let (failures, _) = check(
            "x",
            "dev",
            &recorded.targets,
            &recorded.trials,
            &declined,
            "x.toml",
        );
        assert_eq!(failures.len(), 3, "one per category: {failures:?}");
        // An unavailable target is left to its own trial.
        let unavailable = vec![record("x/t/unavailable/probe", skip())];
        let (failures, _) = check(
            "x",
            "dev",
            &recorded.targets,
            &recorded.trials,
            &unavailable,
            "x.toml",
        );
        assert!(failures.is_empty());
    }

    #[test]
    fn floors_recorded_on_another_device_are_not_checked_and_say_so() {
        let recorded = measured("x", "dev", &full_run());
        let mut elsewhere = full_run();
        for r in &mut elsewhere {
            r.device = "gpu".into();
        }
        elsewhere.pop();
        let (failures, notes) = check(
            "x",
            "gpu",
            &recorded.targets,
            &recorded.trials,
            &elsewhere,
            "x.toml",
        );
        assert!(failures.is_empty());
        assert!(notes[0].contains("not checked here"), "{notes:?}");
    }

    #[test]
    fn floors_hold_on_the_recording_devices_family() {
        assert_eq!(
            device_family("pthread-skylake-avx512-Intel(R) Xeon(R) Processor").as_deref(),
            Some("pthread")
        );
        assert_eq!(device_family("NVIDIA H200").as_deref(), Some("NVIDIA"));
        assert_eq!(device_family(""), None);
    }

    #[test]
    fn the_written_block_reads_back_and_replaces_the_old_one() {
        let dir = std::env::temp_dir().join(format!("concord-floors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("x.toml");
        std::fs::write(&path, "# hand-written\nunavailable_in_ci = \"why\"\n").expect("write");
        let recorded = measured("x", "dev", &full_run());
        write(&path, &recorded, "recorded on dev").expect("write");
        write(&path, &recorded, "recorded on dev").expect("write again");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.matches(BLOCK_MARKER).count(), 1, "{text}");
        assert!(text.starts_with("# hand-written\n"));
        let e = crate::expectations::Expectations::parse(
            &text,
            path.clone(),
            &[concord::Target::new("t")],
        )
        .expect("parses");
        assert_eq!(e.floors, recorded.targets);
        assert_eq!(e.trials, recorded.trials);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
