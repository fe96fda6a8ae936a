//! Execution plans: a partition specialised to concrete input shapes. Building one infers
//! every shape, evaluates what is known without the inputs (shape arithmetic), assigns
//! every device value a slot (reusing slots whose values are dead; a Concat input made by
//! a kernel may instead get a part of its Concat's slot, see [`ConcatPart`]), and lists the
//! kernel launches with their arguments. A [`Workspace`] is one plan's device state for one run
//! at a time: its own queue, slot buffers and kernel objects with their arguments set.

use crate::cl::{ArgValue, Buffer, ClError, Kernel, Memory, Program, Queue};
use crate::device::Device;
use crate::error::OpenClError;
use crate::programs::{Family, ProgramCache};
use concord_core::{DType, Error, MemoryBudget, OpError, Shape, Target, Tensor};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

pub use concord_core::storage::{to_storage_bytes, Storage};

/// Where a value lives on the device during a run.
#[derive(Clone, Debug)]
pub enum Loc {
    /// A workspace slot, written by a kernel or by the input upload.
    Slot(usize),
    /// A read-only buffer shared by every workspace: a weight or a plan-time constant.
    Const(Arc<Buffer>),
}

/// One kernel argument, before it is bound to a workspace.
#[derive(Clone, Debug)]
pub enum Arg {
    Buf(Loc),
    /// The run's status word, which kernels set when an operand is bad (index out of range,
    /// integer division by zero).
    Status,
    I32(i32),
    F32(f32),
    I64(i64),
    Int8([i32; 8]),
}

/// One kernel launch.
#[derive(Clone, Debug)]
pub struct Launch {
    pub program: Arc<Program>,
    pub kernel: &'static str,
    pub global: Vec<usize>,
    pub local: Option<Vec<usize>>,
    pub args: Vec<Arg>,
}

/// Kernels whose scalar arguments travel in one read-only buffer instead (see
/// [`Builder::launch`]): their signatures list the launch's buffers in its order, then
/// `__global const long* P` holding its scalars in its order, an int8 as eight values and a
/// float as its bits (common.cl's P_INT, P_FLOAT, P_INT8 read them). PoCL copies every
/// argument of every command when it is enqueued, and its worker threads set each up and
/// free it again: on its `pthread` device a launch with a dozen scalars paid about a
/// microsecond more per command than one with a single buffer for them (torch_bert_encoder
/// 161.5 → 147.3 µs a forward there, 92.7 → 84.5 µs on `basic`). conv_shift and conv_rows
/// are left out: reading their geometry from the buffer made torch_unet's convs 5-10%
/// slower on the device (PoCL does not keep it in registers across their loops), more
/// than the command saves.
pub const PARAM_KERNELS: &[&str] = &[
    "gemm_block",
    "depthwise_inplace",
    "depthwise_flat",
    "binary_rows",
    "unary_strided",
    "copy_runs",
    "pad_planes",
    "layer_norm_rows",
    "squeeze_excite",
];

/// Bytes every slot has past its largest value. The CPU-device kernels load 16-lane
/// vectors (two for stride 2) that may run past a row's end; at the last row of a value
/// that is past its end, into this slack. What they read there only feeds lanes that are
/// dropped; nothing is ever written there.
pub const SLOT_SLACK: usize = 128;

/// Lanes of the CPU-device kernels' vector loads (float16, vload_half16).
pub const VECTOR_LANES: usize = 16;

/// The furthest past a value's end such loads reach, in bytes: two consecutive 16-lane
/// loads starting at the value's last element (depthwise_inplace's stride 2), of the widest
/// storage those kernels have (f32). Loads that reach further (a window's reach) read
/// padded copies sized for them (pad_planes' room past the last row), never a slot's end.
pub const MAX_VECTOR_OVERRUN: usize = (2 * VECTOR_LANES - 1) * std::mem::size_of::<f32>();

// Every slot's slack covers the furthest overrun; a kernel with wider vectors fails here.
const _: () = assert!(SLOT_SLACK >= MAX_VECTOR_OVERRUN);

/// The launches of one node, for profiling per node.
#[derive(Debug)]
pub struct NodeSteps {
    pub node: String,
    /// The node's op, for errors.
    pub op: &'static str,
    /// Nodes fused into this one: profiled with zero time, since theirs is included here.
    pub fused: Vec<String>,
    pub launches: Vec<Launch>,
}

/// A partition input as the plan expects it.
#[derive(Debug)]
pub struct InputSpec {
    pub name: String,
    pub slot: usize,
    pub storage: Storage,
}

/// Where a partition output is read from.
#[derive(Debug)]
pub enum OutputSpec {
    Device {
        loc: Loc,
        dtype: DType,
        storage: Storage,
        shape: Shape,
    },
    Host(Tensor),
}

/// A partition specialised to one set of input shapes.
#[derive(Debug)]
pub struct ExecPlan {
    pub inputs: Vec<InputSpec>,
    pub outputs: Vec<OutputSpec>,
    pub nodes: Vec<NodeSteps>,
    pub slot_bytes: Vec<usize>,
    /// For a slot that is part of another (a Concat input written in place, see
    /// [`ConcatPart`]): that slot and the byte offset; the workspace makes it a sub-buffer.
    pub slot_parents: Vec<Option<(usize, usize)>>,
    pub needs_status: bool,
    /// Idle workspaces; a run takes one (or makes one) and gives it back.
    pub pool: Mutex<Vec<Workspace>>,
    /// Set once a run of this plan has completed, so its kernels are compiled for the
    /// device (see `Runtime::first_runs`).
    pub warmed: std::sync::atomic::AtomicBool,
}

