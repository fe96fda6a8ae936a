//! concord-adapter-tract: tract (tract-onnx, pure Rust) as a Concord executor, adapted the way
//! an outside backend author would adapt it — through `concord`'s public API, with
//! concord-onnx's writer, and held to agreement by the conformance suite with its own
//! expectations file (conformance/tract.toml).
//!
//! Each prepared partition is written to ONNX and loaded by tract-onnx, typed with the input
//! facts the partition declares (a symbolic dim becomes a tract symbol), optimised and made
//! runnable once; `run` spawns a fresh tract state per call.
//!
//! Invariants:
//! - `supports` asks tract itself: the node, in its context, is written as a one-node model
//!   with the operand types and shapes the partition will declare, and tract must load,
//!   type and optimise it (cached per one-node model, see concord-adapter-common). A node
//!   tract cannot serve — an op tract-onnx does not register, an attribute value or rank it
//!   does not handle, shapes it cannot type symbolically — is declined with tract's own
//!   message. This is "declare support only for what you can serve": partitions are built
//!   from the same declared facts, never concretised per forward shape.
//! - bfloat16 is declined, naming it: tract has no bfloat16 element type. Every other
//!   element type Concord has maps to tract's own.
//! - Nothing panics: tract calls run through `contained`, which reports a panic inside
//!   tract as an error naming it.
//! - Results are bit-identical for the same input: tract runs a plan on the calling thread
//!   (no thread pool unless asked), so `deterministic()` is true.
//! - No process-global state: the tract-onnx loader and the support cache belong to the
//!   executor instance; a prepared plan is immutable and shared by concurrent calls.

use concord::executor::{
    Availability, DType, DeviceInfo, Error, Executor, Graph, Node, PreparedPartition, ProfileSink,
    Support, Target, TargetSpec, Tensor, TensorData,
};
use concord_adapter_common::{
    contained, node_graph, onnx_bytes, record_partition, short, SupportCache,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use tract_onnx::prelude::{
    tvec, DatumType, Framework, InferenceModelExt, IntoRunnable, IntoTValue, SymbolValues, TDim,
    TValue, TypedRunnableModel,
};

/// The executor's (and backend's) name.
pub const NAME: &str = "tract";
/// Its one target: tract's CPU runtime.
pub const TARGET: Target = Target::new("tract");
/// The tract-onnx release the adapter is built against (Cargo.toml pins 0.23).
pub const TRACT_RELEASE: &str = "0.23";

/// tract behind the executor contract.
pub struct TractExecutor {
    /// tract-onnx's loader, with its op registry.
    onnx: tract_onnx::Onnx,
    /// tract's answers about single nodes, keyed by their one-node model.
    support: SupportCache,
}

impl std::fmt::Debug for TractExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TractExecutor")
            .field("registered_ops", &self.onnx.op_register.0.len())
            .field("support_answers", &self.support.len())
            .finish_non_exhaustive()
    }
}

/// One prepared partition: a runnable tract plan.
struct TractPartition {
    name: String,
    plan: Arc<TypedRunnableModel>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    /// The partition's node names, attributed to the engine in a profile.
    nodes: Vec<String>,
}

impl std::fmt::Debug for TractPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TractPartition")
            .field("name", &self.name)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish_non_exhaustive()
    }
}

impl Default for TractExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl TractExecutor {
    pub fn new() -> Self {
        TractExecutor {
            onnx: tract_onnx::onnx(),
            support: SupportCache::default(),
        }
    }

    /// Loads, types, optimises and plans `model` (ONNX bytes).
    fn plan(&self, model: &[u8]) -> Result<Arc<TypedRunnableModel>, String> {
        contained("tract", "loading a model", || {
            self.onnx
                .model_for_read(&mut &model[..])
                .and_then(|m| m.into_optimized())
                .and_then(|m| m.into_runnable())
                .map_err(|e| format!("{e:#}"))
        })
        .and_then(|r| r)
    }
}

