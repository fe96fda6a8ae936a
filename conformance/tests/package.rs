//! The suite is a dependency: `cargo package -p concord-conformance` must carry every data
//! file the suite reads at run time (op cases, golden cases and every file their manifest
//! names, the op cases' oracle outputs, the tolerance table, the ONNX node-test list, the expectations of Concord's
//! executors, the regression seeds) and the guide's example executor, so that a crate that
//! depends on it from a registry or a git checkout runs the whole suite.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord_conformance::golden::Manifest;
use concord_conformance::op_oracle::OracleManifest;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

#[test]
fn the_packaged_crate_carries_every_data_file_the_suite_reads() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "package",
            "-p",
            "concord-conformance",
            "--list",
            "--allow-dirty",
        ])
        .args(["--offline", "--exclude-lockfile"])
        .current_dir(here)
        .output()
        .unwrap_or_else(|e| panic!("running cargo package --list: {e}"));
    assert!(
        output.status.success(),
        "cargo package --list failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();

    let mut needed: BTreeSet<String> = [
        "tolerances.toml",
        "onnx-node.toml",
        "golden/manifest.json",
        "examples/toy_executor.rs",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    for dir in ["cases", "expectations", "regressions"] {
        needed.extend(files_in(here, dir));
    }
    let manifest = Manifest::load(&here.join("golden"))
        .unwrap_or_else(|e| panic!("the golden manifest does not load: {e}"));
    for case in &manifest.cases {
        for path in std::iter::once(&case.model)
            .chain(case.inputs.values())
            .chain(case.outputs.values())
        {
            let relative = path
                .strip_prefix(here)
                .unwrap_or_else(|_| panic!("{} is outside the crate", path.display()));
            needed.insert(relative.to_string_lossy().replace('\\', "/"));
        }
    }
    // The op cases' independent oracle: the reference's op/ trials read it.
    needed.insert("golden/op-cases/manifest.json".to_string());
    let oracle = OracleManifest::load(&here.join("golden"))
        .unwrap_or_else(|e| panic!("the op-case oracle manifest does not load: {e}"));
    for path in oracle.cases.values().flat_map(|c| c.outputs.values()) {
        let relative = path
            .strip_prefix(here)
            .unwrap_or_else(|_| panic!("{} is outside the crate", path.display()));
        needed.insert(relative.to_string_lossy().replace('\\', "/"));
    }
    assert!(
        needed.len() > 100,
        "only {} data files found: the walk is broken",
        needed.len()
    );
    let missing: Vec<&String> = needed.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "the package leaves out {} data file(s) the suite reads: {missing:?}",
        missing.len()
    );
}

/// The files directly in `root/dir`, as `dir/<name>`.
fn files_in(root: &Path, dir: &str) -> Vec<String> {
    let entries = std::fs::read_dir(root.join(dir))
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.join(dir).display()));
    let mut files: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| format!("{dir}/{}", e.file_name().to_string_lossy()))
        .collect();
    assert!(!files.is_empty(), "{dir}/ is empty");
    files.sort();
    files
}
