//! [`Net`] and [`NetBuilder`]: build once (validate, infer, fold), then `forward` from any
//! number of threads.

use crate::error::Error;
use crate::planner::{plan, Overrides, PlannedPartition, Preferences};
use crate::profile::{ForwardRecorder, Profile, Profiler};
use crate::registry::ExecutorRegistry;
use concord_core::{
    Backend, Deadline, Dim, Executor, FallbackPolicy, Graph, MemoryBudget, Placement, ProfileSink,
    Target, Tensor, ValueInfo,
};
use concord_cpu::ReferenceEvaluator;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Duration;

/// A model ready to run. Share it (`Arc<Net>` or `&Net`) and call [`Net::forward`] from as
/// many threads as you like, or [`Net::forward_async`] to run on the net's worker pool.
#[derive(Debug)]
pub struct Net {
    inner: Arc<NetInner>,
    /// Started on the first `forward_async`; its threads end when the net is dropped.
    pool: OnceLock<WorkerPool>,
}

/// Everything a forward reads; shared with the worker pool.
#[derive(Debug)]
struct NetInner {
    graph: Graph,
    partitions: Vec<PlannedPartition>,
    placement: Placement,
    profiler: Option<Profiler>,
    memory: MemoryBudget,
    time_limit: Option<Duration>,
}

/// A forward running on the net's worker pool; [`Pending::wait`] returns its outputs.
#[derive(Debug)]
#[must_use = "a Pending does nothing unless waited for"]
pub struct Pending {
    receiver: mpsc::Receiver<Result<Outputs, Error>>,
}

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A fixed set of threads taking forwards from a queue.
#[derive(Debug)]
struct WorkerPool {
    sender: Mutex<Option<mpsc::Sender<Job>>>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

/// Where a [`NetBuilder`] takes its model from.
#[derive(Debug)]
enum Source {
    File(PathBuf),
    Bytes(Vec<u8>),
    Graph(Box<Graph>),
}

/// Configures and builds a [`Net`]: where the model comes from, which backend and target
/// to ask for, and what to do when they cannot be had.
#[derive(Debug)]
pub struct NetBuilder {
    source: Source,
    backend: Backend,
    target: Option<Target>,
    policy: FallbackPolicy,
    overrides: Option<Overrides>,
    registry: ExecutorRegistry,
    profiling: bool,
    memory_limit: Option<u64>,
    time_limit: Option<Duration>,
}

/// Named outputs of one forward, in the model's output order.
#[derive(Clone, Debug, PartialEq)]
pub struct Outputs(Vec<(String, Tensor)>);

impl Net {
    /// Reads an ONNX model file and builds a net with default settings.
    pub fn from_onnx_file(path: impl AsRef<Path>) -> Result<Net, Error> {
        NetBuilder::from_onnx_file(path).build()
    }

    /// Reads an ONNX model from memory and builds a net with default settings.
    pub fn from_onnx_bytes(bytes: impl Into<Vec<u8>>) -> Result<Net, Error> {
        NetBuilder::from_onnx_bytes(bytes).build()
    }

    /// Builds a net from a graph made with the core API.
    pub fn from_graph(graph: Graph) -> Result<Net, Error> {
        NetBuilder::from_graph(graph).build()
    }

    /// The model's runtime inputs.
    pub fn inputs(&self) -> &[ValueInfo] {
        &self.inner.graph.inputs
    }

    /// The model's outputs with their inferred types.
    pub fn outputs(&self) -> Vec<ValueInfo> {
        self.inner
            .graph
            .outputs
            .iter()
            .filter_map(|name| self.inner.graph.values.get(name).cloned())
            .collect()
    }

    /// The graph as built: validated, sorted, shape-inferred and constant-folded.
    pub fn graph(&self) -> &Graph {
        &self.inner.graph
    }

    /// Where every node runs and why, decided when the net was built.
    pub fn placement(&self) -> &Placement {
        &self.inner.placement
    }

    /// The memory budget the net was built with ([`NetBuilder::memory_limit`]): what its
    /// executors check every allocation against, and what a caller sizing inputs from the
    /// model's declared shapes should check them against too.
    pub fn memory_budget(&self) -> MemoryBudget {
        self.inner.memory
    }

    /// The time limit of each forward ([`NetBuilder::time_limit`]), None when unlimited.
    pub fn time_limit(&self) -> Option<Duration> {
        self.inner.time_limit
    }

    /// Per-node and per-transfer times since the last [`Net::reset_profile`] (the first,
    /// warm-up forward reported separately). Empty unless built with profiling on.
    pub fn profile(&self) -> Profile {
        self.inner
            .profiler
            .as_ref()
            .map(Profiler::snapshot)
            .unwrap_or_default()
    }

