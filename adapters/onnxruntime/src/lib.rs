//! concord-adapter-onnxruntime: onnxruntime as a Concord executor, adapted the way an outside
//! backend author would adapt it — through `concord`'s public API, with concord-onnx's
//! writer, and held to agreement by the conformance suite with its own expectations file
//! (conformance/onnxruntime.toml).
//!
//! onnxruntime is reached through the `ort` crate with dynamic loading: nothing is linked or
//! downloaded at build time, and the library is the one inside the PyPI `onnxruntime` wheel,
//! named by `ORT_DYLIB_PATH` (`cargo xtask adapters` sets it from its venv) or by
//! [`OnnxRuntimeExecutor::with_library`]. Each prepared partition is written to ONNX and
//! loaded as one onnxruntime session on the CPU execution provider.
//!
//! Invariants:
//! - `probe` never panics and never aborts: a missing path, a library that does not load or
//!   an onnxruntime older than the C API level `ort` is built for (1.23) is
//!   `Unavailable { LibraryMissing }` with the path looked at and the loader's message.
//! - `supports` asks onnxruntime itself: the node, in its context, is loaded as a one-node
//!   session (cached per one-node model, see concord-adapter-common). A node onnxruntime
//!   cannot load — an op, attribute or element type its CPU provider has no kernel for —
//!   is declined with onnxruntime's own message, before any partition is made.
//! - Results are bit-identical for the same input through the same partition: every
//!   session runs with a fixed intra-op thread count (1 by default), sequential execution
//!   and onnxruntime's deterministic-compute switch, so `deterministic()` is true (the
//!   test `results_do_not_depend_on_the_thread_count` checks it across thread counts too).
//! - `run(&self)` may be called from many threads: `ort` sessions run through `&mut`, so a
//!   partition keeps a pool of sessions of the same model and each call takes one.
//!
//! One thing is process-wide, because `ort` makes it so: `ort` loads one onnxruntime library
//! per process and allows one onnxruntime environment per process (a second
//! `EnvironmentBuilder::build` is refused). The adapter keeps that pair, once made, in a
//! write-once static ([`Runtime`]); it is never mutated afterwards, and an executor asking
//! for a different library than the one already loaded is told so by its probe.

use concord::executor::{
    Availability, DType, DeviceInfo, Error, Executor, FallbackCause, Graph, Node,
    PreparedPartition, ProfileSink, Support, Target, TargetSpec, Tensor, TensorData,
};
use concord_adapter_common::{
    contained, node_graph, onnx_bytes, record_partition, short, SupportCache,
};
use ort::environment::Environment;
use ort::session::builder::SessionBuilder;
use ort::session::Session;
use ort::value::{DynValue, TensorElementType, TensorRef, ValueType};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The executor's (and backend's) name.
pub const NAME: &str = "onnxruntime";
/// Its one target: onnxruntime's CPU execution provider, storing and computing in the
/// model's own types (f32 for the suite's float cases).
pub const TARGET: Target = Target::new("onnxruntime");
/// The environment variable naming the onnxruntime shared library (`ort`'s own convention).
pub const LIBRARY_ENV: &str = "ORT_DYLIB_PATH";
/// The newest default-domain opset onnxruntime 1.23 loads ("official support for domain
/// ai.onnx is till opset 23"; a model importing 24 is refused). A partition of an opset-24
/// graph is written at 23, and an op introduced at 24 is declined.
pub const MAX_OPSET: i64 = 23;

/// onnxruntime behind the executor contract. Cheap to make; the library is loaded by the
/// first probe (or `supports`/`prepare`) that needs it.
#[derive(Debug)]
pub struct OnnxRuntimeExecutor {
    settings: Settings,
    /// Answers of onnxruntime about single nodes, keyed by their one-node model.
    support: SupportCache,
}

