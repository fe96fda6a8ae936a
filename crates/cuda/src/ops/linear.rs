//! Gemm, MatMul and Conv through cuBLAS (strided-batched GEMM with f32 compute, also for
//! half storage), Conv by im2col (kernels/pool.cu) followed by one batched GEMM per chunk.
//!
//! cuBLAS is column-major and Concord row-major: a row-major r×c buffer read column-major
//! is its transpose, so the row-major product Y = op(A)·op(B) is computed as the
//! column-major product Yᵀ = op(B)ᵀ·op(A)ᵀ, passing B's buffer first.

use super::elementwise::bias_add;
use super::pool::{Window, WindowAttrs};
use super::{
    broadcast_strides, contiguous, expand_to, expect_float, grid, optional, required, single,
    strided_copy, Fail, Launcher, OpResult, Value,
};
use crate::error::CudaError;
use crate::kernels::Family;
use crate::tensor::StorageSuffix;
use crate::tensor::{DeviceTensor, Storage};
use concord_core::op::{Conv, Gemm};
use concord_core::{DType, OpError, Shape};
use cudarc::cublas::result as blas;
use cudarc::cublas::sys::{
    cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType_t,
};
use std::ffi::c_void;

/// The most bytes of im2col scratch one Conv chunk may use.
const IM2COL_BYTES: usize = 256 << 20;

/// One strided-batched GEMM in cuBLAS's column-major terms:
/// C[i] = alpha · op_a(A[i]) · op_b(B[i]) + beta · C[i], A[i] at `a + i·stride_a` elements.
#[derive(Clone, Copy, Debug)]
struct BatchedGemm {
    trans_a: bool,
    trans_b: bool,
    m: usize,
    n: usize,
    k: usize,
    a: u64,
    lda: usize,
    stride_a: usize,
    b: u64,
    ldb: usize,
    stride_b: usize,
    c: u64,
    ldc: usize,
    stride_c: usize,
    batch: usize,
    alpha: f32,
    beta: f32,
}

