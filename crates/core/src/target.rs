//! Targets and backends as open names, the [`TargetSpec`] an executor declares for each of
//! its targets, and [`resolve_target`]: the one answer to "can this target run here?".
//!
//! Core names no backend and no target. The built-in executors declare theirs ("cpu" in
//! concord-cpu, "opencl"/"opencl-fp16" in concord-opencl, "cuda"/"cuda-fp16" in
//! concord-cuda), and a backend author declares a Vulkan or DSP target exactly the same way.
//!
//! [`resolve_target`] lives here rather than in the facade because it needs nothing but the
//! executor contract's data (declared targets, a probe result), and because every consumer
//! of that contract — the planner, `concord info --require`, `CONCORD_REQUIRE`, the
//! conformance suite's availability check, an author's own tests — must get the same answer.

use crate::dtype::DType;
use crate::executor::Availability;
use crate::placement::FallbackCause;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// Where and in what precision a partition runs, by name ("cpu", "opencl-fp16", "toy-dsp").
/// Which names exist is decided by the executors' [`TargetSpec`]s, not here.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Target(Cow<'static, str>);

/// A backend family a caller can ask for, by the serving executor's `name()` ("cpu",
/// "opencl", "cuda", or an author's). Which names exist is decided by the registry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Backend(Cow<'static, str>);

/// A device capability a target needs beyond "the device exists".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    /// Any device of the executor can run it.
    None,
    /// Half-precision storage, with arithmetic in half or in f32 as the device allows
    /// ([`crate::DeviceInfo::fp16`]).
    Fp16,
}

/// One target as its executor declares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetSpec {
    pub target: Target,
    /// The element type tensors are stored in on this target (the tolerance model's unit
    /// roundoff comes from it).
    pub storage: DType,
    /// The element type arithmetic accumulates in.
    pub compute: DType,
    /// What the device must be able to do.
    pub needs: Capability,
    /// Which of the same executor's targets to run instead when no device has `needs`
    /// (opencl-fp16 → opencl); None: fall back to the reference.
    pub instead: Option<Target>,
}

/// One step away from the asked target, with its cause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetFallback {
    pub cause: FallbackCause,
    /// The executor's target this step moved to; None when none of its targets can run,
    /// so the caller falls back to the reference.
    pub to: Option<Target>,
    pub reason: String,
}

/// The outcome of [`resolve_target`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetResolution {
    /// What was asked: the caller's target, or the executor's first declared one.
    pub asked: Target,
    /// The target that will run; None when the executor cannot run here at all.
    pub chosen: Option<Target>,
    /// Every step away from `asked`, in order; empty exactly when `chosen == Some(asked)`.
    pub fallbacks: Vec<TargetFallback>,
}

