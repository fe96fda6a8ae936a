//! concord-opencl: the OpenCL executor.
//!
//! It runs Concord partitions on an OpenCL device through opencl3 with dynamic loading:
//! libOpenCL is opened at run time, so a machine without it builds, starts and gets a probe
//! that says `Unavailable { LibraryMissing }` (and the planner falls back and says so).
//! Kernels are OpenCL C files under `kernels/`, embedded with `include_str!` and built per
//! family and storage variant the first time a partition needs them.
//!
//! Targets, declared here as data ([`OPENCL`], [`OPENCL_FP16`]): `opencl` (f32 storage and
//! compute) and `opencl-fp16` (f16 storage through `vload_half`/`vstore_half`, f32
//! arithmetic; needs the fp16 capability, else `opencl` runs instead). Half *storage* is
//! core OpenCL, so the probe reports fp16 for every device on which a `vload_half` kernel
//! builds (checked when the device is opened), and `concord_core::resolve_target` decides
//! from that; this crate never re-decides it. A device without `cl_khr_fp16` runs the
//! target storage-only, and the executor's `notes` tell every build on it that this is
//! slower than `opencl`, with the measured cost.
//!
//! Invariants:
//! - Executors report, the planner decides: `supports` answers per node with a reason, and
//!   nothing here falls back by itself.
//! - No process-global mutable state: the device context and the program cache belong to
//!   one [`OpenClExecutor`]; a prepared partition owns its weights and plans, and each run
//!   borrows a workspace (queue, buffers, kernel objects with their arguments) that no other
//!   run touches, because `clSetKernelArg` is not thread-safe.
//! - No panics on device errors: opencl3's panicking wrappers are not used; every OpenCL
//!   call goes through [`cl`], whose errors carry the call and the CL error name.
//! - `unsafe` is allowed in this crate only, each block with a `// SAFETY:` comment.

#![allow(unsafe_code)]

pub mod cl;
mod device;
mod error;
mod executor;
mod fuse;
mod ops;
mod partition;
mod plan;
mod programs;

pub use device::{DeviceSelection, DEFAULT_LIBRARY, DEVICE_VAR, DYLIB_PATH_VAR};
pub use error::OpenClError;
pub use executor::{OpenClExecutor, OpenClOptions, OPENCL, OPENCL_FP16};
pub use partition::OpenClPartition;
pub use plan::{GemmKernel, GEMM_VAR};
