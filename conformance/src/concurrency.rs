//! Concurrency scenarios, run for every executor and target: the seed report (threads each
//! building a net of a *different* model), one shared net, forward_async interleaved with
//! forward, and nets built and dropped while others run. Every output must be bit-identical
//! to the same executor's single-threaded output for that input, and within the model
//! tolerance of the reference. A watchdog bounds each scenario and names the threads that
//! are still running when it fires.

use crate::compare::compare;
use crate::outcome::Outcome;
use crate::suite::Suite;
use crate::tolerance::allowance;
use concord::executor::{Node, Op};
use concord::op::Conv;
use concord::op::{Binary, Unary};
use concord::{
    DType, FallbackPolicy, Graph, Net, NetBuilder, Overrides, Target, Tensor, ValueInfo,
};
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The scenarios, by trial name.
pub const SCENARIOS: &[&str] = &[
    "per_thread_nets",
    "shared_net",
    "async_interleaved",
    "build_and_drop",
];

/// How hard to push: the default keeps CI fast; `CONCORD_STRESS=1` scales up.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    pub threads: usize,
    pub forwards: usize,
    pub deadline: Duration,
}

impl Load {
    pub fn from_env() -> Load {
        let stress = std::env::var("CONCORD_STRESS").is_ok_and(|v| v == "1" || v == "true");
        let threads = std::env::var("CONCORD_THREADS")
            .ok()
            .and_then(|v| v.parse().ok());
        if stress {
            Load {
                threads: threads.unwrap_or(16),
                forwards: 1000,
                deadline: Duration::from_secs(1800),
            }
        } else {
            Load {
                threads: threads.unwrap_or(3),
                forwards: 12,
                deadline: Duration::from_secs(120),
            }
        }
    }
}

/// How two outputs of the executor must agree: bit for bit, unless the executor declares
/// itself non-deterministic, in which case within the model tolerance.
#[derive(Clone, Debug)]
pub struct Sameness {
    exact: bool,
    level: crate::tolerance::Level,
    target: concord::TargetSpec,
}

impl Sameness {
    pub fn of(suite: &Suite, target: &Target) -> Result<Sameness, String> {
        let level = suite
            .tolerances
            .level("model")
            .ok_or("no model level")?
            .level
            .clone();
        Ok(Sameness {
            exact: suite.executor.deterministic(),
            level,
            target: suite.spec(target),
        })
    }

    pub fn agrees(&self, got: &Tensor, want: &Tensor) -> bool {
        if self.exact {
            return got.bit_identical(want);
        }
        match allowance(&self.level, &self.target, want, None) {
            Ok(allowed) => compare("y", got, want, &|i, _| {
                allowed.get(i).copied().unwrap_or(0.0)
            })
            .passed(),
            Err(_) => false,
        }
    }
}

/// A model of the seed report, with a deterministic input maker.
#[derive(Clone, Debug)]
pub struct Model {
    pub name: &'static str,
    pub graph: Graph,
    pub input: &'static str,
    pub input_dims: Vec<usize>,
}

/// The three models of the seed report: a first layer 3→32 3×3 conv (weights 864 floats),
/// a 256→32 3×3 conv (73728 floats), and a transformer-like block.
pub fn models() -> Vec<Model> {
    vec![
        conv_model("conv_3_to_32", 3, 16),
        conv_model("conv_256_to_32", 256, 6),
        transformer_model(),
    ]
}

fn weights(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-scale..scale)).collect()
}