/// One run's device state: used by one run at a time, so its kernel objects' arguments are
/// set once, when it is made, and never touched concurrently.
#[derive(Debug)]
pub struct Workspace {
    /// Declared first so that it is dropped (and finished) before the buffers.
    pub queue: Queue,
    pub kernels: Vec<Vec<Kernel>>,
    pub slots: Vec<Memory>,
    pub status: Memory,
    /// The last forward read the status word back as 0, so the next need not clear it (a
    /// command saved; one costs a few microseconds on PoCL's `pthread` device). False for a
    /// new workspace, whose word holds anything, and after a kernel reported.
    pub status_clear: std::sync::atomic::AtomicBool,
}

/// Which GEMM kernel Conv, Gemm and MatMul use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GemmKernel {
    /// Register-blocked on CPU devices, local-memory tiled elsewhere.
    #[default]
    Auto,
    /// Tiles staged in local memory, register blocks read from it (GPU-shaped); with it,
    /// Softmax and LayerNormalization reduce each row in one work-group.
    LocalTiled,
    /// MR × NR register blocks read straight from cached memory (CPU-shaped).
    RegisterBlocked,
}

/// Rows of the register block that the CPU-device GEMM and conv kernels sum at a time (HR in
/// gemm.cl). Either gives the same values: each sum is the same multiply-adds in the same
/// order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BlockRows {
    /// Eight on a CPU device where one of its vector registers holds 16 floats (AVX-512,
    /// which has 32 of them), else four (AVX2's sixteen registers would spill eight rows of
    /// sums).
    #[default]
    Auto,
    /// Four, on any device.
    Four,
    /// Eight, on any device that runs the register-blocked kernels.
    Eight,
}

/// The environment variable that chooses [`BlockRows`] where the options leave it `Auto`:
/// `auto`, `4` or `8` (`cargo xtask oclgrind` asks for 8 on its simulated GPU, so that the
/// eight-row kernels' memory accesses are checked too).
pub const BLOCK_ROWS_VAR: &str = "CONCORD_OPENCL_BLOCK_ROWS";

impl BlockRows {
    /// The choice [`BLOCK_ROWS_VAR`] makes (`Auto` when unset); an unknown value is an
    /// error naming the variable.
    pub(crate) fn from_env() -> Result<BlockRows, crate::device::Unavailable> {
        env_choice(
            BLOCK_ROWS_VAR,
            "register block",
            &[
                ("auto", BlockRows::Auto),
                ("4", BlockRows::Four),
                ("8", BlockRows::Eight),
            ],
        )
    }

    /// The rows for a device (a CPU device or not) whose native float vectors hold
    /// `native_float_lanes` lanes.
    pub(crate) fn rows(self, is_cpu: bool, native_float_lanes: usize) -> usize {
        match self {
            BlockRows::Auto if is_cpu && native_float_lanes >= 16 => 8,
            BlockRows::Auto | BlockRows::Four => 4,
            BlockRows::Eight => 8,
        }
    }
}

/// Where a workspace keeps its slots (every intermediate tensor, the inputs and outputs, the
/// status word).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SlotMemory {
    /// Shared on CPU devices that have fine-grained buffer SVM (PoCL), buffers elsewhere.
    #[default]
    Auto,
    /// Device buffers: a forward's inputs, outputs and status word cross in transfer
    /// commands.
    Buffers,
    /// Fine-grained shared virtual memory: the host copies inputs in and outputs out in
    /// place, before and after the forward's commands, with no transfer command. A device
    /// without fine-grained buffer SVM leaves the executor unavailable, saying so.
    Shared,
}

/// The environment variable that chooses the slots' memory when the options leave it
/// [`SlotMemory::Auto`]: `auto`, `buffers` or `shared`. For comparing the two, and for
/// checking the buffer path on a device that would share.
pub const MEMORY_VAR: &str = "CONCORD_OPENCL_MEMORY";

impl SlotMemory {
    /// The memory `CONCORD_OPENCL_MEMORY` names (Auto when unset or empty); an unknown name
    /// leaves the executor unavailable, saying what the names are.
    pub(crate) fn from_env() -> Result<SlotMemory, crate::device::Unavailable> {
        env_choice(
            MEMORY_VAR,
            "slot memory",
            &[
                ("auto", SlotMemory::Auto),
                ("buffers", SlotMemory::Buffers),
                ("shared", SlotMemory::Shared),
            ],
        )
    }

    /// Whether a device (a CPU device or not, with fine-grained buffer SVM or not) shares
    /// its slots; `Shared` on a device without the SVM is an error naming the device.
    pub(crate) fn shares(
        self,
        is_cpu: bool,
        fine_grain_svm: bool,
        device: &str,
    ) -> Result<bool, String> {
        match self {
            SlotMemory::Auto => Ok(is_cpu && fine_grain_svm),
            SlotMemory::Buffers => Ok(false),
            SlotMemory::Shared if fine_grain_svm => Ok(true),
            SlotMemory::Shared => Err(format!(
                "shared slot memory ({MEMORY_VAR}=shared) needs fine-grained buffer SVM, \
                 which device `{device}` does not report"
            )),
        }
    }
}

/// The environment variable that forces a GEMM kernel family when the options leave it
/// [`GemmKernel::Auto`]: `auto`, `local-tiled` or `register-blocked` (the CPU-device
/// kernels: register-blocked GEMM, shifted and row convs, depthwise_inplace/rows, padded
/// MaxPool, copy_runs). For checking a kernel family on a device that would not pick it.
pub const GEMM_VAR: &str = "CONCORD_OPENCL_GEMM";

impl GemmKernel {
    /// The family `CONCORD_OPENCL_GEMM` names (Auto when unset or empty); an unknown name
    /// leaves the executor unavailable, saying what the names are.
    pub(crate) fn from_env() -> Result<GemmKernel, crate::device::Unavailable> {
        env_choice(
            GEMM_VAR,
            "GEMM kernel family",
            &[
                ("auto", GemmKernel::Auto),
                ("local-tiled", GemmKernel::LocalTiled),
                ("register-blocked", GemmKernel::RegisterBlocked),
            ],
        )
    }
}

