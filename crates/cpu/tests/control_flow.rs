//! If, Loop and Scan on hand-computed examples: branches of different shapes, nested If
//! reading outer values, loop-carried state with scan outputs and captures, Scan in both
//! directions, shape inference of the merged branches, folding of a constant If, and a
//! prepared partition that holds the schedules of its nested subgraphs.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::infer::{infer_op, ValueFact};
use concord_core::op::Binary;
use concord_core::{
    DType, Dim, Graph, Node, Op, OpError, PreparedPartition, Shape, Tensor, ValueInfo,
};
use concord_cpu::{run_op, CpuPartition, ReferenceEvaluator, ReferenceExecutor};
use std::collections::BTreeMap;

fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_f32(Shape::new(dims), v.to_vec()).unwrap_or_else(|e| panic!("{e}"))
}

fn i64s(dims: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_i64(Shape::new(dims), v.to_vec()).unwrap_or_else(|e| panic!("{e}"))
}

fn flag(v: bool) -> Tensor {
    Tensor::from_bool(Shape::scalar(), vec![v]).unwrap_or_else(|e| panic!("{e}"))
}

fn run(op: &Op, inputs: &[&Tensor], outputs: usize) -> Vec<Tensor> {
    let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
    run_op(op, &inputs, outputs).unwrap_or_else(|e| panic!("{} failed: {e}", op.name()))
}

/// A subgraph: its inputs (captures last), nodes and outputs.
fn subgraph(inputs: &[(&str, DType)], nodes: Vec<Node>, outputs: &[&str]) -> Graph {
    Graph {
        name: "sub".into(),
        inputs: inputs
            .iter()
            .map(|(n, d)| ValueInfo::new(*n, *d, Vec::new()))
            .collect(),
        outputs: outputs.iter().map(|s| s.to_string()).collect(),
        nodes,
        opset: 21,
        ..Graph::default()
    }
}

fn add(name: &str, a: &str, b: &str, out: &str) -> Node {
    Node::new(name, Op::Binary(Binary::Add), &[a, b], &[out])
}

/// If(cond) { x } else { y }, x and y captured: branches of different shapes.
fn if_x_else_y() -> Op {
    let captures = [("x", DType::F32), ("y", DType::F32)];
    Op::If {
        then_branch: Box::new(subgraph(&captures, vec![], &["x"])),
        else_branch: Box::new(subgraph(&captures, vec![], &["y"])),
    }
}

#[test]
fn if_takes_the_branch_its_condition_names() {
    let x = f32s(&[2], &[1.0, 2.0]);
    let y = f32s(&[3], &[3.0, 4.0, 5.0]);
    let op = if_x_else_y();
    assert_eq!(run(&op, &[&flag(true), &x, &y], 1), vec![x.clone()]);
    assert_eq!(run(&op, &[&flag(false), &x, &y], 1), vec![y.clone()]);
}

#[test]
fn if_outputs_merge_the_branches_types() {
    let op = if_x_else_y();
    let fact = |dtype, shape| {
        Some(ValueFact {
            dtype,
            shape,
            value: None,
        })
    };
    let two = [Dim::Fixed(2)];
    let three = [Dim::Fixed(3)];
    let facts = [
        fact(DType::Bool, &[][..]),
        fact(DType::F32, &two[..]),
        fact(DType::F32, &three[..]),
    ];
    let out = infer_op(&op, &facts, 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out[0].shape, vec![Dim::Unknown]);
    // Branches of different ranks cannot be typed while cond is unknown.
    let matrix = [Dim::Fixed(1), Dim::Fixed(3)];
    let facts = [
        fact(DType::Bool, &[][..]),
        fact(DType::F32, &two[..]),
        fact(DType::F32, &matrix[..]),
    ];
    assert!(matches!(
        infer_op(&op, &facts, 1),
        Err(OpError::NeedsFolding(_))
    ));
    // With a constant cond, the branch taken alone types the output.
    let yes = flag(false);
    let facts = [
        Some(ValueFact {
            dtype: DType::Bool,
            shape: &[],
            value: Some(&yes),
        }),
        fact(DType::F32, &two[..]),
        fact(DType::F32, &matrix[..]),
    ];
    let out = infer_op(&op, &facts, 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out[0].shape, matrix.to_vec());
}

