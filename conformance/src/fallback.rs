//! Fallback scenarios, run for every executor and target: a request the executor cannot
//! meet must be said exactly once (Warn), refused (Deny), and still compute the reference's
//! function; and no node the planner placed on the executor may be run by another one
//! behind its back.

use crate::compare::compare;
use crate::concurrency::{input, models, Model};
use crate::outcome::Outcome;
use crate::suite::Suite;
use crate::tolerance::allowance;
use concord::{Error, FallbackPolicy, Net, NetBuilder, Overrides, Target};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The scenarios, by trial name.
pub const SCENARIOS: &[&str] = &["notice_once", "placement_honesty"];

/// The scenarios that ask for what the executor lacks on purpose: the fallback notices
/// they raise are the test's subject, not a real fallback, and the reports label them
/// deliberate. (placement_honesty asks for the target under test, so its notices are real.)
pub const DELIBERATE_NOTICES: &[&str] = &["notice_once"];

/// Whether `record` is a trial of a [`DELIBERATE_NOTICES`] scenario.
pub fn raises_deliberate_notices(record: &crate::outcome::Record) -> bool {
    record.category == "fallback" && DELIBERATE_NOTICES.contains(&record.subject.as_str())
}

/// Runs one scenario.
pub fn run(suite: &Suite, scenario: &str, target: &Target, notices: &mut Vec<String>) -> Outcome {
    let result = match scenario {
        "notice_once" => notice_once(suite, notices),
        "placement_honesty" => placement_honesty(suite, target, notices),
        other => Err(format!("no fallback scenario `{other}`")),
    };
    match result {
        Ok(None) => Outcome::Pass {
            comparisons: Vec::new(),
        },
        Ok(Some(reason)) => Outcome::Unsupported { reason },
        Err(message) => Outcome::Fail {
            message,
            comparisons: Vec::new(),
        },
    }
}

/// Asks for a target the executor does not offer: the planner must fall back, say so in
/// exactly one warning, refuse under Deny, and the net must still compute the function.
fn notice_once(suite: &Suite, notices: &mut Vec<String>) -> Result<Option<String>, String> {
    let offered = suite.executor.targets();
    // A built-in target the executor does not declare, else a name nobody declares.
    let missing = concord::targets::BUILTIN
        .into_iter()
        .find(|t| !offered.iter().any(|s| s.target == *t))
        .unwrap_or(Target::new("no-such-target"));
    let model = &models()[0];
    let builder = |policy| {
        NetBuilder::from_graph(model.graph.clone())
            .registry(suite.registry().clone())
            .backend(suite.backend())
            .target(&missing)
            .fallback(policy)
            .overrides(Overrides::default())
    };
    let (built, warnings) = count_warnings(|| builder(FallbackPolicy::Warn).build());
    let net = built
        .map_err(|e| format!("asking for {missing} under Warn must fall back, not fail: {e}"))?;
    notices.extend(
        net.placement()
            .notices
            .iter()
            .map(|n| format!("{}: {}", n.asked, n.reason)),
    );
    if net.placement().notices.is_empty() {
        return Err(format!(
            "asked for {missing}, which {} does not offer, and the placement records no fallback",
            suite.executor.name()
        ));
    }
    if warnings.len() != 1 {
        return Err(format!(
            "building one net that falls back must warn exactly once; got {} warnings: {:?}",
            warnings.len(),
            warnings
        ));
    }
    check_against_reference(suite, &net, model, &concord::targets::CPU)?;
    match builder(FallbackPolicy::Deny).build() {
        Err(Error::FallbackDenied { .. }) => {}
        Err(other) => {
            return Err(format!(
                "Deny must refuse with FallbackDenied, got: {other}"
            ))
        }
        Ok(_) => return Err("Deny built a net that falls back".into()),
    }
    let (_, quiet) = count_warnings(|| builder(FallbackPolicy::Allow).build());
    if !quiet.is_empty() {
        return Err(format!("Allow must be quiet; got warnings {quiet:?}"));
    }
    Ok(None)
}

