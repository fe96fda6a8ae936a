//! What this build can do on this machine: the backends compiled in and what each one's
//! runtime probe found. Backs `concord info` and its `--require` start-up assertion.

use crate::registry::{canonical_backend, parse_require_from, ExecutorRegistry, BUILTIN_BACKENDS};
use concord_core::{resolve_target, Availability, Backend, Target, TargetSpec};
use serde::Serialize;
use std::fmt;

/// The backends of this build and their probes.
#[derive(Clone, Debug, Serialize)]
pub struct SystemInfo {
    pub concord_version: &'static str,
    pub backends: Vec<BackendInfo>,
    /// The registry probed: `check_requirement` reads names against it, through the one
    /// parser of requirement lists.
    #[serde(skip)]
    registry: ExecutorRegistry,
}

/// One backend: compiled in or not, and what its probe found.
#[derive(Clone, Debug, Serialize)]
pub struct BackendInfo {
    pub name: String,
    /// The cargo feature that compiles it in ("(always)" for the reference).
    pub feature: String,
    pub compiled_in: bool,
    /// None when not compiled in.
    pub probe: Option<Availability>,
    /// The targets its executor declares (default first); empty when not compiled in.
    pub targets: Vec<TargetSpec>,
    /// The long form of an unavailable probe's one-line reason (every library file name
    /// tried, where the loader looked): [`concord_core::Executor::probe_details`].
    pub probe_details: Vec<String>,
}

impl SystemInfo {
    /// Probes every executor of `registry`, and lists the built-ins this build lacks.
    pub fn probe(registry: &ExecutorRegistry) -> SystemInfo {
        let mut backends = Vec::new();
        for builtin in BUILTIN_BACKENDS {
            let backend = Backend::new(builtin.backend);
            let executor = registry.get(&backend);
            backends.push(BackendInfo {
                name: builtin.backend.to_string(),
                feature: builtin.feature.to_string(),
                compiled_in: executor.is_some(),
                probe: executor.map(|e| e.probe()),
                targets: executor.map(|e| e.targets()).unwrap_or_default(),
                probe_details: executor.map(|e| e.probe_details()).unwrap_or_default(),
            });
        }
        for executor in registry.executors() {
            if BUILTIN_BACKENDS
                .iter()
                .any(|b| b.backend == executor.name())
            {
                continue;
            }
            backends.push(BackendInfo {
                name: executor.name().to_string(),
                feature: "(registered)".to_string(),
                compiled_in: true,
                probe: Some(executor.probe()),
                targets: executor.targets(),
                probe_details: executor.probe_details(),
            });
        }
        SystemInfo {
            concord_version: env!("CARGO_PKG_VERSION"),
            backends,
            registry: registry.clone(),
        }
    }

    /// Checks a requirement written `BACKEND`, `BACKEND:TARGET` or `TARGET` (as `concord
    /// info --require` takes it): Ok when a net asking for it would get it without
    /// fallback, else the reason. Whether the target can run is decided by
    /// [`resolve_target`], as for a net.
    pub fn check_requirement(&self, requirement: &str) -> Result<(), String> {
        let (backend_name, target_name) = match requirement.split_once(':') {
            Some((b, t)) => (b.trim(), Some(t.trim())),
            None => (requirement.trim(), None),
        };
        // A name nothing knows is a usage error (with the known names and a did-you-mean),
        // decided by the parser `CONCORD_REQUIRE` goes through.
        let names = [Some(backend_name), target_name].into_iter().flatten();
        for name in names {
            parse_require_from("--require", name, &self.registry).map_err(|e| e.to_string())?;
        }
        let backend = canonical_backend(backend_name);
        let by_name = self.backends.iter().find(|b| b.name == backend.name());
        // A bare target name ("opencl-fp16", "toy-dsp") means the backend declaring it.
        let by_target = || {
            let target = Target::named(backend_name);
            self.backends
                .iter()
                .find(|b| b.targets.iter().any(|s| s.target == target))
                .map(|b| (b, target))
        };
        let (info, target) = match (by_name, target_name) {
            (Some(info), Some(t)) => (info, Some(Target::named(t))),
            (Some(info), None) => (info, None),
            (None, None) => match by_target() {
                Some((info, target)) => (info, Some(target)),
                None => return Err(format!("no backend named `{backend_name}` in this build")),
            },
            (None, Some(_)) => {
                return Err(format!("no backend named `{backend_name}` in this build"))
            }
        };
        if !info.compiled_in {
            return Err(format!(
                "{} is not compiled in (rebuild with cargo feature `{}`)",
                info.name, info.feature
            ));
        }
        let Some(probe) = &info.probe else {
            return Err(format!("{} was not probed", info.name));
        };
        let resolved = resolve_target(&info.name, &info.targets, probe, target.as_ref());
        match resolved.refusal() {
            None => Ok(()),
            Some(why) => Err(why),
        }
    }
}