    /// Starts a new profile; the next forward is the warm-up again.
    pub fn reset_profile(&self) {
        if let Some(p) = &self.inner.profiler {
            p.reset();
        }
    }

    /// Runs the model. Inputs are given by name; every model input must be present once,
    /// with the model's dtype and a shape that matches its fixed dims (named dims must
    /// agree across inputs); a mismatch is [`Error::InputShape`] naming the input and axis.
    /// Named dims may differ from one forward to the next.
    pub fn forward<S: Into<String>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<Outputs, Error> {
        self.inner.forward(inputs)
    }

    /// Starts a forward on the net's worker pool and returns at once; the inputs are
    /// checked before it is queued. Any number may be in flight, interleaved with
    /// [`Net::forward`] calls from other threads.
    pub fn forward_async<S: Into<String>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<Pending, Error> {
        let inputs = self.inner.check_inputs(inputs)?;
        let (sender, receiver) = mpsc::channel();
        let inner = self.inner.clone();
        let job: Job = Box::new(move || {
            // The receiver may have been dropped; the result is then not wanted.
            let _ = sender.send(inner.run_checked(inputs));
        });
        self.pool.get_or_init(WorkerPool::start).submit(job)?;
        Ok(Pending { receiver })
    }
}

impl NetInner {
    fn forward<S: Into<String>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<Outputs, Error> {
        let inputs = self.check_inputs(inputs)?;
        self.run_checked(inputs)
    }

    fn run_checked(&self, inputs: BTreeMap<String, Tensor>) -> Result<Outputs, Error> {
        match &self.profiler {
            None => self.run_partitions(inputs, None),
            Some(profiler) => {
                let recorder = ForwardRecorder::default();
                let outputs = self.run_partitions(inputs, Some(&recorder));
                profiler.merge(recorder);
                outputs
            }
        }
    }

    fn run_partitions(
        &self,
        inputs: BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Outputs, Error> {
        let deadline = self.time_limit.map(Deadline::starting_now);
        let mut values: HashMap<String, Tensor> = inputs.into_iter().collect();
        for partition in &self.partitions {
            concord_core::deadline::check(deadline, || "the forward".to_string()).map_err(
                |source| Error::TimeLimit {
                    executor: partition.executor.clone(),
                    outputs: partition.outputs.join(", "),
                    source,
                },
            )?;
            let mut operands = BTreeMap::new();
            for (name, last_reader) in &partition.inputs {
                let tensor = if *last_reader {
                    values.remove(name)
                } else {
                    values.get(name).cloned()
                };
                let tensor = tensor.ok_or_else(|| Error::Contract {
                    executor: partition.executor.clone(),
                    detail: format!(
                        "partition input `{name}` was not produced by an earlier partition"
                    ),
                })?;
                operands.insert(name.clone(), tensor);
            }
            let results = partition.prepared.run_until(&operands, profile, deadline)?;
            if results.len() != partition.outputs.len() {
                return Err(Error::Contract {
                    executor: partition.executor.clone(),
                    detail: format!(
                        "returned {} outputs for a partition with {} ({} on {})",
                        results.len(),
                        partition.outputs.len(),
                        partition.outputs.join(", "),
                        partition.target
                    ),
                });
            }
            for (name, tensor) in partition.outputs.iter().zip(results) {
                values.insert(name.clone(), tensor);
            }
        }
        let mut outputs = Vec::with_capacity(self.graph.outputs.len());
        for name in &self.graph.outputs {
            let tensor = values
                .get(name)
                .or_else(|| self.graph.initializers.get(name))
                .cloned()
                .ok_or_else(|| concord_core::Error::DanglingOutput {
                    value: name.clone(),
                })?;
            outputs.push((name.clone(), tensor));
        }
        Ok(Outputs(outputs))
    }

    fn check_inputs<S: Into<String>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<BTreeMap<String, Tensor>, Error> {
        let mut given: BTreeMap<String, Tensor> = BTreeMap::new();
        for (name, tensor) in inputs {
            let name = name.into();
            if !self.graph.inputs.iter().any(|i| i.name == name) {
                return Err(Error::UnknownInput {
                    name,
                    expected: self.graph.inputs.iter().map(|i| i.name.clone()).collect(),
                });
            }
            if given.contains_key(&name) {
                return Err(Error::DuplicateInput { name });
            }
            given.insert(name, tensor);
        }
        let mut named_dims: HashMap<&str, (usize, &str)> = HashMap::new();
        for info in &self.graph.inputs {
            let Some(tensor) = given.get(&info.name) else {
                return Err(Error::MissingInput {
                    name: info.name.clone(),
                    expected: info.describe(),
                });
            };
            check_input(info, tensor, &mut named_dims)?;
        }
        Ok(given)
    }
}

fn check_input<'a>(
    info: &'a ValueInfo,
    tensor: &Tensor,
    named_dims: &mut HashMap<&'a str, (usize, &'a str)>,
) -> Result<(), Error> {
    if tensor.dtype() != info.dtype {
        return Err(Error::InputDType {
            name: info.name.clone(),
            expected: info.dtype,
            actual: tensor.dtype(),
        });
    }
    let expected = concord_core::shape::format_sym(&info.shape);
    if tensor.rank() != info.shape.len() {
        return Err(Error::InputRank {
            name: info.name.clone(),
            expected,
            expected_rank: info.shape.len(),
            actual: tensor.shape().clone(),
        });
    }
    for (axis, (dim, &actual)) in info.shape.iter().zip(tensor.dims()).enumerate() {
        match dim {
            Dim::Fixed(n) if *n != actual => {
                return Err(Error::InputShape {
                    name: info.name.clone(),
                    expected,
                    actual: tensor.shape().clone(),
                    axis,
                    detail: format!("axis {axis} is {actual}, expected {n}"),
                });
            }
            Dim::Named(symbol) => match named_dims.get(symbol.as_str()) {
                Some(&(bound, by)) if bound != actual => {
                    return Err(Error::InputShape {
                        name: info.name.clone(),
                        expected,
                        actual: tensor.shape().clone(),
                        axis,
                        detail: format!(
                            "axis {axis} (`{symbol}`) is {actual}, but `{symbol}` is {bound} in input `{by}`"
                        ),
                    });
                }
                Some(_) => {}
                None => {
                    named_dims.insert(symbol.as_str(), (actual, info.name.as_str()));
                }
            },
            _ => {}
        }
    }
    Ok(())
}

