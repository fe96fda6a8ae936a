//! The driver calls a run makes — binding the context, streams, device memory, copies and
//! kernel launches — made through cudarc's thin `result` layer rather than its safe
//! wrappers.
//!
//! Why: every safe wrapper starts with `CudaContext::bind_to_thread`, which takes and
//! clears one context-wide slot where cudarc's `Drop`s record their errors; a late error of
//! run A (a failed free) would then surface as the error of run B's next call. Raw calls
//! return each error to the call that made it, and device memory freed by a run reports a
//! failed free to that run's lane ([`Faults`]), so an error belongs to the run that caused
//! it. The context itself is still cudarc's `CudaContext` (it retains and releases the
//! primary context); modules are loaded through it at prepare time.
//!
//! Invariants the callers keep (each `unsafe` block below relies on them):
//! - Every handle here belongs to the one context of one [`crate::Device`], which outlives
//!   it (each holds the `Arc<CudaContext>`), and is destroyed with that context current.
//! - A [`DeviceBuffer`] is used only on the stream it was allocated on, and that stream
//!   outlives it: a run's buffers die before its lane, and weights (allocated on the
//!   device's upload stream) die before the device.
//! - A region of a lane's [`Staging`] memory is written by the host only between the
//!   lane's being taken and its first copy from that region; it is not handed out again
//!   before the lane's stream is synchronised (`Staging::reset` at the start of a run,
//!   when the pool guarantees the stream is idle).

use crate::error::CudaError;
use cudarc::driver::result as drv;
use cudarc::driver::sys as drv_sys;
use cudarc::driver::{CudaContext, CudaFunction, DeviceRepr, LaunchConfig};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// How device memory is allocated and freed on this device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// Stream-ordered (`cuMemAllocAsync`/`cuMemFreeAsync`) from the device's default
    /// memory pool, whose release threshold is raised so freed blocks are reused across
    /// runs instead of going back to the driver at every synchronisation.
    Pool,
    /// `cuMemAlloc`/`cuMemFree`, on devices without memory pools; a free waits for the
    /// buffer's stream first.
    Plain,
}

/// A stream created for one lane (or for the device's uploads), destroyed with its
/// context current.
#[derive(Debug)]
pub struct Stream {
    raw: drv_sys::CUstream,
    ctx: Arc<CudaContext>,
}

/// Device memory owned by one value: freed, in stream order, on the stream it was
/// allocated on.
#[derive(Debug)]
pub struct DeviceBuffer {
    ptr: drv_sys::CUdeviceptr,
    bytes: usize,
    stream: drv_sys::CUstream,
    allocation: Allocation,
    ctx: Arc<CudaContext>,
    /// Where a failed free is reported: the lane of the run that allocated the buffer.
    /// None for weights, which are freed when their partition drops and no run is left to
    /// tell.
    faults: Option<Arc<Faults>>,
}

/// Errors of a lane's deferred work (a free that failed when a buffer dropped), kept for
/// the run that holds the lane: it takes them before it returns.
#[derive(Debug, Default)]
pub struct Faults(Mutex<Option<CudaError>>);

/// A kernel's parameters: addresses of values that live at least as long as `'a`, pushed
/// in the kernel's parameter order.
#[derive(Debug)]
pub struct KernelArgs<'a> {
    params: Vec<*mut c_void>,
    lifetime: PhantomData<&'a ()>,
}

/// Page-locked host memory that mid-run uploads are copied from, so that
/// `cuMemcpyHtoDAsync` is a DMA the host does not wait for (from pageable memory the
/// driver first copies through its own staging buffer, synchronously). Grows to the
/// largest run's uploads, up to [`STAGING_LIMIT`]; past that, uploads go from pageable
/// memory.
pub struct Staging<A: PinnedAlloc = CudaPinned> {
    alloc: A,
    blocks: Vec<A::Block>,
    /// Bytes handed out from the last block since the last reset.
    used: usize,
    /// What the blocks held before the last reset merged them, to size the next block.
    hint: usize,
}

