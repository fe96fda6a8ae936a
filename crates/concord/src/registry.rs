//! [`ExecutorRegistry`]: the executors a net may be placed on — the built-in ones compiled
//! into this build and any a backend author registers.

use concord_core::{Backend, Executor};
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
    pub feature: &'static str,
    pub compiled_in: bool,
}

/// Every built-in backend, compiled in or not, for `concord info` and the planner's
/// "not compiled in" reason.
pub const BUILTIN_BACKENDS: &[BuiltinBackend] = &[
    BuiltinBackend {
        backend: "cpu",
        feature: "(always)",
        compiled_in: true,
    },
    BuiltinBackend {
        backend: "opencl",
        feature: "opencl",
        compiled_in: cfg!(feature = "opencl"),
    },
    BuiltinBackend {
        backend: "cuda",
        feature: "cuda",
        compiled_in: cfg!(feature = "cuda"),
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

    /// The executor serving `backend`, if one is registered.
    pub fn get(&self, backend: &Backend) -> Option<&Arc<dyn Executor>> {
        self.executors
            .iter()
            .find(|e| e.backend() == *backend || e.name() == backend.name())
    }

    /// The reference executor.
    pub fn reference(&self) -> Arc<dyn Executor> {
        self.executors
            .iter()
            .find(|e| e.backend() == Backend::Cpu)
            .cloned()
            .unwrap_or_else(|| Arc::new(CpuExecutor::new()))
    }

    pub fn executors(&self) -> &[Arc<dyn Executor>] {
        &self.executors
    }
}

/// When `backend` is a built-in the registry lacks: why, in words.
pub fn missing_builtin(backend: &Backend) -> Option<String> {
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
