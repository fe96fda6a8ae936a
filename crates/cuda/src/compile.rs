//! Compiling kernels with NVRTC, and the per-executor cache of loaded modules.
//!
//! [`compile`] is the one compile path: the executor uses it through [`ModuleCache`], and
//! the kernel compile check (`tests/kernels_compile.rs`) calls it directly for sm_80 and
//! sm_90 cubins and compute_80 and compute_90 PTX, so a kernel that does not compile, or
//! compiles with a warning, fails `cargo test` on any machine that has libnvrtc, GPU or not.
//! What to build for a device ([`KernelCode`]: a cubin, or PTX for the driver to JIT) is
//! decided once by the probe ([`crate::loadable::decide`]).

use crate::error::CudaError;
use crate::kernels::Family;
use crate::library;
pub use crate::loadable::{Arch, CudaVersion, KernelCode};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys, Ptx};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

/// What NVRTC produced, the compiler's log (warnings, when it succeeded) and the options
/// it was given.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub image: Image,
    pub log: String,
    pub options: Vec<String>,
}

/// A compiled module as the driver loads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Image {
    /// An ELF cubin from `nvrtcGetCUBIN`.
    Cubin(Vec<u8>),
    /// PTX text from `nvrtcGetPTX`.
    Ptx(String),
}

/// What makes two compiled modules different: the source, the options and the code
/// built. The cache is keyed by all three.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModuleKey {
    pub source_hash: u64,
    pub options: Vec<String>,
    pub code: KernelCode,
}

/// Loaded modules and their functions, for one context. Owned by one executor's runtime.
#[derive(Default)]
pub struct ModuleCache {
    modules: Mutex<HashMap<ModuleKey, Arc<CudaModule>>>,
    /// Loaded functions by family and name. A cache serves one context, so one kind of
    /// code and one set of options: the family names its module.
    functions: Mutex<HashMap<(Family, String), CudaFunction>>,
}

impl Compiled {
    /// The log without the terminating NULs and surrounding whitespace: empty means NVRTC
    /// had nothing to say.
    pub fn diagnostics(&self) -> &str {
        self.log
            .trim_matches(|c: char| c == '\0' || c.is_whitespace())
    }

    /// The PTX text, when PTX was built.
    pub fn ptx(&self) -> Option<&str> {
        match &self.image {
            Image::Ptx(text) => Some(text),
            Image::Cubin(_) => None,
        }
    }

    /// The cubin's bytes, when a cubin was built.
    pub fn cubin(&self) -> Option<&[u8]> {
        match &self.image {
            Image::Cubin(bytes) => Some(bytes),
            Image::Ptx(_) => None,
        }
    }
}

/// The NVRTC options for `code`. Part of the cache key.
pub fn options(code: KernelCode) -> Vec<String> {
    vec![
        format!("--gpu-architecture={}", code.gpu_architecture()),
        // Division and square root correctly rounded, as the reference's f64 rounded to f32
        // expects; NVRTC's defaults already say so, and spelling them out keeps them so.
        "--prec-div=true".to_string(),
        "--prec-sqrt=true".to_string(),
        "--ftz=false".to_string(),
    ]
}

/// Compiles one kernel family to `code` with NVRTC. Never panics: a missing libnvrtc is an
/// [`CudaError::Unavailable`] naming the files searched; a compile error carries the log.
pub fn compile(family: Family, code: KernelCode) -> Result<Compiled, CudaError> {
    let check = library::nvrtc();
    if let Some(reason) = library::missing_reason(std::slice::from_ref(&check)) {
        return Err(CudaError::Unavailable(reason));
    }
    let failed = |name: &str, log: String| CudaError::Compile {
        family: family.name(),
        code: code.to_string(),
        name: name.to_string(),
        log,
    };
    let source = CString::new(family.source())
        .map_err(|_| failed("source contains a NUL byte", String::new()))?;
    let name = CString::new(format!("{}.cu", family.name()))
        .map_err(|_| failed("file name contains a NUL byte", String::new()))?;
    let options = options(code);
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
        return Err(failed(&format!("{:?}", e.0), log));
    }
    let image = match code {
        KernelCode::Cubin(_) => Image::Cubin(program.cubin()?),
        // SAFETY: the program compiled successfully, so its PTX is available.
        KernelCode::Ptx(_) => Image::Ptx(c_chars_to_string(
            &unsafe { nvrtc::get_ptx(program.0) }
                .map_err(|e| CudaError::nvrtc("nvrtcGetPTX", e))?,
        )),
    };
    Ok(Compiled {
        image,
        log,
        options,
    })
}

