//! Benchmark: one forward pass, batch 1, of every model below on the reference executor,
//! OpenCL (f32), OpenCL fp16 (storage-only on a device without `cl_khr_fp16`) and
//! onnxruntime's CPU execution provider, side by side in one run:
//!
//! - the two models the OpenCL kernels were tuned on, built with the core API at 224²
//!   (`resnet18_like`, `mobilenet_v2_like`);
//! - `mlp_64_10`, a 2-layer MLP (64 → 32 → 10), whose forward is almost all fixed cost
//!   (argument setting, queue submission, host↔device copies);
//! - the real-architecture exports of the golden set (`conformance/golden/exported/`:
//!   PyTorch and torchvision models with random weights, on the golden case's inputs).
//!
//! Concord is measured through `Net::forward` as a user calls it (input upload and output
//! download included); onnxruntime through `InferenceSession.run` in a Python child process
//! (benches/ort_timer.py) that answers "time N forwards" requests, with as many intra-op
//! threads as the OpenCL device has compute units. The executors are measured round by
//! round, interleaved (round 1 of every executor, then round 2, …), so load from other
//! processes on a shared machine falls on all of them alike; the table gives each one's
//! median over the rounds and the ratio OpenCL / onnxruntime. Criterion, which times one
//! function at a time, also keeps its statistics for the two tuned models, under
//! `target/criterion/<model>/<executor>/`, for its change detection between runs.
//!
//! Run with `cargo bench -p concord-opencl --bench models [-- FILTER]`; FILTER (a substring
//! of a model name) limits both parts; `CONCORD_BENCH_ROUNDS` sets the rounds (default 7).
//! The built models are written to `target/bench-models/<model>.onnx` (with their inputs as
//! .npy), so `concord run --profile` can show their layers. onnxruntime comes from the xtask
//! venv `target/xtask-venv` (`cargo xtask golden` creates it; `CONCORD_ORT_PYTHON` names
//! another interpreter); without it, or without an OpenCL runtime, the bench says so and
//! prints the table without those columns.

#[path = "../tests/common/mod.rs"]
mod common;

use concord::op::Gemm;
use concord::{
    Availability, DType, Executor, FallbackPolicy, Graph, Net, NetBuilder, Node, Op, Overrides,
    Target, Tensor, ValueInfo,
};
use criterion::{criterion_group, criterion_main, Criterion};
use npyz::WriterBuilder;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// What one round of one executor aims to take: long enough that timer and scheduling
/// noise are small against it, short enough that rounds of all executors interleave.
const ROUND: Duration = Duration::from_millis(150);

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

/// The Python interpreter with onnxruntime: `CONCORD_ORT_PYTHON`, else the xtask venv's.
fn ort_python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CONCORD_ORT_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = target_dir().join("xtask-venv/bin/python");
    venv.exists().then_some(venv)
}

/// The model-name filter: the first argument that is not a flag (cargo bench passes
/// `--bench`; criterion's own flags start with `-` too).
fn filter() -> Option<String> {
    std::env::args().skip(1).find(|a| !a.starts_with('-'))
}

/// One model of the bench: its graph, its inputs, and where its ONNX file is.
struct BenchModel {
    name: String,
    graph: Graph,
    inputs: Vec<(String, Tensor)>,
    /// The model file onnxruntime loads, and one .npy file per input.
    onnx: PathBuf,
    npy: Vec<(String, PathBuf)>,
}

/// Writes a tensor as .npy (f32 or i64, the bench models' input types).
fn write_npy(path: &Path, tensor: &Tensor) -> Result<(), String> {
    let shape: Vec<u64> = tensor.shape().dims().iter().map(|&d| d as u64).collect();
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let out = std::io::BufWriter::new(file);
    let values = tensor.as_f32().ok_or("the input is not f32")?;
    let mut writer = npyz::WriteOptions::<f32>::new()
        .default_dtype()
        .shape(&shape)
        .writer(out)
        .begin_nd()
        .map_err(|e| e.to_string())?;
    writer
        .extend(values.iter().copied())
        .map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())
}

/// A model built with the core API: written as ONNX, with its input as .npy, under
/// target/bench-models.
fn built_model(name: &str, graph: Graph, input: Tensor) -> Result<BenchModel, String> {
    let dir = target_dir().join("bench-models");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let onnx = dir.join(format!("{name}.onnx"));
    let bytes = concord::internals::onnx::save(&graph).map_err(|e| e.to_string())?;
    std::fs::write(&onnx, bytes).map_err(|e| format!("{}: {e}", onnx.display()))?;
    let npy = dir.join(format!("{name}.input.npy"));
    write_npy(&npy, &input)?;
    Ok(BenchModel {
        name: name.into(),
        graph,
        inputs: vec![("input".into(), input)],
        onnx,
        npy: vec![("input".into(), npy)],
    })
}

