//! A thin, panic-free layer over the OpenCL C API as opencl3 (through cl3) exposes it:
//! owned handles whose `Drop` releases without panicking, and every call returning
//! [`ClError`] with the API call's name and the CL error name.
//!
//! opencl3's own wrapper types are not used: their `Drop` impls `expect` on release and
//! `ExecuteKernel` panics on argument mistakes, and an executor must never panic on a
//! device error. All `unsafe` of the crate that touches OpenCL lives in this file.
//!
//! Every call that can fail while a net is built or run passes one fault point
//! ([`CallKind`]) first. With the `fault-injection` cargo feature, `faults::inject` makes
//! the Nth call of one kind on the calling thread fail with a chosen CL error instead of
//! reaching the driver, which is how the tests prove that each failure is a typed error and
//! leaves the executor usable. Without the feature a fault point compiles to nothing.

use opencl3::command_queue as cq;
use opencl3::context::context as ctx;
use opencl3::device as dev;
use opencl3::error_codes::error_text;
use opencl3::event::CL_COMPLETE;
use opencl3::kernel as kn;
use opencl3::memory as mem;
use opencl3::platform::platform as plat;
use opencl3::program as prog;
use opencl3::types::{
    cl_command_queue, cl_context, cl_device_id, cl_event, cl_int, cl_kernel, cl_mem,
    cl_platform_id, cl_program, cl_uint, CL_BLOCKING, CL_NON_BLOCKING,
};
use std::ffi::{c_void, CString};
use std::fmt;
use std::ptr;

/// A failed OpenCL API call: which call, and the error code with its CL name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClError {
    /// The OpenCL C function that failed ("clEnqueueNDRangeKernel").
    pub call: &'static str,
    /// The OpenCL error code (negative), or cl3's -2000/-2001 for a library that did not
    /// load or a function it lacks.
    pub code: i32,
}

impl ClError {
    pub fn new(call: &'static str, code: cl_int) -> Self {
        ClError { call, code }
    }

    /// The CL name of the error code ("CL_OUT_OF_RESOURCES", "DLOPEN_RUNTIME_LOAD_FAILED").
    pub fn name(&self) -> &'static str {
        error_text(self.code)
    }
}

impl fmt::Display for ClError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed with {} ({})",
            self.call,
            self.name(),
            self.code
        )
    }
}

impl std::error::Error for ClError {}

/// cl3's error code for "the OpenCL library could not be loaded".
pub const LIBRARY_NOT_LOADED: i32 = opencl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED;
/// cl3's error code for "the library lacks this function".
pub const FUNCTION_MISSING: i32 = opencl3::error_codes::DLOPEN_FUNCTION_NOT_AVAILABLE;
/// The ICD loader's "no platform" code (CL_PLATFORM_NOT_FOUND_KHR).
pub const PLATFORM_NOT_FOUND: i32 = -1001;

fn check<T>(call: &'static str, r: Result<T, cl_int>) -> Result<T, ClError> {
    r.map_err(|code| ClError::new(call, code))
}

/// The kinds of OpenCL call that fail while a net is built or run, each a fault point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// clBuildProgram (a kernel family compiled at prepare, or at a forward with new shapes).
    Compile,
    /// clCreateBuffer (weights, plan-time constants, a workspace's slots), or clSVMAlloc
    /// (a workspace's slots in shared memory).
    Alloc,
    /// clCreateCommandQueue (a workspace's queue, a weight upload's queue).
    Queue,
    /// clCreateKernel (a workspace's kernel objects).
    Kernel,
    /// clSetKernelArg.
    SetArg,
    /// clEnqueueWriteBuffer (weights and inputs).
    Write,
    /// clEnqueueNDRangeKernel.
    Enqueue,
    /// clFinish.
    Finish,
    /// clEnqueueReadBuffer (outputs and the status word).
    Read,
}

impl CallKind {
    /// Every kind, in the order a net meets them.
    pub const ALL: [CallKind; 9] = [
        CallKind::Compile,
        CallKind::Alloc,
        CallKind::Queue,
        CallKind::Kernel,
        CallKind::SetArg,
        CallKind::Write,
        CallKind::Enqueue,
        CallKind::Finish,
        CallKind::Read,
    ];

    /// The OpenCL C function behind the kind.
    pub fn call(self) -> &'static str {
        match self {
            CallKind::Compile => "clBuildProgram",
            CallKind::Alloc => "clCreateBuffer",
            CallKind::Queue => "clCreateCommandQueue",
            CallKind::Kernel => "clCreateKernel",
            CallKind::SetArg => "clSetKernelArg",
            CallKind::Write => "clEnqueueWriteBuffer",
            CallKind::Enqueue => "clEnqueueNDRangeKernel",
            CallKind::Finish => "clFinish",
            CallKind::Read => "clEnqueueReadBuffer",
        }
    }
}

/// The fault point of a `kind` call: the injected error when one is armed on this thread
/// for this call, else nothing. Without the `fault-injection` feature it is always `Ok`.
#[inline(always)]
fn fault_point(kind: CallKind) -> Result<(), ClError> {
    #[cfg(feature = "fault-injection")]
    {
        if let Some(code) = faults::take(kind) {
            return Err(ClError::new(kind.call(), code));
        }
    }
    #[cfg(not(feature = "fault-injection"))]
    let _ = kind;
    Ok(())
}