fn conv_model(name: &'static str, channels: usize, size: usize) -> Model {
    let mut g = Graph {
        name: name.into(),
        opset: 17,
        ..Graph::default()
    };
    let dims = vec![1, channels, size, size];
    g.inputs.push(ValueInfo::fixed("x", DType::F32, &dims));
    let w = weights(
        32 * channels * 9,
        channels as u64,
        1.0 / (channels as f32 * 9.0).sqrt(),
    );
    g.initializers.insert(
        "w".into(),
        Tensor::from_f32([32, channels, 3, 3], w).unwrap_or_else(|_| Tensor::scalar_f32(0.0)),
    );
    g.initializers.insert(
        "b".into(),
        Tensor::from_f32([32], weights(32, 7, 0.1)).unwrap_or_else(|_| Tensor::scalar_f32(0.0)),
    );
    let conv = Conv {
        group: 1,
        pads: vec![1, 1, 1, 1],
        ..Conv::default()
    };
    g.nodes
        .push(Node::new("conv", Op::Conv(conv), &["x", "w", "b"], &["c"]));
    g.nodes
        .push(Node::new("relu", Op::Unary(Unary::Relu), &["c"], &["y"]));
    g.outputs.push("y".into());
    Model {
        name,
        graph: g,
        input: "x",
        input_dims: dims,
    }
}

