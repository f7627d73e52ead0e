//! What DEBUG reads and writes in the keyspace.
//!
//! **Digests** (`DEBUG DIGEST`, `DEBUG DIGEST-VALUE`): a 20-byte fingerprint of the data that
//! Redis computes the same way, so a rill and a Redis (a replica, a restored copy) holding the
//! same data print the same 40 hex digits. Two ways of folding bytes into a running 20-byte
//! value make it:
//!
//! - *xor* (`fold`): the SHA-1 of the bytes is XORed in. Order does not matter, so it folds the
//!   members of a set, the fields of a hash and the keys of a database.
//! - *chain* (`chain`): xor, then the running value becomes the SHA-1 of itself. Order matters
//!   (and so does where one piece ends and the next begins), so it folds a list's elements, a
//!   stream's entries, and the parts of one key.
//!
//! One key: chain its name, then its value — chain the type's number (Redis' object type, as a
//! 32-bit big-endian word), then by type: a string's bytes chained; a list's elements chained
//! head to tail; a set's members xored; each hash field chained with its value into a fresh
//! digest whose 20 bytes are then xored in (as bytes to fold, so their SHA-1 is what enters);
//! a stream's live entries in ID order, each as `ms.seq` then its
//! field names and values, all chained (consumer groups, PELs and the stream's IDs are not
//! part of it). A key with an expiry has the string `!!expire!!` xored in last (only whether it
//! expires counts, not when). The dataset: for each database that holds a key (expired ones not
//! yet removed count, as they do in `DBSIZE`), chain its number (32-bit big-endian) into the
//! total, then xor in each key's digest (again its SHA-1). An empty dataset is twenty zero bytes.
//!
//! `DEBUG DIGEST-VALUE` is the value part alone (no key name), twenty zeros for a missing key.
//!
//! **POPULATE** (`DEBUG POPULATE count [prefix] [size]`): creates `prefix:0` .. `prefix:count-1`
//! holding `value:N` (or, with a size, those bytes cut or padded with zero bytes to that size),
//! leaving every key that already exists alone.

use crate::effect::Effect;
use crate::keyspace::{CallCtx, Engine, Entry, Value};
use crate::types::stream::codec;
use crate::CmdError;
use bytes::Bytes;
use sha1::{Digest as _, Sha1};

/// A digest: twenty bytes, shown as 40 lower-case hex digits.
pub type Digest = [u8; 20];

/// The digest of nothing (an empty dataset, a missing key).
pub const EMPTY: Digest = [0; 20];

/// Redis' object type numbers, the first thing chained into a value's digest.
const TYPE_STRING: u32 = 0;
const TYPE_LIST: u32 = 1;
const TYPE_SET: u32 = 2;
const TYPE_ZSET: u32 = 3;
const TYPE_HASH: u32 = 4;
const TYPE_STREAM: u32 = 6;

/// XOR `other` into `acc`.
fn xor(acc: &mut Digest, other: &Digest) {
    for (a, b) in acc.iter_mut().zip(other) {
        *a ^= b;
    }
}

/// Fold `bytes` into `acc`, order-free: XOR in their SHA-1.
fn fold(acc: &mut Digest, bytes: &[u8]) {
    xor(acc, &Sha1::digest(bytes).into());
}

/// Fold `bytes` into `acc`, order-sensitive: [`fold`], then replace `acc` by its own SHA-1.
fn chain(acc: &mut Digest, bytes: &[u8]) {
    fold(acc, bytes);
    *acc = Sha1::digest(*acc).into();
}