/// Where the library is and how sessions run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub library: LibrarySource,
    /// onnxruntime's intra-op thread count for every session (1: one thread per call; the
    /// suite's concurrency scenarios supply the parallelism).
    pub intra_op_threads: usize,
}

/// Where the onnxruntime shared library is looked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibrarySource {
    /// The path in `ORT_DYLIB_PATH`, read when the executor is made.
    Environment(Option<PathBuf>),
    /// A path given by the caller.
    Path(PathBuf),
}

/// The library `ort` loaded in this process and the one environment it allows.
struct Runtime {
    /// The library as given (canonicalised when possible), for comparison and reports.
    library: PathBuf,
    /// onnxruntime's build string ("ORT Build Info: git-branch=…, git-commit-id=…").
    build: String,
    environment: Environment,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("library", &self.library)
            .field("build", &self.build)
            .finish_non_exhaustive()
    }
}

/// The process's onnxruntime, once loaded: see the crate documentation for why this is a
/// static. Only successful loads are stored, so a failed probe can be retried.
static RUNTIME: OnceLock<Runtime> = OnceLock::new();
/// Serialises the first load, so two threads probing at once load the library once.
static LOADING: Mutex<()> = Mutex::new(());

/// One prepared partition: the model's bytes and a pool of sessions made from them.
struct OrtPartition {
    name: String,
    model: Vec<u8>,
    settings: Settings,
    inputs: Vec<String>,
    outputs: Vec<String>,
    /// The partition's node names, attributed to the engine in a profile.
    nodes: Vec<String>,
    /// Sessions not in use. A call takes one (or makes one when all are busy) and puts it
    /// back, so the pool grows to the number of concurrent callers and no further.
    idle: Mutex<Vec<Session>>,
}

impl std::fmt::Debug for OrtPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtPartition")
            .field("name", &self.name)
            .field("model_bytes", &self.model.len())
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish_non_exhaustive()
    }
}

impl Default for OnnxRuntimeExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl OnnxRuntimeExecutor {
    /// The executor for the library named by `ORT_DYLIB_PATH`, one intra-op thread.
    pub fn new() -> Self {
        Self::with_settings(Settings {
            library: LibrarySource::Environment(std::env::var_os(LIBRARY_ENV).map(PathBuf::from)),
            intra_op_threads: 1,
        })
    }

    /// The executor for the library at `path`, one intra-op thread.
    pub fn with_library(path: impl Into<PathBuf>) -> Self {
        Self::with_settings(Settings {
            library: LibrarySource::Path(path.into()),
            intra_op_threads: 1,
        })
    }

    pub fn with_settings(settings: Settings) -> Self {
        OnnxRuntimeExecutor {
            settings,
            support: SupportCache::default(),
        }
    }

    /// The same executor with `threads` intra-op threads per session (at least one).
    pub fn intra_op_threads(mut self, threads: usize) -> Self {
        self.settings.intra_op_threads = threads.max(1);
        self
    }

    /// The process's onnxruntime, loading it from this executor's library if nothing is
    /// loaded yet; the reason it cannot be had otherwise.
    fn runtime(&self) -> Result<&'static Runtime, String> {
        let path = self.settings.library.path()?;
        if let Some(loaded) = RUNTIME.get() {
            return loaded.serves(path);
        }
        let _first = LOADING
            .lock()
            .map_err(|_| "an earlier attempt to load onnxruntime panicked".to_string())?;
        if let Some(loaded) = RUNTIME.get() {
            return loaded.serves(path);
        }
        if let Err(e) = std::fs::metadata(path) {
            return Err(format!(
                "looked for the onnxruntime library at {} ({}): {e}; {}",
                path.display(),
                self.settings.library.origin(),
                HOW_TO_GET_IT
            ));
        }
        let environment = contained("onnxruntime", "loading its library", || {
            let builder = ort::init_from(path).map_err(|e| e.to_string())?;
            builder
                .with_name("concord")
                .with_telemetry(false)
                .build()
                .map_err(|e| e.to_string())
        })
        .and_then(|r| r)
        .map_err(|e| {
            format!(
                "the onnxruntime library at {} ({}) did not load: {e}",
                path.display(),
                self.settings.library.origin()
            )
        })?;
        let build = contained("onnxruntime", "reporting its build", || {
            ort::info().to_string()
        })?;
        Ok(RUNTIME.get_or_init(|| Runtime {
            library: canonical(path),
            build,
            environment,
        }))
    }

    /// A session of `model` with this executor's settings.
    fn session(&self, runtime: &Runtime, model: &[u8]) -> Result<Session, String> {
        new_session(&self.settings, runtime, model)
    }
}