/// Decides whether `asked` (None: the executor's first declared target) is valid for the
/// executor named `executor` with the declared `targets`, and available on what its
/// `probe` found; and if not, which of its targets runs instead, with every reason.
///
/// The order is the one a user would check by hand: library present, device present,
/// target valid for the executor (else its first target), device capable (else the
/// target's declared `instead`, checked the same way).
pub fn resolve_target(
    executor: &str,
    targets: &[TargetSpec],
    probe: &Availability,
    asked: Option<&Target>,
) -> TargetResolution {
    let asked = asked
        .cloned()
        .or_else(|| targets.first().map(|s| s.target.clone()))
        .unwrap_or(Target::new("none"));
    let mut fallbacks = Vec::new();
    let stop = |fallbacks: Vec<TargetFallback>, asked: Target| TargetResolution {
        asked,
        chosen: None,
        fallbacks,
    };
    let devices = match probe {
        Availability::Unavailable { cause, reason } => {
            fallbacks.push(TargetFallback {
                cause: *cause,
                to: None,
                reason: format!("{executor} is unavailable: {reason}"),
            });
            return stop(fallbacks, asked);
        }
        Availability::Available { devices } if devices.is_empty() => {
            fallbacks.push(TargetFallback {
                cause: FallbackCause::NoDevice,
                to: None,
                reason: format!("{executor} found no device"),
            });
            return stop(fallbacks, asked);
        }
        Availability::Available { devices } => devices,
    };

    let spec_of = |t: &Target| targets.iter().find(|s| s.target == *t);
    let mut spec = match spec_of(&asked) {
        Some(spec) => spec,
        None => {
            let valid: Vec<&str> = targets.iter().map(|s| s.target.name()).collect();
            let first = targets.first();
            fallbacks.push(TargetFallback {
                cause: FallbackCause::InvalidTarget,
                to: first.map(|s| s.target.clone()),
                reason: format!(
                    "target {asked} is not valid for backend {executor} (valid: {})",
                    if valid.is_empty() {
                        "none".to_string()
                    } else {
                        valid.join(", ")
                    }
                ),
            });
            match first {
                Some(spec) => spec,
                None => return stop(fallbacks, asked),
            }
        }
    };

    // Each target is visited at most once, so a cycle of `instead`s cannot loop.
    let mut visited = vec![spec.target.clone()];
    while !devices.iter().any(|d| d.has(spec.needs)) {
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        let instead = spec
            .instead
            .as_ref()
            .and_then(spec_of)
            .filter(|s| !visited.contains(&s.target));
        // `Capability::None` is never missing (every device has it), so only fp16 gets
        // here today; a new capability gets its own cause here.
        let cause = match spec.needs {
            Capability::Fp16 | Capability::None => FallbackCause::Fp16Unsupported,
        };
        let then = match instead {
            Some(s) => format!("running {} instead", s.target),
            None => format!("{executor} declares no target to run instead"),
        };
        fallbacks.push(TargetFallback {
            cause,
            to: instead.map(|s| s.target.clone()),
            reason: format!(
                "no {executor} device supports {} ({}): {then}",
                spec.needs,
                names.join(", ")
            ),
        });
        match instead {
            Some(s) => {
                visited.push(s.target.clone());
                spec = s;
            }
            None => return stop(fallbacks, asked),
        }
    }
    TargetResolution {
        asked,
        chosen: Some(spec.target.clone()),
        fallbacks,
    }
}

impl Target {
    /// A target with a static name; what the executor crates' constants use.
    pub const fn new(name: &'static str) -> Target {
        Target(Cow::Borrowed(name))
    }

    /// A target whose name is only known at run time (parsed from a command line, a file).
    /// Names are lower case; this lower-cases.
    pub fn named(name: &str) -> Target {
        Target(Cow::Owned(name.trim().to_ascii_lowercase()))
    }

    /// The lower-case name used in `CONCORD_REQUIRE`, the CLI and reports.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl Backend {
    /// A backend with a static name.
    pub const fn new(name: &'static str) -> Backend {
        Backend(Cow::Borrowed(name))
    }

    /// A backend whose name is only known at run time; this lower-cases. Aliases ("ocl")
    /// are the registry's business, not this type's.
    pub fn named(name: &str) -> Backend {
        Backend(Cow::Owned(name.trim().to_ascii_lowercase()))
    }

    /// The lower-case name used in `CONCORD_REQUIRE`, the CLI and reports.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl TargetSpec {
    /// A target that needs no capability and has nothing to run instead.
    pub fn new(target: Target, storage: DType, compute: DType) -> TargetSpec {
        TargetSpec {
            target,
            storage,
            compute,
            needs: Capability::None,
            instead: None,
        }
    }

    /// This spec, needing `capability`, and running `instead` where no device has it.
    pub fn needing(self, capability: Capability, instead: Option<Target>) -> TargetSpec {
        TargetSpec {
            needs: capability,
            instead,
            ..self
        }
    }

    /// The unit roundoff of the storage type, for the tolerance model.
    pub fn unit_roundoff(&self) -> f64 {
        self.storage.unit_roundoff()
    }

    /// Whether tensors are stored in f16 (so inputs and weights are rounded to f16).
    pub fn stores_f16(&self) -> bool {
        self.storage == DType::F16
    }
}

impl TargetResolution {
    /// True when the asked target runs as asked.
    pub fn is_exact(&self) -> bool {
        self.fallbacks.is_empty()
    }