impl NetBuilder {
    fn new(source: Source) -> NetBuilder {
        NetBuilder {
            source,
            backend: crate::backends::CPU,
            target: None,
            policy: FallbackPolicy::default(),
            overrides: None,
            registry: ExecutorRegistry::with_builtins(),
            profiling: false,
            memory_limit: None,
            time_limit: None,
        }
    }

    pub fn from_onnx_file(path: impl AsRef<Path>) -> NetBuilder {
        Self::new(Source::File(path.as_ref().to_path_buf()))
    }

    pub fn from_onnx_bytes(bytes: impl Into<Vec<u8>>) -> NetBuilder {
        Self::new(Source::Bytes(bytes.into()))
    }

    pub fn from_graph(graph: Graph) -> NetBuilder {
        Self::new(Source::Graph(Box::new(graph)))
    }

    /// The backend to ask for (default: the reference CPU executor).
    pub fn backend(mut self, backend: impl Into<Backend>) -> Self {
        self.backend = backend.into();
        self
    }

    /// The target to ask for (default: the backend's default target).
    pub fn target(mut self, target: impl Into<Target>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// What to do when the request cannot be met (default: Warn).
    /// `CONCORD_FALLBACK` overrides it.
    pub fn fallback(mut self, policy: FallbackPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Uses these overrides instead of reading `CONCORD_FALLBACK` / `CONCORD_REQUIRE`.
    pub fn overrides(mut self, overrides: Overrides) -> Self {
        self.overrides = Some(overrides);
        self
    }

    /// Registers an executor (a backend author's) in this net's registry.
    pub fn executor(mut self, executor: Arc<dyn Executor>) -> Self {
        self.registry.register(executor);
        self
    }

    /// Uses this registry instead of the built-in one.
    pub fn registry(mut self, registry: ExecutorRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Times every node and transfer of every forward (see [`Net::profile`]).
    pub fn profiling(mut self, on: bool) -> Self {
        self.profiling = on;
        self
    }

    /// The most bytes one allocation sized by the model or its inputs may take: a model
    /// file, a folded value, a kernel's outputs, a device buffer. Over it, building or
    /// running is an error naming the node, op, shape and bytes instead of an abort. Without
    /// it, `CONCORD_MEMORY_LIMIT` decides, else the machine's default
    /// ([`MemoryBudget::machine_default`]: half the smallest of physical memory, the
    /// cgroup limit and the address-space limit).
    pub fn memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self
    }

    /// The most wall-clock time one forward may take, and the build's constant folding:
    /// past it, the run stops with an error naming the node, op and limit
    /// ([`concord_core::OpError::TimeLimit`]) instead of running on (a Loop whose state
    /// grows each iteration, a RoiAlign or DFT asked for hours of work on small data).
    /// The reference executor checks it before every node, subgraph nodes (every Loop
    /// iteration) included, and inside long kernel loops; other executors' partitions are
    /// checked between partitions. Without it, `CONCORD_TIME_LIMIT` decides (`30s`,
    /// `500ms`, `2m`), else there is no limit. See [`concord_core::deadline`].
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }

    /// The time limit this builder's net is held to (see [`NetBuilder::time_limit`]),
    /// None for none.
    pub fn time_limit_setting(&self) -> Result<Option<Duration>, Error> {
        match self.time_limit {
            Some(limit) => Ok(Some(limit)),
            None => concord_core::deadline::time_limit_from_env().map_err(|_| Error::Environment {
                variable: concord_core::deadline::TIME_LIMIT_ENV,
                value: std::env::var(concord_core::deadline::TIME_LIMIT_ENV).unwrap_or_default(),
                expected: "a duration: a number with ms, s, m or h (30s, 500ms, 2m)",
            }),
        }
    }

    /// The budget this builder's net is held to (see [`NetBuilder::memory_limit`]).
    pub fn memory_budget(&self) -> Result<MemoryBudget, Error> {
        match self.memory_limit {
            Some(bytes) => Ok(MemoryBudget::new(bytes)),
            None => match MemoryBudget::from_env() {
                Ok(budget) => Ok(budget.unwrap_or_else(MemoryBudget::machine_default)),
                Err(_) => Err(Error::Environment {
                    variable: concord_core::memory::MEMORY_LIMIT_ENV,
                    value: std::env::var(concord_core::memory::MEMORY_LIMIT_ENV)
                        .unwrap_or_default(),
                    expected: "a byte count: digits, optionally followed by K, M, G or T",
                }),
            },
        }
    }

    /// Loads, validates, infers shapes and folds constants. Every check that does not need
    /// the caller's input values happens here, not at the first forward.
    pub fn build(self) -> Result<Net, Error> {
        let memory = self.memory_budget()?;
        let time_limit = self.time_limit_setting()?;
        let mut graph = match self.source {
            Source::File(path) => concord_onnx::load_file_within(&path, memory.limit())?,
            Source::Bytes(bytes) => concord_onnx::load(&bytes)?,
            Source::Graph(graph) => *graph,
        };
        let folding = time_limit.map(Deadline::starting_now);
        graph.fold_constants(&ReferenceEvaluator::within(memory).until(folding))?;
        let overrides = match self.overrides {
            Some(o) => o,
            None => Overrides::from_env()?,
        };
        let prefs = Preferences {
            backend: self.backend,
            target: self.target,
            policy: self.policy,
            overrides,
            memory,
        };
        let planned = plan(&graph, &prefs, &self.registry)?;
        let profiler = self.profiling.then(|| {
            let labels = planned
                .placement
                .nodes
                .iter()
                .map(|n| {
                    (
                        n.name.clone(),
                        (n.op.clone(), format!("{}/{}", n.executor, n.target)),
                    )
                })
                .collect();
            Profiler::new(labels)
        });
        Ok(Net {
            inner: Arc::new(NetInner {
                graph,
                partitions: planned.partitions,
                placement: planned.placement,
                profiler,
                memory,
                time_limit,
            }),
            pool: OnceLock::new(),
        })
    }
}

impl Pending {
    /// Blocks until the forward is done.
    pub fn wait(self) -> Result<Outputs, Error> {
        self.receiver.recv().unwrap_or_else(|_| {
            Err(Error::Contract {
                executor: "worker pool".into(),
                detail: "the worker running this forward stopped before finishing it".into(),
            })
        })
    }
}

impl WorkerPool {
    fn start() -> WorkerPool {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .clamp(2, 8);
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let workers = (0..threads)
            .filter_map(|i| {
                let receiver = receiver.clone();
                std::thread::Builder::new()
                    .name(format!("concord-forward-{i}"))
                    .spawn(move || loop {
                        // Hold the lock only to take a job, not while running it.
                        let job = match receiver.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    })
                    .ok()
            })
            .collect();
        WorkerPool {
            sender: Mutex::new(Some(sender)),
            workers,
        }
    }

    fn submit(&self, job: Job) -> Result<(), Error> {
        let unavailable = || Error::Contract {
            executor: "worker pool".into(),
            detail: "no worker thread could be started for forward_async".into(),
        };
        if self.workers.is_empty() {
            return Err(unavailable());
        }
        let guard = self.sender.lock().map_err(|_| unavailable())?;
        guard
            .as_ref()
            .ok_or_else(unavailable)?
            .send(job)
            .map_err(|_| unavailable())
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        // Closing the queue lets each worker finish its job and exit.
        if let Ok(mut s) = self.sender.lock() {
            s.take();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Outputs {
    /// The output called `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.0.iter().map(|(n, t)| (n.as_str(), t))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_vec(self) -> Vec<(String, Tensor)> {
        self.0
    }
}

impl IntoIterator for Outputs {
    type Item = (String, Tensor);
    type IntoIter = std::vec::IntoIter<(String, Tensor)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn net_is_send_and_sync() {
        assert_send_sync::<Net>();
    }
}