/// What to do when the library is not found.
const HOW_TO_GET_IT: &str = "point ORT_DYLIB_PATH at libonnxruntime.so.1.23.2 inside the \
    PyPI onnxruntime wheel (site-packages/onnxruntime/capi/); `cargo xtask adapters` \
    installs the wheel pinned in xtask/golden/requirements.txt and sets it";

impl LibrarySource {
    fn path(&self) -> Result<&Path, String> {
        match self {
            LibrarySource::Path(p) | LibrarySource::Environment(Some(p)) => Ok(p),
            LibrarySource::Environment(None) => {
                Err(format!("{LIBRARY_ENV} is not set: {HOW_TO_GET_IT}"))
            }
        }
    }

    fn origin(&self) -> &'static str {
        match self {
            LibrarySource::Path(_) => "given to OnnxRuntimeExecutor::with_library",
            LibrarySource::Environment(_) => "from ORT_DYLIB_PATH",
        }
    }
}

impl Runtime {
    /// This runtime, if it is the library at `path`; `ort` cannot load a second one.
    fn serves(&'static self, path: &Path) -> Result<&'static Runtime, String> {
        if canonical(path) == self.library {
            Ok(self)
        } else {
            Err(format!(
                "this process already loaded onnxruntime from {}, and ort loads one library \
                 per process, so {} cannot be used as well",
                self.library.display(),
                path.display()
            ))
        }
    }

    /// The release, from the library's file name (`libonnxruntime.so.1.23.2`): onnxruntime's
    /// build string does not carry it. `ort` refused the library if its C API is older
    /// than 1.23, so without a versioned name that much is still known.
    fn version(&self) -> String {
        self.library
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("libonnxruntime.so."))
            .map(str::to_string)
            .unwrap_or_else(|| "1.23 or newer (C API level checked by ort)".to_string())
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A session of `model`: CPU execution provider (onnxruntime's default), a fixed intra-op
/// thread count, one inter-op thread, sequential execution and deterministic compute.
fn new_session(settings: &Settings, runtime: &Runtime, model: &[u8]) -> Result<Session, String> {
    contained("onnxruntime", "creating a session", || {
        let builder = configured(SessionBuilder::new(&runtime.environment), settings)?;
        let mut builder = builder;
        builder.commit_from_memory(model).map_err(|e| e.to_string())
    })
    .and_then(|r| r)
}

fn configured(
    builder: ort::Result<SessionBuilder>,
    settings: &Settings,
) -> Result<SessionBuilder, String> {
    let text = |e: ort::Error<SessionBuilder>| e.to_string();
    builder
        .map_err(|e| e.to_string())?
        .with_intra_threads(settings.intra_op_threads)
        .map_err(text)?
        .with_inter_threads(1)
        .map_err(text)?
        .with_parallel_execution(false)
        .map_err(text)?
        .with_deterministic_compute(true)
        .map_err(text)
}

impl Executor for OnnxRuntimeExecutor {
    fn name(&self) -> &str {
        NAME
    }

    fn probe(&self) -> Availability {
        match self.runtime() {
            Ok(runtime) => Availability::Available {
                devices: vec![DeviceInfo {
                    name: "onnxruntime CPUExecutionProvider".into(),
                    vendor: "Microsoft".into(),
                    driver_version: runtime.version(),
                    details: [
                        ("library".to_string(), runtime.library.display().to_string()),
                        (
                            "intra_op_threads".to_string(),
                            self.settings.intra_op_threads.to_string(),
                        ),
                        ("build".to_string(), runtime.build.clone()),
                    ]
                    .into_iter()
                    .collect(),
                    ..DeviceInfo::default()
                }],
            },
            Err(reason) => Availability::Unavailable {
                cause: FallbackCause::LibraryMissing,
                reason,
            },
        }
    }

    fn targets(&self) -> Vec<TargetSpec> {
        vec![TargetSpec::new(TARGET, DType::F32, DType::F32)]
    }

    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support {
        if *target != TARGET {
            return Support::No(format!("{NAME} runs target {TARGET} only, not {target}"));
        }
        let op = node.op.name();
        if let Some(schema) = concord::op::schema_of("", op) {
            if schema.since > MAX_OPSET {
                return Support::No(format!(
                    "onnxruntime 1.23 reads ai.onnx opsets up to {MAX_OPSET}; {op} was \
                     introduced at opset {}",
                    schema.since
                ));
            }
        }
        let runtime = match self.runtime() {
            Ok(r) => r,
            Err(reason) => return Support::No(format!("{NAME} is unavailable: {reason}")),
        };
        let opset = graph.opset.min(MAX_OPSET);
        let model = match node_graph(graph, node, opset).and_then(|g| onnx_bytes(&g, opset)) {
            Ok(bytes) => bytes,
            Err(e) => return Support::No(format!("the node cannot be written as ONNX: {e}")),
        };
        self.support
            .answer(model, |bytes| match self.session(runtime, bytes) {
                Ok(_) => Support::Yes,
                Err(e) => Support::No(format!("onnxruntime cannot load it: {}", short(&e))),
            })
    }

    fn prepare(
        &self,
        partition: &Graph,
        _target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        let failed = |detail: String| Error::Device {
            executor: NAME.into(),
            node: None,
            detail: format!("partition `{}`: {detail}", partition.name),
        };
        let runtime = self.runtime().map_err(failed)?;
        let model = onnx_bytes(partition, partition.opset.min(MAX_OPSET)).map_err(failed)?;
        // The first session is made now, so a partition onnxruntime cannot load fails the
        // build, not the first forward.
        let first = self.session(runtime, &model).map_err(failed)?;
        Ok(Box::new(OrtPartition {
            name: partition.name.clone(),
            model,
            settings: self.settings.clone(),
            inputs: partition.inputs.iter().map(|i| i.name.clone()).collect(),
            outputs: partition.outputs.clone(),
            nodes: partition.nodes.iter().map(|n| n.name.clone()).collect(),
            idle: Mutex::new(vec![first]),
        }))
    }
}

impl OrtPartition {
    fn error(&self, detail: String) -> Error {
        Error::Device {
            executor: NAME.into(),
            node: None,
            detail: format!("partition `{}`: {detail}", self.name),
        }
    }

    /// One run on `session`: inputs by name (borrowed, not copied), outputs in the
    /// partition's order.
    fn run_on(
        &self,
        session: &mut Session,
        inputs: &BTreeMap<String, Tensor>,
    ) -> Result<Vec<Tensor>, String> {
        let mut feeds = Vec::with_capacity(self.inputs.len());
        for name in &self.inputs {
            let tensor = inputs
                .get(name)
                .ok_or_else(|| format!("input `{name}` was not given"))?;
            feeds.push((
                name.as_str(),
                input_value(tensor).map_err(|e| format!("input `{name}`: {e}"))?,
            ));
        }
        let outputs = session.run(feeds).map_err(|e| e.to_string())?;
        self.outputs
            .iter()
            .map(|name| {
                let value = outputs
                    .get(name)
                    .ok_or_else(|| format!("onnxruntime returned no output `{name}`"))?;
                output_tensor(value).map_err(|e| format!("output `{name}`: {e}"))
            })
            .collect()
    }
}

impl PreparedPartition for OrtPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let started = Instant::now();
        let runtime = RUNTIME
            .get()
            .ok_or_else(|| self.error("onnxruntime is not loaded".into()))?;
        let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut session = match pooled {
            Some(s) => s,
            None => new_session(&self.settings, runtime, &self.model).map_err(|e| self.error(e))?,
        };
        let result = contained("onnxruntime", "running a session", || {
            self.run_on(&mut session, inputs)
        })
        .and_then(|r| r)
        .map_err(|e| self.error(e));
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(session);
        }
        if let Some(sink) = profile {
            // onnxruntime runs the partition as one unit: its time goes under the partition's
            // name, and each node is attributed to onnxruntime (see `record_partition`).
            record_partition(
                sink,
                NAME,
                &self.name,
                &self.nodes,
                result.is_ok(),
                started.elapsed(),
            );
        }
        result
    }
}

