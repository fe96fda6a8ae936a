//! concord-cuda: the CUDA executor.
//!
//! It runs Concord partitions on an NVIDIA GPU through cudarc with dynamic loading: libcuda,
//! libnvrtc and libcublas are opened at run time, so a machine without them builds, starts
//! and gets a probe that says `Unavailable { LibraryMissing }` naming every library file it
//! looked for (and the planner falls back and says so). Elementwise, activation, pooling,
//! normalisation, reduction and data-movement kernels are CUDA C files under `kernels/`,
//! embedded with `include_str!` and compiled by NVRTC for the device's architecture the
//! first time a partition needs them; Gemm, MatMul and Conv (im2col) go through cuBLAS.
//!
//! Targets, declared here as data ([`CUDA`], [`CUDA_FP16`]): `cuda` (f32) and `cuda-fp16`
//! (f16 storage, f32 accumulation, cuBLAS with f32 compute; needs the fp16 capability, else
//! `cuda` runs instead). The probe reports fp16 only for compute capability 5.3 and above,
//! so `concord_core::resolve_target` falls back to `cuda` below that, and the planner says
//! so; `prepare` does not re-decide it.
//!
//! Invariants:
//! - Executors report, the planner decides: `supports` answers per node with a reason, and
//!   nothing here falls back by itself.
//! - Never a panic when CUDA is absent: cudarc panics when a library is missing, so every
//!   library is checked with its `is_culib_present()` before any other call into it
//!   ([`library`]); no code relies on `catch_unwind`.
//! - No process-global mutable state: the context, the compiled-module cache (keyed by
//!   source hash, options and architecture) and the stream pool belong to one
//!   [`CudaExecutor`]; each run borrows a stream with its own cuBLAS handle that no other
//!   run touches, and checks the context's sticky error before it returns.
//! - `unsafe` is allowed in this crate only, each block with a `// SAFETY:` comment.

#![allow(unsafe_code)]

pub mod compile;
mod device;
mod error;
mod executor;
pub mod kernels;
pub mod library;
mod ops;
mod partition;
mod support;
mod tensor;

pub use device::Device;
pub use error::CudaError;
pub use executor::{CudaExecutor, CUDA, CUDA_FP16};
pub use partition::CudaPartition;