#[test]
fn a_nested_if_reads_values_from_two_scopes_out() {
    // Outer: If(c1) { If(c2) { x + b } else { x } } else { b }, x and b captured at both
    // levels: 10 + 1 = 11 when both hold.
    let inner = Op::If {
        then_branch: Box::new(subgraph(
            &[("b", DType::F32), ("x", DType::F32)],
            vec![add("sum", "x", "b", "s")],
            &["s"],
        )),
        else_branch: Box::new(subgraph(
            &[("b", DType::F32), ("x", DType::F32)],
            vec![],
            &["x"],
        )),
    };
    let outer = Op::If {
        then_branch: Box::new(subgraph(
            &[("b", DType::F32), ("c2", DType::Bool), ("x", DType::F32)],
            vec![Node::new("inner", inner, &["c2", "b", "x"], &["r"])],
            &["r"],
        )),
        else_branch: Box::new(subgraph(
            &[("b", DType::F32), ("c2", DType::Bool), ("x", DType::F32)],
            vec![],
            &["b"],
        )),
    };
    let b = f32s(&[], &[1.0]);
    let x = f32s(&[], &[10.0]);
    let got = |c1, c2| run(&outer, &[&flag(c1), &b, &flag(c2), &x], 1);
    assert_eq!(got(true, true), vec![f32s(&[], &[11.0])]);
    assert_eq!(got(true, false), vec![x.clone()]);
    assert_eq!(got(false, true), vec![b.clone()]);
}

/// Loop body: s' = s + i; scan output s' + c (c captured); cond passes through.
fn accumulate_loop() -> Op {
    Op::Loop {
        body: Box::new(subgraph(
            &[
                ("i", DType::I64),
                ("cond_in", DType::Bool),
                ("s", DType::I64),
                ("c", DType::I64),
            ],
            vec![
                Node::new("keep", Op::Identity, &["cond_in"], &["cond_out"]),
                add("step", "s", "i", "s_out"),
                add("shift", "s_out", "c", "scan"),
            ],
            &["cond_out", "s_out", "scan"],
        )),
        captures: 1,
    }
}

#[test]
fn loop_carries_state_and_stacks_scan_outputs() {
    // s = 10; i = 0, 1, 2: s = 10, 11, 13; scan = s + 100.
    let out = run(
        &accumulate_loop(),
        &[
            &Tensor::scalar_i64(3),
            &flag(true),
            &Tensor::scalar_i64(10),
            &Tensor::scalar_i64(100),
        ],
        2,
    );
    assert_eq!(out[0], Tensor::scalar_i64(13));
    assert_eq!(out[1], i64s(&[3], &[110, 111, 113]));
}

#[test]
fn a_loop_that_runs_zero_times_gives_its_initial_values_and_empty_scans() {
    let out = run(
        &accumulate_loop(),
        &[
            &Tensor::scalar_i64(0),
            &flag(true),
            &Tensor::scalar_i64(10),
            &Tensor::scalar_i64(100),
        ],
        2,
    );
    assert_eq!(out[0], Tensor::scalar_i64(10));
    assert_eq!(out[1], i64s(&[0], &[]));
}

#[test]
fn the_body_condition_stops_a_loop() {
    // cond_out = s_out < 12: iterations give s = 10 (go on), 11 (go on), 13 (stop).
    let body = subgraph(
        &[
            ("i", DType::I64),
            ("cond_in", DType::Bool),
            ("s", DType::I64),
        ],
        vec![
            add("step", "s", "i", "s_out"),
            Node::new(
                "limit",
                Op::Constant {
                    value: Tensor::scalar_i64(12),
                },
                &[],
                &["twelve"],
            ),
            Node::new(
                "test",
                Op::Binary(Binary::Less),
                &["s_out", "twelve"],
                &["cond_out"],
            ),
            Node::new("copy", Op::Identity, &["s_out"], &["scan"]),
        ],
        &["cond_out", "s_out", "scan"],
    );
    let op = Op::Loop {
        body: Box::new(body),
        captures: 0,
    };
    let m = Tensor::scalar_i64(100);
    let s0 = Tensor::scalar_i64(10);
    let inputs = [Some(&m), None, Some(&s0)];
    let out = run_op(&op, &inputs, 2).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out[0], Tensor::scalar_i64(13));
    assert_eq!(out[1], i64s(&[3], &[10, 11, 13]));
}

