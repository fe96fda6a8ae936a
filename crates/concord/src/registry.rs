//! [`ExecutorRegistry`]: the executors a net may be placed on — the built-in ones compiled
//! into this build and any a backend author registers — and the names it knows: every
//! registered executor's name and declared targets, plus the built-ins (and their aliases)
//! whether compiled in or not. `CONCORD_REQUIRE` is resolved against these names by
//! [`parse_require`], the one parser of it.

use crate::error::Error;
use crate::targets;
use concord_core::{Backend, Executor, Target};
use concord_cpu::CpuExecutor;
use std::sync::Arc;

/// The executors the planner may choose from. The reference executor is always present:
/// it is what everything falls back to.
#[derive(Clone, Debug)]
pub struct ExecutorRegistry {
    executors: Vec<Arc<dyn Executor>>,
}

/// A built-in backend and the cargo feature that compiles it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinBackend {
    pub backend: &'static str,
    /// Other spellings accepted for it ("ocl").
    pub aliases: &'static [&'static str],
    pub feature: &'static str,
    pub compiled_in: bool,
    /// The targets its executor declares, default first, by name (so a build without the
    /// feature can still name them).
    pub targets: &'static [Target],
}

/// One entry of `CONCORD_REQUIRE`, resolved against the registry by [`parse_require`]. A
/// name can be both a backend and a target ("opencl"): a requirement on the backend applies
/// when a net asks for that backend, one on the target when a net asks for that target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The entry as written, lower-cased.
    pub name: String,
    /// The backend it names (aliases resolved), if it names one.
    pub backend: Option<Backend>,
    /// The target it names, if a registered executor or a built-in declares one so named.
    pub target: Option<Target>,
}

/// Every built-in backend, compiled in or not, for `concord info` and the planner's
/// "not compiled in" reason.
pub const BUILTIN_BACKENDS: &[BuiltinBackend] = &[
    BuiltinBackend {
        backend: "cpu",
        aliases: &[],
        feature: "(always)",
        compiled_in: true,
        targets: &[targets::CPU],
    },
    BuiltinBackend {
        backend: "opencl",
        aliases: &["ocl"],
        feature: "opencl",
        compiled_in: cfg!(feature = "opencl"),
        targets: &[targets::OPENCL, targets::OPENCL_FP16],
    },
    BuiltinBackend {
        backend: "cuda",
        aliases: &[],
        feature: "cuda",
        compiled_in: cfg!(feature = "cuda"),
        targets: &[targets::CUDA, targets::CUDA_FP16],
    },
];

impl Default for ExecutorRegistry {
    fn default() -> Self {
        Self::with_builtins()
    }
}

impl ExecutorRegistry {
    /// The built-in executors compiled into this build.
    pub fn with_builtins() -> Self {
        #[allow(unused_mut)]
        let mut executors: Vec<Arc<dyn Executor>> = vec![Arc::new(CpuExecutor::new())];
        #[cfg(feature = "opencl")]
        executors.push(Arc::new(concord_opencl::OpenClExecutor::new()));
        #[cfg(feature = "cuda")]
        executors.push(Arc::new(concord_cuda::CudaExecutor::new()));
        ExecutorRegistry { executors }
    }

    /// Only the reference executor: every other built-in backend counts as not compiled
    /// in. Useful to check what a build without GPU features does.
    pub fn reference_only() -> Self {
        ExecutorRegistry {
            executors: vec![Arc::new(CpuExecutor::new())],
        }
    }

    /// Adds (or replaces, by name) an executor.
    pub fn register(&mut self, executor: Arc<dyn Executor>) {
        self.executors.retain(|e| e.name() != executor.name());
        self.executors.push(executor);
    }

    /// Builder-style [`ExecutorRegistry::register`].
    pub fn with(mut self, executor: Arc<dyn Executor>) -> Self {
        self.register(executor);
        self
    }

    /// The executor serving `backend` (aliases resolved), if one is registered.
    pub fn get(&self, backend: &Backend) -> Option<&Arc<dyn Executor>> {
        let backend = canonical_backend(backend.name());
        self.executors.iter().find(|e| e.name() == backend.name())
    }

    /// The reference executor.
    pub fn reference(&self) -> Arc<dyn Executor> {
        self.executors
            .iter()
            .find(|e| e.name() == crate::backends::CPU.name())
            .cloned()
            .unwrap_or_else(|| Arc::new(CpuExecutor::new()))
    }

    /// The target called `name` that a registered executor declares, or a built-in one
    /// (compiled in or not); None for a name nothing here knows.
    pub fn target_named(&self, name: &str) -> Option<Target> {
        let wanted = Target::named(name);
        let declared = self
            .executors
            .iter()
            .flat_map(|e| e.targets())
            .map(|s| s.target);
        let builtin = BUILTIN_BACKENDS
            .iter()
            .flat_map(|b| b.targets.iter().cloned());
        declared.chain(builtin).find(|t| *t == wanted)
    }

