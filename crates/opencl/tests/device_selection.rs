//! Choosing the OpenCL device when a machine has several (PoCL and Oclgrind, a GPU and a
//! CPU driver): by `P:D` index or name substring, through `OpenClOptions::device` or
//! `CONCORD_OPENCL_DEVICE`; a selection that matches nothing leaves the executor
//! unavailable with every device listed, never running on another one. The environment
//! variables are checked in child processes so they cannot leak into other tests.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord::{Availability, DeviceInfo, Executor, FallbackCause};
use concord_opencl::{
    DeviceSelection, OpenClExecutor, OpenClOptions, BLOCK_ROWS_VAR, DEVICE_VAR, GEMM_VAR,
    MEMORY_VAR,
};
use std::process::Command;

/// Set in a child process: the scenario to run instead of spawning it.
const CHILD_MARKER: &str = "CONCORD_OPENCL_SELECTION_CHILD";
const NO_SUCH_DEVICE: &str = "no-such-opencl-device";

fn probe_with(selection: Option<DeviceSelection>) -> Availability {
    OpenClExecutor::with_options(OpenClOptions {
        device: selection,
        ..OpenClOptions::default()
    })
    .probe()
}

fn selected(devices: &[DeviceInfo]) -> Vec<&DeviceInfo> {
    devices
        .iter()
        .filter(|d| d.details.get("selected").map(String::as_str) == Some("yes"))
        .collect()
}

fn index(d: &DeviceInfo) -> &str {
    d.details.get("index").map_or("", String::as_str)
}

#[test]
fn every_device_is_listed_with_its_index_and_can_be_selected_by_it_and_by_name() {
    let devices = match probe_with(None) {
        Availability::Available { devices } => devices,
        Availability::Unavailable { cause, reason } => {
            // Without a runtime a selection changes nothing: the same unavailability.
            assert!(
                std::env::var("CONCORD_REQUIRE").map_or(true, |v| !v.contains("opencl")),
                "CONCORD_REQUIRE names opencl but OpenCL is unavailable: {reason}"
            );
            assert_eq!(
                probe_with(DeviceSelection::parse("0:0")),
                Availability::Unavailable { cause, reason }
            );
            return;
        }
    };
    assert_eq!(
        selected(&devices).len(),
        1,
        "exactly one device is selected"
    );
    for d in &devices {
        let (p, i) = index(d)
            .split_once(':')
            .unwrap_or_else(|| panic!("device `{}` has no P:D index", d.name));
        assert!(p.parse::<usize>().is_ok() && i.parse::<usize>().is_ok());
        for text in [index(d).to_string(), d.name.to_uppercase()] {
            match probe_with(DeviceSelection::parse(&text)) {
                Availability::Available { devices: found } => {
                    let chosen = selected(&found);
                    assert_eq!(chosen.len(), 1);
                    if text.contains(':') {
                        assert_eq!(index(chosen[0]), index(d), "selecting {text}");
                    } else {
                        assert!(
                            chosen[0].name.to_uppercase().contains(&text),
                            "selecting {text} chose `{}`",
                            chosen[0].name
                        );
                    }
                }
                other => panic!("selecting `{text}` (device `{}`): {other:?}", d.name),
            }
        }
    }
}

#[test]
fn a_selection_matching_no_device_is_an_error_listing_every_device() {
    let unknown = [
        DeviceSelection::parse(NO_SUCH_DEVICE),
        DeviceSelection::parse("99:0"),
    ];
    match probe_with(None) {
        Availability::Available { devices } => {
            for selection in unknown {
                match probe_with(selection.clone()) {
                    Availability::Unavailable { cause, reason } => {
                        assert_eq!(cause, FallbackCause::NoDevice, "{reason}");
                        assert!(reason.contains(DEVICE_VAR), "{reason}");
                        for d in &devices {
                            let listed = format!("{} `{}`", index(d), d.name);
                            assert!(reason.contains(&listed), "{reason} lacks {listed}");
                        }
                    }
                    other => panic!("{selection:?} matched a device: {other:?}"),
                }
            }
        }
        Availability::Unavailable { .. } => {
            for selection in unknown {
                assert!(matches!(
                    probe_with(selection),
                    Availability::Unavailable { .. }
                ));
            }
        }
    }
}

#[test]
fn the_environment_selects_too_and_an_unknown_name_is_refused() {
    if let Ok(scenario) = std::env::var(CHILD_MARKER) {
        child(&scenario);
        return;
    }
    let exe = std::env::current_exe().expect("the test binary knows its path");
    for (scenario, var, value) in [
        ("device", DEVICE_VAR, NO_SUCH_DEVICE),
        ("gemm", GEMM_VAR, "no-such-gemm"),
        ("memory", MEMORY_VAR, "no-such-memory"),
        ("block rows", BLOCK_ROWS_VAR, "6"),
    ] {
        let output = Command::new(&exe)
            .args([
                "the_environment_selects_too_and_an_unknown_name_is_refused",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_MARKER, scenario)
            .env_remove(DEVICE_VAR)
            .env_remove(GEMM_VAR)
            .env_remove(MEMORY_VAR)
            .env_remove(BLOCK_ROWS_VAR)
            .env(var, value)
            .output()
            .expect("the child test process starts");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("child {scenario} stdout:\n{stdout}\nchild stderr:\n{stderr}");
        assert!(output.status.success(), "the {scenario} scenario failed");
        assert!(
            stdout.contains(&format!("child: {scenario} scenario passed")),
            "the child did not run the {scenario} scenario"
        );
    }
}

/// Runs in a child whose environment names a device, GEMM family, slot memory or register
/// block that does not exist.
fn child(scenario: &str) {
    // Whether OpenCL is here at all, with the variable ignored (an explicit choice wins).
    let here = matches!(
        OpenClExecutor::with_options(OpenClOptions {
            device: DeviceSelection::parse("0:0"),
            gemm: concord_opencl::GemmKernel::LocalTiled,
            memory: concord_opencl::SlotMemory::Buffers,
            block_rows: concord_opencl::BlockRows::Four,
            ..OpenClOptions::default()
        })
        .probe(),
        Availability::Available { .. }
    );
    let probe = OpenClExecutor::new().probe();
    if here {
        match probe {
            Availability::Unavailable { cause, reason } => {
                assert_eq!(cause, FallbackCause::NoDevice, "{reason}");
                let var = match scenario {
                    "device" => DEVICE_VAR,
                    "gemm" => GEMM_VAR,
                    "memory" => MEMORY_VAR,
                    _ => BLOCK_ROWS_VAR,
                };
                assert!(reason.contains(var), "{reason}");
            }
            other => panic!("the {scenario} variable names nothing, yet: {other:?}"),
        }
    } else {
        assert!(matches!(probe, Availability::Unavailable { .. }));
    }
    println!("child: {scenario} scenario passed");
}