/// Every node the planner placed on the executor must be reported (in the profile) as run by
/// the executor itself, never by the reference.
fn placement_honesty(
    suite: &Suite,
    target: &Target,
    notices: &mut Vec<String>,
) -> Result<Option<String>, String> {
    let name = suite.executor.name().to_string();
    let mut placed_anywhere = false;
    for model in models() {
        let net = NetBuilder::from_graph(model.graph.clone())
            .registry(suite.registry().clone())
            .backend(suite.backend())
            .target(target)
            .fallback(FallbackPolicy::Allow)
            .overrides(Overrides::default())
            .profiling(true)
            .build()
            .map_err(|e| format!("{}: building failed: {e}", model.name))?;
        notices.extend(
            net.placement()
                .notices
                .iter()
                .map(|n| format!("{}: {}", n.asked, n.reason)),
        );
        for _ in 0..2 {
            net.forward([(model.input, input(&model, 0))])
                .map_err(|e| format!("{}: forward failed: {e}", model.name))?;
        }
        let profile = net.profile();
        for node in net.placement().nodes.iter().filter(|n| n.executor == name) {
            placed_anywhere = true;
            let ran_on = profile
                .entries
                .iter()
                .find(|e| e.kind == "node" && e.name == node.name)
                .map(|e| e.ran_on.clone());
            // A node the profile does not attribute cannot be shown to have run on the
            // executor: an executor that records nothing must not pass.
            let Some(ran_on) = ran_on else {
                return Err(format!(
                    "{}: node `{}` ({}) was placed on {name}/{target} but the profile has no \
                     entry saying what ran it",
                    model.name, node.name, node.op
                ));
            };
            let runners: Vec<&str> = ran_on.split(',').filter(|r| !r.is_empty()).collect();
            if runners.is_empty() {
                return Err(format!(
                    "{}: node `{}` ({}) was placed on {name}/{target} but its profile entry \
                     names no executor that ran it",
                    model.name, node.name, node.op
                ));
            }
            let others: Vec<&str> = runners.into_iter().filter(|r| *r != name).collect();
            if !others.is_empty() {
                return Err(format!(
                    "{}: node `{}` ({}) was placed on {name}/{target} but was run by {}: a silent fallback",
                    model.name,
                    node.name,
                    node.op,
                    others.join(", ")
                ));
            }
        }
    }
    if !placed_anywhere {
        return Ok(Some(format!(
            "unsupported: {name} declined every node of the scenario models"
        )));
    }
    Ok(None)
}

fn check_against_reference(
    suite: &Suite,
    net: &Net,
    model: &Model,
    target: &Target,
) -> Result<(), String> {
    let x = input(model, 0);
    let got = net
        .forward([(model.input, x.clone())])
        .map_err(|e| e.to_string())?;
    let reference = NetBuilder::from_graph(model.graph.clone())
        .registry(concord::ExecutorRegistry::reference_only())
        .overrides(Overrides::default())
        .build()
        .map_err(|e| e.to_string())?;
    let want = reference
        .forward([(model.input, x)])
        .map_err(|e| e.to_string())?;
    let level = suite
        .tolerances
        .level("model")
        .ok_or("no model level")?
        .level;
    for ((name, w), (_, g)) in want.iter().zip(got.iter()) {
        let allowed = allowance(level, &suite.spec(target), w, None)?;
        let c = compare(name, g, w, &|i, _| allowed.get(i).copied().unwrap_or(0.0));
        if !c.passed() {
            return Err(format!(
                "after falling back the output differs from the reference: {}",
                c.describe()
            ));
        }
    }
    Ok(())
}

/// Runs `f` with a subscriber that records every WARN event on this thread.
pub fn count_warnings<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let counter = WarningCounter::default();
    let result = tracing::subscriber::with_default(counter.clone(), f);
    let messages = counter
        .messages
        .lock()
        .map(|m| m.clone())
        .unwrap_or_default();
    (result, messages)
}

/// A tracing subscriber that keeps the message of every WARN event.
#[derive(Clone, Debug, Default)]
struct WarningCounter {
    messages: Arc<Mutex<Vec<String>>>,
    next_span: Arc<AtomicUsize>,
}

struct MessageVisitor<'a>(&'a mut String);

impl tracing::field::Visit for MessageVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.push_str(&format!("{value:?}"));
        }
    }
}

impl tracing::Subscriber for WarningCounter {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed) as u64 + 1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut message = String::new();
            event.record(&mut MessageVisitor(&mut message));
            if let Ok(mut m) = self.messages.lock() {
                m.push(message);
            }
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
