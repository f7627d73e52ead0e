//! A set's members. A small set (nearly every set an application keeps per object) lives in one
//! buffer ([`super::packed`]): a one-member set costs one small allocation instead of a table,
//! an index and a buffer. A write that passes the buffer's limits turns it into a numbered table
//! (`indexmap`), for good; the numbering lets SRANDMEMBER and SPOP pick a member at a random
//! position in O(1). Both forms number members the same way, so the form is never observable.

use bytes::Bytes;
use indexmap::IndexSet;

use super::packed::{self, Packed};

type Hasher = super::FastHash;

/// The members of a set.
#[derive(Debug, Clone)]
pub struct SetMembers {
    repr: Repr,
}

#[derive(Debug, Clone)]
enum Repr {
    Packed(Packed<1>),
    /// Boxed: the one-buffer form is what keeps the whole collection a vector's size.
    Table(Box<IndexSet<Bytes, Hasher>>),
}

impl Default for SetMembers {
    fn default() -> Self {
        SetMembers { repr: Repr::Packed(Packed::default()) }
    }
}

/// Equal as sets, whatever the order or form.
impl PartialEq for SetMembers {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|m| other.contains(m))
    }
}

impl SetMembers {
    /// An empty set with room for `n` members.
    pub fn with_capacity(n: usize) -> SetMembers {
        let repr = if n <= packed::MAX_LEN {
            Repr::Packed(Packed::default())
        } else {
            Repr::Table(Box::new(IndexSet::with_capacity_and_hasher(n, Hasher::default())))
        };
        SetMembers { repr }
    }

    /// How many members it has.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Packed(p) => p.len(),
            Repr::Table(t) => t.len(),
        }
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many members it has room for without growing.
    pub fn capacity(&self) -> usize {
        match &self.repr {
            Repr::Packed(p) => p.len(),
            Repr::Table(t) => t.capacity(),
        }
    }

    /// Whether it is kept in one buffer (internal form, for tests).
    pub fn is_packed(&self) -> bool {
        matches!(self.repr, Repr::Packed(_))
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        match &self.repr {
            Repr::Packed(p) => p.find(member).is_some(),
            Repr::Table(t) => t.contains(member),
        }
    }

    /// The members in their order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(match &self.repr {
            Repr::Packed(p) => IterRepr::Packed(p.iter()),
            Repr::Table(t) => IterRepr::Table(t.iter()),
        })
    }

    /// The member numbered `index` (O(members) in the one-buffer form, which holds at most
    /// [`packed::MAX_LEN`]).
    pub fn get_index(&self, index: usize) -> Option<&[u8]> {
        match &self.repr {
            Repr::Packed(p) => p.iter().nth(index).map(|[m]| m),
            Repr::Table(t) => t.get_index(index).map(|m| &m[..]),
        }
    }

    fn table(&mut self) -> &mut IndexSet<Bytes, Hasher> {
        if let Repr::Packed(p) = &self.repr {
            let mut t = IndexSet::with_capacity_and_hasher(p.len() + 1, Hasher::default());
            t.extend(p.iter().map(|[m]| Bytes::copy_from_slice(m)));
            self.repr = Repr::Table(Box::new(t));
        }
        match &mut self.repr {
            Repr::Table(t) => t,
            Repr::Packed(_) => unreachable!("made a table above"),
        }
    }

    fn add(&mut self, member: &[u8], owned: Option<Bytes>) -> bool {
        if let Repr::Packed(p) = &mut self.repr {
            if p.find(member).is_some() {
                return false;
            }
            if packed::fits(&[member]) && p.len() < packed::MAX_LEN {
                p.push([member]);
                return true;
            }
        }
        let t = self.table();
        if t.contains(member) {
            return false;
        }
        t.insert(owned.unwrap_or_else(|| Bytes::copy_from_slice(member)))
    }

    /// Add `member`; true when it is new.
    pub fn insert(&mut self, member: Bytes) -> bool {
        self.add(&member.clone(), Some(member))
    }

    /// Add a borrowed `member` (its bytes copied only when new); true when it is new.
    pub fn insert_slice(&mut self, member: &[u8]) -> bool {
        self.add(member, None)
    }

    /// Remove `member` (the last member takes its position); true when it was there.
    pub fn swap_remove(&mut self, member: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Packed(p) => match p.find(member) {
                Some(slot) => {
                    p.swap_remove(slot);
                    true
                }
                None => false,
            },
            Repr::Table(t) => t.swap_remove(member),
        }
    }

    /// Remove and return the last member.
    pub fn pop(&mut self) -> Option<Bytes> {
        match &mut self.repr {
            Repr::Packed(p) => {
                let slot = p.len().checked_sub(1).and_then(|i| p.slot(i))?;
                let [m] = p.parts(slot);
                let m = Bytes::copy_from_slice(m);
                p.swap_remove(slot);
                Some(m)
            }
            Repr::Table(t) => t.pop(),
        }
    }
}

