//! [`CudaError`]: what can go wrong on the device, typed, with the driver's, NVRTC's or
//! cuBLAS's own error name; and its conversion to the executor contract's
//! [`concord_core::Error`].

use concord_core::{Error, Node, OpError};
use cudarc::cublas::result::CublasError;
use cudarc::driver::DriverError;
use cudarc::nvrtc::result::NvrtcError;
use thiserror::Error;

/// A failure of the CUDA executor.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum CudaError {
    /// A driver API call failed; `name` is the driver's name for the error
    /// ("CUDA_ERROR_OUT_OF_MEMORY").
    #[error("{call} failed: {name}")]
    Driver { call: &'static str, name: String },
    /// The context holds a sticky error after a run (a kernel faulted): the context cannot
    /// be used again, and the process must be restarted to use this device.
    #[error(
        "the CUDA context is in a sticky error state after the run ({name}, seen by {call}); \
         it cannot be used again in this process"
    )]
    Sticky { call: &'static str, name: String },
    /// A cuBLAS call failed.
    #[error("cuBLAS {call} failed: {name}")]
    Blas { call: &'static str, name: String },
    /// An NVRTC call other than the compilation itself failed.
    #[error("NVRTC {call} failed: {name}")]
    Nvrtc { call: &'static str, name: String },
    /// A kernel family did not compile; the log is NVRTC's.
    #[error("the {family} kernels did not compile for {arch} ({name}):\n{log}")]
    Compile {
        family: &'static str,
        arch: String,
        name: String,
        log: String,
    },
    /// A kernel reported bad operand values only visible at run time.
    #[error("{0}")]
    Runtime(String),
    /// The executor's device could not be opened.
    #[error("the CUDA device is unavailable: {0}")]
    Unavailable(String),
    /// A lock was poisoned by a thread that panicked while holding it.
    #[error("an internal lock of the CUDA executor was poisoned by a panicking thread")]
    Poisoned,
}

impl CudaError {
    /// A driver error from `call`, named as the driver names it.
    pub fn driver(call: &'static str, e: DriverError) -> CudaError {
        CudaError::Driver {
            call,
            name: driver_error_name(e),
        }
    }

    /// A cuBLAS error from `call`.
    pub fn blas(call: &'static str, e: CublasError) -> CudaError {
        CudaError::Blas {
            call,
            name: format!("{:?}", e.0),
        }
    }

    /// An NVRTC error from `call`.
    pub fn nvrtc(call: &'static str, e: NvrtcError) -> CudaError {
        CudaError::Nvrtc {
            call,
            name: format!("{:?}", e.0),
        }
    }

    /// As the contract's error, attributed to `node`.
    pub fn at_node(&self, node: &Node) -> Error {
        Error::at_node(node, OpError::Unsupported(format!("CUDA executor: {self}")))
    }

    /// As the contract's error for a failure not tied to one node (transfers, setup).
    pub fn in_partition(&self, what: &str) -> Error {
        Error::InvalidGraph(format!("CUDA executor, {what}: {self}"))
    }
}

/// The driver's name for an error ("CUDA_ERROR_ILLEGAL_ADDRESS"). The enum variant names
/// cudarc generates are the driver's own names, so this needs no call into the driver
/// (which may be the thing that is broken).
pub fn driver_error_name(e: DriverError) -> String {
    format!("{:?}", e.0)
}

/// Errors that are sticky: after one of these the context is unusable.
pub fn is_sticky(name: &str) -> bool {
    matches!(
        name,
        "CUDA_ERROR_ILLEGAL_ADDRESS"
            | "CUDA_ERROR_LAUNCH_FAILED"
            | "CUDA_ERROR_HARDWARE_STACK_ERROR"
            | "CUDA_ERROR_ILLEGAL_INSTRUCTION"
            | "CUDA_ERROR_MISALIGNED_ADDRESS"
            | "CUDA_ERROR_INVALID_ADDRESS_SPACE"
            | "CUDA_ERROR_INVALID_PC"
            | "CUDA_ERROR_ECC_UNCORRECTABLE"
            | "CUDA_ERROR_UNKNOWN"
    )
}
