//! concord-onnx (being written).