impl FromIterator<Bytes> for SetMembers {
    fn from_iter<I: IntoIterator<Item = Bytes>>(iter: I) -> Self {
        let mut s = SetMembers::default();
        s.extend(iter);
        s
    }
}

impl Extend<Bytes> for SetMembers {
    fn extend<I: IntoIterator<Item = Bytes>>(&mut self, iter: I) {
        for m in iter {
            self.insert(m);
        }
    }
}

impl<'a> IntoIterator for &'a SetMembers {
    type Item = &'a [u8];
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// A set's members in their order, as byte slices.
#[derive(Debug, Clone)]
pub struct Iter<'a>(IterRepr<'a>);

#[derive(Debug, Clone)]
enum IterRepr<'a> {
    Packed(packed::Iter<'a, 1>),
    Table(indexmap::set::Iter<'a, Bytes>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Packed(p) => p.next().map(|[m]| m),
            IterRepr::Table(t) => t.next().map(|m| &m[..]),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8),
        InsertSlice(u8),
        Remove(u8),
        Pop,
    }

    fn member(n: u8) -> Vec<u8> {
        // Member 99 is longer than a buffer entry may be.
        if n == 99 {
            vec![b'm'; packed::MAX_ITEM + 1]
        } else {
            format!("m{n}").into_bytes()
        }
    }

    proptest::proptest! {
        /// Both forms behave as the numbered set they stand for (same members, same order, same
        /// answers); the buffer form holds exactly the sets that never passed its limits.
        #[test]
        fn both_forms_follow_a_numbered_set(ops in proptest::collection::vec(proptest::prop_oneof![
            4 => (0u8..100).prop_map(Op::Insert),
            2 => (0u8..100).prop_map(Op::InsertSlice),
            3 => (0u8..100).prop_map(Op::Remove),
            1 => proptest::strategy::Just(Op::Pop),
        ], 0..400)) {
            let mut s = SetMembers::default();
            let mut model: IndexSet<Vec<u8>> = IndexSet::new();
            let mut passed = false;
            for op in ops {
                match op {
                    Op::Insert(n) | Op::InsertSlice(n) => {
                        let m = member(n);
                        passed |= !model.contains(&m) && (!packed::fits(&[&m]) || model.len() == packed::MAX_LEN);
                        let new = model.insert(m.clone());
                        let got = if matches!(op, Op::Insert(_)) { s.insert(Bytes::from(m)) } else { s.insert_slice(&m) };
                        proptest::prop_assert_eq!(got, new);
                    }
                    Op::Remove(n) => {
                        let m = member(n);
                        proptest::prop_assert_eq!(s.swap_remove(&m), model.swap_remove(&m));
                    }
                    Op::Pop => proptest::prop_assert_eq!(s.pop(), model.pop().map(Bytes::from)),
                }
                proptest::prop_assert_eq!(s.len(), model.len());
                proptest::prop_assert_eq!(s.is_packed(), !passed);
                let got: Vec<&[u8]> = s.iter().collect();
                let want: Vec<&[u8]> = model.iter().map(|m| &m[..]).collect();
                proptest::prop_assert_eq!(got, want);
            }
            for (i, m) in model.iter().enumerate() {
                proptest::prop_assert_eq!(s.get_index(i), Some(&m[..]));
                proptest::prop_assert!(s.contains(m));
            }
            proptest::prop_assert!(!s.contains(b"absent"));
            let rebuilt: SetMembers = model.iter().map(|m| Bytes::from(m.clone())).collect();
            proptest::prop_assert_eq!(rebuilt, s);
        }
    }
}
