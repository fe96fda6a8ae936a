//! The fuzzer's random choices: a seeded ChaCha8 stream (rand_chacha, as the CLI's random
//! inputs use) with the few draws the mutators need.

use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A reproducible stream of choices: the same seed always makes the same ones.
#[derive(Clone, Debug)]
pub struct Rng(ChaCha8Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(ChaCha8Rng::seed_from_u64(seed))
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.0.gen_range(0..n)
        }
    }

    /// True with probability 1/n.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// A value in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0.gen::<f64>()
    }

    /// One element of a slice, `None` when it is empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }
}
