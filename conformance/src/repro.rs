//! Standalone repros of failing property cases, and their replay.
//!
//! A repro is a directory `<executor>-<target>-<op>-<hash>/` holding everything needed to
//! see the failure again without the suite: `model.onnx` (the single-node model, constant
//! operands as initializers), `inputs/<name>.npy` (the runtime inputs), `expected/<name>.npy`
//! (the reference executor's outputs), `case.toml` (the case in the case-file format, ready
//! to paste into conformance/cases/) and `README.txt` with the one command that replays it:
//! `concord repro DIR --backend NAME --target T`, which calls [`replay`].

use crate::case::{stable_seed, AttributeValue, CaseFile, InputSpec, OpCase};
use crate::compare::{compare, Comparison};
use crate::golden::{read_npy, write_npy};
use crate::suite::round_through_f16;
use crate::tolerance::{allowance, ToleranceTable};
use concord::{
    Backend, ExecutorRegistry, FallbackPolicy, Graph, NetBuilder, Overrides, Target, TargetSpec,
    Tensor,
};
use concord_core::DType;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A repro written to disk.
#[derive(Clone, Debug)]
pub struct Repro {
    pub dir: PathBuf,
    /// The command that replays it.
    pub command: String,
    /// The case as written to case.toml, with its regression name.
    pub case: OpCase,
    /// case.toml's case, in the case-file format.
    pub case_toml: String,
}

/// What replaying a repro found.
#[derive(Clone, Debug)]
pub struct Replay {
    pub op: String,
    pub backend: String,
    pub target: Target,
    /// The tolerance level the comparison used.
    pub level: String,
    pub comparisons: Vec<Comparison>,
}

/// File names inside a repro directory.
pub const MODEL: &str = "model.onnx";
pub const CASE: &str = "case.toml";
pub const README: &str = "README.txt";
pub const INPUTS: &str = "inputs";
pub const EXPECTED: &str = "expected";

impl Replay {
    /// Whether every expected output was matched within tolerance.
    pub fn passed(&self) -> bool {
        !self.comparisons.is_empty() && self.comparisons.iter().all(Comparison::passed)
    }

    /// One line per output: the figures, and what is wrong where something is.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "{} on {}/{} against the reference's expected outputs, tolerance level `{}`:",
            self.op, self.backend, self.target, self.level
        );
        for c in &self.comparisons {
            if c.passed() {
                let _ = write!(
                    out,
                    "\n  output `{}`: within tolerance ({} elements, max abs error {:e}, max rel error {:e})",
                    c.output, c.elements, c.max_abs_error, c.max_rel_error
                );
            } else {
                let _ = write!(out, "\n  {}", c.describe());
            }
        }
        out
    }
}

/// Writes `case`, which failed on `executor`/`target` with `failure`, as a repro under
/// `root`. The expected outputs come from the reference (on an fp16 target, fed the same
/// f16-rounded values the suite compared against).
pub fn write(
    root: &Path,
    executor: &str,
    spec: &TargetSpec,
    case: &OpCase,
    failure: &str,
) -> Result<Repro, String> {
    let target = &spec.target;
    let hash = stable_seed(&case_toml(case), "", 0) as u32;
    let mut named = case.clone();
    named.name = format!("regression_{hash:08x}");
    named.about = format!(
        "minimal failing case of prop/{} on {executor}/{target}",
        case.op
    );
    let dir = root.join(format!(
        "{}-{target}-{}-{hash:08x}",
        file_safe(executor),
        file_safe(&case.op)
    ));
    let io = |path: &Path, e: std::io::Error| format!("{}: {e}", path.display());
    for sub in [INPUTS, EXPECTED] {
        let path = dir.join(sub);
        std::fs::create_dir_all(&path).map_err(|e| io(&path, e))?;
    }
    let built = named.build().map_err(|e| e.to_string())?;
    let model = prost::Message::encode_to_vec(&built.model);
    let model_path = dir.join(MODEL);
    std::fs::write(&model_path, &model).map_err(|e| io(&model_path, e))?;
    for (name, tensor) in &built.inputs {
        write_npy(&dir.join(INPUTS).join(format!("{name}.npy")), tensor)?;
    }
    for (name, tensor) in reference_outputs(&model, &built.inputs, spec)? {
        write_npy(
            &dir.join(EXPECTED).join(format!("{}.npy", file_safe(&name))),
            &tensor,
        )?;
    }
    let command = replay_command(&dir, executor, target);
    let toml = case_toml(&named);
    let case_path = dir.join(CASE);
    std::fs::write(
        &case_path,
        format!(
            "# Minimal failing case of the property trial prop/{} on {executor}/{target}.\n\
             # Paste the [[case]] below into conformance/cases/ to keep it as a named\n\
             # regression case.\n\n{toml}",
            case.op
        ),
    )
    .map_err(|e| io(&case_path, e))?;
    let readme_path = dir.join(README);
    std::fs::write(
        &readme_path,
        readme(&named.op, executor, target, &dir, &command, failure),
    )
    .map_err(|e| io(&readme_path, e))?;
    Ok(Repro {
        dir,
        command,
        case: named,
        case_toml: toml,
    })
}

