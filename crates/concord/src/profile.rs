//! Per-node and per-transfer timing of a net's forwards. The first forward after a reset is
//! the warm-up: reported on its own and kept out of the figures.

use concord_core::ProfileSink;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// Timing over the forwards since the last reset.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Profile {
    /// False when the net was built without profiling; every figure is then empty.
    pub enabled: bool,
    /// Forwards counted in `entries` (the warm-up excluded).
    pub forwards: u64,
    /// Total time of the warm-up forward's entries, in microseconds.
    pub warmup_us: Option<f64>,
    /// One entry per node and per transferred value, slowest first.
    pub entries: Vec<ProfileEntry>,
}

/// Time spent in one node or one transfer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfileEntry {
    /// "node" or "transfer".
    pub kind: &'static str,
    pub name: String,
    /// Op type for nodes, empty for transfers.
    pub op: String,
    /// Executor and target the planner chose ("cpu/cpu").
    pub placement: String,
    /// The executor(s) that reported running the node; empty when the executor did not say.
    pub ran_on: String,
    pub calls: u64,
    pub total_us: f64,
    pub mean_us: f64,
    /// Bytes per call (transfers only).
    pub bytes: u64,
    /// The node this one was fused into (an activation or BatchNormalization folded into
    /// the Conv before it, a squeeze-excite block's convs into the pool before them): its
    /// work is in that node's time, so its own is zero.
    pub fused_into: Option<String>,
}

/// Collects one forward's timings; merged into the net's profile when the forward ends.
#[derive(Debug, Default)]
pub(crate) struct ForwardRecorder {
    nodes: Mutex<Vec<(String, String, Duration)>>,
    transfers: Mutex<Vec<(String, u64, Duration)>>,
    /// (fused node, the node it ran inside).
    fused: Mutex<Vec<(String, String)>>,
}

impl ProfileSink for ForwardRecorder {
    fn record(&self, node: &str, elapsed: Duration) {
        if let Ok(mut v) = self.nodes.lock() {
            v.push((node.to_string(), String::new(), elapsed));
        }
    }

    fn record_on(&self, node: &str, executor: &str, elapsed: Duration) {
        if let Ok(mut v) = self.nodes.lock() {
            v.push((node.to_string(), executor.to_string(), elapsed));
        }
    }

    fn record_fused(&self, node: &str, into: &str, executor: &str) {
        self.record_on(node, executor, Duration::ZERO);
        if let Ok(mut v) = self.fused.lock() {
            v.push((node.to_string(), into.to_string()));
        }
    }

    fn record_transfer(&self, value: &str, bytes: u64, elapsed: Duration) {
        if let Ok(mut v) = self.transfers.lock() {
            v.push((value.to_string(), bytes, elapsed));
        }
    }
}

#[derive(Debug, Default)]
struct Accumulated {
    warmup_us: Option<f64>,
    forwards: u64,
    // (kind, name) -> (calls, total, bytes)
    totals: BTreeMap<(&'static str, String), (u64, Duration, u64)>,
    /// Node name -> executors that said they ran it.
    ran_on: BTreeMap<String, std::collections::BTreeSet<String>>,
    /// Node name -> the node it was fused into.
    fused_into: BTreeMap<String, String>,
}

/// The net's profile state, shared by concurrent forwards behind a mutex that is taken
/// once per forward, after the work.
#[derive(Debug, Default)]
pub(crate) struct Profiler {
    state: Mutex<Accumulated>,
    /// Node name -> (op, placement), filled at build.
    pub labels: BTreeMap<String, (String, String)>,
}

impl Profiler {
    pub fn new(labels: BTreeMap<String, (String, String)>) -> Self {
        Profiler {
            state: Mutex::new(Accumulated::default()),
            labels,
        }
    }

    pub fn merge(&self, recorder: ForwardRecorder) {
        let nodes = recorder.nodes.into_inner().unwrap_or_default();
        let transfers = recorder.transfers.into_inner().unwrap_or_default();
        let fused = recorder.fused.into_inner().unwrap_or_default();
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.fused_into.extend(fused);
        for (name, executor, _) in &nodes {
            if !executor.is_empty() {
                state
                    .ran_on
                    .entry(name.clone())
                    .or_default()
                    .insert(executor.clone());
            }
        }
        if state.warmup_us.is_none() {
            let total: Duration = nodes
                .iter()
                .map(|(_, _, d)| *d)
                .chain(transfers.iter().map(|(_, _, d)| *d))
                .sum();
            state.warmup_us = Some(total.as_secs_f64() * 1e6);
            return;
        }
        state.forwards += 1;
        for (name, _, d) in nodes {
            let e = state
                .totals
                .entry(("node", name))
                .or_insert((0, Duration::ZERO, 0));
            e.0 += 1;
            e.1 += d;
        }
        for (name, bytes, d) in transfers {
            let e = state
                .totals
                .entry(("transfer", name))
                .or_insert((0, Duration::ZERO, 0));
            e.0 += 1;
            e.1 += d;
            e.2 = bytes;
        }
    }

    fn ran_on_label(&self, state: &Accumulated, kind: &str, name: &str) -> String {
        if kind != "node" {
            return String::new();
        }
        state
            .ran_on
            .get(name)
            .map(|set| set.iter().cloned().collect::<Vec<_>>().join(","))
            .unwrap_or_default()
    }

    pub fn reset(&self) {
        if let Ok(mut state) = self.state.lock() {
            *state = Accumulated::default();
        }
    }

