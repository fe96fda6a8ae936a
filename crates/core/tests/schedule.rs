//! The schedule every executor walks: run order, value slots, free points, and the walker's
//! value table. Graphs are written as data; each test checks one property.

use concord_core::schedule::{free_points, Source};
use concord_core::{DType, Error, Graph, Node, Op, Schedule, StepValues, Tensor, ValueInfo};
use std::collections::BTreeMap;

/// x → a, x → b (Identity each), concat(a, b) → y: a diamond, declared out of order.
fn diamond() -> Graph {
    Graph {
        name: "diamond".into(),
        inputs: vec![ValueInfo::fixed("x", DType::F32, &[2])],
        outputs: vec!["y".into()],
        nodes: vec![
            Node::new("join", Op::Concat { axis: 0 }, &["a", "b"], &["y"]),
            Node::new("left", Op::Identity, &["x"], &["a"]),
            Node::new("right", Op::Identity, &["x"], &["b"]),
        ],
        opset: 17,
        ..Graph::default()
    }
}

/// The slot of a value the schedule must mention.
fn slot(schedule: &Schedule, name: &str) -> usize {
    schedule
        .slot_of(name)
        .expect("the schedule mentions the value")
}

/// The value names a step frees.
fn frees(schedule: &Schedule, step: usize) -> Vec<&str> {
    schedule.steps()[step]
        .frees
        .iter()
        .map(|&s| schedule.name(s))
        .collect()
}

#[test]
fn diamond_runs_producers_first_and_frees_each_value_after_its_last_reader() {
    let s = Schedule::for_graph(&diamond()).expect("schedules");
    assert_eq!(s.order().collect::<Vec<_>>(), vec![1, 2, 0]);
    // x, a, b, y: one dense slot each.
    assert_eq!(s.slot_count(), 4);
    assert_eq!(s.inputs(), &[slot(&s, "x")]);
    assert_eq!(s.outputs(), &[slot(&s, "y")]);
    assert_eq!(s.source(slot(&s, "a")), Source::Step(0));
    // x dies after its second reader, a and b after the join; y is an output.
    assert_eq!(frees(&s, 0), Vec::<&str>::new());
    assert_eq!(frees(&s, 1), vec!["x"]);
    assert_eq!(frees(&s, 2), vec!["a", "b"]);
}

#[test]
fn a_fused_extra_read_moves_the_free_point() {
    // As the OpenCL executor fuses a residual Add into a node: the fused step also reads
    // x, so x lives until it rather than dying after the first Identity.
    let g = diamond();
    let mut join = g.nodes[0].clone();
    join.inputs = vec![Some("a".into())];
    let steps = [
        StepValues::of_node(1, &g.nodes[1]),
        StepValues::of_node(0, &join).with_read(Some("x")),
    ];
    let s = Schedule::from_steps(steps, ["x"], &BTreeMap::new(), ["y"]).expect("schedules");
    assert_eq!(s.order().collect::<Vec<_>>(), vec![1, 0]);
    assert_eq!(
        s.steps()[1].reads,
        vec![Some(slot(&s, "a")), Some(slot(&s, "x"))]
    );
    assert_eq!(frees(&s, 0), Vec::<&str>::new());
    assert_eq!(frees(&s, 1), vec!["a", "x"]);

    // Without the step that makes b, the join's read of b is dangling.
    let steps = [
        StepValues::of_node(1, &g.nodes[1]),
        StepValues::of_node(0, &g.nodes[0]),
    ];
    let s = Schedule::from_steps(steps, ["x"], &BTreeMap::new(), ["y"]);
    assert!(matches!(s, Err(Error::DanglingInput { ref value, .. }) if value == "b"));
}

#[test]
fn a_graph_output_is_never_freed_even_when_read_later() {
    let mut g = diamond();
    g.outputs.push("a".into());
    g.outputs.push("x".into());
    let s = Schedule::for_graph(&g).expect("schedules");
    for step in s.steps() {
        for &slot in &step.frees {
            assert!(
                !["a", "x", "y"].contains(&s.name(slot)),
                "{} freed",
                s.name(slot)
            );
        }
    }
    assert_eq!(frees(&s, 2), vec!["b"]);
}

