//! `--shard K/N`: a deterministic 1/N of the trials, chosen by a stable hash of each
//! trial's name, so that N machines (or N CI jobs) run the suite between them and
//! `concord report merge` joins their reports into the one a whole run writes.
//!
//! Invariants: every trial is in exactly one of the N shards; which one depends on its
//! name alone (FNV-1a, 64-bit, written out below), never on the machine, the build, the
//! order the trials were made in or the other trials, so a trial added to the suite does
//! not move the others between shards.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Shard `index` of `count`, 1-based like cargo nextest's `--partition count:K/N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// Why a `K/N` argument is not a shard.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{given}` is not a shard: expected K/N with 1 <= K <= N, such as 2/4")]
pub struct ShardError {
    pub given: String,
}

impl Shard {
    /// Whether the trial named `trial` belongs to this shard.
    pub fn selects(&self, trial: &str) -> bool {
        // `count` is at least 1 (FromStr and `new` check it); the u64 → usize cast of a
        // remainder below `count` is lossless.
        let count = self.count.max(1) as u64;
        (fnv1a(trial.as_bytes()) % count) as usize == self.index - 1
    }

    /// Shard `index` of `count`, checked.
    pub fn new(index: usize, count: usize) -> Result<Shard, ShardError> {
        if count == 0 || index == 0 || index > count {
            return Err(ShardError {
                given: format!("{index}/{count}"),
            });
        }
        Ok(Shard { index, count })
    }
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Shard, ShardError> {
        let error = || ShardError {
            given: s.to_string(),
        };
        let (k, n) = s.trim().split_once('/').ok_or_else(error)?;
        let index = k.trim().parse().map_err(|_| error())?;
        let count = n.trim().parse().map_err(|_| error())?;
        Shard::new(index, count).map_err(|_| error())
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// FNV-1a over `bytes`: tiny, stable across platforms and releases (std's hashers are
/// not: `DefaultHasher` may change between Rust versions), and good enough to spread trial
/// names evenly.
fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(" 1 / 1 ".parse(), Ok(Shard { index: 1, count: 1 }));
        for bad in ["0/4", "5/4", "1/0", "2", "a/b", "1/2/3", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad} parsed");
        }
        assert_eq!(Shard { index: 3, count: 8 }.to_string(), "3/8");
    }

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        // From the FNV reference test suite: the empty string, "a" and "foobar".
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn every_trial_is_in_exactly_one_shard_and_shards_are_balanced() {
        let names: Vec<String> = (0..3000)
            .map(|i| format!("opencl/opencl/node/test_{i}"))
            .collect();
        let count = 4;
        let mut sizes = vec![0usize; count];
        for name in &names {
            let owners: Vec<usize> = (1..=count)
                .filter(|&k| Shard { index: k, count }.selects(name))
                .collect();
            assert_eq!(owners.len(), 1, "{name} is in shards {owners:?}");
            sizes[owners[0] - 1] += 1;
        }
        // 750 expected per shard; a hash that clumped would miss this by far.
        for size in sizes {
            assert!((650..=850).contains(&size), "shard sizes {size}");
        }
        assert!(names
            .iter()
            .all(|n| Shard { index: 1, count: 1 }.selects(n)));
    }
}
