//! The `concord` binary as a user meets it: outputs written, errors as one line with a
//! non-zero exit and never a panic, fallback said once on stderr, `info` and `--require`.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod scratch;

use scratch::{Scratch, ScratchFile};

fn concord(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(args)
        .env_remove("CONCORD_FALLBACK")
        .env_remove("CONCORD_REQUIRE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run concord: {e}"))
}

fn golden(case: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../conformance/golden/cases")
        .join(case);
    root.join("model.onnx").display().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn temp_dir(name: &str) -> Scratch {
    Scratch::new("concord-cli-test", name)
}

/// An error is one line on stderr, starting with "error:", with a non-zero exit.
fn assert_one_line_error(o: &Output, contains: &str) {
    assert!(
        !o.status.success(),
        "expected failure, got success: {}",
        stdout(o)
    );
    let err = stderr(o);
    assert!(!err.contains("panicked"), "a panic reached the user: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(
        lines[0].contains(contains),
        "`{}` lacks `{contains}`",
        lines[0]
    );
}

#[test]
fn run_writes_every_output_as_npy() {
    let out = temp_dir("run");
    let o = concord(&[
        "run",
        &golden("residual_block"),
        "--random-seed",
        "3",
        "--output-dir",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let files: Vec<_> = std::fs::read_dir(&out)
        .map(|d| d.filter_map(|e| e.ok()).collect())
        .unwrap_or_default();
    assert_eq!(files.len(), 1, "one output, one file: {files:?}");
    let bytes = std::fs::read(files[0].path()).unwrap_or_default();
    assert!(bytes.starts_with(b"\x93NUMPY"), "not an .npy file");
}

#[test]
fn run_takes_named_npy_inputs_and_reproduces_the_oracle() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/golden/cases/relu");
    let input = std::fs::read_dir(case.join("inputs"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.path());
    let input = input.unwrap_or_else(|| panic!("relu case has an input"));
    let name = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let out = temp_dir("relu");
    let spec = format!("{name}={}", input.display());
    let o = concord(&[
        "run",
        &golden("relu"),
        "--input",
        &spec,
        "--output-dir",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let expected_dir = case.join("expected");
    for e in std::fs::read_dir(&expected_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let got = std::fs::read(out.join(e.file_name())).unwrap_or_default();
        let want = std::fs::read(e.path()).unwrap_or_default();
        // Relu is exact: the reference and onnxruntime agree bit for bit.
        assert_eq!(got.len(), want.len());
        assert_eq!(
            &got[got.len() - 64..],
            &want[want.len() - 64..],
            "{:?}",
            e.file_name()
        );
    }
}

#[test]
fn errors_are_one_line_never_a_panic() {
    assert_one_line_error(
        &concord(&["run", "/nonexistent/model.onnx", "--random-seed", "1"]),
        "/nonexistent/model.onnx",
    );
    let garbage = temp_dir("garbage");
    let _ = std::fs::create_dir_all(&garbage);
    let bad = garbage.join("bad.onnx");
    let _ = std::fs::write(&bad, b"this is not protobuf at all");
    assert_one_line_error(
        &concord(&["run", &bad.display().to_string(), "--random-seed", "1"]),
        "bad.onnx",
    );
    let not_npy = garbage.join("x.npy");
    let _ = std::fs::write(&not_npy, b"nope");
    let spec = format!("X={}", not_npy.display());
    assert_one_line_error(
        &concord(&["run", &golden("relu"), "--input", &spec]),
        "x.npy",
    );
    assert_one_line_error(
        &concord(&["run", &golden("relu"), "--input", "no-equals-sign"]),
        "NAME=FILE.npy",
    );
    assert_one_line_error(
        &concord(&[
            "run",
            &golden("relu"),
            "--random-seed",
            "1",
            "--fallback",
            "sometimes",
        ]),
        "deny, warn or allow",
    );
    assert_one_line_error(
        &concord(&[
            "run",
            &golden("relu"),
            "--random-seed",
            "1",
            "--target",
            "tpu",
        ]),
        "--target",
    );
}

#[test]
fn fallback_is_said_once_on_stderr_and_deny_refuses() {
    // A target the asked backend does not serve (the CPU asked for OpenCL's): Warn falls
    // back and says so once; Deny refuses with the reason.
    let o = concord(&[
        "run",
        &golden("relu"),
        "--random-seed",
        "1",
        "--backend",
        "cpu",
        "--target",
        "opencl",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let warnings: Vec<String> = stderr(&o)
        .lines()
        .filter(|l| l.contains("concord fallback"))
        .map(String::from)
        .collect();
    assert_eq!(warnings.len(), 1, "{}", stderr(&o));
    assert!(warnings[0].starts_with("warning: "), "{}", warnings[0]);
    assert!(warnings[0].contains("cpu/opencl"), "{}", warnings[0]);

    let quiet = concord(&[
        "run",
        &golden("relu"),
        "--random-seed",
        "1",
        "--backend",
        "cpu",
        "--target",
        "opencl",
        "--fallback",
        "allow",
    ]);
    assert!(quiet.status.success());
    assert!(
        !stderr(&quiet).contains("concord fallback"),
        "{}",
        stderr(&quiet)
    );

    assert_one_line_error(
        &concord(&[
            "run",
            &golden("relu"),
            "--random-seed",
            "1",
            "--backend",
            "cpu",
            "--target",
            "opencl",
            "--fallback",
            "deny",
        ]),
        "fallback policy deny",
    );
    // A name nobody has is a usage error whatever the policy, with the likely name.
    assert_one_line_error(
        &concord(&[
            "run",
            &golden("relu"),
            "--random-seed",
            "1",
            "--backend",
            "vulkan",
            "--fallback",
            "allow",
        ]),
        "no backend is named `vulkan`",
    );
    assert_one_line_error(
        &concord(&[
            "run",
            &golden("relu"),
            "--random-seed",
            "1",
            "--backend",
            "gpu",
        ]),
        "known backends: cpu",
    );
    assert_one_line_error(
        &concord(&[
            "run",
            &golden("relu"),
            "--random-seed",
            "1",
            "--target",
            "opencl-f16",
        ]),
        "did you mean `opencl-fp16`?",
    );
}

#[test]
fn placement_and_profile_are_printed() {
    let o = concord(&[
        "run",
        &golden("residual_block"),
        "--random-seed",
        "1",
        "--placement",
        "--profile",
        "3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("requested cpu/cpu -> resolved cpu/cpu"),
        "{text}"
    );
    assert!(text.contains("fallbacks: none"), "{text}");
    assert!(text.contains("3 forwards profiled (warm-up"), "{text}");
    assert!(text.contains("Conv"), "{text}");
}

#[test]
fn info_reports_backends_and_require_asserts() {
    let o = concord(&["info", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    // Machine-specific probe results are redacted; what this build compiles in is not.
    insta::assert_json_snapshot!("info_json", v, {
        ".concord_version" => "[version]",
        ".backends[].probe" => "[probe]",
        ".backends[].targets" => "[targets]",
        ".backends[].probe_details" => "[probe details]",
    });
    assert!(concord(&["info", "--require", "cpu"]).status.success());
    assert!(concord(&["info", "--require", "cpu:cpu"]).status.success());
    let unmet = concord(&["info", "--require", "cpu:cuda-fp16"]);
    assert!(!unmet.status.success());
    assert!(
        stderr(&unmet).contains("not valid for backend cpu"),
        "{}",
        stderr(&unmet)
    );
    let unknown = concord(&["info", "--require", "vulkan"]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("no executor or target is named `vulkan`; known: cpu, "),
        "{}",
        stderr(&unknown)
    );
    let typo = concord(&["info", "--require", "opencl:opencl-fp61"]);
    assert_one_line_error(&typo, "(did you mean `opencl-fp16`?)");
}

/// Every line the CLI prints about an unavailable CUDA fits on a line (300 characters):
/// the probe's reason is one line wherever it is repeated (warning, Deny error, placement,
/// `info`), and `info` wraps the long list of library names it tried. With a usable CUDA,
/// the same requests run on it.
#[test]
fn lines_about_an_unavailable_cuda_fit_on_a_line() {
    let info = concord(&["info", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap_or_default();
    let cuda = v["backends"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["name"] == "cuda")
        .cloned()
        .unwrap_or_default();
    let model = golden("residual_block");
    let placement = concord(&[
        "run",
        &model,
        "--random-seed",
        "1",
        "--backend",
        "cuda",
        "--placement",
    ]);
    assert!(placement.status.success(), "{}", stderr(&placement));
    if cuda["probe"]["status"] == "available" {
        assert!(
            stdout(&placement).contains("resolved cuda/cuda"),
            "{}",
            stdout(&placement)
        );
        return;
    }
    let deny = concord(&[
        "run",
        &model,
        "--random-seed",
        "1",
        "--target",
        "cuda-fp16",
        "--fallback",
        "deny",
    ]);
    assert!(!deny.status.success());
    let text = concord(&["info"]);
    let required = concord(&["info", "--require", "cuda"]);
    assert!(!required.status.success());
    let printed = [&placement, &deny, &text, &required]
        .iter()
        .map(|o| format!("{}{}", stdout(o), stderr(o)))
        .collect::<Vec<_>>()
        .join("\n");
    // `info` also prints an OpenCL device's extension list, which is not about CUDA.
    let cuda_block: Vec<&str> = printed
        .lines()
        .filter(|l| !l.trim_start().starts_with("extensions:"))
        .collect();
    // The model's path is the user's to choose (here an absolute path into the checkout),
    // so it counts as the five characters of "MODEL".
    for line in &cuda_block {
        let line = line.replace(&model, "MODEL");
        let n = line.chars().count();
        assert!(n <= 300, "{n} characters: {line}");
    }
    // The reason is said once under "fallbacks:", not on every node row.
    let rows = stdout(&placement).matches("not found (searched").count();
    assert_eq!(rows, 1, "{}", stdout(&placement));
    // The full search list is still in `info`, and in its JSON.
    assert!(stdout(&text).contains("libcuda.so.1"), "{}", stdout(&text));
    assert!(
        cuda["probe_details"].to_string().contains("libcuda.so.1"),
        "{cuda}"
    );
}

/// Writes `graph` as model.onnx in a fresh directory named `name`, returning the path.
fn model_file(name: &str, graph: &concord::Graph) -> ScratchFile {
    let bytes = concord::internals::onnx::save(graph)
        .unwrap_or_else(|e| panic!("cannot write the {name} model: {e}"));
    ScratchFile::write("concord-cli-test", name, "model.onnx", &bytes)
}

fn graph(
    inputs: Vec<concord::ValueInfo>,
    nodes: Vec<concord::Node>,
    outputs: &[&str],
    initializers: Vec<(&str, concord::Tensor)>,
) -> concord::Graph {
    concord::Graph {
        name: "cli-test".into(),
        inputs,
        outputs: outputs.iter().map(|s| s.to_string()).collect(),
        initializers: initializers
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect(),
        nodes,
        opset: 17,
        values: Default::default(),
    }
}

fn f32_npy(dir: &Path, name: &str, values: &[f32]) -> PathBuf {
    let path = dir.join(name);
    let t = concord::Tensor::from_f32(concord::Shape(vec![values.len()]), values.to_vec())
        .unwrap_or_else(|e| panic!("{e}"));
    concord::npy::write(&path, &t).unwrap_or_else(|e| panic!("{e}"));
    path
}

fn read_f32(path: &Path) -> Vec<f32> {
    let t = concord::npy::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    t.to_f64_vec().iter().map(|&v| v as f32).collect()
}

#[test]
fn a_model_without_inputs_runs() {
    use concord::{Node, Op, Shape, Tensor};
    let k = Tensor::from_f32(Shape(vec![2]), vec![1.5, -2.0]).unwrap_or_else(|e| panic!("{e}"));
    let model = model_file(
        "no-inputs",
        &graph(
            vec![],
            vec![
                Node::new("k", Op::Constant { value: k }, &[], &["k"]),
                Node::new("relu", Op::Unary(concord::op::Unary::Relu), &["k"], &["y"]),
            ],
            &["y"],
            vec![],
        ),
    );
    let out = temp_dir("no-inputs-out");
    let o = concord(&[
        "run",
        &model.display().to_string(),
        "--output-dir",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_f32(&out.join("y.npy")), vec![1.5, 0.0]);
}

#[test]
fn outputs_whose_names_map_to_one_file_get_distinct_printed_names() {
    use concord::op::Unary;
    use concord::{DType, Node, Op, ValueInfo};
    let model = model_file(
        "collide",
        &graph(
            vec![ValueInfo::fixed("x", DType::F32, &[2])],
            vec![
                Node::new("a", Op::Unary(Unary::Relu), &["x"], &["y/a"]),
                Node::new("b", Op::Unary(Unary::Neg), &["x"], &["y_a"]),
                Node::new("c", Op::Unary(Unary::Abs), &["x"], &["Y_A"]),
            ],
            &["y/a", "y_a", "Y_A"],
            vec![],
        ),
    );
    let dir = temp_dir("collide-out");
    let _ = std::fs::create_dir_all(&dir);
    let x = f32_npy(&dir, "x.npy", &[1.0, -2.0]);
    let o = concord(&[
        "run",
        &model.display().to_string(),
        "--input",
        &format!("x={}", x.display()),
        "--output-dir",
        &dir.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Every output is kept, each in its own file, and the renames are said.
    assert_eq!(read_f32(&dir.join("y_a.npy")), vec![1.0, 0.0]);
    assert_eq!(read_f32(&dir.join("y_a-2.npy")), vec![-1.0, 2.0]);
    assert_eq!(read_f32(&dir.join("Y_A-3.npy")), vec![1.0, 2.0]);
    let printed = stdout(&o);
    assert!(printed.contains("y_a-2.npy (renamed"), "{printed}");
    assert!(printed.contains("Y_A-3.npy (renamed"), "{printed}");
}

#[test]
fn errors_from_hostile_names_and_lists_are_one_line_of_about_a_kilobyte() {
    use concord::{DType, Node, Op, Shape, Tensor, ValueInfo};
    // A 20,000-entry Reshape spec and a 5,000-character node name.
    let spec =
        Tensor::from_i64(Shape(vec![20_000]), vec![3; 20_000]).unwrap_or_else(|e| panic!("{e}"));
    let long_node = "n".repeat(5_000);
    let model = model_file(
        "hostile-text",
        &graph(
            vec![ValueInfo::fixed("x", DType::F32, &[2])],
            vec![Node::new(
                &long_node,
                Op::Reshape { allowzero: false },
                &["x", "s"],
                &["y"],
            )],
            &["y"],
            vec![("s", spec)],
        ),
    );
    let o = concord(&["run", &model.display().to_string(), "--random-seed", "1"]);
    assert_one_line_error(&o, "Reshape");
    let line = stderr(&o);
    assert!(line.len() <= 1_100, "{} bytes: {line}", line.len());
    assert!(
        line.contains("more)…"),
        "the list is not cut with a count: {line}"
    );
    assert!(line.contains("chars)…"), "the name is not elided: {line}");
}

/// A model whose one node has op type `op_type` and no name, so that the reader names the
/// node after its op type.
fn model_with_op_type(name: &str, op_type: &str) -> ScratchFile {
    use concord::internals::onnx::proto::{
        GraphProto, ModelProto, NodeProto, OperatorSetIdProto, ValueInfoProto,
    };
    use prost::Message;
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            name: "g".into(),
            node: vec![NodeProto {
                input: vec!["x".into()],
                output: vec!["y".into()],
                op_type: op_type.into(),
                ..NodeProto::default()
            }],
            output: vec![ValueInfoProto {
                name: "y".into(),
                ..ValueInfoProto::default()
            }],
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    };
    ScratchFile::write(
        "concord-cli-test",
        name,
        "model.onnx",
        &model.encode_to_vec(),
    )
}

#[test]
fn an_op_type_of_100_000_characters_is_elided_in_a_one_line_error() {
    let op_type = "Q".repeat(100_000);
    let model = model_with_op_type("long-op-type", &op_type);
    let o = concord(&["run", &model.display().to_string(), "--random-seed", "1"]);
    assert_one_line_error(&o, "QQQQ");
    let line = stderr(&o);
    assert!(line.len() <= 1_100, "{} bytes: {line}", line.len());
    assert!(
        line.contains("chars)…"),
        "the op type is not elided: {line}"
    );
}

#[test]
fn a_protobuf_nested_past_the_decoders_limit_is_a_one_line_error() {
    use concord::internals::onnx::proto::{
        AttributeProto, AttributeType, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    };
    use prost::Message;
    // 60 If nodes, each one's then_branch holding the next: 180 nested messages, past the
    // decoder's recursion limit of 100, whose error names the field path level by level.
    let mut inner = GraphProto {
        name: "innermost".into(),
        ..GraphProto::default()
    };
    for level in 0..60 {
        inner = GraphProto {
            name: format!("level{level}"),
            node: vec![NodeProto {
                op_type: "If".into(),
                input: vec!["c".into()],
                output: vec!["y".into()],
                attribute: vec![AttributeProto {
                    name: "then_branch".into(),
                    r#type: AttributeType::Graph as i32,
                    g: Some(Box::new(inner)),
                    ..AttributeProto::default()
                }],
                ..NodeProto::default()
            }],
            ..GraphProto::default()
        };
    }
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(inner),
        ..ModelProto::default()
    };
    let dir = temp_dir("deep-protobuf");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("model.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap_or_else(|e| panic!("{e}"));
    let o = concord(&["run", &path.display().to_string(), "--random-seed", "1"]);
    assert_one_line_error(&o, "model.onnx");
    let line = stderr(&o);
    assert!(line.len() <= 1_100, "{} bytes: {line}", line.len());
    assert!(line.contains("recursion limit"), "{line}");
}

/// Small things a user reads: an empty half of `--input`, "1 node" in the singular, and an
/// environment override of `--fallback` said once.
#[test]
fn small_messages_read_right() {
    let model = golden("residual_block");
    let empty_file = concord(&["run", &model, "--input", "X="]);
    assert_one_line_error(
        &empty_file,
        "--input `X=` is not NAME=FILE.npy: the file is empty",
    );
    let empty_name = concord(&["run", &model, "--input", "=x.npy"]);
    assert_one_line_error(&empty_name, "the name is empty");
    // One LSTM node with sequence_lens, which the OpenCL kernel declines: whether OpenCL is
    // here or not, one node falls back.
    let lstm = golden("lstm_bidirectional_seq_lens");
    let one = concord(&[
        "run",
        &lstm,
        "--random-seed",
        "1",
        "--backend",
        "opencl",
        "--fallback",
        "deny",
    ]);
    assert_one_line_error(&one, "(1 node)");
}

/// `concord run` with CONCORD_FALLBACK set, on a request that falls back on every machine
/// (the CPU asked for OpenCL's target); returns the output.
fn run_with_fallback_env(env: &str, flag: Option<&str>) -> Output {
    let model = golden("relu");
    let mut args = vec![
        "run",
        model.as_str(),
        "--random-seed",
        "1",
        "--backend",
        "cpu",
        "--target",
        "opencl",
    ];
    if let Some(flag) = flag {
        args.extend(["--fallback", flag]);
    }
    Command::new(env!("CARGO_BIN_EXE_concord"))
        .args(args)
        .env("CONCORD_FALLBACK", env)
        .env_remove("CONCORD_REQUIRE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run concord: {e}"))
}

#[test]
fn the_fallback_flag_wins_over_concord_fallback_and_says_so_once() {
    // An explicit --fallback deny is not undone by a CONCORD_FALLBACK=allow in the
    // environment: the run is refused, after one note saying which won.
    let denied = run_with_fallback_env("allow", Some("deny"));
    assert!(!denied.status.success(), "{}", stdout(&denied));
    let err = stderr(&denied);
    assert_eq!(
        err.matches("note: --fallback deny wins over CONCORD_FALLBACK=allow")
            .count(),
        1,
        "{err}"
    );
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains("fallback policy deny"), "{err}");
    // The other way round: --fallback allow over CONCORD_FALLBACK=deny runs, quietly
    // but for the note.
    let allowed = run_with_fallback_env("deny", Some("allow"));
    assert!(allowed.status.success(), "{}", stderr(&allowed));
    assert_eq!(
        stderr(&allowed).trim(),
        "note: --fallback allow wins over CONCORD_FALLBACK=deny"
    );
    // Agreeing, there is nothing to say.
    let same = run_with_fallback_env("deny", Some("deny"));
    assert!(!same.status.success());
    assert!(!stderr(&same).contains("note:"), "{}", stderr(&same));
    // Without the flag, the environment decides.
    let from_env = run_with_fallback_env("deny", None);
    assert_one_line_error(&from_env, "fallback policy deny");
    // A malformed variable is an error even when the flag would decide.
    let typo = run_with_fallback_env("sometimes", Some("warn"));
    assert_one_line_error(&typo, "CONCORD_FALLBACK");
}