    pub fn snapshot(&self) -> Profile {
        let Ok(state) = self.state.lock() else {
            return Profile {
                enabled: true,
                ..Profile::default()
            };
        };
        let mut entries: Vec<ProfileEntry> = state
            .totals
            .iter()
            .map(|((kind, name), (calls, total, bytes))| {
                // Labels are the nodes'; a transfer of a value that shares a node's name
                // (exporters may name a node after its output) has neither.
                let (op, placement) = match *kind {
                    "node" => self.labels.get(name).cloned().unwrap_or_default(),
                    _ => Default::default(),
                };
                let total_us = total.as_secs_f64() * 1e6;
                ProfileEntry {
                    kind,
                    name: name.clone(),
                    op,
                    placement,
                    ran_on: self.ran_on_label(&state, kind, name),
                    calls: *calls,
                    total_us,
                    mean_us: if *calls > 0 {
                        total_us / *calls as f64
                    } else {
                        0.0
                    },
                    bytes: *bytes,
                    fused_into: if *kind == "node" {
                        state.fused_into.get(name).cloned()
                    } else {
                        None
                    },
                }
            })
            .collect();
        entries.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
        Profile {
            enabled: true,
            forwards: state.forwards,
            warmup_us: state.warmup_us,
            entries,
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.enabled {
            return write!(
                f,
                "profiling is off: build the net with NetBuilder::profiling(true)"
            );
        }
        let total: f64 = self.entries.iter().map(|e| e.total_us).sum();
        writeln!(
            f,
            "{} forwards profiled (warm-up {} excluded); mean {:.3} ms per forward",
            self.forwards,
            self.warmup_us
                .map(|w| format!("{:.3} ms", w / 1e3))
                .unwrap_or_else(|| "not run".into()),
            if self.forwards > 0 {
                total / self.forwards as f64 / 1e3
            } else {
                0.0
            }
        )?;
        let name_w = self
            .entries
            .iter()
            .map(|e| e.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            f,
            "{:8}  {:name_w$}  {:18}  {:12}  {:>10}  {:>6}",
            "kind", "name", "op", "placement", "mean µs", "share"
        )?;
        for e in &self.entries {
            if let Some(into) = &e.fused_into {
                // Its time is inside `into`'s: a zero here would read as "free".
                writeln!(
                    f,
                    "{:8}  {:name_w$}  {:18}  {:12}  fused into {into}",
                    e.kind, e.name, e.op, e.placement
                )?;
                continue;
            }
            let share = if total > 0.0 {
                100.0 * e.total_us / total
            } else {
                0.0
            };
            writeln!(
                f,
                "{:8}  {:name_w$}  {:18}  {:12}  {:>10.1}  {:>5.1}%",
                e.kind, e.name, e.op, e.placement, e.mean_us, share
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One forward on a device that fused `relu0` into `conv0`: the conv's time, the relu
    /// named as fused into it.
    fn forward(profiler: &Profiler, conv_us: u64) {
        let recorder = ForwardRecorder::default();
        recorder.record_on("conv0", "dev", Duration::from_micros(conv_us));
        recorder.record_fused("relu0", "conv0", "dev");
        profiler.merge(recorder);
    }

    /// A graph output that has its producing node's name: its download is a transfer
    /// without the node's op and placement, and the node keeps them.
    #[test]
    fn a_transfer_named_like_a_node_has_no_op() {
        let labels = BTreeMap::from([(
            "y".to_string(),
            ("Transpose".to_string(), "dev/dev".to_string()),
        )]);
        let profiler = Profiler::new(labels);
        for _ in 0..2 {
            let recorder = ForwardRecorder::default();
            recorder.record_on("y", "dev", Duration::from_micros(5));
            recorder.record_transfer("y", 64, Duration::from_micros(1));
            profiler.merge(recorder);
        }
        let profile = profiler.snapshot();
        let entry = |kind: &str| profile.entries.iter().find(|e| e.kind == kind);
        let transfer = entry("transfer").map(|e| (e.op.as_str(), e.placement.as_str()));
        assert_eq!(transfer, Some(("", "")), "{profile}");
        let node = entry("node").map(|e| (e.op.as_str(), e.placement.as_str()));
        assert_eq!(node, Some(("Transpose", "dev/dev")), "{profile}");
    }

    #[test]
    fn a_fused_node_says_which_node_it_ran_in() {
        let labels = BTreeMap::from([
            (
                "conv0".to_string(),
                ("Conv".to_string(), "dev/dev".to_string()),
            ),
            (
                "relu0".to_string(),
                ("Relu".to_string(), "dev/dev".to_string()),
            ),
        ]);
        let profiler = Profiler::new(labels);
        forward(&profiler, 40); // the warm-up
        forward(&profiler, 10);
        forward(&profiler, 30);
        let profile = profiler.snapshot();
        let relu = profile.entries.iter().find(|e| e.name == "relu0");
        assert_eq!(relu.and_then(|e| e.fused_into.as_deref()), Some("conv0"));
        assert_eq!(relu.map(|e| e.ran_on.as_str()), Some("dev"));
        let conv = profile.entries.iter().find(|e| e.name == "conv0");
        assert_eq!(conv.and_then(|e| e.fused_into.as_deref()), None);
        let text = profile.to_string();
        let relu_line = text.lines().find(|l| l.contains("relu0")).unwrap_or("");
        assert!(relu_line.ends_with("  fused into conv0"), "{text}");
        assert!(!relu_line.contains("0.0"), "{text}");
        let conv_line = text.lines().find(|l| l.contains("conv0 ")).unwrap_or("");
        assert!(conv_line.contains("20.0  100.0%"), "{text}");
    }
}