/// Test-only fault injection, scoped to one thread: an armed fault sees only the OpenCL
/// calls its own thread makes, so nets run on other threads meanwhile are untouched (a
/// process-wide switch would leak into every concurrent test). A net's `forward` makes its
/// calls on the calling thread, and `build` its prepare-time calls; `forward_async` runs on
/// the net's worker threads, where a fault armed by the caller does not reach. One thing
/// does cross threads, as a real failure would: a thread waiting in the program cache for
/// the very build that an injected compile fault fails gets that build's error.
#[cfg(feature = "fault-injection")]
pub mod faults {
    use super::CallKind;
    use std::cell::RefCell;
    use std::marker::PhantomData;

    /// A fault armed on this thread until the guard drops.
    #[derive(Debug)]
    pub struct Injection {
        kind: CallKind,
        /// Armed state is thread-local, so the guard must stay on its thread.
        _not_send: PhantomData<*const ()>,
    }

    #[derive(Debug)]
    struct Armed {
        kind: CallKind,
        /// Which call of `kind` fails, counting from 1; 0 never fails (a pure counter).
        nth: usize,
        code: i32,
        seen: usize,
        fired: bool,
    }

    thread_local! {
        static ARMED: RefCell<Option<Armed>> = const { RefCell::new(None) };
    }

    /// Makes the `nth` call (counting from 1) of `kind` on this thread fail with `code`
    /// (a CL error code such as `CL_OUT_OF_RESOURCES`), without reaching the driver. Later
    /// calls succeed again. Replaces a fault already armed on this thread.
    pub fn inject(kind: CallKind, nth: usize, code: i32) -> Injection {
        arm(kind, nth.max(1), code)
    }

    /// Counts the calls of `kind` on this thread without failing any.
    pub fn count(kind: CallKind) -> Injection {
        arm(kind, 0, 0)
    }

    fn arm(kind: CallKind, nth: usize, code: i32) -> Injection {
        ARMED.with(|a| {
            *a.borrow_mut() = Some(Armed {
                kind,
                nth,
                code,
                seen: 0,
                fired: false,
            });
        });
        Injection {
            kind,
            _not_send: PhantomData,
        }
    }

    impl Injection {
        /// Whether the armed call came and failed.
        pub fn fired(&self) -> bool {
            self.with(|a| a.fired)
        }

        /// How many calls of the kind this thread has made since arming.
        pub fn seen(&self) -> usize {
            self.with(|a| a.seen)
        }

        fn with<T: Default>(&self, f: impl FnOnce(&Armed) -> T) -> T {
            ARMED.with(|a| {
                a.borrow()
                    .as_ref()
                    .filter(|armed| armed.kind == self.kind)
                    .map(f)
                    .unwrap_or_default()
            })
        }
    }

    impl Drop for Injection {
        fn drop(&mut self) {
            ARMED.with(|a| {
                let mut armed = a.borrow_mut();
                if armed.as_ref().is_some_and(|x| x.kind == self.kind) {
                    *armed = None;
                }
            });
        }
    }

    /// Counts a `kind` call and says whether it is the one to fail, with which code.
    pub(super) fn take(kind: CallKind) -> Option<i32> {
        ARMED.with(|a| {
            let mut armed = a.borrow_mut();
            let armed = armed.as_mut().filter(|x| x.kind == kind)?;
            armed.seen += 1;
            (armed.seen == armed.nth).then(|| {
                armed.fired = true;
                armed.code
            })
        })
    }
}

/// Every platform the ICD loader knows.
pub fn platforms() -> Result<Vec<cl_platform_id>, ClError> {
    check("clGetPlatformIDs", plat::get_platform_ids())
}

/// A string property of a platform (CL_PLATFORM_NAME, …), without its trailing NUL.
pub fn platform_string(platform: cl_platform_id, param: cl_uint) -> Result<String, ClError> {
    let bytes = check(
        "clGetPlatformInfo",
        plat::get_platform_data(platform, param),
    )?;
    Ok(c_bytes_to_string(&bytes))
}

/// Every device of a platform, of any type. A platform with none gives an empty list.
pub fn devices(platform: cl_platform_id) -> Result<Vec<cl_device_id>, ClError> {
    check(
        "clGetDeviceIDs",
        dev::get_device_ids(platform, dev::CL_DEVICE_TYPE_ALL),
    )
}

/// A string property of a device (CL_DEVICE_NAME, …).
pub fn device_string(device: cl_device_id, param: cl_uint) -> Result<String, ClError> {
    let bytes = check("clGetDeviceInfo", dev::get_device_data(device, param))?;
    Ok(c_bytes_to_string(&bytes))
}

/// An integer property of a device (cl_uint, cl_ulong, size_t or a bitfield), widened.
pub fn device_u64(device: cl_device_id, param: cl_uint) -> Result<u64, ClError> {
    let bytes = check("clGetDeviceInfo", dev::get_device_data(device, param))?;
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    Ok(u64::from_ne_bytes(buf))
}

fn c_bytes_to_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).trim().to_string()
}

/// An OpenCL context on one device.
#[derive(Debug)]
pub struct Context {
    raw: cl_context,
    device: cl_device_id,
}

// SAFETY: OpenCL contexts may be used from any thread: every OpenCL API call except
// clSetKernelArg on one kernel object is thread-safe (OpenCL 1.1+, "Thread safety").
unsafe impl Send for Context {}
// SAFETY: as above; the context is only passed to thread-safe API calls.
unsafe impl Sync for Context {}

impl Context {
    pub fn new(device: cl_device_id) -> Result<Context, ClError> {
        let raw = check(
            "clCreateContext",
            ctx::create_context(&[device], ptr::null(), None, ptr::null_mut()),
        )?;
        Ok(Context { raw, device })
    }

    pub fn device(&self) -> cl_device_id {
        self.device
    }

