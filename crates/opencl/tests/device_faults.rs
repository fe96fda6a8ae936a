//! Device faults on the OpenCL executor, made with `cl::faults` (the `fault-injection`
//! feature): the Nth OpenCL call of one kind on the test's thread fails with a chosen CL
//! error. A fault while a net is built is a typed error (never a silent fallback, under any
//! policy); a fault in the middle of a forward is a typed error naming the call, the CL
//! error and, where one node was running, the node and its op; the same net's next forward
//! returns the reference's result bit-for-bit; and nets forwarding on other threads
//! meanwhile return their own results unchanged.
//!
//! Without an OpenCL runtime the tests assert the fallback instead: the net runs on the
//! reference, makes no OpenCL call (no fault can fire) and returns the reference's result.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

mod common;

use common::{opencl_here, OpenClHere};
use concord::executor::{Error as CoreError, Executor};
use concord::op::{Binary, Pool, Unary};
use concord::{
    DType, Dim, Error, ExecutorRegistry, FallbackPolicy, Graph, Net, NetBuilder, Node, Op,
    Overrides, Tensor, ValueInfo,
};
use concord_opencl::cl::faults;
use concord_opencl::cl::CallKind;
use concord_opencl::{OpenClExecutor, OpenClOptions, SlotMemory};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

// CL error codes from the OpenCL headers; the names in the errors come from cl3's table.
const CL_BUILD_PROGRAM_FAILURE: i32 = -11;
const CL_MEM_OBJECT_ALLOCATION_FAILURE: i32 = -4;
const CL_OUT_OF_RESOURCES: i32 = -5;
const CL_OUT_OF_HOST_MEMORY: i32 = -6;

