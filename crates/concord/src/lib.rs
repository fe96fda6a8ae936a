//! concord facade (being written).
