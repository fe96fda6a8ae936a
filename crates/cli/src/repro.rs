//! `concord repro DIR`: replay a repro the conformance suite wrote for a failing property
//! case (model.onnx, inputs/*.npy, expected/*.npy, case.toml) on a backend, compare with
//! the expected outputs under the op's tolerance level, and exit non-zero on a mismatch.

use clap::Args;
use concord::{Backend, ExecutorRegistry};
use concord_conformance::repro;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ReproArgs {
    /// The repro directory, as printed by the failing trial.
    pub dir: PathBuf,
    /// The backend to replay on: cpu, opencl, cuda.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// The target: cpu, opencl, opencl-fp16, cuda, cuda-fp16 (default: the backend's own).
    #[arg(long)]
    pub target: Option<String>,
}

pub fn run(args: ReproArgs) -> Result<(), String> {
    let registry = ExecutorRegistry::with_builtins();
    let target = match &args.target {
        Some(t) => Some(registry.target_named(t).ok_or_else(|| {
            format!(
                "--target `{t}`: expected one of {}",
                crate::run::known_targets(&registry).join(", ")
            )
        })?),
        None => None,
    };
    let backend = Backend::named(&args.backend);
    let replay = repro::replay(&args.dir, registry.clone(), &backend, target)?;
    println!("{}", replay.describe());
    if replay.passed() {
        Ok(())
    } else {
        Err(format!(
            "{} on {}/{} still differs from {}/expected beyond the `{}` tolerance",
            replay.op,
            replay.backend,
            replay.target,
            args.dir.display(),
            replay.level
        ))
    }
}
