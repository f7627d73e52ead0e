//! Redis' encoding rules for strings, hashes and sets, applied to [`ObjectMeta`] by the write
//! handlers, and the name OBJECT ENCODING reports. Lists are in `quicklist.rs`.
//!
//! Strings (Redis 8.2): a value that is a canonical integer of at most 20 characters is `int`.
//! Otherwise it is `embstr` when the object, the key name and the value fit Redis' 64-byte
//! allocation together — key length + value length <= 41, or <= 33 when the key has an expiry
//! (Redis 7.0 ignored the key: value <= 44) — and `raw` otherwise. INCRBYFLOAT's result is never
//! `int`; APPEND to an existing key and SETRANGE make it `raw` for good, as does gaining an
//! expiry or a longer name (EXPIRE, GETEX, RENAME, COPY) when it no longer fits.
//!
//! Hashes: `listpack` until a write brings more than `hash-max-listpack-entries` fields, a
//! field or value longer than `hash-max-listpack-value`, or (Redis 7.2+) an HSET with more
//! pairs than the entry limit even if they repeat a field; then `hashtable` for good.
//!
//! Sets: created by SADD as `intset` when the first member is an integer and the command has at
//! most `set-max-intset-entries` members, else `listpack` within `set-max-listpack-entries`,
//! else `hashtable`. A non-integer member turns an intset into a listpack if it stays within
//! the listpack limits, else into a hashtable; a listpack outgrowing its limits becomes a
//! hashtable. Nothing converts back, except two rebuilds Redis does: SPOP with a count that
//! leaves at most a fifth of a hashtable set rebuilds the rest as a listpack (or a hashtable
//! if it does not fit), and the *STORE commands build their result fresh.

use super::meta::{Form, ObjectConfig, ObjectMeta};
use super::quicklist::ListLayout;
use crate::keyspace::{HashFields, SetMembers};
use crate::util::parse_i64;
use crate::{Entry, Value};
use bytes::Bytes;
use std::collections::VecDeque;

/// The largest key + value length of an `embstr` (Redis 8.2: one 64-byte allocation holds the
/// object header, the key and the value).
const EMBSTR_KEY_AND_VALUE_BYTES: usize = 41;
/// What an expiry takes out of that allocation.
const EMBSTR_EXPIRY_BYTES: usize = 8;
/// The longest integer text Redis tries to read as an `int`.
const INT_MAX_TEXT_BYTES: usize = 20;

/// The encoding name OBJECT ENCODING reports for `entry` stored under `key`.
pub fn name(key: &[u8], entry: &Entry, cfg: &ObjectConfig) -> &'static str {
    let meta = &entry.meta;
    match &entry.value {
        Value::Str(s) => string_name(s, meta.form, key.len(), entry.expire_at_ms().is_some()),
        Value::Hash(h) => match hash_form(meta, h, cfg) {
            Form::Hashtable => "hashtable",
            Form::ListpackEx => "listpackex",
            _ if h.ttl_count() > 0 => "listpackex",
            _ => "listpack",
        },
        Value::Set(s) => match set_form(meta, s, cfg) {
            Form::Intset => "intset",
            Form::Listpack => "listpack",
            _ => "hashtable",
        },
        Value::List(l) => match &meta.list {
            Some(layout) => layout.name(),
            None => ListLayout::natural(l, cfg.list_max_listpack_size).name(),
        },
        Value::Stream(_) => "stream",
        Value::ZSet(z) => match zset_form(meta, z, cfg) {
            Form::Skiplist => "skiplist",
            _ => "listpack",
        },
    }
}

