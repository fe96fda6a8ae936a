//! The planner: the one place where placement and fallback are decided, for every
//! executor alike. Resolution is eager — it all happens in `NetBuilder::build`, never at the
//! first forward — and follows the order a user would check by hand: is the backend compiled
//! in (registered), then [`resolve_target`] (library present, device present, target valid
//! for the executor, device capable), and, node by node, does the executor support it.

use crate::error::Error;
use crate::registry::{
    canonical_backend, did_you_mean, missing_builtin, parse_require, ExecutorRegistry, Requirement,
    BUILTIN_BACKENDS,
};
use crate::targets::CPU;
use concord_core::placement::{NodePlacement, PartitionInfo, Transfer};
use concord_core::schedule::free_points;
use concord_core::{
    resolve_target, Backend, Executor, FallbackCause, FallbackPolicy, Graph, MemoryBudget, Note,
    Notice, Placement, PreparedPartition, Shape, Support, Target, ValueInfo,
};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// What the caller asked for.
#[derive(Clone, Debug)]
pub struct Preferences {
    pub backend: Backend,
    /// None: the backend's default target.
    pub target: Option<Target>,
    pub policy: FallbackPolicy,
    pub overrides: Overrides,
    /// The budget every partition is prepared within ([`Executor::prepare_within`]).
    pub memory: MemoryBudget,
}

/// Settings that come from the environment (`CONCORD_FALLBACK`, `CONCORD_REQUIRE`) and win
/// over the code's choices, so an operator or a CI runner can tighten any program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Replaces the builder's fallback policy.
    pub fallback: Option<FallbackPolicy>,
    /// Backends ("opencl", "cuda", "toy") or targets ("opencl-fp16", "toy-dsp") that must
    /// not fall back when they are asked for; each entry may itself be a comma-separated
    /// list. Resolved against the net's registry by [`parse_require`] when the net is built,
    /// so an unknown name is an error listing the known ones.
    pub require: Vec<String>,
}

/// A partition ready to run, with the values it reads and writes.
#[derive(Debug)]
pub(crate) struct PlannedPartition {
    pub executor: String,
    pub target: Target,
    pub prepared: Box<dyn PreparedPartition>,
    /// Input names, each with whether this is its last reader (so it can be moved, not
    /// cloned).
    pub inputs: Vec<(String, bool)>,
    pub outputs: Vec<String>,
}

/// The planner's result.
#[derive(Debug)]
pub(crate) struct Plan {
    pub partitions: Vec<PlannedPartition>,
    pub placement: Placement,
}

impl Overrides {
    /// Reads `CONCORD_FALLBACK` and `CONCORD_REQUIRE`. An unrecognised value is an error,
    /// not something to ignore: a typo must not silently loosen a CI gate.
    pub fn from_env() -> Result<Overrides, Error> {
        let fallback = match std::env::var("CONCORD_FALLBACK") {
            Ok(v) if !v.trim().is_empty() => {
                Some(parse_policy(&v).ok_or_else(|| Error::Environment {
                    variable: "CONCORD_FALLBACK",
                    value: v.clone(),
                    expected: "deny, warn or allow",
                })?)
            }
            _ => None,
        };
        // Which names exist depends on the registry, so the list is parsed when the net
        // is built (by `parse_require`), not here.
        let require = match std::env::var("CONCORD_REQUIRE") {
            Ok(v) if !v.trim().is_empty() => vec![v],
            _ => Vec::new(),
        };
        Ok(Overrides { fallback, require })
    }
}

/// Parses "deny", "warn" or "allow".
pub fn parse_policy(s: &str) -> Option<FallbackPolicy> {
    match s.trim().to_ascii_lowercase().as_str() {
        "deny" => Some(FallbackPolicy::Deny),
        "warn" => Some(FallbackPolicy::Warn),
        "allow" => Some(FallbackPolicy::Allow),
        _ => None,
    }
}

