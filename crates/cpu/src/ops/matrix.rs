//! The one f64 matrix multiply of the reference executor, `C += A·B`, shared by Conv (after
//! im2col), Gemm and MatMul.
//!
//! It is the textbook cache-blocked algorithm (Goto's): B is copied ("packed") in blocks of
//! `KC` rows × `NC` columns, A in blocks of `MC` × `KC`, each block laid out as the thin
//! panels the register kernel reads front to back; the kernel keeps an `MR`×`NR` tile of C
//! in local accumulators while it walks the shared `k` dimension. There is no unsafe code
//! and no intrinsics: the fixed-size accumulator loops are what the compiler vectorises.
//! Every product is accumulated in f64, in the same order whatever the caller, so results
//! are deterministic run to run.

use concord_core::OpError;

/// Rows of the register tile.
const MR: usize = 4;
/// Columns of the register tile.
const NR: usize = 4;
/// Depth of one packed block: an `MR`×`KC` panel of A and a `KC`×`NR` panel of B (8 KiB each)
/// stay in L1 while the register kernel runs.
const KC: usize = 256;
/// Rows of one packed A block (256 KiB at `KC`), sized for L2.
const MC: usize = 128;
/// Columns of one packed B block (1 MiB at `KC`), sized for L2/L3.
const NC: usize = 512;

