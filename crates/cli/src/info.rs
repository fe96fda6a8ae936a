//! `concord info`: the backends compiled in and what their probes found; `--require`
//! turns it into a start-up assertion for services and CI.

use clap::Args;
use concord::info::SystemInfo;
use concord::ExecutorRegistry;

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Exit non-zero, with the reason, unless BACKEND[:TARGET] is usable without fallback
    /// (e.g. `cuda`, `opencl:opencl-fp16`). Repeatable.
    #[arg(long, value_name = "BACKEND[:TARGET]")]
    pub require: Vec<String>,
}

pub fn run(args: InfoArgs) -> Result<(), String> {
    let info = SystemInfo::probe(&ExecutorRegistry::with_builtins());
    if args.json {
        let text = serde_json::to_string_pretty(&info).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print!("{info}");
    }
    for requirement in &args.require {
        info.check_requirement(requirement)
            .map_err(|why| format!("requirement `{requirement}` is not met: {why}"))?;
    }
    Ok(())
}
