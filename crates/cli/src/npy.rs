//! Reading and writing tensors as .npy files: the conformance suite's one implementation
//! (every dtype numpy has; bf16, which it has not, is refused with that said).

pub use concord_conformance::npy::{read_within, write};
