//! The conformance suite on the reference executor, through the same entry point a backend
//! author uses. Its expectations are the file the suite ships for it
//! (conformance/expectations/cpu.toml), which `concord conform` reads too.

fn main() {
    concord_conformance::Conformance::new(concord_cpu::CpuExecutor::new)
        .concord_expectations()
        .run()
}
