//! `concord run`: load a model, feed it inputs, write its outputs; optionally print the
//! placement report and a profile.

use crate::npy;
use clap::Args;
use concord::{
    parse_policy, Backend, DType, Dim, ExecutorRegistry, FallbackPolicy, Net, NetBuilder,
    Overrides, Shape, Tensor, TensorData,
};
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The ONNX model to run.
    pub model: PathBuf,
    /// An input as NAME=FILE.npy; repeat for every model input.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    pub inputs: Vec<String>,
    /// Feed seeded random values to every input instead of --input (floats uniform in
    /// [-1, 1), integers in [0, 10), bools fair); every input's dims must be fixed.
    #[arg(long, value_name = "N", conflicts_with = "inputs")]
    pub random_seed: Option<u64>,
    /// Where to write <output name>.npy for every model output (created if missing).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// The backend to ask for: cpu, opencl, cuda (default: the one serving --target, else
    /// cpu). A name no executor has is an error, not a fallback.
    #[arg(long)]
    pub backend: Option<String>,
    /// The target to ask for: cpu, opencl, opencl-fp16, cuda, cuda-fp16 (default: the
    /// backend's own).
    #[arg(long)]
    pub target: Option<String>,
    /// What to do if the request cannot be met: deny, warn, allow (default: CONCORD_FALLBACK,
    /// else warn). Given, it wins over CONCORD_FALLBACK, and the run says so when they
    /// differ.
    #[arg(long)]
    pub fallback: Option<String>,
    /// Print the placement report (where every node runs, and why).
    #[arg(long)]
    pub placement: bool,
    /// Run N more forwards after a warm-up and print the per-node profile.
    #[arg(long, value_name = "N")]
    pub profile: Option<u32>,
    /// The most bytes one allocation sized by the model or its inputs may take (digits,
    /// optionally with K, M, G or T); default: CONCORD_MEMORY_LIMIT, else half the smallest
    /// of physical memory, the cgroup limit and the address-space limit.
    #[arg(long, value_name = "BYTES")]
    pub memory_limit: Option<String>,
    /// The longest one forward may run (a number with ms, s, m or h; a bare number is
    /// seconds), checked between nodes and in long kernel loops; default:
    /// CONCORD_TIME_LIMIT, else none.
    #[arg(long, value_name = "DURATION")]
    pub time_limit: Option<String>,
}

