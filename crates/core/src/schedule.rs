//! The [`Schedule`] of a partition: its run order, a dense slot per value and the points
//! where values die, computed once at prepare; and [`Schedule::walk`], the one graph
//! interpreter every executor runs, supplying only "run this node on these operands".
//!
//! A value dies after its last reader unless it is an output; [`free_points`] is that one
//! notion of last use, shared with the planner's hand-over between partitions. A value that
//! is written and never read stays in its slot until the run ends, as it always has.
//!
//! A [`ScheduleTree`] adds the schedules of the subgraphs of If, Loop and Scan nodes,
//! recursively, so that an executor running control flow computes them once, at prepare,
//! and no run of a node (nor iteration of a loop) schedules its body again.

use crate::error::{Error, OpError, Result};
use crate::graph::{Graph, Node};
use crate::tensor::Tensor;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hash;

/// A partition's run order, value slots and free points.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The value name of each slot.
    names: Vec<String>,
    /// Where each slot's value comes from.
    sources: Vec<Source>,
    steps: Vec<Step>,
    /// The slot of each runtime input, in declaration order.
    inputs: Vec<usize>,
    /// The slot of each output, in declaration order.
    outputs: Vec<usize>,
}

/// Where a slot's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A runtime input; `default` when an initializer of the same name stands in for it
    /// when the caller does not give it (ONNX's overridable initializer).
    Input { default: bool },
    /// A constant initializer.
    Initializer,
    /// Written by this step (the last one that writes it, if several do).
    Step(usize),
}

/// One step of the run: a node, the slots it reads and writes, and the slots that die
/// after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The node's index in the executor's node list.
    pub node: usize,
    /// The node's name and op, for errors.
    pub name: String,
    pub op: &'static str,
    /// One entry per operand; `None` is an omitted optional operand.
    pub reads: Vec<Option<usize>>,
    /// One entry per result; `None` is an unnamed (unused) result.
    pub writes: Vec<Option<usize>>,
    /// Slots whose last reader this step is and that are not outputs, in read order.
    pub frees: Vec<usize>,
}

/// What one step reads and writes, by value name: the input of [`Schedule::from_steps`]
/// for an executor that rewrites its node list (a fused node reads an extra residual).
#[derive(Clone, Debug, PartialEq)]
pub struct StepValues<'a> {
    /// The node's index in the executor's node list.
    pub node: usize,
    pub name: &'a str,
    pub op: &'static str,
    /// `None` is an omitted optional operand.
    pub reads: Vec<Option<&'a str>>,
    /// An empty name is an unused result.
    pub writes: Vec<&'a str>,
}

impl<'a> StepValues<'a> {
    /// What `node`, at `index` of the node list, reads and writes.
    pub fn of_node(index: usize, node: &'a Node) -> Self {
        StepValues {
            node: index,
            name: &node.name,
            op: node.op.name(),
            reads: node.inputs.iter().map(|i| i.as_deref()).collect(),
            writes: node.outputs.iter().map(String::as_str).collect(),
        }
    }

    /// The same step reading one more value (after its own operands).
    pub fn with_read(mut self, value: Option<&'a str>) -> Self {
        if value.is_some() {
            self.reads.push(value);
        }
        self
    }
}

/// For each step, the values whose last reader it is and that `keep` does not hold, in the
/// order the step reads them: when a value dies. The schedule's free points and the
/// planner's partition hand-over are both this function.
pub fn free_points<K, S, R>(steps: S, keep: impl Fn(&K) -> bool) -> Vec<Vec<K>>
where
    K: Copy + Eq + Hash,
    S: IntoIterator<Item = R>,
    R: IntoIterator<Item = K>,
{
    let reads: Vec<Vec<K>> = steps.into_iter().map(|r| r.into_iter().collect()).collect();
    let mut last: HashMap<K, usize> = HashMap::new();
    for (i, step) in reads.iter().enumerate() {
        for &value in step {
            last.insert(value, i);
        }
    }
    reads
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let mut seen = HashSet::new();
            step.iter()
                .copied()
                .filter(|v| last.get(v) == Some(&i) && !keep(v) && seen.insert(*v))
                .collect()
        })
        .collect()
}

impl Schedule {
    /// The schedule of a whole graph: nodes in topological order, the graph's inputs,
    /// initializers and outputs.
    pub fn for_graph(graph: &Graph) -> Result<Schedule> {
        let order = graph.topological_order()?;
        Schedule::from_steps(
            order
                .into_iter()
                .map(|i| StepValues::of_node(i, &graph.nodes[i])),
            graph.inputs.iter().map(|i| i.name.as_str()),
            &graph.initializers,
            graph.outputs.iter().map(String::as_str),
        )
    }