/// A golden case's exported model and its inputs, as the manifest lists them.
fn golden_model(case: &common::Case) -> Result<BenchModel, String> {
    let root = common::golden_dir();
    let onnx = root.join(&case.model);
    let bytes = std::fs::read(&onnx).map_err(|e| format!("{}: {e}", onnx.display()))?;
    let graph = concord::internals::onnx::load(&bytes).map_err(|e| e.to_string())?;
    Ok(BenchModel {
        name: case.name.clone(),
        graph,
        inputs: common::case_inputs(case)?,
        onnx,
        npy: case
            .inputs
            .iter()
            .map(|(name, file)| (name.clone(), root.join(file)))
            .collect(),
    })
}

/// A 2-layer MLP, 64 → 32 (Relu) → 10: a forward with almost no arithmetic, so its time is
/// the executor's fixed cost per forward.
fn mlp_64_10() -> (Graph, Tensor) {
    let mut rng = common::Lcg::new(64);
    let mut graph = Graph {
        name: "mlp_64_10".into(),
        inputs: vec![ValueInfo::fixed("input", DType::F32, &[1, 64])],
        outputs: vec!["output".into()],
        opset: 17,
        ..Graph::default()
    };
    for (name, dims, scale) in [
        ("w1", &[32usize, 64][..], 0.125),
        ("b1", &[32][..], 0.1),
        ("w2", &[10, 32][..], 0.18),
        ("b2", &[10][..], 0.1),
    ] {
        graph
            .initializers
            .insert(name.into(), rng.tensor(dims, scale));
    }
    let gemm = Op::Gemm(Gemm {
        trans_b: true,
        ..Gemm::default()
    });
    graph.nodes = vec![
        Node::new("fc1", gemm.clone(), &["input", "w1", "b1"], &["h"]),
        Node::new("relu", Op::Unary(concord::op::Unary::Relu), &["h"], &["r"]),
        Node::new("fc2", gemm, &["r", "w2", "b2"], &["output"]),
    ];
    (graph, rng.tensor(&[1, 64], 1.0))
}

/// Every model of the table, in order; a model that cannot be read is reported and left out.
fn bench_models() -> Vec<BenchModel> {
    let mut models = Vec::new();
    let (mlp, mlp_input) = mlp_64_10();
    let built = [
        ("mlp_64_10", mlp, mlp_input),
        (
            "resnet18_like",
            common::resnet18_like(224, 64, 1000),
            common::image(224, 11),
        ),
        (
            "mobilenet_v2_like",
            common::mobilenet_v2_like(224, 1.0, 1000),
            common::image(224, 11),
        ),
    ];
    for (name, graph, input) in built {
        match built_model(name, graph, input) {
            Ok(m) => models.push(m),
            Err(e) => println!("{name} is left out: {e}"),
        }
    }
    let manifest = common::load_manifest();
    // One export per architecture: the variants at older opsets are the same network.
    for case in manifest.cases.iter().filter(|c| {
        c.model.starts_with("exported/")
            && !c.name.contains("_opset")
            && !c.name.contains("_dynamic")
    }) {
        match golden_model(case) {
            Ok(m) => models.push(m),
            Err(e) => println!("{} is left out: {e}", case.name),
        }
    }
    models
}

/// onnxruntime in a child process: send an iteration count, read back nanoseconds.
struct OrtTimer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl OrtTimer {
    fn start(python: &Path, model: &BenchModel, threads: usize) -> Result<Self, String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/ort_timer.py");
        let mut command = Command::new(python);
        command
            .arg(&script)
            .arg(&model.onnx)
            .arg(threads.to_string());
        for (name, npy) in &model.npy {
            command.arg(format!("{name}={}", npy.display()));
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", python.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line).map_err(|e| e.to_string())?;
        if !line.starts_with("ready") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("ort_timer.py did not start (it said {line:?})"));
        }
        Ok(OrtTimer {
            child,
            stdin,
            stdout,
        })
    }

    /// The time of `iterations` forwards, as the child measured it.
    fn time(&mut self, iterations: u64) -> Result<Duration, String> {
        let mut line = String::new();
        writeln!(self.stdin, "{iterations}").map_err(|e| format!("ort_timer.py: {e}"))?;
        self.stdout
            .read_line(&mut line)
            .map_err(|e| format!("ort_timer.py: {e}"))?;
        line.trim()
            .parse()
            .map(Duration::from_nanos)
            .map_err(|_| format!("ort_timer.py answered {line:?}, not nanoseconds"))
    }
}