/// The choice environment variable `var` names among `names` (see [`choice_named`]).
fn env_choice<T: Copy>(
    var: &str,
    what: &str,
    names: &[(&str, T)],
) -> Result<T, crate::device::Unavailable> {
    choice_named(var, &std::env::var(var).unwrap_or_default(), what, names)
}

/// The choice `value` (of variable `var`) names among `names`, the first (`auto`) when it is
/// empty; any other value leaves the executor unavailable, naming the variable, what it
/// chooses and the names it takes.
fn choice_named<T: Copy>(
    var: &str,
    value: &str,
    what: &str,
    names: &[(&str, T)],
) -> Result<T, crate::device::Unavailable> {
    let value = match value.trim() {
        "" => "auto",
        v => v,
    };
    if let Some(&(_, choice)) = names.iter().find(|(name, _)| *name == value) {
        return Ok(choice);
    }
    let listed: Vec<&str> = names.iter().map(|(name, _)| *name).collect();
    let (last, rest) = listed.split_last().map_or(("", &[][..]), |(l, r)| (*l, r));
    Err(crate::device::Unavailable {
        cause: concord_core::FallbackCause::NoDevice,
        reason: format!(
            "{var}={value:?} names no {what}; the names are {} and {last}",
            rest.join(", ")
        ),
    })
}

/// Values a kernel builder may read and write while a plan is being made.
pub struct Builder<'a> {
    pub device: &'a Device,
    /// The GEMM kernel in use (never Auto here).
    pub gemm: GemmKernel,
    pub programs: &'a ProgramCache,
    pub target: Target,
    pub weights: &'a WeightStore,
    /// The partition's initializers, host-known from the start.
    pub initializers: &'a BTreeMap<String, Tensor>,
    pub shapes: HashMap<String, Shape>,
    pub dtypes: HashMap<String, DType>,
    /// Values known on the host without the inputs: initializers and plan-time results.
    pub host: HashMap<String, Tensor>,
    pub loc: HashMap<String, Loc>,
    pub needs_status: bool,
    /// Every device buffer a plan asks for is checked against this before it is sized.
    pub budget: MemoryBudget,
    slots: Slots,
    /// Values each slot holds that are still live (a part's values are held by its parent).
    slot_values: Vec<HashSet<String>>,
    launches: Vec<Launch>,
    /// Values to be written straight into their Concat's output (see [`ConcatPart`]).
    pub concat_parts: HashMap<String, ConcatPart>,
    /// The slot of each Concat output that one of its parts has already claimed.
    concat_slots: HashMap<String, usize>,
    /// Values that are strided windows onto another value's buffer (see [`View`]), not yet
    /// copied out.
    views: HashMap<String, View>,
    /// Values that must have buffers of their own (the partition's outputs): never left as
    /// views.
    pub materialized: HashSet<String>,
    /// The first launch that could not be made (its parameters not uploaded), reported by
    /// [`Builder::take_launches`].
    launch_error: Option<OpError>,
}

/// A value that a movement op made as a window onto another value's buffer instead of a
/// copy: element `c` (a coordinate of the value's shape) is at `offset + Σ c·strides` of
/// `base`. Transpose, Slice, Split, Expand, a Gather of constant indices and the reshapes
/// of such a window make views; MatMul, Gemm, the binary and the unary kernels read them in
/// place; any other consumer gets a contiguous copy, made by the first that asks
/// ([`Builder::input`]), which is the copy the movement op made before views. A view holds
/// its base's slot live until it is released or copied out. A window that is the first
/// elements of its base in order is no view but another name for the base.
#[derive(Clone, Debug)]
pub struct View {
    pub base: Loc,
    pub offset: i64,
    pub strides: Vec<i64>,
}

/// A Concat input that its producer writes straight into the Concat's output: the value's
/// slot is a part of the output's slot (a sub-buffer at `offset` bytes), so the Concat
/// copies nothing for it. Chosen before the plan is built, where the Concat's outer extent
/// is 1 (its inputs are contiguous runs of the output) and the offset is one the device
/// lets a sub-buffer start at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConcatPart {
    /// The Concat's output.
    pub concat: String,
    /// The Concat output's size in bytes.
    pub concat_bytes: usize,
    /// Where the value starts in the output, in bytes.
    pub offset: usize,
}

/// Device copies of host tensors (weights and plan-time constants), uploaded once and
/// shared by every plan and workspace of a partition.
#[derive(Debug, Default)]
pub struct WeightStore {
    buffers: Mutex<HashMap<(String, Storage), Arc<Buffer>>>,
}

#[derive(Debug, Default)]
struct Slots {
    bytes: Vec<usize>,
    /// Per slot: the slot and byte offset it is a part of. A part is never free itself (its
    /// values keep its parent live) and never handed to another value.
    parents: Vec<Option<(usize, usize)>>,
    free: Vec<usize>,
}

/// The OpenCL build defines of a storage layout.
pub trait StorageDefines {
    /// The define that builds a compute family for this storage.
    fn variant(self) -> &'static str;
    /// The movement family's element type of the same size.
    fn bits_variant(self) -> &'static str;
}

impl StorageDefines for Storage {
    fn variant(self) -> &'static str {
        match self {
            Storage::F32 => "-DT_F32",
            Storage::F16 => "-DT_F16",
            Storage::I64 => "-DT_I64",
            Storage::U8 => "-DT_U8",
        }
    }

    fn bits_variant(self) -> &'static str {
        match self {
            Storage::F32 => "-DELEM=uint",
            Storage::F16 => "-DELEM=ushort",
            Storage::I64 => "-DELEM=ulong",
            Storage::U8 => "-DELEM=uchar",
        }
    }
}