/// Decides where every node runs, says so, and prepares the partitions.
pub(crate) fn plan(
    graph: &Graph,
    prefs: &Preferences,
    registry: &ExecutorRegistry,
) -> Result<Plan, Error> {
    let policy = prefs.overrides.fallback.unwrap_or(prefs.policy);
    let requirements = parse_require(&prefs.overrides.require.join(","), registry)?;
    let reference = registry.reference();
    check_names(prefs, registry)?;
    let resolution = resolve_backend(graph, prefs, registry);
    let primary = resolution.executor.clone();
    let target = resolution.target.clone();
    let mut notices = resolution.notices;
    let asked = resolution.asked.clone();

    // Per node: does the chosen executor support it? Unsupported nodes go to the reference.
    let mut assignment: Vec<(Arc<dyn Executor>, Target, Option<String>)> = Vec::new();
    let mut unsupported: BTreeMap<String, usize> = BTreeMap::new();
    for node in &graph.nodes {
        let backend_reason = resolution.node_reason.clone();
        if Arc::ptr_eq(&primary, &reference) {
            assignment.push((reference.clone(), CPU, backend_reason));
            continue;
        }
        match primary.supports(graph, node, &target) {
            Support::Yes => assignment.push((primary.clone(), target.clone(), backend_reason)),
            Support::No(why) => {
                let reason = format!(
                    "{} does not support {} on {target}: {why}",
                    primary.name(),
                    node.op.name()
                );
                *unsupported.entry(reason.clone()).or_default() += 1;
                assignment.push((reference.clone(), CPU, Some(reason)));
            }
        }
    }
    // The reference is where everything falls back to; a node it cannot run either is
    // refused now, when the net is built, rather than at the first forward.
    for (node, (executor, _, _)) in graph.nodes.iter().zip(&assignment) {
        if Arc::ptr_eq(executor, &reference) {
            if let Support::No(why) = reference.supports(graph, node, &CPU) {
                return Err(Error::Graph(concord_core::Error::at_node(
                    node,
                    concord_core::OpError::Unsupported(why),
                )));
            }
        }
    }
    for (reason, nodes) in unsupported {
        notices.push(Notice {
            cause: FallbackCause::NodeUnsupported,
            asked: asked.clone(),
            chosen: "cpu/cpu".to_string(),
            reason,
            nodes,
        });
    }

    let nodes: Vec<NodePlacement> = graph
        .nodes
        .iter()
        .zip(&assignment)
        .map(|(node, (executor, target, reason))| NodePlacement {
            name: node.name.clone(),
            op: node.op.name().to_string(),
            executor: executor.name().to_string(),
            target: target.clone(),
            reason: reason.clone(),
        })
        .collect();

    // A target that runs as asked can still cost something the caller would not guess;
    // the executor says what, and only when some node actually runs there.
    let runs_on_primary = assignment
        .iter()
        .any(|(executor, _, _)| Arc::ptr_eq(executor, &primary))
        && !Arc::ptr_eq(&primary, &reference);
    let notes = if runs_on_primary {
        primary
            .notes(&target)
            .into_iter()
            .map(|text| Note {
                on: format!("{}/{target}", primary.name()),
                text,
            })
            .collect()
    } else {
        Vec::new()
    };

    let groups = partition_groups(&assignment);
    let (resolved_backend, resolved_target) = majority(&assignment, &primary, &target);
    let mut placement = Placement {
        policy,
        requested_backend: resolution.backend.clone(),
        requested_target: resolution.asked_target.clone(),
        resolved_backend,
        resolved_target,
        nodes,
        partitions: Vec::new(),
        transfers: Vec::new(),
        notices,
        notes,
    };

    enforce(&placement, &requirements, policy)?;

    let mut partitions = Vec::new();
    let subgraphs = build_subgraphs(graph, &groups);
    for (index, (range, sub)) in groups.iter().zip(subgraphs).enumerate() {
        let (executor, target, _) = &assignment[range.start];
        let prepared = executor
            .prepare_within(&sub.graph, target, prefs.memory)
            .map_err(|source| Error::Prepare {
                executor: executor.name().to_string(),
                target: target.clone(),
                source: Box::new(source),
            })?;
        placement.partitions.push(PartitionInfo {
            index,
            executor: executor.name().to_string(),
            target: target.clone(),
            nodes: range.len(),
        });
        if *target != CPU {
            let device = format!("{}:{}", executor.name(), target);
            for input in &sub.graph.inputs {
                placement.transfers.push(transfer(
                    graph,
                    &input.name,
                    "host".into(),
                    device.clone(),
                ));
            }
            for name in &sub.graph.outputs {
                placement
                    .transfers
                    .push(transfer(graph, name, device.clone(), "host".into()));
            }
        }
        partitions.push(PlannedPartition {
            executor: executor.name().to_string(),
            target: target.clone(),
            prepared,
            inputs: sub
                .graph
                .inputs
                .iter()
                .map(|i| i.name.clone())
                .map(|n| (n, false))
                .collect(),
            outputs: sub.graph.outputs.clone(),
        });
    }
    mark_last_readers(&mut partitions, graph);
    say_so(&placement, policy);
    Ok(Plan {
        partitions,
        placement,
    })
}