#[test]
fn dangling_input_and_output_are_typed_errors() {
    let mut g = diamond();
    g.nodes[2].inputs[0] = Some("nowhere".into());
    assert_eq!(
        Schedule::for_graph(&g),
        Err(Error::DanglingInput {
            node: "right".into(),
            op: "Identity",
            value: "nowhere".into(),
        })
    );
    let mut g = diamond();
    g.outputs = vec!["nothing".into()];
    assert_eq!(
        Schedule::for_graph(&g),
        Err(Error::DanglingOutput {
            value: "nothing".into()
        })
    );
}

#[test]
fn initializers_get_slots_and_a_runtime_input_shadows_one_of_its_name() {
    let mut g = diamond();
    g.nodes[2].inputs[0] = Some("w".into());
    g.initializers.insert("w".into(), Tensor::vec_i64(vec![7]));
    g.initializers.insert("x".into(), Tensor::vec_i64(vec![9]));
    let s = Schedule::for_graph(&g).expect("schedules");
    assert_eq!(s.source(slot(&s, "w")), Source::Initializer);
    assert_eq!(s.source(slot(&s, "x")), Source::Input { default: true });
}

/// Walks `g` with a kernel that concatenates i64 vectors, recording what is live.
fn walk_concat(g: &Graph, inputs: &BTreeMap<String, Tensor>) -> Result<Vec<Tensor>, Error> {
    let s = Schedule::for_graph(g)?;
    s.walk_host(inputs, &g.initializers, |step, operands| {
        let mut out = Vec::new();
        for t in operands.iter().flatten() {
            out.extend_from_slice(t.as_i64().unwrap_or(&[]));
        }
        assert!(step.reads.len() == operands.len());
        Ok(vec![Tensor::vec_i64(out)])
    })
}

#[test]
fn walker_resolves_inputs_initializer_defaults_and_outputs() {
    let g = diamond();
    let inputs = BTreeMap::from([("x".to_string(), Tensor::vec_i64(vec![1, 2]))]);
    let out = walk_concat(&g, &inputs).expect("runs");
    assert_eq!(out, vec![Tensor::vec_i64(vec![1, 2, 1, 2])]);

    // Not given, x falls back to the initializer of its name; given, it wins.
    let mut g = diamond();
    g.initializers.insert("x".into(), Tensor::vec_i64(vec![5]));
    let out = walk_concat(&g, &BTreeMap::new()).expect("runs");
    assert_eq!(out, vec![Tensor::vec_i64(vec![5, 5])]);
    let out = walk_concat(&g, &inputs).expect("runs");
    assert_eq!(out, vec![Tensor::vec_i64(vec![1, 2, 1, 2])]);
}

#[test]
fn walker_reports_a_missing_runtime_input_at_its_reader() {
    let err = walk_concat(&diamond(), &BTreeMap::new()).expect_err("x is not given");
    assert_eq!(
        err,
        Error::DanglingInput {
            node: "left".into(),
            op: "Identity",
            value: "x".into(),
        }
    );
}

#[test]
fn walker_drops_values_at_their_free_points() {
    // The kernel sees how many values are alive through a shared counter of Rc clones.
    use std::rc::Rc;
    let g = diamond();
    let s = Schedule::for_graph(&g).expect("schedules");
    let token = Rc::new(());
    let mut alive = Vec::new();
    let out = s
        .walk(
            |_, _| Ok(Some(token.clone())),
            |_| None,
            |_, _| {
                alive.push(Rc::strong_count(&token) - 1);
                Ok(vec![token.clone()])
            },
        )
        .expect("runs");
    // Before left: x. Before right: x, a. Before join: a, b (x freed after right).
    assert_eq!(alive, vec![1, 2, 2]);
    assert_eq!(out.len(), 1);
    drop(out);
    assert_eq!(Rc::strong_count(&token), 1);
}

#[test]
fn free_points_are_the_last_reads_not_kept() {
    let steps = vec![vec!["a", "b"], vec!["a", "a"], vec!["c"]];
    let frees = free_points(steps, |v: &&str| *v == "c");
    assert_eq!(frees, vec![vec!["b"], vec!["a"], vec![]]);
}
