//! The CUDA executor's floors are derived from what its `supports()` takes, since no machine
//! that records them has a GPU (conformance/src/floors.rs). This holds the method to a
//! measured run: the OpenCL executor's floors were measured on PoCL (opencl.trials), and
//! derived the same way they must name the same trials, property trials aside.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord_conformance::{floors, Suite, SuiteConfig};
use concord_opencl::OpenClExecutor;
use std::sync::Arc;

#[test]
fn derived_floors_name_the_trials_a_measured_run_executed() {
    let suite = Suite::new(Arc::new(OpenClExecutor::new()), SuiteConfig::from_env())
        .unwrap_or_else(|e| panic!("suite: {e}"));
    assert!(
        !suite.expectations.trials.is_empty(),
        "opencl.trials is recorded next to opencl.toml"
    );
    let node_data = suite
        .offered_cases(&concord::targets::OPENCL)
        .iter()
        .all(|c| !c.name.ends_with("/node/data-missing"));
    let on_opencl = |t: &&String| t.starts_with("opencl/opencl/");
    let measured: Vec<&String> = suite
        .expectations
        .trials
        .iter()
        .filter(on_opencl)
        .filter(|t| !t.contains("/prop/") && (node_data || !t.contains("/node/")))
        .collect();
    let derived = floors::derive(&suite);
    let derived: Vec<&String> = derived.trials.iter().filter(on_opencl).collect();
    let missing: Vec<&&String> = measured.iter().filter(|t| !derived.contains(t)).collect();
    let extra: Vec<&&String> = derived.iter().filter(|t| !measured.contains(t)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "measured but not derived: {missing:?}\nderived but not measured: {extra:?}"
    );
}