    /// A new in-order command queue on the context's device, with profiling enabled (so a
    /// profiled run reads each kernel's device time from its event instead of waiting for
    /// the queue after every node; recording the timestamps costs next to nothing). With
    /// `gated`, its scopes hold their commands back until they wait (see [`Queue::scope`]).
    pub fn queue(&self, gated: bool) -> Result<Queue, ClError> {
        fault_point(CallKind::Queue)?;
        // SAFETY: the device is the one the context was created for, and the properties ask
        // for an in-order queue with profiling.
        let raw = unsafe {
            cq::create_command_queue(self.raw, self.device, cq::CL_QUEUE_PROFILING_ENABLE)
        };
        let raw = check("clCreateCommandQueue", raw)?;
        Ok(Queue {
            raw,
            context: self.raw,
            gated,
        })
    }

    /// A device buffer of `bytes` bytes (at least one element's worth, as OpenCL refuses
    /// empty buffers), read-write, uninitialised.
    pub fn buffer(&self, bytes: usize) -> Result<Buffer, ClError> {
        let size = bytes.max(8);
        fault_point(CallKind::Alloc)?;
        // SAFETY: no host pointer is passed, so the flags only ask for device memory.
        let raw =
            unsafe { mem::create_buffer(self.raw, mem::CL_MEM_READ_WRITE, size, ptr::null_mut()) };
        let raw = check("clCreateBuffer", raw)?;
        Ok(Buffer { raw, bytes })
    }

    /// `bytes` bytes (at least 8) of fine-grained shared virtual memory, read-write,
    /// uninitialised: kernels reach it through [`ArgValue::Svm`], and the host reads and
    /// writes it in place while no command uses it ([`Svm::write`], [`Svm::read`]), with
    /// no transfer command. Needs a device with fine-grained buffer SVM (OpenCL 2.0).
    pub fn svm(&self, bytes: usize) -> Result<Svm, ClError> {
        let size = bytes.max(8);
        fault_point(CallKind::Alloc).map_err(|e| ClError::new("clSVMAlloc", e.code))?;
        // SAFETY: the context is live; the flags ask for read-write fine-grained buffer SVM
        // with the default alignment, and a NULL answer (no memory, or no SVM) is an error.
        let ptr = unsafe {
            mem::svm_alloc(
                self.raw,
                mem::CL_MEM_READ_WRITE | mem::CL_MEM_SVM_FINE_GRAIN_BUFFER,
                size,
                0,
            )
        }
        .map_err(|code| {
            // clSVMAlloc answers a failure with NULL and no code (cl3 calls that
            // CL_INVALID_VALUE); a missing function keeps its own code.
            let code = if code == FUNCTION_MISSING {
                code
            } else {
                opencl3::error_codes::CL_MEM_OBJECT_ALLOCATION_FAILURE
            };
            ClError::new("clSVMAlloc", code)
        })?;
        // SAFETY: the context is live; the allocation holds a reference so that clSVMFree
        // gets a live context whichever is dropped first.
        if let Err(code) = unsafe { ctx::retain_context(self.raw) } {
            // SAFETY: the pointer came from clSVMAlloc on this context just above.
            let _ = unsafe { mem::svm_free(self.raw, ptr) };
            return Err(ClError::new("clRetainContext", code));
        }
        Ok(Svm {
            allocation: std::sync::Arc::new(SvmAllocation {
                context: self.raw,
                ptr,
            }),
            offset: 0,
            bytes,
        })
    }

    /// Creates and builds a program from source for the context's device. On a build
    /// failure the error carries the compiler's log.
    pub fn build_program(&self, source: &str, options: &str) -> Result<Program, BuildError> {
        let raw = check(
            "clCreateProgramWithSource",
            prog::create_program_with_source(self.raw, &[source]),
        )
        .map_err(BuildError::Api)?;
        let program = Program { raw };
        let options = CString::new(options.replace('\0', " ")).unwrap_or_default();
        if let Err(error) = fault_point(CallKind::Compile) {
            return Err(BuildError::Compile {
                error,
                log: "(an injected fault: the compiler did not run)".into(),
            });
        }
        let built =
            prog::build_program(program.raw, &[self.device], &options, None, ptr::null_mut());
        if let Err(code) = built {
            let log =
                prog::get_program_build_data(program.raw, self.device, prog::CL_PROGRAM_BUILD_LOG)
                    .map(|b| c_bytes_to_string(&b))
                    .unwrap_or_default();
            return Err(BuildError::Compile {
                error: ClError::new("clBuildProgram", code),
                log,
            });
        }
        Ok(program)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: `raw` was created by clCreateContext and is released exactly once here.
        // A failed release cannot be acted on in Drop; it leaks the context at worst.
        let _ = unsafe { ctx::release_context(self.raw) };
    }
}

/// Why a program did not build.
#[derive(Clone, Debug)]
pub enum BuildError {
    Api(ClError),
    Compile { error: ClError, log: String },
}

/// A built OpenCL program.
#[derive(Debug)]
pub struct Program {
    raw: cl_program,
}

// SAFETY: program objects are thread-safe to share; kernels are created per user.
unsafe impl Send for Program {}
// SAFETY: as above: clCreateKernel on one program from several threads is allowed.
unsafe impl Sync for Program {}

impl Program {
    /// A new kernel object for `name`. Each caller gets its own, since setting arguments
    /// on one kernel object from two threads is not safe.
    pub fn kernel(&self, name: &str) -> Result<Kernel, ClError> {
        let cname = CString::new(name).map_err(|_| ClError::new("clCreateKernel", -46))?;
        fault_point(CallKind::Kernel)?;
        let raw = check("clCreateKernel", kn::create_kernel(self.raw, &cname))?;
        Ok(Kernel { raw })
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `raw` came from clCreateProgramWithSource and is released once.
        let _ = unsafe { prog::release_program(self.raw) };
    }
}

