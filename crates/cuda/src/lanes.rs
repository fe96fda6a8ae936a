//! The lane pool: each run borrows a lane (a stream, a cuBLAS handle bound to it, staging
//! memory) and gives it back; how the run ended decides what happens to the lane.
//!
//! - A run that succeeded synchronised its stream: the lane goes back to the pool.
//! - A run that failed on its request — a missing or mistyped input, an operand the
//!   reference would refuse too, a kernel's status word (a Gather index out of range) — did
//!   nothing wrong to the device: its stream is synchronised (so nothing of it is left
//!   queued) and the lane goes back. Destroying it would cost a `cublasDestroy`, which
//!   synchronises the whole device: a stream of bad requests would serialise a service.
//! - A run whose driver or cuBLAS call failed leaves the lane in an unknown state: it is
//!   destroyed, with its context current, and the next run makes a new one.
//! - A sticky error (recognised by its name, [`crate::error::is_sticky`]) means the context
//!   is lost for the process: the lane is destroyed, and every later run fails at once
//!   with [`CudaError::ContextLost`] naming the error, instead of failing somewhere inside.
//!
//! The pool is generic over [`LaneDriver`], the few driver calls it makes itself (make a
//! lane, synchronise it, read its deferred faults, destroy it), so the tests below drive it
//! with a fake that fails a launch, a synchronisation, a cuBLAS call or a free on demand,
//! without a GPU; [`crate::device::CudaLanes`] is the real one.

use crate::error::{classify, CudaError};
use concord_core::Error;
use std::sync::Mutex;

/// The driver calls the pool makes.
pub trait LaneDriver: Send + Sync {
    type Lane: Send;
    /// Makes a lane: a stream and a cuBLAS handle bound to it.
    fn create(&self) -> Result<Self::Lane, CudaError>;
    /// Waits for everything queued on the lane.
    fn synchronize(&self, lane: &Self::Lane) -> Result<(), CudaError>;
    /// The error of the lane's deferred work since the last call (a free that failed when
    /// the run's buffers dropped), which belongs to the run that held the lane.
    fn take_faults(&self, lane: &Self::Lane) -> Option<CudaError>;
    /// Destroys the lane with its context current.
    fn destroy(&self, lane: Self::Lane);
}

/// Why a run failed, as the pool needs to know it.
#[derive(Debug)]
pub enum RunError {
    /// The request was wrong (inputs, operands, a kernel's status word); the device is
    /// fine.
    Request(Error),
    /// A device call failed.
    Device(Box<DeviceFailure>),
}

/// A failed device call: the error the caller sees, and the driver's, NVRTC's or cuBLAS's
/// error behind it.
#[derive(Debug)]
pub struct DeviceFailure {
    pub error: Error,
    pub cause: CudaError,
}

/// What happens to a lane after a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Disposition {
    /// Back to the pool (after synchronising its stream, when the run failed).
    Keep,
    /// Destroyed; the next run makes a new lane.
    Discard,
    /// Destroyed, and the device takes no more runs: the context holds a sticky error.
    ContextLost(CudaError),
}

/// Lanes of one context, idle ones kept for the next run.
#[derive(Debug)]
pub struct LanePool<D: LaneDriver> {
    driver: D,
    idle: Mutex<Vec<D::Lane>>,
    /// The sticky error that lost the context, once a run has seen one.
    lost: Mutex<Option<CudaError>>,
}

impl RunError {
    /// A device error of a run, as the caller sees it (`what` says where in the run).
    pub fn device(cause: CudaError, what: &str) -> RunError {
        let cause = classify(cause);
        RunError::Device(Box::new(DeviceFailure {
            error: cause.in_partition(what),
            cause,
        }))
    }

    /// The error the caller sees.
    pub fn into_error(self) -> Error {
        match self {
            RunError::Request(e) => e,
            RunError::Device(failure) => failure.error,
        }
    }
}

/// What a device error does to the lane that saw it. Only driver, sticky and cuBLAS errors
/// touch the lane; a kernel that did not compile, a size that does not fit, a poisoned
/// lock are not the device's state.
pub fn disposition(cause: &CudaError) -> Disposition {
    match classify(cause.clone()) {
        e @ (CudaError::Sticky { .. } | CudaError::ContextLost { .. }) => {
            Disposition::ContextLost(e)
        }
        CudaError::Driver { .. } | CudaError::Blas { .. } => Disposition::Discard,
        CudaError::Nvrtc { .. }
        | CudaError::Compile { .. }
        | CudaError::Runtime(_)
        | CudaError::Unavailable(_)
        | CudaError::Poisoned => Disposition::Keep,
    }
}