/// The tests of this binary take turns: they make OpenCL executors of their own, and PoCL
/// 3.1 aborts when two executors launch kernels at the same time (see `Runtime::first_runs`).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The error a fault of `kind` injects, and its CL name.
fn injected(kind: CallKind) -> (i32, &'static str) {
    match kind {
        CallKind::Compile => (CL_BUILD_PROGRAM_FAILURE, "CL_BUILD_PROGRAM_FAILURE"),
        CallKind::Alloc => (
            CL_MEM_OBJECT_ALLOCATION_FAILURE,
            "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        ),
        CallKind::Queue => (CL_OUT_OF_HOST_MEMORY, "CL_OUT_OF_HOST_MEMORY"),
        _ => (CL_OUT_OF_RESOURCES, "CL_OUT_OF_RESOURCES"),
    }
}

/// Which call of `kind` fails: a later one where a net makes several, so that the fault
/// lands in the middle (after some buffers, kernels or launches were made).
fn nth(kind: CallKind) -> usize {
    match kind {
        CallKind::Compile | CallKind::Alloc => 2,
        CallKind::Kernel | CallKind::Enqueue => 3,
        CallKind::SetArg => 4,
        CallKind::Queue | CallKind::Write | CallKind::Finish | CallKind::Read => 1,
    }
}

/// A model whose every op is exact in f32 (products and sums of quarter-integers, Relu,
/// MaxPool, Transpose), so the OpenCL executor must match the reference bit-for-bit:
/// input [batch, 4, 6, 6] → Mul(scale) → Add(bias) → Relu → MaxPool 2×2 → Transpose.
fn exact_model(batch: Dim) -> Graph {
    let mut graph = Graph {
        name: "exact".into(),
        inputs: vec![ValueInfo::new(
            "input",
            DType::F32,
            vec![batch, Dim::Fixed(4), Dim::Fixed(6), Dim::Fixed(6)],
        )],
        outputs: vec!["output".into()],
        opset: 17,
        ..Graph::default()
    };
    let per_channel = |values: [f32; 4]| Tensor::from_f32([1, 4, 1, 1], values.to_vec());
    graph.initializers.insert(
        "scale".into(),
        per_channel([0.5, 1.5, -2.0, 0.25]).expect("4 values"),
    );
    graph.initializers.insert(
        "bias".into(),
        per_channel([0.25, -0.5, 1.0, 0.0]).expect("4 values"),
    );
    let pool = Pool {
        kernel_shape: vec![2, 2],
        strides: vec![2, 2],
        pads: vec![0; 4],
        ..Pool::default()
    };
    graph.nodes = vec![
        Node::new(
            "scale_it",
            Op::Binary(Binary::Mul),
            &["input", "scale"],
            &["scaled"],
        ),
        Node::new(
            "shift_it",
            Op::Binary(Binary::Add),
            &["scaled", "bias"],
            &["shifted"],
        ),
        Node::new(
            "rectify",
            Op::Unary(Unary::Relu),
            &["shifted"],
            &["rectified"],
        ),
        Node::new("pool", Op::MaxPool(pool), &["rectified"], &["pooled"]),
        Node::new(
            "channels_last",
            Op::Transpose {
                perm: Some(vec![0, 2, 3, 1]),
            },
            &["pooled"],
            &["output"],
        ),
    ];
    graph
}

/// Quarter-integers in [-2.75, 2.75].
fn exact_input(batch: usize) -> Tensor {
    let n = batch * 4 * 6 * 6;
    let data = (0..n).map(|i| (i % 23) as f32 * 0.25 - 2.75).collect();
    Tensor::from_f32([batch, 4, 6, 6], data).expect("dims match data")
}

/// A registry whose OpenCL executor is new: nothing compiled, nothing cached.
fn fresh_registry() -> ExecutorRegistry {
    ExecutorRegistry::with_builtins().with(Arc::new(OpenClExecutor::new()))
}

/// A new OpenCL executor keeping its workspaces' slots in `memory`.
fn executor_with(memory: SlotMemory) -> Arc<OpenClExecutor> {
    Arc::new(OpenClExecutor::with_options(OpenClOptions {
        memory,
        ..OpenClOptions::default()
    }))
}

/// Whether an executor's workspaces keep their slots in shared memory (then a forward
/// copies its inputs and outputs on the host, with no write or read command).
fn shares_slots(executor: &OpenClExecutor) -> bool {
    executor
        .runtime()
        .map(|runtime| runtime.shared_slots)
        .unwrap_or_else(|u| panic!("OpenCL is here but its runtime did not open: {u:?}"))
}

fn builder(graph: Graph, registry: ExecutorRegistry, policy: FallbackPolicy) -> NetBuilder {
    NetBuilder::from_graph(graph)
        .registry(registry)
        .backend(concord::backends::OPENCL)
        .fallback(policy)
        .overrides(Overrides::default())
}

/// Builds on OpenCL and checks that every node is placed there.
fn build_on_opencl(graph: Graph, registry: ExecutorRegistry) -> Net {
    let net = builder(graph, registry, FallbackPolicy::Deny)
        .build()
        .expect("the net builds on OpenCL");
    let placement = net.placement();
    assert!(
        placement.nodes.iter().all(|n| n.executor == "opencl"),
        "every node should run on OpenCL:\n{placement}"
    );
    net
}

fn run(net: &Net, input: &Tensor) -> Result<Tensor, Error> {
    Ok(net
        .forward([("input", input.clone())])?
        .get("output")
        .cloned()
        .expect("the net has an output"))
}

/// The reference executor's output for `graph` and `input`.
fn reference(graph: Graph, input: &Tensor) -> Tensor {
    let net = NetBuilder::from_graph(graph)
        .backend(concord::backends::CPU)
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .build()
        .expect("the reference builds");
    run(&net, input).expect("the reference runs")
}

/// The f32 values' bits, so that equality is bit-for-bit (signed zeros and NaNs included).
fn bits(t: &Tensor) -> (Vec<usize>, Vec<u32>) {
    let values = t.as_f32().expect("an f32 output");
    (
        t.dims().to_vec(),
        values.iter().map(|v| v.to_bits()).collect(),
    )
}

fn assert_bit_identical(actual: &Tensor, expected: &Tensor, what: &str) {
    assert!(
        bits(actual) == bits(expected),
        "{what}: the output differs from the expected one\nactual:   {actual:?}\nexpected: {expected:?}"
    );
}

/// Checks that `error` is a fault of `kind`: it names the OpenCL call and the injected CL
/// error; where the call belongs to one node (a compile, a kernel object, its arguments, a
/// launch) it names that node of `graph` and its op.
fn assert_names_fault(error: &Error, kind: CallKind, graph: &Graph) {
    let message = error.to_string();
    let (_, cl_name) = injected(kind);
    // A workspace in shared memory allocates its slots with clSVMAlloc.
    let named = message.contains(kind.call())
        || (kind == CallKind::Alloc && message.contains("clSVMAlloc"));
    assert!(
        named && message.contains(cl_name),
        "a {kind:?} fault should name {} and {cl_name}: {message}",
        kind.call()
    );
    assert!(
        message.lines().count() <= 2,
        "the error should be a line (and an injected compile's one-line log): {message}"
    );
    let at_node = matches!(
        kind,
        CallKind::Compile | CallKind::Kernel | CallKind::SetArg | CallKind::Enqueue
    );
    if !at_node {
        return;
    }
    let core = match error {
        Error::Graph(core) => core,
        Error::Prepare { source, .. } => source.as_ref(),
        other => panic!("a {kind:?} fault should be a device or node error, not {other:?}"),
    };
    let (node, detail) = match core {
        CoreError::Device {
            executor,
            node: Some(node),
            detail,
        } => {
            assert_eq!(executor, "opencl");
            (node.clone(), detail.clone())
        }
        CoreError::Node { node, op, source } => (node.clone(), format!("{op}: {source}")),
        other => panic!("a {kind:?} fault should name its node: {other:?}"),
    };
    let op = graph
        .nodes
        .iter()
        .find(|n| n.name == node)
        .map(|n| n.op.name())
        .unwrap_or_else(|| panic!("the error names `{node}`, which is no node of the graph"));
    assert!(
        detail.contains(op),
        "the error should name node `{node}`'s op {op}: {message}"
    );
}

/// Without OpenCL the net falls back to the reference (said in its placement) and makes no
/// OpenCL call, so no fault can fire; the result is the reference's.
fn check_unavailable(test: &str) {
    let graph = exact_model(Dim::Fixed(2));
    let input = exact_input(2);
    for kind in CallKind::ALL {
        let counter = faults::count(kind);
        let net = builder(graph.clone(), fresh_registry(), FallbackPolicy::Allow)
            .build()
            .expect("the net falls back and builds");
        assert!(net.placement().nodes.iter().all(|n| n.executor == "cpu"));
        let output = run(&net, &input).expect("the fallback runs");
        assert_eq!(counter.seen(), 0, "{test}: no {kind:?} call without OpenCL");
        assert_bit_identical(&output, &reference(graph.clone(), &input), test);
    }
}

#[test]
fn a_fault_while_building_is_a_typed_error_and_the_next_build_works() {
    let _turn = one_at_a_time();
    let here = opencl_here("a_fault_while_building_is_a_typed_error_and_the_next_build_works");
    if let OpenClHere::Unavailable { .. } = here {
        check_unavailable("build faults");
        return;
    }
    let graph = exact_model(Dim::Fixed(2));
    let input = exact_input(2);
    let expected = reference(graph.clone(), &input);
    // Every call a fixed-shape net makes while it is built: the weights' buffers, queues,
    // writes and finishes, the kernel families' compiles, and the first workspace.
    let build_kinds = [
        CallKind::Compile,
        CallKind::Alloc,
        CallKind::Queue,
        CallKind::Kernel,
        CallKind::SetArg,
        CallKind::Write,
        CallKind::Finish,
    ];
    for kind in build_kinds {
        for policy in [FallbackPolicy::Deny, FallbackPolicy::Warn] {
            // A fresh executor, so that its programs are compiled here (a compile fault
            // needs a compile) and a failed build has nothing cached to hide behind.
            let registry = fresh_registry();
            let (code, _) = injected(kind);
            let fault = faults::inject(kind, nth(kind), code);
            let built = builder(graph.clone(), registry.clone(), policy).build();
            assert!(
                fault.fired(),
                "{kind:?}: the build made no call number {}",
                nth(kind)
            );
            drop(fault);
            let error = match built {
                Ok(net) => panic!(
                    "{kind:?} under {policy:?}: a device fault while building must be an \
                     error, not a net placed so:\n{}",
                    net.placement()
                ),
                Err(error) => error,
            };
            assert!(
                matches!(&error, Error::Prepare { executor, .. } if executor == "opencl"),
                "{kind:?}: expected the OpenCL partition's prepare error, got {error:?}"
            );
            assert_names_fault(&error, kind, &graph);

            // The same executor builds the net once the fault is gone: no failed program,
            // buffer or lock was left behind.
            let net = build_on_opencl(graph.clone(), registry);
            let output = run(&net, &input).expect("the rebuilt net runs");
            assert_bit_identical(&output, &expected, &format!("{kind:?}: after the fault"));
        }
    }
}

#[test]
fn a_fault_in_a_forward_is_a_typed_error_and_the_next_forward_is_right() {
    let _turn = one_at_a_time();
    let here = opencl_here("a_fault_in_a_forward_is_a_typed_error_and_the_next_forward_is_right");
    if let OpenClHere::Unavailable { .. } = here {
        check_unavailable("forward faults");
        return;
    }
    // A symbolic batch, so the plan for a batch size is made by the first forward of that
    // size: that forward compiles, allocates the workspace, makes its queue and kernel
    // objects, uploads, launches, finishes and downloads, and a fault of every kind lands
    // in the middle of a forward.
    let graph = exact_model(Dim::Named("batch".into()));
    let input = exact_input(2);
    let expected = reference(graph.clone(), &input);
    // Device buffers, whose forwards write inputs and read outputs with commands, and the
    // device's own choice, shared memory on a CPU device with fine-grained SVM (PoCL),
    // whose forwards make no transfer command at all.
    for memory in [SlotMemory::Buffers, SlotMemory::Auto] {
        let executor = executor_with(memory);
        let shared_slots = shares_slots(&executor);
        let registry = ExecutorRegistry::with_builtins().with(executor);
        for kind in CallKind::ALL {
            let transfer = matches!(kind, CallKind::Write | CallKind::Read);
            let registry = if kind == CallKind::Compile {
                ExecutorRegistry::with_builtins().with(executor_with(memory))
            } else {
                registry.clone()
            };
            let net = build_on_opencl(graph.clone(), registry);
            let what = format!("{kind:?}, {memory:?} (shared: {shared_slots})");
            if shared_slots && transfer {
                // The first forward of a batch size uploads its plan's constants (the
                // buffers round fails those); after it, a forward transfers nothing.
                let output = run(&net, &input).expect("a clean forward");
                assert_bit_identical(&output, &expected, &format!("{what}, cold"));
                let calls = faults::count(kind);
                let output = run(&net, &input).expect("a clean forward");
                assert_eq!(calls.seen(), 0, "{what}: the warm forward's calls");
                drop(calls);
                assert_bit_identical(&output, &expected, &format!("{what}, warm"));
                continue;
            }
            let (code, _) = injected(kind);
            let fault = faults::inject(kind, nth(kind), code);
            let failed = run(&net, &input);
            assert!(
                fault.fired(),
                "{what}: the forward made no call number {}",
                nth(kind)
            );
            drop(fault);
            let error = failed.expect_err("a forward whose OpenCL call failed must fail");
            assert_names_fault(&error, kind, &graph);

            let output = run(&net, &input).expect("the next forward runs");
            assert_bit_identical(&output, &expected, &format!("{what}: the forward after"));

            // Uploads, launches and downloads happen in every forward, also once the plan
            // is warm and its workspace pooled: fail one there too, then run clean again.
            if transfer || kind == CallKind::Enqueue {
                let fault = faults::inject(kind, nth(kind), code);
                let failed = run(&net, &input);
                assert!(fault.fired(), "{what}: the warm forward made no such call");
                drop(fault);
                assert_names_fault(
                    &failed.expect_err("a warm forward whose OpenCL call failed must fail"),
                    kind,
                    &graph,
                );
                let output = run(&net, &input).expect("the forward after a warm fault runs");
                assert_bit_identical(&output, &expected, &format!("{what}: after a warm fault"));
            }
        }
    }
}

#[test]
fn the_probe_says_where_the_chosen_device_keeps_its_tensors() {
    let _turn = one_at_a_time();
    if let OpenClHere::Unavailable { .. } = opencl_here("the_probe_says_where") {
        // No device, so no memory to report: the probe says OpenCL is unavailable.
        assert!(matches!(
            executor_with(SlotMemory::Auto).probe(),
            concord::Availability::Unavailable { .. }
        ));
        return;
    }
    for memory in [SlotMemory::Buffers, SlotMemory::Auto] {
        let executor = executor_with(memory);
        let concord::Availability::Available { devices } = executor.probe() else {
            panic!("{memory:?}: OpenCL is here but the probe says otherwise");
        };
        let said: Vec<&String> = devices
            .iter()
            .filter_map(|d| d.details.get("memory"))
            .collect();
        assert_eq!(
            said.len(),
            1,
            "{memory:?}: one device, the chosen one: {said:?}"
        );
        assert_eq!(
            said[0].starts_with("shared"),
            shares_slots(&executor),
            "{memory:?}: {}",
            said[0]
        );
        if memory == SlotMemory::Buffers {
            assert!(said[0].starts_with("device buffers"), "{}", said[0]);
        }
    }
}

#[test]
fn faults_on_one_thread_leave_nets_on_other_threads_alone() {
    let _turn = one_at_a_time();
    let here = opencl_here("faults_on_one_thread_leave_nets_on_other_threads_alone");
    if let OpenClHere::Unavailable { .. } = here {
        check_unavailable("concurrent faults");
        return;
    }
    // Every net shares the one executor (its device, program cache and turn-taking lock),
    // as nets built from one registry do; its slots are device buffers, so that uploads
    // and downloads are calls that can fail (shared slots make none: see above).
    let registry = ExecutorRegistry::with_builtins().with(executor_with(SlotMemory::Buffers));
    let others: Vec<(&str, Graph, Tensor)> = vec![
        ("exact", exact_model(Dim::Fixed(3)), exact_input(3)),
        (
            "resnet18_like",
            common::resnet18_like(16, 4, 5),
            common::image(16, 7),
        ),
        (
            "mobilenet_v2_like",
            common::mobilenet_v2_like(16, 0.25, 5),
            common::image(16, 8),
        ),
    ];
    // Each other net's expected output is its own single-threaded run, taken before any
    // fault; the exact model's is also the reference's, bit-for-bit.
    let mut prepared = Vec::new();
    for (name, graph, input) in others {
        let net = build_on_opencl(graph.clone(), registry.clone());
        let expected = run(&net, &input).expect("a clean forward");
        if name == "exact" {
            assert_bit_identical(&expected, &reference(graph, &input), name);
        }
        prepared.push((name, net, input, expected));
    }

    let graph = exact_model(Dim::Fixed(2));
    let input = exact_input(2);
    let expected = reference(graph.clone(), &input);
    let faulty = build_on_opencl(graph.clone(), registry);

    let done = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = prepared
        .into_iter()
        .map(|(name, net, input, expected)| {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut forwards = 0usize;
                while forwards < 3 || !done.load(Ordering::Acquire) {
                    let output = run(&net, &input)
                        .unwrap_or_else(|e| panic!("{name}: forward {forwards} failed: {e}"));
                    assert_bit_identical(
                        &output,
                        &expected,
                        &format!("{name}, forward {forwards}"),
                    );
                    forwards += 1;
                }
                forwards
            })
        })
        .collect();

    // On this thread, a run of faults: the first, a launch, costs the pooled workspace, so
    // the next forwards make workspaces, and their buffers, queues, kernel objects and
    // arguments fail in turn; then an upload and a download. After each round the net's
    // forward is the reference's again.
    let round = [
        CallKind::Enqueue,
        CallKind::Alloc,
        CallKind::Queue,
        CallKind::Kernel,
        CallKind::SetArg,
        CallKind::Write,
        CallKind::Read,
    ];
    for r in 0..3 {
        for kind in round {
            let (code, _) = injected(kind);
            let fault = faults::inject(kind, nth(kind), code);
            let failed = run(&faulty, &input);
            assert!(
                fault.fired(),
                "round {r}, {kind:?}: no call number {}",
                nth(kind)
            );
            drop(fault);
            assert_names_fault(
                &failed.expect_err("a forward whose OpenCL call failed must fail"),
                kind,
                &graph,
            );
        }
        let output = run(&faulty, &input).expect("the forward after the faults runs");
        assert_bit_identical(&output, &expected, &format!("round {r}: after the faults"));
    }
    done.store(true, Ordering::Release);
    for handle in handles {
        let forwards = handle
            .join()
            .unwrap_or_else(|_| panic!("a thread with a net of its own failed"));
        assert!(forwards >= 3);
    }
}