/// What DEBUG OBJECT shows of `entry` beyond its type: the encoding and, for a quicklist, its
/// node count, average entries per node and total listpack bytes (Redis' `ql_nodes`,
/// `ql_avg_node`, `ql_uncompressed_size`).
pub fn debug_fields(key: &[u8], entry: &Entry, cfg: &ObjectConfig) -> (&'static str, Option<(usize, f64, usize)>) {
    let name = name(key, entry, cfg);
    let Value::List(l) = &entry.value else { return (name, None) };
    let natural;
    let layout = match &entry.meta.list {
        Some(layout) => &**layout,
        None => {
            natural = ListLayout::natural(l, cfg.list_max_listpack_size);
            &natural
        }
    };
    let shape = layout.quicklist_shape().map(|(nodes, bytes)| {
        let avg = if nodes == 0 { 0.0 } else { l.len() as f64 / nodes as f64 };
        (nodes, avg, bytes)
    });
    (name, shape)
}

// ---------------------------------------------------------------------------------------------
// Strings

fn fits_embstr(key_len: usize, value_len: usize, has_expiry: bool) -> bool {
    let room = if has_expiry { EMBSTR_KEY_AND_VALUE_BYTES - EMBSTR_EXPIRY_BYTES } else { EMBSTR_KEY_AND_VALUE_BYTES };
    key_len.saturating_add(value_len) <= room
}

fn string_name(value: &[u8], form: Form, key_len: usize, has_expiry: bool) -> &'static str {
    match form {
        Form::StrRaw => "raw",
        Form::Natural if value.len() <= INT_MAX_TEXT_BYTES && parse_i64(value).is_some() => "int",
        _ if fits_embstr(key_len, value.len(), has_expiry) => "embstr",
        _ => "raw",
    }
}

/// The string's key name or expiry changes (`old_*` before, `new_*` after): an `embstr` that no
/// longer fits, and anything already `raw`, stays `raw` (Redis reallocates the object with the
/// new key and expiry, and never turns a `raw` string back).
pub fn string_moved(entry: &mut Entry, old_key_len: usize, old_expiry: bool, new_key_len: usize, new_expiry: bool) {
    let Value::Str(s) = &entry.value else { return };
    let raw = match string_name(s, entry.meta.form, old_key_len, old_expiry) {
        "int" => false,
        "embstr" => !fits_embstr(new_key_len, s.len(), new_expiry),
        _ => true,
    };
    if raw {
        entry.meta.form = Form::StrRaw;
    }
}

// ---------------------------------------------------------------------------------------------
// Hashes

fn len_over(len: usize, limit: u64) -> bool {
    u64::try_from(len).map_or(true, |l| l > limit)
}

fn hash_form(meta: &ObjectMeta, hash: &HashFields, cfg: &ObjectConfig) -> Form {
    match meta.form {
        Form::Listpack | Form::ListpackEx | Form::Hashtable => meta.form,
        _ => {
            let fits = !len_over(hash.len(), cfg.hash_max_listpack_entries)
                && hash.iter().all(|(f, v)| {
                    !len_over(f.len(), cfg.hash_max_listpack_value) && !len_over(v.len(), cfg.hash_max_listpack_value)
                });
            if fits {
                Form::Listpack
            } else {
                Form::Hashtable
            }
        }
    }
}

/// HSET / HMSET / HSETNX, before the fields are set: more pairs than the entry limit, or an
/// argument over the value limit, converts a listpack.
pub fn hash_before_set(meta: &mut ObjectMeta, hash: &HashFields, pairs: &[(&Bytes, &Bytes)], cfg: &ObjectConfig) {
    meta.form = hash_form(meta, hash, cfg);
    if !matches!(meta.form, Form::Listpack | Form::ListpackEx) {
        return;
    }
    let long = |b: &Bytes| len_over(b.len(), cfg.hash_max_listpack_value);
    if len_over(pairs.len(), cfg.hash_max_listpack_entries) || pairs.iter().any(|(f, v)| long(f) || long(v)) {
        meta.form = Form::Hashtable;
    }
}

