//! The conformance suite for the CUDA executor, run exactly as a backend author runs it.
//! Without a driver or a GPU every trial reports the executor unavailable with the probe's
//! reason (a visible skip; CI says why in conformance/expectations/cuda.toml, the file the
//! suite ships for it); a GPU runner sets CONCORD_REQUIRE=cuda so that unavailability fails
//! instead.

fn main() {
    concord_conformance::Conformance::new(concord_cuda::CudaExecutor::new)
        .concord_expectations()
        .run()
}
