//! The RDB value codec: one value in Redis' RDB encoding, as DUMP produces and RESTORE reads,
//! byte-compatible with Redis so payloads move between rill and Redis in both directions.
//!
//! ```text
//! DUMP payload
//! +-----------+----------------------+----------------------+---------------------------+
//! | type: 1 B | value body (per type) | RDB version: u16 LE | CRC-64: u64 LE            |
//! +-----------+----------------------+----------------------+---------------------------+
//!  ^----------- checksummed (Jones CRC-64, see `crc64`) ---------------^
//! ```
//!
//! A stored CRC of 0 means "not checksummed" (Redis with `rdbchecksum no`) and is accepted.
//!
//! What we write, and the payload version we stamp (the oldest RDB version that defines every
//! type used, so older servers accept what they can read):
//!
//! | value  | type written                         | body                                 | version |
//! |--------|--------------------------------------|--------------------------------------|---------|
//! | string | 0 `STRING`                           | int-encoded when canonical i32, else raw | 10  |
//! | list   | 18 `LIST_QUICKLIST_2`                | listpack nodes of ≤ 8 KiB            | 10      |
//! | set    | 2 `SET`                              | count + members                      | 10      |
//! | hash   | 4 `HASH`                             | count + field/value pairs            | 10      |
//! | hash with field expiry times | 24 `HASH_METADATA` | earliest time + (time, field, value) | 12 |
//! | stream | 21 `STREAM_LISTPACKS_3`, or 27 `STREAM_LISTPACKS_5` when it has IDMP state or XNACKed entries; 19 `STREAM_LISTPACKS_2` in a file for Redis 7.0 ([`file::FileWriter`] of version 10) | see [`stream`] | 11 / 14 |
//!
//! What we read: the above plus list 1, 10 (ziplist), 14 (quicklist of ziplists); set 11
//! (intset), 20 (listpack); hash 9 (zipmap), 13 (ziplist), 16 (listpack), with field expiry
//! 22, 23 (7.4 release candidates), 24, 25 (listpackex); streams 15, 19, 21,
//! 26, 27; LZF-compressed strings anywhere a string appears. Modules have no rill value to
//! load into: RESTORE answers them as bad data, a
//! snapshot load fails naming the type ([`RdbError::UnsupportedType`], [`type_name`]).
//!
//! Numbers read are bounded by what they mean: a count of elements still to read by the bytes
//! left (each takes at least one), and it reserves memory only up to a small fixed bound; a
//! database index by the server's databases; lengths of strings by the bytes present (LZF by
//! the most its input can inflate to).

pub mod crc64;
pub mod file;
pub(crate) mod io;
mod legacy;
pub(crate) mod listpack;
mod lzf;
pub mod stream;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests;

use crate::keyspace::Value;
use crate::types::stream::NodeLimits;
use bytes::Bytes;
use io::{Reader, Writer};
use std::collections::VecDeque;

/// The newest RDB version we read (Redis unstable's `RDB_VERSION`).
pub const RDB_VERSION: u16 = 14;
/// Version stamped on payloads whose types Redis 7.0 already knew; a snapshot written in it
/// ([`file::FileWriter`]) holds streams in Redis 7.0's type.
pub const VERSION_REDIS_7_0: u16 = 10;
/// Version stamped on payloads using Redis 7.2's stream type.
const VERSION_REDIS_7_2: u16 = 11;
/// Footer: version (2 bytes) + CRC (8 bytes).
const FOOTER_BYTES: usize = 10;

