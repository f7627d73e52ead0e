//! The sorted set itself: members with scores, ordered by (score, member).
//!
//! Two indexes of the same pairs: an [`IndexMap`] member → score (O(1) score lookups, and
//! O(1) access by position for random picks) and a [`BTreeSet`] of [`Scored`] pairs in the
//! order Redis keeps them (score, then member bytes), for ranges and pops. Costs: add, remove,
//! score change O(log N); a score range finds its start in O(log N); a rank (ZRANK, ZRANGE by
//! index) walks from the nearer end, O(rank).
//!
//! A small sorted set (the size limits of `keyspace::packed`: nearly every sorted set an
//! application keeps per object) is one vector of its pairs instead, numbered as the
//! `IndexMap` would number them and ordered on demand (a B-tree node alone is ~450 bytes),
//! as Redis keeps a small sorted set in one listpack. The first write past the limits builds
//! the two indexes, for good; the numbering carries over, so the form is never observable.
//!
//! Scores are never NaN (every write path refuses it). `-0` and `0` compare equal, as they do
//! in Redis, so the members of both are ordered by their bytes among each other.

use bytes::Bytes;
use indexmap::IndexMap;
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::Bound;

use crate::keyspace::packed;

/// One member with its score, ordered as Redis orders a sorted set.
#[derive(Debug, Clone)]
pub struct Scored {
    /// The score (never NaN).
    pub score: f64,
    /// The member's bytes.
    pub member: Bytes,
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.partial_cmp(&other.score).unwrap_or(Ordering::Equal).then_with(|| self.member.cmp(&other.member))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored {}

/// One end of a score interval (`ZRANGEBYSCORE`'s `min` / `max`: `(` makes it exclusive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreBound {
    /// The score (±inf allowed, never NaN).
    pub value: f64,
    /// `(value`: the value itself is outside.
    pub exclusive: bool,
}

impl ScoreBound {
    /// Whether `score` is at or above this bound taken as a minimum.
    pub fn below_ok(self, score: f64) -> bool {
        if self.exclusive {
            score > self.value
        } else {
            score >= self.value
        }
    }

    /// Whether `score` is at or below this bound taken as a maximum.
    pub fn above_ok(self, score: f64) -> bool {
        if self.exclusive {
            score < self.value
        } else {
            score <= self.value
        }
    }
}

/// One end of a lexicographic interval (`ZRANGEBYLEX`'s `-`, `+`, `[x`, `(x`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[x` (inclusive) or `(x` (exclusive).
    Member {
        /// The member bytes.
        value: Bytes,
        /// `(x`.
        exclusive: bool,
    },
}

impl LexBound {
    /// Whether `m` is at or above this bound taken as a minimum.
    pub fn below_ok(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Member { value, exclusive: true } => m > &value[..],
            LexBound::Member { value, exclusive: false } => m >= &value[..],
        }
    }

    /// Whether `m` is at or below this bound taken as a maximum.
    pub fn above_ok(&self, m: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Member { value, exclusive: true } => m < &value[..],
            LexBound::Member { value, exclusive: false } => m <= &value[..],
        }
    }
}

/// Whether the lex interval `[min, max]` can hold anything (Redis answers an empty range
/// without looking when it cannot).
pub fn lex_range_possible(min: &LexBound, max: &LexBound) -> bool {
    match (min, max) {
        (LexBound::Max, _) | (_, LexBound::Min) => false,
        (LexBound::Min, _) | (_, LexBound::Max) => true,
        (LexBound::Member { value: a, exclusive: ae }, LexBound::Member { value: b, exclusive: be }) => {
            a < b || (a == b && !ae && !be)
        }
    }
}

/// A sorted set; see the module doc.
#[derive(Debug, Clone)]
pub struct ZSet {
    repr: Repr,
}

#[derive(Debug, Clone)]
enum Repr {
    /// At most [`packed::MAX_LEN`] members of at most [`packed::MAX_ITEM`] bytes, in the
    /// order the table would number them; ordered on demand.
    Small(Vec<Scored>),
    /// Boxed: the small form is what keeps the whole set a vector's size.
    Big(Box<Indexes>),
}

/// The two indexes of a sorted set past the small form's limits.
#[derive(Debug, Clone)]
struct Indexes {
    scores: IndexMap<Bytes, f64, crate::keyspace::FastHash>,
    order: BTreeSet<Scored>,
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet { repr: Repr::Small(Vec::new()) }
    }
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self.iter().zip(other.iter()).all(|(a, b)| a.member == b.member && a.score == b.score)
    }
}