/// Where [`Staging`] gets its page-locked blocks (the driver, or a test's heap).
pub trait PinnedAlloc {
    type Block: AsMut<[u8]> + AsRef<[u8]>;
    /// A block of `bytes` bytes, or None when the memory cannot be pinned (the upload then
    /// goes from pageable memory).
    fn alloc(&self, bytes: usize) -> Option<Self::Block>;
}

/// The driver's page-locked memory (`cuMemHostAlloc`).
#[derive(Debug)]
pub struct CudaPinned {
    ctx: Arc<CudaContext>,
}

/// One block of page-locked host memory from `cuMemHostAlloc`.
#[derive(Debug)]
pub struct PinnedBlock {
    ptr: *mut u8,
    len: usize,
    ctx: Arc<CudaContext>,
}

/// The most page-locked memory one lane keeps for uploads: pinning takes physical memory
/// from the host, so a run with huge inputs copies the rest from pageable memory.
pub const STAGING_LIMIT: usize = 256 << 20;

/// The first block a lane pins: enough for a batch of small images without regrowing.
const STAGING_FIRST_BLOCK: usize = 1 << 20;

// SAFETY: a CUstream is a handle the driver lets any thread use; `Stream` only synchronises,
// queries and destroys it, and is destroyed once (by its owner's Drop).
unsafe impl Send for Stream {}
// SAFETY: as above; the driver serialises what is queued on one stream.
unsafe impl Sync for Stream {}
// SAFETY: device memory is addressed by an integer; the buffer is freed once, in Drop.
unsafe impl Send for DeviceBuffer {}
// SAFETY: shared references only read the address; kernels do the rest, in stream order.
unsafe impl Sync for DeviceBuffer {}
// SAFETY: the block is host memory owned by this value alone, freed once in Drop.
unsafe impl Send for PinnedBlock {}
// SAFETY: shared references give only shared slices of it.
unsafe impl Sync for PinnedBlock {}

/// Makes `ctx` current on this thread (cheap when it already is), without touching
/// cudarc's error slot.
pub fn bind(ctx: &CudaContext) -> Result<(), CudaError> {
    let current = drv::ctx::get_current().map_err(|e| CudaError::driver("cuCtxGetCurrent", e))?;
    if current != Some(ctx.cu_ctx()) {
        // SAFETY: the context is alive (the caller holds it) and was made by cudarc.
        unsafe { drv::ctx::set_current(ctx.cu_ctx()) }
            .map_err(|e| CudaError::driver("cuCtxSetCurrent", e))?;
    }
    Ok(())
}

/// How `ctx`'s device allocates memory, with the default pool's release threshold raised
/// where pools exist (freed memory then stays in the pool for the next run; without it the
/// pool returns memory to the driver at every synchronisation and each run allocates
/// afresh).
pub fn configure_allocation(ctx: &CudaContext) -> Result<Allocation, CudaError> {
    let device = ctx.cu_device();
    // SAFETY: the device handle comes from the live context.
    let pools = unsafe {
        drv::device::get_attribute(
            device,
            drv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
        )
    }
    .map_err(|e| CudaError::driver("cuDeviceGetAttribute", e))?;
    if pools <= 0 {
        return Ok(Allocation::Plain);
    }
    // SAFETY: as above; the pool handle comes from the driver.
    let pool = unsafe { drv::device::get_default_mem_pool(device) }
        .map_err(|e| CudaError::driver("cuDeviceGetDefaultMemPool", e))?;
    let mut threshold: u64 = u64::MAX;
    // SAFETY: the release threshold is a cuuint64_t, and `threshold` is one.
    let raised = unsafe {
        drv::mem_pool::set_attribute(
            pool,
            drv_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast::<c_void>(),
        )
    };
    // The threshold only decides whether freed memory is kept for reuse: where the driver
    // refuses to raise it (a virtualised GPU may), the pool still allocates correctly, so
    // the device stays usable and runs pay for fresh allocations.
    let _ = raised;
    Ok(Allocation::Pool)
}