    /// Every reason joined, or None when the asked target runs as asked.
    pub fn refusal(&self) -> Option<String> {
        if self.is_exact() {
            return None;
        }
        let reasons: Vec<&str> = self.fallbacks.iter().map(|f| f.reason.as_str()).collect();
        Some(reasons.join("; "))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Capability::None => "none",
            Capability::Fp16 => "fp16",
        })
    }
}

impl From<&str> for Target {
    fn from(name: &str) -> Target {
        Target::named(name)
    }
}

impl From<&Target> for Target {
    fn from(target: &Target) -> Target {
        target.clone()
    }
}

impl From<&Backend> for Backend {
    fn from(backend: &Backend) -> Backend {
        backend.clone()
    }
}

impl From<&str> for Backend {
    fn from(name: &str) -> Backend {
        Backend::named(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::DeviceInfo;

    const F32: Target = Target::new("dsp");
    const F16: Target = Target::new("dsp-fp16");

    fn specs() -> Vec<TargetSpec> {
        vec![
            TargetSpec::new(F32, DType::F32, DType::F32),
            TargetSpec::new(F16, DType::F16, DType::F32).needing(Capability::Fp16, Some(F32)),
        ]
    }

    fn devices(fp16: bool) -> Availability {
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "d0".into(),
                fp16,
                ..DeviceInfo::default()
            }],
        }
    }

    #[test]
    fn the_first_declared_target_is_the_default() {
        let r = resolve_target("dsp", &specs(), &devices(false), None);
        assert_eq!((r.asked, r.chosen), (F32, Some(F32)));
        assert!(r.fallbacks.is_empty());
    }

    #[test]
    fn a_missing_capability_moves_to_the_declared_instead() {
        let r = resolve_target("dsp", &specs(), &devices(false), Some(&F16));
        assert_eq!(r.chosen, Some(F32));
        assert_eq!(r.fallbacks.len(), 1);
        assert_eq!(r.fallbacks[0].cause, FallbackCause::Fp16Unsupported);
        assert_eq!(
            r.fallbacks[0].reason,
            "no dsp device supports fp16 (d0): running dsp instead"
        );
        let r = resolve_target("dsp", &specs(), &devices(true), Some(&F16));
        assert_eq!(r.chosen, Some(F16));
        assert!(r.is_exact());
    }

    #[test]
    fn an_undeclared_target_is_invalid_and_moves_to_the_first() {
        let r = resolve_target("dsp", &specs(), &devices(true), Some(&Target::new("cuda")));
        assert_eq!(r.chosen, Some(F32));
        assert_eq!(r.fallbacks[0].cause, FallbackCause::InvalidTarget);
        assert_eq!(
            r.fallbacks[0].reason,
            "target cuda is not valid for backend dsp (valid: dsp, dsp-fp16)"
        );
    }

    #[test]
    fn an_unavailable_probe_chooses_nothing() {
        let probe = Availability::Unavailable {
            cause: FallbackCause::LibraryMissing,
            reason: "libdsp.so not found".into(),
        };
        let r = resolve_target("dsp", &specs(), &probe, Some(&F16));
        assert_eq!(r.chosen, None);
        assert_eq!(r.fallbacks[0].cause, FallbackCause::LibraryMissing);
        let none = Availability::Available { devices: vec![] };
        let r = resolve_target("dsp", &specs(), &none, None);
        assert_eq!(r.fallbacks[0].cause, FallbackCause::NoDevice);
        assert_eq!(r.refusal().as_deref(), Some("dsp found no device"));
    }

    #[test]
    fn a_capability_with_nothing_instead_chooses_nothing() {
        let only_f16 =
            vec![TargetSpec::new(F16, DType::F16, DType::F32).needing(Capability::Fp16, None)];
        let r = resolve_target("dsp", &only_f16, &devices(false), None);
        assert_eq!(r.chosen, None);
        assert_eq!(r.fallbacks[0].to, None);
    }

    #[test]
    fn names_serialize_as_strings() {
        assert_eq!(
            serde_json::to_string(&F16).expect("serializes"),
            "\"dsp-fp16\""
        );
        let back: Target = serde_json::from_str("\"dsp-fp16\"").expect("deserializes");
        assert_eq!(back, F16);
    }
}
