//! Writes every op case's model and runtime inputs, exactly as the suite builds them, for
//! `cargo xtask op-oracle` to run through onnxruntime: `op_oracle_export OUT_DIR`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(out) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: op_oracle_export OUT_DIR");
        return ExitCode::FAILURE;
    };
    let config = concord_conformance::SuiteConfig::from_env();
    let result = concord_conformance::case::load_cases(&config.conformance_dir.join("cases"))
        .and_then(|cases| concord_conformance::op_oracle::export(&cases, &out));
    match result {
        Ok(index) => {
            println!(
                "op_oracle_export: {} cases in {}",
                index.len(),
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("op_oracle_export: {e}");
            ExitCode::FAILURE
        }
    }
}