/// The backend-level outcome: which executor and target, and the notices on the way.
struct Resolution {
    executor: Arc<dyn Executor>,
    /// The backend asked for, aliases resolved.
    backend: Backend,
    target: Target,
    asked: String,
    asked_target: Target,
    notices: Vec<Notice>,
    /// The reason recorded on every node when the whole backend fell back.
    node_reason: Option<String>,
}

/// A backend or target name nobody registered (nor any built-in) is a usage error, refused
/// whatever the policy: falling back on a typo would run on the CPU and exit 0.
fn check_names(prefs: &Preferences, registry: &ExecutorRegistry) -> Result<(), Error> {
    let backend = canonical_backend(prefs.backend.name());
    let backends = registry.backend_names();
    if !backends.iter().any(|b| b == backend.name()) {
        return Err(Error::UnknownBackend {
            name: backend.name().to_string(),
            suggestion: did_you_mean(backend.name(), &backends).map(str::to_string),
            known: backends,
        });
    }
    // A target another backend serves, asked of this one, is a fallback (InvalidTarget,
    // said so; the suite's fallback/ trials ask for one on purpose); a name no executor
    // declares is a typo.
    if let Some(target) = &prefs.target {
        let all = registry.known_names();
        if !all.iter().any(|t| t == target.name()) {
            let served = registry.targets_of(&backend);
            return Err(Error::UnknownTarget {
                backend: backend.name().to_string(),
                target: target.name().to_string(),
                suggestion: did_you_mean(target.name(), &all).map(str::to_string),
                known: served.iter().map(|t| t.name().to_string()).collect(),
            });
        }
    }
    Ok(())
}

/// Finds the asked backend's executor (the registry's business) and lets
/// [`resolve_target`] decide everything about the target; this only turns its steps into
/// notices.
fn resolve_backend(graph: &Graph, prefs: &Preferences, registry: &ExecutorRegistry) -> Resolution {
    let reference = registry.reference();
    let n = graph.nodes.len();
    let backend = canonical_backend(prefs.backend.name());
    let found = registry.get(&backend).cloned();
    let declared = found.as_ref().map(|e| e.targets()).unwrap_or_default();
    let asked_target = prefs
        .target
        .clone()
        .or_else(|| declared.first().map(|s| s.target.clone()))
        .or_else(|| {
            BUILTIN_BACKENDS
                .iter()
                .find(|b| b.backend == backend.name())
                .and_then(|b| b.targets.first().cloned())
        })
        .unwrap_or(CPU);
    let asked = format!("{backend}/{asked_target}");
    let to_cpu = |mut notices: Vec<Notice>, cause: FallbackCause, reason: String| {
        notices.push(Notice {
            cause,
            asked: asked.clone(),
            chosen: "cpu/cpu".into(),
            reason: reason.clone(),
            nodes: n,
        });
        Resolution {
            executor: reference.clone(),
            backend: backend.clone(),
            target: CPU,
            asked: asked.clone(),
            asked_target: asked_target.clone(),
            notices,
            node_reason: Some(reason),
        }
    };

    // 1. Compiled in (or registered)?
    let Some(executor) = found else {
        // `check_names` has refused a name that is neither registered nor built in.
        let reason = missing_builtin(&backend)
            .unwrap_or_else(|| format!("no executor named `{backend}` is registered"));
        return to_cpu(Vec::new(), FallbackCause::NotCompiled, reason);
    };

    // 2-5. Library, device, target validity, device capability: one function decides.
    let resolved = resolve_target(
        executor.name(),
        &declared,
        &executor.probe(),
        Some(&asked_target),
    );
    let mut notices = Vec::new();
    for step in &resolved.fallbacks {
        match &step.to {
            Some(to) => notices.push(Notice {
                cause: step.cause,
                asked: asked.clone(),
                chosen: format!("{backend}/{to}"),
                reason: step.reason.clone(),
                nodes: n,
            }),
            None => return to_cpu(notices, step.cause, step.reason.clone()),
        }
    }
    let Some(target) = resolved.chosen else {
        // resolve_target ends every unresolved outcome with a step to nothing, handled
        // above; this is the same fallback, for an outcome without steps.
        return to_cpu(
            notices,
            FallbackCause::InvalidTarget,
            format!("{backend} can run no target here"),
        );
    };
    let node_reason = notices.last().map(|n| n.reason.clone());
    Resolution {
        executor,
        backend,
        target,
        asked,
        asked_target,
        notices,
        node_reason,
    }
}