/// One kernel object. `Send` but deliberately not `Sync`: whoever holds it sets its
/// arguments and enqueues it, and nobody else can at the same time.
#[derive(Debug)]
pub struct Kernel {
    raw: cl_kernel,
}

// SAFETY: a kernel object may move between threads; it is never shared (not Sync), so
// clSetKernelArg is never called on it from two threads at once.
unsafe impl Send for Kernel {}

/// One kernel argument value.
#[derive(Clone, Copy, Debug)]
pub enum ArgValue<'a> {
    Buffer(&'a Buffer),
    /// A region of shared virtual memory, passed as its address.
    Svm(&'a Svm),
    I32(i32),
    F32(f32),
    I64(i64),
    /// An `int8` vector argument.
    Int8([i32; 8]),
    /// `__local` memory of this many bytes.
    Local(usize),
}

impl Kernel {
    /// Sets argument `index`. Takes `&mut self` so that the borrow checker enforces the
    /// one-setter rule.
    pub fn set_arg(&mut self, index: u32, value: ArgValue<'_>) -> Result<(), ClError> {
        fault_point(CallKind::SetArg)?;
        let r = match value {
            // SAFETY (all arms): the pointer and size describe a live value of the
            // argument's declared kernel type; OpenCL copies the bytes before returning.
            ArgValue::Buffer(b) => unsafe {
                kn::set_kernel_arg(
                    self.raw,
                    index,
                    std::mem::size_of::<cl_mem>(),
                    (&b.raw as *const cl_mem).cast::<c_void>(),
                )
            },
            // SAFETY: the address lies in a live fine-grained SVM allocation of this
            // context (the region keeps it alive), as clSetKernelArgSVMPointer requires.
            ArgValue::Svm(region) => unsafe {
                kn::set_kernel_arg_svm_pointer(self.raw, index, region.address().cast_const())
            },
            ArgValue::I32(v) => unsafe {
                kn::set_kernel_arg(self.raw, index, 4, (&v as *const i32).cast::<c_void>())
            },
            ArgValue::F32(v) => unsafe {
                kn::set_kernel_arg(self.raw, index, 4, (&v as *const f32).cast::<c_void>())
            },
            ArgValue::I64(v) => unsafe {
                kn::set_kernel_arg(self.raw, index, 8, (&v as *const i64).cast::<c_void>())
            },
            ArgValue::Int8(v) => unsafe {
                kn::set_kernel_arg(self.raw, index, 32, v.as_ptr().cast::<c_void>())
            },
            // SAFETY: a NULL value with a size asks for local memory, as the spec allows.
            ArgValue::Local(bytes) => unsafe {
                kn::set_kernel_arg(self.raw, index, bytes.max(4), ptr::null())
            },
        };
        check("clSetKernelArg", r)
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: `raw` came from clCreateKernel and is released once.
        let _ = unsafe { kn::release_kernel(self.raw) };
    }
}

/// A device buffer.
#[derive(Debug)]
pub struct Buffer {
    raw: cl_mem,
    bytes: usize,
}

// SAFETY: memory objects are thread-safe handles; data races on their contents are
// prevented by the executor (read-only weights, one workspace per run).
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// The usable size in bytes (what was asked for).
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// A buffer that is the `bytes` bytes of this one from `offset` on: kernels write
    /// through it into this buffer. The offset must be a multiple of the device's base
    /// address alignment (`clCreateSubBuffer` refuses it otherwise).
    pub fn sub_buffer(&self, offset: usize, bytes: usize) -> Result<Buffer, ClError> {
        fault_point(CallKind::Alloc)?;
        let region = mem::cl_buffer_region {
            origin: offset,
            size: bytes.max(1),
        };
        // SAFETY: `raw` is a live buffer (this one); the region is plain data that outlives
        // the call, and the runtime checks it against the parent's size and alignment.
        let raw = unsafe {
            mem::create_sub_buffer(
                self.raw,
                mem::CL_MEM_READ_WRITE,
                mem::CL_BUFFER_CREATE_TYPE_REGION,
                &region as *const mem::cl_buffer_region as *const c_void,
            )
        };
        let raw = check("clCreateSubBuffer", raw)?;
        Ok(Buffer { raw, bytes })
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `raw` came from clCreateBuffer and is released once. Every command that
        // used it was finished by its queue before the owner let go of it.
        let _ = unsafe { mem::release_mem_object(self.raw) };
    }
}

/// One fine-grained SVM allocation, freed when the last region of it is dropped.
#[derive(Debug)]
struct SvmAllocation {
    context: cl_context,
    ptr: *mut c_void,
}

// SAFETY: the allocation is plain memory shared by host and device; who reads and writes it
// when is the executor's protocol (see `Svm`), as for buffers.
unsafe impl Send for SvmAllocation {}
// SAFETY: as above.
unsafe impl Sync for SvmAllocation {}

impl Drop for SvmAllocation {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from clSVMAlloc on `context`, which this allocation retained,
        // and is freed once. Every command that used it was finished by its queue before
        // the owner let go of it. Failures cannot be acted on in Drop.
        let _ = unsafe { mem::svm_free(self.context, self.ptr) };
        // SAFETY: the reference taken in `Context::svm`, released once.
        let _ = unsafe { ctx::release_context(self.context) };
    }
}

