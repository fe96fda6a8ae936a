//! Compiling kernels with NVRTC, and the per-executor cache of loaded modules.
//!
//! [`compile`] is the one compile path: the executor uses it through [`ModuleCache`], and
//! the kernel compile check (`tests/kernels_compile.rs`) calls it directly for compute_80
//! and compute_90, so a kernel that does not compile, or compiles with a warning, fails
//! `cargo test` on any machine that has libnvrtc, GPU or not.

use crate::error::CudaError;
use crate::kernels::Family;
use crate::library;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys, Ptx};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// A virtual GPU architecture, as NVRTC's `--gpu-architecture=compute_XY` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    pub major: u32,
    pub minor: u32,
}

/// What NVRTC produced: the PTX text and the compiler's log (warnings, when it succeeded).
#[derive(Clone, Debug)]
pub struct Compiled {
    pub ptx: String,
    pub log: String,
    pub options: Vec<String>,
}

/// What makes two compiled modules different: the source, the options and the
/// architecture. The cache is keyed by all three.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModuleKey {
    pub source_hash: u64,
    pub options: Vec<String>,
    pub arch: Arch,
}

/// Loaded modules and their functions, for one context. Owned by one executor's runtime.
#[derive(Default)]
pub struct ModuleCache {
    modules: Mutex<HashMap<ModuleKey, Arc<CudaModule>>>,
    /// Loaded functions by family and name. A cache serves one context, so one
    /// architecture and one set of options: the family names its module.
    functions: Mutex<HashMap<(Family, String), CudaFunction>>,
}

impl Arch {
    /// The architecture of a device of compute capability `major.minor`.
    pub fn of_capability(major: u32, minor: u32) -> Arch {
        Arch { major, minor }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "compute_{}{}", self.major, self.minor)
    }
}

impl Compiled {
    /// The log without the terminating NULs and surrounding whitespace: empty means NVRTC
    /// had nothing to say.
    pub fn diagnostics(&self) -> &str {
        self.log
            .trim_matches(|c: char| c == '\0' || c.is_whitespace())
    }
}

/// The NVRTC options for `arch`. Part of the cache key.
pub fn options(arch: Arch) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        // Division and square root correctly rounded, as the reference's f64 rounded to f32
        // expects; NVRTC's defaults already say so, and spelling them out keeps them so.
        "--prec-div=true".to_string(),
        "--prec-sqrt=true".to_string(),
        "--ftz=false".to_string(),
    ]
}

/// Compiles one kernel family for `arch` with NVRTC. Never panics: a missing libnvrtc is an
/// [`CudaError::Unavailable`] naming the files searched; a compile error carries the log.
pub fn compile(family: Family, arch: Arch) -> Result<Compiled, CudaError> {
    let check = library::nvrtc();
    if let Some(reason) = library::missing_reason(std::slice::from_ref(&check)) {
        return Err(CudaError::Unavailable(reason));
    }
    let source = CString::new(family.source()).map_err(|_| CudaError::Compile {
        family: family.name(),
        arch: arch.to_string(),
        name: "source contains a NUL byte".into(),
        log: String::new(),
    })?;
    let name = CString::new(format!("{}.cu", family.name())).map_err(|_| CudaError::Compile {
        family: family.name(),
        arch: arch.to_string(),
        name: "file name contains a NUL byte".into(),
        log: String::new(),
    })?;
    let options = options(arch);
    let program = Program(
        nvrtc::create_program(&source, Some(&name))
            .map_err(|e| CudaError::nvrtc("nvrtcCreateProgram", e))?,
    );
    // SAFETY: the program handle is valid until `program` drops; the options are plain
    // ASCII strings without NULs, so cudarc's CString conversion cannot fail.
    let compiled = unsafe { nvrtc::compile_program(program.0, &options) };
    // SAFETY: the program handle is valid, and the log exists after any compile attempt.
    let log = unsafe { nvrtc::get_program_log(program.0) }
        .map(|raw| c_chars_to_string(&raw))
        .unwrap_or_default();
    if let Err(e) = compiled {
        return Err(CudaError::Compile {
            family: family.name(),
            arch: arch.to_string(),
            name: format!("{:?}", e.0),
            log,
        });
    }
    // SAFETY: the program compiled successfully, so its PTX is available.
    let ptx =
        unsafe { nvrtc::get_ptx(program.0) }.map_err(|e| CudaError::nvrtc("nvrtcGetPTX", e))?;
    Ok(Compiled {
        ptx: c_chars_to_string(&ptx),
        log,
        options,
    })
}

/// NVRTC's version, "12.9", for `concord info`; None when libnvrtc is missing.
pub fn nvrtc_version() -> Option<String> {
    if !library::nvrtc().present {
        return None;
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: libnvrtc is present (checked above), and both pointers are valid for writes.
    let status = unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
    status.result().ok().map(|()| format!("{major}.{minor}"))
}

impl ModuleCache {
    /// The function `kernel` of `family`, compiled for `arch` and loaded into `ctx` on first
    /// use.
    pub fn function(
        &self,
        ctx: &Arc<CudaContext>,
        arch: Arch,
        family: Family,
        kernel: &str,
    ) -> Result<CudaFunction, CudaError> {
        let function_key = (family, kernel.to_string());
        if let Some(f) = self
            .functions
            .lock()
            .map_err(|_| CudaError::Poisoned)?
            .get(&function_key)
        {
            return Ok(f.clone());
        }
        let key = ModuleKey {
            source_hash: hash_of(&family.source()),
            options: options(arch),
            arch,
        };
        let module = {
            // Held while compiling, so two threads never compile the same family twice.
            let mut modules = self.modules.lock().map_err(|_| CudaError::Poisoned)?;
            match modules.get(&key) {
                Some(m) => m.clone(),
                None => {
                    let compiled = compile(family, arch)?;
                    let module = ctx
                        .load_module(Ptx::from_src(compiled.ptx))
                        .map_err(|e| CudaError::driver("cuModuleLoadData", e))?;
                    modules.insert(key, module.clone());
                    module
                }
            }
        };
        let function = module
            .load_function(kernel)
            .map_err(|e| CudaError::driver("cuModuleGetFunction", e))?;
        self.functions
            .lock()
            .map_err(|_| CudaError::Poisoned)?
            .insert(function_key, function.clone());
        Ok(function)
    }

    /// Compiles and loads `family` now (if it is not loaded yet), so that a partition's
    /// first run does not pay for compilation and a kernel that does not build fails
    /// `prepare`, not a forward.
    pub fn warm(
        &self,
        ctx: &Arc<CudaContext>,
        arch: Arch,
        family: Family,
    ) -> Result<(), CudaError> {
        self.function(ctx, arch, family, family.probe_kernel())
            .map(|_| ())
    }

    /// How many modules this cache has loaded.
    pub fn len(&self) -> usize {
        self.modules.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Debug for ModuleCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModuleCache")
            .field("modules", &self.len())
            .finish()
    }
}

/// Destroys an NVRTC program when dropped, ignoring errors (there is nothing to do about
/// one, and a panic in a destructor is worse).
struct Program(nvrtc_sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvrtcCreateProgram and is destroyed only here.
        let _ = unsafe { nvrtc::destroy_program(self.0) };
    }
}

fn hash_of(source: &str) -> u64 {
    let mut h = DefaultHasher::new();
    source.hash(&mut h);
    h.finish()
}

/// A NUL-terminated C buffer as a String, without the terminator (and without any NUL that
/// would make a later CString conversion fail).
fn c_chars_to_string(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).replace('\0', ""),
    }
}
