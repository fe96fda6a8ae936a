//! concord-fuzz: a structure-aware fuzzer that runs on the stable toolchain.
//!
//! It takes real models (the golden cases' and the ONNX node tests' `model.onnx`), decodes
//! them with concord-onnx's protobuf types, mutates their structure ([`mutate`]: attribute
//! values and kinds, dims, dtypes, initializer data, node inputs and outputs, op types,
//! opsets, subgraphs, and byte flips of the encoded model as one mutator among many),
//! re-encodes them and drives each mutant through the reader, the planner and the reference
//! executor ([`execute`]) under a small memory budget and a time limit, with inputs made
//! from the declared input shapes.
//!
//! Invariants:
//! - Mutant `i` of seed `s` is a pure function of `(s, i)` and the corpus (the same files,
//!   read in sorted order), so `concord-fuzz mutant` rebuilds any mutant a supervisor saw
//!   crash, and [`execute`] derives its input values from the model's bytes alone, so a saved
//!   model file replays the same execution.
//! - [`execute`] returns an [`Outcome`] for every input: any typed error is a fine outcome.
//!   What is not fine — a panic, an abort, a signal, a hang — is found by the binary's
//!   supervisor, which runs the executions in a child process under an address-space limit
//!   and a per-execution watchdog (`src/main.rs`).

pub mod mutate;
pub mod rng;

use concord::{DType, Dim, ExecutorRegistry, FallbackPolicy, NetBuilder, Overrides, Shape, Tensor};
use concord_onnx::proto::ModelProto;
use prost::Message;
use rng::Rng;
use std::path::{Path, PathBuf};

/// The memory budget every execution is held to: nothing a mutant declares may allocate
/// more than this at once.
pub const MEMORY_LIMIT: u64 = 256 * 1024 * 1024;

/// The time limit every execution is held to (`NetBuilder::time_limit`, for the build's
/// folding and for the forward): well under the supervisor's 30 s watchdog, so a mutant
/// that asks for minutes of work on small data (a Loop whose state grows, a RoiAlign of
/// millions of samples per bin) ends in a typed `TimeLimit` error, not a hang. A hang is
/// then what the limit cannot stop: work between two of its checks, or outside the
/// reference's run (reading, planning).
pub const TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The most elements one generated input may have (a declared shape larger than this is
/// an outcome of its own, not an allocation).
pub const MAX_INPUT_ELEMENTS: usize = 1 << 20;

/// The extent a symbolic or unknown input dim gets.
pub const SYMBOLIC_EXTENT: usize = 2;

/// One model the mutants start from.
#[derive(Clone, Debug)]
pub struct Seed {
    /// Where it was read from, for the reports.
    pub path: PathBuf,
    pub model: ModelProto,
}

/// Every model the fuzzer starts from, in a stable order.
#[derive(Debug, Default)]
pub struct Corpus {
    pub seeds: Vec<Seed>,
    /// Every op type any seed uses (main graph and subgraphs), sorted: what op-type swaps
    /// draw from.
    pub op_types: Vec<String>,
}

impl Corpus {
    /// Reads every `*.onnx` under `golden` (recursively) and every `*/model.onnx` under
    /// `node_tests`, sorted by path. A file that does not decode is skipped (the seeds are
    /// meant to be valid models; the mutants are not).
    pub fn load(golden: Option<&Path>, node_tests: Option<&Path>) -> Result<Corpus, String> {
        let mut paths = Vec::new();
        if let Some(dir) = golden {
            collect_onnx(dir, &mut paths)?;
        }
        if let Some(dir) = node_tests {
            let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for entry in entries.flatten() {
                let model = entry.path().join("model.onnx");
                if model.is_file() {
                    paths.push(model);
                }
            }
        }
        paths.sort();
        let mut seeds = Vec::with_capacity(paths.len());
        for path in paths {
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if let Ok(model) = ModelProto::decode(bytes.as_slice()) {
                seeds.push(Seed { path, model });
            }
        }
        if seeds.is_empty() {
            return Err("the corpus is empty: no model decoded".to_string());
        }
        let mut op_types = std::collections::BTreeSet::new();
        for seed in &seeds {
            if let Some(graph) = &seed.model.graph {
                mutate::visit_graphs(graph, &mut |g| {
                    for node in &g.node {
                        op_types.insert(node.op_type.clone());
                    }
                });
            }
        }
        Ok(Corpus {
            seeds,
            op_types: op_types.into_iter().collect(),
        })
    }

    /// Mutant `index` of `seed`: the seed model it starts from (by position) and its bytes.
    pub fn mutant(&self, seed: u64, index: u64) -> (usize, Vec<u8>) {
        let mut rng = Rng::new(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let pick = rng.below(self.seeds.len());
        let bytes = mutate::mutant(self, pick, &mut rng);
        (pick, bytes)
    }
}

fn collect_onnx(dir: &Path, acc: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_onnx(&path, acc)?;
        } else if path.extension().is_some_and(|e| e == "onnx") {
            acc.push(path);
        }
    }
    Ok(())
}