/// NVRTC's version, "12.9", for `concord info`; None when libnvrtc is missing.
pub fn nvrtc_version() -> Option<String> {
    nvrtc_cuda_version().ok().map(|v| v.to_string())
}

/// NVRTC's CUDA version (`nvrtcVersion`).
pub fn nvrtc_cuda_version() -> Result<CudaVersion, CudaError> {
    if let Some(reason) = library::missing_reason(&[library::nvrtc()]) {
        return Err(CudaError::Unavailable(reason));
    }
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: libnvrtc is present (checked above), and both pointers are valid for writes.
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| CudaError::nvrtc("nvrtcVersion", e))?;
    Ok(CudaVersion {
        major: major.max(0) as u32,
        minor: minor.max(0) as u32,
    })
}

/// The architectures the loaded NVRTC compiles for (`nvrtcGetSupportedArchs`), oldest
/// first.
pub fn supported_archs() -> Result<Vec<Arch>, CudaError> {
    if let Some(reason) = library::missing_reason(&[library::nvrtc()]) {
        return Err(CudaError::Unavailable(reason));
    }
    let mut count: c_int = 0;
    // SAFETY: libnvrtc is present; the pointer is valid for a write.
    unsafe { nvrtc_sys::nvrtcGetNumSupportedArchs(&mut count) }
        .result()
        .map_err(|e| CudaError::nvrtc("nvrtcGetNumSupportedArchs", e))?;
    let mut codes: Vec<c_int> = vec![0; usize::try_from(count).unwrap_or(0)];
    if !codes.is_empty() {
        // SAFETY: `codes` holds exactly as many ints as NVRTC said it would write.
        unsafe { nvrtc_sys::nvrtcGetSupportedArchs(codes.as_mut_ptr()) }
            .result()
            .map_err(|e| CudaError::nvrtc("nvrtcGetSupportedArchs", e))?;
    }
    let mut archs: Vec<Arch> = codes.into_iter().filter_map(Arch::from_nvrtc).collect();
    archs.sort();
    Ok(archs)
}

impl ModuleCache {
    /// The function `kernel` of `family`, compiled to `code` and loaded into `ctx` on first
    /// use.
    pub fn function(
        &self,
        ctx: &Arc<CudaContext>,
        code: KernelCode,
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
            options: options(code),
            code,
        };
        let module = {
            // Held while compiling, so two threads never compile the same family twice.
            let mut modules = self.modules.lock().map_err(|_| CudaError::Poisoned)?;
            match modules.get(&key) {
                Some(m) => m.clone(),
                None => {
                    let compiled = compile(family, code)?;
                    let image = match compiled.image {
                        Image::Cubin(bytes) => Ptx::from_binary(bytes),
                        Image::Ptx(text) => Ptx::from_src(text),
                    };
                    let module = ctx
                        .load_module(image)
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
        code: KernelCode,
        family: Family,
    ) -> Result<(), CudaError> {
        self.function(ctx, code, family, family.probe_kernel())
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

impl Program {
    /// The cubin of a program compiled for a real architecture.
    fn cubin(&self) -> Result<Vec<u8>, CudaError> {
        let mut size = 0usize;
        // SAFETY: the program handle is valid and compiled; the pointer is valid for a write.
        unsafe { nvrtc_sys::nvrtcGetCUBINSize(self.0, &mut size) }
            .result()
            .map_err(|e| CudaError::nvrtc("nvrtcGetCUBINSize", e))?;
        let mut bytes = vec![0u8; size];
        if size > 0 {
            // SAFETY: `bytes` holds exactly the size NVRTC reported for the cubin.
            unsafe { nvrtc_sys::nvrtcGetCUBIN(self.0, bytes.as_mut_ptr().cast::<c_char>()) }
                .result()
                .map_err(|e| CudaError::nvrtc("nvrtcGetCUBIN", e))?;
        }
        Ok(bytes)
    }
}

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