/// Refuses the plan when the policy or `CONCORD_REQUIRE` says so.
fn enforce(
    placement: &Placement,
    requirements: &[Requirement],
    policy: FallbackPolicy,
) -> Result<(), Error> {
    if placement.notices.is_empty() {
        return Ok(());
    }
    let reasons: Vec<String> = placement
        .notices
        .iter()
        .map(|n| {
            let plural = if n.nodes == 1 { "" } else { "s" };
            format!("{} ({} node{plural})", n.reason, n.nodes)
        })
        .collect();
    for requirement in requirements {
        let on_backend = requirement.backend.as_ref() == Some(&placement.requested_backend);
        let on_target = requirement.target.as_ref() == Some(&placement.requested_target);
        let violated = if on_backend {
            placement
                .nodes
                .iter()
                .any(|n| n.executor != placement.requested_backend.name())
        } else if on_target {
            placement
                .nodes
                .iter()
                .any(|n| n.target != placement.requested_target)
        } else {
            continue;
        } || placement.nodes.is_empty();
        if violated {
            return Err(Error::Required {
                requirement: requirement.name.clone(),
                reasons,
            });
        }
    }
    if policy == FallbackPolicy::Deny {
        return Err(Error::FallbackDenied {
            asked: format!(
                "{}/{}",
                placement.requested_backend, placement.requested_target
            ),
            reasons,
        });
    }
    Ok(())
}

/// Under Warn: exactly one warning per build for the fallbacks, through tracing, and on
/// stderr when no tracing subscriber would show it. The notes (not fallbacks) get one more
/// line under Warn, and under Deny too, since a build that Deny lets through ran as asked
/// and its cost is still worth saying; Allow stays quiet.
fn say_so(placement: &Placement, policy: FallbackPolicy) {
    let no_subscriber =
        tracing::dispatcher::get_default(|d| d.is::<tracing::subscriber::NoSubscriber>());
    if policy == FallbackPolicy::Warn {
        if let Some(summary) = placement.fallback_summary() {
            if no_subscriber {
                eprintln!("warning: {summary}");
            } else {
                tracing::warn!(target: "concord::fallback", "{summary}");
            }
        }
    }
    if policy != FallbackPolicy::Allow {
        if let Some(summary) = placement.notes_summary() {
            if no_subscriber {
                eprintln!("warning: {summary}");
            } else {
                tracing::warn!(target: "concord::note", "{summary}");
            }
        }
    }
}

/// Maximal runs of consecutive nodes (in topological order) on one executor and target.
fn partition_groups(
    assignment: &[(Arc<dyn Executor>, Target, Option<String>)],
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    for i in 1..=assignment.len() {
        let boundary = i == assignment.len()
            || !Arc::ptr_eq(&assignment[i].0, &assignment[start].0)
            || assignment[i].1 != assignment[start].1;
        if boundary {
            if start < i {
                groups.push(start..i);
            }
            start = i;
        }
    }
    groups
}