/// How one execution ended. Every variant but a crash (which never returns) is fine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Built and ran.
    Ran,
    /// A typed error: the stage ("build", "inputs", "forward") and the error's kind.
    Refused { stage: &'static str, kind: String },
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Ran => write!(f, "ran"),
            Outcome::Refused { stage, kind } => write!(f, "{stage}:{kind}"),
        }
    }
}

/// Reads, plans and runs `bytes` on the reference executor under [`MEMORY_LIMIT`] and
/// [`TIME_LIMIT`], with
/// inputs made from the declared input shapes (symbolic dims as [`SYMBOLIC_EXTENT`]) and
/// values drawn from a generator seeded by the bytes themselves.
pub fn execute(bytes: &[u8]) -> Outcome {
    let built = NetBuilder::from_onnx_bytes(bytes.to_vec())
        .registry(ExecutorRegistry::reference_only())
        .overrides(Overrides::default())
        .fallback(FallbackPolicy::Allow)
        .memory_limit(MEMORY_LIMIT)
        .time_limit(TIME_LIMIT)
        .build();
    let net = match built {
        Ok(net) => net,
        Err(e) => {
            return Outcome::Refused {
                stage: "build",
                kind: error_kind(&format!("{e:?}")),
            }
        }
    };
    let mut rng = Rng::new(fnv1a(bytes));
    let mut inputs = Vec::with_capacity(net.inputs().len());
    for info in net.inputs() {
        let dims: Vec<usize> = info
            .shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => *n,
                Dim::Named(_) | Dim::Unknown => SYMBOLIC_EXTENT,
            })
            .collect();
        let numel = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        match numel {
            Some(n) if n <= MAX_INPUT_ELEMENTS => {}
            _ => {
                return Outcome::Refused {
                    stage: "inputs",
                    kind: "TooLarge".to_string(),
                }
            }
        }
        if let Err(e) = net.memory_budget().check_tensor(info.dtype, &dims) {
            return Outcome::Refused {
                stage: "inputs",
                kind: error_kind(&format!("{e:?}")),
            };
        }
        match random_tensor(info.dtype, Shape(dims), &mut rng) {
            Ok(t) => inputs.push((info.name.clone(), t)),
            Err(kind) => {
                return Outcome::Refused {
                    stage: "inputs",
                    kind,
                }
            }
        }
    }
    match net.forward(inputs) {
        Ok(_) => Outcome::Ran,
        Err(e) => Outcome::Refused {
            stage: "forward",
            kind: error_kind(&format!("{e:?}")),
        },
    }
}

/// Values for one input: floats mostly in [-2, 2) with an occasional 0, ±1, NaN or
/// infinity; integers mostly 0 to 3 (valid indices and counts for small shapes) with an
/// occasional negative or large one; bools either way.
fn random_tensor(dtype: DType, shape: Shape, rng: &mut Rng) -> Result<Tensor, String> {
    let n = shape.numel();
    let values: Vec<f64> = (0..n)
        .map(|_| {
            if dtype.is_float() {
                match rng.below(40) {
                    0 => f64::NAN,
                    1 => f64::INFINITY,
                    2 => 0.0,
                    3 => -1.0,
                    _ => rng.unit() * 4.0 - 2.0,
                }
            } else {
                match rng.below(30) {
                    0 => -1.0,
                    1 => 1000.0,
                    _ => rng.below(4) as f64,
                }
            }
        })
        .collect();
    Tensor::from_f64(dtype, shape, values).map_err(|e| error_kind(&format!("{e:?}")))
}

/// An error's kind from its `Debug` text: the chain of enum variant names down the wrapped
/// errors (`Graph::Node::Shape`), without the values that make each message distinct.
pub fn error_kind(debug: &str) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    let mut rest = debug;
    while kinds.len() < 4 {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let ident = &rest[..end];
        if ident.is_empty() || !ident.starts_with(|c: char| c.is_ascii_uppercase()) {
            break;
        }
        kinds.push(ident);
        rest = &rest[end..];
        if let Some(inner) = rest.strip_prefix('(') {
            rest = inner;
        } else if let Some(fields) = rest.strip_prefix(" { ") {
            // A struct variant: its `source` field, when it has one, is the wrapped error.
            match fields.find("source: ") {
                Some(at) => rest = &fields[at + "source: ".len()..],
                None => break,
            }
        } else {
            break;
        }
    }
    if kinds.is_empty() {
        "Other".to_string()
    } else {
        kinds.join("::")
    }
}

/// FNV-1a over the bytes: the seed of a model's input values.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_follow_the_wrapped_variants() {
        assert_eq!(
            error_kind("Graph(Node { node: \"a(b\", op: \"Relu\", source: Shape(\"x\") })"),
            "Graph::Node::Shape"
        );
        assert_eq!(
            error_kind("Onnx(Decode(DecodeError { x }))"),
            "Onnx::Decode::DecodeError"
        );
        assert_eq!(error_kind("\"text\""), "Other");
    }
}