impl WeightStore {
    /// The device copy of `tensor` under `key`, uploading it on first use.
    pub fn get_or_upload(
        &self,
        device: &Device,
        key: &str,
        tensor: &Tensor,
        storage: Storage,
    ) -> Result<Arc<Buffer>, OpenClError> {
        let bytes = to_storage_bytes(tensor, storage)
            .map_err(|e| OpenClError::Runtime(format!("uploading `{key}`: {e}")))?;
        // The content is part of the key: plan-time constants of one name differ between
        // input shapes (a Shape result, a Resize tap table).
        let key = format!(
            "{key}#{:016x}#{}",
            crate::programs::fnv1a(&bytes),
            tensor.shape()
        );
        let mut buffers = self.buffers.lock().map_err(|_| OpenClError::Poisoned)?;
        if let Some(b) = buffers.get(&(key.clone(), storage)) {
            return Ok(b.clone());
        }
        let buffer = device.context.buffer(bytes.len())?;
        let queue = device.context.queue(false)?;
        queue.write(&buffer, &bytes)?;
        queue.finish()?;
        let buffer = Arc::new(buffer);
        buffers.insert((key, storage), buffer.clone());
        Ok(buffer)
    }
}

impl Slots {
    /// A free slot of at least `bytes` (the smallest that fits, else the largest grown).
    fn take(&mut self, bytes: usize) -> usize {
        let fit = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, &s)| self.bytes[s] >= bytes)
            .min_by_key(|(_, &s)| self.bytes[s])
            .map(|(i, _)| i);
        let pick = fit.or_else(|| {
            self.free
                .iter()
                .enumerate()
                .max_by_key(|(_, &s)| self.bytes[s])
                .map(|(i, _)| i)
        });
        match pick {
            Some(i) => {
                let slot = self.free.swap_remove(i);
                self.bytes[slot] = self.bytes[slot].max(bytes);
                slot
            }
            None => {
                self.bytes.push(bytes);
                self.parents.push(None);
                self.bytes.len() - 1
            }
        }
    }

    /// A new slot that is `bytes` bytes of `parent` from `offset` on.
    fn part(&mut self, parent: usize, offset: usize, bytes: usize) -> usize {
        self.bytes.push(bytes);
        self.parents.push(Some((parent, offset)));
        self.bytes.len() - 1
    }

    /// The slot whose buffer holds `slot`'s values: its parent for a part, else itself.
    fn owner(&self, slot: usize) -> usize {
        match self.parents.get(slot) {
            Some(Some((parent, _))) => *parent,
            _ => slot,
        }
    }
}

impl<'a> Builder<'a> {
    pub fn new(
        device: &'a Device,
        programs: &'a ProgramCache,
        target: Target,
        weights: &'a WeightStore,
        initializers: &'a BTreeMap<String, Tensor>,
        gemm: GemmKernel,
    ) -> Self {
        let gemm = match gemm {
            GemmKernel::Auto if device.is_cpu => GemmKernel::RegisterBlocked,
            // A device too small for the tiled kernel's 256-item work-group or its local
            // tiles gets the register-blocked kernel, which needs neither.
            GemmKernel::Auto
                if !crate::ops::local_tiled_fits(
                    device.max_work_group_size,
                    device.local_mem_bytes,
                ) =>
            {
                GemmKernel::RegisterBlocked
            }
            GemmKernel::Auto => GemmKernel::LocalTiled,
            chosen => chosen,
        };
        Builder {
            device,
            gemm,
            programs,
            target,
            weights,
            initializers,
            shapes: HashMap::new(),
            dtypes: HashMap::new(),
            host: HashMap::new(),
            loc: HashMap::new(),
            needs_status: false,
            budget: MemoryBudget::default(),
            slots: Slots::default(),
            slot_values: Vec::new(),
            launches: Vec::new(),
            concat_parts: HashMap::new(),
            concat_slots: HashMap::new(),
            views: HashMap::new(),
            materialized: HashSet::new(),
            launch_error: None,
        }
    }

    pub fn storage(&self, dtype: DType) -> Storage {
        Storage::of(dtype, crate::executor::float_storage(&self.target))
    }

    pub fn shape(&self, name: &str) -> Result<&Shape, OpError> {
        self.shapes
            .get(name)
            .ok_or_else(|| OpError::Shape(format!("the shape of `{name}` is not known")))
    }

    pub fn dtype(&self, name: &str) -> Result<DType, OpError> {
        self.dtypes
            .get(name)
            .copied()
            .ok_or_else(|| OpError::Shape(format!("the dtype of `{name}` is not known")))
    }

    /// The program of `family` for `variant`.
    pub fn program(&self, family: Family, variant: &str) -> Result<Arc<Program>, OpError> {
        self.programs
            .get(self.device, family, variant)
            .map_err(|e| OpError::Unsupported(format!("OpenCL executor: {e}")))
    }

