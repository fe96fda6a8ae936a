//! What the planner decided, as data: the [`Placement`] report of a built net, the
//! [`Notice`]s that say every fallback out loud, and the [`Note`]s that say what a target
//! running as asked costs here. The planner lives in the facade; these
//! types live here so executors, the conformance suite and reports share them.

use crate::target::{Backend, Target};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What to do when the requested backend or target cannot run (part of) the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FallbackPolicy {
    /// Building fails, listing every reason.
    Deny,
    /// Fall back, and say so: one warning per build (tracing, or stderr without a
    /// subscriber).
    #[default]
    Warn,
    /// Fall back quietly; the placement report still records it.
    Allow,
}

/// Why something did not run where it was asked to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FallbackCause {
    /// The backend's cargo feature is off in this build.
    NotCompiled,
    /// The backend's runtime library (libOpenCL, libcuda, libnvrtc…) was not found.
    LibraryMissing,
    /// The library loaded but reported no platform or device.
    NoDevice,
    /// The target is not one this backend serves.
    InvalidTarget,
    /// The device cannot run the half-precision target.
    Fp16Unsupported,
    /// The executor does not support this node on this target.
    NodeUnsupported,
}

/// One fallback decision, as said to the user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    pub cause: FallbackCause,
    /// "opencl/opencl-fp16".
    pub asked: String,
    /// "opencl/opencl" or "cpu/cpu".
    pub chosen: String,
    pub reason: String,
    /// How many nodes this decision moved.
    pub nodes: usize,
}

/// Something the caller should know about a target that runs as asked: not a fallback, so
/// it never refuses a build, but said at build time like one (a half-precision target on a
/// device that stores f16 but has no half arithmetic, and so runs slower than f32).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// "opencl/opencl-fp16".
    pub on: String,
    pub text: String,
}

/// Where one node runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePlacement {
    pub name: String,
    pub op: String,
    pub executor: String,
    pub target: Target,
    /// Why it is not where it was asked to be; None when it is.
    pub reason: Option<String>,
}

/// A maximal run of consecutive nodes on one executor and target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionInfo {
    pub index: usize,
    pub executor: String,
    pub target: Target,
    pub nodes: usize,
}

/// One value crossing between host memory and a device partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub value: String,
    /// "host" or "<executor>:<target>".
    pub from: String,
    pub to: String,
    /// Bytes per forward; None when the value's shape is not known before run time.
    pub bytes: Option<u64>,
    /// The value's element type and shape as the model declares them ("f32[N, 3, 32,
    /// 32]"), so a transfer whose size is not known says which dims it waits for.
    #[serde(default)]
    pub value_type: String,
}

/// The placement report of a built net.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    pub policy: FallbackPolicy,
    pub requested_backend: Backend,
    pub requested_target: Target,
    /// The backend and target most nodes run on.
    pub resolved_backend: Backend,
    pub resolved_target: Target,
    pub nodes: Vec<NodePlacement>,
    pub partitions: Vec<PartitionInfo>,
    pub transfers: Vec<Transfer>,
    pub notices: Vec<Notice>,
    /// What the executors said about the targets that run as asked (see [`Note`]).
    #[serde(default)]
    pub notes: Vec<Note>,
}

impl Placement {
    /// Number of host↔device transfers per forward.
    pub fn transfer_count(&self) -> usize {
        self.transfers.len()
    }

    /// Bytes moved per forward by the transfers whose size is known.
    pub fn transfer_bytes(&self) -> u64 {
        self.transfers.iter().filter_map(|t| t.bytes).sum()
    }

    /// True when anything fell back.
    pub fn has_fallback(&self) -> bool {
        !self.notices.is_empty()
    }

    /// The one line the Warn and Deny policies log for the notes, if there are any.
    pub fn notes_summary(&self) -> Option<String> {
        if self.notes.is_empty() {
            return None;
        }
        let parts: Vec<String> = self
            .notes
            .iter()
            .map(|n| format!("{}: {}", n.on, n.text))
            .collect();
        Some(format!("concord note: {}", parts.join("; ")))
    }

