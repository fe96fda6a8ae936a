//! The whole conformance suite on onnxruntime: every trial is named
//! `onnxruntime/onnxruntime/<category>/<case>`. The expected failures, each a real
//! disagreement between onnxruntime and Concord's reference with the reason it is
//! onnxruntime's (or the reference's) doing, are in conformance/onnxruntime.toml.

fn main() {
    concord_conformance::main(concord_adapter_onnxruntime::OnnxRuntimeExecutor::new)
}
