//! Every model in conformance/golden/ (built with onnx.helper and checked by onnx.checker, so written by
//! an implementation that shares no code with this one) reads as its manifest describes,
//! survives a save and a second read, and loads (validation and shape inference) with a type
//! for every output once constants fold, as they do when a net is built. A model exported
//! at opset 11 or 12 reads as its opset-13 normal form.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::Graph;
use concord_onnx::{load_file, read_graph, save};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/golden")
}

#[test]
fn every_golden_model_loads_as_its_manifest_describes() {
    let manifest_path = golden_dir().join("manifest.json");
    let text = match std::fs::read_to_string(&manifest_path) {
        Ok(t) => t,
        Err(e) => panic!("cannot read {}: {e}", manifest_path.display()),
    };
    let manifest: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => panic!("manifest is not JSON: {e}"),
    };
    let cases = manifest["cases"].as_array().cloned().unwrap_or_default();
    // A floor, so that a manifest that lost its cases does not pass vacuously.
    assert!(cases.len() >= 50, "only {} golden cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let Some(model) = case["model"].as_str() else {
            failures.push(format!("{name}: no model path"));
            continue;
        };
        let path = golden_dir().join(model);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{name}: cannot read {}: {e}", path.display()));
                continue;
            }
        };
        let graph: Graph = match read_graph(&bytes) {
            Ok(g) => g,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        // Opsets 7 to 12 are normalised on import to their opset-13 forms (legacy.rs):
        // Softmax's 2-D coercion becomes Flatten, Softmax, Reshape; Upsample becomes Resize.
        let manifest_opset = case["opset"].as_i64();
        let legacy = manifest_opset.is_some_and(|o| o < 13);
        let expected_opset = manifest_opset.map(|o| o.max(13));
        if Some(graph.opset) != expected_opset {
            failures.push(format!(
                "{name}: opset {} vs manifest {}",
                graph.opset, case["opset"]
            ));
        }
        // The manifest lists the ops of If, Loop and Scan bodies too.
        let mut ops = BTreeSet::new();
        collect_ops(&graph, &mut ops);
        let listed: BTreeSet<&str> = case["op_types"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let normalised: BTreeSet<&str> = listed
            .iter()
            .map(|&op| if op == "Upsample" { "Resize" } else { op })
            .collect();
        let added_by_normalising = ["Flatten", "Reshape"];
        let read_as_listed = if legacy {
            normalised.is_subset(&ops)
                && ops
                    .difference(&normalised)
                    .all(|op| added_by_normalising.contains(op))
        } else {
            ops == listed
        };
        if !read_as_listed {
            failures.push(format!("{name}: ops {ops:?} vs manifest {listed:?}"));
        }
        let inputs: BTreeSet<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
        let listed_inputs: BTreeSet<&str> = case["inputs"]
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if inputs != listed_inputs {
            failures.push(format!(
                "{name}: inputs {inputs:?} vs manifest {listed_inputs:?}"
            ));
        }
        let outputs: BTreeSet<&str> = graph.outputs.iter().map(String::as_str).collect();
        let listed_outputs: BTreeSet<&str> = case["outputs"]
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if outputs != listed_outputs {
            failures.push(format!(
                "{name}: outputs {outputs:?} vs manifest {listed_outputs:?}"
            ));
        }
        match save(&graph)
            .map_err(|e| e.to_string())
            .and_then(|b| read_graph(&b).map_err(|e| e.to_string()))
        {
            Ok(back) => {
                if back.nodes != graph.nodes
                    || back.inputs != graph.inputs
                    || back.initializers != graph.initializers
                    || back.outputs != graph.outputs
                {
                    failures.push(format!("{name}: save and read changed the graph"));
                }
            }
            Err(e) => failures.push(format!("{name}: save and read failed: {e}")),
        }
        match load_file(&path) {
            Ok(mut loaded) => {
                // A value whose rank only evaluating a node tells is typed when constants
                // fold (a Reshape whose shape comes from Shape, say).
                if let Err(e) = loaded.fold_constants(&concord_cpu::ReferenceEvaluator::default()) {
                    failures.push(format!("{name}: folding failed: {e}"));
                }
                for output in &loaded.outputs {
                    if !loaded.values.contains_key(output) {
                        failures.push(format!("{name}: output {output} has no inferred type"));
                    }
                }
            }
            Err(e) => failures.push(format!("{name}: load failed: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The op types of `graph`'s nodes and of every subgraph they run, recursively.
fn collect_ops(graph: &Graph, ops: &mut BTreeSet<&'static str>) {
    for node in &graph.nodes {
        ops.insert(node.op.name());
        for body in node.op.subgraphs() {
            collect_ops(body, ops);
        }
    }
}