/// A read-only strided view of a `rows`×`cols` f64 matrix: element (r, c) is at
/// `data[r * row_stride + c * col_stride]`. Transposes are views with the strides swapped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatRef<'a> {
    data: &'a [f64],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> MatRef<'a> {
    /// The row-major `rows`×`cols` matrix at the start of `data`.
    pub fn row_major(data: &'a [f64], rows: usize, cols: usize) -> Result<Self, OpError> {
        let needed = rows.checked_mul(cols);
        if needed.map_or(true, |n| n > data.len()) {
            return Err(OpError::Shape(format!(
                "a {rows}x{cols} matrix needs more than the {} elements given",
                data.len()
            )));
        }
        Ok(MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        })
    }

    /// The transpose, as a view of the same elements.
    pub fn transposed(self) -> Self {
        MatRef {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Element (r, c). Callers stay inside `rows`×`cols`, which `row_major` checked fits in
    /// `data`, so the index is always in bounds.
    fn at(&self, r: usize, c: usize) -> f64 {
        self.data[r * self.row_stride + c * self.col_stride]
    }
}

/// `c += a · b`, where `c` is the row-major `a.rows()`×`b.cols()` matrix at the start of
/// the slice.
pub(crate) fn multiply_add(a: MatRef, b: MatRef, c: &mut [f64]) -> Result<(), OpError> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k {
        return Err(OpError::Shape(format!(
            "cannot multiply a {m}x{k} matrix by a {}x{n} matrix",
            b.rows
        )));
    }
    if m.checked_mul(n).map_or(true, |len| len > c.len()) {
        return Err(OpError::Shape(format!(
            "a {m}x{n} product does not fit the {} output elements",
            c.len()
        )));
    }
    // An empty a or b needs no case of its own: the loops below then pack and add nothing.

    let mut b_pack = vec![0.0; KC * NC.min(n).next_multiple_of(NR)];
    let mut a_pack = vec![0.0; MC.min(m).next_multiple_of(MR) * KC];
    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            pack_b(&b, pc, kc, jc, nc, &mut b_pack);
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                pack_a(&a, ic, mc, pc, kc, &mut a_pack);
                for (jp, b_panel) in b_pack
                    .chunks_exact(kc * NR)
                    .take(nc.div_ceil(NR))
                    .enumerate()
                {
                    for (ip, a_panel) in a_pack
                        .chunks_exact(kc * MR)
                        .take(mc.div_ceil(MR))
                        .enumerate()
                    {
                        let tile = register_tile(a_panel, b_panel);
                        let row0 = ic + ip * MR;
                        let col0 = jc + jp * NR;
                        let rows = MR.min(m - row0);
                        let cols = NR.min(n - col0);
                        for (i, tile_row) in tile.iter().enumerate().take(rows) {
                            let start = (row0 + i) * n + col0;
                            for (out, v) in c[start..start + cols].iter_mut().zip(tile_row) {
                                *out += v;
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Copies rows `pc..pc+kc`, columns `jc..jc+nc` of `b` into `NR`-wide panels: panel `jp`
/// holds, for each of the `kc` rows in turn, the `NR` values of columns
/// `jc + jp*NR ..`, zero-filled past column `nc`.
fn pack_b(b: &MatRef, pc: usize, kc: usize, jc: usize, nc: usize, out: &mut [f64]) {
    for (jp, panel) in out
        .chunks_exact_mut(kc * NR)
        .take(nc.div_ceil(NR))
        .enumerate()
    {
        let j0 = jp * NR;
        let width = NR.min(nc - j0);
        for (p, dst) in panel.chunks_exact_mut(NR).enumerate() {
            for (j, d) in dst.iter_mut().enumerate() {
                *d = if j < width {
                    b.at(pc + p, jc + j0 + j)
                } else {
                    0.0
                };
            }
        }
    }
}

/// Copies rows `ic..ic+mc`, columns `pc..pc+kc` of `a` into `MR`-tall panels: panel `ip`
/// holds, for each of the `kc` columns in turn, the `MR` values of rows `ic + ip*MR ..`,
/// zero-filled past row `mc`.
fn pack_a(a: &MatRef, ic: usize, mc: usize, pc: usize, kc: usize, out: &mut [f64]) {
    for (ip, panel) in out
        .chunks_exact_mut(kc * MR)
        .take(mc.div_ceil(MR))
        .enumerate()
    {
        let i0 = ip * MR;
        let height = MR.min(mc - i0);
        for (p, dst) in panel.chunks_exact_mut(MR).enumerate() {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = if i < height {
                    a.at(ic + i0 + i, pc + p)
                } else {
                    0.0
                };
            }
        }
    }
}

/// The `MR`×`NR` product of one packed A panel and one packed B panel of the same depth.
fn register_tile(a_panel: &[f64], b_panel: &[f64]) -> [[f64; NR]; MR] {
    let mut acc = [[0.0f64; NR]; MR];
    for (a, b) in a_panel.chunks_exact(MR).zip(b_panel.chunks_exact(NR)) {
        for (acc_row, &a_i) in acc.iter_mut().zip(a) {
            for (acc_ij, &b_j) in acc_row.iter_mut().zip(b) {
                *acc_ij += a_i * b_j;
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The triple loop, as the oracle for the blocked version.
    fn naive(m: usize, k: usize, n: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    c[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        c
    }

    /// `c += a · b` for row-major a (m×k) and b (k×n).
    fn product_into(
        a: &[f64],
        b: &[f64],
        (m, k, n): (usize, usize, usize),
        c: &mut [f64],
    ) -> Result<(), OpError> {
        multiply_add(MatRef::row_major(a, m, k)?, MatRef::row_major(b, k, n)?, c)
    }

    fn values(len: usize, seed: u64) -> Vec<f64> {
        // Small integers keep every partial sum exact, so the comparison can be exact.
        (0..len as u64)
            .map(|i| ((i * 7 + seed * 13) % 11) as f64 - 5.0)
            .collect()
    }

    #[test]
    fn blocked_matches_naive_across_block_edges() {
        // Sizes straddle MR, NR, KC, MC and NC so every edge path runs.
        for &(m, k, n) in &[
            (1, 1, 1),
            (3, 5, 7),
            (130, 260, 9),
            (5, 300, 515),
            (9, 2, 1),
        ] {
            let a = values(m * k, 1);
            let b = values(k * n, 2);
            let mut c = vec![0.0; m * n];
            let ok = product_into(&a, &b, (m, k, n), &mut c);
            assert!(ok.is_ok());
            assert_eq!(c, naive(m, k, n, &a, &b), "m={m} k={k} n={n}");
        }
    }

    #[test]
    fn transposed_views_read_the_transpose() {
        // A stored as kxm and B as nxk, both read transposed.
        let (m, k, n) = (6, 5, 7);
        let a = values(m * k, 3);
        let b = values(k * n, 4);
        let mut at = vec![0.0; k * m];
        for i in 0..m {
            for p in 0..k {
                at[p * m + i] = a[i * k + p];
            }
        }
        let mut bt = vec![0.0; n * k];
        for p in 0..k {
            for j in 0..n {
                bt[j * k + p] = b[p * n + j];
            }
        }
        let mut c = vec![0.0; m * n];
        let ok = MatRef::row_major(&at, k, m)
            .and_then(|av| Ok((av.transposed(), MatRef::row_major(&bt, n, k)?.transposed())))
            .and_then(|(av, bv)| multiply_add(av, bv, &mut c));
        assert!(ok.is_ok());
        assert_eq!(c, naive(m, k, n, &a, &b));
    }

    #[test]
    fn mismatched_inner_dims_are_an_error() {
        let a = [0.0; 6];
        let mut c = [0.0; 4];
        let r = MatRef::row_major(&a, 2, 3)
            .and_then(|av| Ok((av, MatRef::row_major(&a, 2, 3)?)))
            .and_then(|(av, bv)| multiply_add(av, bv, &mut c));
        assert!(matches!(r, Err(OpError::Shape(_))));
    }

    #[test]
    fn the_product_lands_at_the_start_of_a_longer_slice_and_never_past_a_short_one() {
        // c may be longer than m×n: the product fills its start and the rest is untouched.
        let (m, k, n) = (2, 3, 4);
        let a = values(m * k, 5);
        let b = values(k * n, 6);
        let mut c = vec![7.0; m * n + 3];
        let ok = product_into(&a, &b, (m, k, n), &mut c);
        assert!(ok.is_ok());
        let want: Vec<f64> = naive(m, k, n, &a, &b).iter().map(|v| v + 7.0).collect();
        assert_eq!(c[..m * n], want[..]);
        assert_eq!(c[m * n..], [7.0; 3]);
        // One element short: refused, nothing written.
        let mut short = vec![0.0; m * n - 1];
        let r = product_into(&a, &b, (m, k, n), &mut short);
        assert!(
            matches!(&r, Err(OpError::Shape(msg)) if msg.contains("does not fit the 7 output elements")),
            "{r:?}"
        );
        assert_eq!(short, vec![0.0; m * n - 1]);
    }

    #[test]
    fn empty_products_add_nothing() {
        // k = 0 adds the empty sum to each element; m = 0 or n = 0 has no element.
        for (m, k, n) in [(2, 0, 3), (0, 4, 3), (2, 4, 0), (0, 0, 0)] {
            let a = values(m * k, 1);
            let b = values(k * n, 2);
            let mut c = vec![1.5; m * n + 1];
            let ok = product_into(&a, &b, (m, k, n), &mut c);
            assert!(ok.is_ok(), "m={m} k={k} n={n}");
            assert_eq!(c, vec![1.5; m * n + 1], "m={m} k={k} n={n}");
        }
    }
}