/// Object type bytes.
pub mod types {
    /// A string.
    pub const STRING: u8 = 0;
    /// A list as a plain sequence of strings.
    pub const LIST: u8 = 1;
    /// A set as a plain sequence of strings.
    pub const SET: u8 = 2;
    /// A hash as plain field/value strings.
    pub const HASH: u8 = 4;
    /// A hash in one zipmap (Redis < 2.6).
    pub const HASH_ZIPMAP: u8 = 9;
    /// A list in one ziplist (Redis < 3.2).
    pub const LIST_ZIPLIST: u8 = 10;
    /// An all-integer set in one intset.
    pub const SET_INTSET: u8 = 11;
    /// A hash in one ziplist (Redis < 7.0).
    pub const HASH_ZIPLIST: u8 = 13;
    /// A list as quicklist nodes, each a ziplist (Redis 3.2 .. 6.2).
    pub const LIST_QUICKLIST: u8 = 14;
    /// A hash in one listpack.
    pub const HASH_LISTPACK: u8 = 16;
    /// A list as quicklist nodes, each a listpack or one plain element (Redis ≥ 7.0).
    pub const LIST_QUICKLIST_2: u8 = 18;
    /// A set in one listpack.
    /// Sorted set, scores as text (Redis before 3.0).
    pub const ZSET: u8 = 3;
    /// Sorted set, scores as binary doubles (what Redis writes for a skiplist).
    pub const ZSET_2: u8 = 5;
    /// Sorted set in a ziplist (Redis before 7.0).
    pub const ZSET_ZIPLIST: u8 = 12;
    /// Sorted set in a listpack (what Redis writes for a small one).
    pub const ZSET_LISTPACK: u8 = 17;
    pub const SET_LISTPACK: u8 = 20;
    /// A hash with field expiry times, each absolute (Redis 7.4 release candidates).
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    /// A listpack hash with field expiry times (Redis 7.4 release candidates).
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    /// A hash with field expiry times: the earliest time, then (time, field, value) triples,
    /// each time relative to the earliest (+1; 0: none).
    pub const HASH_METADATA: u8 = 24;
    /// A listpack hash with field expiry times: the earliest time, then one listpack of
    /// (field, value, time) triples, each time absolute (0: none).
    pub const HASH_LISTPACK_EX: u8 = 25;
}

/// The payload version of a hash with field expiry times (Redis 7.4's RDB 12).
const VERSION_REDIS_7_4: u16 = 12;

/// The latest field expiry time RDB holds (Redis' expiry buckets' range).
const FIELD_TIME_MAX: u64 = (1 << 48) - 1;

/// A quicklist-2 node holding one element as-is.
const QUICKLIST_NODE_PLAIN: u64 = 1;
/// A quicklist-2 node holding a listpack.
const QUICKLIST_NODE_PACKED: u64 = 2;
/// Listpack bytes per list node we write (Redis' default `list-max-listpack-size -2`).
const LIST_NODE_MAX_BYTES: usize = 8 * 1024;

/// Why a payload could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RdbError {
    /// The footer is missing, the version is newer than [`RDB_VERSION`], or the CRC differs.
    VersionOrChecksum,
    /// The value ends before its encoding says it should.
    Truncated,
    /// The bytes are not a valid encoding; the text says what was wrong.
    Corrupt(&'static str),
    /// A type rill has no value for (sorted sets, modules, hashes with field expiry, ...).
    UnsupportedType(u8),
    /// A snapshot file selects database `db`, and the server has only `databases` (Redis
    /// refuses such a file at load too: its keys have nowhere to go).
    DatabaseOutOfRange {
        /// The index the file names.
        db: u64,
        /// The server's `databases`.
        databases: usize,
    },
}

impl std::fmt::Display for RdbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RdbError::VersionOrChecksum => f.write_str("RDB version newer than this server reads, or checksum wrong"),
            RdbError::Truncated => f.write_str("the data ends before its encoding says it should"),
            RdbError::Corrupt(why) => write!(f, "corrupt data: {why}"),
            RdbError::UnsupportedType(t) => {
                write!(f, "a value of RDB type {t} ({}), a type rill does not serve", type_name(*t))
            }
            RdbError::DatabaseOutOfRange { db, databases } => write!(
                f,
                "the file holds keys of database {db}, but this server has {databases} databases \
                 (0 to {}); start it with `databases {}` or more to load this file",
                databases.saturating_sub(1),
                db.saturating_add(1)
            ),
        }
    }
}

/// What an RDB type byte (or key-level opcode) holds, for error messages.
pub fn type_name(rdb_type: u8) -> &'static str {
    match rdb_type {
        3 | 5 | 12 | 17 => "sorted set",
        6 | 7 => "module value",
        28 => "array",
        29 => "GCRA rate limiter",
        0xF3 => "module key metadata",
        0xF7 => "module auxiliary data",
        types::STRING => "string",
        types::LIST | types::LIST_ZIPLIST | types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => "list",
        types::SET | types::SET_INTSET | types::SET_LISTPACK => "set",
        types::HASH
        | types::HASH_ZIPMAP
        | types::HASH_ZIPLIST
        | types::HASH_LISTPACK
        | types::HASH_METADATA_PRE_GA
        | types::HASH_LISTPACK_EX_PRE_GA
        | types::HASH_METADATA
        | types::HASH_LISTPACK_EX => "hash",
        stream::TYPE_STREAM_V1
        | stream::TYPE_STREAM_V2
        | stream::TYPE_STREAM_V3
        | stream::TYPE_STREAM_V4
        | stream::TYPE_STREAM_V5
        | stream::TYPE_STREAM_RILL => "stream",
        _ => "unknown type",
    }
}