/// Scan body: running sum of rows, each new sum also a scan output.
fn running_sum(output_reverse: bool, input_reverse: bool) -> Op {
    Op::Scan {
        body: Box::new(subgraph(
            &[("sum", DType::F32), ("row", DType::F32)],
            vec![
                add("add", "sum", "row", "next"),
                Node::new("copy", Op::Identity, &["next"], &["out"]),
            ],
            &["next", "out"],
        )),
        num_scan_inputs: 1,
        scan_input_axes: vec![],
        scan_input_directions: vec![input_reverse],
        scan_output_axes: vec![],
        scan_output_directions: vec![output_reverse],
        captures: 0,
    }
}

#[test]
fn scan_carries_state_and_stacks_outputs_in_both_directions() {
    let rows = f32s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let zero = f32s(&[2], &[0.0, 0.0]);
    let out = run(&running_sum(false, false), &[&zero, &rows], 2);
    assert_eq!(out[0], f32s(&[2], &[9.0, 12.0]));
    assert_eq!(out[1], f32s(&[3, 2], &[1.0, 2.0, 4.0, 6.0, 9.0, 12.0]));
    let out = run(&running_sum(true, false), &[&zero, &rows], 2);
    assert_eq!(out[1], f32s(&[3, 2], &[9.0, 12.0, 4.0, 6.0, 1.0, 2.0]));
    // Reversed input: rows 5,6 then 3,4 then 1,2.
    let out = run(&running_sum(false, true), &[&zero, &rows], 2);
    assert_eq!(out[1], f32s(&[3, 2], &[5.0, 6.0, 8.0, 10.0, 9.0, 12.0]));
}

#[test]
fn scan_along_another_axis_stacks_along_the_output_axis() {
    // Columns of [[1,2,3],[4,5,6]] scanned (axis 1), outputs stacked on axis 1.
    let Op::Scan { body, .. } = running_sum(false, false) else {
        panic!("running_sum is a Scan");
    };
    let op = Op::Scan {
        body,
        num_scan_inputs: 1,
        scan_input_axes: vec![1],
        scan_input_directions: vec![],
        scan_output_axes: vec![-1],
        scan_output_directions: vec![],
        captures: 0,
    };
    let m = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = run(&op, &[&f32s(&[2], &[0.0, 0.0]), &m], 2);
    assert_eq!(out[0], f32s(&[2], &[6.0, 15.0]));
    // Running sums per row: [1,3,6] and [4,9,15], each as a column of the stack.
    assert_eq!(out[1], f32s(&[2, 3], &[1.0, 3.0, 6.0, 4.0, 9.0, 15.0]));
}

#[test]
fn an_error_inside_a_body_names_the_inner_node() {
    let op = Op::If {
        then_branch: Box::new(subgraph(
            &[("x", DType::F32), ("y", DType::F32)],
            vec![add("bad_add", "x", "y", "z")],
            &["z"],
        )),
        else_branch: Box::new(subgraph(
            &[("x", DType::F32), ("y", DType::F32)],
            vec![],
            &["x"],
        )),
    };
    let x = f32s(&[2], &[1.0, 2.0]);
    let y = f32s(&[3], &[1.0, 2.0, 3.0]);
    let err = run_op(&op, &[Some(&flag(true)), Some(&x), Some(&y)], 1)
        .err()
        .unwrap_or_else(|| panic!("[2] + [3] does not broadcast"));
    let text = err.to_string();
    assert!(
        text.contains("then_branch") && text.contains("bad_add"),
        "{text}"
    );
}

