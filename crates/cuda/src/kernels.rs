//! The kernel sources: one CUDA C file per op family under `kernels/`, embedded at build
//! time. Each family is compiled on its own, with the shared prelude in front of it.

/// The shared definitions every family starts with (storage types, strided iteration,
/// block reductions).
pub const PRELUDE: &str = include_str!("../kernels/prelude.cu");

/// A family of kernels compiled together into one module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Elementwise,
    Movement,
    Norm,
    Reduce,
    Pool,
    Resize,
}

impl Family {
    /// Every family, so a test can compile them all.
    pub const ALL: [Family; 6] = [
        Family::Elementwise,
        Family::Movement,
        Family::Norm,
        Family::Reduce,
        Family::Pool,
        Family::Resize,
    ];

    /// The file stem under `kernels/`.
    pub fn name(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Movement => "movement",
            Family::Norm => "norm",
            Family::Reduce => "reduce",
            Family::Pool => "pool",
            Family::Resize => "resize",
        }
    }

    /// The family's own file.
    pub fn body(self) -> &'static str {
        match self {
            Family::Elementwise => include_str!("../kernels/elementwise.cu"),
            Family::Movement => include_str!("../kernels/movement.cu"),
            Family::Norm => include_str!("../kernels/norm.cu"),
            Family::Reduce => include_str!("../kernels/reduce.cu"),
            Family::Pool => include_str!("../kernels/pool.cu"),
            Family::Resize => include_str!("../kernels/resize.cu"),
        }
    }

    /// A kernel every build of the family defines, to load the module by.
    pub fn probe_kernel(self) -> &'static str {
        match self {
            Family::Elementwise => "unary_f32",
            Family::Movement => "copy_b32",
            Family::Norm => "softmax_f32",
            Family::Reduce => "reduce_f32",
            Family::Pool => "pool_f32",
            Family::Resize => "resize_axis_f32_f32",
        }
    }

    /// The complete compilation unit NVRTC sees: the op codes of concord-core's op table
    /// (`U_*`, `B_*`, so a kernel's `case U_RELU:` and its Rust caller cannot disagree),
    /// the prelude, then the family.
    pub fn source(self) -> String {
        format!(
            "{}{PRELUDE}\n// ---- kernels/{}.cu\n{}",
            concord_core::op::kernel_code_defines(),
            self.name(),
            self.body()
        )
    }
}
