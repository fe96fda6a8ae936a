//! The whole conformance suite on tract: every trial is named `tract/tract/<category>/<case>`.
//! The expected failures, each a real disagreement between tract and Concord's reference
//! with the reason it is tract's (or the reference's) doing, are in conformance/tract.toml.

fn main() {
    concord_conformance::main(concord_adapter_tract::TractExecutor::new)
}
