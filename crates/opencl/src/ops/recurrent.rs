//! GRU and LSTM (kernels/recurrent.cl). One work-group per (direction, batch entry) walks
//! the whole sequence with barriers between steps, its state in a scratch slot of 8-byte
//! elements (the kernels' acc_t, double where the device has fp64). X's part of the gates
//! does not depend on the state: on a GPU one launch ahead of the walk (`rnn_project`)
//! computes it for every step at once; with the CPU-device kernels the walk computes it
//! step by step, which costs less there than a second launch. The kernels read W and R
//! transposed, so that neighbouring work-items read neighbouring elements: a constant W or
//! R is transposed once on the host, a run-time one by a copy launch. A work-item takes
//! one hidden row of every gate, or with the CPU-device kernels blocks of eight
//! consecutive rows as 8-lane vectors ([`CPU_ROWS`], [`CPU_BLOCKS`]); every sum keeps the
//! reference's order, so the outputs do not depend on these choices. Where every direction
//! has the same kinds of activation functions, the build fixes them (`RNN_KIND_F`, `_G`,
//! `_H`) and the kernels' switch over kinds folds away. A Transpose that alone reads Y is
//! folded into the node (`Epilogue::output_perm`): the walk stores Y at its strides
//! ([`y_strides`]). Directions, `layout`, every activation function with its alpha and
//! beta, `clip`, `linear_before_reset`, `input_forget`, initial states and peepholes are
//! implemented; `sequence_lens` and RNN are declined by [`check`], so those nodes run on
//! the reference and the placement says why.

use super::{input, optional_input};
use crate::plan::{i32_arg, strides_of, Arg, Builder, GemmKernel, Loc, StorageDefines};
use crate::programs::Family;
use concord_core::op::{Recurrent, RecurrentCell, RnnActivationKind, RnnDirection};
use concord_core::storage::Storage;
use concord_core::{DType, Graph, Node, OpError, Shape, Tensor};

/// Scratch rows of `hidden` elements per work-group: h, the next h, and three rows of
/// intermediates (kernels/recurrent.cl's SCRATCH_ROWS).
const SCRATCH_ROWS: usize = 5;

/// The most work-items one (direction, batch entry) work-group has; each takes spans of
/// hidden rows j, j + L·SPAN, … (a span: RNN_BLOCKS blocks of RNN_ROWS rows).
const MAX_GROUP: usize = 256;

/// Consecutive hidden rows per block (the kernels' RNN_ROWS) with the CPU-device kernels:
/// a block's sums, activations and updates are 8-lane vectors of double, which an AVX-512
/// device computes in one instruction (transcendental functions included; four rows were
/// 89 µs per torch_lstm_lm forward on PoCL's `basic` device, eight 72). A GPU's
/// work-items take one row each, so that a step's latency stays one row's.
const CPU_ROWS: usize = 8;

/// Blocks of [`CPU_ROWS`] rows per work-item with the CPU-device kernels (the kernels'
/// RNN_BLOCKS) on a device with AVX-512's registers (the GEMM's [`crate::BlockRows`] of
/// eight), else one: every block's sum of every gate is a chain of its own, and twelve
/// LSTM chains hide the addition's latency that four leave exposed (torch_lstm_lm 73 → 65
/// µs on `basic`). A block past the last hidden row is computed and dropped.
const CPU_BLOCKS: usize = 3;

/// Flag bits of the kernels' `flags` argument (kernels/recurrent.cl).
const HAS_B: i32 = 1;
const HAS_H0: i32 = 2;
const HAS_C0: i32 = 4;
const HAS_P: i32 = 8;
const HAS_Y: i32 = 16;
const HAS_YH: i32 = 32;
const HAS_YC: i32 = 64;
const BATCH_MAJOR: i32 = 128;
const LINEAR_BEFORE_RESET: i32 = 256;
const INPUT_FORGET: i32 = 512;
const HAS_CLIP: i32 = 1024;
const INLINE_X: i32 = 2048;

