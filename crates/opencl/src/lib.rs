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
//! - A forward waits for the device once: its uploads, kernels, status word and downloads
//!   are enqueued without waiting inside [`cl::Queue::scope`], which borrows the host memory
//!   they copy from and into and waits for the queue before it returns. On CPU devices they
//!   are held behind a gate (a barrier on a user event) until that wait, so the device runs
//!   them back to back (on PoCL this took a third off forwards made of many small kernels),
//!   except on PoCL's `basic` device, which runs commands inline in the waiting thread and
//!   deadlocked when the gate released them (`Device::gate_queues`). Transfers copy
//!   straight from the input tensors' memory and into the output tensors' own where the
//!   device storage is the dtype's (f32 on `opencl`, f16, i64), with no staging copy. On
//!   CPU devices with fine-grained buffer SVM (PoCL) a workspace's slots are shared
//!   memory ([`SlotMemory`], `CONCORD_OPENCL_MEMORY`): the uploads, the status word and the
//!   downloads are then host copies before and after the scope, not commands.
//! - No panics on device errors: opencl3's panicking wrappers are not used; every OpenCL
//!   call goes through [`cl`], whose errors carry the call and the CL error name.
//! - `unsafe` is allowed in this crate only, each block with a `// SAFETY:` comment.
//!
//! # Device faults
//!
//! A failing OpenCL call (a kernel family that does not build, a buffer the device cannot
//! allocate, out of resources at a launch, a failed upload, download or finish) is an error,
//! never a panic, and never a silent fallback:
//! - While a net is built (weights uploaded, programs compiled, the first workspace made
//!   for fixed input shapes) it fails `prepare`, which the planner turns into
//!   `concord::Error::Prepare` under every fallback policy: the device was there and chosen,
//!   so running elsewhere would be a fallback nobody decided up front.
//! - During a forward it is that forward's `Error::Device` (or `Error::Node` for a compile
//!   of a plan made for new input shapes), naming the OpenCL call, the CL error name and,
//!   when one node's work failed (its kernel objects, their arguments, its launch), the node
//!   and its op; uploads and downloads name the value.
//! - The net stays usable; nothing is poisoned. What a forward touches is either its own or
//!   immutable once made: the workspace that saw the error (queue, slot memory, kernel
//!   objects) is finished and dropped instead of going back to the pool, and the next
//!   forward makes a fresh one; a plan or a weight buffer is only stored once it was made
//!   whole; the program cache keeps successful builds only, so a compile that failed for
//!   want of resources is retried by the next request. Other forwards, on other threads,
//!   use other workspaces and are not disturbed. (A lock poisoned by a panicking thread is
//!   the one state that does not heal: every later use says so with `OpenClError::Poisoned`.)
//!
//! `tests/device_faults.rs` proves each of these with `cl::faults` (the `fault-injection`
//! feature), which fails the Nth call of one [`cl::CallKind`] on one thread only.

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
#[doc(hidden)]
pub use fuse::FusionFault;
pub use partition::OpenClPartition;
pub use plan::{BlockRows, GemmKernel, SlotMemory, BLOCK_ROWS_VAR, GEMM_VAR, MEMORY_VAR};