    /// Gives `name` a fresh slot big enough for its shape and storage; a Concat input
    /// chosen as a [`ConcatPart`] gets a part of its Concat's slot instead (claiming that
    /// slot first if no other part has), and a Concat output the slot its parts claimed.
    pub fn alloc(&mut self, name: &str) -> Result<Loc, OpError> {
        if let Some(&slot) = self.concat_slots.get(name) {
            return Ok(Loc::Slot(slot));
        }
        let storage = self.storage(self.dtype(name)?);
        let shape = self.shape(name)?;
        let bytes = shape
            .dims()
            .iter()
            .try_fold(storage.size() as u64, |acc, &d| acc.checked_mul(d as u64));
        let bytes = self.budget.check_bytes(bytes, || {
            format!(
                "the device buffer of `{}` ({storage:?} {shape})",
                concord_core::text::elide_middle(name, 80)
            )
        })?;
        let bytes = usize::try_from(bytes).map_err(|_| OpError::MemoryBudget {
            what: format!(
                "the device buffer of `{}`",
                concord_core::text::elide_middle(name, 80)
            ),
            bytes: Some(bytes),
            limit: self.budget.limit(),
        })?;
        let slot = match self.concat_parts.get(name).cloned() {
            Some(part) => {
                let parent = self.concat_slot(&part)?;
                self.slots.part(parent, part.offset, bytes)
            }
            None => self.slots.take(bytes),
        };
        if self.slot_values.len() <= slot {
            self.slot_values.resize_with(slot + 1, HashSet::new);
        }
        let owner = self.slots.owner(slot);
        self.slot_values[owner].insert(name.to_string());
        let loc = Loc::Slot(slot);
        self.loc.insert(name.to_string(), loc.clone());
        Ok(loc)
    }

    /// The slot of `part`'s Concat output, taken (and held for the output) by the first
    /// part that asks.
    fn concat_slot(&mut self, part: &ConcatPart) -> Result<usize, OpError> {
        if let Some(&slot) = self.concat_slots.get(&part.concat) {
            return Ok(slot);
        }
        let bytes = self
            .budget
            .check_bytes(Some(part.concat_bytes as u64), || {
                format!(
                    "the device buffer of `{}`",
                    concord_core::text::elide_middle(&part.concat, 80)
                )
            })?;
        let slot = self.slots.take(bytes as usize);
        if self.slot_values.len() <= slot {
            self.slot_values.resize_with(slot + 1, HashSet::new);
        }
        self.slot_values[slot].insert(part.concat.clone());
        self.loc.insert(part.concat.clone(), Loc::Slot(slot));
        self.concat_slots.insert(part.concat.clone(), slot);
        Ok(slot)
    }

    /// Whether `name` lives in `slot`'s buffer from byte `offset` on: a Concat input its
    /// producer already wrote into the Concat's output.
    pub fn is_part_at(&self, name: &str, slot: usize, offset: usize) -> bool {
        match self.loc.get(name) {
            Some(Loc::Slot(s)) => self.slots.parents.get(*s) == Some(&Some((slot, offset))),
            _ => false,
        }
    }

    /// Makes `alias` another name for `of`'s device data (Reshape and friends).
    pub fn alias(&mut self, alias: &str, of: &str) -> Result<(), OpError> {
        let loc = self.input(of)?;
        self.hold(&loc, alias);
        self.loc.insert(alias.to_string(), loc);
        Ok(())
    }

    /// The device location of a value, uploading it first when it is host-known and
    /// copying it out contiguously when it is a [`View`].
    pub fn input(&mut self, name: &str) -> Result<Loc, OpError> {
        if let Some(loc) = self.loc.get(name) {
            return Ok(loc.clone());
        }
        if let Some(view) = self.views.remove(name) {
            let dims = self.shape(name)?.dims().to_vec();
            let storage = self.storage(self.dtype(name)?);
            // The copy's buffer is taken while the base still holds its own, so the two
            // are never the same slot.
            let dst = self.alloc(name)?;
            self.unhold(&view.base, name);
            crate::ops::copy_nd(
                self,
                storage,
                view.base,
                dst.clone(),
                &dims,
                &view.strides,
                &strides_of(&dims),
                view.offset,
                0,
            )?;
            return Ok(dst);
        }
        let Some(tensor) = self.host_value(name) else {
            return Err(OpError::Shape(format!(
                "`{name}` is neither on the device nor known on the host"
            )));
        };
        let storage = self.storage(tensor.dtype());
        let buffer = self
            .weights
            .get_or_upload(self.device, name, tensor, storage)
            .map_err(|e| OpError::Unsupported(format!("OpenCL executor: {e}")))?;
        let loc = Loc::Const(buffer);
        self.loc.insert(name.to_string(), loc.clone());
        Ok(loc)
    }

    /// `name` as a window onto a buffer: its [`View`], or its own buffer with row-major
    /// strides.
    pub fn view(&mut self, name: &str) -> Result<View, OpError> {
        if let Some(view) = self.views.get(name) {
            return Ok(view.clone());
        }
        let strides = strides_of(self.shape(name)?.dims());
        Ok(View {
            base: self.input(name)?,
            offset: 0,
            strides,
        })
    }

    /// Whether `name` is a [`View`] (no buffer of its own yet).
    pub fn is_view(&self, name: &str) -> bool {
        self.views.contains_key(name)
    }

    /// Makes `name` (whose shape is known) the window `view`: another name for the base
    /// when the window is all of it in order, else a [`View`], or at once a copy when
    /// `name` must have a buffer of its own.
    pub fn set_view(&mut self, name: &str, view: View) -> Result<(), OpError> {
        let dims = self.shape(name)?.dims().to_vec();
        if view.strides.len() != dims.len() {
            return Err(OpError::Shape(format!(
                "the view `{name}` has {} strides for shape {dims:?}",
                view.strides.len()
            )));
        }
        let (_, flat) = coalesce(&dims, &[&view.strides, &strides_of(&dims)]);
        let whole = flat[0] == flat[1] && (flat[0][..] == [1] || flat[0][..] == [0]);
        self.hold(&view.base, name);
        if view.offset == 0 && whole {
            self.loc.insert(name.to_string(), view.base);
            return Ok(());
        }
        self.views.insert(name.to_string(), view);
        if self.materialized.contains(name) {
            self.input(name)?;
        }
        Ok(())
    }

    /// `name` keeps `base`'s slot live (an alias or a view of what is there).
    fn hold(&mut self, base: &Loc, name: &str) {
        if let Loc::Slot(s) = base {
            let owner = self.slots.owner(*s);
            if let Some(values) = self.slot_values.get_mut(owner) {
                values.insert(name.to_string());
            }
        }
    }

