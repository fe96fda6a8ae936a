//! The built-in backends by name, in one place (their cargo features are in
//! [`crate::BUILTIN_BACKENDS`]). A backend author's backend is named by its executor's
//! `name()`: `Backend::named("toy")`.

use concord_core::Backend;

/// The reference executor.
pub const CPU: Backend = Backend::new("cpu");
/// The OpenCL executor (`ocl` is an alias the registry accepts).
pub const OPENCL: Backend = Backend::new("opencl");
/// The CUDA executor.
pub const CUDA: Backend = Backend::new("cuda");
