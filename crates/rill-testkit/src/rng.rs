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

/// The seed of a fuzzer's regression run: `RILL_FUZZ_SEED` if set, else `default`, its fixed
/// seed, so that it runs the same cases on every run (cases that once found a bug stay found).
/// A fuzzer pairs it with a [`fresh_seed`] run.
pub fn fuzz_seed(default: u64) -> u64 {
    env_seed().unwrap_or(default)
}

/// The seed of a fuzzer's fresh-seed run: under `CI=true`, with `RILL_FUZZ_FRESH=1`
/// (`scripts/test` sets it) or `RILL_FUZZ_SEED=S` (which replays S), and otherwise `None`
/// after counting the test as skipped ([`crate::skip`]): a `cargo test` by hand repeats the
/// fixed cases only.
///
/// A new seed is drawn from the clock, the process and the test's name, and printed on stderr
/// with the command line that replays it (libtest shows it when the test fails).
pub fn fresh_seed() -> Option<u64> {
    let test = crate::skip::current_test();
    let seed = match env_seed() {
        Some(seed) => seed,
        None if crate::ci() || std::env::var("RILL_FUZZ_FRESH").is_ok_and(|v| v == "1") => new_seed(&test),
        None => {
            crate::skip("a fresh seed is drawn under CI=true or RILL_FUZZ_FRESH=1 only");
            return None;
        }
    };
    eprintln!("{test}: fresh seed {seed}; replay: RILL_FUZZ_SEED={seed} {}", rerun_command(&test));
    Some(seed)
}

/// `cargo test -p PACKAGE --test TARGET -- TEST --exact` (or `--lib`) for the running test:
/// cargo sets `CARGO_PKG_NAME` for the test process, and a test executable is named after its
/// target, with a hash (`it-0123abcd`).
fn rerun_command(test: &str) -> String {
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "PACKAGE".into());
    let exe = std::env::current_exe().ok().and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()));
    let target = exe.as_deref().and_then(|e| e.rsplit_once('-')).map_or("", |(name, _hash)| name).to_owned();
    let which = if target == package.replace('-', "_") { "--lib".to_owned() } else { format!("--test {target}") };
    format!("cargo test -p {package} {which} -- {test} --exact")
}

/// A 32-byte generator seed made from `seed` (little-endian, then zeros), for proptest's
/// `TestRng::from_seed(RngAlgorithm::ChaCha, ...)`.
pub fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes
}

/// `RILL_FUZZ_SEED`, if set; panics if it is not a number (a typo must not run the default).
fn env_seed() -> Option<u64> {
    let text = std::env::var("RILL_FUZZ_SEED").ok()?;
    match text.trim().parse() {
        Ok(seed) => Some(seed),
        Err(e) => panic!("RILL_FUZZ_SEED={text:?} is not a seed (a decimal u64): {e}"),
    }
}

/// A seed no run has used before, as far as one can tell: the clock's nanoseconds, the pid and
/// the test's name, mixed (splitmix64 finaliser) so that neighbouring inputs differ widely.
fn new_seed(test: &str) -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let name = test.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let mut z = nanos ^ (u64::from(std::process::id()) << 32) ^ name;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_seeds_differ_between_tests() {
        assert_ne!(new_seed("x::a"), new_seed("x::b"));
    }
}