/// After a field was set to a value of `value_len` bytes (HINCRBY and HINCRBYFLOAT come here
/// without [`hash_before_set`]): a long field or value, or too many fields, converts.
pub fn hash_after_set(
    meta: &mut ObjectMeta,
    hash: &HashFields,
    field_len: usize,
    value_len: usize,
    cfg: &ObjectConfig,
) {
    meta.form = hash_form(meta, hash, cfg);
    if matches!(meta.form, Form::Listpack | Form::ListpackEx)
        && (len_over(field_len, cfg.hash_max_listpack_value)
            || len_over(value_len, cfg.hash_max_listpack_value)
            || len_over(hash.len(), cfg.hash_max_listpack_entries))
    {
        meta.form = Form::Hashtable;
    }
}

/// A field of the hash got an expiry time (HEXPIRE and kin, HSETEX, HGETEX): a listpack
/// becomes a `listpackex`, for good.
pub fn hash_field_timed(meta: &mut ObjectMeta, hash: &HashFields, cfg: &ObjectConfig) {
    meta.form = hash_form(meta, hash, cfg);
    if meta.form == Form::Listpack {
        meta.form = Form::ListpackEx;
    }
}

// ---------------------------------------------------------------------------------------------
// Sets

fn is_int(member: &[u8]) -> bool {
    parse_i64(member).is_some()
}

/// Redis caps the intset at 2^30 entries whatever the setting says.
fn intset_limit(cfg: &ObjectConfig) -> u64 {
    cfg.set_max_intset_entries.min(1 << 30)
}

/// The encoding Redis gives a set built from these members in one go (a RESTORE payload, a
/// snapshot, the result of SINTERSTORE / SUNIONSTORE / SDIFFSTORE).
fn set_natural<'a>(len: usize, members: impl Iterator<Item = &'a [u8]> + Clone, cfg: &ObjectConfig) -> Form {
    if !len_over(len, intset_limit(cfg)) && members.clone().all(is_int) {
        Form::Intset
    } else if !len_over(len, cfg.set_max_listpack_entries)
        && members.clone().all(|m| !len_over(m.len(), cfg.set_max_listpack_value))
    {
        Form::Listpack
    } else {
        Form::Hashtable
    }
}

fn set_form(meta: &ObjectMeta, set: &SetMembers, cfg: &ObjectConfig) -> Form {
    match meta.form {
        Form::Intset | Form::Listpack | Form::Hashtable => meta.form,
        _ => set_natural(set.len(), set.iter(), cfg),
    }
}

/// A set created by SADD (first member, number of members given) or SMOVE (one member).
pub fn set_created(meta: &mut ObjectMeta, first: &[u8], size_hint: usize, cfg: &ObjectConfig) {
    meta.form = if is_int(first) && !len_over(size_hint, intset_limit(cfg)) {
        Form::Intset
    } else if !len_over(size_hint, cfg.set_max_listpack_entries) {
        Form::Listpack
    } else {
        Form::Hashtable
    };
}

/// SADD on an existing set, before adding: more members given than the current encoding holds
/// converts it to a hashtable at once.
pub fn set_before_add(meta: &mut ObjectMeta, set: &SetMembers, size_hint: usize, cfg: &ObjectConfig) {
    meta.form = set_form(meta, set, cfg);
    let over = match meta.form {
        Form::Listpack => len_over(size_hint, cfg.set_max_listpack_entries),
        Form::Intset => len_over(size_hint, intset_limit(cfg)),
        _ => false,
    };
    if over {
        meta.form = Form::Hashtable;
    }
}