    /// `name` no longer keeps `base`'s slot live (released, or a view copied out); the slot
    /// is free once nothing does.
    fn unhold(&mut self, base: &Loc, name: &str) {
        if let Loc::Slot(s) = base {
            let s = self.slots.owner(*s);
            if let Some(values) = self.slot_values.get_mut(s) {
                values.remove(name);
                if values.is_empty() && !self.slots.free.contains(&s) {
                    self.slots.free.push(s);
                }
            }
        }
    }

    /// The value of `name` when it is known on the host (an initializer or a plan-time
    /// result).
    pub fn host_value(&self, name: &str) -> Option<&Tensor> {
        self.host.get(name).or_else(|| self.initializers.get(name))
    }

    /// Uploads a tensor made at plan time (folded weights, tap tables) under `key`.
    pub fn constant(
        &mut self,
        key: &str,
        tensor: &Tensor,
        storage: Storage,
    ) -> Result<Loc, OpError> {
        let buffer = self
            .weights
            .get_or_upload(self.device, key, tensor, storage)
            .map_err(|e| OpError::Unsupported(format!("OpenCL executor: {e}")))?;
        Ok(Loc::Const(buffer))
    }

    /// Adds a launch of `kernel` from `program` over `global` work items (rounded up to
    /// multiples of `local`, which kernels guard against).
    pub fn launch(
        &mut self,
        program: &Arc<Program>,
        kernel: &'static str,
        global: &[usize],
        local: Option<&[usize]>,
        args: Vec<Arg>,
    ) {
        let global = match local {
            Some(l) => global
                .iter()
                .zip(l)
                .map(|(&g, &l)| g.div_ceil(l.max(1)) * l.max(1))
                .collect(),
            None => global.to_vec(),
        };
        if args.iter().any(|a| matches!(a, Arg::Status)) {
            self.needs_status = true;
        }
        let args = if PARAM_KERNELS.contains(&kernel) {
            match self.pack_params(args) {
                Ok(args) => args,
                Err(e) => {
                    self.launch_error.get_or_insert(e);
                    return;
                }
            }
        } else {
            args
        };
        self.launches.push(Launch {
            program: program.clone(),
            kernel,
            global,
            local: local.map(<[usize]>::to_vec),
            args,
        });
    }

    /// `args` with every scalar moved, in order, into one read-only buffer of i64 (a float as
    /// its f32 bits, an int8 as eight values) passed last, shared by every launch with the
    /// same values (see [`PARAM_KERNELS`]).
    fn pack_params(&mut self, args: Vec<Arg>) -> Result<Vec<Arg>, OpError> {
        let mut values = Vec::new();
        let mut kept = Vec::with_capacity(args.len());
        for arg in args {
            match arg {
                Arg::Buf(_) | Arg::Status => kept.push(arg),
                Arg::I32(v) => values.push(i64::from(v)),
                Arg::F32(v) => values.push(i64::from(v.to_bits())),
                Arg::I64(v) => values.push(v),
                Arg::Int8(v) => values.extend(v.map(i64::from)),
            }
        }
        let t =
            Tensor::from_i64([values.len()], values).map_err(|e| OpError::Shape(e.to_string()))?;
        kept.push(Arg::Buf(self.constant("params", &t, Storage::I64)?));
        Ok(kept)
    }

    /// A 1-D launch over `n` items with the elementwise work-group size.
    pub fn launch_1d(
        &mut self,
        program: &Arc<Program>,
        kernel: &'static str,
        n: usize,
        args: Vec<Arg>,
    ) {
        self.launch(program, kernel, &[n], Some(&[64]), args);
    }

    /// The launches added since the last call, or the error of one that could not be made.
    pub fn take_launches(&mut self) -> Result<Vec<Launch>, OpError> {
        if let Some(e) = self.launch_error.take() {
            return Err(e);
        }
        Ok(std::mem::take(&mut self.launches))
    }

    /// Marks `name` dead: its slot is free once no live value shares it.
    pub fn release(&mut self, name: &str) {
        let base = match self.views.remove(name) {
            Some(view) => Some(view.base),
            None => self.loc.get(name).cloned(),
        };
        if let Some(base) = base {
            self.unhold(&base, name);
        }
    }

    /// The size of every slot's buffer: the largest value it holds plus [`SLOT_SLACK`]; a
    /// part reaches to its parent's end, so that its vector loads past a row's end stay in
    /// the buffer as a slot's do.
    pub fn slot_bytes(&self) -> Vec<usize> {
        let whole = |s: usize| self.slots.bytes[s] + SLOT_SLACK;
        (0..self.slots.bytes.len())
            .map(|s| match self.slots.parents[s] {
                Some((parent, offset)) => whole(parent).saturating_sub(offset),
                None => whole(s),
            })
            .collect()
    }

    /// Each slot's parent and offset, for parts (see [`Builder::slot_bytes`]).
    pub fn slot_parents(&self) -> Vec<Option<(usize, usize)>> {
        self.slots.parents.clone()
    }
}

/// A work-group shape for kernels over (output column, output row, plane): whole rows of
/// up to 64 columns, and several rows when rows are short, so that a CPU device schedules
/// few, substantial work-groups.
pub fn window_local(columns: usize, rows: usize) -> [usize; 3] {
    let x = columns.next_multiple_of(8).clamp(8, 64);
    let y = (64 / x).clamp(1, rows.max(1));
    [x, y, 1]
}

/// Converts a 32-bit index argument, refusing sizes the kernels cannot address.
pub fn i32_arg(v: usize, what: &str) -> Result<i32, OpError> {
    i32::try_from(v).map_err(|_| {
        OpError::Unsupported(format!(
            "{what} ({v}) is larger than the OpenCL kernels' 32-bit indexing allows"
        ))
    })
}

