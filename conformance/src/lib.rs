//! concord-conformance (started by the foundation; the suite lands with its own issue).