/// `member` was just added (it was new) to `set`, which now holds it.
pub fn set_added(meta: &mut ObjectMeta, set: &SetMembers, member: &[u8], cfg: &ObjectConfig) {
    let before = set.len().saturating_sub(1);
    meta.form = match set_form(meta, set, cfg) {
        Form::Listpack
            if len_over(before + 1, cfg.set_max_listpack_entries)
                || len_over(member.len(), cfg.set_max_listpack_value) =>
        {
            Form::Hashtable
        }
        Form::Intset if is_int(member) => {
            if len_over(set.len(), intset_limit(cfg)) {
                Form::Hashtable
            } else {
                Form::Intset
            }
        }
        Form::Intset => {
            // Redis checks the digits of the intset's extremes against the value limit.
            let ints = set.iter().filter_map(parse_i64);
            let (lo, hi) = ints.fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let widest = if before == 0 { 0 } else { digits(lo).max(digits(hi)) };
            if !len_over(before + 1, cfg.set_max_listpack_entries)
                && !len_over(member.len(), cfg.set_max_listpack_value)
                && !len_over(widest, cfg.set_max_listpack_value)
            {
                Form::Listpack
            } else {
                Form::Hashtable
            }
        }
        other => other,
    };
}

/// Characters of `v` in decimal, sign included.
fn digits(v: i64) -> usize {
    let sign = usize::from(v < 0);
    let mut n = v.unsigned_abs();
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d + sign
}

/// A set freshly built from its members (SINTERSTORE, SUNIONSTORE, SDIFFSTORE).
pub fn set_built(meta: &mut ObjectMeta, set: &SetMembers, cfg: &ObjectConfig) {
    meta.form = set_natural(set.len(), set.iter(), cfg);
}

/// SDIFFSTORE when Redis computes the difference by adding every member of the first set and
/// removing the others': the encoding is the one the first set's members build.
pub fn set_built_from<'a>(
    meta: &mut ObjectMeta,
    len: usize,
    members: impl Iterator<Item = &'a [u8]> + Clone,
    cfg: &ObjectConfig,
) {
    meta.form = set_natural(len, members, cfg);
}

/// SPOP with a count that leaves `remaining` members when Redis rebuilds the set from them
/// (`remaining * 5 <= count`): a hashtable's remainder goes into a fresh listpack (strings
/// only, never an intset), converting if it does not fit; a listpack or an intset keeps its
/// encoding.
pub fn set_rebuilt_after_pop(meta: &mut ObjectMeta, set: &SetMembers, cfg: &ObjectConfig) {
    if set_form(meta, set, cfg) == Form::Hashtable {
        let fits = !len_over(set.len(), cfg.set_max_listpack_entries)
            && set.iter().all(|m| !len_over(m.len(), cfg.set_max_listpack_value));
        meta.form = if fits { Form::Listpack } else { Form::Hashtable };
    }
}

/// Resolve a set's `Natural` form against its content (before it changes in place).
pub fn set_resolve(meta: &mut ObjectMeta, set: &SetMembers, cfg: &ObjectConfig) {
    meta.form = set_form(meta, set, cfg);
}

// ---------------------------------------------------------------------------------------------
// Lists

/// The list's layout, derived from its content the first time a command needs it.
pub fn list_layout<'m>(meta: &'m mut ObjectMeta, list: &VecDeque<Bytes>, cfg: &ObjectConfig) -> &'m mut ListLayout {
    meta.list.get_or_insert_with(|| Box::new(ListLayout::natural(list, cfg.list_max_listpack_size)))
}

// ---------------------------------------------------------------------------------------------
// Sorted sets

/// The encoding Redis gives a sorted set built in one go (a *STORE result, a loaded snapshot):
/// a listpack when it is within both `zset-max-listpack-*` limits.
fn zset_natural(len: usize, max_member_len: usize, cfg: &ObjectConfig) -> Form {
    if !len_over(len, cfg.zset_max_listpack_entries) && !len_over(max_member_len, cfg.zset_max_listpack_value) {
        Form::Listpack
    } else {
        Form::Skiplist
    }
}

fn zset_form(meta: &ObjectMeta, z: &crate::types::zset::ZSet, cfg: &ObjectConfig) -> Form {
    match meta.form {
        Form::Listpack | Form::Skiplist => meta.form,
        _ => zset_natural(z.len(), z.max_member_len(), cfg),
    }
}