/// Packs up to eight dims or strides into an `int8` argument.
pub fn int8(values: &[i64]) -> Result<[i32; 8], OpError> {
    if values.len() > 8 {
        return Err(OpError::Unsupported(format!(
            "rank {} is more than the 8 the OpenCL kernels handle",
            values.len()
        )));
    }
    let mut out = [0i32; 8];
    for (o, &v) in out.iter_mut().zip(values) {
        *o = i32::try_from(v).map_err(|_| {
            OpError::Unsupported(format!(
                "extent or stride {v} is larger than the OpenCL kernels' 32-bit indexing allows"
            ))
        })?;
    }
    Ok(out)
}

/// An element offset or stride as a kernel's 32-bit argument (negative for a view that
/// walks backwards).
pub fn i32_offset(v: i64) -> Result<i32, OpError> {
    i32::try_from(v).map_err(|_| {
        OpError::Unsupported(format!(
            "offset or stride {v} exceeds the kernels' 32-bit indexing"
        ))
    })
}

/// Row-major strides of `dims` as i64.
pub fn strides_of(dims: &[usize]) -> Vec<i64> {
    Shape::new(dims.to_vec())
        .strides()
        .into_iter()
        .map(|s| s as i64)
        .collect()
}

/// An iteration space with fewer axes that visits the same offsets in the same order:
/// axes of extent 1 are dropped, and an axis is merged into the next inner one where every
/// operand steps over it as one run (stride = inner stride × inner extent). Strided copies
/// and broadcasting kernels then divide once per remaining axis instead of once per axis
/// of the value (a [1, C, H, W] × [1, C, 1, 1] product becomes [C, H·W]). Returns the
/// dims and each operand's strides; an empty space (every extent 1) is one axis of 1.
pub fn coalesce(dims: &[usize], strides: &[&[i64]]) -> (Vec<usize>, Vec<Vec<i64>>) {
    let mut out_dims: Vec<usize> = Vec::with_capacity(dims.len());
    let mut out_strides: Vec<Vec<i64>> = vec![Vec::with_capacity(dims.len()); strides.len()];
    for (axis, &d) in dims.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let mergeable = out_dims.last().is_some() && {
            strides.iter().zip(&out_strides).all(|(s, o)| {
                // The previous kept axis (outer) steps over this one as one run.
                o.last().copied() == Some(s[axis] * d as i64)
            })
        };
        if mergeable {
            if let Some(last) = out_dims.last_mut() {
                *last *= d;
            }
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                if let Some(last) = o.last_mut() {
                    *last = s[axis];
                }
            }
        } else {
            out_dims.push(d);
            for (s, o) in strides.iter().zip(out_strides.iter_mut()) {
                o.push(s[axis]);
            }
        }
    }
    if out_dims.is_empty() {
        out_dims.push(1);
        for o in &mut out_strides {
            o.push(0);
        }
    }
    (out_dims, out_strides)
}

