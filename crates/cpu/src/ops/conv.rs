//! Conv: N-d grouped convolution (1-d, 2-d, 3-d, …; depthwise when group == C) with
//! strides, dilations, explicit or automatic padding and an optional bias; its transpose,
//! ConvTranspose, with the same attributes plus output_padding and output_shape; and
//! Col2Im, ConvTranspose's scatter of columns into an image without the weights.
//!
//! Each (batch, group) pair is one matrix product: the group's weights, M/group rows of
//! C/group·∏kernel values, times the im2col matrix of its input channels, whose column
//! for every output position lists the input values under the kernel taps (zero where a tap
//! falls in the padding). The product runs on the blocked f64 multiply in `matrix.rs`.

use super::gemm::expect_same_dtype;
use super::matrix::{multiply_add, MatRef};
use super::spatial::{advance, checked_product, col2im_add, resolve, Axis, WindowAttrs};
use super::{expect_float, i64_operand, optional, required};
use concord_core::op::{Conv, ConvTranspose};
use concord_core::{DType, MemoryBudget, OpError, Shape, Tensor};

/// Runs Conv on inputs X (N, C, D1…Dn), W (M, C/group, k1…kn) and optional B (M).
pub(crate) fn conv(
    attrs: &Conv,
    inputs: &[Option<&Tensor>],
    budget: MemoryBudget,
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let w = required(inputs, 1, "W")?;
    let bias = optional(inputs, 2);
    expect_float(x, 0, "X")?;
    expect_same_dtype(w, 1, "W", x.dtype())?;
    if let Some(b) = bias {
        expect_same_dtype(b, 2, "B", x.dtype())?;
    }
    let plan = ConvPlan::new(attrs, x.shape(), w.shape(), bias.map(|b| b.shape()))?;

    let x_f = x.to_f64_vec();
    let w_f = w.to_f64_vec();
    let out_len = checked_product(&plan.output_shape, "Conv output shape")?;
    let mut y = vec![0.0; out_len];
    let p = plan.output_plane;
    if let Some(b) = bias {
        let b_f = b.to_f64_vec();
        for (plane, &b) in y.chunks_exact_mut(p).zip(b_f.iter().cycle()) {
            plane.fill(b);
        }
    }

    let (c, m, group) = (plan.channels, plan.out_channels, plan.group);
    if y.is_empty() || c == 0 {
        // No batch entries, no output channels, or no input channels: the output is empty
        // or the bias alone, and there is nothing to multiply.
        return Tensor::from_f64(x.dtype(), Shape::new(plan.output_shape), y);
    }
    let (cg, mg) = (c / group, m / group);
    let kg = cg * plan.kernel_size;
    let mut cols = if plan.is_pointwise() {
        Vec::new()
    } else {
        let len = kg.checked_mul(p).ok_or_else(|| {
            OpError::Shape(format!(
                "Conv: the im2col matrix ({kg} x {p}) has more elements than this machine can \
                 address"
            ))
        })?;
        // The scratch can dwarf the output (one column per output position and kernel tap
        // of every input channel of a group), so it meets the budget too.
        budget
            .check_tensor(DType::F64, &[kg, p])
            .map_err(|e| scratch(e, "Conv's im2col matrix"))?;
        vec![0.0; len]
    };
    for (x_image, y_image) in x_f
        .chunks_exact(c * plan.input_plane)
        .zip(y.chunks_exact_mut(m * p))
    {
        for (g, (x_group, y_group)) in x_image
            .chunks_exact(cg * plan.input_plane)
            .zip(y_image.chunks_exact_mut(mg * p))
            .enumerate()
        {
            let weights = MatRef::row_major(&w_f[g * mg * kg..], mg, kg)?;
            let columns = if plan.is_pointwise() {
                // A 1×…×1 kernel with unit strides and no padding reads each input position
                // once, in order: the input channels already are the im2col matrix.
                MatRef::row_major(x_group, cg, p)?
            } else {
                im2col(x_group, &plan.axes, plan.input_plane, &mut cols);
                MatRef::row_major(&cols, kg, p)?
            };
            multiply_add(weights, columns, y_group)?;
        }
    }
    Tensor::from_f64(x.dtype(), Shape::new(plan.output_shape), y)
}

/// Everything about one Conv call that follows from the shapes and attributes alone.
#[derive(Debug)]
struct ConvPlan {
    channels: usize,
    out_channels: usize,
    group: usize,
    axes: Vec<Axis>,
    /// Elements in one input channel (∏ input spatial extents).
    input_plane: usize,
    /// Elements in one output channel (∏ output spatial extents).
    output_plane: usize,
    /// Taps in one kernel channel (∏ kernel extents).
    kernel_size: usize,
    output_shape: Vec<usize>,
}