    /// The schedule of `steps`, run in the order given, with these runtime inputs,
    /// initializers and outputs. A step that reads a value no input, initializer or earlier
    /// step provides is [`Error::DanglingInput`]; an output nothing provides is
    /// [`Error::DanglingOutput`].
    pub fn from_steps<'a>(
        steps: impl IntoIterator<Item = StepValues<'a>>,
        inputs: impl IntoIterator<Item = &'a str>,
        initializers: &BTreeMap<String, Tensor>,
        outputs: impl IntoIterator<Item = &'a str>,
    ) -> Result<Schedule> {
        let mut table = SlotTable::default();
        let inputs: Vec<usize> = inputs
            .into_iter()
            .map(|name| {
                let default = initializers.contains_key(name);
                table.slot(name, Source::Input { default })
            })
            .collect();
        let mut steps_out = Vec::new();
        for (index, step) in steps.into_iter().enumerate() {
            let mut reads = Vec::with_capacity(step.reads.len());
            for read in step.reads {
                let Some(name) = read else {
                    reads.push(None);
                    continue;
                };
                let slot = match table.get(name) {
                    Some(slot) => slot,
                    None if initializers.contains_key(name) => {
                        table.slot(name, Source::Initializer)
                    }
                    None => {
                        return Err(Error::DanglingInput {
                            node: step.name.to_string(),
                            op: step.op,
                            value: name.to_string(),
                        })
                    }
                };
                reads.push(Some(slot));
            }
            let writes = step
                .writes
                .iter()
                .map(|&name| (!name.is_empty()).then(|| table.write(name, index)))
                .collect();
            steps_out.push(Step {
                node: step.node,
                name: step.name.to_string(),
                op: step.op,
                reads,
                writes,
                frees: Vec::new(),
            });
        }
        let mut output_slots = Vec::new();
        for name in outputs {
            let slot = match table.get(name) {
                Some(slot) => slot,
                None if initializers.contains_key(name) => table.slot(name, Source::Initializer),
                None => {
                    return Err(Error::DanglingOutput {
                        value: name.to_string(),
                    })
                }
            };
            output_slots.push(slot);
        }
        let kept: HashSet<usize> = output_slots.iter().copied().collect();
        let frees = free_points(
            steps_out.iter().map(|s| s.reads.iter().flatten().copied()),
            |slot| kept.contains(slot),
        );
        for (step, frees) in steps_out.iter_mut().zip(frees) {
            step.frees = frees;
        }
        Ok(Schedule {
            names: table.names,
            sources: table.sources,
            steps: steps_out,
            inputs,
            outputs: output_slots,
        })
    }

    /// The steps, in run order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The node indices in run order.
    pub fn order(&self) -> impl Iterator<Item = usize> + '_ {
        self.steps.iter().map(|s| s.node)
    }

    /// The number of value slots.
    pub fn slot_count(&self) -> usize {
        self.names.len()
    }

    /// The value name of a slot.
    pub fn name(&self, slot: usize) -> &str {
        &self.names[slot]
    }

    /// The slot of a value, if the schedule mentions it.
    pub fn slot_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Where a slot's value comes from.
    pub fn source(&self, slot: usize) -> Source {
        self.sources[slot]
    }

    /// The slot of each runtime input, in declaration order.
    pub fn inputs(&self) -> &[usize] {
        &self.inputs
    }

    /// The slot of each output, in declaration order.
    pub fn outputs(&self) -> &[usize] {
        &self.outputs
    }

    /// Runs the schedule over values of type `T`, owning the value table.
    ///
    /// `input(k, name)` gives runtime input `k` (`None`: not given, so an initializer of
    /// the same name stands in, or a reader fails with [`Error::DanglingInput`]);
    /// `constant(name)` gives an initializer; `run(step, operands)` runs one node and
    /// returns its results. Values are dropped at their free points; the outputs are
    /// moved out, in order ([`Error::DanglingOutput`] for one that holds no value, such as
    /// an output listed twice).
    pub fn walk<T>(
        &self,
        mut input: impl FnMut(usize, &str) -> Result<Option<T>>,
        mut constant: impl FnMut(&str) -> Option<T>,
        mut run: impl FnMut(&Step, &[Option<&T>]) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let mut values: Vec<Option<T>> = Vec::new();
        values.resize_with(self.names.len(), || None);
        for (k, &slot) in self.inputs.iter().enumerate() {
            let name = &self.names[slot];
            values[slot] = match input(k, name)? {
                Some(v) => Some(v),
                None if self.sources[slot] == (Source::Input { default: true }) => constant(name),
                None => None,
            };
        }
        for (slot, source) in self.sources.iter().enumerate() {
            if *source == Source::Initializer {
                values[slot] = constant(&self.names[slot]);
            }
        }
        for step in &self.steps {
            let mut operands = Vec::with_capacity(step.reads.len());
            for read in &step.reads {
                let operand = match read {
                    None => None,
                    Some(slot) => {
                        Some(values[*slot].as_ref().ok_or_else(|| Error::DanglingInput {
                            node: step.name.clone(),
                            op: step.op,
                            value: self.names[*slot].clone(),
                        })?)
                    }
                };
                operands.push(operand);
            }
            let results = run(step, &operands)?;
            drop(operands);
            for &slot in &step.frees {
                values[slot] = None;
            }
            for (write, value) in step.writes.iter().zip(results) {
                if let Some(slot) = write {
                    values[*slot] = Some(value);
                }
            }
        }
        self.outputs
            .iter()
            .map(|&slot| {
                values[slot].take().ok_or_else(|| Error::DanglingOutput {
                    value: self.names[slot].clone(),
                })
            })
            .collect()
    }

    /// [`Schedule::walk`] over host tensors: inputs and initializers are borrowed, not
    /// copied, until they are outputs; `run` sees plain tensor operands.
    pub fn walk_host(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        initializers: &BTreeMap<String, Tensor>,
        mut run: impl FnMut(&Step, &[Option<&Tensor>]) -> Result<Vec<Tensor>>,
    ) -> Result<Vec<Tensor>> {
        let outputs = self.walk(
            |_, name| Ok(inputs.get(name).map(Cow::Borrowed)),
            |name| initializers.get(name).map(Cow::Borrowed),
            |step, operands: &[Option<&Cow<Tensor>>]| {
                let operands: Vec<Option<&Tensor>> =
                    operands.iter().map(|o| o.map(|t| t.as_ref())).collect();
                Ok(run(step, &operands)?.into_iter().map(Cow::Owned).collect())
            },
        )?;
        Ok(outputs.into_iter().map(Cow::into_owned).collect())
    }
}