/// tract's element type for a Concord one; `None` for bfloat16, which tract lacks.
fn datum_type(dtype: DType) -> Option<DatumType> {
    Some(match dtype {
        DType::F32 => DatumType::F32,
        DType::F16 => DatumType::F16,
        DType::F64 => DatumType::F64,
        DType::I8 => DatumType::I8,
        DType::I16 => DatumType::I16,
        DType::I32 => DatumType::I32,
        DType::I64 => DatumType::I64,
        DType::U8 => DatumType::U8,
        DType::U16 => DatumType::U16,
        DType::U32 => DatumType::U32,
        DType::U64 => DatumType::U64,
        DType::Bool => DatumType::Bool,
        DType::BF16 => return None,
    })
}

impl Executor for TractExecutor {
    fn name(&self) -> &str {
        NAME
    }

    fn probe(&self) -> Availability {
        // tract is compiled in and runs on the host: nothing to look for.
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "tract (host CPU, pure Rust)".into(),
                vendor: "Sonos".into(),
                driver_version: format!("tract-onnx {TRACT_RELEASE}"),
                ..DeviceInfo::default()
            }],
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
        if !self.onnx.op_register.0.contains_key(op) {
            return Support::No(format!("tract-onnx {TRACT_RELEASE} has no {op} op"));
        }
        let values = node
            .present_inputs()
            .chain(node.outputs.iter().map(String::as_str));
        for name in values {
            let dtype = graph
                .value(name)
                .map(|v| v.dtype)
                .or_else(|| graph.initializers.get(name).map(Tensor::dtype));
            if let Some(dtype) = dtype.filter(|d| datum_type(*d).is_none()) {
                return Support::No(format!("tract has no {dtype} element type (`{name}`)"));
            }
        }
        let model =
            match node_graph(graph, node, graph.opset).and_then(|g| onnx_bytes(&g, graph.opset)) {
                Ok(bytes) => bytes,
                Err(e) => return Support::No(format!("the node cannot be written as ONNX: {e}")),
            };
        self.support.answer(model, |bytes| match self.plan(bytes) {
            Ok(_) => Support::Yes,
            Err(e) => Support::No(format!("tract cannot load it: {}", short(&e))),
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
        let model = onnx_bytes(partition, partition.opset).map_err(failed)?;
        let plan = self.plan(&model).map_err(failed)?;
        Ok(Box::new(TractPartition {
            name: partition.name.clone(),
            plan,
            inputs: partition.inputs.iter().map(|i| i.name.clone()).collect(),
            outputs: partition.outputs.clone(),
            nodes: partition.nodes.iter().map(|n| n.name.clone()).collect(),
        }))
    }
}

impl TractPartition {
    fn error(&self, detail: String) -> Error {
        Error::Device {
            executor: NAME.into(),
            node: None,
            detail: format!("partition `{}`: {detail}", self.name),
        }
    }

    fn run_plan(&self, inputs: &BTreeMap<String, Tensor>) -> Result<Vec<Tensor>, String> {
        let mut feeds = tvec![];
        for name in &self.inputs {
            let tensor = inputs
                .get(name)
                .ok_or_else(|| format!("input `{name}` was not given"))?;
            feeds.push(input_value(tensor).map_err(|e| format!("input `{name}`: {e}"))?);
        }
        // A state of our own rather than `plan.run`, so that the values the run gave the
        // partition's symbols can be read back: a Shape-like output may come back as a
        // symbolic expression in them (see `output_tensor`). `SimpleState::run` clears
        // them (its `reset_turn`) before it returns, so the steps are taken one by one
        // and the symbols read between the run and the outputs. (`run` also resolves the
        // symbols of op states with an initial tensor fact first: only tract's
        // transformer KV caches have one, and an ONNX model never contains them.)
        let mut state = self.plan.spawn().map_err(|e| format!("{e:#}"))?;
        state.set_inputs(feeds).map_err(|e| format!("{e:#}"))?;
        state.exec().map_err(|e| format!("{e:#}"))?;
        let symbols = state.turn_state.resolved_symbols.clone();
        let outputs = state.outputs().map_err(|e| format!("{e:#}"))?;
        if outputs.len() != self.outputs.len() {
            return Err(format!(
                "tract returned {} outputs, the partition has {}",
                outputs.len(),
                self.outputs.len()
            ));
        }
        outputs
            .iter()
            .zip(&self.outputs)
            .map(|(value, name)| {
                output_tensor(value, &symbols).map_err(|e| format!("output `{name}`: {e}"))
            })
            .collect()
    }
}

