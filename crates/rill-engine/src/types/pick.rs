//! Random picks for SPOP, SRANDMEMBER, HRANDFIELD and RANDOMKEY.
//!
//! Hashes, sets and databases are numbered tables (`indexmap`: see [`crate::keyspace::HashFields`]
//! and [`crate::Db`]), so a pick is a position drawn from the engine's generator and one O(1)
//! read at that position, whatever the size of the value — as Redis' dictionary sampling is
//! O(1) expected. A command draws its positions first (the generator needs the engine mutably),
//! then reads them from the table.
//!
//! Every element read by position is counted in `Engine::random_reads`, which tests read to
//! check that a pick reads one element per element it returns, never the whole value.

use crate::Engine;
use bytes::Bytes;
use std::collections::HashMap;

/// A uniformly random position below `len`; 0 when `len` is 0. (The modulo's bias is below
/// `len / 2^64`.)
pub(crate) fn position(engine: &mut Engine, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    (engine.random_u64() % len as u64) as usize
}

/// `n` distinct positions below `len` (all of them when `n >= len`), uniformly and in random
/// order: the first `n` slots of a Fisher–Yates shuffle of `0..len`. O(n) time and memory,
/// whatever `len` is: when `n` is a small part of `len` the shuffled array is virtual, a map
/// of the slots that were moved (at most `n` of them); otherwise it is a real array. Both give
/// the same positions for the same draws.
pub(crate) fn distinct_positions(engine: &mut Engine, len: usize, n: usize) -> Vec<usize> {
    let n = n.min(len);
    if n.saturating_mul(4) >= len {
        let mut all: Vec<usize> = (0..len).collect();
        for i in 0..n {
            let j = i + position(engine, len - i);
            all.swap(i, j);
        }
        all.truncate(n);
        return all;
    }
    // moved[s]: the position now in slot s, for the slots a swap changed (others hold s).
    let mut moved: HashMap<usize, usize, foldhash::fast::FixedState> =
        HashMap::with_capacity_and_hasher(n, foldhash::fast::FixedState::default());
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let j = i + position(engine, len - i);
        let at_j = moved.get(&j).copied().unwrap_or(j);
        let at_i = moved.get(&i).copied().unwrap_or(i);
        // Slot i is never read again: only slot j keeps what the swap put there.
        moved.insert(j, at_i);
        out.push(at_j);
    }
    out
}

/// `count` positions below `len`, each drawn independently (repeats allowed). O(count).
pub(crate) fn positions_with_repeats(engine: &mut Engine, len: usize, count: u64) -> Vec<usize> {
    (0..count).map(|_| position(engine, len)).collect()
}

/// The members of the set at `key` at these positions (a read each, counted). Not an access:
/// the command's lookup was.
pub(crate) fn set_members_at(engine: &mut Engine, db: usize, key: &[u8], positions: &[usize]) -> Vec<Bytes> {
    let picked: Vec<Bytes> = match engine.db(db).get_raw(key).map(|e| &e.value) {
        Some(crate::Value::Set(set)) => {
            positions.iter().filter_map(|&i| set.get_index(i).map(Bytes::copy_from_slice)).collect()
        }
        _ => Vec::new(),
    };
    engine.random_reads += positions.len() as u64;
    picked
}

/// The fields of the hash at `key` at these positions, with their values (a read each,
/// counted). Not an access.
pub(crate) fn hash_entries_at(engine: &mut Engine, db: usize, key: &[u8], positions: &[usize]) -> Vec<(Bytes, Bytes)> {
    let picked: Vec<(Bytes, Bytes)> = match engine.db(db).get_raw(key).map(|e| &e.value) {
        Some(crate::Value::Hash(hash)) => positions
            .iter()
            .filter_map(|&i| hash.get_index(i).map(|(f, v)| (Bytes::copy_from_slice(f), Bytes::copy_from_slice(v))))
            .collect(),
        _ => Vec::new(),
    };
    engine.random_reads += positions.len() as u64;
    picked
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
pub(crate) mod tests {
    use super::*;
    use crate::EngineConfig;
    use std::collections::HashSet;

    /// Pearson's chi-square statistic of `counts` against equal expectations.
    pub(crate) fn chi_square(counts: &[u64]) -> f64 {
        let total: u64 = counts.iter().sum();
        let expected = total as f64 / counts.len() as f64;
        counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum()
    }

    /// The chi-square value a uniform sample exceeds with probability 0.001, for 9 degrees of
    /// freedom (ten buckets); the generator's seed is fixed, so the tests are repeatable.
    pub(crate) const CHI_SQUARE_9_DOF_P001: f64 = 27.88;

    #[test]
    fn distinct_positions_are_distinct_and_in_range() {
        let mut e = Engine::new(EngineConfig::default());
        for (len, n) in [(0, 3), (1, 1), (5, 0), (5, 5), (5, 9), (10, 2), (1000, 7), (1000, 999), (1_000_000, 5)] {
            let got = distinct_positions(&mut e, len, n);
            assert_eq!(got.len(), n.min(len), "len {len} n {n}");
            assert!(got.iter().all(|&p| p < len));
            assert_eq!(got.iter().collect::<HashSet<_>>().len(), got.len(), "repeats for len {len} n {n}");
        }
    }

    #[test]
    fn the_sparse_and_the_dense_shuffle_agree() {
        // Same seed, same draws: the virtual array must give what the real one gives.
        let (len, n) = (1000, 100);
        let mut sparse = Engine::new(EngineConfig::default());
        let got = distinct_positions(&mut sparse, len, n);
        let mut dense = Engine::new(EngineConfig::default());
        let mut all: Vec<usize> = (0..len).collect();
        for i in 0..n {
            let j = i + position(&mut dense, len - i);
            all.swap(i, j);
        }
        assert_eq!(got, all[..n]);
    }

    #[test]
    fn distinct_positions_are_uniform() {
        // Each of ten positions is in a 3-of-10 sample equally often, in each slot too.
        let mut e = Engine::new(EngineConfig::default());
        let mut anywhere = [0u64; 10];
        let mut first = [0u64; 10];
        for _ in 0..20_000 {
            let got = distinct_positions(&mut e, 10, 3);
            first[got[0]] += 1;
            for p in got {
                anywhere[p] += 1;
            }
        }
        assert!(chi_square(&anywhere) < CHI_SQUARE_9_DOF_P001, "{anywhere:?}");
        assert!(chi_square(&first) < CHI_SQUARE_9_DOF_P001, "{first:?}");
        // The sparse path (a small sample of a large range), bucketed by tenths.
        let mut tenths = [0u64; 10];
        for _ in 0..5_000 {
            for p in distinct_positions(&mut e, 1_000_000, 4) {
                tenths[p / 100_000] += 1;
            }
        }
        assert!(chi_square(&tenths) < CHI_SQUARE_9_DOF_P001, "{tenths:?}");
    }
}