impl ConvPlan {
    fn new(attrs: &Conv, x: &Shape, w: &Shape, bias: Option<&Shape>) -> Result<ConvPlan, OpError> {
        if x.rank() < 3 {
            return Err(OpError::Shape(format!(
                "Conv needs X of rank 3 or more (N, C, spatial…), got X {x}"
            )));
        }
        if w.rank() != x.rank() {
            return Err(OpError::Shape(format!(
                "Conv: W {w} has rank {} but X {x} has rank {}; W must be (M, C/group, \
                 kernel…) with one kernel extent per spatial axis of X",
                w.rank(),
                x.rank()
            )));
        }
        let group = attrs.group;
        if group == 0 {
            return Err(OpError::Attribute {
                name: "group",
                detail: "is 0; it must be at least 1".into(),
            });
        }
        let (c, m) = (x.dims()[1], w.dims()[0]);
        let w_channels = w.dims()[1];
        if w_channels.checked_mul(group) != Some(c) {
            return Err(OpError::Shape(format!(
                "Conv: X {x} has {c} channels but W {w} with group {group} expects \
                 W[1]·group = {w_channels}·{group} channels"
            )));
        }
        if m % group != 0 {
            return Err(OpError::Shape(format!(
                "Conv: W {w} has {m} output channels, which group {group} does not divide"
            )));
        }
        if let Some(b) = bias {
            if b.dims() != [m] {
                return Err(OpError::Shape(format!(
                    "Conv: B {b} must be 1-D with one value per output channel of W {w} ({m})"
                )));
            }
        }
        let kernel = &w.dims()[2..];
        if !attrs.kernel_shape.is_empty() && attrs.kernel_shape != kernel {
            return Err(OpError::Attribute {
                name: "kernel_shape",
                detail: format!(
                    "{:?} does not match the spatial extents {kernel:?} of W {w}",
                    attrs.kernel_shape
                ),
            });
        }
        let axes = resolve(
            &x.dims()[2..],
            &WindowAttrs {
                auto_pad: attrs.auto_pad,
                kernel_shape: kernel,
                strides: &attrs.strides,
                dilations: &attrs.dilations,
                pads: &attrs.pads,
                ceil_mode: false,
            },
        )?;
        let mut output_shape = vec![x.dims()[0], m];
        output_shape.extend(axes.iter().map(|a| a.output));
        Ok(ConvPlan {
            channels: c,
            out_channels: m,
            group,
            input_plane: checked_product(&x.dims()[2..], "Conv input spatial shape")?,
            output_plane: checked_product(&output_shape[2..], "Conv output spatial shape")?,
            kernel_size: checked_product(kernel, "Conv kernel shape")?,
            axes,
            output_shape,
        })
    }

    /// True when im2col would copy the input unchanged.
    fn is_pointwise(&self) -> bool {
        self.axes
            .iter()
            .all(|a| a.kernel == 1 && a.stride == 1 && a.pad_begin == 0 && a.pad_end == 0)
    }
}

/// Fills `cols` with the im2col matrix of `x_group` (its channels, each `input_plane`
/// values): row (channel, tap₀, …, tapₙ₋₁) in row-major order, column = output position in
/// row-major order, value = the input under that tap, or 0 in the padding.
fn im2col(x_group: &[f64], axes: &[Axis], input_plane: usize, cols: &mut [f64]) {
    let kernel: Vec<usize> = axes.iter().map(|a| a.kernel).collect();
    let output: Vec<usize> = axes.iter().map(|a| a.output).collect();
    let input: Vec<usize> = axes.iter().map(|a| a.input).collect();
    let input_strides = Shape::new(input).strides();
    let kernel_size: usize = kernel.iter().product();
    let output_plane: usize = output.iter().product();
    // The innermost output axis is filled as a run; the outer ones are walked one by one.
    let (last, outer_axes) = match axes.split_last() {
        Some(split) => split,
        None => return,
    };
    let mut taps = vec![0usize; axes.len()];
    for (row_index, row) in cols.chunks_exact_mut(output_plane).enumerate() {
        let channel = row_index / kernel_size;
        // `unravel` reduces its index modulo every kernel dim, so any index congruent to this
        // one modulo the kernel size gives the same taps: cargo-mutants' `%` → `+` here
        // (`row_index + kernel_size`) is equivalent, and excluded in .cargo/mutants.toml.
        let kernel_index = row_index % kernel_size;
        let Some(plane) = x_group.get(channel * input_plane..(channel + 1) * input_plane) else {
            return;
        };
        unravel(kernel_index, &kernel, &mut taps);
        let last_tap = taps[axes.len() - 1];
        let mut outer = vec![0usize; outer_axes.len()];
        for (run_index, run) in row.chunks_exact_mut(last.output).enumerate() {
            if run_index > 0 {
                advance(&mut outer, &output[..outer_axes.len()]);
            }
            // The offset of this run's row of input, or None when an outer tap is padding.
            let base = outer_axes
                .iter()
                .zip(&outer)
                .zip(&taps)
                .zip(&input_strides)
                .try_fold(0usize, |acc, (((axis, &o), &t), &stride)| {
                    axis.input_coord(o, t).map(|i| acc + i * stride)
                });
            match base {
                None => run.fill(0.0),
                Some(base) => {
                    for (o, v) in run.iter_mut().enumerate() {
                        *v = match last.input_coord(o, last_tap) {
                            Some(i) => plane[base + i],
                            None => 0.0,
                        };
                    }
                }
            }
        }
    }
}