#[test]
fn folding_replaces_a_constant_if_by_its_branch() {
    // y = If(true) { x + one } else { x }, `one` an initializer of the branch.
    let mut then_branch = subgraph(
        &[("x", DType::F32)],
        vec![add("inc", "x", "one", "s")],
        &["s"],
    );
    then_branch
        .initializers
        .insert("one".into(), f32s(&[], &[1.0]));
    let op = Op::If {
        then_branch: Box::new(then_branch),
        else_branch: Box::new(subgraph(&[("x", DType::F32)], vec![], &["x"])),
    };
    let mut graph = Graph {
        name: "g".into(),
        inputs: vec![ValueInfo::fixed("x", DType::F32, &[2])],
        outputs: vec!["y".into()],
        nodes: vec![Node::new("choose", op, &["cond", "x"], &["y"])],
        opset: 21,
        ..Graph::default()
    };
    graph.initializers.insert("cond".into(), flag(true));
    graph
        .fold_constants(&ReferenceEvaluator::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        graph.nodes.iter().all(|n| !matches!(n.op, Op::If { .. })),
        "{:?}",
        graph.nodes
    );
    assert_eq!(
        graph.value("y").map(|v| v.shape.clone()),
        Some(vec![Dim::Fixed(2)])
    );
    let mut inputs = BTreeMap::new();
    inputs.insert("x".to_string(), f32s(&[2], &[1.0, 5.0]));
    let out = ReferenceExecutor::new()
        .run(&graph, &inputs)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out[0].1, f32s(&[2], &[2.0, 6.0]));
}

/// A net of one Loop (3 trips, acc carried from x, x captured) whose body holds an If:
/// `if i < 1 { acc + x } else { acc + acc }`. `else_reads` is what the else branch adds to
/// acc (a value it cannot find makes the graph unschedulable).
fn loop_of_if(else_reads: &str) -> Graph {
    let branch_inputs = [("acc_in", DType::F32), ("x", DType::F32)];
    let if_op = Op::If {
        then_branch: Box::new(subgraph(
            &branch_inputs,
            vec![add("plus_x", "acc_in", "x", "t")],
            &["t"],
        )),
        else_branch: Box::new(subgraph(
            &branch_inputs,
            vec![add("double", "acc_in", else_reads, "e")],
            &["e"],
        )),
    };
    let mut body = subgraph(
        &[
            ("i", DType::I64),
            ("cond_in", DType::Bool),
            ("acc_in", DType::F32),
            ("x", DType::F32),
        ],
        vec![
            Node::new("first", Op::Binary(Binary::Less), &["i", "one"], &["c"]),
            Node::new("choose", if_op, &["c", "acc_in", "x"], &["acc_out"]),
            Node::new("keep", Op::Identity, &["cond_in"], &["cond_out"]),
        ],
        &["cond_out", "acc_out"],
    );
    body.initializers.insert("one".into(), i64s(&[], &[1]));
    let mut g = Graph {
        name: "loop_of_if".into(),
        inputs: vec![ValueInfo::fixed("x", DType::F32, &[2])],
        outputs: vec!["acc".into()],
        nodes: vec![Node {
            name: "repeat".into(),
            op: Op::Loop {
                body: Box::new(body),
                captures: 1,
            },
            inputs: vec![Some("m".into()), None, Some("x".into()), Some("x".into())],
            outputs: vec!["acc".into()],
        }],
        opset: 21,
        ..Graph::default()
    };
    g.initializers.insert("m".into(), i64s(&[], &[3]));
    g
}