fn transformer_model() -> Model {
    let (t, d) = (8, 16);
    let mut g = Graph {
        name: "transformer_like".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs.push(ValueInfo::fixed("x", DType::F32, &[1, t, d]));
    let init = |g: &mut Graph, name: &str, dims: &[usize], seed: u64, scale: f32| {
        let n = dims.iter().product();
        if let Ok(t) = Tensor::from_f32(dims.to_vec(), weights(n, seed, scale)) {
            g.initializers.insert(name.into(), t);
        }
    };
    init(&mut g, "wq", &[d, d], 1, 0.25);
    init(&mut g, "wk", &[d, d], 2, 0.25);
    init(&mut g, "gamma", &[d], 3, 1.0);
    init(&mut g, "beta", &[d], 4, 0.1);
    g.nodes
        .push(Node::new("q", Op::MatMul, &["x", "wq"], &["q"]));
    g.nodes
        .push(Node::new("k", Op::MatMul, &["x", "wk"], &["k"]));
    g.nodes.push(Node::new(
        "kt",
        Op::Transpose {
            perm: Some(vec![0, 2, 1]),
        },
        &["k"],
        &["kt"],
    ));
    g.nodes
        .push(Node::new("scores", Op::MatMul, &["q", "kt"], &["s"]));
    g.nodes.push(Node::new(
        "softmax",
        Op::Softmax { axis: -1 },
        &["s"],
        &["p"],
    ));
    g.nodes
        .push(Node::new("attend", Op::MatMul, &["p", "x"], &["a"]));
    g.nodes.push(Node::new(
        "residual",
        Op::Binary(Binary::Add),
        &["a", "x"],
        &["r"],
    ));
    g.nodes.push(Node::new(
        "norm",
        Op::LayerNormalization {
            axis: -1,
            epsilon: 1e-5,
        },
        &["r", "gamma", "beta"],
        &["y"],
    ));
    g.outputs.push("y".into());
    Model {
        name: "transformer_like",
        graph: g,
        input: "x",
        input_dims: vec![1, t, d],
    }
}

/// A deterministic input for `model`, different for each seed.
pub fn input(model: &Model, seed: u64) -> Tensor {
    let n = model.input_dims.iter().product();
    Tensor::from_f32(model.input_dims.clone(), weights(n, 1000 + seed, 1.0))
        .unwrap_or_else(|_| Tensor::scalar_f32(0.0))
}

/// Runs one scenario.
pub fn run(suite: &Suite, scenario: &str, target: &Target, notices: &mut Vec<String>) -> Outcome {
    let load = Load::from_env();
    if !suite.executor.deterministic() {
        notices.push(format!(
            "{} declares its results non-deterministic: concurrency outputs are compared within the model tolerance, not bit for bit",
            suite.executor.name()
        ));
    }
    let result = match scenario {
        "per_thread_nets" => per_thread_nets(suite, target, load, notices),
        "shared_net" => shared_net(suite, target, load, notices),
        "async_interleaved" => async_interleaved(suite, target, load, notices),
        "build_and_drop" => build_and_drop(suite, target, load, notices),
        other => Err(format!("no concurrency scenario `{other}`")),
    };
    match result {
        Ok(figures) => {
            // The figures matter when stressing; in a normal run they would only interleave
            // with the progress output.
            if std::env::var_os("CONCORD_STRESS").is_some()
                || std::env::var_os("CONCORD_THREADS").is_some()
            {
                eprintln!("{scenario}: {figures}");
            }
            Outcome::Pass {
                comparisons: Vec::new(),
            }
        }
        Err(message) => Outcome::Fail {
            message,
            comparisons: Vec::new(),
        },
    }
}

fn build(suite: &Suite, model: &Model, target: &Target) -> Result<Net, String> {
    suite_handle(suite).build(model, target)
}

/// The executor's single-threaded output for (model, seed), checked against the reference.
fn baseline(
    suite: &Suite,
    net: &Net,
    model: &Model,
    seed: u64,
    target: &Target,
) -> Result<Tensor, String> {
    let same = Sameness::of(suite, target)?;
    let x = input(model, seed);
    let out = forward_one(net, model, x.clone())?;
    let reference = NetBuilder::from_graph(model.graph.clone())
        .registry(concord::ExecutorRegistry::reference_only())
        .overrides(Overrides::default())
        .build()
        .map_err(|e| e.to_string())?;
    let x_ref = if suite.stores_f16(target) {
        crate::suite::round_through_f16(&x)
    } else {
        x
    };
    let want = forward_one(&reference, model, x_ref)?;
    let level = suite
        .tolerances
        .level("model")
        .ok_or("no model level")?
        .level;
    let allowed = allowance(level, &suite.spec(target), &want, None)?;
    let c = compare("y", &out, &want, &|i, _| {
        allowed.get(i).copied().unwrap_or(0.0)
    });
    if !c.passed() {
        return Err(format!(
            "{} single-threaded output disagrees with the reference: {}",
            model.name,
            c.describe()
        ));
    }
    let again = forward_one(net, model, input(model, seed))?;
    if !same.agrees(&again, &out) {
        return Err(format!(
            "{}: the same input twice through the same net gave different bits",
            model.name
        ));
    }
    Ok(out)
}

fn forward_one(net: &Net, model: &Model, x: Tensor) -> Result<Tensor, String> {
    let out = net
        .forward([(model.input, x)])
        .map_err(|e| format!("{}: forward failed: {e}", model.name))?;
    out.get("y")
        .cloned()
        .ok_or_else(|| format!("{}: no output y", model.name))
}

/// Runs `work(i)` on `n` named threads under a watchdog.
fn run_threads(
    n: usize,
    deadline: Duration,
    name: impl Fn(usize) -> String,
    work: impl Fn(usize) -> Result<usize, String> + Send + Sync + 'static,
) -> Result<String, String> {
    let running: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let work = Arc::new(work);
    let (tx, rx) = mpsc::channel::<(String, Result<usize, String>)>();
    let started = Instant::now();
    for i in 0..n {
        let thread_name = name(i);
        if let Ok(mut r) = running.lock() {
            r.insert(thread_name.clone());
        }
        let (tx, work, running) = (tx.clone(), work.clone(), running.clone());
        let spawned = std::thread::Builder::new()
            .name(thread_name.clone())
            .spawn(move || {
                let result = work(i);
                if let Ok(mut r) = running.lock() {
                    r.remove(&thread_name);
                }
                let _ = tx.send((thread_name, result));
            });
        if let Err(e) = spawned {
            return Err(format!("could not start thread {i}: {e}"));
        }
    }
    drop(tx);
    let mut failures = Vec::new();
    let mut forwards = 0;
    for _ in 0..n {
        let left = deadline.saturating_sub(started.elapsed());
        match rx.recv_timeout(left) {
            Ok((_, Ok(count))) => forwards += count,
            Ok((thread, Err(e))) => failures.push(format!("{thread}: {e}")),
            Err(_) => {
                let still: Vec<String> = running
                    .lock()
                    .map(|r| r.iter().cloned().collect())
                    .unwrap_or_default();
                return Err(format!(
                    "watchdog: scenario still running after {:?}; threads not finished: {}",
                    deadline,
                    still.join(", ")
                ));
            }
        }
    }
    if !failures.is_empty() {
        return Err(failures.join("\n"));
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(format!(
        "{n} threads, {forwards} forwards in {secs:.2} s ({:.0} forwards/s)",
        forwards as f64 / secs.max(1e-9)
    ))
}

/// (a) The seed report: each thread builds its own net of a different model and loops.
fn per_thread_nets(
    suite: &Suite,
    target: &Target,
    load: Load,
    notices: &mut Vec<String>,
) -> Result<String, String> {
    let same = Sameness::of(suite, target)?;
    let models = models();
    let mut expected = Vec::new();
    for m in &models {
        let net = build(suite, m, target)?;
        notices.extend(
            net.placement()
                .notices
                .iter()
                .map(|n| format!("{}: {}", n.asked, n.reason)),
        );
        expected.push(baseline(suite, &net, m, 0, target)?);
    }
    let shared = Arc::new((models, expected, suite_handle(suite)));
    let models_n = shared.0.len();
    let target = target.clone();
    run_threads(
        load.threads,
        load.deadline,
        |i| format!("per-thread-net-{i}"),
        move |i| {
            let (models, expected, handle) = &*shared;
            let m = &models[i % models_n];
            let net = handle.build(m, &target)?;
            for k in 0..load.forwards {
                let y = forward_one(&net, m, input(m, 0))?;
                if !same.agrees(&y, &expected[i % models_n]) {
                    return Err(format!(
                        "{}: forward {k} differs from the single-threaded output (cross-talk?)",
                        m.name
                    ));
                }
            }
            Ok(load.forwards)
        },
    )
}

/// (b) One shared net, each thread with its own input.
fn shared_net(
    suite: &Suite,
    target: &Target,
    load: Load,
    notices: &mut Vec<String>,
) -> Result<String, String> {
    let same = Sameness::of(suite, target)?;
    let m = models().pop().ok_or("no model")?;
    let net = build(suite, &m, target)?;
    notices.extend(
        net.placement()
            .notices
            .iter()
            .map(|n| format!("{}: {}", n.asked, n.reason)),
    );
    let expected: Vec<Tensor> = (0..load.threads)
        .map(|i| baseline(suite, &net, &m, i as u64, target))
        .collect::<Result<_, _>>()?;
    let shared = Arc::new((net, m, expected));
    run_threads(
        load.threads,
        load.deadline,
        |i| format!("shared-net-{i}"),
        move |i| {
            let (net, m, expected) = &*shared;
            for k in 0..load.forwards {
                let y = forward_one(net, m, input(m, i as u64))?;
                if !same.agrees(&y, &expected[i]) {
                    return Err(format!(
                        "forward {k} on the shared net differs from the single-threaded output"
                    ));
                }
            }
            Ok(load.forwards)
        },
    )
}

/// (c) forward_async interleaved with forward on one net.
fn async_interleaved(
    suite: &Suite,
    target: &Target,
    load: Load,
    notices: &mut Vec<String>,
) -> Result<String, String> {
    let same = Sameness::of(suite, target)?;
    let m = models().swap_remove(0);
    let net = build(suite, &m, target)?;
    notices.extend(
        net.placement()
            .notices
            .iter()
            .map(|n| format!("{}: {}", n.asked, n.reason)),
    );
    let expected: Vec<Tensor> = (0..load.threads)
        .map(|i| baseline(suite, &net, &m, i as u64, target))
        .collect::<Result<_, _>>()?;
    let shared = Arc::new((net, m, expected));
    run_threads(
        load.threads,
        load.deadline,
        |i| format!("async-{i}"),
        move |i| {
            let (net, m, expected) = &*shared;
            let mut pending = Vec::new();
            for k in 0..load.forwards {
                if k % 2 == 0 {
                    let p = net
                        .forward_async([(m.input, input(m, i as u64))])
                        .map_err(|e| e.to_string())?;
                    pending.push(p);
                } else {
                    let y = forward_one(net, m, input(m, i as u64))?;
                    if !same.agrees(&y, &expected[i]) {
                        return Err(format!(
                            "forward {k} (sync, with async ones in flight) differs"
                        ));
                    }
                }
            }
            for (k, p) in pending.into_iter().enumerate() {
                let out = p.wait().map_err(|e| e.to_string())?;
                let y = out.get("y").ok_or("no output y")?;
                if !same.agrees(y, &expected[i]) {
                    return Err(format!(
                        "async forward {k} differs from the single-threaded output"
                    ));
                }
            }
            Ok(load.forwards)
        },
    )
}

/// (d) Nets built and dropped in a loop while other threads run forward.
fn build_and_drop(
    suite: &Suite,
    target: &Target,
    load: Load,
    notices: &mut Vec<String>,
) -> Result<String, String> {
    let same = Sameness::of(suite, target)?;
    let models = models();
    let long_lived = build(suite, &models[2], target)?;
    notices.extend(
        long_lived
            .placement()
            .notices
            .iter()
            .map(|n| format!("{}: {}", n.asked, n.reason)),
    );
    let expected = baseline(suite, &long_lived, &models[2], 0, target)?;
    let churn_expected = {
        let net = build(suite, &models[0], target)?;
        baseline(suite, &net, &models[0], 0, target)?
    };
    let shared = Arc::new((
        long_lived,
        models,
        expected,
        churn_expected,
        suite_handle(suite),
    ));
    let threads = load.threads.max(2);
    let target = target.clone();
    run_threads(
        threads,
        load.deadline,
        |i| {
            if i % 2 == 0 {
                format!("forward-{i}")
            } else {
                format!("build-drop-{i}")
            }
        },
        move |i| {
            let (net, models, expected, churn_expected, handle) = &*shared;
            if i % 2 == 0 {
                for k in 0..load.forwards {
                    let y = forward_one(net, &models[2], input(&models[2], 0))?;
                    if !same.agrees(&y, expected) {
                        return Err(format!(
                            "forward {k} differs while other nets were built and dropped"
                        ));
                    }
                }
                Ok(load.forwards)
            } else {
                let rounds = (load.forwards / 4).max(2);
                for k in 0..rounds {
                    let net = handle.build(&models[0], &target)?;
                    let y = forward_one(&net, &models[0], input(&models[0], 0))?;
                    if !same.agrees(&y, churn_expected) {
                        return Err(format!("net built in round {k} computes different bits"));
                    }
                    drop(net);
                }
                Ok(rounds)
            }
        },
    )
}

/// What a worker thread needs to build nets like the suite does.
#[derive(Clone, Debug)]
struct SuiteHandle {
    registry: concord::ExecutorRegistry,
    backend: concord::Backend,
}

impl SuiteHandle {
    fn build(&self, model: &Model, target: &Target) -> Result<Net, String> {
        NetBuilder::from_graph(model.graph.clone())
            .registry(self.registry.clone())
            .backend(self.backend.clone())
            .target(target)
            .fallback(FallbackPolicy::Allow)
            .overrides(Overrides::default())
            .build()
            .map_err(|e| format!("{}: building the net failed: {e}", model.name))
    }
}

fn suite_handle(suite: &Suite) -> SuiteHandle {
    SuiteHandle {
        registry: suite.registry().clone(),
        backend: suite.backend(),
    }
}