/// Writes the row-major multi-index of flat position `index` within `dims` into `coords`.
/// A budget error about a kernel's scratch, saying which scratch it is.
fn scratch(e: OpError, what: &str) -> OpError {
    match e {
        OpError::MemoryBudget {
            what: shape,
            bytes,
            limit,
        } => OpError::MemoryBudget {
            what: format!("{what} ({shape})"),
            bytes,
            limit,
        },
        other => other,
    }
}

fn unravel(mut index: usize, dims: &[usize], coords: &mut [usize]) {
    for (c, &d) in coords.iter_mut().zip(dims).rev() {
        *c = index % d;
        index /= d;
    }
}

/// Runs ConvTranspose on inputs X (N, C, D1…Dn), W (C, M/group, k1…kn) and optional B (M).
///
/// Each (batch, group) pair is one matrix product and a scatter: the group's weights,
/// transposed to M/group·∏kernel rows of C/group values, times its input channels gives,
/// for every input position, the contribution of each (output channel, tap); `col2im_add`
/// adds each into the output position that tap lands on (dropping the cropped ones).
pub(crate) fn conv_transpose(
    attrs: &ConvTranspose,
    inputs: &[Option<&Tensor>],
    budget: MemoryBudget,
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "X")?;
    let w = required(inputs, 1, "W")?;
    let bias = optional(inputs, 2);
    expect_float(x, 0, "X")?;
    expect_same_dtype(w, 1, "W", x.dtype())?;
    if let Some(b) = bias {
        expect_same_dtype(b, 2, "B", x.dtype())?;
    }
    let (xs, ws) = (x.shape(), w.shape());
    if xs.rank() < 3 || ws.rank() != xs.rank() {
        return Err(OpError::Shape(format!(
            "ConvTranspose needs X (N, C, spatial…) of rank 3 or more and W (C, M/group, \
             kernel…) of the same rank, got X {xs} and W {ws}"
        )));
    }
    let group = attrs.conv.group;
    let c = xs.dims()[1];
    if group == 0 || ws.dims()[0] != c || c % group != 0 {
        return Err(OpError::Shape(format!(
            "ConvTranspose: X {xs} has {c} channels, W {ws} has {} input channels and group \
             is {group}; they must be equal and divisible by a group of at least 1",
            ws.dims()[0]
        )));
    }
    let kernel = &ws.dims()[2..];
    if !attrs.conv.kernel_shape.is_empty() && attrs.conv.kernel_shape != kernel {
        return Err(OpError::Attribute {
            name: "kernel_shape",
            detail: format!(
                "{:?} does not match the spatial extents {kernel:?} of W {ws}",
                attrs.conv.kernel_shape
            ),
        });
    }
    let mg = ws.dims()[1];
    let m = mg.checked_mul(group).ok_or_else(|| {
        OpError::Shape(format!(
            "ConvTranspose: W {ws} times group {group} overflows"
        ))
    })?;
    if let Some(b) = bias {
        if b.shape().dims() != [m] {
            return Err(OpError::Shape(format!(
                "ConvTranspose: B {} must be 1-D with one value per output channel ({m})",
                b.shape()
            )));
        }
    }
    let axes = attrs.plan(&xs.dims()[2..], kernel)?;
    let mut output_shape = vec![xs.dims()[0], m];
    output_shape.extend(axes.iter().map(|a| a.output));
    let out_len = checked_product(&output_shape, "ConvTranspose output shape")?;
    let output_plane = checked_product(&output_shape[2..], "ConvTranspose output spatial shape")?;
    let input_plane = checked_product(&xs.dims()[2..], "ConvTranspose input spatial shape")?;
    let kernel_size = checked_product(kernel, "ConvTranspose kernel shape")?;

    let mut y = vec![0.0; out_len];
    if let Some(b) = bias {
        let b_f = b.to_f64_vec();
        for (plane, &b) in y
            .chunks_exact_mut(output_plane.max(1))
            .zip(b_f.iter().cycle())
        {
            plane.fill(b);
        }
    }
    if y.is_empty() || c == 0 || mg == 0 {
        // Nothing to scatter: the output is empty or the bias alone.
        return Tensor::from_f64(x.dtype(), Shape::new(output_shape), y);
    }
    let x_f = x.to_f64_vec();
    let w_f = w.to_f64_vec();
    let cg = c / group;
    let rows = mg * kernel_size;
    budget
        .check_tensor(DType::F64, &[rows, input_plane])
        .map_err(|e| scratch(e, "ConvTranspose's column matrix"))?;
    let mut cols = vec![
        0.0;
        rows.checked_mul(input_plane).ok_or_else(|| {
            OpError::Shape(format!(
                "ConvTranspose: the column matrix ({rows} x {input_plane}) has more elements than \
             this machine can address"
            ))
        })?
    ];
    for (x_image, y_image) in x_f
        .chunks_exact(c * input_plane)
        .zip(y.chunks_exact_mut(m * output_plane))
    {
        for (g, (x_group, y_group)) in x_image
            .chunks_exact(cg * input_plane)
            .zip(y_image.chunks_exact_mut(mg * output_plane))
            .enumerate()
        {
            let weights = MatRef::row_major(&w_f[g * cg * rows..], cg, rows)?.transposed();
            let inputs = MatRef::row_major(x_group, cg, input_plane)?;
            cols.fill(0.0);
            multiply_add(weights, inputs, &mut cols)?;
            col2im_add(&cols, &axes, y_group);
        }
    }
    Tensor::from_f64(x.dtype(), Shape::new(output_shape), y)
}