/// A view of a Concord tensor as an onnxruntime input, for every element type Concord has.
fn input_value(tensor: &Tensor) -> Result<ort::session::SessionInputValue<'_>, String> {
    let shape: Vec<i64> = tensor
        .dims()
        .iter()
        .map(|&d| i64::try_from(d).map_err(|_| format!("dimension {d} does not fit in i64")))
        .collect::<Result<_, _>>()?;
    macro_rules! view {
        ($v:expr) => {
            TensorRef::from_array_view((shape, $v.as_slice()))
                .map(Into::into)
                .map_err(|e| e.to_string())
        };
    }
    match tensor.data() {
        TensorData::F32(v) => view!(v),
        TensorData::F16(v) => view!(v),
        TensorData::BF16(v) => view!(v),
        TensorData::F64(v) => view!(v),
        TensorData::I8(v) => view!(v),
        TensorData::I16(v) => view!(v),
        TensorData::I32(v) => view!(v),
        TensorData::I64(v) => view!(v),
        TensorData::U8(v) => view!(v),
        TensorData::U16(v) => view!(v),
        TensorData::U32(v) => view!(v),
        TensorData::U64(v) => view!(v),
        TensorData::Bool(v) => view!(v),
    }
}

/// An onnxruntime output as a Concord tensor; an element type Concord does not have
/// (strings, complex, the 8- and 4-bit formats) or a non-tensor value is an error.
fn output_tensor(value: &DynValue) -> Result<Tensor, String> {
    let ValueType::Tensor { ty, .. } = value.dtype() else {
        return Err(format!("a {} value, not a tensor", value.dtype()));
    };
    macro_rules! copy {
        ($t:ty, $variant:ident) => {{
            let (shape, data) = value
                .try_extract_tensor::<$t>()
                .map_err(|e| e.to_string())?;
            let dims: Vec<usize> = shape
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
                .collect::<Result<_, _>>()?;
            Tensor::new(dims, TensorData::$variant(data.to_vec())).map_err(|e| e.to_string())
        }};
    }
    match ty {
        TensorElementType::Float32 => copy!(f32, F32),
        TensorElementType::Float16 => copy!(half::f16, F16),
        TensorElementType::Bfloat16 => copy!(half::bf16, BF16),
        TensorElementType::Float64 => copy!(f64, F64),
        TensorElementType::Int8 => copy!(i8, I8),
        TensorElementType::Int16 => copy!(i16, I16),
        TensorElementType::Int32 => copy!(i32, I32),
        TensorElementType::Int64 => copy!(i64, I64),
        TensorElementType::Uint8 => copy!(u8, U8),
        TensorElementType::Uint16 => copy!(u16, U16),
        TensorElementType::Uint32 => copy!(u32, U32),
        TensorElementType::Uint64 => copy!(u64, U64),
        TensorElementType::Bool => copy!(bool, Bool),
        other => Err(format!("element type {other} has no Concord tensor type")),
    }
}
