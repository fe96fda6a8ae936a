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
    /// A call of this run returned a sticky error (a kernel faulted): the context cannot
    /// be used again, and the process must be restarted to use this device. Sticky errors
    /// are context-wide, so the run that sees one first is not always the run whose kernel
    /// faulted; `call` says where this run saw it.
    #[error(
        "the CUDA context is in a sticky error state ({name}, seen by {call}); it cannot be \
         used again in this process"
    )]
    Sticky { call: &'static str, name: String },
    /// An earlier run saw the context's sticky error; this run did not start.
    #[error(
        "the CUDA context was lost earlier in this process ({name}, seen by {call} of an \
         earlier run); restart the process to use this device again"
    )]
    ContextLost { call: &'static str, name: String },
    /// A cuBLAS call failed.
    #[error("cuBLAS {call} failed: {name}")]
    Blas { call: &'static str, name: String },
    /// An NVRTC call other than the compilation itself failed.
    #[error("NVRTC {call} failed: {name}")]
    Nvrtc { call: &'static str, name: String },
    /// A kernel family did not compile; the log is NVRTC's.
    #[error("the {family} kernels did not compile to {code} ({name}):\n{log}")]
    Compile {
        family: &'static str,
        code: String,
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

/// Errors that are sticky: after one of these the context is unusable, and every later call
/// in it fails. The list is the driver API's: the errors its documentation says leave "the
/// process in an inconsistent state" where "the process must be terminated and relaunched".
/// CUDA_ERROR_UNKNOWN is counted with them because nothing else about the context can be
/// trusted after it.
pub fn is_sticky(name: &str) -> bool {
    matches!(
        name,
        "CUDA_ERROR_ILLEGAL_ADDRESS"
            | "CUDA_ERROR_LAUNCH_FAILED"
            | "CUDA_ERROR_LAUNCH_TIMEOUT"
            | "CUDA_ERROR_ASSERT"
            | "CUDA_ERROR_CONTAINED"
            | "CUDA_ERROR_HARDWARE_STACK_ERROR"
            | "CUDA_ERROR_ILLEGAL_INSTRUCTION"
            | "CUDA_ERROR_MISALIGNED_ADDRESS"
            | "CUDA_ERROR_INVALID_ADDRESS_SPACE"
            | "CUDA_ERROR_INVALID_PC"
            | "CUDA_ERROR_ECC_UNCORRECTABLE"
            | "CUDA_ERROR_UNKNOWN"
    )
}

/// A driver error whose name is sticky becomes [`CudaError::Sticky`]; every other error is
/// left as it is (only the name decides: a failure is not called sticky without it).
pub fn classify(e: CudaError) -> CudaError {
    match e {
        CudaError::Driver { call, name } if is_sticky(&name) => CudaError::Sticky { call, name },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::cudaError_enum as Cu;

    #[test]
    fn sticky_errors_are_recognised_by_name_and_only_by_name() {
        for code in [
            Cu::CUDA_ERROR_ILLEGAL_ADDRESS,
            Cu::CUDA_ERROR_LAUNCH_FAILED,
            Cu::CUDA_ERROR_LAUNCH_TIMEOUT,
            Cu::CUDA_ERROR_ASSERT,
            Cu::CUDA_ERROR_ILLEGAL_INSTRUCTION,
            Cu::CUDA_ERROR_MISALIGNED_ADDRESS,
        ] {
            let e = classify(CudaError::driver("cuStreamSynchronize", DriverError(code)));
            assert_eq!(
                e,
                CudaError::Sticky {
                    call: "cuStreamSynchronize",
                    name: format!("{code:?}")
                }
            );
        }
        for code in [
            Cu::CUDA_ERROR_OUT_OF_MEMORY,
            Cu::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
            Cu::CUDA_ERROR_INVALID_VALUE,
            Cu::CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
        ] {
            let e = classify(CudaError::driver("cuLaunchKernel", DriverError(code)));
            assert!(matches!(e, CudaError::Driver { .. }), "{e:?}");
            assert!(!e.to_string().contains("sticky"), "{e}");
        }
        // The name is the driver's own spelling, taken from cudarc's enum.
        assert_eq!(
            driver_error_name(DriverError(Cu::CUDA_ERROR_LAUNCH_TIMEOUT)),
            "CUDA_ERROR_LAUNCH_TIMEOUT"
        );
    }
}