pub fn run(args: RunArgs) -> Result<(), String> {
    let asked = args.fallback.as_deref().unwrap_or("warn");
    let policy = parse_policy(asked)
        .ok_or_else(|| format!("--fallback `{asked}`: expected deny, warn or allow"))?;
    // CONCORD_FALLBACK wins over what a program's code chose, so an operator can tighten
    // it; but `--fallback` is the operator's own word for this one run, so it wins over the
    // environment (a stale `CONCORD_FALLBACK=allow` must not quietly undo `--fallback
    // deny`), and a disagreement is said once. A malformed variable is still an error.
    let mut overrides = Overrides::from_env().map_err(|e| e.to_string())?;
    if let (Some(flag), Some(env)) = (&args.fallback, overrides.fallback) {
        if env != policy {
            eprintln!(
                "note: --fallback {} wins over CONCORD_FALLBACK={}",
                flag.trim(),
                policy_name(env)
            );
        }
        overrides.fallback = None;
    }
    let registry = ExecutorRegistry::with_builtins();
    let target = match &args.target {
        Some(t) => Some(registry.target_named(t).ok_or_else(|| {
            let known = known_targets(&registry);
            let hint = concord::did_you_mean(t, &known)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            format!("--target `{t}`{hint}: expected one of {}", known.join(", "))
        })?),
        None => None,
    };
    // Without --backend, the backend is the one serving --target: `--target opencl-fp16`
    // means OpenCL, not the CPU asked for a target it does not have.
    let backend = match (&args.backend, &target) {
        (Some(b), _) => Backend::named(b),
        (None, Some(t)) => registry
            .owner_of(t)
            .unwrap_or_else(|| Backend::named("cpu")),
        (None, None) => Backend::named("cpu"),
    };
    let mut builder = NetBuilder::from_onnx_file(&args.model)
        .registry(registry)
        .backend(backend)
        .fallback(policy)
        .overrides(overrides)
        .profiling(args.profile.is_some());
    if let Some(target) = target {
        builder = builder.target(target);
    }
    if let Some(limit) = &args.memory_limit {
        let bytes = concord::internals::core::memory::parse_bytes(limit).ok_or_else(|| {
            format!(
                "--memory-limit `{}`: expected a byte count (digits, optionally with K, M, G or T)",
                concord::text::elide_middle(limit, 64)
            )
        })?;
        builder = builder.memory_limit(bytes);
    }
    if let Some(limit) = &args.time_limit {
        let duration =
            concord::internals::core::deadline::parse_duration(limit).ok_or_else(|| {
                format!(
                    "--time-limit `{}`: expected a duration (a number with ms, s, m or h)",
                    concord::text::elide_middle(limit, 64)
                )
            })?;
        builder = builder.time_limit(duration);
    }
    let net = builder
        .build()
        .map_err(|e| format!("{}: {e}", args.model.display()))?;
    if args.placement {
        println!("{}", net.placement());
    }
    let inputs = match args.random_seed {
        Some(seed) => random_inputs(&net, seed)?,
        None => read_inputs(&net, &args.inputs)?,
    };
    let outputs = net.forward(inputs.clone()).map_err(|e| e.to_string())?;
    if let Some(n) = args.profile {
        // The forward above was the warm-up; these are the measured ones.
        for _ in 0..n {
            net.forward(inputs.clone()).map_err(|e| e.to_string())?;
        }
        println!("{}", net.profile());
    }
    match &args.output_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("{}: cannot create directory: {e}", dir.display()))?;
            let names: Vec<&str> = outputs.iter().map(|(name, _)| name).collect();
            let files = file_names(&names);
            for ((name, tensor), file) in outputs.iter().zip(files) {
                let path = dir.join(&file.name);
                npy::write(&path, tensor)?;
                let note = match &file.renamed_because {
                    Some(taken_by) => format!(
                        " (renamed: {}.npy would be the file of output `{}`)",
                        file.stem,
                        concord::text::elide_middle(taken_by, 80)
                    ),
                    None => String::new(),
                };
                println!(
                    "{}: {}{} -> {}{note}",
                    concord::text::elide_middle(name, 200),
                    tensor.dtype(),
                    tensor.shape(),
                    path.display()
                );
            }
        }
        None => {
            for (name, tensor) in outputs.iter() {
                println!(
                    "{}: {}{} (not written: no --output-dir)",
                    concord::text::elide_middle(name, 200),
                    tensor.dtype(),
                    tensor.shape()
                );
            }
        }
    }
    Ok(())
}

fn read_inputs(net: &Net, specs: &[String]) -> Result<Vec<(String, Tensor)>, String> {
    // A model without runtime inputs (its values all come from constants) runs as it is.
    if specs.is_empty() && !net.inputs().is_empty() {
        let names: Vec<String> = net
            .inputs()
            .iter()
            .map(|i| format!("{}: {}", i.name, i.describe()))
            .collect();
        return Err(format!(
            "no inputs given; pass --input NAME=FILE.npy for each of: {} (or --random-seed N)",
            concord::text::list(&names, concord::text::LIST_ITEMS)
        ));
    }
    specs
        .iter()
        .map(|spec| {
            let (name, file) = spec
                .split_once('=')
                .ok_or_else(|| format!("--input `{spec}` is not NAME=FILE.npy"))?;
            if name.is_empty() || file.is_empty() {
                return Err(format!(
                    "--input `{spec}` is not NAME=FILE.npy: the {} is empty",
                    if name.is_empty() { "name" } else { "file" }
                ));
            }
            let tensor = npy::read_within(&PathBuf::from(file), net.memory_budget())?;
            Ok((name.to_string(), tensor))
        })
        .collect()
}

/// Seeded random values for every input, drawn in the model's input order from one
/// generator, so a seed names the same inputs on every machine.
fn random_inputs(net: &Net, seed: u64) -> Result<Vec<(String, Tensor)>, String> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    net.inputs()
        .iter()
        .map(|info| random_input(info, &mut rng, net.memory_budget()))
        .collect()
}

