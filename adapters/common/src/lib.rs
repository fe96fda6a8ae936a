//! concord-adapter-common: what the two engine adapters (onnxruntime, tract) share and
//! Concord's public API does not provide.
//!
//! Both engines load ONNX models, so both adapters work the same way: `prepare` writes the
//! partition with concord-onnx's writer and hands the bytes to the engine, and `supports`
//! asks the engine itself, by loading the node in its context (its operand types and shapes
//! as the graph infers them, its constant operands as initializers) as a one-node model.
//! The engine's own loader is the only honest list of what it implements — per op,
//! attribute value, element type and rank — and it answers before any partition is made.
//!
//! Invariants:
//! - Nothing here panics on any graph; engine calls go through [`contained`], which turns a
//!   panic inside the engine into an error naming the engine and what it was doing.
//! - The support cache belongs to the executor instance (no process-global state), is keyed
//!   by the one-node model's bytes (so by everything that can change the answer: op,
//!   attributes, operand types and shapes, constant operands, opset) and is bounded.

use concord::executor::{Graph, Node, ProfileSink, Support, ValueInfo};
use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use std::time::Duration;

/// How many distinct nodes a [`SupportCache`] remembers before it starts over. A suite run
/// asks about a few thousand distinct nodes; a service asks about one model's.
pub const SUPPORT_CACHE_CAPACITY: usize = 8192;

/// The one-node graph of `node` in the context of `graph`, at `opset`: its present inputs
/// become graph inputs typed as `graph` infers them, or initializers where `graph` holds
/// them as constants; its outputs are all of the node's outputs.
///
/// Errors name the input whose type the graph does not know (a node that cannot be typed
/// cannot be written as a model an engine would load).
pub fn node_graph(graph: &Graph, node: &Node, opset: i64) -> Result<Graph, String> {
    let mut inputs: Vec<ValueInfo> = Vec::new();
    let mut initializers = BTreeMap::new();
    let mut values = BTreeMap::new();
    for name in node.present_inputs() {
        if inputs.iter().any(|i| i.name == name) || initializers.contains_key(name) {
            continue;
        }
        if let Some(constant) = graph.initializers.get(name) {
            initializers.insert(name.to_string(), constant.clone());
            continue;
        }
        let info = graph.value(name).ok_or_else(|| {
            format!(
                "input `{name}` of node `{}` ({}) has no inferred type",
                node.name,
                node.op.name()
            )
        })?;
        values.insert(name.to_string(), info.clone());
        inputs.push(info.clone());
    }
    for output in &node.outputs {
        if let Some(info) = graph.value(output) {
            values.insert(output.clone(), info.clone());
        }
    }
    Ok(Graph {
        name: format!("{}_probe", node.op.name()),
        inputs,
        outputs: node.outputs.clone(),
        initializers,
        nodes: vec![node.clone()],
        opset,
        values,
    })
}

/// `graph` written as ONNX by concord-onnx's writer, at `opset` (the partition's own opset
/// unless the engine reads fewer). The writer's error is returned as text naming the graph.
pub fn onnx_bytes(graph: &Graph, opset: i64) -> Result<Vec<u8>, String> {
    if graph.opset == opset {
        return concord_onnx::save(graph).map_err(|e| format!("writing `{}`: {e}", graph.name));
    }
    let mut written = graph.clone();
    written.opset = opset;
    concord_onnx::save(&written)
        .map_err(|e| format!("writing `{}` at opset {opset}: {e}", graph.name))
}

/// Runs `f`, an engine call; a panic inside the engine becomes an error saying which
/// engine panicked, doing what, with the panic's message. The engines are third-party
/// libraries: Concord's rule that library code never panics on bad input is kept at this
/// boundary rather than assumed of them.
pub fn contained<T>(engine: &str, doing: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        format!("{engine} panicked while {doing}: {message}")
    })
}

/// An executor's memory of its engine's answers, keyed by the one-node model's bytes.
#[derive(Debug, Default)]
pub struct SupportCache {
    answers: Mutex<HashMap<Vec<u8>, Support>>,
}

impl SupportCache {
    /// The cached answer for `model`, or `probe`'s, remembered. The engine is asked outside
    /// the lock, so concurrent questions about different nodes do not wait for each other
    /// (two threads asking about the same new node may both probe it; the answers agree).
    pub fn answer(&self, model: Vec<u8>, probe: impl FnOnce(&[u8]) -> Support) -> Support {
        if let Some(known) = self
            .answers
            .lock()
            .ok()
            .and_then(|a| a.get(&model).cloned())
        {
            return known;
        }
        let answer = probe(&model);
        if let Ok(mut answers) = self.answers.lock() {
            if answers.len() >= SUPPORT_CACHE_CAPACITY {
                answers.clear();
            }
            answers.insert(model, answer.clone());
        }
        answer
    }