impl<D: LaneDriver> LanePool<D> {
    pub fn new(driver: D) -> Self {
        LanePool {
            driver,
            idle: Mutex::new(Vec::new()),
            lost: Mutex::new(None),
        }
    }

    #[cfg(test)]
    fn driver(&self) -> &D {
        &self.driver
    }

    /// How many lanes wait in the pool.
    #[cfg(test)]
    fn idle(&self) -> usize {
        self.idle.lock().map(|l| l.len()).unwrap_or(0)
    }

    /// The sticky error that lost the context, if a run has seen one.
    pub fn lost(&self) -> Option<CudaError> {
        self.lost.lock().ok().and_then(|l| l.clone())
    }

    /// Runs `body` on a lane of its own and decides the lane's fate from how it ended.
    /// The body synchronises its stream before it returns Ok; its buffers are dropped by
    /// the time it returns, so their deferred faults are its own.
    pub fn run<T>(
        &self,
        what: &str,
        body: impl FnOnce(&D::Lane) -> Result<T, RunError>,
    ) -> Result<T, RunError> {
        if let Some(CudaError::Sticky { call, name } | CudaError::ContextLost { call, name }) =
            self.lost()
        {
            return Err(RunError::device(
                CudaError::ContextLost { call, name },
                what,
            ));
        }
        let lane = self.take().map_err(|e| {
            self.note(&disposition(&e));
            RunError::device(e, what)
        })?;
        let mut outcome = body(&lane);
        if let Some(fault) = self.driver.take_faults(&lane) {
            // A free of this run's memory failed: the run's error, even if it got its
            // outputs (a failed free means the context is in trouble).
            outcome = Err(match outcome {
                Err(device @ RunError::Device(_)) => device,
                _ => RunError::device(fault, "releasing the run's memory"),
            });
        }
        let fate = match &outcome {
            Ok(_) => Disposition::Keep,
            Err(RunError::Request(_)) => Disposition::Keep,
            Err(RunError::Device(failure)) => disposition(&failure.cause),
        };
        let fate = if fate == Disposition::Keep && outcome.is_err() {
            // Nothing of a failed run may stay queued for the next run on this lane.
            match self.driver.synchronize(&lane) {
                Ok(()) => Disposition::Keep,
                Err(e) => {
                    let e = classify(e);
                    let fate = disposition(&e);
                    let original = match outcome {
                        Err(RunError::Request(error)) => Some(error),
                        Err(RunError::Device(failure)) => Some(failure.error),
                        Ok(_) => None,
                    };
                    outcome = Err(match original {
                        Some(original) => RunError::device(
                            e,
                            &format!(
                                "synchronising after a failed run (which failed with: {original})"
                            ),
                        ),
                        None => RunError::device(e, what),
                    });
                    if fate == Disposition::Keep {
                        Disposition::Discard
                    } else {
                        fate
                    }
                }
            }
        } else {
            fate
        };
        self.note(&fate);
        match fate {
            Disposition::Keep => self.give_back(lane),
            Disposition::Discard | Disposition::ContextLost(_) => self.driver.destroy(lane),
        }
        outcome
    }

    /// An idle lane, or a new one.
    fn take(&self) -> Result<D::Lane, CudaError> {
        let idle = self.idle.lock().map_err(|_| CudaError::Poisoned)?.pop();
        match idle {
            Some(lane) => Ok(lane),
            None => self.driver.create(),
        }
    }

    fn give_back(&self, lane: D::Lane) {
        match self.idle.lock() {
            Ok(mut idle) => idle.push(lane),
            Err(_) => self.driver.destroy(lane),
        }
    }

    /// Remembers the first sticky error.
    fn note(&self, fate: &Disposition) {
        if let Disposition::ContextLost(e) = fate {
            if let Ok(mut lost) = self.lost.lock() {
                lost.get_or_insert_with(|| e.clone());
            }
        }
    }
}

