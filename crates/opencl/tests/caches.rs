//! Program caches belong to an executor instance: nets built from one shared registry
//! reuse its programs (PoCL compiles slowly, so this is what keeps building many nets
//! cheap), while a second executor instance starts with none, because nothing is global.

mod common;

use common::{opencl_here, OpenClHere};
use concord::{ExecutorRegistry, FallbackPolicy, Graph, NetBuilder, Overrides};
use concord_opencl::OpenClExecutor;
use std::sync::Arc;

fn build(graph: Graph, registry: ExecutorRegistry) {
    let net = NetBuilder::from_graph(graph)
        .registry(registry)
        .backend(concord::backends::OPENCL)
        .fallback(FallbackPolicy::Allow)
        .overrides(Overrides::default())
        .build()
        .expect("builds");
    net.forward([("input", common::image(32, 9))])
        .expect("forward");
}

#[test]
fn programs_are_shared_through_the_registry_and_owned_by_the_instance() {
    let here = opencl_here("programs_are_shared_through_the_registry_and_owned_by_the_instance");
    let executor = Arc::new(OpenClExecutor::new());
    let registry = ExecutorRegistry::with_builtins().with(executor.clone());
    build(common::resnet18_like(32, 8, 10), registry.clone());
    let after_first = executor.programs_built();
    // A different model with the same op families and dtypes needs no new program.
    build(common::resnet18_like(32, 12, 4), registry.clone());
    let after_second = executor.programs_built();
    let fresh = Arc::new(OpenClExecutor::new());
    let before_use = fresh.programs_built();
    build(
        common::resnet18_like(32, 8, 10),
        ExecutorRegistry::with_builtins().with(fresh.clone()),
    );
    match here {
        OpenClHere::Available => {
            assert!(after_first > 0, "the first net built no program");
            assert_eq!(
                after_second, after_first,
                "the second net rebuilt programs the shared executor already had"
            );
            assert_eq!(
                before_use, 0,
                "a new executor must start with an empty cache"
            );
            assert_eq!(
                fresh.programs_built(),
                after_first,
                "a second instance builds its own programs"
            );
        }
        OpenClHere::Unavailable { .. } => {
            assert_eq!(after_first, 0);
            assert_eq!(fresh.programs_built(), 0);
        }
    }
}