/// Server state that loading depends on.
#[derive(Debug, Clone, Copy)]
pub struct LoadContext {
    /// Node limits for re-appending the live entries of a stream node that cannot be loaded as
    /// it was laid out (IDs out of order).
    pub limits: NodeLimits,
    /// IDMP duration for streams from formats that do not carry one.
    pub idmp_duration_secs: u64,
    /// IDMP max size for streams from formats that do not carry one.
    pub idmp_max_size: u64,
    /// The clock: IIDs already expired are dropped.
    pub now_ms: i64,
    /// Streams may come in rill's own type ([`stream::TYPE_STREAM_RILL`]): only in a rill
    /// replica's load of its primary's snapshot.
    pub rill_streams: bool,
}

/// The DUMP payload of `value`. `now_ms` filters expired IIDs. O(size of the value).
pub fn dump(value: &Value, now_ms: i64) -> Vec<u8> {
    let mut w = Writer::default();
    let rdb_type = value_type(value);
    w.u8(rdb_type);
    // A `Writer` keeps every byte: writing to it cannot fail.
    let _ = encode_body(&mut w, value, rdb_type, now_ms);
    w.raw(&version_of(value, rdb_type).to_le_bytes());
    let crc = crc64::crc64(0, &w.buf);
    w.raw(&crc.to_le_bytes());
    w.buf
}

/// Check a payload's footer and load its value. O(size of the payload).
pub fn restore(payload: &[u8], ctx: &LoadContext) -> Result<Value, RdbError> {
    let body = verify_footer(payload)?;
    let mut r = Reader::new(body);
    let rdb_type = r.u8()?;
    decode_value(&mut r, rdb_type, ctx)
}

/// The payload without its footer, if the version is one we read and the CRC matches.
pub fn verify_footer(payload: &[u8]) -> Result<&[u8], RdbError> {
    let split = payload.len().checked_sub(FOOTER_BYTES).ok_or(RdbError::VersionOrChecksum)?;
    let (body_and_version, crc) = payload.split_at(split + 2);
    let version_bytes = body_and_version.get(split..).unwrap_or_default();
    let version =
        u16::from_le_bytes([version_bytes.first().copied().unwrap_or(0), version_bytes.get(1).copied().unwrap_or(0)]);
    if version > RDB_VERSION {
        return Err(RdbError::VersionOrChecksum);
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(crc);
    let stored = u64::from_le_bytes(stored);
    if stored != 0 && stored != crc64::crc64(0, body_and_version) {
        return Err(RdbError::VersionOrChecksum);
    }
    Ok(payload.get(..split).unwrap_or_default())
}

/// The type byte a value is written with in a file for Redis 7.0 (RDB 10): a stream in 7.0's
/// type ([`stream::TYPE_STREAM_V2`]: its consumers' active-times left out). A stream holding
/// state 7.0 has no place for (IDMP, XNACKed entries) is refused.
fn value_type_7_0(value: &Value) -> Result<u8, &'static str> {
    match value {
        Value::Stream(s) if stream::type_for(s) > stream::TYPE_STREAM_V3 => {
            Err("a stream with IDMP state or XNACKed entries, which Redis 7.0 cannot hold")
        }
        Value::Stream(_) => Ok(stream::TYPE_STREAM_V2),
        Value::Hash(h) if h.ttl_count() > 0 => Err("a hash with field expiry times, which Redis 7.0 cannot hold"),
        other => Ok(value_type(other)),
    }
}

/// The type byte a value is written with.
fn value_type(value: &Value) -> u8 {
    match value {
        Value::Str(_) => types::STRING,
        Value::List(_) => types::LIST_QUICKLIST_2,
        Value::Set(_) => types::SET,
        Value::Hash(h) if h.ttl_count() > 0 => types::HASH_METADATA,
        Value::Hash(_) => types::HASH,
        Value::Stream(s) => stream::type_for(s),
        Value::ZSet(z) if zset_fits_listpack(z) => types::ZSET_LISTPACK,
        Value::ZSet(_) => types::ZSET_2,
    }
}

/// Whether Redis would hold this sorted set in a listpack under its default limits (128
/// members of at most 64 bytes): what decides the form a DUMP writes it in.
fn zset_fits_listpack(z: &crate::types::zset::ZSet) -> bool {
    z.len() <= 128 && z.max_member_len() <= 64
}

