//! [`OpenClError`]: what can go wrong on the device, typed, with the OpenCL error name; and
//! its conversion to the executor contract's [`concord_core::Error`].

use crate::cl::ClError;
use concord_core::{Error, Node};
use thiserror::Error;

/// A device-side failure of the OpenCL executor.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum OpenClError {
    /// An OpenCL API call failed (out of memory, out of resources, a lost device…).
    #[error("{0}")]
    Cl(#[from] ClError),
    /// A kernel family did not compile for this device; the log is the compiler's.
    #[error("the {family} kernels ({variant}) did not build: {error}\n{log}")]
    Build {
        family: &'static str,
        variant: String,
        error: ClError,
        log: String,
    },
    /// A kernel reported bad operand values it can only see at run time.
    #[error("{0}")]
    Runtime(String),
    /// The executor's device could not be opened.
    #[error("the OpenCL device is unavailable: {0}")]
    Unavailable(String),
    /// A lock was poisoned by a thread that panicked while holding it.
    #[error("an internal lock was poisoned by a panicking thread")]
    Poisoned,
}

impl OpenClError {
    /// The OpenCL error name, when the failure came from an API call.
    pub fn cl_name(&self) -> Option<&'static str> {
        match self {
            OpenClError::Cl(e) | OpenClError::Build { error: e, .. } => Some(e.name()),
            _ => None,
        }
    }

    /// As the contract's error, attributed to `node`.
    pub fn at_node(&self, node: &Node) -> Error {
        Error::Device {
            executor: "opencl".into(),
            node: Some(node.name.clone()),
            detail: self.to_string(),
        }
    }

    /// As the contract's error, attributed to the node named `node` (of op `op`) while it
    /// did `what` ("kernel conv_rows", "setting up its kernels") during a run.
    pub fn at_step(&self, node: &str, op: &str, what: &str) -> Error {
        Error::Device {
            executor: "opencl".into(),
            node: Some(node.to_string()),
            detail: format!("{op}, {what}: {self}"),
        }
    }

    /// As the contract's error for a failure not tied to one node (transfers, setup).
    pub fn in_partition(&self, what: &str) -> Error {
        device_error(format!("{what}: {self}"))
    }
}

/// The contract's error for an OpenCL executor failure described in words.
pub fn device_error(detail: String) -> Error {
    Error::Device {
        executor: "opencl".into(),
        node: None,
        detail,
    }
}