/// A region of fine-grained shared virtual memory: a whole allocation or `bytes` bytes of
/// one from `offset` on (see [`Svm::part`]). Host and device reach the same memory, so the
/// host's [`Svm::write`] and [`Svm::read`] replace transfer commands; the executor calls them
/// only while no command of any queue uses the region (a workspace between forwards).
#[derive(Debug)]
pub struct Svm {
    allocation: std::sync::Arc<SvmAllocation>,
    offset: usize,
    bytes: usize,
}

impl Svm {
    /// The region's first byte.
    fn address(&self) -> *mut c_void {
        self.allocation
            .ptr
            .cast::<u8>()
            .wrapping_add(self.offset)
            .cast::<c_void>()
    }

    /// The `bytes` bytes of this region from `offset` on, sharing its allocation (kernels
    /// write through it into this region, as through a sub-buffer).
    pub fn part(&self, offset: usize, bytes: usize) -> Result<Svm, ClError> {
        if !offset
            .checked_add(bytes)
            .is_some_and(|end| end <= self.bytes)
        {
            return Err(ClError::new("a part of an SVM region", -30));
        }
        Ok(Svm {
            allocation: self.allocation.clone(),
            offset: self.offset + offset,
            bytes,
        })
    }

    /// Copies `data` into the start of the region on the host. The caller makes sure no
    /// command is using the region (its workspace's queue is idle).
    pub fn write(&self, data: &[u8]) -> Result<(), ClError> {
        if data.len() > self.bytes {
            return Err(ClError::new("a host copy into SVM", -30));
        }
        // SAFETY: the region holds at least `data.len()` bytes (checked above) of a live
        // allocation, which no Rust reference points into (only raw copies like this one
        // touch it) and which no command uses now (the caller's protocol); the source is a
        // live slice that cannot overlap SVM memory the host does not otherwise hand out.
        unsafe {
            ptr::copy_nonoverlapping(data.as_ptr(), self.address().cast::<u8>(), data.len());
        }
        Ok(())
    }

    /// Copies the start of the region into `out` on the host, as [`Svm::write`] the other
    /// way: the caller makes sure no command is using the region.
    pub fn read(&self, out: &mut [u8]) -> Result<(), ClError> {
        if out.len() > self.bytes {
            return Err(ClError::new("a host copy from SVM", -30));
        }
        // SAFETY: as in `write`, with the destination an exclusively borrowed slice.
        unsafe {
            ptr::copy_nonoverlapping(
                self.address().cast::<u8>().cast_const(),
                out.as_mut_ptr(),
                out.len(),
            );
        }
        Ok(())
    }
}

/// A workspace's memory for one slot: a buffer, reached by transfer commands, or shared
/// virtual memory, which the host reads and writes in place.
#[derive(Debug)]
pub enum Memory {
    Buffer(Buffer),
    Svm(Svm),
}

impl Memory {
    /// The memory as a kernel argument.
    pub fn arg(&self) -> ArgValue<'_> {
        match self {
            Memory::Buffer(b) => ArgValue::Buffer(b),
            Memory::Svm(s) => ArgValue::Svm(s),
        }
    }

    /// The `bytes` bytes from `offset` on, as a sub-buffer or a part of the SVM region.
    pub fn part(&self, offset: usize, bytes: usize) -> Result<Memory, ClError> {
        Ok(match self {
            Memory::Buffer(b) => Memory::Buffer(b.sub_buffer(offset, bytes)?),
            Memory::Svm(s) => Memory::Svm(s.part(offset, bytes)?),
        })
    }
}

/// An in-order command queue.
#[derive(Debug)]
pub struct Queue {
    raw: cl_command_queue,
    /// The context the queue was made in (for a scope's gate, a user event).
    context: cl_context,
    /// Whether a scope holds its commands back until it waits.
    gated: bool,
}

// SAFETY: command queues are thread-safe OpenCL objects; the executor additionally gives
// each queue to one run at a time.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

/// A command's event, released when dropped.
#[derive(Debug)]
pub struct Event(cl_event);

impl Event {
    /// The command's device time, from its profiling timestamps (the queue must have
    /// profiling enabled and the command must have completed).
    pub fn device_time(&self) -> Result<std::time::Duration, ClError> {
        let stamp = |param| {
            opencl3::event::get_event_profiling_info(self.0, param)
                .map(u64::from)
                .map_err(|code| ClError::new("clGetEventProfilingInfo", code))
        };
        let start = stamp(opencl3::event::CL_PROFILING_COMMAND_START)?;
        let end = stamp(opencl3::event::CL_PROFILING_COMMAND_END)?;
        Ok(std::time::Duration::from_nanos(end.saturating_sub(start)))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the event came from an enqueue call and is released once.
            let _ = unsafe { opencl3::event::release_event(self.0) };
        }
    }
}

impl Queue {
    /// Copies `data` into the start of `buffer` and waits until the copy is done, so the
    /// host slice may be freed as soon as this returns.
    pub fn write(&self, buffer: &Buffer, data: &[u8]) -> Result<(), ClError> {
        if data.is_empty() {
            return Ok(());
        }
        if data.len() > buffer.bytes.max(8) {
            return Err(ClError::new("clEnqueueWriteBuffer", -30));
        }
        fault_point(CallKind::Write)?;
        // SAFETY: a blocking write of `data.len()` bytes from a live slice into a buffer at
        // least that large (checked above); the slice outlives the call.
        let r = unsafe {
            cq::enqueue_write_buffer(
                self.raw,
                buffer.raw,
                CL_BLOCKING,
                0,
                data.len(),
                data.as_ptr().cast::<c_void>(),
                0,
                ptr::null(),
            )
        };
        let _event = Event(check("clEnqueueWriteBuffer", r)?);
        Ok(())
    }