/// Whether the kernels implement this node, and why not.
pub(super) fn check(graph: &Graph, node: &Node, r: &Recurrent) -> Result<(), String> {
    let name = r.cell.name();
    if r.cell == RecurrentCell::Rnn {
        return Err("RNN has no OpenCL kernel (GRU and LSTM have)".into());
    }
    if optional_input(node, 4).is_some() {
        return Err(format!(
            "{name} with sequence_lens is not implemented on OpenCL (every batch entry \
             walking the whole sequence is)"
        ));
    }
    let float = node
        .present_inputs()
        .filter_map(|v| graph.values.get(v))
        .all(|v| matches!(v.dtype, DType::F32 | DType::F16));
    if !float {
        return Err(format!("{name} on OpenCL takes f32 or f16 operands only"));
    }
    Ok(())
}

/// Builds the launches of a GRU or LSTM node: the walk, after `rnn_project` on a GPU.
pub(super) fn build(
    b: &mut Builder,
    node: &Node,
    r: &Recurrent,
    output_perm: Option<&[usize]>,
) -> Result<(), OpError> {
    let name = r.cell.name();
    let lstm = match r.cell {
        RecurrentCell::Lstm => true,
        RecurrentCell::Gru => false,
        RecurrentCell::Rnn => {
            return Err(OpError::Unsupported(
                "RNN has no OpenCL kernel (GRU and LSTM have)".into(),
            ))
        }
    };
    if optional_input(node, 4).is_some() {
        return Err(OpError::Unsupported(format!(
            "{name} with sequence_lens is not implemented on OpenCL"
        )));
    }
    let x = input(node, 0, "X")?;
    let xd = b.shape(x)?.dims().to_vec();
    let [a0, a1, input_size] = xd[..] else {
        return Err(OpError::Shape(format!(
            "{name}: input 0 (X) has shape {xd:?}; it needs rank 3"
        )));
    };
    let (seq, batch) = if r.batch_major { (a1, a0) } else { (a0, a1) };
    let dirs = r.direction.count();
    let gates = r.cell.gates();
    let rw = input(node, 2, "R")?;
    let hidden = match (r.hidden_size, b.shape(rw)?.dims()) {
        (Some(h), _) => h,
        (None, &[_, _, h]) => h,
        (None, other) => {
            return Err(OpError::Shape(format!(
                "{name}: input 2 (R) has shape {other:?}; it needs rank 3"
            )))
        }
    };
    let state = if r.batch_major {
        [batch, dirs, hidden]
    } else {
        [dirs, batch, hidden]
    };
    // Every operand's shape is checked here, so the kernel never reads past one.
    let expect = |b: &Builder, index: usize, what: &'static str, want: &[usize]| {
        let name_of = input(node, index, what)?;
        let dims = b.shape(name_of)?.dims();
        if dims != want {
            return Err(OpError::Shape(format!(
                "{name}: input {index} ({what}) has shape {dims:?}; it needs {want:?}"
            )));
        }
        Ok(name_of)
    };
    // hidden_size comes from the model: a product that overflows is a bad model, not a
    // wrapped shape that might happen to match W.
    let gate_rows = gates
        .checked_mul(hidden)
        .filter(|r| r.checked_mul(2 * dirs).is_some())
        .ok_or_else(|| {
            OpError::Shape(format!(
                "{name}: hidden_size {hidden} is too large ({gates} gates of {hidden} rows \
                 overflow)"
            ))
        })?;
    let w = expect(b, 1, "W", &[dirs, gate_rows, input_size])?;
    let rw = expect(b, 2, "R", &[dirs, gate_rows, hidden])?;
    let mut flags = 0;
    let mut optional =
        |b: &Builder, index: usize, what: &'static str, want: &[usize], bit| match optional_input(
            node, index,
        ) {
            Some(_) => {
                flags |= bit;
                expect(b, index, what, want).map(Some)
            }
            None => Ok(None),
        };
    let bias = optional(b, 3, "B", &[dirs, 2 * gate_rows], HAS_B)?;
    let h0 = optional(b, 5, "initial_h", &state, HAS_H0)?;
    let (c0, peep) = if lstm {
        (
            optional(b, 6, "initial_c", &state, HAS_C0)?,
            optional(b, 7, "P", &[dirs, 3 * hidden], HAS_P)?,
        )
    } else {
        (None, None)
    };
    if r.batch_major {
        flags |= BATCH_MAJOR;
    }
    if r.linear_before_reset && !lstm {
        flags |= LINEAR_BEFORE_RESET;
    }
    if r.input_forget && lstm {
        flags |= INPUT_FORGET;
    }
    if r.clip.is_some() {
        flags |= HAS_CLIP;
    }
    let outputs: Vec<Option<&str>> = (0..r.cell.max_outputs())
        .map(|i| {
            node.outputs
                .get(i)
                .map(String::as_str)
                .filter(|o| !o.is_empty())
        })
        .collect();
    for (bit, output) in [HAS_Y, HAS_YH, HAS_YC].into_iter().zip(&outputs) {
        if output.is_some() {
            flags |= bit;
        }
    }

    // The activation table the kernels read: per function of each direction, its kind (its
    // position in RnnActivationKind::ALL), alpha and beta; always f32, whatever the target.
    let functions = r.cell.functions();
    if r.activations.len() != functions * dirs {
        return Err(OpError::Attribute {
            name: "activations",
            detail: format!(
                "{name} with {dirs} direction(s) takes {} activations, the node has {}",
                functions * dirs,
                r.activations.len()
            ),
        });
    }
    let mut table = Vec::with_capacity(3 * r.activations.len());
    let mut kinds = Vec::with_capacity(r.activations.len());
    for a in &r.activations {
        let kind = RnnActivationKind::ALL
            .iter()
            .position(|row| row.0 == a.kind)
            .ok_or_else(|| {
                OpError::Unsupported(format!(
                    "{name}: activation {} has no code in the OpenCL kernels",
                    a.kind.name()
                ))
            })?;
        table.extend([kind as f32, a.alpha, a.beta]);
        kinds.push(kind);
    }
    let storage = b.storage(b.dtype(x)?);
    // The CPU-device kernel set goes with the register-blocked GEMM, which CPU devices get
    // and CONCORD_OPENCL_GEMM=register-blocked asks for anywhere (that is how `cargo xtask
    // oclgrind` checks these kernels' memory accesses on its simulated GPU).
    let (rows_per_block, blocks_per_item) = match b.gemm {
        // Twelve 8-lane double sums need AVX-512's 32 vector registers; where the GEMM
        // sums four rows at a time (AVX2's sixteen), a work-item takes one block.
        GemmKernel::RegisterBlocked if b.programs.block_rows() == 8 => (CPU_ROWS, CPU_BLOCKS),
        GemmKernel::RegisterBlocked => (CPU_ROWS, 1),
        _ => (1, 1),
    };
    let mut options = format!(
        "{} -DRNN_ROWS={rows_per_block} -DRNN_BLOCKS={blocks_per_item}",
        storage.variant()
    );
    // Where every direction has the same kinds of functions (as in every exported model),
    // the build fixes them, so that the kernels' activation switch folds away and the
    // functions inline; alpha and beta are still read from the table.
    let mut directions = kinds.chunks(functions.max(1));
    if let Some(first) = directions.next() {
        if directions.all(|d| d == first) {
            for (define, kind) in ["F", "G", "H"].iter().zip(first) {
                options.push_str(&format!(" -DRNN_KIND_{define}={kind}"));
            }
        }
    }
    // Tanh and Sigmoid in float (rnn_act in recurrent.cl) only where every direction has
    // its cell's default functions (Sigmoid gates, Tanh elsewhere; every exported model's):
    // a gate from an unbounded function can exceed 1 and multiply the state by it at every
    // step, and the float rounding with it (a bidirectional GRU whose reverse gate was
    // Softplus, from prop/GRU: 2.8e-4 relative where the level allows 1e-4).
    let defaults = r.cell.default_activations();
    if r.activations
        .chunks(functions.max(1))
        .all(|d| d.iter().map(|a| a.kind).eq(defaults.iter().copied()))
    {
        options.push_str(" -DRNN_FLOAT_ACTS=1");
    }
    let program = b.program(Family::Recurrent, &options)?;
    // Work-items per (direction, batch entry): one per span of hidden rows.
    let spans = hidden.div_ceil(rows_per_block * blocks_per_item);
    let xl = b.input(x)?;
    let rows = gates * hidden;
    let wt = transposed(b, node, w, "W", [dirs, rows, input_size], storage)?;
    let rt = transposed(b, node, rw, "R", [dirs, rows, hidden], storage)?;
    // An absent operand's argument is bound to X, which the kernel never reads through it
    // (its flag is clear).
    let operand = |b: &mut Builder, value: Option<&str>| match value {
        Some(v) => b.input(v),
        None => Ok(xl.clone()),
    };
    let bl = operand(b, bias)?;
    let h0l = operand(b, h0)?;
    let c0l = operand(b, c0)?;
    let pl = operand(b, peep)?;
    let groups = dirs * batch;
    // I64 gives both scratch slots 8-byte elements whatever the target's float storage:
    // room for the kernels' acc_t, which is double on devices with fp64.
    let scratch_slot = |b: &mut Builder, what: &str, elements: usize| {
        let temp = format!("{}::{what}", node.name);
        b.shapes.insert(temp.clone(), Shape::new([elements.max(1)]));
        b.dtypes.insert(temp.clone(), DType::I64);
        b.alloc(&temp).map(|loc| (temp, loc))
    };
    let elements = |dims: &[usize], what: &str| {
        dims.iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| {
                OpError::Shape(format!(
                    "{name}: the {what} scratch of {dims:?} elements overflows the address \
                     space"
                ))
            })
    };
    // X's part of the gates: on a GPU one parallel launch ahead of the walk computes it for
    // every step; the CPU-device walk computes it step by step itself, a span of rows at a
    // time, where it costs less than a CPU device's second launch.
    let inline_x = rows_per_block == CPU_ROWS;
    if inline_x {
        flags |= INLINE_X;
    }
    let projection = if inline_x {
        None
    } else {
        Some(scratch_slot(
            b,
            "projection",
            elements(&[dirs, seq, batch, rows], "projection")?,
        )?)
    };
    let (temp, scratch) = scratch_slot(
        b,
        "state",
        elements(&[groups, SCRATCH_ROWS, hidden], "state")?,
    )?;
    let mut results = Vec::new();
    for output in &outputs {
        results.push(match output {
            Some(o) => b.alloc(o)?,
            // Bound to the scratch slot, never written through (the flag is clear).
            None => scratch.clone(),
        });
    }
    let table =
        Tensor::from_f32([table.len()], table).map_err(|e| OpError::Shape(e.to_string()))?;
    let acts = b.constant(&format!("{}::activations", node.name), &table, Storage::F32)?;
    let mode = match r.direction {
        RnnDirection::Forward => 0,
        RnnDirection::Reverse => 1,
        RnnDirection::Bidirectional => 2,
    };
    let steps = elements(&[seq, batch], "step")?;
    i32_arg(steps, "sequence length × batch size")?;
    // (seq, batch, input_size, hidden): both kernels take them in this order.
    let sizes = [
        Arg::I32(i32_arg(seq, "sequence length")?),
        Arg::I32(i32_arg(batch, "batch size")?),
        Arg::I32(i32_arg(input_size, "input size")?),
        Arg::I32(i32_arg(hidden, "hidden size")?),
    ];
    if let Some((_, projection)) = &projection {
        b.launch(
            &program,
            "rnn_project",
            &[spans, steps, dirs],
            Some(&[spans.next_multiple_of(8).clamp(8, 64), 1, 1]),
            [
                vec![
                    Arg::Buf(xl.clone()),
                    Arg::Buf(wt.clone()),
                    Arg::Buf(projection.clone()),
                ],
                sizes.to_vec(),
                vec![Arg::I32(gates as i32), Arg::I32(flags)],
            ]
            .concat(),
        );
    }
    let mut args = vec![
        Arg::Buf(xl),
        Arg::Buf(wt),
        // With INLINE_X the walk never reads XW: bound to the state scratch.
        Arg::Buf(match &projection {
            Some((_, loc)) => loc.clone(),
            None => scratch.clone(),
        }),
        Arg::Buf(rt),
        Arg::Buf(bl),
        Arg::Buf(h0l),
    ];
    if lstm {
        args.extend([Arg::Buf(c0l), Arg::Buf(pl)]);
    }
    args.extend(results.into_iter().map(Arg::Buf));
    args.extend([Arg::Buf(scratch), Arg::Buf(acts)]);
    args.extend(sizes);
    args.extend([
        Arg::I32(dirs as i32),
        Arg::I32(mode),
        Arg::I32(flags),
        Arg::F32(r.clip.unwrap_or(0.0)),
        Arg::Int8(y_strides(
            [seq, dirs, batch, hidden],
            r.batch_major,
            output_perm,
        )?),
    ]);
    let local = spans
        .clamp(1, MAX_GROUP)
        .min(b.device.max_work_group_size.max(1));
    let kernel = if lstm { "lstm" } else { "gru" };
    b.launch(&program, kernel, &[local, groups], Some(&[local, 1]), args);
    b.release(&temp);
    if let Some((name, _)) = &projection {
        b.release(name);
    }
    b.release(&transposed_name(node, "W"));
    b.release(&transposed_name(node, "R"));
    Ok(())
}