impl Drop for OrtTimer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The OpenCL device's compute units: the threads Concord's OpenCL executor runs on, and so
/// the intra-op threads onnxruntime gets.
fn opencl_threads(availability: &Availability) -> Option<usize> {
    let Availability::Available { devices } = availability else {
        return None;
    };
    devices.first()?.details.get("compute_units")?.parse().ok()
}

/// A net for one of Concord's executors: OpenCL with FallbackPolicy::Deny first; a model
/// with a node OpenCL does not run is built again with fallback allowed, and its row says
/// which nodes ran elsewhere.
fn opencl_net(model: &BenchModel, target: Target) -> Result<(Net, Option<String>), String> {
    let build = |policy| {
        NetBuilder::from_graph(model.graph.clone())
            .registry(common::shared_registry())
            .backend(concord::backends::OPENCL)
            .target(target.clone())
            .fallback(policy)
            .overrides(Overrides::default())
            .build()
    };
    match build(FallbackPolicy::Deny) {
        Ok(net) => Ok((net, None)),
        Err(_) => {
            let net = build(FallbackPolicy::Allow).map_err(|e| e.to_string())?;
            let why = net.placement().fallback_summary();
            Ok((net, why))
        }
    }
}

/// One column of the table: something that runs a model's forward.
enum Contender {
    Concord(Net),
    Ort(OrtTimer),
}

impl Contender {
    /// Runs `n` forwards and returns their total time.
    fn time(&mut self, n: u64, inputs: &[(String, Tensor)]) -> Result<Duration, String> {
        match self {
            Contender::Concord(net) => {
                let start = Instant::now();
                for _ in 0..n {
                    net.forward(inputs.iter().cloned())
                        .map_err(|e| e.to_string())?;
                }
                Ok(start.elapsed())
            }
            Contender::Ort(timer) => timer.time(n),
        }
    }
}

const COLUMNS: [&str; 4] = ["reference", "OpenCL f32", "OpenCL fp16", "onnxruntime"];

/// One row: each column's median time per forward (None when it was not measured), and
/// notes for the table's foot.
struct Row {
    model: String,
    medians: [Option<Duration>; 4],
    notes: Vec<String>,
}

/// Measures one model on every contender, round by round.
fn measure(model: &BenchModel, opencl: bool, ort: Option<(&Path, usize)>, rounds: usize) -> Row {
    let mut notes = Vec::new();
    let mut contenders: [Option<Contender>; 4] = [None, None, None, None];
    match NetBuilder::from_graph(model.graph.clone())
        .overrides(Overrides::default())
        .build()
    {
        Ok(net) => contenders[0] = Some(Contender::Concord(net)),
        Err(e) => notes.push(format!("the reference did not build: {e}")),
    }
    if opencl {
        for (column, target) in [
            (1, concord::targets::OPENCL),
            (2, concord::targets::OPENCL_FP16),
        ] {
            match opencl_net(model, target) {
                Ok((net, fallback)) => {
                    if let Some(why) = fallback {
                        notes.push(format!("{}: {why}", COLUMNS[column]));
                    }
                    contenders[column] = Some(Contender::Concord(net));
                }
                Err(e) => notes.push(format!("{} did not build: {e}", COLUMNS[column])),
            }
        }
    }
    if let Some((python, threads)) = ort {
        match OrtTimer::start(python, model, threads) {
            Ok(timer) => contenders[3] = Some(Contender::Ort(timer)),
            Err(e) => notes.push(format!("onnxruntime is not measured: {e}")),
        }
    }
    // Warm up (first runs compile kernels for their work-group shapes), and size each
    // executor's round from its second forward.
    let mut per_round = [1u64; 4];
    for (column, slot) in contenders.iter_mut().enumerate() {
        let Some(contender) = slot else { continue };
        let timed = contender
            .time(1, &model.inputs)
            .and_then(|_| contender.time(1, &model.inputs));
        match timed {
            Ok(one) => {
                per_round[column] =
                    (ROUND.as_nanos() / one.as_nanos().max(1)).clamp(1, 10_000) as u64
            }
            Err(e) => {
                notes.push(format!("{} failed: {e}", COLUMNS[column]));
                *slot = None;
            }
        }
    }
    let mut samples: [Vec<Duration>; 4] = Default::default();
    for _ in 0..rounds {
        for (column, slot) in contenders.iter_mut().enumerate() {
            let Some(contender) = slot else { continue };
            match contender.time(per_round[column], &model.inputs) {
                Ok(total) => samples[column].push(total / per_round[column] as u32),
                Err(e) => {
                    notes.push(format!("{} failed: {e}", COLUMNS[column]));
                    *slot = None;
                }
            }
        }
    }
    let medians = samples.map(|mut s| {
        s.sort();
        s.get(s.len() / 2).copied()
    });
    Row {
        model: model.name.clone(),
        medians,
        notes,
    }
}