impl Stream {
    /// A new non-blocking stream in `ctx` (which must be current).
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Stream, CudaError> {
        bind(ctx)?;
        let raw = drv::stream::create(drv::stream::StreamKind::NonBlocking)
            .map_err(|e| CudaError::driver("cuStreamCreate", e))?;
        Ok(Stream {
            raw,
            ctx: ctx.clone(),
        })
    }

    pub fn raw(&self) -> drv_sys::CUstream {
        self.raw
    }

    /// Waits for everything queued on the stream; a kernel fault shows here by name.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: the stream is alive (self).
        unsafe { drv::stream::synchronize(self.raw) }
            .map_err(|e| CudaError::driver("cuStreamSynchronize", e))
    }

    /// Allocates `bytes` (at least one) of device memory used on this stream.
    pub fn alloc(
        &self,
        bytes: usize,
        allocation: Allocation,
        faults: Option<&Arc<Faults>>,
    ) -> Result<DeviceBuffer, CudaError> {
        let bytes = bytes.max(1);
        let ptr = match allocation {
            // SAFETY: the stream is alive; the memory is only used on it (module docs).
            Allocation::Pool => unsafe { drv::malloc_async(self.raw, bytes) }
                .map_err(|e| CudaError::driver("cuMemAllocAsync", e))?,
            // SAFETY: a plain allocation in the current context.
            Allocation::Plain => unsafe { drv::malloc_sync(bytes) }
                .map_err(|e| CudaError::driver("cuMemAlloc", e))?,
        };
        Ok(DeviceBuffer {
            ptr,
            bytes,
            stream: self.raw,
            allocation,
            ctx: self.ctx.clone(),
            faults: faults.cloned(),
        })
    }

    /// Queues zeroing every byte of `buf`.
    pub fn zero(&self, buf: &DeviceBuffer) -> Result<(), CudaError> {
        // SAFETY: `buf` is live and `len()` bytes long, used on this stream.
        unsafe { drv::memset_d8_async(buf.ptr(), 0, buf.len(), self.raw) }
            .map_err(|e| CudaError::driver("cuMemsetD8Async", e))
    }

    /// Queues a copy of `src` to device address `dst`. From pageable memory the driver
    /// has copied `src` away before this returns; from page-locked memory the caller keeps
    /// `src` untouched until the stream is synchronised (the [`Staging`] rule).
    pub fn copy_to_device(&self, dst: u64, src: &[u8]) -> Result<(), CudaError> {
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: `dst` is the start of a live buffer of at least `src.len()` bytes (the
        // callers size it from the same storage layout), used on this stream.
        unsafe { drv::memcpy_htod_async(dst, src, self.raw) }
            .map_err(|e| CudaError::driver("cuMemcpyHtoDAsync", e))
    }

    /// Copies `dst.len()` bytes from device address `src` and waits for them.
    pub fn copy_to_host(&self, dst: &mut [u8], src: u64) -> Result<(), CudaError> {
        if !dst.is_empty() {
            // SAFETY: `src` is a live buffer of at least `dst.len()` bytes on this stream,
            // and `dst` is not read before the synchronisation below.
            unsafe { drv::memcpy_dtoh_async(dst, src, self.raw) }
                .map_err(|e| CudaError::driver("cuMemcpyDtoHAsync", e))?;
        }
        self.synchronize()
    }

    /// Launches `function` on this stream.
    ///
    /// # Safety
    /// The parameters match the kernel's signature in kernels/*.cu, every device address
    /// among them belongs to a live buffer used on this stream, and the sizes passed keep
    /// every access inside those buffers.
    pub unsafe fn launch(
        &self,
        function: &CudaFunction,
        cfg: LaunchConfig,
        args: &mut KernelArgs<'_>,
    ) -> Result<(), CudaError> {
        drv::launch_kernel(
            function.cu_function(),
            cfg.grid_dim,
            cfg.block_dim,
            cfg.shared_mem_bytes,
            self.raw,
            &mut args.params,
        )
        .map_err(|e| CudaError::driver("cuLaunchKernel", e))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Destroying a stream needs its context current; an error here has nobody to go to
        // (the lane is being discarded, or the device closed), and the stream is gone
        // either way.
        if bind(&self.ctx).is_ok() {
            // SAFETY: the stream was created by `Stream::new` and is destroyed only here.
            let _ = unsafe { drv::stream::destroy(self.raw) };
        }
    }
}