/// Members in set order, either form.
#[derive(Debug)]
pub enum Iter<'a> {
    /// The small form's members, ordered for this call.
    Sorted(std::vec::IntoIter<&'a Scored>),
    /// The B-tree, whole.
    Tree(std::collections::btree_set::Iter<'a, Scored>),
    /// The B-tree, a range of it.
    Range(std::collections::btree_set::Range<'a, Scored>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Scored;
    fn next(&mut self) -> Option<&'a Scored> {
        match self {
            Iter::Sorted(i) => i.next(),
            Iter::Tree(i) => i.next(),
            Iter::Range(i) => i.next(),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Sorted(i) => i.next_back(),
            Iter::Tree(i) => i.next_back(),
            Iter::Range(i) => i.next_back(),
        }
    }
}

fn sorted(items: &[Scored]) -> Vec<&Scored> {
    let mut v: Vec<&Scored> = items.iter().collect();
    v.sort_unstable();
    v
}

fn within(e: &Scored, lo: &Bound<Scored>, hi: &Bound<Scored>) -> bool {
    let above = match lo {
        Bound::Included(l) => e >= l,
        Bound::Excluded(l) => e > l,
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => e <= h,
        Bound::Excluded(h) => e < h,
        Bound::Unbounded => true,
    };
    above && below
}

impl ZSet {
    /// An empty sorted set.
    pub fn new() -> ZSet {
        ZSet::default()
    }

    /// Number of members. O(1).
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(v) => v.len(),
            Repr::Big(b) => b.scores.len(),
        }
    }

    /// Whether it has no members. O(1).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether it is in the small form (internal, for tests).
    pub fn is_small(&self) -> bool {
        matches!(self.repr, Repr::Small(_))
    }

    /// The score of `member`. O(1) (O(N) in the small form).
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Small(v) => v.iter().find(|e| e.member == member).map(|e| e.score),
            Repr::Big(b) => b.scores.get(member).copied(),
        }
    }

    /// The two indexes, made from the small form if the set was in it.
    fn big(&mut self) -> (&mut IndexMap<Bytes, f64, crate::keyspace::FastHash>, &mut BTreeSet<Scored>) {
        if let Repr::Small(v) = &mut self.repr {
            let items = std::mem::take(v);
            let mut scores = IndexMap::with_capacity_and_hasher(items.len() + 1, crate::keyspace::FastHash::default());
            for e in &items {
                scores.insert(e.member.clone(), e.score);
            }
            self.repr = Repr::Big(Box::new(Indexes { scores, order: items.into_iter().collect() }));
        }
        match &mut self.repr {
            Repr::Big(b) => (&mut b.scores, &mut b.order),
            Repr::Small(_) => unreachable!("made the indexes above"),
        }
    }

    /// Set `member`'s score (adding it if new); the old score if there was one. O(log N).
    pub fn insert(&mut self, member: Bytes, score: f64) -> Option<f64> {
        if let Repr::Small(v) = &mut self.repr {
            if let Some(e) = v.iter_mut().find(|e| e.member == member) {
                let previous = e.score;
                // As in Redis, -0 replacing 0 (or the reverse) is no change.
                if previous != score {
                    e.score = score;
                }
                return Some(previous);
            }
            if v.len() < packed::MAX_LEN && packed::fits(&[&member]) {
                v.reserve_exact(1);
                v.push(Scored { score, member });
                return None;
            }
        }
        let (scores, order) = self.big();
        match scores.get_mut(&member) {
            Some(old) => {
                let previous = *old;
                if previous != score {
                    *old = score;
                    order.remove(&Scored { score: previous, member: member.clone() });
                    order.insert(Scored { score, member });
                }
                Some(previous)
            }
            None => {
                scores.insert(member.clone(), score);
                order.insert(Scored { score, member });
                None
            }
        }
    }

    /// Turn every `-0` score into `0`: a listpack stores scores as text and Redis reads `-0`
    /// back from one as 0, so a set in that form never holds `-0`. O(N).
    pub fn positive_zeros(&mut self) {
        match &mut self.repr {
            Repr::Small(v) => {
                for e in v.iter_mut().filter(|e| e.score == 0.0) {
                    e.score = 0.0;
                }
            }
            Repr::Big(b) => {
                let Indexes { scores, order } = &mut **b;
                let negative: Vec<Bytes> =
                    scores.iter().filter(|(_, s)| **s == 0.0 && s.is_sign_negative()).map(|(m, _)| m.clone()).collect();
                for m in negative {
                    order.remove(&Scored { score: 0.0, member: m.clone() });
                    order.insert(Scored { score: 0.0, member: m.clone() });
                    if let Some(s) = scores.get_mut(&m) {
                        *s = 0.0;
                    }
                }
            }
        }
    }

    /// Remove `member`; its score if it was there. O(log N).
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Small(v) => {
                let i = v.iter().position(|e| e.member == member)?;
                Some(v.swap_remove(i).score)
            }
            Repr::Big(b) => {
                let Indexes { scores, order } = &mut **b;
                let score = scores.swap_remove(member)?;
                order.remove(&Scored { score, member: Bytes::copy_from_slice(member) });
                Some(score)
            }
        }
    }

    /// Remove and return the lowest (`max` false) or highest member. O(log N).
    pub fn pop(&mut self, max: bool) -> Option<Scored> {
        match &mut self.repr {
            Repr::Small(v) => {
                let ends = v.iter().enumerate();
                let (i, _) = if max { ends.max_by(|a, b| a.1.cmp(b.1)) } else { ends.min_by(|a, b| a.1.cmp(b.1)) }?;
                Some(v.swap_remove(i))
            }
            Repr::Big(b) => {
                let Indexes { scores, order } = &mut **b;
                let e = if max { order.pop_last() } else { order.pop_first() }?;
                scores.swap_remove(&e.member);
                Some(e)
            }
        }
    }

    /// Every member in order, lowest first (`.rev()` for highest first).
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Small(v) => Iter::Sorted(sorted(v).into_iter()),
            Repr::Big(b) => Iter::Tree(b.order.iter()),
        }
    }

    /// Every member with its score, in the hash index's order (no order): for ZSCAN's walk.
    pub fn members(&self) -> Box<dyn Iterator<Item = (&Bytes, f64)> + '_> {
        match &self.repr {
            Repr::Small(v) => Box::new(v.iter().map(|e| (&e.member, e.score))),
            Repr::Big(b) => Box::new(b.scores.iter().map(|(m, s)| (m, *s))),
        }
    }

    /// The member at position `i` of the hash index (no order): for random picks. O(1).
    pub fn get_index(&self, i: usize) -> Option<(&Bytes, f64)> {
        match &self.repr {
            Repr::Small(v) => v.get(i).map(|e| (&e.member, e.score)),
            Repr::Big(b) => b.scores.get_index(i).map(|(m, s)| (m, *s)),
        }
    }

    /// The 0-based rank of `member` counted from the lowest (`rev` false) or highest.
    /// O(rank from the lowest).
    pub fn rank(&self, member: &[u8], rev: bool) -> Option<usize> {
        let score = self.score(member)?;
        let key = Scored { score, member: Bytes::copy_from_slice(member) };
        let below = match &self.repr {
            Repr::Small(v) => v.iter().filter(|e| **e < key).count(),
            Repr::Big(b) => b.order.range(..&key).count(),
        };
        Some(if rev { self.len().saturating_sub(1 + below) } else { below })
    }

    /// The members with scores in `[min, max]`, lowest first (`.rev()` for highest first).
    /// The start is found in O(log N).
    pub fn score_range(&self, min: ScoreBound, max: ScoreBound) -> Iter<'_> {
        let Some((lo, hi)) = score_bounds(min, max) else { return Iter::Sorted(Vec::new().into_iter()) };
        match &self.repr {
            Repr::Small(v) => {
                let mut picked: Vec<&Scored> = v.iter().filter(|e| within(e, &lo, &hi)).collect();
                picked.sort_unstable();
                Iter::Sorted(picked.into_iter())
            }
            Repr::Big(b) => Iter::Range(b.order.range((lo, hi))),
        }
    }

    /// The members in the lexicographic interval `[min, max]`, in set order, assuming (as
    /// Redis does) that the members being compared share one score: forward, from the first
    /// member at or above `min` while members stay at or below `max`; `rev`, from the last one
    /// at or below `max` while they stay at or above `min`. O(N) to find the start.
    pub fn lex_range<'a>(
        &'a self,
        min: &'a LexBound,
        max: &'a LexBound,
        rev: bool,
    ) -> Box<dyn Iterator<Item = &'a Scored> + 'a> {
        // As Redis checks first: nothing unless the last member is at or above `min` and the
        // first at or below `max`.
        let ends = self.iter().next_back().is_some_and(|e| min.below_ok(&e.member))
            && self.iter().next().is_some_and(|e| max.above_ok(&e.member));
        if !lex_range_possible(min, max) || !ends {
            return Box::new(std::iter::empty());
        }
        if rev {
            Box::new(self.iter().rev().skip_while(|e| !max.above_ok(&e.member)).take_while(|e| min.below_ok(&e.member)))
        } else {
            Box::new(self.iter().skip_while(|e| !min.below_ok(&e.member)).take_while(|e| max.above_ok(&e.member)))
        }
    }

    /// The longest member's length (what decides the listpack encoding). O(N).
    pub fn max_member_len(&self) -> usize {
        self.members().map(|(m, _)| m.len()).max().unwrap_or(0)
    }

    /// Bytes of member data plus per-member bookkeeping, for MEMORY USAGE. O(N).
    pub fn heap_bytes(&self) -> usize {
        // Per member: its bytes (shared by both indexes), an IndexMap slot and hash entry, a
        // B-tree slot with node slack.
        const PER_MEMBER: usize = 96;
        self.members().map(|(m, _)| m.len() + PER_MEMBER).sum()
    }
}

