//! The kernel sources (kernels/*.cl, embedded) and the program cache an executor instance
//! owns: one program per kernel family and variant, built lazily the first time a prepared
//! partition needs it, keyed by everything that changes the binary. Only successful builds
//! stay cached; a failed one is forgotten once its waiters have its error.

use crate::cl::{BuildError, Program};
use crate::device::Device;
use crate::error::OpenClError;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

const COMMON: &str = include_str!("../kernels/common.cl");

/// A group of kernels compiled together as one program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Elementwise,
    Cast,
    Movement,
    Gemm,
    Conv,
    Pool,
    Norm,
    Reduce,
    Resize,
    Recurrent,
}

/// Everything that makes two builds of a program differ.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProgramKey {
    pub family: Family,
    /// The variant's defines ("-DT_F16", "-DELEM=ushort", "-DSRC_F32 -DDST_I64").
    pub variant: String,
    /// Device-dependent build options (fp64, rounding, tile sizes).
    pub options: String,
    pub device: usize,
    /// A hash of the full source text, so an edited kernel never meets a stale binary.
    pub source_hash: u64,
}

/// One cache entry: the build's outcome, filled once by whichever caller gets there first.
type BuildSlot = Arc<OnceLock<Result<Arc<Program>, OpenClError>>>;

/// Built programs, shared by every partition an executor prepares (and so by every net
/// built from one registry). Each key is built at most once; concurrent requests for the
/// same key wait for the one build.
pub struct ProgramCache {
    entries: Mutex<HashMap<ProgramKey, BuildSlot>>,
    /// Rows of the CPU-device kernels' register blocks (HR in gemm.cl), 4 or 8.
    block_rows: usize,
}

impl fmt::Debug for ProgramCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.entries.lock().map(|e| e.len()).unwrap_or(0);
        f.debug_struct("ProgramCache")
            .field("programs", &n)
            .finish()
    }
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Cast => "cast",
            Family::Movement => "movement",
            Family::Gemm => "gemm",
            Family::Conv => "conv",
            Family::Pool => "pool",
            Family::Norm => "norm",
            Family::Reduce => "reduce",
            Family::Resize => "resize",
            Family::Recurrent => "recurrent",
        }
    }

    fn source(self) -> &'static str {
        match self {
            Family::Elementwise => include_str!("../kernels/elementwise.cl"),
            Family::Cast => include_str!("../kernels/cast.cl"),
            Family::Movement => include_str!("../kernels/movement.cl"),
            Family::Gemm => include_str!("../kernels/gemm.cl"),
            Family::Conv => include_str!("../kernels/conv.cl"),
            Family::Pool => include_str!("../kernels/pool.cl"),
            Family::Norm => include_str!("../kernels/norm.cl"),
            Family::Reduce => include_str!("../kernels/reduce.cl"),
            Family::Resize => include_str!("../kernels/resize.cl"),
            Family::Recurrent => include_str!("../kernels/recurrent.cl"),
        }
    }
}

impl ProgramCache {
    /// An empty cache whose CPU-device builds sum `block_rows` rows at a time (see
    /// [`crate::BlockRows`]).
    pub fn new(block_rows: usize) -> Self {
        ProgramCache {
            entries: Mutex::default(),
            block_rows,
        }
    }

    /// The rows the CPU-device builds sum at a time: 8 where the device's vector registers
    /// are many and wide (AVX-512), else 4.
    pub fn block_rows(&self) -> usize {
        self.block_rows
    }

