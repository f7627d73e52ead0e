//! A small deterministic generator for randomised tests (xorshift64*), so that a failure names
//! the seed that reproduces it and no test needs a `rand` crate.

/// xorshift64*: `Rng::new(seed)` (any seed) or [`fuzz_seed`] for the seed a run was asked for.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed` (0 is allowed: the state is made odd).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`0..1` for `n` = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// In `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// One of `items`; panics on an empty list (a test's own mistake).
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let i = self.below(items.len() as u64) as usize;
        items.get(i).copied().expect("Rng::pick from an empty list")
    }
}

/// The seed `RILL_FUZZ_SEED` asks for, else `default`: randomised tests run the same cases on
/// every run unless told otherwise.
pub fn fuzz_seed(default: u64) -> u64 {
    std::env::var("RILL_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