/// A graph's [`Schedule`] with those of the subgraphs of its If, Loop and Scan nodes,
/// recursively: everything an executor needs to run the graph beyond the graph itself.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleTree {
    schedule: Schedule,
    /// For each node that has subgraphs, by its index in the graph's node list: one tree
    /// per subgraph, in [`crate::Op::subgraphs`] order.
    subgraphs: BTreeMap<usize, Vec<ScheduleTree>>,
}

impl ScheduleTree {
    /// The schedule of `graph` and of every subgraph nested in it. A subgraph that cannot
    /// be scheduled is an error at its node, naming the subgraph's attribute.
    pub fn for_graph(graph: &Graph) -> Result<ScheduleTree> {
        let schedule = Schedule::for_graph(graph)?;
        let mut subgraphs = BTreeMap::new();
        for (index, node) in graph.nodes.iter().enumerate() {
            let bodies = node.op.subgraphs();
            if bodies.is_empty() {
                continue;
            }
            let trees = bodies
                .into_iter()
                .zip(node.op.subgraph_attributes())
                .map(|(body, attribute)| {
                    ScheduleTree::for_graph(body).map_err(|e| {
                        Error::at_node(
                            node,
                            OpError::Subgraph {
                                graph: (*attribute).to_string(),
                                source: Box::new(e),
                            },
                        )
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            subgraphs.insert(index, trees);
        }
        Ok(ScheduleTree {
            schedule,
            subgraphs,
        })
    }

    /// The graph's own schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The trees of node `node`'s subgraphs, in [`crate::Op::subgraphs`] order; empty for
    /// a node without subgraphs.
    pub fn subgraphs(&self, node: usize) -> &[ScheduleTree] {
        self.subgraphs.get(&node).map_or(&[], Vec::as_slice)
    }
}

/// Slots by value name, while a schedule is built.
#[derive(Default)]
struct SlotTable {
    names: Vec<String>,
    sources: Vec<Source>,
    by_name: HashMap<String, usize>,
}

impl SlotTable {
    fn get(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The slot of `name`, made with `source` if it is new.
    fn slot(&mut self, name: &str, source: Source) -> usize {
        if let Some(slot) = self.get(name) {
            return slot;
        }
        self.names.push(name.to_string());
        self.sources.push(source);
        self.by_name.insert(name.to_string(), self.names.len() - 1);
        self.names.len() - 1
    }

    /// The slot `step` writes `name` to. A second writer takes the slot over, as a second
    /// insert into a value map would; validated graphs have none.
    fn write(&mut self, name: &str, step: usize) -> usize {
        let slot = self.slot(name, Source::Step(step));
        self.sources[slot] = Source::Step(step);
        slot
    }
}