impl ExecPlan {
    /// A fresh workspace: slot memory, a queue and one kernel object per launch with every
    /// argument bound. A failure names what was being made (and the node, for its kernels);
    /// whatever was made before it is released, and nothing shared is touched.
    /// With `shared`, the slots and the status word are fine-grained SVM (see
    /// [`SlotMemory`]), else device buffers.
    pub fn new_workspace(&self, device: &Device, shared: bool) -> Result<Workspace, Error> {
        let setup = |what: String| move |e: ClError| OpenClError::from(e).in_partition(&what);
        // Gated on CPU devices, where it was measured to help (see `Queue::scope`), but for
        // those that run commands inline (`Device::gate_queues`); a GPU's driver starts each
        // command as it comes, overlapping the host's enqueueing.
        let queue = device
            .context
            .queue(device.gate_queues())
            .map_err(setup("making a workspace's queue".into()))?;
        let new_memory = |bytes: usize| {
            if shared {
                device.context.svm(bytes).map(Memory::Svm)
            } else {
                device.context.buffer(bytes).map(Memory::Buffer)
            }
        };
        let mut slots: Vec<Memory> = Vec::with_capacity(self.slot_bytes.len());
        for (i, &bytes) in self.slot_bytes.iter().enumerate() {
            let what = || {
                format!(
                    "making a workspace: slot {i} of {} ({bytes} bytes)",
                    self.slot_bytes.len()
                )
            };
            // A part's parent was taken before it, so it is made already.
            let buffer = match self.slot_parents.get(i).copied().flatten() {
                Some((parent, offset)) => slots
                    .get(parent)
                    .ok_or_else(|| {
                        OpenClError::Runtime(format!(
                            "{}: its parent slot {parent} comes after it",
                            what()
                        ))
                        .in_partition("making a workspace")
                    })?
                    .part(offset, bytes)
                    .map_err(setup(format!(
                        "{} (part of slot {parent} at byte {offset})",
                        what()
                    )))?,
                None => new_memory(bytes).map_err(setup(what()))?,
            };
            slots.push(buffer);
        }
        let status = new_memory(4).map_err(setup(
            "making a workspace: the status word (4 bytes)".into(),
        ))?;
        let mut kernels = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let mut node_kernels = Vec::with_capacity(node.launches.len());
            for launch in &node.launches {
                let at_node = |e: OpenClError| {
                    e.at_step(
                        &node.node,
                        node.op,
                        &format!("making kernel {} for a workspace", launch.kernel),
                    )
                };
                let mut kernel = launch
                    .program
                    .kernel(launch.kernel)
                    .map_err(|e| at_node(e.into()))?;
                for (i, arg) in launch.args.iter().enumerate() {
                    let value = match arg {
                        Arg::Buf(Loc::Slot(s)) => slots
                            .get(*s)
                            .ok_or_else(|| {
                                at_node(OpenClError::Runtime(format!(
                                    "slot {s} was never allocated"
                                )))
                            })?
                            .arg(),
                        Arg::Buf(Loc::Const(b)) => ArgValue::Buffer(b),
                        Arg::Status => status.arg(),
                        Arg::I32(v) => ArgValue::I32(*v),
                        Arg::F32(v) => ArgValue::F32(*v),
                        Arg::I64(v) => ArgValue::I64(*v),
                        Arg::Int8(v) => ArgValue::Int8(*v),
                    };
                    kernel
                        .set_arg(i as u32, value)
                        .map_err(|e| at_node(e.into()))?;
                }
                node_kernels.push(kernel);
            }
            kernels.push(node_kernels);
        }
        Ok(Workspace {
            queue,
            kernels,
            slots,
            status,
            status_clear: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

/// The shapes of a run's inputs, as the plan cache key.
pub fn shape_key(inputs: &BTreeMap<String, Tensor>, names: &[String]) -> Vec<Vec<usize>> {
    names
        .iter()
        .map(|n| inputs.get(n).map(|t| t.dims().to_vec()).unwrap_or_default())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{choice_named, coalesce, BlockRows, SlotMemory, Slots};

    #[test]
    fn slots_are_shared_on_cpu_devices_with_fine_grained_svm_or_when_asked() {
        assert_eq!(SlotMemory::Auto.shares(true, true, "cpu"), Ok(true));
        assert_eq!(SlotMemory::Auto.shares(true, false, "cpu"), Ok(false));
        assert_eq!(SlotMemory::Auto.shares(false, true, "gpu"), Ok(false));
        assert_eq!(SlotMemory::Buffers.shares(true, true, "cpu"), Ok(false));
        assert_eq!(SlotMemory::Shared.shares(false, true, "gpu"), Ok(true));
        let refused = SlotMemory::Shared.shares(true, false, "old cpu");
        assert!(
            refused.as_ref().is_err_and(
                |why| why.contains("old cpu") && why.contains("fine-grained buffer SVM")
            ),
            "{refused:?}"
        );
    }

    /// The environment variables' values: a name picks its choice, empty (or blank) is
    /// `auto`, anything else is refused naming the variable, the value and every name.
    #[test]
    fn a_variable_names_its_choice_and_an_unknown_value_is_refused() {
        let names = [
            ("auto", BlockRows::Auto),
            ("4", BlockRows::Four),
            ("8", BlockRows::Eight),
        ];
        let pick = |value| choice_named("VAR", value, "register block", &names);
        assert_eq!(pick("8").ok(), Some(BlockRows::Eight));
        assert_eq!(pick(" 4 ").ok(), Some(BlockRows::Four));
        assert_eq!(pick("auto").ok(), Some(BlockRows::Auto));
        assert_eq!(pick("").ok(), Some(BlockRows::Auto));
        assert_eq!(pick("  ").ok(), Some(BlockRows::Auto));
        let refused = pick("6")
            .map(|choice| format!("{choice:?}"))
            .map_err(|e| e.reason);
        assert_eq!(
            refused,
            Err("VAR=\"6\" names no register block; the names are auto, 4 and 8".to_string())
        );
    }

    #[test]
    fn block_rows_are_eight_only_on_cpu_devices_with_16_float_vectors_or_when_asked() {
        assert_eq!(BlockRows::Auto.rows(true, 16), 8);
        assert_eq!(BlockRows::Auto.rows(true, 8), 4);
        assert_eq!(BlockRows::Auto.rows(true, 1), 4);
        assert_eq!(BlockRows::Auto.rows(false, 16), 4);
        assert_eq!(BlockRows::Four.rows(true, 16), 4);
        assert_eq!(BlockRows::Eight.rows(false, 1), 8);
    }

    #[test]
    fn a_part_is_never_handed_out_and_names_its_parent() {
        let mut slots = Slots::default();
        let parent = slots.take(1024);
        let part = slots.part(parent, 512, 256);
        assert_ne!(part, parent);
        assert_eq!(slots.owner(part), parent);
        assert_eq!(slots.owner(parent), parent);
        // Once the parent is free, a new value of the part's size gets the parent (grown if
        // need be), never the part.
        slots.free.push(parent);
        assert_eq!(slots.take(256), parent);
        let fresh = slots.take(256);
        assert!(fresh != part && fresh != parent);
        assert!(slots.parents[parent].is_none());
        assert_eq!(slots.parents[part], Some((parent, 512)));
    }

    #[test]
    fn coalesce_drops_unit_axes_and_merges_runs() {
        // A [1, C, H, W] × [1, C, 1, 1] broadcast: the operand repeats over H·W.
        let (dims, s) = coalesce(&[1, 8, 4, 5], &[&[160, 20, 5, 1], &[8, 1, 0, 0]]);
        assert_eq!(dims, vec![8, 20]);
        assert_eq!(s, vec![vec![20, 1], vec![1, 0]]);
        // A transpose that only moves an axis of extent 1 is a flat copy.
        let (dims, s) = coalesce(&[17, 1, 32], &[&[32, 544, 1], &[32, 32, 1]]);
        assert_eq!(dims, vec![544]);
        assert_eq!(s, vec![vec![1], vec![1]]);
        // A real transpose keeps its axes.
        let (dims, s) = coalesce(&[3, 4], &[&[1, 3], &[4, 1]]);
        assert_eq!(dims, vec![3, 4]);
        assert_eq!(s, vec![vec![1, 3], vec![4, 1]]);
        // Nothing but unit axes: one element.
        let (dims, s) = coalesce(&[1, 1], &[&[1, 1]]);
        assert_eq!(dims, vec![1]);
        assert_eq!(s, vec![vec![0]]);
    }
}