    /// The one-line summary the Warn policy logs: asked, chosen, why, how many nodes.
    pub fn fallback_summary(&self) -> Option<String> {
        let first = self.notices.first()?;
        let parts: Vec<String> = self
            .notices
            .iter()
            .map(|n| {
                let plural = if n.nodes == 1 { "" } else { "s" };
                format!(
                    "{} for {} node{plural} because {}",
                    n.chosen, n.nodes, n.reason
                )
            })
            .collect();
        Some(format!(
            "concord fallback: asked {}, chose {} (per node: Net::placement(), `--placement`)",
            first.asked,
            parts.join("; ")
        ))
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "requested {}/{} -> resolved {}/{} (policy {:?})",
            self.requested_backend,
            self.requested_target,
            self.resolved_backend,
            self.resolved_target,
            self.policy
        )?;
        let name_w = self
            .nodes
            .iter()
            .map(|n| n.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let op_w = self
            .nodes
            .iter()
            .map(|n| n.op.len())
            .max()
            .unwrap_or(2)
            .max(2);
        let exec_w = self
            .nodes
            .iter()
            .map(|n| n.executor.len())
            .max()
            .unwrap_or(8)
            .max(8);
        writeln!(
            f,
            "{:name_w$}  {:op_w$}  {:exec_w$}  {:11}  reason",
            "node", "op", "executor", "target"
        )?;
        for n in &self.nodes {
            // A backend-level reason (an unavailable backend, a target without fp16) is
            // the same on every node: it is said once, under "fallbacks:", and referred to
            // by number on each row. A node's own reason (op not supported) stays on its row.
            let reason = match &n.reason {
                None => "-".to_string(),
                Some(r) => match self.notices.iter().position(|notice| {
                    notice.cause != FallbackCause::NodeUnsupported && notice.reason == *r
                }) {
                    Some(i) => format!("fallback {} (below)", i + 1),
                    None => r.clone(),
                },
            };
            writeln!(
                f,
                "{:name_w$}  {:op_w$}  {:exec_w$}  {:11}  {reason}",
                n.name,
                n.op,
                n.executor,
                n.target.name(),
            )?;
        }
        writeln!(f, "partitions: {}", self.partitions.len())?;
        for p in &self.partitions {
            writeln!(
                f,
                "  #{} {}/{}: {} nodes",
                p.index, p.executor, p.target, p.nodes
            )?;
        }
        // A transfer of a value with symbolic dims has no size until the forward.
        let unsized_count = self.transfers.iter().filter(|t| t.bytes.is_none()).count();
        if unsized_count == 0 {
            writeln!(
                f,
                "transfers per forward: {} ({} bytes)",
                self.transfer_count(),
                self.transfer_bytes()
            )?;
        } else if unsized_count == self.transfer_count() {
            writeln!(
                f,
                "transfers per forward: {} (sizes unknown until a forward: they depend on \
                 the input shapes)",
                self.transfer_count()
            )?;
        } else {
            writeln!(
                f,
                "transfers per forward: {} ({} bytes, plus {} whose size is unknown until a \
                 forward: it depends on the input shapes)",
                self.transfer_count(),
                self.transfer_bytes(),
                unsized_count
            )?;
        }
        for t in &self.transfers {
            match t.bytes {
                Some(bytes) => writeln!(f, "  {} {} -> {} ({bytes} bytes)", t.value, t.from, t.to)?,
                None if t.value_type.is_empty() => writeln!(
                    f,
                    "  {} {} -> {} (size unknown until a forward)",
                    t.value, t.from, t.to
                )?,
                None => writeln!(
                    f,
                    "  {} {} -> {} ({}: size unknown until a forward)",
                    t.value, t.from, t.to, t.value_type
                )?,
            }
        }
        for n in &self.notes {
            writeln!(f, "note: {}: {}", n.on, n.text)?;
        }
        if self.notices.is_empty() {
            write!(f, "fallbacks: none")
        } else {
            writeln!(f, "fallbacks:")?;
            for (i, n) in self.notices.iter().enumerate() {
                let sep = if i + 1 == self.notices.len() {
                    ""
                } else {
                    "\n"
                };
                let plural = if n.nodes == 1 { "" } else { "s" };
                write!(
                    f,
                    "  {}. [{:?}] asked {}, chose {} for {} node{plural}: {}{sep}",
                    i + 1,
                    n.cause,
                    n.asked,
                    n.chosen,
                    n.nodes,
                    n.reason
                )?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_transfers(bytes: &[Option<u64>]) -> Placement {
        let target = Target::new("dev");
        Placement {
            policy: FallbackPolicy::Warn,
            requested_backend: Backend::new("dev"),
            requested_target: target.clone(),
            resolved_backend: Backend::new("dev"),
            resolved_target: target,
            nodes: Vec::new(),
            partitions: Vec::new(),
            transfers: bytes
                .iter()
                .enumerate()
                .map(|(i, &bytes)| Transfer {
                    value: format!("v{i}"),
                    from: "host".into(),
                    to: "dev".into(),
                    bytes,
                    value_type: if bytes.is_some() {
                        "f32[2, 2]".into()
                    } else {
                        "f32[N, 2]".into()
                    },
                })
                .collect(),
            notices: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn transfers_of_symbolic_values_are_not_reported_as_zero_bytes() {
        let fixed = with_transfers(&[Some(16), Some(8)]).to_string();
        assert!(
            fixed.contains("transfers per forward: 2 (24 bytes)"),
            "{fixed}"
        );
        let symbolic = with_transfers(&[Some(16), None]).to_string();
        assert!(
            symbolic.contains(
                "transfers per forward: 2 (16 bytes, plus 1 whose size is unknown until a \
                 forward: it depends on the input shapes)"
            ),
            "{symbolic}"
        );
        assert!(
            symbolic.contains("v1 host -> dev (f32[N, 2]: size unknown until a forward)"),
            "{symbolic}"
        );
        assert!(!symbolic.contains("? bytes"), "{symbolic}");
        let all_symbolic = with_transfers(&[None, None]).to_string();
        assert!(
            all_symbolic.contains(
                "transfers per forward: 2 (sizes unknown until a forward: they depend on the \
                 input shapes)"
            ),
            "{all_symbolic}"
        );
        assert!(!all_symbolic.contains("0 bytes"), "{all_symbolic}");
    }

    #[test]
    fn notes_are_reported_apart_from_fallbacks() {
        let mut p = with_transfers(&[]);
        assert_eq!(p.notes_summary(), None);
        p.notes.push(Note {
            on: "dev/dev".into(),
            text: "slower than it looks".into(),
        });
        assert!(!p.has_fallback(), "a note is not a fallback");
        assert_eq!(p.fallback_summary(), None);
        assert_eq!(
            p.notes_summary().as_deref(),
            Some("concord note: dev/dev: slower than it looks")
        );
        let shown = p.to_string();
        assert!(
            shown.contains("note: dev/dev: slower than it looks\nfallbacks: none"),
            "{shown}"
        );
    }
}