    /// Every backend and target name this registry knows, in a stable order: registered
    /// executors and their declared targets, then the built-ins this build lacks.
    pub fn known_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let mut add = |name: &str| {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        };
        for e in &self.executors {
            add(e.name());
            for spec in e.targets() {
                add(spec.target.name());
            }
        }
        for b in BUILTIN_BACKENDS {
            add(b.backend);
            b.targets.iter().for_each(|t| add(t.name()));
        }
        names
    }

    pub fn executors(&self) -> &[Arc<dyn Executor>] {
        &self.executors
    }

    /// Every backend name a net may ask for: the registered executors, then the built-in
    /// backends (compiled in or not: asking for one this build lacks is a fallback, said so).
    pub fn backend_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .executors
            .iter()
            .map(|e| e.name().to_string())
            .collect();
        for b in BUILTIN_BACKENDS {
            if !names.iter().any(|n| n == b.backend) {
                names.push(b.backend.to_string());
            }
        }
        names
    }

    /// The targets `backend` serves: those its executor declares, or, for a built-in this
    /// registry lacks, the built-in's list.
    pub fn targets_of(&self, backend: &Backend) -> Vec<Target> {
        match self.get(backend) {
            Some(e) => e.targets().into_iter().map(|s| s.target).collect(),
            None => BUILTIN_BACKENDS
                .iter()
                .find(|b| b.backend == backend.name())
                .map(|b| b.targets.to_vec())
                .unwrap_or_default(),
        }
    }

    /// The backend that serves `target`, if any does (the first registered, then built-in).
    pub fn owner_of(&self, target: &Target) -> Option<Backend> {
        self.backend_names()
            .into_iter()
            .map(|name| Backend::named(&name))
            .find(|b| self.targets_of(b).contains(target))
    }
}

/// The known name closest to `name` when it is close enough to be a typo (at most two
/// edits, or a prefix of at least three letters): "cdua" → "cuda", "open" → "opencl".
pub fn did_you_mean<'a>(name: &str, known: &'a [String]) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&name, k), k))
        .filter(|(d, k)| *d <= 2 || (name.len() >= 3 && k.starts_with(name.as_str())))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

/// Edit distance counting a swap of two neighbouring letters as one edit ("cdua" is one
/// from "cuda", two from "cpu"), for [`did_you_mean`]; names are a few letters long.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The canonical spelling of a backend name: lower case, a built-in's alias replaced by its
/// name ("ocl" → "opencl").
pub fn canonical_backend(name: &str) -> Backend {
    let name = name.trim().to_ascii_lowercase();
    match BUILTIN_BACKENDS
        .iter()
        .find(|b| b.backend == name || b.aliases.contains(&name.as_str()))
    {
        Some(b) => Backend::new(b.backend),
        None => Backend::named(&name),
    }
}

/// Parses a `CONCORD_REQUIRE` list (comma-separated, any case) against `registry`: each
/// entry must name a registered executor, a target one declares, or a built-in backend or
/// target (compiled in or not, so a CI gate for cuda works on a build without it). This is
/// the only parser of `CONCORD_REQUIRE`; the planner calls it when a net is built, the
/// conformance suite when it decides whether an unavailable executor fails the run.
pub fn parse_require(list: &str, registry: &ExecutorRegistry) -> Result<Vec<Requirement>, Error> {
    parse_require_from("CONCORD_REQUIRE", list, registry)
}

/// [`parse_require`] for a list that came from `source_name` (`--require`), which the
/// error names.
pub fn parse_require_from(
    source_name: &'static str,
    list: &str,
    registry: &ExecutorRegistry,
) -> Result<Vec<Requirement>, Error> {
    let mut out = Vec::new();
    for entry in list
        .split(',')
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
    {
        let canonical = canonical_backend(&entry);
        let backend = (registry.get(&canonical).is_some()
            || BUILTIN_BACKENDS
                .iter()
                .any(|b| b.backend == canonical.name()))
        .then_some(canonical);
        let target = registry.target_named(&entry);
        if backend.is_none() && target.is_none() {
            let known = registry.known_names();
            return Err(Error::UnknownRequirement {
                source_name,
                value: list.to_string(),
                suggestion: did_you_mean(&entry, &known).map(str::to_string),
                entry,
                known,
            });
        }
        out.push(Requirement {
            name: entry,
            backend,
            target,
        });
    }
    Ok(out)
}

/// When `backend` is a built-in the registry lacks: why, in words.
pub fn missing_builtin(backend: &Backend) -> Option<String> {
    let backend = canonical_backend(backend.name());
    let builtin = BUILTIN_BACKENDS
        .iter()
        .find(|b| b.backend == backend.name())?;
    Some(if builtin.compiled_in {
        format!(
            "the executor registry of this net has no {backend} executor \
             (ExecutorRegistry::with_builtins() includes it)"
        )
    } else {
        format!(
            "this build of concord has no {backend} support (rebuild with cargo feature `{}`)",
            builtin.feature
        )
    })
}