/// The executor and target most nodes run on.
fn majority(
    assignment: &[(Arc<dyn Executor>, Target, Option<String>)],
    primary: &Arc<dyn Executor>,
    target: &Target,
) -> (Backend, Target) {
    let on_primary = assignment
        .iter()
        .filter(|(e, _, _)| Arc::ptr_eq(e, primary))
        .count();
    if assignment.is_empty() || on_primary * 2 >= assignment.len() {
        (Backend::named(primary.name()), target.clone())
    } else {
        (crate::backends::CPU, CPU)
    }
}

struct Subgraph {
    graph: Graph,
}

/// Cuts the graph into one sub-graph per group: inputs are the values that cross into it,
/// outputs the values read later or by the caller; constants travel with the partition.
fn build_subgraphs(graph: &Graph, groups: &[std::ops::Range<usize>]) -> Vec<Subgraph> {
    let runtime_inputs: HashSet<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    let graph_outputs: HashSet<&str> = graph.outputs.iter().map(|s| s.as_str()).collect();
    let mut out = Vec::with_capacity(groups.len());
    for (g, range) in groups.iter().enumerate() {
        let nodes = &graph.nodes[range.clone()];
        let produced: HashSet<&str> = nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(|s| s.as_str()))
            .collect();
        let later_reads: HashSet<&str> = groups[g + 1..]
            .iter()
            .flat_map(|r| graph.nodes[r.clone()].iter())
            .flat_map(|n| n.present_inputs())
            .collect();
        let mut inputs: Vec<ValueInfo> = Vec::new();
        let mut initializers = BTreeMap::new();
        let mut seen = HashSet::new();
        for node in nodes {
            for name in node.present_inputs() {
                if produced.contains(name) || !seen.insert(name) {
                    continue;
                }
                match graph.initializers.get(name) {
                    Some(t) if !runtime_inputs.contains(name) => {
                        initializers.insert(name.to_string(), t.clone());
                    }
                    _ => {
                        if let Some(info) = graph.values.get(name) {
                            inputs.push(info.clone());
                        }
                    }
                }
            }
        }
        let outputs: Vec<String> = nodes
            .iter()
            .flat_map(|n| n.outputs.iter())
            .filter(|o| later_reads.contains(o.as_str()) || graph_outputs.contains(o.as_str()))
            .cloned()
            .collect();
        let mentioned: HashSet<&str> = nodes
            .iter()
            .flat_map(|n| {
                n.present_inputs()
                    .chain(n.outputs.iter().map(|s| s.as_str()))
            })
            .collect();
        let values = graph
            .values
            .iter()
            .filter(|(k, _)| mentioned.contains(k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.push(Subgraph {
            graph: Graph {
                name: format!("{}#{g}", graph.name),
                inputs,
                outputs,
                initializers,
                nodes: nodes.to_vec(),
                opset: graph.opset,
                values,
            },
        });
    }
    out
}

/// Marks, for each partition input, whether no later partition and no graph output reads it:
/// the partitions' free points, by the same rule a schedule frees values within one.
fn mark_last_readers(partitions: &mut [PlannedPartition], graph: &Graph) {
    let outputs: HashSet<&str> = graph.outputs.iter().map(|s| s.as_str()).collect();
    let frees: Vec<HashSet<String>> = free_points(
        partitions
            .iter()
            .map(|p| p.inputs.iter().map(|(name, _)| name.as_str())),
        |name| outputs.contains(name),
    )
    .into_iter()
    .map(|names| names.into_iter().map(str::to_string).collect())
    .collect();
    for (p, frees) in partitions.iter_mut().zip(&frees) {
        for (name, movable) in &mut p.inputs {
            *movable = frees.contains(name.as_str());
        }
    }
}

fn transfer(graph: &Graph, value: &str, from: String, to: String) -> Transfer {
    let bytes = graph.values.get(value).and_then(|info| {
        Shape::from_sym(&info.shape)
            .and_then(|s| s.checked_numel())
            .map(|n| (n * info.dtype.size_in_bytes()) as u64)
    });
    Transfer {
        value: value.to_string(),
        from,
        to,
        bytes,
        value_type: graph
            .values
            .get(value)
            .map(|info| info.describe())
            .unwrap_or_default(),
    }
}
