//! The time limit (`NetBuilder::time_limit`): a forward past it stops with a typed error
//! naming the node, op and limit, and a generous one changes nothing. The model is the
//! golden case `loop_while_growing_state`, a Loop of N iterations whose carried state grows
//! by X each iteration: three iterations are the golden data (from onnxruntime), a million
//! are minutes of work on an input of three floats.

// A failed build or forward is a failed test; panicking with the error says why.
#![allow(clippy::panic)]

use concord::executor::OpError;
use concord::{npy, Error, ExecutorRegistry, Net, NetBuilder, Outputs, Tensor};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn case() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../conformance/golden/cases/loop_while_growing_state")
}

fn net(limit: Option<Duration>) -> Net {
    let mut builder = NetBuilder::from_onnx_file(case().join("model.onnx"))
        .registry(ExecutorRegistry::reference_only());
    if let Some(limit) = limit {
        builder = builder.time_limit(limit);
    }
    builder.build().unwrap_or_else(|e| panic!("{e}"))
}

fn read(dir: &str, name: &str) -> Tensor {
    let path = case().join(dir).join(format!("{name}.npy"));
    npy::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn forward(net: &Net, n: Tensor) -> Result<Outputs, Error> {
    net.forward([
        ("X", read("inputs", "X")),
        ("V0", read("inputs", "V0")),
        ("N", n),
    ])
}

/// The innermost [`OpError`] of a forward's error and the ops of the nodes it passed
/// through, outermost first.
fn innermost(error: &Error) -> (Vec<&'static str>, Option<&OpError>) {
    let mut ops = Vec::new();
    let mut current = match error {
        Error::Graph(e) => e,
        _ => return (ops, None),
    };
    loop {
        match current {
            concord::executor::Error::Node { op, source, .. } => {
                ops.push(*op);
                match source {
                    OpError::Subgraph { source, .. } => current = source,
                    other => return (ops, Some(other)),
                }
            }
            _ => return (ops, None),
        }
    }
}

#[test]
fn a_generous_limit_leaves_the_outputs_unchanged() {
    let n = read("inputs", "N");
    let limited =
        forward(&net(Some(Duration::from_secs(3600))), n.clone()).unwrap_or_else(|e| panic!("{e}"));
    let unlimited = forward(&net(None), n).unwrap_or_else(|e| panic!("{e}"));
    for name in ["VF", "NF", "SC"] {
        let (Some(got), Some(free)) = (limited.get(name), unlimited.get(name)) else {
            panic!("output {name} is missing");
        };
        assert_eq!(got, free, "{name} differs under the limit");
        // Copies and small multiples of X: the golden data holds them exactly.
        let expected = read("expected", name);
        assert_eq!(got.shape(), expected.shape(), "{name}");
        assert_eq!(got.to_f64_vec(), expected.to_f64_vec(), "{name}");
    }
}

#[test]
fn a_loop_past_the_limit_stops_with_a_time_limit_error_at_a_body_node() {
    let limit = Duration::from_millis(200);
    let net = net(Some(limit));
    assert_eq!(net.time_limit(), Some(limit));
    // A million iterations, each copying a state one X longer than the last: some 10^12
    // element copies, far past 200 ms on any machine.
    let error = match forward(&net, Tensor::scalar_i64(1_000_000)) {
        Ok(_) => panic!("a million growing iterations finished within {limit:?}"),
        Err(e) => e,
    };
    let (ops, inner) = innermost(&error);
    assert_eq!(ops.first(), Some(&"Loop"), "{error}");
    assert!(ops.len() >= 2, "not stopped inside the body: {error}");
    assert!(
        matches!(inner, Some(OpError::TimeLimit { limit: l, elapsed, .. }) if *l == limit && *elapsed > limit),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("time limit of 200ms") && message.contains("CONCORD_TIME_LIMIT"),
        "{message}"
    );
}