    /// Copies the start of `buffer` into `out`, waiting for every earlier command of this
    /// in-order queue and for the copy itself.
    pub fn read(&self, buffer: &Buffer, out: &mut [u8]) -> Result<(), ClError> {
        if out.is_empty() {
            return Ok(());
        }
        if out.len() > buffer.bytes.max(8) {
            return Err(ClError::new("clEnqueueReadBuffer", -30));
        }
        fault_point(CallKind::Read)?;
        // SAFETY: a blocking read into a live, exclusively borrowed slice no larger than the
        // buffer (checked above).
        let r = unsafe {
            cq::enqueue_read_buffer(
                self.raw,
                buffer.raw,
                CL_BLOCKING,
                0,
                out.len(),
                out.as_mut_ptr().cast::<c_void>(),
                0,
                ptr::null(),
            )
        };
        let _event = Event(check("clEnqueueReadBuffer", r)?);
        Ok(())
    }

    /// Enqueues a kernel whose arguments are all set. `global` entries must be multiples of
    /// the matching `local` entries when `local` is given. Returns the command's event
    /// (None when there was nothing to run).
    pub fn launch(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
    ) -> Result<Option<Event>, ClError> {
        self.launch_after(kernel, global, local, None)
    }

    /// [`Queue::launch`], the command first waiting for `wait` when given.
    fn launch_after(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
        wait: Option<&cl_event>,
    ) -> Result<Option<Event>, ClError> {
        if global.is_empty() || global.len() > 3 || local.is_some_and(|l| l.len() != global.len()) {
            return Err(ClError::new("clEnqueueNDRangeKernel", -53));
        }
        if global.contains(&0) {
            return Ok(None);
        }
        fault_point(CallKind::Enqueue)?;
        // SAFETY: the kernel's arguments were all set by its owner, the work sizes point to
        // `global.len()` values that live across the call, and the wait list is empty or
        // one live event.
        let r = unsafe {
            cq::enqueue_nd_range_kernel(
                self.raw,
                kernel.raw,
                global.len() as cl_uint,
                ptr::null(),
                global.as_ptr(),
                local.map_or(ptr::null(), |l| l.as_ptr()),
                wait_count(wait),
                wait_ptr(wait),
            )
        };
        Ok(Some(Event(check("clEnqueueNDRangeKernel", r)?)))
    }

    /// Polls until every command enqueued so far is done or `limit` has passed, yielding
    /// the thread between polls; the caller then waits with [`Queue::finish`], at once when
    /// the commands are done. For gated queues (CPU devices whose driver runs commands on
    /// worker threads): clFinish puts the thread to sleep, and on PoCL's `pthread` device
    /// waking it again was most of a small model's forward. Polling, the thread stays
    /// runnable and gives its core to the workers when they need it.
    /// The bench binaries without and with it, run alternately twice
    /// (`CONCORD_BENCH_ROUNDS=3`, PoCL 3.1's `pthread` device, 2 cores; docs/opencl-speed.md,
    /// stop 34): mlp_64_10 59.3 → 31.3 and 59.7 → 23.1 µs, torch_resnet 318.3 → 212.9 and
    /// 249.9 → 215.8 µs. The poll reads a flag that a completion callback on `last` (the
    /// queue's last command, or a marker enqueued here when the caller has none) sets, not
    /// the event's status: PoCL answers a status query under the lock its workers take to
    /// finish each command, and a host thread asking in a loop kept them waiting on it
    /// (`forward_loop`, 5 alternate runs each, `pthread` on a 2-core Xeon: mlp_64_10 48.1 →
    /// 24.5 µs, torch_gru_lm 85.6 → 76.0 µs, torchvision_vit 184.3 → 171.6 µs). Nothing
    /// here is an error: a marker, callback or poll that fails leaves the wait to clFinish,
    /// which reports the device's failure.
    fn poll_until_done(&self, last: Option<&Event>, limit: std::time::Duration) {
        // The queue is in order, so its last command's completion is the queue's; without
        // one, a marker is the last command.
        let marker;
        let last = match last {
            Some(event) => event,
            None => {
                // SAFETY: a marker on this queue with no wait list; its event is released
                // by Event.
                let Ok(event) =
                    (unsafe { cq::enqueue_marker_with_wait_list(self.raw, 0, ptr::null()) })
                        .map(Event)
                else {
                    return;
                };
                marker = event;
                &marker
            }
        };
        if cq::flush(self.raw).is_err() {
            return;
        }
        // The command's completion sets a flag (the callback runs in the driver's thread that
        // completes it); the loop reads the flag, not the event, whose status a query reads
        // under the driver's lock that its worker threads take to finish each command.
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let data = std::sync::Arc::into_raw(done.clone()) as *mut c_void;
        if opencl3::event::set_event_callback(last.0, CL_COMPLETE, command_done, data).is_err() {
            // SAFETY: the callback was not registered, so this is the only owner of `data`,
            // made by Arc::into_raw above.
            drop(unsafe { std::sync::Arc::from_raw(data as *const std::sync::atomic::AtomicBool) });
            return;
        }
        let start = std::time::Instant::now();
        loop {
            for _ in 0..16 {
                if done.load(std::sync::atomic::Ordering::Acquire) {
                    return;
                }
                std::thread::yield_now();
            }
            if start.elapsed() >= limit {
                return;
            }
        }
    }

    /// Waits for every command enqueued so far.
    pub fn finish(&self) -> Result<(), ClError> {
        fault_point(CallKind::Finish)?;
        check("clFinish", cq::finish(self.raw))
    }

