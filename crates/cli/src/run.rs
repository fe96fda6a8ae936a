//! `concord run`: load a model, feed it inputs, write its outputs.

use crate::npy;
use clap::Args;
use concord::{DType, Dim, Net, Shape, Tensor};
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The ONNX model to run.
    pub model: PathBuf,
    /// An input as NAME=FILE.npy; repeat for every model input.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    pub inputs: Vec<String>,
    /// For a single-input model with fixed dims: feed seeded random values instead of
    /// --input (floats uniform in [-1, 1), integers in [0, 10), bools fair).
    #[arg(long, value_name = "N", conflicts_with = "inputs")]
    pub random_seed: Option<u64>,
    /// Where to write <output name>.npy for every model output (created if missing).
    #[arg(long, value_name = "DIR")]
    pub output_dir: PathBuf,
}

pub fn run(args: RunArgs) -> Result<(), String> {
    let net =
        Net::from_onnx_file(&args.model).map_err(|e| format!("{}: {e}", args.model.display()))?;
    let inputs = match args.random_seed {
        Some(seed) => vec![random_input(&net, seed)?],
        None => read_inputs(&net, &args.inputs)?,
    };
    let outputs = net.forward(inputs).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&args.output_dir).map_err(|e| {
        format!(
            "{}: cannot create directory: {e}",
            args.output_dir.display()
        )
    })?;
    for (name, tensor) in outputs.iter() {
        let path = args.output_dir.join(format!("{}.npy", file_stem(name)));
        npy::write(&path, tensor)?;
        println!(
            "{name}: {}{} -> {}",
            tensor.dtype(),
            tensor.shape(),
            path.display()
        );
    }
    Ok(())
}

fn read_inputs(net: &Net, specs: &[String]) -> Result<Vec<(String, Tensor)>, String> {
    if specs.is_empty() {
        let names: Vec<String> = net
            .inputs()
            .iter()
            .map(|i| format!("{}: {}", i.name, i.describe()))
            .collect();
        return Err(format!(
            "no inputs given; pass --input NAME=FILE.npy for each of: {} (or --random-seed N for a single-input model)",
            names.join(", ")
        ));
    }
    specs
        .iter()
        .map(|spec| {
            let (name, file) = spec
                .split_once('=')
                .ok_or_else(|| format!("--input `{spec}` is not NAME=FILE.npy"))?;
            Ok((name.to_string(), npy::read(&PathBuf::from(file))?))
        })
        .collect()
}

fn random_input(net: &Net, seed: u64) -> Result<(String, Tensor), String> {
    let [info] = net.inputs() else {
        return Err(format!(
            "--random-seed needs a model with exactly one input; this one has {}: pass --input for each",
            net.inputs().len()
        ));
    };
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
    let n = shape.numel();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
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
    }
    .map_err(|e| e.to_string())?;
    Ok((info.name.clone(), tensor))
}

/// Output names may contain characters that are not safe in a file name.
fn file_stem(name: &str) -> String {
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