/// The command that replays the repro in `dir`.
pub fn replay_command(dir: &Path, executor: &str, target: &Target) -> String {
    format!(
        "concord repro {} --backend {executor} --target {target}",
        dir.display()
    )
}

/// `case` as one `[[case]]` of a case file (conformance/cases/*.toml), keys in the order
/// a person writes them.
pub fn case_toml(case: &OpCase) -> String {
    let mut out = String::from("[[case]]\n");
    line(&mut out, "name", case.name.clone().into());
    line(&mut out, "op", case.op.clone().into());
    line(&mut out, "opset", case.opset.into());
    if case.outputs != 1 {
        line(&mut out, "outputs", (case.outputs as i64).into());
    }
    if !case.about.is_empty() {
        line(&mut out, "about", case.about.clone().into());
    }
    if !case.attributes.is_empty() {
        out.push_str("\n[case.attributes]\n");
        for (name, value) in &case.attributes {
            line(&mut out, name, attribute_value(value));
        }
    }
    for spec in &case.inputs {
        out.push_str("\n[[case.inputs]]\n");
        for (key, value) in input_fields(spec) {
            line(&mut out, key, value);
        }
    }
    out
}

/// One `key = value` line; keys that are not bare TOML keys are quoted.
fn line(out: &mut String, key: &str, value: toml::Value) {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        let _ = writeln!(out, "{key} = {value}");
    } else {
        let _ = writeln!(out, "{} = {value}", toml::Value::from(key));
    }
}

/// Reads the case of a repro's case.toml.
pub fn read_case(dir: &Path) -> Result<OpCase, String> {
    let path = dir.join(CASE);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file: CaseFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    file.cases
        .into_iter()
        .next()
        .ok_or_else(|| format!("{}: no [[case]]", path.display()))
}

/// Replays the repro in `dir` on `backend` (from `registry`) and compares with its
/// expected outputs under the tolerance level of the op recorded in case.toml. The net is
/// built with fallback denied: a node the backend declines is an error, not a quiet run on
/// the reference.
pub fn replay(
    dir: &Path,
    registry: ExecutorRegistry,
    backend: &Backend,
    target: Option<Target>,
) -> Result<Replay, String> {
    let case = read_case(dir)?;
    let model_path = dir.join(MODEL);
    let model = std::fs::read(&model_path).map_err(|e| format!("{}: {e}", model_path.display()))?;
    let inputs = read_npy_dir(&dir.join(INPUTS))?;
    let expected = read_npy_dir(&dir.join(EXPECTED))?;
    if expected.is_empty() {
        return Err(format!(
            "{}: no expected outputs",
            dir.join(EXPECTED).display()
        ));
    }
    let mut builder = NetBuilder::from_onnx_bytes(model)
        .registry(registry.clone())
        .backend(backend.clone())
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default());
    if let Some(t) = target {
        builder = builder.target(t);
    }
    let net = builder.build().map_err(|e| {
        format!(
            "{}: building the net on {backend}: {e}",
            model_path.display()
        )
    })?;
    let target = net.placement().resolved_target.clone();
    // The precision of the target that ran, as its executor declares it.
    let spec = net
        .placement()
        .partitions
        .iter()
        .find(|p| p.target == target)
        .and_then(|p| registry.get(&Backend::named(&p.executor)))
        .and_then(|e| e.targets().into_iter().find(|s| s.target == target))
        .unwrap_or_else(|| TargetSpec::new(target.clone(), DType::F32, DType::F32));
    let actual = net
        .forward(inputs.clone())
        .map_err(|e| format!("forward on {backend}/{target} failed: {e}"))?;
    let table = ToleranceTable::builtin().map_err(|e| e.to_string())?;
    let chosen = table
        .level_for(&case.op, &target)
        .ok_or_else(|| format!("no tolerance level for {} in tolerances.toml", case.op))?;
    // The suite measured the reference on f16-rounded inputs for an fp16 target; the
    // accumulation figures use the same values.
    let reference_inputs: Vec<(String, Tensor)> = inputs
        .iter()
        .map(|(n, t)| {
            let t = if spec.stores_f16() {
                round_through_f16(t)
            } else {
                t.clone()
            };
            (n.clone(), t)
        })
        .collect();
    let accumulation = if net.graph().nodes.len() == 1 {
        crate::suite::node_accumulation(net.graph(), &reference_inputs)
    } else {
        None
    };
    let mut comparisons = Vec::new();
    for (name, want) in &expected {
        let Some((_, got)) = actual.iter().find(|(n, _)| file_safe(n) == *name) else {
            return Err(format!(
                "the model has no output `{name}` (expected/{name}.npy)"
            ));
        };
        let allowed = allowance(chosen.level, &spec, want, accumulation.as_ref())?;
        comparisons.push(compare(name, got, want, &|i, _| {
            allowed.get(i).copied().unwrap_or(0.0)
        }));
    }
    Ok(Replay {
        op: case.op,
        backend: backend.name().to_string(),
        target,
        level: chosen.name.to_string(),
        comparisons,
    })
}