    /// Runs `f` with a [`Scope`] whose transfers do not wait: they borrow host memory for
    /// `'host`, which outlives this call, and this call waits for the queue before it
    /// returns (also when `f` fails or panics), so no command outlives the memory it reads
    /// or writes. A forward enqueues its uploads, kernels and downloads in one scope and
    /// waits once, at its end, instead of once per transfer.
    ///
    /// On a gated queue (CPU devices) the scope's commands are held back until it waits
    /// (its first command waits for a user event, the gate): the device then runs them back
    /// to back instead of starting each as it is enqueued. On PoCL's CPU device, whose
    /// worker threads sleep and wake between commands while the host is still enqueueing,
    /// this took a third or more off the forwards of models with many small kernels
    /// (torchvision_vit 0.70 -> 0.44 ms, torch_bert_encoder 0.29 -> 0.19 ms, torch_gru_lm
    /// 0.18 -> 0.11 ms, in interleaved runs) and changed nothing measurable for conv nets.
    /// The gate is the first command's wait list and the wait watches the last command's
    /// event, not a barrier and a marker of their own: two commands fewer a forward
    /// (`forward_loop`, 9 alternate runs, `pthread` on a 2-core AMD EPYC: mlp_64_10 27.3 ->
    /// 25.6 µs, torchvision_vit 157.8 -> 148.8, torch_gru_lm 39.7 -> 38.3,
    /// torch_bert_encoder 118.5 -> 114.6). Ungated (GPUs, or a driver that refuses user
    /// events) the commands simply start as they come.
    pub fn scope<'host, R>(&self, f: impl FnOnce(&Scope<'_, 'host>) -> R) -> R {
        /// Opens the gate, then waits for the queue, when dropped, so both also happen
        /// while unwinding.
        struct Drain<'q>(&'q Queue, &'q Gate);
        impl Drop for Drain<'_> {
            fn drop(&mut self) {
                self.1.open();
                // Not a fault point: this wait is what keeps the borrowed host memory alive
                // for the commands, so it always reaches the driver. A failure here means
                // the device is lost; nothing it ran can still be running.
                let _ = cq::finish(self.0.raw);
            }
        }
        let gate = Gate::close(self);
        let _drain = Drain(self, &gate);
        f(&Scope {
            queue: self,
            gate: &gate,
            last: std::cell::RefCell::new(None),
            _host: std::marker::PhantomData,
        })
    }
}

/// The length of an enqueue's wait list of at most one event.
fn wait_count(wait: Option<&cl_event>) -> cl_uint {
    cl_uint::from(wait.is_some())
}

/// The pointer of an enqueue's wait list of at most one event (null for none).
fn wait_ptr(wait: Option<&cl_event>) -> *const cl_event {
    wait.map_or(ptr::null(), |e| e as *const cl_event)
}

/// Called by the driver once when the command a poll watches completes (or fails): sets the flag
/// `poll_until_done` handed it, and releases the callback's reference to it.
extern "C" fn command_done(_event: cl_event, _status: cl_int, data: *mut c_void) {
    // SAFETY: `data` is the Arc::into_raw of poll_until_done, handed to this callback only,
    // which the driver calls once.
    let done = unsafe { std::sync::Arc::from_raw(data as *const std::sync::atomic::AtomicBool) };
    done.store(true, std::sync::atomic::Ordering::Release);
}

/// How long a forward's wait on a gated queue polls before it sleeps in clFinish (see
/// [`Queue::poll_until_done`]): longer than a small model's whole forward on a CPU device,
/// short beside a large one's.
const POLL_LIMIT: std::time::Duration = std::time::Duration::from_millis(1);

/// A user event that a scope's first command waits for, so that nothing of the scope runs
/// until it is opened (the queue is in order: every later command waits for the first).
/// Opening sets it complete; a gate that could not be made holds nothing back.
#[derive(Debug)]
struct Gate {
    event: std::cell::Cell<cl_event>,
    /// Whether a command of the scope waits for the event already.
    held: std::cell::Cell<bool>,
}

impl Gate {
    /// A closed gate on `queue`, or an open one when the queue is not gated or the driver
    /// refuses a user event (the scope then runs ungated, as correct and only slower).
    fn close(queue: &Queue) -> Gate {
        let event = if queue.gated {
            opencl3::event::create_user_event(queue.context).unwrap_or(ptr::null_mut())
        } else {
            ptr::null_mut()
        };
        Gate {
            event: std::cell::Cell::new(event),
            held: std::cell::Cell::new(false),
        }
    }

    /// The event the next command must wait for: the closed gate's, until a command
    /// waits for it.
    fn wait_list(&self) -> Option<cl_event> {
        let event = self.event.get();
        (!event.is_null() && !self.held.get()).then_some(event)
    }

    /// Lets the held-back commands run (once; later calls do nothing).
    fn open(&self) {
        let event = self.event.replace(ptr::null_mut());
        if event.is_null() {
            return;
        }
        // A failure to set the status leaves the first command waiting; there is nothing
        // better to do than release our reference (a driver that refuses this is broken).
        let _ = opencl3::event::set_user_event_status(event, CL_COMPLETE);
        // SAFETY: the user event came from clCreateUserEvent and is released once (the cell
        // was emptied above).
        let _ = unsafe { opencl3::event::release_event(event) };
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open();
    }
}

/// Commands on one queue that borrow host memory for `'host` and do not wait for it (see
/// [`Queue::scope`]).
#[derive(Debug)]
pub struct Scope<'q, 'host> {
    queue: &'q Queue,
    gate: &'q Gate,
    /// The last command's event, on a gated queue: the poll at the scope's wait watches it
    /// instead of enqueueing a marker (one command fewer).
    last: std::cell::RefCell<Option<Event>>,
    /// Invariant in `'host`, so a scope cannot be made to accept memory that lives shorter
    /// than the wait at the scope's end.
    _host: std::marker::PhantomData<&'host mut &'host ()>,
}

