//! Benchmark: one forward pass (batch 1, 3×224×224) of a ResNet-18-shaped and a
//! MobileNetV2-shaped model, built with the core API (Conv, BatchNormalization, Relu or
//! ReLU6 as Clip, Add, MaxPool, GlobalAveragePool, Flatten, Gemm), on the OpenCL executor,
//! on the reference executor and on onnxruntime's CPU execution provider, side by side in
//! one run. Concord is measured through `Net::forward` as a user calls it (input upload
//! and output download included); onnxruntime through `InferenceSession.run` in a Python
//! child process (benches/ort_timer.py) that criterion drives with `iter_custom`, so all
//! three medians come from the same statistics.
//!
//! Run with `cargo bench -p concord-opencl --bench models`; criterion writes the medians
//! under `target/criterion/<model>/<executor>/new/estimates.json`, and the bench prints
//! the ratios at the end. The models are also written to `target/bench-models/<model>.onnx`
//! (with `input.npy`), so `concord run --profile` can show their layers. onnxruntime comes
//! from the xtask venv (`cargo xtask golden` creates it; `CONCORD_ORT_PYTHON` names another
//! interpreter); without it, or without an OpenCL runtime, the bench says so and measures
//! the rest.

#[path = "../tests/common/mod.rs"]
mod common;

use concord::{Availability, Executor, FallbackPolicy, Graph, NetBuilder, Overrides, Tensor};
use criterion::{criterion_group, criterion_main, Criterion};
use npyz::WriterBuilder;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

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

/// Writes the model as ONNX and its input as .npy under target/bench-models.
fn write_model(name: &str, graph: &Graph, input: &Tensor) -> Result<(PathBuf, PathBuf), String> {
    let dir = target_dir().join("bench-models");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let model = dir.join(format!("{name}.onnx"));
    let bytes = concord::internals::onnx::save(graph).map_err(|e| e.to_string())?;
    std::fs::write(&model, bytes).map_err(|e| format!("{}: {e}", model.display()))?;
    let npy = dir.join(format!("{name}.input.npy"));
    let values = input.as_f32().ok_or("the input is not f32")?;
    let shape: Vec<u64> = input.shape().dims().iter().map(|&d| d as u64).collect();
    let file = std::fs::File::create(&npy).map_err(|e| format!("{}: {e}", npy.display()))?;
    let mut writer = npyz::WriteOptions::<f32>::new()
        .default_dtype()
        .shape(&shape)
        .writer(std::io::BufWriter::new(file))
        .begin_nd()
        .map_err(|e| e.to_string())?;
    writer
        .extend(values.iter().copied())
        .map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok((model, npy))
}

/// onnxruntime in a child process: send an iteration count, read back nanoseconds.
struct OrtTimer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl OrtTimer {
    fn start(python: &Path, model: &Path, input: &Path) -> Result<Self, String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/ort_timer.py");
        let mut child = Command::new(python)
            .arg(&script)
            .arg(model)
            .arg(input)
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
            return Err(format!("ort_timer.py did not start (it said {line:?})"));
        }
        println!("{}", line.trim());
        Ok(OrtTimer {
            child,
            stdin,
            stdout,
        })
    }

    fn time(&mut self, iterations: u64) -> Duration {
        let mut line = String::new();
        writeln!(self.stdin, "{iterations}").expect("ort_timer.py is running");
        self.stdout
            .read_line(&mut line)
            .expect("ort_timer.py answers");
        Duration::from_nanos(
            line.trim()
                .parse()
                .expect("ort_timer.py prints nanoseconds"),
        )
    }
}

impl Drop for OrtTimer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bench_model(c: &mut Criterion, name: &str, graph: Graph, opencl: bool) {
    let input = common::image(224, 11);
    let ort = match (ort_python(), write_model(name, &graph, &input)) {
        (Some(python), Ok((model, npy))) => match OrtTimer::start(&python, &model, &npy) {
            Ok(timer) => Some(timer),
            Err(e) => {
                println!("onnxruntime is not measured: {e}");
                None
            }
        },
        (None, _) => {
            println!("onnxruntime is not measured: no target/xtask-venv (run `cargo xtask golden`) and no CONCORD_ORT_PYTHON");
            None
        }
        (_, Err(e)) => {
            println!("onnxruntime is not measured: writing {name}.onnx failed: {e}");
            None
        }
    };
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(2));
    group.measurement_time(Duration::from_secs(8));
    let reference = NetBuilder::from_graph(graph.clone())
        .overrides(Overrides::default())
        .build()
        .expect("the reference builds");
    group.bench_function("reference", |b| {
        b.iter(|| {
            reference
                .forward([("input", input.clone())])
                .expect("forward")
        })
    });
    if opencl {
        let net = NetBuilder::from_graph(graph)
            .registry(common::shared_registry())
            .backend(concord::backends::OPENCL)
            .fallback(FallbackPolicy::Deny)
            .overrides(Overrides::default())
            .build()
            .expect("every node runs on OpenCL");
        group.bench_function("opencl", |b| {
            b.iter(|| net.forward([("input", input.clone())]).expect("forward"))
        });
    }
    if let Some(mut timer) = ort {
        group.bench_function("onnxruntime", |b| b.iter_custom(|n| timer.time(n)));
    }
    group.finish();
}

/// The median criterion recorded for one model and executor, in nanoseconds.
fn median(model: &str, executor: &str) -> Option<f64> {
    let path = target_dir().join(format!("criterion/{model}/{executor}/new/estimates.json"));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    json["median"]["point_estimate"].as_f64()
}

fn ratios(models: &[&str]) {
    println!("\nmedians (ms) and ratios, this run:");
    for model in models {
        let [r, o, x] = ["reference", "opencl", "onnxruntime"].map(|e| median(model, e));
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.2}", v / 1e6));
        let mut line = format!(
            "{model}: reference {} ms, opencl {} ms, onnxruntime {} ms",
            ms(r),
            ms(o),
            ms(x)
        );
        if let (Some(r), Some(o)) = (r, o) {
            line += &format!("; opencl is {:.2}x faster than the reference", r / o);
        }
        if let (Some(x), Some(o)) = (x, o) {
            line += &format!(", {:.2}x the time of onnxruntime", o / x);
        }
        println!("{line}");
    }
}

fn models(c: &mut Criterion) {
    let opencl = match common::shared_executor().probe() {
        Availability::Available { .. } => true,
        Availability::Unavailable { cause, reason } => {
            println!("OpenCL is unavailable ({cause:?}: {reason}); measuring the reference only");
            false
        }
    };
    bench_model(
        c,
        "resnet18_like",
        common::resnet18_like(224, 64, 1000),
        opencl,
    );
    bench_model(
        c,
        "mobilenet_v2_like",
        common::mobilenet_v2_like(224, 1.0, 1000),
        opencl,
    );
    ratios(&["resnet18_like", "mobilenet_v2_like"]);
}

criterion_group!(benches, models);
criterion_main!(benches);