    /// How many answers are remembered.
    pub fn len(&self) -> usize {
        self.answers.lock().map(|a| a.len()).unwrap_or(0)
    }

    /// Whether no answer is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The first line of an engine's error, without the source locations some engines put in
/// front of it, cut to a length a placement report can show.
pub fn short(message: &str) -> String {
    const LIMIT: usize = 400;
    let line = message.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    if line.chars().count() <= LIMIT {
        line.to_string()
    } else {
        let cut: String = line.chars().take(LIMIT).collect();
        format!("{cut}…")
    }
}

/// Reports a partition the engine ran as one unit: its time under the partition's name,
/// and, when the run succeeded, each of its nodes attributed to the engine with no time of
/// its own (neither engine times single nodes through these APIs, so a per-node split of
/// the partition's time would be invented). The per-node entries are what says which
/// executor ran each node (the suite's `fallback/placement_honesty`); the partition entry
/// carries the time.
pub fn record_partition(
    sink: &dyn ProfileSink,
    engine: &str,
    partition: &str,
    nodes: &[String],
    ran: bool,
    elapsed: Duration,
) {
    sink.record_on(partition, engine, elapsed);
    if ran {
        for node in nodes {
            sink.record_on(node, engine, Duration::ZERO);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concord::executor::{DType, Dim, Tensor};
    use concord::op::Binary;
    use concord::Op;

    fn add_graph() -> Graph {
        let x = ValueInfo::new("x", DType::F32, vec![Dim::Named("n".into()), Dim::Fixed(3)]);
        let y = ValueInfo::new("y", DType::F32, vec![Dim::Named("n".into()), Dim::Fixed(3)]);
        Graph {
            name: "g".into(),
            inputs: vec![x.clone()],
            outputs: vec!["y".into()],
            initializers: [(
                "b".to_string(),
                Tensor::from_f32(vec![3], vec![1.0, 2.0, 3.0]).expect("3 values for shape [3]"),
            )]
            .into_iter()
            .collect(),
            nodes: vec![Node {
                name: "add".into(),
                op: Op::Binary(Binary::Add),
                inputs: vec![Some("x".into()), Some("b".into())],
                outputs: vec!["y".into()],
            }],
            opset: 24,
            values: [("x".to_string(), x), ("y".to_string(), y)]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn a_node_graph_keeps_types_and_constants() {
        let graph = add_graph();
        let one = node_graph(&graph, &graph.nodes[0], 23).expect("every input is typed");
        assert_eq!(one.inputs.len(), 1);
        assert_eq!(
            one.inputs[0].shape,
            vec![Dim::Named("n".into()), Dim::Fixed(3)]
        );
        assert!(one.initializers.contains_key("b"));
        assert_eq!(one.outputs, vec!["y".to_string()]);
        assert_eq!(one.opset, 23);
        let bytes = onnx_bytes(&one, 23).expect("writes");
        let back = concord_onnx::load(&bytes).expect("reads back");
        assert_eq!(back.opset, 23);
        assert_eq!(back.nodes.len(), 1);
    }

    #[test]
    fn an_untyped_input_is_named() {
        let mut graph = add_graph();
        graph.values.remove("x");
        let error = node_graph(&graph, &graph.nodes[0], 24).expect_err("x has no type");
        assert!(error.contains("`x`"), "{error}");
    }

    #[test]
    #[allow(clippy::panic)] // The engine's panic is what this test contains.
    fn a_panic_becomes_an_error_naming_the_engine() {
        let error = contained("engine", "loading", || -> u8 {
            std::panic::panic_any("boom".to_string())
        })
        .expect_err("the closure panics");
        assert_eq!(error, "engine panicked while loading: boom");
        assert_eq!(contained("engine", "loading", || 7), Ok(7));
    }

    #[test]
    fn the_cache_asks_once_per_model() {
        let cache = SupportCache::default();
        let mut asked = 0;
        for _ in 0..3 {
            let answer = cache.answer(vec![1, 2, 3], |_| {
                asked += 1;
                Support::No("no".into())
            });
            assert_eq!(answer, Support::No("no".into()));
        }
        assert_eq!(asked, 1);
        assert_eq!(cache.answer(vec![4], |_| Support::Yes), Support::Yes);
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn short_keeps_the_first_line() {
        assert_eq!(short("\n  first \nsecond"), "first");
        assert_eq!(short(&"x".repeat(500)).chars().count(), 401);
    }
}