/// The payload version a value written as `rdb_type` needs.
fn version_of(value: &Value, rdb_type: u8) -> u16 {
    match value {
        Value::Stream(_) if rdb_type > stream::TYPE_STREAM_V3 => RDB_VERSION,
        Value::Stream(_) => VERSION_REDIS_7_2,
        Value::Hash(_) if rdb_type == types::HASH_METADATA => VERSION_REDIS_7_4,
        _ => VERSION_REDIS_7_0,
    }
}

/// Write the body of `value` (its type byte, [`value_type`], already written) to `out`.
fn encode_body(out: &mut impl stream::BodyOut, value: &Value, rdb_type: u8, now_ms: i64) -> std::io::Result<()> {
    let w = out.w();
    match value {
        Value::Str(s) => w.string(s),
        Value::List(items) => {
            let nodes = list_nodes(items);
            w.length(nodes.len() as u64);
            for lp in nodes {
                w.length(QUICKLIST_NODE_PACKED);
                w.raw_string(&lp);
            }
        }
        Value::Set(members) => {
            w.length(members.len() as u64);
            for m in members.iter() {
                w.string(m);
            }
        }
        Value::Hash(fields) if rdb_type == types::HASH_METADATA => {
            let min = fields.min_ttl().unwrap_or(0);
            w.millis(min);
            w.length(fields.len() as u64);
            for (f, v) in fields.iter() {
                w.length(fields.ttl(f).map_or(0, |t| t.abs_diff(min) + 1));
                w.string(f);
                w.string(v);
            }
        }
        Value::Hash(fields) => {
            w.length(fields.len() as u64);
            for (f, v) in fields.iter() {
                w.string(f);
                w.string(v);
            }
        }
        Value::Stream(s) => return stream::encode(out, s, rdb_type, now_ms),
        Value::ZSet(z) if rdb_type == types::ZSET_LISTPACK => {
            let mut lp = listpack::Builder::default();
            for e in z.iter() {
                lp.push_str(&e.member);
                lp.push_str(rill_resp::double_text(e.score).as_bytes());
            }
            w.raw_string(&lp.finish());
        }
        Value::ZSet(z) => {
            // Highest first, as Redis walks its skiplist from the tail.
            w.length(z.len() as u64);
            for e in z.iter().rev() {
                w.string(&e.member);
                w.raw(&e.score.to_le_bytes());
            }
        }
    }
    Ok(())
}

/// A list cut into listpacks of about [`LIST_NODE_MAX_BYTES`] each.
fn list_nodes(items: &VecDeque<Bytes>) -> Vec<Vec<u8>> {
    let mut nodes = Vec::new();
    let mut lp = listpack::Builder::default();
    for item in items {
        if lp.len_bytes() > listpack::Builder::default().len_bytes()
            && lp.len_bytes() + item.len() > LIST_NODE_MAX_BYTES
        {
            nodes.push(std::mem::take(&mut lp).finish());
        }
        lp.push_str(item);
    }
    if lp.len_bytes() > listpack::Builder::default().len_bytes() {
        nodes.push(lp.finish());
    }
    nodes
}