/// The B-tree bounds of a score interval, or `None` when it is empty by its bounds alone.
/// Members sort after the empty member at the same score, so `(score, "")` marks where a
/// score starts; the end of an inclusive `max` is where the next larger score starts.
fn score_bounds(min: ScoreBound, max: ScoreBound) -> Option<(Bound<Scored>, Bound<Scored>)> {
    if min.value > max.value || (min.value == max.value && (min.exclusive || max.exclusive)) {
        return None;
    }
    let at = |score: f64| Scored { score, member: Bytes::new() };
    let lo = if min.exclusive {
        if min.value == f64::INFINITY {
            return None;
        }
        Bound::Included(at(min.value.next_up()))
    } else {
        Bound::Included(at(min.value))
    };
    let hi = if max.exclusive {
        Bound::Excluded(at(max.value))
    } else if max.value == f64::INFINITY {
        Bound::Unbounded
    } else {
        Bound::Excluded(at(max.value.next_up()))
    };
    // `next_up` of the lower bound may pass the upper one: (1 .. [1 is refused above, but
    // (x .. (next_up(x) leaves lo == hi, which the B-tree accepts only when not both excluded.
    if let (Bound::Included(l), Bound::Excluded(h)) = (&lo, &hi) {
        if l > h {
            return None;
        }
    }
    Some((lo, hi))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::keyspace::packed;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn incl(v: f64) -> ScoreBound {
        ScoreBound { value: v, exclusive: false }
    }

    fn excl(v: f64) -> ScoreBound {
        ScoreBound { value: v, exclusive: true }
    }

    #[test]
    fn orders_by_score_then_member_and_treats_minus_zero_as_zero() {
        let mut z = ZSet::new();
        z.insert(b("b"), 0.0);
        z.insert(b("a"), -0.0);
        z.insert(b("c"), -1.0);
        let order: Vec<&[u8]> = z.iter().map(|e| &e.member[..]).collect();
        assert_eq!(order, vec![&b"c"[..], b"a", b"b"]);
        assert_eq!(z.rank(b"b", false), Some(2));
        assert_eq!(z.rank(b"b", true), Some(0));
    }

    #[test]
    fn score_ranges_at_the_edges() {
        let mut z = ZSet::new();
        for (m, s) in [("a", f64::NEG_INFINITY), ("b", 1.0), ("c", 1.0), ("d", 2.0), ("e", f64::INFINITY)] {
            z.insert(b(m), s);
        }
        let names =
            |it: Vec<&Scored>| it.iter().map(|e| String::from_utf8_lossy(&e.member).into_owned()).collect::<String>();
        assert_eq!(names(z.score_range(incl(1.0), incl(1.0)).collect()), "bc");
        assert_eq!(names(z.score_range(excl(1.0), incl(2.0)).collect()), "d");
        assert_eq!(names(z.score_range(incl(1.0), excl(2.0)).collect()), "bc");
        assert_eq!(names(z.score_range(excl(1.0), excl(1.0)).collect()), "");
        assert_eq!(names(z.score_range(incl(f64::NEG_INFINITY), incl(f64::INFINITY)).collect()), "abcde");
        assert_eq!(names(z.score_range(excl(f64::NEG_INFINITY), excl(f64::INFINITY)).collect()), "bcd");
        assert_eq!(names(z.score_range(excl(f64::INFINITY), incl(f64::INFINITY)).collect()), "");
        assert_eq!(names(z.score_range(incl(3.0), incl(2.0)).collect()), "");
        assert_eq!(names(z.score_range(incl(1.0), incl(2.0)).rev().collect()), "dcb");
        assert_eq!(names(z.score_range(excl(1.0), excl(1.0f64.next_up())).collect()), "");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, i8),
        Remove(u8),
        Pop(bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Names 0..20 often meet again; up to 90 pass the small form's length limit, and name
        // 255 its member limit.
        let name = prop_oneof![4 => 0u8..20, 1 => 0u8..90, 1 => Just(255u8)];
        prop_oneof![
            4 => (name.clone(), -5i8..5).prop_map(|(m, s)| Op::Insert(m, s)),
            2 => name.prop_map(Op::Remove),
            1 => any::<bool>().prop_map(Op::Pop),
        ]
    }

    proptest! {
        /// The structure against a model: a map member → score, ordered on demand.
        #[test]
        fn behaves_as_a_map_ordered_by_score_then_member(ops in prop::collection::vec(op(), 0..200), lo in -6i8..6, hi in -6i8..6, lx in any::<bool>(), hx in any::<bool>()) {
            let mut z = ZSet::new();
            let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
            // The numbering (random picks, ZSCAN) as the table keeps it, and whether the set
            // ever passed the small form's limits.
            let mut numbered: IndexMap<Vec<u8>, f64> = IndexMap::new();
            let mut passed = false;
            let name = |m: u8| if m == 255 { vec![b'm'; packed::MAX_ITEM + 1] } else { vec![b'm', m] };
            let sorted = |m: &BTreeMap<Vec<u8>, f64>| {
                let mut v: Vec<(f64, Vec<u8>)> = m.iter().map(|(k, s)| (*s, k.clone())).collect();
                v.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then_with(|| a.1.cmp(&b.1)));
                v
            };
            for op in ops {
                match op {
                    Op::Insert(m, s) => {
                        let key = name(m);
                        passed |= !model.contains_key(&key) && (!packed::fits(&[&key]) || model.len() == packed::MAX_LEN);
                        numbered.insert(key.clone(), f64::from(s));
                        prop_assert_eq!(z.insert(Bytes::from(key.clone()), f64::from(s)), model.insert(key, f64::from(s)));
                    }
                    Op::Remove(m) => {
                        let key = name(m);
                        numbered.swap_remove(&key);
                        prop_assert_eq!(z.remove(&key), model.remove(&key));
                    }
                    Op::Pop(max) => {
                        let want = sorted(&model);
                        let want = if max { want.last().cloned() } else { want.first().cloned() };
                        if let Some((_, k)) = &want {
                            model.remove(k);
                            numbered.swap_remove(k);
                        }
                        prop_assert_eq!(z.pop(max).map(|e| (e.score, e.member.to_vec())), want);
                    }
                }
                prop_assert_eq!(z.len(), model.len());
                prop_assert_eq!(z.is_small(), !passed);
                let got: Vec<(Vec<u8>, f64)> = z.members().map(|(m, s)| (m.to_vec(), s)).collect();
                let want: Vec<(Vec<u8>, f64)> = numbered.iter().map(|(m, s)| (m.clone(), *s)).collect();
                prop_assert_eq!(got, want);
            }
            for (i, (m, s)) in numbered.iter().enumerate() {
                prop_assert_eq!(z.get_index(i).map(|(m, s)| (m.to_vec(), s)), Some((m.clone(), *s)));
            }
            let want = sorted(&model);
            let got: Vec<(f64, Vec<u8>)> = z.iter().map(|e| (e.score, e.member.to_vec())).collect();
            prop_assert_eq!(&got, &want);
            for (i, (_, m)) in want.iter().enumerate() {
                prop_assert_eq!(z.rank(m, false), Some(i));
                prop_assert_eq!(z.rank(m, true), Some(want.len() - 1 - i));
            }
            let (min, max) = (ScoreBound { value: f64::from(lo), exclusive: lx }, ScoreBound { value: f64::from(hi), exclusive: hx });
            let in_range: Vec<(f64, Vec<u8>)> = want.iter().filter(|(s, _)| min.below_ok(*s) && max.above_ok(*s)).cloned().collect();
            let got: Vec<(f64, Vec<u8>)> = z.score_range(min, max).map(|e| (e.score, e.member.to_vec())).collect();
            prop_assert_eq!(&got, &in_range);
            let got_rev: Vec<(f64, Vec<u8>)> = z.score_range(min, max).rev().map(|e| (e.score, e.member.to_vec())).collect();
            prop_assert_eq!(got_rev, in_range.into_iter().rev().collect::<Vec<_>>());
        }
    }
}