#[test]
fn a_prepared_partition_holds_its_nested_subgraph_schedules_and_runs_them() {
    let partition = CpuPartition::new(&loop_of_if("acc_in")).unwrap_or_else(|e| panic!("{e}"));
    // The structure: the Loop (node 0) has its body's tree, in which the If (node 1) has
    // one tree per branch, each a one-step schedule; nodes without subgraphs have none.
    let schedules = partition.schedules();
    assert_eq!(schedules.schedule().steps().len(), 1);
    let [body] = schedules.subgraphs(0) else {
        panic!("the Loop holds one body schedule");
    };
    assert_eq!(body.schedule().steps().len(), 3);
    assert!(body.subgraphs(0).is_empty() && body.subgraphs(2).is_empty());
    let [then_tree, else_tree] = body.subgraphs(1) else {
        panic!("the If holds two branch schedules");
    };
    assert_eq!(then_tree.schedule().steps().len(), 1);
    assert_eq!(else_tree.schedule().steps().len(), 1);
    // The values, by hand: acc = [1, 2]; trip 0 adds x → [2, 4]; trips 1 and 2 double it
    // → [4, 8] → [8, 16]. Four threads share the partition (`&self` runs).
    let inputs = BTreeMap::from([("x".to_string(), f32s(&[2], &[1.0, 2.0]))]);
    let want = vec![f32s(&[2], &[8.0, 16.0])];
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| partition.run(&inputs, None)))
            .collect();
        for run in runs {
            match run.join() {
                Ok(Ok(got)) => assert_eq!(got, want),
                Ok(Err(e)) => panic!("the nested net runs: {e}"),
                Err(_) => panic!("a run panicked"),
            }
        }
    });
}

#[test]
fn a_subgraph_that_cannot_be_scheduled_is_refused_when_the_partition_is_prepared() {
    // The else branch two levels down reads a value nothing defines: preparing fails,
    // naming each level, before any run.
    let e = CpuPartition::new(&loop_of_if("nowhere")).expect_err("a dangling value");
    let message = e.to_string();
    for needle in ["repeat", "body", "choose", "else_branch", "nowhere"] {
        assert!(message.contains(needle), "{message} does not name {needle}");
    }
}

#[test]
fn a_loop_past_the_iteration_limit_is_an_error_not_a_hang() {
    // A body that allocates nothing, so the memory budget never stops it: only the
    // iteration limit does, with an error naming it.
    let forever = Op::Loop {
        body: Box::new(subgraph(
            &[("i", DType::I64), ("cond_in", DType::Bool)],
            vec![Node::new("keep", Op::Identity, &["cond_in"], &["cond_out"])],
            &["cond_out"],
        )),
        captures: 0,
    };
    let trips = Tensor::scalar_i64(1 << 62);
    let cond = flag(true);
    let inputs = [Some(&trips), Some(&cond)];
    match run_op(&forever, &inputs, 0) {
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains(&format!(
                    "more than {} iterations",
                    concord_cpu::MAX_LOOP_ITERATIONS
                )) && text.contains("4611686018427387904"),
                "{text}"
            );
        }
        Ok(out) => panic!("a Loop of 2^62 iterations returned {out:?}"),
    }
}

