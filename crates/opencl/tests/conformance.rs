//! The conformance suite on the OpenCL executor, through the backend-author API: every
//! case is a libtest-mimic trial named `opencl/<target>/<category>/<case>`. Without an
//! OpenCL runtime the suite reports every trial as a visible skip (and fails instead when
//! `CONCORD_REQUIRE` names opencl or `CI` is set, as the suite decides). Its expectations
//! are the file the suite ships for it (conformance/expectations/opencl.toml).

fn main() {
    concord_conformance::Conformance::new(concord_opencl::OpenClExecutor::new)
        .concord_expectations()
        .run()
}