impl<D: LaneDriver> Drop for LanePool<D> {
    fn drop(&mut self) {
        let idle = match self.idle.get_mut() {
            Ok(idle) => std::mem::take(idle),
            Err(poisoned) => std::mem::take(poisoned.into_inner()),
        };
        for lane in idle {
            self.driver.destroy(lane);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::cublas::result::CublasError;
    use cudarc::cublas::sys::cublasStatus_t;
    use cudarc::driver::sys::cudaError_enum as Cu;
    use cudarc::driver::DriverError;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    /// A driver whose lanes are numbers, and whose calls fail when a run arms them.
    #[derive(Debug, Default)]
    struct FakeDriver {
        created: AtomicUsize,
        destroyed: Mutex<Vec<usize>>,
        synchronized: Mutex<Vec<usize>>,
    }

    #[derive(Debug)]
    struct FakeLane {
        id: usize,
        /// The next synchronize of this lane fails with this error.
        sync_fails: Mutex<Option<Cu>>,
        /// A free of this lane's memory failed.
        fault: Mutex<Option<Cu>>,
    }

    impl LaneDriver for FakeDriver {
        type Lane = FakeLane;

        fn create(&self) -> Result<FakeLane, CudaError> {
            Ok(FakeLane {
                id: self.created.fetch_add(1, Ordering::SeqCst),
                sync_fails: Mutex::new(None),
                fault: Mutex::new(None),
            })
        }

        fn synchronize(&self, lane: &FakeLane) -> Result<(), CudaError> {
            self.synchronized.lock().expect("lock").push(lane.id);
            match lane.sync_fails.lock().expect("lock").take() {
                Some(code) => Err(CudaError::driver("cuStreamSynchronize", DriverError(code))),
                None => Ok(()),
            }
        }

        fn take_faults(&self, lane: &FakeLane) -> Option<CudaError> {
            lane.fault
                .lock()
                .expect("lock")
                .take()
                .map(|code| CudaError::driver("cuMemFreeAsync", DriverError(code)))
        }

        fn destroy(&self, lane: FakeLane) {
            self.destroyed.lock().expect("lock").push(lane.id);
        }
    }

    /// How a simulated run goes wrong, at the step where a real run would.
    #[derive(Clone, Copy, Debug)]
    enum Fault {
        None,
        /// An input the partition needs is missing (found while walking, after a launch).
        MissingInput,
        /// cuLaunchKernel fails (too many resources asked for).
        Launch(Cu),
        /// The Gemm's cuBLAS call fails.
        Blas,
        /// The run's own final synchronize fails.
        Sync(Cu),
        /// A Gather index was out of range: the status word says so after a good sync.
        StatusWord,
        /// A free of the run's memory failed after its outputs were read.
        Free(Cu),
        /// The request fails, and the synchronize that settles the lane fails too.
        MissingInputThenSync(Cu),
    }

    /// A run as `CudaPartition::run_on` makes it: launches, maybe a Gemm, the final
    /// synchronize, the status word; each step fails where `fault` says. Returns the lane
    /// it ran on.
    fn run(pool: &LanePool<FakeDriver>, fault: Fault) -> Result<usize, RunError> {
        run_together(pool, fault, None)
    }

    /// `run`, waiting at `together` (when given) once it holds its lane, so that every run
    /// of a test holds a lane of its own while the others fail or succeed.
    fn run_together(
        pool: &LanePool<FakeDriver>,
        fault: Fault,
        together: Option<&Barrier>,
    ) -> Result<usize, RunError> {
        pool.run("running", |lane| {
            if let Some(barrier) = together {
                barrier.wait();
            }
            let device = |e| RunError::device(e, "running");
            if let Fault::Launch(code) = fault {
                return Err(device(CudaError::driver(
                    "cuLaunchKernel",
                    DriverError(code),
                )));
            }
            if let Fault::Blas = fault {
                return Err(device(CudaError::blas(
                    "cublasGemmStridedBatchedEx",
                    CublasError(cublasStatus_t::CUBLAS_STATUS_EXECUTION_FAILED),
                )));
            }
            if let Fault::MissingInput | Fault::MissingInputThenSync(_) = fault {
                if let Fault::MissingInputThenSync(code) = fault {
                    *lane.sync_fails.lock().expect("lock") = Some(code);
                }
                return Err(RunError::Request(Error::InvalidInput {
                    name: "x".into(),
                    detail: "the partition input was not given".into(),
                }));
            }
            if let Fault::Sync(code) = fault {
                *lane.sync_fails.lock().expect("lock") = Some(code);
            }
            pool.driver().synchronize(lane).map_err(device)?;
            if let Fault::StatusWord = fault {
                return Err(RunError::Request(
                    CudaError::Runtime("a Gather index is out of range for its axis".into())
                        .in_partition("running"),
                ));
            }
            if let Fault::Free(code) = fault {
                *lane.fault.lock().expect("lock") = Some(code);
            }
            Ok(lane.id)
        })
    }

    fn pool() -> LanePool<FakeDriver> {
        LanePool::new(FakeDriver::default())
    }

    fn destroyed(pool: &LanePool<FakeDriver>) -> Vec<usize> {
        pool.driver().destroyed.lock().expect("lock").clone()
    }

    fn created(pool: &LanePool<FakeDriver>) -> usize {
        pool.driver().created.load(Ordering::SeqCst)
    }

    fn message(r: Result<usize, RunError>) -> String {
        r.expect_err("expected the run to fail")
            .into_error()
            .to_string()
    }

    #[test]
    fn request_errors_keep_the_lane_after_synchronizing_it() {
        let pool = pool();
        assert_eq!(run(&pool, Fault::None).expect("runs"), 0);
        for fault in [Fault::MissingInput, Fault::StatusWord] {
            let m = message(run(&pool, fault));
            assert!(m.contains("not given") || m.contains("out of range"), "{m}");
            // The same lane serves the next run: nothing was destroyed, nothing made.
            assert_eq!(run(&pool, Fault::None).expect("runs"), 0);
        }
        assert_eq!(created(&pool), 1);
        assert!(destroyed(&pool).is_empty());
        // Every failed run's lane was synchronised by the pool before going back: three
        // good runs and the status-word run synchronised in the body (4), and the pool once
        // for each of the two failures (2).
        let syncs = pool.driver().synchronized.lock().expect("lock").clone();
        assert_eq!(syncs, vec![0; 6]);
    }

    #[test]
    fn launch_and_cublas_failures_discard_only_that_lane() {
        let pool = pool();
        let m = message(run(
            &pool,
            Fault::Launch(Cu::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
        ));
        assert!(
            m.contains("cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
            "{m}"
        );
        assert_eq!(destroyed(&pool), vec![0]);
        let m = message(run(&pool, Fault::Blas));
        assert!(
            m.contains("cuBLAS cublasGemmStridedBatchedEx failed"),
            "{m}"
        );
        assert_eq!(destroyed(&pool), vec![0, 1]);
        // Neither lost the context: the next run gets a fresh lane and succeeds.
        assert_eq!(run(&pool, Fault::None).expect("runs"), 2);
        assert_eq!(pool.lost(), None);
        assert_eq!(pool.idle(), 1);
    }

    #[test]
    fn a_sticky_error_loses_the_context_and_later_runs_fail_at_once() {
        for code in [
            Cu::CUDA_ERROR_ILLEGAL_ADDRESS,
            Cu::CUDA_ERROR_LAUNCH_TIMEOUT,
            Cu::CUDA_ERROR_ASSERT,
        ] {
            let pool = pool();
            assert_eq!(run(&pool, Fault::None).expect("runs"), 0);
            let m = message(run(&pool, Fault::Sync(code)));
            let name = format!("{code:?}");
            assert!(m.contains("sticky error state"), "{m}");
            assert!(m.contains(&name), "{m}");
            assert_eq!(destroyed(&pool), vec![0]);
            // Later runs do not take or make a lane: they say the context was lost, and by
            // what.
            let later = message(run(&pool, Fault::None));
            assert!(later.contains("lost earlier"), "{later}");
            assert!(later.contains(&name), "{later}");
            assert_eq!(created(&pool), 1);
        }
    }

    #[test]
    fn a_non_sticky_sync_failure_discards_the_lane_but_keeps_the_context() {
        let pool = pool();
        let m = message(run(&pool, Fault::Sync(Cu::CUDA_ERROR_NOT_PERMITTED)));
        assert!(
            m.contains("cuStreamSynchronize failed: CUDA_ERROR_NOT_PERMITTED"),
            "{m}"
        );
        assert!(
            !m.contains("sticky"),
            "only sticky names are called sticky: {m}"
        );
        assert_eq!(destroyed(&pool), vec![0]);
        assert_eq!(run(&pool, Fault::None).expect("runs"), 1);
    }

    #[test]
    fn a_request_error_whose_lane_will_not_synchronize_reports_both_and_drops_it() {
        let pool = pool();
        let m = message(run(
            &pool,
            Fault::MissingInputThenSync(Cu::CUDA_ERROR_ILLEGAL_ADDRESS),
        ));
        assert!(m.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{m}");
        assert!(
            m.contains("not given"),
            "the request's own error is kept: {m}"
        );
        assert_eq!(destroyed(&pool), vec![0]);
        assert!(pool.lost().is_some(), "the sticky error lost the context");
    }

    #[test]
    fn a_failed_free_belongs_to_the_run_that_made_it() {
        let pool = pool();
        let m = message(run(&pool, Fault::Free(Cu::CUDA_ERROR_INVALID_VALUE)));
        assert!(
            m.contains("cuMemFreeAsync failed: CUDA_ERROR_INVALID_VALUE"),
            "{m}"
        );
        assert!(m.contains("releasing the run's memory"), "{m}");
        assert_eq!(destroyed(&pool), vec![0]);
        // The next run does not inherit it.
        assert_eq!(run(&pool, Fault::None).expect("runs"), 1);
    }

    #[test]
    fn concurrent_runs_on_other_lanes_are_unaffected() {
        let pool = Arc::new(pool());
        let faults = [
            Fault::None,
            Fault::MissingInput,
            Fault::Launch(Cu::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
            Fault::None,
            Fault::Blas,
            Fault::StatusWord,
            Fault::Free(Cu::CUDA_ERROR_INVALID_VALUE),
            Fault::None,
        ];
        // Every run holds a lane of its own while the others fail or succeed.
        let barrier = Arc::new(Barrier::new(faults.len()));
        let handles: Vec<_> = faults
            .iter()
            .map(|&fault| {
                let (pool, barrier) = (pool.clone(), barrier.clone());
                std::thread::spawn(move || (fault, run_together(&pool, fault, Some(&barrier))))
            })
            .collect();
        let mut lanes_of_good_runs = Vec::new();
        let (mut kept_failures, mut discarded) = (0, 0);
        for h in handles {
            let (fault, result) = h.join().expect("no thread panics");
            match fault {
                Fault::None => lanes_of_good_runs.push(result.expect("unaffected")),
                Fault::MissingInput | Fault::StatusWord => {
                    assert!(matches!(result, Err(RunError::Request(_))), "{fault:?}");
                    kept_failures += 1;
                }
                _ => {
                    assert!(matches!(result, Err(RunError::Device(_))), "{fault:?}");
                    discarded += 1;
                }
            }
        }
        assert_eq!((kept_failures, discarded), (2, 3));
        assert_eq!(created(&pool), faults.len(), "one lane per concurrent run");
        assert_eq!(destroyed(&pool).len(), 3, "one lane per device failure");
        for lane in &lanes_of_good_runs {
            assert!(
                !destroyed(&pool).contains(lane),
                "a good run's lane {lane} was dropped"
            );
        }
        // The five kept lanes serve the next five runs without a new one being made.
        assert_eq!(pool.idle(), 5);
        for _ in 0..5 {
            run(&pool, Fault::None).expect("runs");
        }
        assert_eq!(created(&pool), faults.len());
        assert_eq!(pool.lost(), None);
    }

    #[test]
    fn only_driver_sticky_and_cublas_errors_touch_the_lane() {
        let driver = |code| CudaError::driver("cuMemAllocAsync", DriverError(code));
        assert_eq!(
            disposition(&driver(Cu::CUDA_ERROR_OUT_OF_MEMORY)),
            Disposition::Discard
        );
        assert!(matches!(
            disposition(&driver(Cu::CUDA_ERROR_MISALIGNED_ADDRESS)),
            Disposition::ContextLost(CudaError::Sticky { .. })
        ));
        assert_eq!(
            disposition(&CudaError::Runtime("too large".into())),
            Disposition::Keep
        );
        assert_eq!(
            disposition(&CudaError::Compile {
                family: "pool",
                code: "a cubin for sm_90".into(),
                name: "NVRTC_ERROR_COMPILATION".into(),
                log: String::new(),
            }),
            Disposition::Keep
        );
    }
}