impl DeviceBuffer {
    /// The device address of byte 0.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let freed = bind(&self.ctx).and_then(|()| match self.allocation {
            // SAFETY: the buffer was allocated on `stream`, which is still alive (module
            // docs), and is freed only here.
            Allocation::Pool => unsafe { drv::free_async(self.ptr, self.stream) }
                .map_err(|e| CudaError::driver("cuMemFreeAsync", e)),
            Allocation::Plain => {
                // SAFETY: as above; the stream's work on the buffer ends before the free.
                unsafe { drv::stream::synchronize(self.stream) }
                    .and_then(|()| unsafe { drv::free_sync(self.ptr) })
                    .map_err(|e| CudaError::driver("cuMemFree", e))
            }
        });
        if let (Err(e), Some(faults)) = (freed, &self.faults) {
            faults.record(e);
        }
    }
}

impl Faults {
    /// Keeps the first error; later ones are consequences of it.
    pub fn record(&self, e: CudaError) {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(e);
        }
    }

    /// The error recorded since the last take, if any.
    pub fn take(&self) -> Option<CudaError> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

impl<'a> KernelArgs<'a> {
    pub fn new() -> Self {
        KernelArgs {
            params: Vec::new(),
            lifetime: PhantomData,
        }
    }

    /// Pushes the next parameter: the kernel reads it through this address at launch.
    pub fn arg<T: DeviceRepr>(&mut self, value: &'a T) -> &mut Self {
        self.params
            .push((value as *const T).cast_mut().cast::<c_void>());
        self
    }
}

impl Default for KernelArgs<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: PinnedAlloc> Staging<A> {
    pub fn new(alloc: A) -> Self {
        Staging {
            alloc,
            blocks: Vec::new(),
            used: 0,
            hint: 0,
        }
    }

    /// Forgets every region handed out: call only when no copy from them is pending (the
    /// lane's stream is idle). Blocks grown during the last run are merged into one of
    /// their combined size at the next reservation, so a steady workload settles on one
    /// block.
    pub fn reset(&mut self) {
        if self.blocks.len() > 1 {
            self.hint = self.blocks.iter().map(|b| b.as_ref().len()).sum();
            self.blocks.clear();
        }
        self.used = 0;
    }

    /// `len` bytes of page-locked memory no pending copy reads, or None when the lane's
    /// limit (or the host) refuses more: the caller copies from pageable memory instead.
    pub fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        let fits = self
            .blocks
            .last()
            .is_some_and(|b| b.as_ref().len() - self.used >= len);
        if !fits {
            let held: usize = self.blocks.iter().map(|b| b.as_ref().len()).sum();
            let want = len
                .max(self.hint)
                .max(held)
                .max(STAGING_FIRST_BLOCK)
                .checked_next_power_of_two()?;
            if held.checked_add(want)? > STAGING_LIMIT {
                return None;
            }
            let block = self.alloc.alloc(want)?;
            self.blocks.push(block);
            self.hint = 0;
            self.used = 0;
        }
        let start = self.used;
        self.used += len;
        self.blocks
            .last_mut()
            .map(|b| &mut b.as_mut()[start..start + len])
    }

    /// Page-locked bytes this staging area holds.
    pub fn held(&self) -> usize {
        self.blocks.iter().map(|b| b.as_ref().len()).sum()
    }
}

impl CudaPinned {
    pub fn new(ctx: &Arc<CudaContext>) -> Self {
        CudaPinned { ctx: ctx.clone() }
    }
}

impl PinnedAlloc for CudaPinned {
    type Block = PinnedBlock;

