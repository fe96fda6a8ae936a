//! The conformance suite on the reference executor, through the same entry point a backend
//! author uses.

fn main() {
    concord_conformance::main(concord_cpu::CpuExecutor::new)
}
