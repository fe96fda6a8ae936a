//! The memory budget: the most bytes one allocation whose size comes from a model or an
//! input may take. Every such allocation (a kernel's outputs, a folded value, a device
//! buffer, a random input, a file read) is sized with checked arithmetic and checked
//! against a [`MemoryBudget`] before it is made, so a model whose shapes imply 10^12
//! elements is a typed error naming what asked for the bytes, never an abort.
//!
//! The budget bounds each allocation (a node's outputs count together, and the reference
//! counts a computing kernel's f64 working copy with them), not the sum of everything
//! alive: a net whose values each fit but whose live set does not can still exhaust memory
//! (a limit on the live set needs every executor's frees accounted, which no executor does
//! yet).
//!
//! The default ([`MemoryBudget::machine_default`]) is half of the smallest of the machine's
//! physical memory (`MemTotal` in `/proc/meminfo`), the cgroup's memory limit
//! (`/sys/fs/cgroup/memory.max`, or cgroup v1's `memory.limit_in_bytes`) and the process's
//! address-space limit (`RLIMIT_AS`, read from `/proc/self/limits`). Half, because the
//! operands of the node that allocates are alive while it runs. Where none of these can be
//! read (not Linux), the default is [`FALLBACK_LIMIT`].

use crate::dtype::DType;
use crate::error::OpError;
use std::fmt;
use std::sync::OnceLock;

/// The default limit where the machine's memory cannot be read: 4 GiB.
pub const FALLBACK_LIMIT: u64 = 4 << 30;

/// The environment variable that sets the budget of every net that does not set its own
/// (a number of bytes, optionally with a K, M, G or T suffix, binary: `512M`, `8G`).
pub const MEMORY_LIMIT_ENV: &str = "CONCORD_MEMORY_LIMIT";

/// The most bytes one allocation sized by a model or an input may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryBudget {
    limit: u64,
}

/// Where a budget's limit came from, for messages and `concord info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineMemory {
    /// `MemTotal`, bytes.
    pub mem_total: Option<u64>,
    /// The cgroup's memory limit, bytes (None when unlimited or unreadable).
    pub cgroup_limit: Option<u64>,
    /// The soft `RLIMIT_AS`, bytes (None when unlimited or unreadable).
    pub address_space_limit: Option<u64>,
}

impl MemoryBudget {
    /// A budget of `limit` bytes per allocation.
    pub const fn new(limit: u64) -> Self {
        MemoryBudget { limit }
    }

    /// The limit in bytes.
    pub const fn limit(self) -> u64 {
        self.limit
    }

    /// Half the smallest of physical memory, the cgroup limit and the address-space
    /// limit (see the module doc), read once per process: the machine does not change
    /// while it runs.
    pub fn machine_default() -> Self {
        static DEFAULT: OnceLock<MemoryBudget> = OnceLock::new();
        *DEFAULT.get_or_init(|| MemoryBudget::derived_from(&MachineMemory::read()))
    }

    /// The budget [`MemoryBudget::machine_default`] derives from `machine`.
    pub fn derived_from(machine: &MachineMemory) -> Self {
        let smallest = [
            machine.mem_total,
            machine.cgroup_limit,
            machine.address_space_limit,
        ]
        .into_iter()
        .flatten()
        .min();
        MemoryBudget::new(smallest.map_or(FALLBACK_LIMIT, |bytes| bytes / 2))
    }

    /// The budget `CONCORD_MEMORY_LIMIT` sets, or None when it is unset; an unreadable
    /// value is an error naming it.
    pub fn from_env() -> Result<Option<Self>, String> {
        match std::env::var(MEMORY_LIMIT_ENV) {
            Ok(text) => parse_bytes(&text).map(|b| Some(MemoryBudget::new(b))).ok_or_else(|| {
                format!(
                    "{MEMORY_LIMIT_ENV}=`{}` is not a byte count (a number, optionally with K, M, G or T)",
                    crate::text::elide_middle(&text, 64)
                )
            }),
            Err(_) => Ok(None),
        }
    }

    /// `CONCORD_MEMORY_LIMIT` if set, else the machine default.
    pub fn from_env_or_default() -> Result<Self, String> {
        Ok(MemoryBudget::from_env()?.unwrap_or_else(MemoryBudget::machine_default))
    }

    /// The bytes a tensor of `dtype` and `dims` takes, checked against the budget: an
    /// element or byte count that overflows, or one over the limit, is
    /// [`OpError::MemoryBudget`] naming the shape and the bytes.
    pub fn check_tensor(self, dtype: DType, dims: &[usize]) -> Result<u64, OpError> {
        let bytes = tensor_bytes(dtype, dims);
        self.check_bytes(bytes, || {
            format!(
                "a {dtype} tensor of shape {}",
                crate::shape::Shape(dims.to_vec())
            )
        })
    }