/// Read the body of a value of `rdb_type`.
fn decode_value(r: &mut Reader<'_>, rdb_type: u8, ctx: &LoadContext) -> Result<Value, RdbError> {
    let value = match rdb_type {
        types::STRING => Value::Str(Bytes::from(r.string()?)),
        types::LIST => {
            let n = r.count()?;
            let mut items = VecDeque::with_capacity(io::preallocation(n));
            for _ in 0..n {
                items.push_back(Bytes::from(r.string()?));
            }
            Value::List(items)
        }
        types::LIST_ZIPLIST => Value::List(legacy::ziplist(&r.string()?)?.into_iter().map(Bytes::from).collect()),
        types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => {
            let nodes = r.count()?;
            let mut items = VecDeque::new();
            for _ in 0..nodes {
                let container = if rdb_type == types::LIST_QUICKLIST { QUICKLIST_NODE_PACKED } else { r.length()? };
                let node = r.string()?;
                match (rdb_type, container) {
                    (types::LIST_QUICKLIST, _) => {
                        items.extend(legacy::ziplist(&node)?.into_iter().map(Bytes::from));
                    }
                    (_, QUICKLIST_NODE_PLAIN) => items.push_back(Bytes::from(node)),
                    (_, QUICKLIST_NODE_PACKED) => {
                        items.extend(listpack::decode(&node)?.into_iter().map(|i| Bytes::from(i.to_bytes())));
                    }
                    _ => return Err(RdbError::Corrupt("unknown quicklist container")),
                }
            }
            Value::List(items)
        }
        types::SET => {
            let n = r.count()?;
            set_from((0..n).map(|_| r.string()))?
        }
        types::SET_INTSET => set_from(legacy::intset(&r.string()?)?.into_iter().map(Ok))?,
        types::SET_LISTPACK => {
            let lp = r.string()?;
            set_from(listpack::decode(&lp)?.into_iter().map(|i| Ok(i.to_bytes())))?
        }
        types::HASH => {
            let n = r.count()?;
            let mut pairs = Vec::with_capacity(io::preallocation(n));
            for _ in 0..n {
                let f = r.string()?;
                pairs.push((f, r.string()?));
            }
            hash_from(pairs)?
        }
        types::HASH_METADATA | types::HASH_METADATA_PRE_GA => {
            let min = if rdb_type == types::HASH_METADATA { r.millis()? } else { 0 };
            let n = r.count()?;
            let mut triples = Vec::with_capacity(io::preallocation(n));
            for _ in 0..n {
                let raw = r.length()?;
                let at = match (raw, rdb_type == types::HASH_METADATA) {
                    (0, _) => 0,
                    (t, true) => t
                        .checked_add_signed(min.checked_sub(1).ok_or(RdbError::Corrupt("hash min expiry"))?)
                        .ok_or(RdbError::Corrupt("hash field expiry"))?,
                    (t, false) => t,
                };
                let f = r.string()?;
                triples.push((f, r.string()?, at));
            }
            timed_hash_from(triples)?
        }
        types::HASH_LISTPACK_EX | types::HASH_LISTPACK_EX_PRE_GA => {
            if rdb_type == types::HASH_LISTPACK_EX {
                r.millis()?;
            }
            let lp = r.string()?;
            let items = listpack::decode(&lp)?;
            if items.len() % 3 != 0 {
                return Err(RdbError::Corrupt("listpackex hash not in triples"));
            }
            let mut triples = Vec::with_capacity(items.len() / 3);
            let mut it = items.into_iter();
            while let (Some(f), Some(v), Some(t)) = (it.next(), it.next(), it.next()) {
                let at = u64::try_from(t.int()?).map_err(|_| RdbError::Corrupt("hash field expiry"))?;
                triples.push((f.to_bytes(), v.to_bytes(), at));
            }
            timed_hash_from(triples)?
        }
        types::HASH_ZIPMAP => hash_from(legacy::zipmap(&r.string()?)?)?,
        types::HASH_ZIPLIST => hash_from(pairs_of(legacy::ziplist(&r.string()?)?)?)?,
        types::HASH_LISTPACK => {
            let lp = r.string()?;
            hash_from(pairs_of(listpack::decode(&lp)?.into_iter().map(|i| i.to_bytes()).collect())?)?
        }
        stream::TYPE_STREAM_V1
        | stream::TYPE_STREAM_V2
        | stream::TYPE_STREAM_V3
        | stream::TYPE_STREAM_V4
        | stream::TYPE_STREAM_V5 => Value::Stream(Box::new(stream::decode(r, rdb_type, ctx)?)),
        stream::TYPE_STREAM_RILL if ctx.rill_streams => Value::Stream(Box::new(stream::decode(r, rdb_type, ctx)?)),
        types::ZSET | types::ZSET_2 => {
            let n = r.count()?;
            let mut pairs = Vec::with_capacity(io::preallocation(n));
            for _ in 0..n {
                let member = r.string()?;
                let score = if rdb_type == types::ZSET_2 {
                    let raw: [u8; 8] = r.bytes(8)?.try_into().map_err(|_| RdbError::Corrupt("zset score"))?;
                    let score = f64::from_le_bytes(raw);
                    if score.is_nan() {
                        return Err(RdbError::Corrupt("zset score is NaN"));
                    }
                    score
                } else {
                    text_score(r)?
                };
                pairs.push((member, score));
            }
            zset_from(pairs)?
        }
        // A listpack (or ziplist) holds scores as text, and `-0` reads back as 0 (see
        // `ZSet::positive_zeros`).
        types::ZSET_ZIPLIST => zset_from(positive_zeros(score_pairs(legacy::ziplist(&r.string()?)?)?))?,
        types::ZSET_LISTPACK => {
            let lp = r.string()?;
            let items: Vec<Vec<u8>> = listpack::decode(&lp)?.into_iter().map(|i| i.to_bytes()).collect();
            zset_from(positive_zeros(score_pairs(items)?))?
        }
        other => return Err(RdbError::UnsupportedType(other)),
    };
    // Redis refuses to load an empty collection (it would be a key with no value).
    let empty = match &value {
        Value::List(l) => l.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::Hash(h) => h.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        Value::Str(_) | Value::Stream(_) => false,
    };
    if empty {
        return Err(RdbError::Corrupt("empty collection"));
    }
    Ok(value)
}

