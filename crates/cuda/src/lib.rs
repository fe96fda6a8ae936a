//! concord-cuda: the CUDA executor.
//!
//! It runs Concord partitions on an NVIDIA GPU through cudarc with dynamic loading: libcuda,
//! libnvrtc and libcublas are opened at run time, so a machine without them builds, starts
//! and gets a probe that says `Unavailable { LibraryMissing }` naming every library file it
//! looked for (and the planner falls back and says so). Elementwise, activation, pooling,
//! normalisation, reduction and data-movement kernels are CUDA C files under `kernels/`,
//! embedded with `include_str!` and compiled by NVRTC the first time a partition needs
//! them — to a cubin for the device's `sm_XY` where the loaded NVRTC knows it, else to PTX
//! the driver JIT-compiles, decided by the probe ([`loadable`]) so that a device it calls
//! available can load them; Gemm, MatMul and Conv (im2col) go through cuBLAS.
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
//!   source hash, options and code) and the lane pool belong to one [`CudaExecutor`]; each
//!   run borrows a lane (a stream with its own cuBLAS handle and staging memory) that no
//!   other run touches.
//! - An error belongs to the run that caused it: runs make their driver calls directly
//!   (`driver.rs`), not through cudarc's wrappers, whose context-wide error slot would hand
//!   one run's late error to another. A run that failed on its request keeps its lane; a
//!   driver or cuBLAS error discards the lane; a sticky error (by name) ends the device's
//!   runs with an error saying so (`lanes.rs`).
//! - `unsafe` is allowed in this crate only, each block with a `// SAFETY:` comment.

#![allow(unsafe_code)]

pub mod compile;
mod device;
mod driver;
mod error;
mod executor;
pub mod kernels;
mod lanes;
pub mod library;
pub mod loadable;
mod ops;
mod partition;
mod support;
mod tensor;

pub use device::Device;
pub use error::CudaError;
pub use executor::{CudaExecutor, CUDA, CUDA_FP16};
pub use partition::CudaPartition;