    /// Checks `bytes` (None: a count that overflowed) for the allocation `what` describes.
    pub fn check_bytes(
        self,
        bytes: Option<u64>,
        what: impl FnOnce() -> String,
    ) -> Result<u64, OpError> {
        match bytes {
            Some(b) if b <= self.limit => Ok(b),
            _ => Err(OpError::MemoryBudget {
                what: what(),
                bytes,
                limit: self.limit,
            }),
        }
    }

    /// Checks the outputs of one node, all alive together: their bytes summed.
    pub fn check_outputs<'a>(
        self,
        outputs: impl IntoIterator<Item = (DType, &'a [usize])>,
    ) -> Result<u64, OpError> {
        let mut total = Some(0u64);
        let mut described = Vec::new();
        for (dtype, dims) in outputs {
            total = total.and_then(|t| t.checked_add(tensor_bytes(dtype, dims)?));
            described.push(format!("{dtype} {}", crate::shape::Shape(dims.to_vec())));
        }
        self.check_bytes(total, || match described.len() {
            1 => format!("an output of {}", described[0]),
            _ => format!("outputs {}", crate::text::list(&described, 4)),
        })
    }
}

impl Default for MemoryBudget {
    /// [`MemoryBudget::machine_default`].
    fn default() -> Self {
        MemoryBudget::machine_default()
    }
}

impl fmt::Display for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes ({})", self.limit, human_bytes(self.limit))
    }
}

/// The bytes a tensor of `dtype` and `dims` takes, or None when the count overflows u64.
pub fn tensor_bytes(dtype: DType, dims: &[usize]) -> Option<u64> {
    dims.iter()
        .try_fold(dtype.size_in_bytes() as u64, |acc, &d| {
            acc.checked_mul(d as u64)
        })
}

/// A byte count for people: "1.5 GiB".
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A byte count as `CONCORD_MEMORY_LIMIT` writes it: digits, optionally followed by K, M,
/// G or T (binary multiples, with or without a trailing `iB`/`B`).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    let number: u64 = digits.parse().ok()?;
    let shift = match suffix.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return None,
    };
    number.checked_mul(1u64 << shift)
}

impl MachineMemory {
    /// Reads what this machine and process allow (Linux; elsewhere every field is None).
    pub fn read() -> Self {
        MachineMemory {
            mem_total: read_mem_total(),
            cgroup_limit: read_cgroup_limit(),
            address_space_limit: read_address_space_limit(),
        }
    }
}

fn read_mem_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

fn read_cgroup_limit() -> Option<u64> {
    // cgroup v2 first, then v1; "max" and v1's near-u64::MAX "unlimited" read as None.
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .filter_map(|t| t.trim().parse::<u64>().ok())
    .find(|&b| b < (1u64 << 60))
}

fn read_address_space_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max address space"))?;
    // "Max address space   <soft>   <hard>   bytes"
    let soft = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?;
    soft.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_half_the_smallest_known_limit() {
        let machine = MachineMemory {
            mem_total: Some(64 << 30),
            cgroup_limit: Some(8 << 30),
            address_space_limit: Some(16 << 30),
        };
        assert_eq!(MemoryBudget::derived_from(&machine).limit(), 4 << 30);
        let unknown = MachineMemory {
            mem_total: None,
            cgroup_limit: None,
            address_space_limit: None,
        };
        assert_eq!(MemoryBudget::derived_from(&unknown).limit(), FALLBACK_LIMIT);
    }

    #[test]
    fn byte_counts_parse_with_binary_suffixes() {
        assert_eq!(parse_bytes("1024"), Some(1024));
        assert_eq!(parse_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_bytes("8GiB"), Some(8 << 30));
        assert_eq!(parse_bytes("2 k"), Some(2048));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("99999999999T"), None);
    }

    #[test]
    fn overflowing_and_oversized_tensors_are_refused_with_their_shape() {
        let budget = MemoryBudget::new(1 << 20);
        assert_eq!(budget.check_tensor(DType::F32, &[256, 1024]), Ok(1 << 20));
        let over = budget.check_tensor(DType::F32, &[1_000_000, 1_000_000]);
        assert!(
            matches!(&over, Err(OpError::MemoryBudget { what, bytes: Some(4_000_000_000_000), limit: 1_048_576 })
                if what.contains("[1000000, 1000000]")),
            "{over:?}"
        );
        let overflow = budget.check_tensor(DType::F64, &[1 << 40, 1 << 40]);
        assert!(
            matches!(overflow, Err(OpError::MemoryBudget { bytes: None, .. })),
            "{overflow:?}"
        );
    }
}