/// Runs Col2Im on input (N, C·∏block, L), image_shape and block_shape (i64, r extents each):
/// every column of the L sliding-block positions is added back into the image at the
/// positions its block covers, overlaps summed, padding dropped. Floats sum in f64;
/// integers sum exactly in i128 and wrap once when stored, as numpy's `+=` does (bool sums
/// are "any", as numpy's are).
pub(crate) fn col2im(
    dilations: &[usize],
    pads: &[usize],
    strides: &[usize],
    inputs: &[Option<&Tensor>],
) -> Result<Tensor, OpError> {
    let x = required(inputs, 0, "input")?;
    let extents = |index: usize, name: &'static str| -> Result<Vec<usize>, OpError> {
        let values = i64_operand(required(inputs, index, name)?, index, name)?;
        values
            .iter()
            .map(|&v| usize::try_from(v).ok().filter(|&v| v >= 1))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| {
                OpError::Shape(format!(
                    "Col2Im: {name} {values:?} must hold positive extents"
                ))
            })
    };
    let image = extents(1, "image_shape")?;
    let block = extents(2, "block_shape")?;
    let axes = concord_core::op::col2im_plan(&image, &block, dilations, pads, strides)?;
    let block_size = checked_product(&block, "Col2Im block_shape")?;
    let blocks: Vec<usize> = axes.iter().map(|a| a.input).collect();
    let columns = checked_product(&blocks, "Col2Im sliding blocks")?;
    let (n, rows) = match *x.dims() {
        [n, rows, len] if rows % block_size == 0 && len == columns => (n, rows),
        _ => {
            return Err(OpError::Shape(format!(
                "Col2Im needs input (N, C·{block_size}, {columns}) for image_shape {image:?} and \
                 block_shape {block:?} ({columns} sliding blocks of {block_size} values), got \
                 input {}",
                x.shape()
            )))
        }
    };
    let c = rows / block_size;
    let mut output_shape = vec![n, c];
    output_shape.extend(&image);
    let out_len = checked_product(&output_shape, "Col2Im output shape")?;
    let image_len = out_len.checked_div(n.max(1)).unwrap_or(0);
    let per_image = rows * columns;
    match x.to_i128_vec() {
        Some(values) => {
            let mut out = vec![0i128; out_len];
            for (cols, plane) in values
                .chunks_exact(per_image.max(1))
                .zip(out.chunks_exact_mut(image_len.max(1)))
            {
                col2im_add(cols, &axes, plane);
            }
            Tensor::from_i128(x.dtype(), Shape::new(output_shape), out)
        }
        None => {
            let values = x.to_f64_vec();
            let mut out = vec![0.0f64; out_len];
            for (cols, plane) in values
                .chunks_exact(per_image.max(1))
                .zip(out.chunks_exact_mut(image_len.max(1)))
            {
                col2im_add(cols, &axes, plane);
            }
            Tensor::from_f64(x.dtype(), Shape::new(output_shape), out)
        }
    }
}