    fn alloc(&self, bytes: usize) -> Option<PinnedBlock> {
        bind(&self.ctx).ok()?;
        // SAFETY: a fresh host allocation of `bytes` bytes; flags 0 asks for plain
        // page-locked memory of this context.
        let ptr = unsafe { drv::malloc_host(bytes, 0) }.ok()?;
        Some(PinnedBlock {
            ptr: ptr.cast::<u8>(),
            len: bytes,
            ctx: self.ctx.clone(),
        })
    }
}

impl AsRef<[u8]> for PinnedBlock {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` bytes of host memory owned by this block.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl AsMut<[u8]> for PinnedBlock {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBlock {
    fn drop(&mut self) {
        // No copy reads the block any more (Staging's rule: blocks are dropped at reset or
        // with their lane, whose stream is idle by then).
        if bind(&self.ctx).is_ok() {
            // SAFETY: the pointer came from cuMemHostAlloc and is freed only here.
            let _ = unsafe { drv::free_host(self.ptr.cast::<c_void>()) };
        }
    }
}

impl<A: PinnedAlloc> std::fmt::Debug for Staging<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staging")
            .field("blocks", &self.blocks.len())
            .field("held", &self.held())
            .field("used", &self.used)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Heap blocks, counting the allocations.
    #[derive(Default)]
    struct Heap {
        allocations: std::cell::Cell<usize>,
        refuse: bool,
    }

    impl PinnedAlloc for Heap {
        type Block = Vec<u8>;
        fn alloc(&self, bytes: usize) -> Option<Vec<u8>> {
            if self.refuse {
                return None;
            }
            self.allocations.set(self.allocations.get() + 1);
            Some(vec![0; bytes])
        }
    }

    /// The address range a reservation covers.
    fn range(s: &[u8]) -> (usize, usize) {
        let start = s.as_ptr() as usize;
        (start, start + s.len())
    }

    #[test]
    fn regions_of_one_run_never_overlap_even_across_growth() {
        let mut staging = Staging::new(Heap::default());
        let mut taken = Vec::new();
        // 3 x 700 KiB: the second does not fit what is left of the first 1 MiB block, so a
        // second block (1 MiB) is pinned, and for the third a 2 MiB one (each new block at
        // least doubles what is held); nothing handed out is handed out again.
        for fill in 1..=3u8 {
            let s = staging.reserve(700 << 10).expect("room");
            s.fill(fill);
            taken.push(range(s));
        }
        for (i, a) in taken.iter().enumerate() {
            for b in &taken[i + 1..] {
                assert!(a.1 <= b.0 || b.1 <= a.0, "{a:?} overlaps {b:?}");
            }
        }
        assert_eq!(staging.alloc.allocations.get(), 3);
        assert_eq!(staging.held(), 4 << 20);
        // After the run the blocks merge: the next run pins one block of the 4 MiB held,
        // and all three uploads fit in it.
        staging.reset();
        for _ in 0..3 {
            staging.reserve(700 << 10).expect("room");
        }
        assert_eq!(staging.alloc.allocations.get(), 4, "one merged block");
        assert_eq!(staging.held(), 4 << 20);
    }

    #[test]
    fn reset_reuses_the_same_memory_for_the_next_run() {
        let mut staging = Staging::new(Heap::default());
        let first = range(staging.reserve(1000).expect("room"));
        staging.reset();
        let again = range(staging.reserve(1000).expect("room"));
        assert_eq!(first, again, "the idle lane's block is reused");
        assert_eq!(staging.alloc.allocations.get(), 1);
    }

    #[test]
    fn past_the_limit_or_when_pinning_fails_the_upload_goes_pageable() {
        let mut staging = Staging::new(Heap::default());
        assert!(staging.reserve(STAGING_LIMIT + 1).is_none());
        assert!(staging.reserve(STAGING_LIMIT / 2).is_some());
        // Half the limit is held; another half-limit block would pass it.
        assert!(staging.reserve(STAGING_LIMIT / 2 + 1).is_none());
        let mut refusing = Staging::new(Heap {
            refuse: true,
            ..Heap::default()
        });
        assert!(refusing.reserve(16).is_none());
        // A zero-byte reservation is an empty region, not a panic.
        assert_eq!(staging.reserve(0).map(|s| s.len()), Some(0));
    }
}
