//! The conformance suite for the CUDA executor, run exactly as a backend author runs it.
//! Without a driver or a GPU every trial reports the executor unavailable with the probe's
//! reason (a visible skip; CI says why in conformance/expectations/cuda.toml); a GPU runner
//! sets CONCORD_REQUIRE=cuda so that unavailability fails instead.

fn main() {
    concord_conformance::main(concord_cuda::CudaExecutor::new)
}