fn random_input(
    info: &concord::ValueInfo,
    rng: &mut rand_chacha::ChaCha8Rng,
    budget: concord::MemoryBudget,
) -> Result<(String, Tensor), String> {
    let mut dims = Vec::with_capacity(info.shape.len());
    for (axis, d) in info.shape.iter().enumerate() {
        match d {
            Dim::Fixed(n) => dims.push(*n),
            other => {
                return Err(format!(
                    "input `{}` axis {axis} is `{other}`, not fixed: pass --input {}=FILE.npy",
                    info.name, info.name
                ))
            }
        }
    }
    let shape = Shape(dims);
    // The declared dims come from the model: their bytes are checked against the net's
    // budget before anything that size is allocated.
    budget.check_tensor(info.dtype, shape.dims()).map_err(|e| {
        format!(
            "random values for input `{}`: {e}",
            concord::text::elide_middle(&info.name, 80)
        )
    })?;
    let n = shape.numel();
    let tensor = match info.dtype {
        DType::F32 => {
            Tensor::from_f32(shape, (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect())
        }
        DType::F16 => Tensor::from_f16(
            shape,
            (0..n)
                .map(|_| half::f16::from_f32(rng.gen_range(-1.0f32..1.0)))
                .collect(),
        ),
        DType::I64 => Tensor::from_i64(shape, (0..n).map(|_| rng.gen_range(0i64..10)).collect()),
        DType::Bool => Tensor::from_bool(shape, (0..n).map(|_| rng.gen_bool(0.5)).collect()),
        // The other floats as f32 does, rounded once to the dtype; the other integers as
        // i64 does (0 to 9 fits every one).
        float if float.is_float() => {
            let values: Vec<f64> = (0..n).map(|_| rng.gen_range(-1.0f64..1.0)).collect();
            Tensor::new(shape, TensorData::from_f64(float, &values))
        }
        integer => {
            let values: Vec<f64> = (0..n).map(|_| rng.gen_range(0i64..10) as f64).collect();
            Tensor::new(shape, TensorData::from_f64(integer, &values))
        }
    }
    .map_err(|e| e.to_string())?;
    Ok((info.name.clone(), tensor))
}

/// Where one output is written: its file name in the output directory, and, when the plain
/// name was taken by an earlier output, which one.
#[derive(Debug)]
struct OutputFile {
    stem: String,
    name: String,
    renamed_because: Option<String>,
}

/// A distinct file name for every output: output names may hold characters that are not safe
/// in a file name (they become `_`), so two names can map to one file (`y/a` and `y_a`), or
/// to two that differ only in case (one file on a case-insensitive file system). A later
/// output that collides gets `-2`, `-3`, … and says which output held the name.
fn file_names(outputs: &[&str]) -> Vec<OutputFile> {
    let mut taken: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    outputs
        .iter()
        .map(|&output| {
            let stem = file_stem(output);
            let mut name = format!("{stem}.npy");
            let mut renamed_because = None;
            let mut n = 1;
            while let Some(holder) = taken.get(&name.to_lowercase()) {
                renamed_because.get_or_insert_with(|| holder.clone());
                n += 1;
                name = format!("{stem}-{n}.npy");
            }
            taken.insert(name.to_lowercase(), output.to_string());
            OutputFile {
                stem,
                name,
                renamed_because,
            }
        })
        .collect()
}

/// The longest file stem written: file systems refuse names over 255 bytes.
const MAX_STEM: usize = 160;

/// An output name as a file stem: characters unsafe in a file name become `_`; an empty
/// name, or one of dots only, gets a leading `_`; a very long one keeps its head and tail
/// around `~`.
fn file_stem(name: &str) -> String {
    let mut stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.chars().all(|c| c == '.') {
        stem.insert(0, '_');
    }
    if stem.len() > MAX_STEM {
        // Every char is ASCII here, so byte offsets are char boundaries.
        let head = &stem[..MAX_STEM - 40];
        let tail = &stem[stem.len() - 39..];
        stem = format!("{head}~{tail}");
    }
    stem
}

/// A policy as `--fallback` and CONCORD_FALLBACK spell it.
fn policy_name(policy: FallbackPolicy) -> &'static str {
    match policy {
        FallbackPolicy::Deny => "deny",
        FallbackPolicy::Warn => "warn",
        FallbackPolicy::Allow => "allow",
    }
}

/// The target names `--target` accepts: every target a registered executor declares and
/// every built-in one.
pub fn known_targets(registry: &ExecutorRegistry) -> Vec<String> {
    registry
        .known_names()
        .into_iter()
        .filter(|name| registry.target_named(name).is_some())
        .collect()
}