impl PreparedPartition for TractPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let started = Instant::now();
        let result = contained("tract", "running a plan", || self.run_plan(inputs))
            .and_then(|r| r)
            .map_err(|e| self.error(e));
        if let Some(sink) = profile {
            // tract runs the partition as one unit: its time goes under the partition's
            // name, and each node is attributed to tract (see `record_partition`).
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

/// A Concord tensor as a tract value (copied: tract owns its tensors).
fn input_value(tensor: &Tensor) -> Result<TValue, String> {
    let dims = tensor.dims();
    macro_rules! copy {
        ($v:expr) => {
            tract_onnx::prelude::Tensor::from_shape(dims, $v.as_slice())
                .map(IntoTValue::into_tvalue)
                .map_err(|e| format!("{e:#}"))
        };
    }
    match tensor.data() {
        TensorData::F32(v) => copy!(v),
        TensorData::F16(v) => copy!(v),
        TensorData::F64(v) => copy!(v),
        TensorData::I8(v) => copy!(v),
        TensorData::I16(v) => copy!(v),
        TensorData::I32(v) => copy!(v),
        TensorData::I64(v) => copy!(v),
        TensorData::U8(v) => copy!(v),
        TensorData::U16(v) => copy!(v),
        TensorData::U32(v) => copy!(v),
        TensorData::U64(v) => copy!(v),
        TensorData::Bool(v) => copy!(v),
        TensorData::BF16(_) => Err("tract has no bfloat16 element type".into()),
    }
}

/// A tract value as a Concord tensor. tract's symbolic-dimension type (TDim, which a
/// Shape-like op can return) becomes i64, the type ONNX gives those outputs, each element
/// evaluated with the values this run gave the partition's symbols (an input's declared
/// batch dim `N`, say): tract may keep such an output as an expression in `N`.
fn output_tensor(value: &TValue, symbols: &SymbolValues) -> Result<Tensor, String> {
    let dims = value.shape().to_vec();
    macro_rules! copy {
        ($value:expr, $t:ty, $variant:ident) => {{
            let plain = $value.try_as_plain_ram().map_err(|e| format!("{e:#}"))?;
            let data = plain.as_slice::<$t>().map_err(|e| format!("{e:#}"))?;
            Tensor::new(dims, TensorData::$variant(data.to_vec())).map_err(|e| e.to_string())
        }};
    }
    match value.datum_type() {
        DatumType::F32 => copy!(value, f32, F32),
        DatumType::F16 => copy!(value, half::f16, F16),
        DatumType::F64 => copy!(value, f64, F64),
        DatumType::I8 => copy!(value, i8, I8),
        DatumType::I16 => copy!(value, i16, I16),
        DatumType::I32 => copy!(value, i32, I32),
        DatumType::I64 => copy!(value, i64, I64),
        DatumType::U8 => copy!(value, u8, U8),
        DatumType::U16 => copy!(value, u16, U16),
        DatumType::U32 => copy!(value, u32, U32),
        DatumType::U64 => copy!(value, u64, U64),
        DatumType::Bool => copy!(value, bool, Bool),
        DatumType::TDim => {
            let plain = value.try_as_plain_ram().map_err(|e| format!("{e:#}"))?;
            let data = plain
                .as_slice::<TDim>()
                .map_err(|e| format!("{e:#}"))?
                .iter()
                .map(|d| d.eval_to_i64(symbols).map_err(|e| format!("{e:#}")))
                .collect::<Result<Vec<i64>, String>>()?;
            Tensor::new(dims, TensorData::I64(data)).map_err(|e| e.to_string())
        }
        other => Err(format!(
            "tract element type {other:?} has no Concord tensor type"
        )),
    }
}
