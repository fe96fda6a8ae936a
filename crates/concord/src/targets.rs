//! The built-in targets, in one place. Each is declared by the executor crate that serves it
//! (with its precision and needed capability); when a feature is off this build cannot run
//! it, but can still name it, so a request for it falls back with a reason instead of
//! failing to compile.

pub use concord_cpu::CPU;
#[cfg(feature = "cuda")]
pub use concord_cuda::{CUDA, CUDA_FP16};
#[cfg(feature = "opencl")]
pub use concord_opencl::{OPENCL, OPENCL_FP16};

use concord_core::Target;

/// OpenCL, f32 (declared by concord-opencl; this build lacks the `opencl` feature).
#[cfg(not(feature = "opencl"))]
pub const OPENCL: Target = Target::new("opencl");
/// OpenCL, f16 storage (declared by concord-opencl; this build lacks the `opencl` feature).
#[cfg(not(feature = "opencl"))]
pub const OPENCL_FP16: Target = Target::new("opencl-fp16");
/// CUDA, f32 (declared by concord-cuda; this build lacks the `cuda` feature).
#[cfg(not(feature = "cuda"))]
pub const CUDA: Target = Target::new("cuda");
/// CUDA, f16 storage (declared by concord-cuda; this build lacks the `cuda` feature).
#[cfg(not(feature = "cuda"))]
pub const CUDA_FP16: Target = Target::new("cuda-fp16");

/// Every built-in target, compiled in or not.
pub const BUILTIN: [Target; 5] = [CPU, OPENCL, OPENCL_FP16, CUDA, CUDA_FP16];