/// The digest's text: 40 lower-case hex digits.
pub fn hex(d: &Digest) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(40);
    for b in d {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Chain the value of `entry` (type, contents, whether it expires) into `acc`.
fn chain_value(acc: &mut Digest, entry: &Entry) {
    let type_number = match &entry.value {
        Value::Str(_) => TYPE_STRING,
        Value::List(_) => TYPE_LIST,
        Value::Set(_) => TYPE_SET,
        Value::Hash(_) => TYPE_HASH,
        Value::Stream(_) => TYPE_STREAM,
        Value::ZSet(_) => TYPE_ZSET,
    };
    chain(acc, &type_number.to_be_bytes());
    match &entry.value {
        Value::Str(s) => chain(acc, s),
        Value::List(items) => items.iter().for_each(|item| chain(acc, item)),
        Value::Set(members) => members.iter().for_each(|m| fold(acc, m)),
        Value::Hash(fields) => {
            for (field, value) in fields.iter() {
                let mut pair = EMPTY;
                chain(&mut pair, field);
                chain(&mut pair, value);
                // A field with an expiry time digests differently (its time does not count),
                // as in Redis.
                if fields.ttl(field).is_some() {
                    fold(&mut pair, b"!!hexpire!!");
                }
                fold(acc, &pair);
            }
        }
        Value::ZSet(z) => {
            for e in z.iter() {
                let mut pair = EMPTY;
                chain(&mut pair, &e.member);
                chain(&mut pair, rill_resp::double_text(e.score).as_bytes());
                fold(acc, &pair);
            }
        }
        Value::Stream(stream) => {
            let mut text = Vec::with_capacity(48);
            stream.for_each_entry(|id, fields| {
                text.clear();
                text.extend_from_slice(itoa::Buffer::new().format(id.ms).as_bytes());
                text.push(b'.');
                text.extend_from_slice(itoa::Buffer::new().format(id.seq).as_bytes());
                chain(acc, &text);
                for &(name, value) in fields {
                    chain(acc, name);
                    text.clear();
                    codec::render(value, &mut text);
                    chain(acc, &text);
                }
            });
        }
    }
    if entry.expire_at_ms().is_some() {
        fold(acc, b"!!expire!!");
    }
}

/// `DEBUG DIGEST-VALUE`'s digest of one entry: its value, without the key's name.
pub fn value_digest(entry: &Entry) -> Digest {
    let mut d = EMPTY;
    chain_value(&mut d, entry);
    d
}

/// Longest key DEBUG POPULATE makes, in bytes: Redis formats it into a 128-byte C buffer.
const POPULATE_KEY_MAX: usize = 127;

impl Engine {
    /// `DEBUG DIGEST`: every database, keys whose time has passed but that are still stored
    /// included. O(total size of the data).
    pub fn dataset_digest(&self) -> Digest {
        let mut total = EMPTY;
        for (number, db) in self.dbs.iter().enumerate() {
            if db.is_empty() {
                continue;
            }
            chain(&mut total, &u32::try_from(number).unwrap_or(u32::MAX).to_be_bytes());
            for (key, entry) in db.iter() {
                let mut d = EMPTY;
                chain(&mut d, key);
                chain_value(&mut d, entry);
                fold(&mut total, &d);
            }
        }
        total
    }

    /// `DEBUG DIGEST-VALUE`'s digest of `key` in `db`: found whether or not its time has
    /// passed (not an access), [`EMPTY`] if it is not stored.
    pub fn key_value_digest(&self, db: usize, key: &[u8]) -> Digest {
        self.db(db).get_raw(key).map_or(EMPTY, value_digest)
    }

    /// `DEBUG POPULATE count prefix size` in `ctx.db`, after the server parsed the arguments
    /// (`size` 0: no padding). Each key created is recorded as a `SET` (an explicit effect), so
    /// the log replays it and a replica receives it. A key that exists is left as it is (looked
    /// up as a write would, so one whose time has passed is deleted and made afresh). New keys
    /// invalidate WATCH but do not count as changes (Redis does not count them in `dirty`).
    pub fn populate(&mut self, ctx: &mut CallCtx, count: u64, prefix: &[u8], size: u64) -> Result<(), CmdError> {
        ctx.explicit();
        let db = ctx.db;
        // Redis sizes the table for `count` keys first and gives up if it cannot.
        let wanted = usize::try_from(count).unwrap_or(usize::MAX);
        let more = wanted.saturating_sub(self.db(db).len());
        if self.db_mut(db).keys.try_reserve(more).is_err() {
            return Err(CmdError::full("ERR OOM in dictTryExpand"));
        }
        // The prefix is read as a C string.
        let prefix = prefix.split(|&b| b == 0).next().unwrap_or_default();
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let mut num = itoa::Buffer::new();
        for j in 0..count {
            let digits = num.format(j).as_bytes();
            let mut key = Vec::with_capacity(prefix.len() + 1 + digits.len());
            key.extend_from_slice(prefix);
            key.push(b':');
            key.extend_from_slice(digits);
            key.truncate(POPULATE_KEY_MAX);
            if self.lookup(db, &key, ctx.now_ms).is_some() {
                continue;
            }
            let mut value = Vec::new();
            let want = if size == 0 { 6 + digits.len() } else { size };
            if value.try_reserve_exact(want).is_err() {
                return Err(CmdError::full("ERR OOM allocating a DEBUG POPULATE value"));
            }
            value.extend_from_slice(b"value:");
            value.extend_from_slice(digits);
            if size != 0 {
                value.resize(size, 0);
            }
            let key = Bytes::from(key);
            let value = Bytes::from(value);
            self.insert(db, key.clone(), Value::Str(value.clone()));
            self.watch.touch(db, &key);
            ctx.emit(Effect::command(db, vec![Bytes::from_static(b"SET"), key, value]));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::EngineConfig;

    #[test]
    fn chain_depends_on_order_and_fold_does_not() {
        let (mut a, mut b) = (EMPTY, EMPTY);
        chain(&mut a, b"x");
        chain(&mut a, b"y");
        chain(&mut b, b"y");
        chain(&mut b, b"x");
        assert_ne!(a, b);
        let (mut a, mut b) = (EMPTY, EMPTY);
        fold(&mut a, b"x");
        fold(&mut a, b"y");
        fold(&mut b, b"y");
        fold(&mut b, b"x");
        assert_eq!(a, b);
        // Folding the same bytes twice cancels out.
        fold(&mut a, b"x");
        fold(&mut a, b"x");
        assert_eq!(a, b);
    }

    #[test]
    fn hex_is_forty_lower_case_digits() {
        let mut d = EMPTY;
        d[0] = 0xab;
        d[19] = 0x01;
        let h = hex(&d);
        assert_eq!(h.len(), 40);
        assert!(h.starts_with("ab00"));
        assert!(h.ends_with("01"));
        assert_eq!(hex(&EMPTY), "0".repeat(40));
    }

    #[test]
    fn empty_dataset_and_missing_key_are_zero() {
        let e = Engine::new(EngineConfig::default());
        assert_eq!(e.dataset_digest(), EMPTY);
        assert_eq!(e.key_value_digest(0, b"nope"), EMPTY);
    }

    #[test]
    fn expiry_and_database_change_the_digest() {
        let mut e = Engine::new(EngineConfig::default());
        e.insert(0, Bytes::from_static(b"k"), Value::Str(Bytes::from_static(b"v")));
        let plain = e.dataset_digest();
        assert_eq!(e.key_value_digest(0, b"k"), value_digest(&Entry::new(Value::Str(Bytes::from_static(b"v")), None)));
        e.set_expire(0, b"k", Some(i64::MAX));
        let expiring = e.dataset_digest();
        assert_ne!(plain, expiring);
        e.set_expire(0, b"k", None);
        assert_eq!(e.dataset_digest(), plain);
        let v = e.remove(0, b"k").unwrap();
        e.insert(1, Bytes::from_static(b"k"), v.value);
        assert_ne!(e.dataset_digest(), plain);
    }

    #[test]
    fn populate_skips_existing_keys_and_pads_values() {
        let mut e = Engine::new(EngineConfig::default());
        e.insert(0, Bytes::from_static(b"p:1"), Value::Str(Bytes::from_static(b"mine")));
        let mut ctx = CallCtx::new(0, 1_000, 1);
        ctx.recording = true;
        e.populate(&mut ctx, 3, b"p", 8).unwrap();
        assert_eq!(e.db(0).len(), 3);
        let get = |e: &Engine, k: &[u8]| match &e.db(0).get_raw(k).unwrap().value {
            Value::Str(s) => s.clone(),
            _ => unreachable!(),
        };
        assert_eq!(&get(&e, b"p:0")[..], b"value:0\0");
        assert_eq!(&get(&e, b"p:1")[..], b"mine");
        assert_eq!(&get(&e, b"p:2")[..], b"value:2\0");
        assert!(ctx.explicit);
        e.populate(&mut ctx, 1, b"q", 3).unwrap();
        assert_eq!(&get(&e, b"q:0")[..], b"val");
        e.populate(&mut ctx, 1, &[b'x'; 200], 0).unwrap();
        let long: Vec<u8> = [b'x'; 127].to_vec();
        assert_eq!(&get(&e, &long)[..], b"value:0");
    }
}