    /// Number of programs built or being built, for tests and `Debug`.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The program for `family` in `variant`, built on first use.
    pub fn get(
        &self,
        device: &Device,
        family: Family,
        variant: &str,
    ) -> Result<Arc<Program>, OpenClError> {
        // The op codes come from concord-core's op table, so a kernel's `case U_RELU:` and
        // the Rust caller's code cannot disagree.
        let source = format!(
            "{}{COMMON}\n{}",
            concord_core::op::kernel_code_defines(),
            family.source()
        );
        let options = device_options(device, self.block_rows);
        let key = ProgramKey {
            family,
            variant: variant.to_string(),
            options: options.clone(),
            device: device.id,
            source_hash: fnv1a(source.as_bytes()),
        };
        let slot = {
            let mut entries = self.entries.lock().map_err(|_| OpenClError::Poisoned)?;
            entries.entry(key.clone()).or_default().clone()
        };
        let built = slot
            .get_or_init(|| {
                let all_options = format!("{variant} {options}");
                device
                    .context
                    .build_program(&source, &all_options)
                    .map(Arc::new)
                    .map_err(|e| match e {
                        BuildError::Api(error) => OpenClError::Cl(error),
                        BuildError::Compile { error, log } => OpenClError::Build {
                            family: family.name(),
                            variant: variant.to_string(),
                            error,
                            log,
                        },
                    })
            })
            .clone();
        if built.is_err() {
            // A failed build is not kept: out of resources (or an injected fault) now may
            // build later, and a net built after the failure must not inherit it. Whoever
            // waited on this build got its error; the next request builds afresh. A
            // source that never compiles costs a compile per request, on the error path only.
            if let Ok(mut entries) = self.entries.lock() {
                if entries.get(&key).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                    entries.remove(&key);
                }
            }
        }
        built
    }
}

/// Build options that depend on the device (and the register block chosen for it), not on
/// the kernel.
fn device_options(device: &Device, block_rows: usize) -> String {
    // `-w` (a standard OpenCL build option): no warnings. Some compilers (PoCL's clang)
    // print their count straight to the process's stderr ("20 warnings generated."), under
    // the user's own output, and a kernel's warning is nothing the user can act on.
    let mut options = vec!["-w"];
    if device.fp64 {
        options.push("-DUSE_FP64");
    }
    if device.correctly_rounded_div_sqrt {
        // Without it OpenCL allows 2.5 ulp for f32 division; the reference rounds once.
        options.push("-cl-fp32-correctly-rounded-divide-sqrt");
    }
    if device.is_cpu {
        options.push("-DCPU_DEVICE");
    }
    // Eight float16 sums per register block of the register-blocked kernels (see HR in
    // gemm.cl and BlockRows): chosen where a vector register holds all 16 lanes, or asked
    // for, on any device that runs those kernels; gemm.cl's default is four.
    if block_rows == 8 {
        options.push("-DHR=8");
    }
    options.join(" ")
}

/// FNV-1a: a stable 64-bit hash of the source text for the cache key.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::Family;
    use crate::plan::PARAM_KERNELS;

    /// The parameters of kernel `name` in `source`, if it is defined there.
    fn params(source: &str, name: &str) -> Option<Vec<String>> {
        let at = source.find(&format!("void {name}("))?;
        let head = &source[..at];
        if !head[head.rfind(';').unwrap_or(0)..].contains("__kernel") {
            return None;
        }
        let rest = &source[at + name.len() + 6..];
        let list = &rest[..rest.find(')')?];
        Some(
            list.split(',')
                .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect(),
        )
    }

    /// Every kernel that takes its scalars in a buffer declares only buffers, the last of
    /// them the parameters `P`: a scalar left in its signature would take the place of the
    /// next argument the executor binds.
    #[test]
    fn param_kernels_declare_buffers_and_then_p() {
        let families = [
            Family::Elementwise,
            Family::Cast,
            Family::Movement,
            Family::Gemm,
            Family::Conv,
            Family::Pool,
            Family::Norm,
            Family::Reduce,
            Family::Resize,
            Family::Recurrent,
        ];
        for name in PARAM_KERNELS {
            let found: Vec<Vec<String>> = families
                .iter()
                .filter_map(|f| params(f.source(), name))
                .collect();
            assert_eq!(found.len(), 1, "{name} is defined {} times", found.len());
            let params = &found[0];
            assert_eq!(
                params.last().map(String::as_str),
                Some("__global const long* restrict P"),
                "{name}: {params:?}"
            );
            for p in &params[..params.len() - 1] {
                assert!(
                    p.contains('*') || p.starts_with("CTPTR") || p.starts_with("TPTR"),
                    "{name} takes the scalar `{p}`"
                );
            }
        }
    }
}