/// The element strides of Y's axes (t, d, n, j), then four zeros, as the kernels' `ys`: of
/// Y's layout, [seq, dirs, batch, hidden] or with `batch_major` [batch, seq, dirs,
/// hidden], or where a Transpose of Y was folded into the node (`perm`), of its output:
/// Y's axis `perm[k]` is that output's axis k.
fn y_strides(
    [seq, dirs, batch, hidden]: [usize; 4],
    batch_major: bool,
    perm: Option<&[usize]>,
) -> Result<[i32; 8], OpError> {
    // Y's axes in its layout's order, as positions in (t, d, n, j).
    let (order, dims) = if batch_major {
        ([2, 0, 1, 3], [batch, seq, dirs, hidden])
    } else {
        ([0, 1, 2, 3], [seq, dirs, batch, hidden])
    };
    let identity = [0, 1, 2, 3];
    let perm = perm.unwrap_or(&identity);
    let mut seen = perm.to_vec();
    seen.sort_unstable();
    if seen != identity {
        return Err(OpError::Shape(format!(
            "the Transpose folded into Y has perm {perm:?}; Y has rank 4"
        )));
    }
    // Row-major strides of the stored (permuted) shape, then each back to Y's axis.
    let stored = Shape::new(perm.iter().map(|&a| dims[a]).collect::<Vec<_>>());
    let mut ys = [0i32; 8];
    for (&a, stride) in perm.iter().zip(stored.strides()) {
        ys[order[a]] = i32_arg(stride, "Y stride")?;
    }
    Ok(ys)
}