#[test]
fn empty_scan_outputs_take_each_outputs_own_type() {
    // Loop, zero iterations: one carried value (i64 scalar) and two scan outputs of other
    // types, s + c (i64 scalar) and the captured f32 [3] row. Each empty output is its own
    // scan output's type with 0 iterations stacked: i64 [0] and f32 [0, 3].
    let body = subgraph(
        &[
            ("i", DType::I64),
            ("cond_in", DType::Bool),
            ("s", DType::I64),
            ("c", DType::I64),
            ("v", DType::F32),
        ],
        vec![
            Node::new("keep", Op::Identity, &["cond_in"], &["cond_out"]),
            add("step", "s", "i", "s_out"),
            add("shift", "s_out", "c", "scan"),
            Node::new("copy", Op::Identity, &["v"], &["row"]),
        ],
        &["cond_out", "s_out", "scan", "row"],
    );
    let op = Op::Loop {
        body: Box::new(body),
        captures: 2,
    };
    let row = f32s(&[3], &[1.0, 2.0, 3.0]);
    let out = run(
        &op,
        &[
            &Tensor::scalar_i64(0),
            &flag(true),
            &Tensor::scalar_i64(10),
            &Tensor::scalar_i64(100),
            &row,
        ],
        3,
    );
    assert_eq!(out[0], Tensor::scalar_i64(10));
    assert_eq!(out[1], i64s(&[0], &[]));
    assert_eq!(out[2], f32s(&[0, 3], &[]));
    // Scan over a sequence of length 0: one state (f32 [2]) and two scan outputs, the new
    // sum (f32 [2]) and the Cast of the row to i64 (i64 [2]): empty f32 [0, 2] and i64
    // [0, 2], the state unchanged.
    let body = subgraph(
        &[("sum", DType::F32), ("row", DType::F32)],
        vec![
            add("add", "sum", "row", "next"),
            Node::new("copy", Op::Identity, &["next"], &["out"]),
            Node::new("cast", Op::Cast { to: DType::I64 }, &["row"], &["ints"]),
        ],
        &["next", "out", "ints"],
    );
    let op = Op::Scan {
        body: Box::new(body),
        num_scan_inputs: 1,
        scan_input_axes: vec![],
        scan_input_directions: vec![],
        scan_output_axes: vec![],
        scan_output_directions: vec![],
        captures: 0,
    };
    let start = f32s(&[2], &[1.0, 2.0]);
    let out = run(&op, &[&start, &f32s(&[0, 2], &[])], 3);
    assert_eq!(out[0], start);
    assert_eq!(out[1], f32s(&[0, 2], &[]));
    assert_eq!(out[2], i64s(&[0, 2], &[]));
}

#[test]
fn scan_outputs_of_rank_two_stack_along_a_middle_axis() {
    // Scan over x [3, 2, 2] (axis 0), each slice [2, 2] passed through and stacked on
    // output axis 1: y[a, t, b] = x[t, a, b], so y [2, 3, 2] is x with its first two axes
    // swapped.
    let Op::Scan { body, .. } = running_sum(false, false) else {
        panic!("running_sum is a Scan");
    };
    let op = Op::Scan {
        body,
        num_scan_inputs: 1,
        scan_input_axes: vec![],
        scan_input_directions: vec![],
        scan_output_axes: vec![1],
        scan_output_directions: vec![],
        captures: 0,
    };
    let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let zero = f32s(&[2, 2], &[0.0; 4]);
    let out = run(&op, &[&zero, &f32s(&[3, 2, 2], &x)], 2);
    // Running sums of the slices [0 1; 2 3], [4 5; 6 7], [8 9; 10 11]: [0 1; 2 3],
    // [4 6; 8 10], [12 15; 18 21]; row a of each goes to y[a, t, ..].
    assert_eq!(
        out[1],
        f32s(
            &[2, 3, 2],
            &[0.0, 1.0, 4.0, 6.0, 12.0, 15.0, 2.0, 3.0, 8.0, 10.0, 18.0, 21.0]
        )
    );
}

#[test]
fn a_scan_output_that_changes_shape_between_iterations_is_an_error() {
    // Loop, 2 iterations, scan output Range(0, i, 1): [0] in the first, [1] in the second.
    let body = subgraph(
        &[
            ("i", DType::I64),
            ("cond_in", DType::Bool),
            ("zero", DType::I64),
            ("one", DType::I64),
        ],
        vec![
            Node::new("keep", Op::Identity, &["cond_in"], &["cond_out"]),
            Node::new("range", Op::Range, &["zero", "i", "one"], &["grows"]),
        ],
        &["cond_out", "grows"],
    );
    let op = Op::Loop {
        body: Box::new(body),
        captures: 2,
    };
    let (two, zero, one) = (
        Tensor::scalar_i64(2),
        Tensor::scalar_i64(0),
        Tensor::scalar_i64(1),
    );
    let inputs = [Some(&two), Some(&flag(true)), Some(&zero), Some(&one)];
    let got = run_op(&op, &inputs, 1);
    assert!(
        matches!(&got, Err(OpError::Shape(m)) if m.contains("every iteration must give the same shape")),
        "{got:?}"
    );
}