/// The reference's outputs for `model` on `inputs`; on an fp16 target the runtime inputs
/// and float initializers are rounded through f16 first, as the suite does.
pub fn reference_outputs(
    model: &[u8],
    inputs: &[(String, Tensor)],
    target: &TargetSpec,
) -> Result<Vec<(String, Tensor)>, String> {
    let mut graph: Graph = concord_onnx::load(model).map_err(|e| e.to_string())?;
    let fp16 = target.stores_f16();
    if fp16 {
        for t in graph.initializers.values_mut() {
            if t.dtype() == DType::F32 {
                *t = round_through_f16(t);
            }
        }
    }
    let net = NetBuilder::from_graph(graph)
        .registry(ExecutorRegistry::reference_only())
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .build()
        .map_err(|e| format!("the reference cannot build the case: {e}"))?;
    let inputs: Vec<(String, Tensor)> = inputs
        .iter()
        .map(|(n, t)| {
            let t = if fp16 {
                round_through_f16(t)
            } else {
                t.clone()
            };
            (n.clone(), t)
        })
        .collect();
    net.forward(inputs)
        .map(|o| o.into_vec())
        .map_err(|e| format!("the reference failed: {e}"))
}

/// Every `*.npy` in `dir`, named by file stem, sorted by name.
fn read_npy_dir(dir: &Path) -> Result<Vec<(String, Tensor)>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "npy"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            read_npy(p).map(|t| (name, t))
        })
        .collect()
}

/// A name made safe for a file name.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn readme(
    op: &str,
    executor: &str,
    target: &Target,
    dir: &Path,
    command: &str,
    failure: &str,
) -> String {
    format!(
        "A minimal failing case of the conformance suite's property trial prop/{op}\n\
         on executor {executor}, target {target}.\n\
         \n\
         Replay it (exits non-zero while the outputs still differ):\n\
         \n    {command}\n\
         \n\
         From a source checkout (the opencl and cuda backends are built in by default):\n\
         \n    cargo run -p concord-cli -- repro {dir} --backend {executor} --target {target}\n\
         \n\
         An executor that is not built into the concord binary replays it with\n\
         concord_conformance::repro::replay(dir, registry_with_the_executor, &backend, Some(target)).\n\
         \n\
         Files:\n\
         \x20 model.onnx        the single-node model; constant operands are initializers\n\
         \x20 inputs/*.npy      the runtime inputs\n\
         \x20 expected/*.npy    the reference executor's outputs\n\
         \x20 case.toml         the case in the case-file format: paste it into\n\
         \x20                   conformance/cases/ to keep it as a named regression case\n\
         \n\
         What failed:\n{failure}\n",
        dir = dir.display()
    )
}

fn attribute_value(v: &AttributeValue) -> toml::Value {
    match v {
        AttributeValue::Int(i) => (*i).into(),
        AttributeValue::Float(f) => (*f).into(),
        AttributeValue::Str(s) => s.clone().into(),
        AttributeValue::Ints(v) => v.clone().into(),
        AttributeValue::Floats(v) => v.clone().into(),
        AttributeValue::Strs(v) => v.clone().into(),
        AttributeValue::Tensor(t) => {
            let mut table = toml::Table::new();
            table.insert("dtype".into(), t.dtype.clone().into());
            table.insert(
                "shape".into(),
                t.shape.iter().map(|&d| d as i64).collect::<Vec<_>>().into(),
            );
            table.insert("values".into(), numbers(&t.dtype, &t.values));
            table.into()
        }
    }
}

/// An input's keys in case-file order, leaving out what the defaults already say.
fn input_fields(spec: &InputSpec) -> Vec<(&'static str, toml::Value)> {
    let mut fields = vec![("name", spec.name.clone().into())];
    if spec.name.is_empty() {
        // An omitted optional input: only its position matters.
        return fields;
    }
    fields.push(("dtype", spec.dtype.clone().into()));
    fields.push((
        "shape",
        spec.shape
            .iter()
            .map(|&d| d as i64)
            .collect::<Vec<_>>()
            .into(),
    ));
    if let Some(values) = &spec.values {
        fields.push(("values", numbers(&spec.dtype, values)));
    }
    if let Some(fill) = &spec.fill {
        fields.push(("fill", fill.clone().into()));
    }
    if let Some(range) = spec.range {
        fields.push(("range", range.to_vec().into()));
    }
    if let Some(seed) = spec.seed {
        // Seeds are drawn below 2^63, so they fit TOML's signed integers.
        fields.push(("seed", (seed as i64).into()));
    }
    if spec.constant {
        fields.push(("constant", true.into()));
    }
    fields
}

/// Values as TOML numbers: integers for integer and bool dtypes (so they read as written),
/// floats otherwise.
fn numbers(dtype: &str, values: &[f64]) -> toml::Value {
    if matches!(dtype, "i64" | "bool") {
        values
            .iter()
            .map(|&v| toml::Value::Integer(v as i64))
            .collect::<Vec<_>>()
            .into()
    } else {
        values
            .iter()
            .map(|&v| toml::Value::Float(v))
            .collect::<Vec<_>>()
            .into()
    }
}