/// The name of the slot that holds a run-time W or R transposed.
fn transposed_name(node: &Node, what: &str) -> String {
    format!("{}::{what}_transposed", node.name)
}

/// `value` ([dirs, rows, columns]: W or R) as the kernels read it, [dirs, columns, rows]:
/// transposed once on the host when it is a constant (as exporters write weights), else by
/// a copy launch into a slot of the plan (released with the node's other temporaries).
fn transposed(
    b: &mut Builder,
    node: &Node,
    value: &str,
    what: &str,
    [dirs, rows, columns]: [usize; 3],
    storage: Storage,
) -> Result<Loc, OpError> {
    let dims = [dirs, columns, rows];
    if let Some(t) = b.host_value(value) {
        let values = t.to_f64_vec();
        let needed = dirs.checked_mul(rows).and_then(|n| n.checked_mul(columns));
        if needed != Some(values.len()) {
            return Err(OpError::Shape(format!(
                "{}: input {what} holds {} values, not the {dirs}·{rows}·{columns} of its \
                 shape",
                node.name,
                values.len()
            )));
        }
        let mut out = Vec::with_capacity(values.len());
        for d in 0..dirs {
            for c in 0..columns {
                for r in 0..rows {
                    out.push(values[(d * rows + r) * columns + c]);
                }
            }
        }
        let t = Tensor::from_f64(t.dtype(), Shape::new(dims), out)?;
        return b.constant(&transposed_name(node, what), &t, storage);
    }
    let temp = transposed_name(node, what);
    b.shapes.insert(temp.clone(), Shape::new(dims));
    b.dtypes.insert(temp.clone(), b.dtype(value)?);
    let dst = b.alloc(&temp)?;
    let src = b.input(value)?;
    let (r, c) = (rows as i64, columns as i64);
    super::movement::copy_nd(
        b,
        storage,
        src,
        dst.clone(),
        &dims,
        &[r * c, 1, c],
        &strides_of(&dims),
        0,
        0,
    )?;
    Ok(dst)
}