impl fmt::Display for SystemInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "concord {}", self.concord_version)?;
        for b in &self.backends {
            write!(f, "{}: ", b.name)?;
            if !b.compiled_in {
                writeln!(f, "not compiled in (cargo feature `{}`)", b.feature)?;
                continue;
            }
            match &b.probe {
                Some(probe @ Availability::Available { devices }) => {
                    // A declared target no device can run is named with what asking for it
                    // gets instead, so "opencl-fp16" never stands unqualified beside
                    // "fp16 no".
                    let targets: Vec<String> = b
                        .targets
                        .iter()
                        .map(|spec| {
                            if devices.iter().any(|d| d.has(spec.needs)) {
                                return spec.target.name().to_string();
                            }
                            let resolved =
                                resolve_target(&b.name, &b.targets, probe, Some(&spec.target));
                            let instead = match resolved.chosen {
                                Some(t) => format!("asking for it runs {t}"),
                                None => "asking for it falls back to the reference".into(),
                            };
                            format!(
                                "{} (not usable here: no device has {}; {instead})",
                                spec.target, spec.needs
                            )
                        })
                        .collect();
                    writeln!(f, "available, targets {}", targets.join(", "))?;
                    for d in devices {
                        write!(f, "  device `{}`", d.name)?;
                        if !d.vendor.is_empty() {
                            write!(f, " by {}", d.vendor)?;
                        }
                        if !d.driver_version.is_empty() {
                            write!(f, ", driver {}", d.driver_version)?;
                        }
                        if let Some(cc) = &d.compute_capability {
                            write!(f, ", compute capability {cc}")?;
                        }
                        let usable: Vec<&str> = b
                            .targets
                            .iter()
                            .filter(|spec| d.has(spec.needs))
                            .map(|spec| spec.target.name())
                            .collect();
                        writeln!(
                            f,
                            ", fp16 {}, runs {}",
                            if d.fp16 { "yes" } else { "no" },
                            if usable.is_empty() {
                                "none of its targets".to_string()
                            } else {
                                usable.join(", ")
                            }
                        )?;
                        for (k, v) in &d.details {
                            writeln!(f, "    {k}: {v}")?;
                        }
                    }
                }
                Some(Availability::Unavailable { cause, reason }) => {
                    writeln!(f, "unavailable ({cause:?}): {reason}")?;
                    for line in &b.probe_details {
                        write_wrapped(f, line, DETAIL_WIDTH)?;
                    }
                }
                None => writeln!(f, "not probed")?,
            }
        }
        Ok(())
    }
}

/// The widest line `concord info` prints for a probe's details: the file names a loader
/// tried run to over a thousand characters and wrap at spaces instead.
const DETAIL_WIDTH: usize = 100;

/// Writes `text` indented by two spaces, wrapped at spaces so that no line is wider than
/// `width` (a single longer word stays whole), continuation lines indented by four.
fn write_wrapped(f: &mut fmt::Formatter<'_>, text: &str, width: usize) -> fmt::Result {
    let mut line = String::from("  ");
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if line.trim().is_empty() {
            line.push_str(word);
        } else if line.len() + 1 + word.len() > width {
            writeln!(f, "{line}")?;
            line = format!("    {word}");
        } else {
            line.push(' ');
            line.push_str(word);
        }
    }
    writeln!(f, "{line}")
}