fn set_from(members: impl Iterator<Item = Result<Vec<u8>, RdbError>>) -> Result<Value, RdbError> {
    let mut set = crate::keyspace::SetMembers::default();
    for m in members {
        if !set.insert(Bytes::from(m?)) {
            return Err(RdbError::Corrupt("duplicate set member"));
        }
    }
    Ok(Value::Set(set))
}

/// A hash field and its value, as decoded.
type Pair = (Vec<u8>, Vec<u8>);

fn pairs_of(flat: Vec<Vec<u8>>) -> Result<Vec<Pair>, RdbError> {
    if !flat.len().is_multiple_of(2) {
        return Err(RdbError::Corrupt("odd number of hash elements"));
    }
    let mut it = flat.into_iter();
    let mut pairs = Vec::new();
    while let (Some(f), Some(v)) = (it.next(), it.next()) {
        pairs.push((f, v));
    }
    Ok(pairs)
}

fn hash_from(pairs: Vec<Pair>) -> Result<Value, RdbError> {
    let mut hash = crate::keyspace::HashFields::with_capacity(pairs.len());
    for (f, v) in pairs {
        if hash.insert(Bytes::from(f), Bytes::from(v)).is_some() {
            return Err(RdbError::Corrupt("duplicate hash field"));
        }
    }
    Ok(Value::Hash(hash))
}

/// A hash from (field, value, expiry time) triples, time 0 meaning none.
fn timed_hash_from(triples: Vec<(Vec<u8>, Vec<u8>, u64)>) -> Result<Value, RdbError> {
    let mut hash = crate::keyspace::HashFields::with_capacity(triples.len());
    for (f, v, at) in triples {
        if at > FIELD_TIME_MAX {
            return Err(RdbError::Corrupt("hash field expiry out of range"));
        }
        let f = Bytes::from(f);
        if hash.insert(f.clone(), Bytes::from(v)).is_some() {
            return Err(RdbError::Corrupt("duplicate hash field"));
        }
        if at != 0 {
            hash.set_ttl(&f, i64::try_from(at).ok());
        }
    }
    Ok(Value::Hash(hash))
}

/// A score in the old text form: a length byte then ASCII, or 253 / 254 / 255 for NaN, +inf,
/// -inf. NaN is refused (no sorted set can hold it).
fn text_score(r: &mut Reader<'_>) -> Result<f64, RdbError> {
    match r.u8()? {
        253 => Err(RdbError::Corrupt("zset score is NaN")),
        254 => Ok(f64::INFINITY),
        255 => Ok(f64::NEG_INFINITY),
        n => {
            let text = r.bytes(usize::from(n))?;
            crate::util::parse_f64(text).ok_or(RdbError::Corrupt("zset score"))
        }
    }
}

/// Member / score-text pairs of a ziplist or listpack sorted set.
fn score_pairs(items: Vec<Vec<u8>>) -> Result<Vec<(Vec<u8>, f64)>, RdbError> {
    if !items.len().is_multiple_of(2) {
        return Err(RdbError::Corrupt("zset listpack has an odd number of items"));
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(member), Some(score)) = (it.next(), it.next()) {
        let score = crate::util::parse_f64(&score).ok_or(RdbError::Corrupt("zset score"))?;
        out.push((member, score));
    }
    Ok(out)
}

fn positive_zeros(mut pairs: Vec<(Vec<u8>, f64)>) -> Vec<(Vec<u8>, f64)> {
    for (_, s) in &mut pairs {
        if *s == 0.0 {
            *s = 0.0;
        }
    }
    pairs
}

/// A sorted set from member / score pairs; a repeated member is corrupt, as in Redis.
fn zset_from(pairs: Vec<(Vec<u8>, f64)>) -> Result<Value, RdbError> {
    let mut z = crate::types::zset::ZSet::new();
    for (member, score) in pairs {
        if z.insert(Bytes::from(member), score).is_some() {
            return Err(RdbError::Corrupt("duplicate zset member"));
        }
    }
    Ok(Value::ZSet(z))
}