impl<'host> Scope<'_, 'host> {
    /// Enqueues a copy of `data` into the start of `buffer`, without waiting for it.
    pub fn write(&self, buffer: &Buffer, data: &'host [u8]) -> Result<Option<Event>, ClError> {
        if data.is_empty() {
            return Ok(None);
        }
        if data.len() > buffer.bytes.max(8) {
            return Err(ClError::new("clEnqueueWriteBuffer", -30));
        }
        fault_point(CallKind::Write)?;
        let wait = self.gate.wait_list();
        // SAFETY: a non-blocking write of `data.len()` bytes into a buffer at least that
        // large (checked above); `data` is borrowed for 'host, which outlives the scope,
        // and the scope waits for the queue before it ends. The wait list is empty or the
        // gate's live event.
        let r = unsafe {
            cq::enqueue_write_buffer(
                self.queue.raw,
                buffer.raw,
                CL_NON_BLOCKING,
                0,
                data.len(),
                data.as_ptr().cast::<c_void>(),
                wait_count(wait.as_ref()),
                wait_ptr(wait.as_ref()),
            )
        };
        Ok(self.enqueued(Event(check("clEnqueueWriteBuffer", r)?), wait.is_some()))
    }

    /// Enqueues a copy of the start of `buffer` into `out`, without waiting for it: `out`
    /// holds the bytes once the scope has ended.
    pub fn read(&self, buffer: &Buffer, out: &'host mut [u8]) -> Result<Option<Event>, ClError> {
        if out.is_empty() {
            return Ok(None);
        }
        if out.len() > buffer.bytes.max(8) {
            return Err(ClError::new("clEnqueueReadBuffer", -30));
        }
        fault_point(CallKind::Read)?;
        let wait = self.gate.wait_list();
        // SAFETY: a non-blocking read into a slice no larger than the buffer (checked
        // above), exclusively borrowed for 'host, which outlives the scope; the scope waits
        // for the queue before it ends, so nothing reads the slice while the copy runs. The
        // wait list is empty or the gate's live event.
        let r = unsafe {
            cq::enqueue_read_buffer(
                self.queue.raw,
                buffer.raw,
                CL_NON_BLOCKING,
                0,
                out.len(),
                out.as_mut_ptr().cast::<c_void>(),
                wait_count(wait.as_ref()),
                wait_ptr(wait.as_ref()),
            )
        };
        Ok(self.enqueued(Event(check("clEnqueueReadBuffer", r)?), wait.is_some()))
    }

    /// Enqueues a kernel, as [`Queue::launch`].
    pub fn launch(
        &self,
        kernel: &Kernel,
        global: &[usize],
        local: Option<&[usize]>,
    ) -> Result<Option<Event>, ClError> {
        let wait = self.gate.wait_list();
        match self
            .queue
            .launch_after(kernel, global, local, wait.as_ref())?
        {
            Some(event) => Ok(self.enqueued(event, wait.is_some())),
            None => Ok(None),
        }
    }

    /// Notes a command just enqueued: whether it waits for the gate, and (gated) its event
    /// as the scope's last.
    fn enqueued(&self, event: Event, waits_for_gate: bool) -> Option<Event> {
        if waits_for_gate {
            self.gate.held.set(true);
        }
        if self.queue.gated {
            // SAFETY: a live event from an enqueue; the retained reference is released by
            // the Event made of it.
            if unsafe { opencl3::event::retain_event(event.0) }.is_ok() {
                *self.last.borrow_mut() = Some(Event(event.0));
            }
        }
        Some(event)
    }

    /// Lets the scope's commands run and waits for every command enqueued so far (a fault
    /// point, unlike the scope's own wait at its end). On a gated queue the wait first polls
    /// (see `Queue::poll_until_done`).
    pub fn finish(&self) -> Result<(), ClError> {
        self.gate.open();
        if self.queue.gated {
            self.queue
                .poll_until_done(self.last.borrow().as_ref(), POLL_LIMIT);
        }
        self.queue.finish()
    }
}

/// Element types whose slices are copied to and from device buffers as raw bytes: plain
/// numbers without padding, for which every bit pattern is a valid value.
pub trait HostElement: Copy + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for i64 {}
    impl Sealed for u8 {}
}

impl HostElement for f32 {}
impl HostElement for half::f16 {}
impl HostElement for i64 {}
impl HostElement for u8 {}

/// The bytes of a slice of plain numbers, as a transfer reads them.
pub fn as_bytes<T: HostElement>(values: &[T]) -> &[u8] {
    // SAFETY: HostElement is sealed to f32, f16 (a transparent u16), i64 and u8: no padding,
    // so every byte of the slice is initialised; u8 needs no alignment; the length is the
    // slice's size in bytes and the borrow is the slice's.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

/// The bytes of a slice of plain numbers, for a transfer to write.
pub fn as_bytes_mut<T: HostElement>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`, and every bit pattern is a valid f32, f16, i64 or u8, so any
    // bytes written through the view leave valid values; the borrow is exclusive.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(values),
        )
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // Wait for anything still queued so no command outlives the buffers it uses; a
        // failure here cannot be reported from Drop.
        let _ = cq::finish(self.raw);
        // SAFETY: `raw` came from clCreateCommandQueue and is released once.
        let _ = unsafe { cq::release_command_queue(self.raw) };
    }
}