/// Y = alpha·op(A)·op(B) + beta·C.
pub fn gemm(
    l: &Launcher,
    attrs: &Gemm,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let a = required(inputs, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    expect_float(a, 0, "A")?;
    expect_float(b, 1, "B")?;
    let (ad, bd) = (a.dev.shape.dims(), b.dev.shape.dims());
    if ad.len() != 2 || bd.len() != 2 {
        return Err(Fail::Op(OpError::Shape(format!(
            "Gemm needs 2-D A and B, got A {} and B {}",
            a.dev.shape, b.dev.shape
        ))));
    }
    let (m, k) = if attrs.trans_a {
        (ad[1], ad[0])
    } else {
        (ad[0], ad[1])
    };
    let n = if attrs.trans_b { bd[0] } else { bd[1] };
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    let mut beta = 0.0;
    if let Some(c) = optional(inputs, 2) {
        if attrs.beta != 0.0 {
            // Y starts as C broadcast to (M, N); cuBLAS adds alpha·A·B to beta·Y.
            let out = y.shape.dims().to_vec();
            let read = broadcast_strides(c.dev.shape.dims(), &out);
            strided_copy(l, c.dev, &y, &out, &read, 0, &contiguous(&out), 0)?;
            beta = attrs.beta;
        }
    }
    run_gemm(
        l,
        y.storage,
        BatchedGemm {
            trans_a: attrs.trans_b,
            trans_b: attrs.trans_a,
            m: n,
            n: m,
            k,
            a: b.dev.ptr,
            lda: if attrs.trans_b { k } else { n },
            stride_a: 0,
            b: a.dev.ptr,
            ldb: if attrs.trans_a { m } else { k },
            stride_b: 0,
            c: y.ptr,
            ldc: n,
            stride_c: 0,
            batch: 1,
            alpha: attrs.alpha,
            beta,
        },
    )?;
    Ok(y)
}

/// numpy matmul: 1-D operands are promoted (and the added axis removed from the output),
/// leading batch axes broadcast.
pub fn matmul(
    l: &Launcher,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let a = required(inputs, 0, "A")?;
    let b = required(inputs, 1, "B")?;
    expect_float(a, 0, "A")?;
    expect_float(b, 1, "B")?;
    let mut ad = a.dev.shape.dims().to_vec();
    let mut bd = b.dev.shape.dims().to_vec();
    if ad.is_empty() || bd.is_empty() {
        return Err(Fail::Op(OpError::Shape(
            "MatMul operands must have rank 1 or more".into(),
        )));
    }
    if ad.len() == 1 {
        ad.insert(0, 1);
    }
    if bd.len() == 1 {
        bd.push(1);
    }
    let (m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
    let n = bd[bd.len() - 1];
    let a_batch = &ad[..ad.len() - 2];
    let b_batch = &bd[..bd.len() - 2];
    let rank = a_batch.len().max(b_batch.len());
    let mut batch_dims = vec![1usize; rank];
    for (dims, offset) in [
        (a_batch, rank - a_batch.len()),
        (b_batch, rank - b_batch.len()),
    ] {
        for (i, &d) in dims.iter().enumerate() {
            if d != 1 {
                batch_dims[offset + i] = d;
            }
        }
    }
    let batch: usize = batch_dims.iter().product();
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    if y.numel() == 0 {
        return Ok(y);
    }
    // An operand whose batch is all ones is reused (stride 0); one whose batch already is
    // the output's is read in place; any other broadcast is materialised first.
    let operand = |t: &DeviceTensor,
                   own_batch: &[usize],
                   rows: usize,
                   cols: usize|
     -> OpResult<(DeviceTensor, usize)> {
        let numel: usize = own_batch.iter().product();
        if numel == 1 {
            return Ok((t.clone(), 0));
        }
        let padded: Vec<usize> = std::iter::repeat(1)
            .take(rank - own_batch.len())
            .chain(own_batch.iter().copied())
            .collect();
        if padded == batch_dims {
            return Ok((t.clone(), rows * cols));
        }
        let mut full = batch_dims.clone();
        full.extend([rows, cols]);
        let mut own = padded;
        own.extend([rows, cols]);
        let expanded = expand_to(l, &t.reshaped(Shape::new(own)), &Shape::new(full))?;
        Ok((expanded, rows * cols))
    };
    let (a_buf, stride_a) = operand(a.dev, a_batch, m, k)?;
    let (b_buf, stride_b) = operand(b.dev, b_batch, k, n)?;
    run_gemm(
        l,
        y.storage,
        BatchedGemm {
            trans_a: false,
            trans_b: false,
            m: n,
            n: m,
            k,
            a: b_buf.ptr,
            lda: n,
            stride_a: stride_b,
            b: a_buf.ptr,
            ldb: k,
            stride_b: stride_a,
            c: y.ptr,
            ldc: n,
            stride_c: m * n,
            batch,
            alpha: 1.0,
            beta: 0.0,
        },
    )?;
    // The expanded copies must live until the GEMM has read them; the run synchronises its
    // stream before any of these buffers can be freed out from under it (frees are
    // stream-ordered).
    drop((a_buf, b_buf));
    Ok(y)
}

/// Conv by im2col and GEMM, groups as a batch of GEMMs.
pub fn conv(
    l: &Launcher,
    attrs: &Conv,
    inputs: &[Option<Value>],
    facts: &[(DType, Shape)],
) -> OpResult<DeviceTensor> {
    let x = required(inputs, 0, "X")?;
    let w = required(inputs, 1, "W")?;
    expect_float(x, 0, "X")?;
    expect_float(w, 1, "W")?;
    let xd = x.dev.shape.dims().to_vec();
    let wd = w.dev.shape.dims().to_vec();
    if xd.len() < 3 || wd.len() != xd.len() {
        return Err(Fail::Op(OpError::Shape(format!(
            "Conv needs X (N, C, spatial…) and W (M, C/group, kernel…) of the same rank ≥ 3, \
             got X {} and W {}",
            x.dev.shape, w.dev.shape
        ))));
    }
    let group = attrs.group.max(1);
    let (batch, channels) = (xd[0], xd[1]);
    let (maps, per_group_in) = (wd[0], wd[1]);
    if channels % group != 0 || maps % group != 0 || per_group_in * group != channels {
        return Err(Fail::Op(OpError::Shape(format!(
            "Conv: X has {channels} channels and W {maps}×{per_group_in}, which group={group} \
             does not divide evenly"
        ))));
    }
    let kernel_shape: Vec<usize> = if attrs.kernel_shape.is_empty() {
        wd[2..].to_vec()
    } else {
        attrs.kernel_shape.clone()
    };
    let window = Window::resolve(
        channels,
        &xd[2..],
        &WindowAttrs {
            auto_pad: attrs.auto_pad,
            kernel_shape: &kernel_shape,
            strides: &attrs.strides,
            dilations: &attrs.dilations,
            pads: &attrs.pads,
            ceil_mode: false,
        },
    )?;
    let (dtype, shape) = single(facts)?;
    let y = l.output(dtype, shape)?;
    if y.numel() == 0 {
        return Ok(y);
    }
    let p = window.output_volume();
    let kvol = window.kernel_volume();
    let rows_per_group = per_group_in * kvol;
    let maps_per_group = maps / group;
    let storage = y.storage;
    let elem = storage.size();
    let per_item = channels * kvol * p;
    let chunk = (IM2COL_BYTES / (per_item * elem).max(1)).clamp(1, batch.max(1));
    let col = if window.is_pointwise() && window.dilation == [1; 3] {
        None
    } else {
        Some(l.scratch(storage, dtype, Shape::new([chunk * per_item]))?)
    };
    let x_item = channels * window.input_volume();
    let y_item = maps * p;
    let mut start = 0;
    while start < batch {
        let count = chunk.min(batch - start);
        // The GEMM's right operand: the im2col rows of this chunk, or X itself for a
        // pointwise window (its channel planes already are the rows).
        let (col_ptr, col_item) = match &col {
            Some(col) => {
                let f = l.function(Family::Pool, &format!("im2col_{}", storage.suffix()))?;
                let count_i = count as i64;
                let x_ptr = x.dev.ptr_at(start * x_item);
                l.launch(&f, grid(count * per_item), |a| {
                    a.arg(&window).arg(&count_i).arg(&x_ptr).arg(&col.ptr);
                })?;
                (col.ptr, per_item)
            }
            None => (x.dev.ptr_at(start * x_item), x_item),
        };
        if group == 1 {
            // One GEMM per batch element, batched: Y[b] (M×P) = W (M×CK) · col[b] (CK×P).
            run_gemm(
                l,
                storage,
                BatchedGemm {
                    trans_a: false,
                    trans_b: false,
                    m: p,
                    n: maps,
                    k: rows_per_group,
                    a: col_ptr,
                    lda: p,
                    stride_a: col_item,
                    b: w.dev.ptr,
                    ldb: rows_per_group,
                    stride_b: 0,
                    c: y.ptr_at(start * y_item),
                    ldc: p,
                    stride_c: y_item,
                    batch: count,
                    alpha: 1.0,
                    beta: 0.0,
                },
            )?;
        } else {
            // Per batch element, one GEMM per group, batched over the groups.
            for item in 0..count {
                run_gemm(
                    l,
                    storage,
                    BatchedGemm {
                        trans_a: false,
                        trans_b: false,
                        m: p,
                        n: maps_per_group,
                        k: rows_per_group,
                        a: col_ptr + (item * col_item * elem) as u64,
                        lda: p,
                        stride_a: rows_per_group * p,
                        b: w.dev.ptr,
                        ldb: rows_per_group,
                        stride_b: maps_per_group * rows_per_group,
                        c: y.ptr_at((start + item) * y_item),
                        ldc: p,
                        stride_c: maps_per_group * p,
                        batch: group,
                        alpha: 1.0,
                        beta: 0.0,
                    },
                )?;
            }
        }
        start += count;
    }
    if let Some(bias) = optional(inputs, 2) {
        if bias.dev.numel() != maps || bias.dev.storage != storage {
            return Err(Fail::Op(OpError::Shape(format!(
                "Conv: B must hold {maps} {dtype} values (one per output map), it is {} {}",
                bias.dev.dtype, bias.dev.shape
            ))));
        }
        bias_add(l, &y, bias.dev)?;
    }
    drop(col);
    Ok(y)
}

fn run_gemm(l: &Launcher, storage: Storage, g: BatchedGemm) -> OpResult<()> {
    if g.m == 0 || g.n == 0 || g.batch == 0 {
        return Ok(());
    }
    let data_type = match storage {
        Storage::F32 => cudaDataType_t::CUDA_R_32F,
        Storage::F16 => cudaDataType_t::CUDA_R_16F,
        other => {
            return Err(Fail::Op(OpError::Unsupported(format!(
                "cuBLAS GEMM on {other:?} storage"
            ))))
        }
    };
    let int = |v: usize, what: &str| {
        i32::try_from(v.max(1)).map_err(|_| {
            Fail::Op(OpError::Unsupported(format!(
                "a GEMM {what} of {v} exceeds cuBLAS's 32-bit sizes"
            )))
        })
    };
    let op = |t: bool| {
        if t {
            cublasOperation_t::CUBLAS_OP_T
        } else {
            cublasOperation_t::CUBLAS_OP_N
        }
    };
    let (m, n, k) = (int(g.m, "m")?, int(g.n, "n")?, int(g.k, "k")?);
    let (lda, ldb, ldc) = (int(g.lda, "lda")?, int(g.ldb, "ldb")?, int(g.ldc, "ldc")?);
    let batch = int(g.batch, "batch")?;
    if g.k == 0 {
        // An empty inner dimension makes every product zero; `supports` declines such
        // nodes when their shapes are known, so this is only reached with dynamic shapes.
        return Err(Fail::Op(OpError::Unsupported(
            "a GEMM with an empty inner dimension".into(),
        )));
    }
    l.device
        .ctx
        .bind_to_thread()
        .map_err(|e| CudaError::driver("cuCtxSetCurrent", e))?;
    // SAFETY: the handle is this run's own, bound to this run's stream; every pointer is a
    // live device buffer of the sizes the shapes imply (m, n, k, leading dimensions and
    // strides were derived from those shapes), and alpha/beta are host f32 values, as
    // CUBLAS_COMPUTE_32F with the default host pointer mode expects.
    unsafe {
        blas::gemm_strided_batched_ex(
            l.lane.blas.0,
            op(g.trans_a),
            op(g.trans_b),
            m,
            n,
            k,
            (&g.alpha) as *const f32 as *const c_void,
            g.a as *const c_void,
            data_type,
            lda,
            g.stride_a as i64,
            g.b as *const c_void,
            data_type,
            ldb,
            g.stride_b as i64,
            (&g.beta) as *const f32 as *const c_void,
            g.c as *mut c_void,
            data_type,
            ldc,
            g.stride_c as i64,
            batch,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
    .map_err(|e| Fail::Cuda(CudaError::blas("cublasGemmStridedBatchedEx", e)))
}