/// ZADD / ZINCRBY creating the key with `pairs` pairs, the first member `first_len` bytes
/// long: a listpack if both are within the limits (Redis sizes the new set from them).
pub fn zset_created(meta: &mut ObjectMeta, pairs: usize, first_len: usize, cfg: &ObjectConfig) {
    meta.form = if !len_over(pairs, cfg.zset_max_listpack_entries) && !len_over(first_len, cfg.zset_max_listpack_value)
    {
        Form::Listpack
    } else {
        Form::Skiplist
    };
}

/// ZADD on an existing set with `pairs` pairs: more pairs than the entry limit converts a
/// listpack before anything is added.
pub fn zset_before_add(meta: &mut ObjectMeta, z: &crate::types::zset::ZSet, pairs: usize, cfg: &ObjectConfig) {
    meta.form = zset_form(meta, z, cfg);
    if meta.form == Form::Listpack && len_over(pairs, cfg.zset_max_listpack_entries) {
        meta.form = Form::Skiplist;
    }
}

/// Whether the set will be a listpack once `member` (`member_len` bytes, `is_new` or not) is
/// set: a listpack that the new member does not push over a limit (Redis converts before
/// inserting). A listpack holds no `-0` score (see `ZSet::positive_zeros`).
pub fn zset_listpack_after(
    meta: &ObjectMeta,
    z: &crate::types::zset::ZSet,
    member_len: usize,
    is_new: bool,
    cfg: &ObjectConfig,
) -> bool {
    meta.form == Form::Listpack
        && !(is_new
            && (len_over(z.len().saturating_add(1), cfg.zset_max_listpack_entries)
                || len_over(member_len, cfg.zset_max_listpack_value)))
}

/// Whether a sorted set built in one go (a *STORE result, a loaded one) is a listpack.
pub fn zset_built_as_listpack(z: &crate::types::zset::ZSet, cfg: &ObjectConfig) -> bool {
    zset_natural(z.len(), z.max_member_len(), cfg) == Form::Listpack
}

/// After a new member of `member_len` bytes went in: a listpack that now holds more than the
/// entry limit, or got a member longer than the value limit, becomes a skiplist for good.
pub fn zset_added(meta: &mut ObjectMeta, z: &crate::types::zset::ZSet, member_len: usize, cfg: &ObjectConfig) {
    if meta.form == Form::Listpack
        && (len_over(z.len(), cfg.zset_max_listpack_entries) || len_over(member_len, cfg.zset_max_listpack_value))
    {
        meta.form = Form::Skiplist;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_rules() {
        assert_eq!(string_name(b"123", Form::Natural, 60, true), "int");
        assert_eq!(string_name(b"-9223372036854775808", Form::Natural, 1, false), "int");
        assert_eq!(string_name(b"9223372036854775808", Form::Natural, 1, false), "embstr");
        assert_eq!(string_name(b"007", Form::Natural, 1, false), "embstr");
        assert_eq!(string_name(b"3", Form::StrPlain, 1, false), "embstr");
        assert_eq!(string_name(&[b'x'; 40], Form::Natural, 1, false), "embstr");
        assert_eq!(string_name(&[b'x'; 41], Form::Natural, 1, false), "raw");
        assert_eq!(string_name(&[b'x'; 32], Form::Natural, 1, true), "embstr");
        assert_eq!(string_name(&[b'x'; 33], Form::Natural, 1, true), "raw");
        assert_eq!(string_name(b"", Form::Natural, 41, false), "embstr");
        assert_eq!(string_name(b"", Form::Natural, 42, false), "raw");
        assert_eq!(string_name(b"1", Form::StrRaw, 1, false), "raw");
        assert_eq!(digits(-120), 4);
        assert_eq!(digits(0), 1);
        assert_eq!(digits(i64::MIN), 20);
    }
}
