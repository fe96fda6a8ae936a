//! Hostile sizes meet the memory budget: models whose shapes imply 10^12 elements or more,
//! a declared input of [10^6, 10^6], an .npy header claiming gigabytes, a model path that is
//! a FIFO or a device. Each runs `concord run` in a child process under a 4 GiB address-space
//! limit (`ulimit -v`), so a regression aborts only the child, and each must end in one
//! line naming what asked for the bytes, with exit status 1: never a signal, never a panic.
//!
//! No case sets a limit: the budget is the default, derived from the machine (half the
//! smallest of physical memory, the cgroup limit and the address-space limit, so at most
//! 2 GiB under the 4 GiB limit here), except where a case says otherwise.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord::op::{
    Conv, CoordinateTransform, Gemm, NearestMode, PadMode, Reduce, ReduceKind, Resize, ResizeMode,
    Unary,
};
use concord::{DType, Dim, Graph, Node, Op, Shape, Tensor, ValueInfo};
use std::path::Path;
use std::process::{Command, Output};

mod limited;
mod scratch;

use scratch::{Scratch, ScratchFile};

/// `concord ARGS` under the address-space limit (`limited`).
fn concord_limited(args: &[&str]) -> Output {
    limited::concord(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run concord under sh: {e}"))
}

fn temp_dir(name: &str) -> Scratch {
    Scratch::made("concord-budget-test", name)
}

fn model_file(name: &str, graph: &Graph) -> ScratchFile {
    let bytes = concord::internals::onnx::save(graph)
        .unwrap_or_else(|e| panic!("cannot write the {name} model: {e}"));
    ScratchFile::write("concord-budget-test", name, "model.onnx", &bytes)
}

fn graph(
    inputs: Vec<ValueInfo>,
    nodes: Vec<Node>,
    outputs: &[&str],
    initializers: Vec<(&str, Tensor)>,
) -> Graph {
    Graph {
        name: "budget-test".into(),
        inputs,
        outputs: outputs.iter().map(|s| s.to_string()).collect(),
        initializers: initializers
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect(),
        nodes,
        opset: 18,
        values: Default::default(),
    }
}

fn i64s(values: &[i64]) -> Tensor {
    Tensor::from_i64(Shape(vec![values.len()]), values.to_vec()).unwrap_or_else(|e| panic!("{e}"))
}

fn f32s(dims: &[usize], value: f32) -> Tensor {
    let n = dims.iter().product();
    Tensor::from_f32(Shape(dims.to_vec()), vec![value; n]).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `model` with seeded random inputs on `backend` and checks the result is one line,
/// exit status 1, naming every one of `needles`.
fn assert_refused(model: &Path, backend: &str, needles: &[&str]) -> String {
    let o = concord_limited(&[
        "run",
        &model.display().to_string(),
        "--random-seed",
        "1",
        "--backend",
        backend,
        "--fallback",
        "allow",
    ]);
    assert_one_line_exit_1(&o, needles)
}

fn assert_one_line_exit_1(o: &Output, needles: &[&str]) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    // A signal (an abort under the address limit) leaves no exit code.
    assert_eq!(o.status.code(), Some(1), "not a clean error exit: {err}");
    assert!(!err.contains("panicked"), "a panic reached the user: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    for needle in needles {
        assert!(lines[0].contains(needle), "`{}` lacks `{needle}`", lines[0]);
    }
    lines[0].to_string()
}

const MILLION: usize = 1_000_000;

/// The limit an error line states ("memory limit of N bytes").
fn default_limit_in(line: &str) -> Option<u64> {
    let rest = line.split("memory limit of ").nth(1)?;
    rest.split(' ').next()?.parse().ok()
}

/// The executors every model case runs on: the reference, and OpenCL (which, without an
/// OpenCL device, falls back to the reference and must refuse the same way).
const BACKENDS: [&str; 2] = ["cpu", "opencl"];

/// A model case: its name, graph, the words its error must hold, and the bytes it must
/// name: `reference` when the reference refuses (its outputs with the f64 working copy a
/// computing kernel holds, 12 bytes per f32 element; 4 for kernels that only move
/// elements), `device` when OpenCL refuses a device buffer.
struct Case {
    name: &'static str,
    graph: Graph,
    needles: Vec<&'static str>,
    reference: &'static str,
    device: &'static str,
}

fn cases() -> Vec<Case> {
    let x1 = || ValueInfo::fixed("x", DType::F32, &[1]);
    let x4 = || ValueInfo::fixed("x", DType::F32, &[1, 1, 1, 1]);
    vec![
        Case {
            name: "expand_to_1e12",
            graph: graph(
                vec![x1()],
                vec![Node::new("grow", Op::Expand, &["x", "shape"], &["y"])],
                &["y"],
                vec![("shape", i64s(&[MILLION as i64, MILLION as i64]))],
            ),
            needles: vec!["`grow` (Expand)", "[1000000, 1000000]"],
            reference: "4000000000000 bytes",
            device: "4000000000000 bytes",
        },
        Case {
            // Every operand a constant: folding meets it first, when the net is built.
            name: "expand_of_constants_to_1e12",
            graph: graph(
                vec![],
                vec![Node::new("grow", Op::Expand, &["k", "shape"], &["y"])],
                &["y"],
                vec![
                    ("k", f32s(&[1], 1.0)),
                    ("shape", i64s(&[MILLION as i64, MILLION as i64])),
                ],
            ),
            needles: vec!["`grow` (Expand)", "[1000000, 1000000]"],
            reference: "4000000000000 bytes",
            device: "4000000000000 bytes",
        },
        Case {
            name: "matmul_1e6_by_1e6",
            graph: graph(
                vec![
                    ValueInfo::fixed("a", DType::F32, &[MILLION, 1]),
                    ValueInfo::fixed("b", DType::F32, &[1, MILLION]),
                ],
                vec![Node::new("outer", Op::MatMul, &["a", "b"], &["y"])],
                &["y"],
                vec![],
            ),
            needles: vec!["`outer` (MatMul)", "[1000000, 1000000]"],
            reference: "12000000000000 bytes",
            device: "4000000000000 bytes",
        },
        Case {
            name: "gemm_1e6_by_1e6",
            graph: graph(
                vec![
                    ValueInfo::fixed("a", DType::F32, &[MILLION, 1]),
                    ValueInfo::fixed("b", DType::F32, &[1, MILLION]),
                ],
                vec![Node::new(
                    "outer",
                    Op::Gemm(Gemm::default()),
                    &["a", "b"],
                    &["y"],
                )],
                &["y"],
                vec![],
            ),
            needles: vec!["`outer` (Gemm)", "[1000000, 1000000]"],
            reference: "12000000000000 bytes",
            device: "4000000000000 bytes",
        },
        Case {
            name: "conv_with_huge_pads",
            graph: graph(
                vec![x4()],
                vec![Node::new(
                    "padded",
                    Op::Conv(Conv {
                        pads: vec![MILLION; 4],
                        ..Conv::default()
                    }),
                    &["x", "w"],
                    &["y"],
                )],
                &["y"],
                vec![("w", f32s(&[1, 1, 1, 1], 1.0))],
            ),
            needles: vec!["`padded` (Conv)", "[1, 1, 2000001, 2000001]"],
            reference: "48000048000012 bytes",
            device: "16000016000004 bytes",
        },
        Case {
            name: "pad_to_1e12",
            graph: graph(
                vec![x1()],
                vec![Node::new(
                    "wide",
                    Op::Pad {
                        mode: PadMode::Constant,
                    },
                    &["x", "pads"],
                    &["y"],
                )],
                &["y"],
                vec![("pads", i64s(&[0, 1_000_000_000_000]))],
            ),
            needles: vec!["`wide` (Pad)", "[1000000000001]"],
            reference: "4000000000004 bytes",
            device: "4000000000004 bytes",
        },
        Case {
            name: "resize_to_1e12",
            graph: graph(
                vec![x4()],
                vec![Node::new(
                    "zoom",
                    Op::Resize(Resize {
                        mode: ResizeMode::Nearest,
                        coordinate_transformation_mode: CoordinateTransform::Asymmetric,
                        nearest_mode: NearestMode::Floor,
                        ..Resize::default()
                    }),
                    &["x", "", "", "sizes"],
                    &["y"],
                )],
                &["y"],
                vec![("sizes", i64s(&[1, 1, MILLION as i64, MILLION as i64]))],
            ),
            needles: vec!["`zoom` (Resize)", "[1, 1, 1000000, 1000000]"],
            reference: "12000000000000 bytes",
            device: "4000000000000 bytes",
        },
        Case {
            // An empty input reduced over its empty axis: every output element is the
            // identity, and there are 10^12 of them.
            name: "reduce_of_empty_input_to_1e12",
            graph: graph(
                vec![ValueInfo::fixed("x", DType::F32, &[0, MILLION, MILLION])],
                vec![Node::new(
                    "sum",
                    Op::Reduce(ReduceKind::Sum, Reduce::default()),
                    &["x", "axes"],
                    &["y"],
                )],
                &["y"],
                vec![("axes", i64s(&[0]))],
            ),
            needles: vec!["`sum` (ReduceSum)", "[1, 1000000, 1000000]"],
            reference: "12000000000000 bytes",
            device: "4000000000000 bytes",
        },
        Case {
            // 2^62 output elements: their bytes overflow a 64-bit count.
            name: "reduce_to_2_pow_62",
            graph: graph(
                vec![ValueInfo::fixed("x", DType::F32, &[0, 1 << 31, 1 << 31])],
                vec![Node::new(
                    "sum",
                    Op::Reduce(ReduceKind::Sum, Reduce::default()),
                    &["x", "axes"],
                    &["y"],
                )],
                &["y"],
                vec![("axes", i64s(&[0]))],
            ),
            needles: vec!["`sum` (ReduceSum)", "[1, 2147483648, 2147483648]"],
            reference: "more bytes than a 64-bit count holds",
            device: "more bytes than a 64-bit count holds",
        },
    ]
}

#[test]
fn models_whose_shapes_imply_terabytes_are_refused_by_the_budget() {
    for case in cases() {
        let model = model_file(case.name, &case.graph);
        for backend in BACKENDS {
            let mut needles = case.needles.clone();
            needles.push("memory limit");
            let line = assert_refused(&model, backend, &needles);
            // OpenCL refuses its device buffer when it takes the node; the reference
            // refuses when it runs it (on cpu, or as OpenCL's fallback without a device).
            let bytes = if line.contains("executor `opencl`") {
                case.device
            } else {
                case.reference
            };
            assert!(
                line.contains(bytes),
                "{} on {backend}: `{line}` lacks `{bytes}`",
                case.name
            );
            // The default budget is half the smallest of physical memory, the cgroup limit
            // and the address-space limit, so under the 4 GiB address limit at most 2 GiB
            // (exactly 2 GiB on a machine with more than 4 GiB to give).
            let limit = default_limit_in(&line);
            assert!(
                limit.is_some_and(|l| l > 0 && l <= 2 << 30),
                "{} on {backend}: {line}",
                case.name
            );
        }
    }
}

#[test]
fn a_declared_input_of_a_million_by_a_million_gets_no_random_values() {
    let model = model_file(
        "random_input_1e12",
        &graph(
            vec![ValueInfo::fixed("x", DType::F32, &[MILLION, MILLION])],
            vec![Node::new("relu", Op::Unary(Unary::Relu), &["x"], &["y"])],
            &["y"],
            vec![],
        ),
    );
    assert_refused(
        &model,
        "cpu",
        &[
            "random values for input `x`",
            "[1000000, 1000000]",
            "4000000000000 bytes",
            "memory limit",
        ],
    );
}

#[test]
fn the_limit_is_the_callers_to_set_and_a_small_one_refuses_a_small_model() {
    // A Relu of 1,024 floats needs 4 KiB per value: within the default, over a 1 KiB limit
    // from the flag or from CONCORD_MEMORY_LIMIT.
    let model = model_file(
        "small_model",
        &graph(
            vec![ValueInfo::fixed("x", DType::F32, &[1024])],
            vec![Node::new("relu", Op::Unary(Unary::Relu), &["x"], &["y"])],
            &["y"],
            vec![],
        ),
    );
    let path = model.display().to_string();
    let o = concord_limited(&["run", &path, "--random-seed", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_one_line_exit_1(
        &concord_limited(&["run", &path, "--random-seed", "1", "--memory-limit", "1K"]),
        &["input `x`", "4096 bytes", "memory limit of 1024 bytes"],
    );
    let from_env = Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(["run", &path, "--random-seed", "1"])
        .env("CONCORD_MEMORY_LIMIT", "1K")
        .output()
        .unwrap_or_else(|e| panic!("cannot run concord: {e}"));
    assert_one_line_exit_1(&from_env, &["4096 bytes", "memory limit of 1024 bytes"]);
    // The model file itself (a few hundred bytes) is over a limit of 16 bytes.
    assert_one_line_exit_1(
        &concord_limited(&["run", &path, "--random-seed", "1", "--memory-limit", "16"]),
        &["model.onnx", "more than the memory limit of 16 bytes"],
    );
}

#[test]
fn an_npy_whose_header_claims_gigabytes_is_refused_before_it_is_allocated() {
    let model = model_file(
        "npy_header",
        &graph(
            vec![ValueInfo::fixed("x", DType::F32, &[1])],
            vec![Node::new("relu", Op::Unary(Unary::Relu), &["x"], &["y"])],
            &["y"],
            vec![],
        ),
    );
    let dir = temp_dir("npy_header_data");
    // Format 2.0: a four-byte header length, here 4 GiB - 1.
    let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
    bytes.extend(u32::MAX.to_le_bytes());
    bytes.extend(b"{'descr': '<f4'");
    let npy = dir.join("x.npy");
    std::fs::write(&npy, bytes).unwrap_or_else(|e| panic!("{e}"));
    let o = concord_limited(&[
        "run",
        &model.display().to_string(),
        "--input",
        &format!("x={}", npy.display()),
    ]);
    assert_one_line_exit_1(&o, &["x.npy", "4294967295 bytes"]);
}

#[test]
fn an_npy_larger_than_the_limit_is_refused_before_it_is_read() {
    let model = model_file(
        "npy_budget",
        &graph(
            vec![ValueInfo::fixed("x", DType::F32, &[1024])],
            vec![Node::new("relu", Op::Unary(Unary::Relu), &["x"], &["y"])],
            &["y"],
            vec![],
        ),
    );
    let npy_dir = temp_dir("npy_budget_data");
    let npy = npy_dir.join("x.npy");
    concord::npy::write(&npy, &f32s(&[1024], 0.5)).unwrap_or_else(|e| panic!("{e}"));
    let o = concord_limited(&[
        "run",
        &model.display().to_string(),
        "--input",
        &format!("x={}", npy.display()),
        "--memory-limit",
        "2K",
    ]);
    assert_one_line_exit_1(
        &o,
        &["x.npy", "[1024]", "4096 bytes", "memory limit of 2048"],
    );
}

#[test]
fn time_limit_flag_stops_a_forward_past_it_and_leaves_one_within_it_alone() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/golden");
    let model = root.join("exported/torch_resnet/model.onnx");
    let input = format!(
        "image={}",
        root.join("cases/torch_resnet/inputs/image.npy").display()
    );
    let model = model.display().to_string();
    let out = temp_dir("time_limit_out");
    let out = out.display().to_string();
    let run = |limit: &str| {
        concord_limited(&[
            "run",
            &model,
            "--input",
            &input,
            "--output-dir",
            &out,
            "--time-limit",
            limit,
        ])
    };
    // A limit of zero: the forward is past it at the first check after it starts (between
    // partitions or before a node), whatever the machine's speed.
    let stopped = assert_one_line_exit_1(&run("0s"), &["ran past the time limit of 0ns"]);
    assert!(stopped.contains("CONCORD_TIME_LIMIT"), "{stopped}");
    let within = run("1h");
    assert!(
        within.status.success(),
        "{}",
        String::from_utf8_lossy(&within.stderr)
    );
    assert_one_line_exit_1(
        &run("soon"),
        &["--time-limit `soon`", "expected a duration"],
    );
}

#[test]
fn a_model_path_that_never_ends_is_refused_before_it_is_read() {
    // A device that reads forever.
    assert_one_line_exit_1(
        &concord_limited(&["run", "/dev/zero", "--random-seed", "1"]),
        &["/dev/zero", "not a regular file"],
    );
    // A FIFO nobody writes to: opening it for reading would block forever.
    let fifo_dir = temp_dir("fifo");
    let fifo = fifo_dir.join("model.onnx");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap_or_else(|e| panic!("cannot run mkfifo: {e}"));
    assert!(made.success(), "mkfifo {fifo:?} failed");
    assert_one_line_exit_1(
        &concord_limited(&["run", &fifo.display().to_string(), "--random-seed", "1"]),
        &["model.onnx", "not a regular file"],
    );
}

#[test]
fn a_net_built_with_a_limit_refuses_a_node_over_it_when_it_runs() {
    // The library side: a symbolic input dim means the size is known only at forward.
    let graph = graph(
        vec![ValueInfo::new(
            "x",
            DType::F32,
            vec![Dim::Named("n".into())],
        )],
        vec![Node::new("relu", Op::Unary(Unary::Relu), &["x"], &["y"])],
        &["y"],
        vec![],
    );
    let net = concord::NetBuilder::from_graph(graph)
        .memory_limit(64 * 1024)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(net.memory_budget().limit(), 64 * 1024);
    let fits = net.forward([("x", f32s(&[1024], -1.0))]);
    assert!(fits.is_ok(), "{fits:?}");
    let over = net.forward([("x", f32s(&[65_536], -1.0))]);
    let message = over
        .map(|_| ())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        message.contains("node `relu` (Relu)")
            && message.contains("[65536]")
            && message.contains("786432 bytes")
            && message.contains("memory limit of 65536 bytes"),
        "{message}"
    );
}

#[test]
fn a_conv_whose_scratch_dwarfs_its_output_is_refused_by_the_budget() {
    // 512 input channels, a 3x3 kernel and pads of 2,000: the output is 64 MB, but the
    // reference's im2col matrix would be 4,608 x 15,992,001 f64s (590 GB).
    let model = model_file(
        "conv_im2col",
        &graph(
            vec![ValueInfo::fixed("x", DType::F32, &[1, 512, 1, 1])],
            vec![Node::new(
                "wide",
                Op::Conv(Conv {
                    pads: vec![2000; 4],
                    ..Conv::default()
                }),
                &["x", "w"],
                &["y"],
            )],
            &["y"],
            vec![("w", f32s(&[1, 512, 3, 3], 0.5))],
        ),
    );
    assert_refused(
        &model,
        "cpu",
        &[
            "`wide` (Conv)",
            "Conv's im2col matrix",
            "[4608, 15992001]",
            "589529124864 bytes",
            "memory limit",
        ],
    );
}

#[test]
fn a_loop_whose_scan_output_grows_without_end_is_stopped_by_the_budget() {
    // No trip count and a body whose cond is always true: only the budget ends it. Each
    // iteration adds 10,000 f32s (40,000 bytes) to the scan output; under a 1 MiB limit the
    // 27th iteration is refused.
    let body = Graph {
        name: "body".into(),
        inputs: vec![
            ValueInfo::fixed("i", DType::I64, &[]),
            ValueInfo::fixed("c", DType::Bool, &[]),
        ],
        outputs: vec!["c_out".into(), "row".into()],
        initializers: [("k".to_string(), f32s(&[10_000], 0.25))].into(),
        nodes: vec![
            Node::new("keep", Op::Identity, &["c"], &["c_out"]),
            Node::new("emit", Op::Identity, &["k"], &["row"]),
        ],
        opset: 18,
        values: Default::default(),
    };
    let cond = Tensor::from_bool(Shape(vec![]), vec![true]).unwrap_or_else(|e| panic!("{e}"));
    let model = model_file(
        "endless_loop",
        &graph(
            vec![],
            vec![Node::new(
                "forever",
                Op::Loop {
                    body: Box::new(body),
                    captures: 0,
                },
                &["", "cond"],
                &["rows"],
            )],
            &["rows"],
            vec![("cond", cond)],
        ),
    );
    let o = concord_limited(&["run", &model.display().to_string(), "--memory-limit", "1M"]);
    assert_one_line_exit_1(
        &o,
        &[
            "`forever` (Loop)",
            "the scan output of 27 iterations",
            "1080000 bytes",
            "memory limit of 1048576 bytes",
        ],
    );
}