fn format_time(d: Option<Duration>) -> String {
    match d {
        None => "-".into(),
        Some(d) if d < Duration::from_millis(1) => format!("{:.1} µs", d.as_secs_f64() * 1e6),
        Some(d) => format!("{:.2} ms", d.as_secs_f64() * 1e3),
    }
}

fn print_table(rows: &[Row], rounds: usize, threads: usize) {
    println!(
        "\nbatch 1, median per forward over {rounds} interleaved rounds; onnxruntime with \
         {threads} intra-op threads"
    );
    println!(
        "| model | {} | OpenCL f32 / onnxruntime | OpenCL fp16 / onnxruntime |",
        COLUMNS.join(" | ")
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut notes = Vec::new();
    for row in rows {
        let ratio = |column: usize| match (row.medians[column], row.medians[3]) {
            (Some(a), Some(b)) => format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64()),
            _ => "-".into(),
        };
        let mut name = row.model.clone();
        if !row.notes.is_empty() {
            notes.push((notes.len() + 1, row));
            name += &format!(" [{}]", notes.len());
        }
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} |",
            format_time(row.medians[0]),
            format_time(row.medians[1]),
            format_time(row.medians[2]),
            format_time(row.medians[3]),
            ratio(1),
            ratio(2)
        );
    }
    for (n, row) in notes {
        println!("[{n}] {}: {}", row.model, row.notes.join("; "));
    }
}

/// Criterion's statistics for one of the tuned models, executor by executor.
fn criterion_model(c: &mut Criterion, model: &BenchModel, opencl: bool) {
    let mut group = c.benchmark_group(&model.name);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(2));
    group.measurement_time(Duration::from_secs(8));
    let reference = NetBuilder::from_graph(model.graph.clone())
        .overrides(Overrides::default())
        .build()
        .expect("the reference builds");
    group.bench_function("reference", |b| {
        b.iter(|| {
            reference
                .forward(model.inputs.iter().cloned())
                .expect("forward")
        })
    });
    if opencl {
        let net = NetBuilder::from_graph(model.graph.clone())
            .registry(common::shared_registry())
            .backend(concord::backends::OPENCL)
            .fallback(FallbackPolicy::Deny)
            .overrides(Overrides::default())
            .build()
            .expect("every node runs on OpenCL");
        group.bench_function("opencl", |b| {
            b.iter(|| net.forward(model.inputs.iter().cloned()).expect("forward"))
        });
    }
    group.finish();
}

fn models(c: &mut Criterion) {
    let availability = common::shared_executor().probe();
    let opencl = match &availability {
        Availability::Available { .. } => true,
        Availability::Unavailable { cause, reason } => {
            println!("OpenCL is unavailable ({cause:?}: {reason}); measuring the rest");
            false
        }
    };
    // Concord's OpenCL executor runs on the device's compute units, its reference on every
    // core; onnxruntime gets as many intra-op threads.
    let threads = opencl_threads(&availability).unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let python = ort_python();
    if python.is_none() {
        println!(
            "onnxruntime is not measured: no target/xtask-venv (run `cargo xtask golden`) \
             and no CONCORD_ORT_PYTHON"
        );
    }
    let rounds = std::env::var("CONCORD_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(7);
    let filter = filter();
    let models: Vec<BenchModel> = bench_models()
        .into_iter()
        .filter(|m| {
            filter
                .as_ref()
                .map_or(true, |f| m.name.contains(f.as_str()))
        })
        .collect();
    for model in models
        .iter()
        .filter(|m| ["resnet18_like", "mobilenet_v2_like"].contains(&m.name.as_str()))
    {
        criterion_model(c, model, opencl);
    }
    let mut rows = Vec::new();
    for model in &models {
        println!("measuring {} ({rounds} rounds)", model.name);
        let ort = python.as_deref().map(|p| (p, threads));
        rows.push(measure(model, opencl, ort, rounds));
    }
    print_table(&rows, rounds, threads);
}

criterion_group!(benches, models);
criterion_main!(benches);
