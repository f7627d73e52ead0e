//! HyperLogLog: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.
//!
//! An HLL is a string in Redis' own format, so GET, DUMP, RESTORE, SET and replication carry it
//! unchanged between rill and Redis:
//!
//! ```text
//!  0   4        5        8                16
//!  HYLL encoding 3 zero  cardinality cache (u64 little-endian; top bit set: stale)
//!       0 dense: 16384 registers of 6 bits, packed from the low bits up (12288 bytes)
//!       1 sparse: opcodes, each a run of registers
//!         00xxxxxx           ZERO:  xxxxxx+1 registers at 0 (1..64)
//!         01xxxxxx yyyyyyyy  XZERO: (x<<8|y)+1 registers at 0 (1..16384)
//!         1vvvvvxx           VAL:   xx+1 registers at vvvvv+1 (value 1..32, run 1..4)
//! ```
//!
//! An element is hashed with MurmurHash64A (seed `0xadc83b19`): the low 14 bits pick the
//! register, and the run of zero bits above them plus one (at most 51) is the value it offers;
//! a register keeps the largest. The cardinality is Ertl's estimator over the histogram of
//! register values ("New cardinality estimation algorithms for HyperLogLog sketches",
//! arXiv:1702.01284), as Redis computes it, so counts match Redis' to the unit.
//!
//! A new HLL is sparse (one XZERO, 18 bytes). A sparse HLL turns dense when a register needs a
//! value over 32 or an update would make it longer than `hll-sparse-max-bytes` (3000). A sparse
//! update splits the opcode covering the register and then merges equal neighbouring VAL
//! opcodes within a short window, exactly as Redis does, so the bytes (GET, DUMP) match too.
//!
//! A corrupt HLL (a run past the 16384th register, too few registers, a dense one of the wrong
//! length, a bad magic) is refused with Redis' errors: `WRONGTYPE Key is not a valid
//! HyperLogLog string value.` before use, `INVALIDOBJ Corrupted HLL object detected` while
//! decoding, and nothing is stored.
//!
//! Costs: PFADD O(1) per element on a dense HLL, O(sparse length ≤ hll-sparse-max-bytes) on a
//! sparse one; PFCOUNT of one key O(1) with a valid cache, else O(16384); PFCOUNT of several
//! keys and PFMERGE O(16384) per key.

use super::arg;
use super::object::meta::Form;
use crate::command::{key_at, CommandSpec, Flags, Handler, KeySpec};
use crate::KeyEvent;
use crate::{CallCtx, CmdError, Engine, Value};
use bytes::Bytes;
use rill_resp::Reply;

/// Registers (2^14).
pub const REGISTERS: usize = 1 << P;
const P: u32 = 14;
/// Hash bits left for the run of zeros.
const Q: usize = 64 - P as usize;
const HEADER: usize = 16;
/// A dense HLL's length.
const DENSE_LEN: usize = HEADER + REGISTERS * 6 / 8;
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const SEED: u64 = 0xadc8_3b19;
/// 1 / (2 ln 2).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;

const NOT_HLL: CmdError = CmdError::full("WRONGTYPE Key is not a valid HyperLogLog string value.");
const CORRUPT: CmdError = CmdError::full("INVALIDOBJ Corrupted HLL object detected");

/// A sparse representation that does not decode to exactly 16384 registers.
#[derive(Debug, PartialEq, Eq)]
struct Corrupt;

/// The HyperLogLog commands.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "pfadd",
        arity: -2,
        flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::FAST),
        acl: &["@write", "@hyperloglog", "@fast"],
        key_specs: &[key_at(1, &["RW", "INSERT"])],
        first_key: 1,
        last_key: 1,
        step: 1,
        group: "hyperloglog",
        since: "2.8.9",
        summary:
            "Adds elements to a HyperLogLog, creating it when missing; replies 1 if its estimate may have changed.",
        complexity: "O(1) per element.",
        syntax: "key:key [element ...]",
        ..CommandSpec::of(Handler::Engine(pfadd))
    },
    CommandSpec {
        name: "pfcount",
        arity: -2,
        flags: Flags::READONLY.and(Flags::MAY_REPLICATE),
        acl: &["@read", "@hyperloglog", "@slow"],
        key_specs: &[KeySpec {
            notes: "RW because it may change the internal representation of the key, and propagate to replicas",
            ..crate::command::keys_from(1, 1, &["RW", "ACCESS"])
        }],
        first_key: 1,
        last_key: -1,
        step: 1,
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Estimates the number of distinct elements added to one HyperLogLog, or to the union of several.",
        complexity: "O(1) for one key with its estimate cached; O(N) over N keys otherwise.",
        syntax: "key:key ...",
        ..CommandSpec::of(Handler::Engine(pfcount))
    },
    CommandSpec {
        name: "pfmerge",
        arity: -2,
        flags: Flags::WRITE.and(Flags::DENYOOM),
        acl: &["@write", "@hyperloglog", "@slow"],
        key_specs: &[key_at(1, &["RW", "ACCESS", "INSERT"]), crate::command::keys_from(2, 1, &["RO", "ACCESS"])],
        first_key: 1,
        last_key: -1,
        step: 1,
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Stores in a HyperLogLog the union of it and other HyperLogLogs.",
        complexity: "O(N) to merge N HyperLogLogs.",
        syntax: "destkey:key [sourcekey:key ...]",
        get_keys: Some(pfmerge_keys),
        ..CommandSpec::of(Handler::Engine(pfmerge))
    },
    CommandSpec {
        name: "pfdebug",
        arity: 3,
        flags: Flags::WRITE.and(Flags::DENYOOM).and(Flags::ADMIN),
        acl: &["@write", "@hyperloglog", "@admin", "@slow", "@dangerous"],
        key_specs: &[key_at(2, &["RW", "ACCESS"])],
        first_key: 2,
        last_key: 2,
        step: 1,
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Shows or changes a HyperLogLog's representation (GETREG, DECODE, ENCODING, TODENSE; SIMD).",
        complexity: "O(N) in the registers.",
        syntax: "subcommand:string key:key",
        ..CommandSpec::of(Handler::Engine(pfdebug))
    },
    CommandSpec {
        name: "pfselftest",
        arity: 1,
        flags: Flags::ADMIN,
        acl: &["@hyperloglog", "@admin", "@slow", "@dangerous"],
        group: "hyperloglog",
        since: "2.8.9",
        summary: "Checks the HyperLogLog registers and estimator on random data.",
        complexity: "O(N) in the elements it adds (ten million).",
        ..CommandSpec::of(Handler::Engine(pfselftest))
    },
];

/// PFMERGE's keys: the destination, then every source (none is fine: the newest Redis' answer
/// to `COMMAND GETKEYS PFMERGE dest`, where the key specs alone would find an empty range).
fn pfmerge_keys(args: &[Bytes]) -> Vec<(usize, usize)> {
    (1..args.len()).map(|i| (i, usize::from(i > 1))).collect()
}

// ---------------------------------------------------------------------------------------------
// The representation

fn is_valid(s: &[u8]) -> bool {
    s.len() >= HEADER
        && s.get(..4) == Some(&b"HYLL"[..])
        && s.get(4).is_some_and(|e| *e <= SPARSE)
        && (s.get(4) != Some(&DENSE) || s.len() == DENSE_LEN)
}

fn encoding(s: &[u8]) -> u8 {
    s.get(4).copied().unwrap_or(u8::MAX)
}

/// The header of a new HLL: magic, encoding, a valid cached count of 0.
fn header(encoding: u8) -> Vec<u8> {
    let mut s = b"HYLL".to_vec();
    s.push(encoding);
    s.resize(HEADER, 0);
    s
}

fn new_sparse() -> Vec<u8> {
    let mut s = header(SPARSE);
    push_zeros(&mut s, REGISTERS);
    s
}

fn invalidate_cache(s: &mut [u8]) {
    if let Some(b) = s.get_mut(15) {
        *b |= 0x80;
    }
}

fn cached_count(s: &[u8]) -> Option<u64> {
    let card: [u8; 8] = s.get(8..16)?.try_into().ok()?;
    (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
}

fn set_cached_count(s: &mut [u8], n: u64) {
    if let Some(card) = s.get_mut(8..16) {
        card.copy_from_slice(&n.to_le_bytes());
    }
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let (byte, shift) = (i * 6 / 8, (i * 6 % 8) as u32);
    let lo = u16::from(regs.get(byte).copied().unwrap_or(0));
    let hi = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((lo | hi << 8) >> shift) & 63) as u8
}

fn dense_put(regs: &mut [u8], i: usize, v: u8) {
    let (byte, shift) = (i * 6 / 8, (i * 6 % 8) as u32);
    let mask = 63u16 << shift;
    let bits = u16::from(v & 63) << shift;
    if let Some(b) = regs.get_mut(byte) {
        *b = (*b & !(mask as u8)) | bits as u8;
    }
    if mask >> 8 != 0 {
        if let Some(b) = regs.get_mut(byte + 1) {
            *b = (*b & !((mask >> 8) as u8)) | (bits >> 8) as u8;
        }
    }
}

/// Raise register `i` of a dense HLL to `v`; true if it was lower.
fn dense_raise(s: &mut [u8], i: usize, v: u8) -> bool {
    let regs = s.get_mut(HEADER..).unwrap_or_default();
    if dense_get(regs, i) >= v {
        return false;
    }
    dense_put(regs, i, v);
    true
}

/// MurmurHash64A, reading the input as little-endian 8-byte words whatever the machine.
fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate() {
            h ^= u64::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element falls in and the value it offers there (1..=51).
fn register_of(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// Sparse opcodes.

fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}
fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}
fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}
fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}
fn val_len(b: u8) -> usize {
    usize::from(b & 3) + 1
}
fn val(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (len - 1) as u8
}

/// The opcode at `p`: (registers it covers, its bytes). An XZERO cut short reads its second
/// byte as 0, as Redis reads the string's terminator.
fn opcode(s: &[u8], p: usize) -> (usize, usize) {
    let b = s.get(p).copied().unwrap_or(0);
    if is_zero(b) {
        (usize::from(b & 0x3f) + 1, 1)
    } else if is_val(b) {
        (val_len(b), 1)
    } else {
        let low = s.get(p + 1).copied().unwrap_or(0);
        ((usize::from(b & 0x3f) << 8 | usize::from(low)) + 1, 2)
    }
}

/// Append the opcode(s) for `len` zero registers: one ZERO up to 64, else one XZERO.
fn push_zeros(out: &mut Vec<u8>, mut len: usize) {
    while len > 0 {
        let run = len.min(XZERO_MAX_LEN);
        if run > ZERO_MAX_LEN {
            out.push(0x40 | ((run - 1) >> 8) as u8);
            out.push(((run - 1) & 0xff) as u8);
        } else {
            out.push((run - 1) as u8);
        }
        len -= run;
    }
}

/// Walk a sparse HLL's runs: `f(first register, run length, value)`. Fails on a run past the
/// last register or a total other than 16384.
fn sparse_runs(s: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), Corrupt> {
    let mut p = HEADER;
    let mut idx = 0usize;
    while p < s.len() {
        let b = s.get(p).copied().unwrap_or(0);
        let (run, len) = opcode(s, p);
        if idx + run > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, run, if is_val(b) { val_value(b) } else { 0 });
        idx += run;
        p += len;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// The dense form of a sparse HLL (header and cached count kept).
fn sparse_to_dense(s: &[u8]) -> Result<Vec<u8>, Corrupt> {
    // The magic and the cached count are kept.
    let mut dense = s.get(..HEADER).ok_or(Corrupt)?.to_vec();
    if let Some(e) = dense.get_mut(4) {
        *e = DENSE;
    }
    dense.resize(DENSE_LEN, 0);
    let regs = dense.get_mut(HEADER..).unwrap_or_default();
    sparse_runs(s, |first, run, value| {
        if value > 0 {
            for i in first..first + run {
                dense_put(regs, i, value);
            }
        }
    })?;
    Ok(dense)
}

/// Raise register `index` of a sparse HLL to `value`; true if it was lower. May turn the HLL
/// dense (a value over 32, or a result longer than `max_len`).
fn sparse_raise(s: &mut Vec<u8>, index: usize, value: u8, max_len: usize) -> Result<bool, Corrupt> {
    if value > VAL_MAX_VALUE {
        return promote(s, index, value);
    }
    // The opcode covering the register, where it starts, and the one before it.
    let (mut p, mut first, mut prev) = (HEADER, 0usize, None);
    let (span, oplen) = loop {
        if p >= s.len() {
            return Err(Corrupt);
        }
        let (span, oplen) = opcode(s, p);
        if index < first + span {
            break (span, oplen);
        }
        prev = Some(p);
        p += oplen;
        first += span;
    };
    let b = s.get(p).copied().unwrap_or(0);
    if is_val(b) && val_value(b) >= value {
        return Ok(false);
    }
    if span == 1 && !is_xzero(b) {
        // A VAL or ZERO of one register: rewritten in place.
        if let Some(slot) = s.get_mut(p) {
            *slot = val(value, 1);
        }
    } else {
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if is_val(b) {
            let current = val_value(b);
            if index != first {
                seq.push(val(current, index - first));
            }
            seq.push(val(value, 1));
            if index != last {
                seq.push(val(current, last - index));
            }
        } else {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val(value, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        }
        if seq.len() > oplen && s.len() + seq.len() - oplen > max_len {
            return promote(s, index, value);
        }
        let end = (p + oplen).min(s.len());
        s.splice(p..end, seq);
    }
    merge_neighbours(s, prev.unwrap_or(HEADER));
    invalidate_cache(s);
    Ok(true)
}

/// Merge adjacent VAL opcodes of one value whose runs fit one opcode, looking at up to five
/// opcodes from `p` (Redis' window: the result need not be the shortest encoding).
fn merge_neighbours(s: &mut Vec<u8>, mut p: usize) {
    let mut looks = 5;
    while p < s.len() && looks > 0 {
        looks -= 1;
        let b = s.get(p).copied().unwrap_or(0);
        if is_xzero(b) {
            p += 2;
            continue;
        }
        if is_zero(b) {
            p += 1;
            continue;
        }
        if let Some(&n) = s.get(p + 1) {
            if is_val(n) && val_value(n) == val_value(b) {
                let len = val_len(b) + val_len(n);
                if len <= VAL_MAX_LEN {
                    if let Some(slot) = s.get_mut(p + 1) {
                        *slot = val(val_value(b), len);
                    }
                    s.remove(p);
                    continue;
                }
            }
        }
        p += 1;
    }
}

/// Turn a sparse HLL dense and raise register `index` there.
fn promote(s: &mut Vec<u8>, index: usize, value: u8) -> Result<bool, Corrupt> {
    let mut dense = sparse_to_dense(s)?;
    dense_raise(&mut dense, index, value);
    *s = dense;
    Ok(true)
}

/// Raise register `index` to `value`, whatever the encoding.
fn raise(s: &mut Vec<u8>, index: usize, value: u8, max_len: usize) -> Result<bool, Corrupt> {
    match encoding(s) {
        DENSE => Ok(dense_raise(s, index, value)),
        SPARSE => sparse_raise(s, index, value, max_len),
        _ => Err(Corrupt),
    }
}

/// `max[i] = max(max[i], register i)` over an HLL of either encoding.
fn merge_into(max: &mut [u8], s: &[u8]) -> Result<(), Corrupt> {
    if encoding(s) == DENSE {
        let regs = s.get(HEADER..).unwrap_or_default();
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        return Ok(());
    }
    sparse_runs(s, |first, run, value| {
        if value > 0 {
            for m in max.iter_mut().skip(first).take(run) {
                *m = (*m).max(value);
            }
        }
    })
}

/// How many registers hold each value.
fn histogram(s: &[u8]) -> Result<[u32; 64], Corrupt> {
    let mut h = [0u32; 64];
    if encoding(s) == DENSE {
        let regs = s.get(HEADER..).unwrap_or_default();
        for i in 0..REGISTERS {
            bump(&mut h, dense_get(regs, i), 1);
        }
    } else {
        sparse_runs(s, |_, run, value| bump(&mut h, value, run as u32))?;
    }
    Ok(h)
}

fn bump(h: &mut [u32; 64], value: u8, n: u32) {
    if let Some(c) = h.get_mut(usize::from(value)) {
        *c += n;
    }
}

fn raw_histogram(max: &[u8]) -> [u32; 64] {
    let mut h = [0u32; 64];
    for v in max {
        bump(&mut h, *v, 1);
    }
    h
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

/// Ertl's estimate from the register histogram.
fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(h[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(h.get(j).copied().unwrap_or(0));
        z *= 0.5;
    }
    z += m * sigma(f64::from(h[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

// ---------------------------------------------------------------------------------------------
// Commands

/// The HLL at `key` (a copy of its bytes), `None` when missing. `read`: counted as a read
/// lookup (hits and misses), as Redis' PFCOUNT and PFMERGE's sources are.
fn lookup_hll(engine: &mut Engine, ctx: &CallCtx, key: &[u8], read: bool) -> Result<Option<Bytes>, CmdError> {
    let entry = if read { engine.lookup_read(ctx.db, key, ctx.now_ms) } else { engine.lookup(ctx.db, key, ctx.now_ms) };
    match entry.map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Str(b)) if is_valid(b) => Ok(Some(b.clone())),
        Some(Value::Str(_)) => Err(NOT_HLL),
        Some(_) => Err(CmdError::WRONGTYPE),
    }
}

/// Store `s` at `key` (kept TTL, a `raw` string as Redis' HLLs are).
fn store(engine: &mut Engine, ctx: &CallCtx, key: &Bytes, s: Vec<u8>) {
    let entry = engine.lookup_or_insert(ctx.db, key, ctx.now_ms, || Value::Str(Bytes::new()));
    entry.meta.form = Form::StrRaw;
    entry.value = Value::Str(Bytes::from(s));
}

fn max_sparse_len(engine: &Engine) -> usize {
    engine.config().object.hll_sparse_max_bytes
}

fn pfadd(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let key = arg(args, 1)?;
    let (mut s, mut changed) = match lookup_hll(engine, ctx, key, false)? {
        Some(b) => (Vec::from(b), false),
        None => (new_sparse(), true),
    };
    let max_len = max_sparse_len(engine);
    for element in args.get(2..).unwrap_or_default() {
        let (index, value) = register_of(element);
        changed |= raise(&mut s, index, value, max_len).map_err(|_| CORRUPT)?;
    }
    if changed {
        invalidate_cache(&mut s);
        store(engine, ctx, key, s);
        engine.modified(ctx.db, key, KeyEvent::PfAdd);
    }
    Ok(Reply::Integer(i64::from(changed)))
}

fn pfcount(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let keys = args.get(1..).unwrap_or_default();
    if let [key] = keys {
        let Some(b) = lookup_hll(engine, ctx, key, true)? else { return Ok(Reply::Integer(0)) };
        if let Some(n) = cached_count(&b) {
            return Ok(Reply::Integer(n as i64));
        }
        let n = estimate(&histogram(&b).map_err(|_| CORRUPT)?);
        // The estimate is kept in the value: a change of the string, though not of the set.
        let mut s = Vec::from(b);
        set_cached_count(&mut s, n);
        store(engine, ctx, key, s);
        engine.modified_quietly(ctx.db, key);
        return Ok(Reply::Integer(n as i64));
    }
    let mut max = vec![0u8; REGISTERS];
    for key in keys {
        if let Some(b) = lookup_hll(engine, ctx, key, true)? {
            merge_into(&mut max, &b).map_err(|_| CORRUPT)?;
        }
    }
    Ok(Reply::Integer(estimate(&raw_histogram(&max)) as i64))
}

fn pfmerge(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let dest = arg(args, 1)?;
    let mut max = vec![0u8; REGISTERS];
    let mut dense = false;
    for key in args.get(1..).unwrap_or_default() {
        if let Some(b) = lookup_hll(engine, ctx, key, true)? {
            dense |= encoding(&b) == DENSE;
            merge_into(&mut max, &b).map_err(|_| CORRUPT)?;
        }
    }
    let mut s = match lookup_hll(engine, ctx, dest, false)? {
        Some(b) => Vec::from(b),
        None => new_sparse(),
    };
    if dense {
        if encoding(&s) == SPARSE {
            s = sparse_to_dense(&s).map_err(|_| CORRUPT)?;
        }
        let regs = s.get_mut(HEADER..).unwrap_or_default();
        for (i, v) in max.iter().enumerate() {
            dense_put(regs, i, *v);
        }
    } else {
        let max_len = max_sparse_len(engine);
        for (i, v) in max.iter().enumerate() {
            if *v > 0 {
                // A corrupt destination was refused above: its runs decode.
                let _ = raise(&mut s, i, *v, max_len);
            }
        }
    }
    invalidate_cache(&mut s);
    store(engine, ctx, dest, s);
    engine.modified(ctx.db, dest, KeyEvent::PfAdd);
    Ok(Reply::ok())
}

fn pfdebug(engine: &mut Engine, ctx: &mut CallCtx, args: &[Bytes]) -> Result<Reply, CmdError> {
    let sub = arg(args, 1)?;
    if sub.eq_ignore_ascii_case(b"simd") {
        let on_off = arg(args, 2)?;
        if !on_off.eq_ignore_ascii_case(b"on") && !on_off.eq_ignore_ascii_case(b"off") {
            return Err(CmdError::full("ERR Argument must be ON or OFF"));
        }
        // One implementation here: the merge and count have no vector variant to turn on.
        return Ok(Reply::simple("disabled"));
    }
    let key = arg(args, 2)?;
    let Some(b) = lookup_hll(engine, ctx, key, false)? else {
        return Err(CmdError::full("ERR The specified key does not exist"));
    };
    let name = String::from_utf8_lossy(sub).to_ascii_lowercase();
    match name.as_str() {
        "getreg" | "todense" => {
            let converted = encoding(&b) == SPARSE;
            let s = if converted {
                let dense = sparse_to_dense(&b).map_err(|_| CORRUPT)?;
                store(engine, ctx, key, dense.clone());
                // A change of representation, logged and replicated, but no event.
                engine.count_changes(1);
                dense
            } else {
                Vec::from(b)
            };
            if name == "todense" {
                return Ok(Reply::Integer(i64::from(converted)));
            }
            let regs = s.get(HEADER..).unwrap_or_default();
            Ok(Reply::Array((0..REGISTERS).map(|i| Reply::Integer(i64::from(dense_get(regs, i)))).collect()))
        }
        "decode" => {
            if encoding(&b) != SPARSE {
                return Err(CmdError::full("ERR HLL encoding is not sparse"));
            }
            let mut words = Vec::new();
            let mut p = HEADER;
            while p < b.len() {
                let op = b.get(p).copied().unwrap_or(0);
                let (run, len) = opcode(&b, p);
                words.push(if is_zero(op) {
                    format!("z:{run}")
                } else if is_xzero(op) {
                    format!("Z:{run}")
                } else {
                    format!("v:{},{run}", val_value(op))
                });
                p += len;
            }
            Ok(Reply::Bulk(Bytes::from(words.join(" "))))
        }
        "encoding" => Ok(Reply::simple(if encoding(&b) == DENSE { "dense" } else { "sparse" })),
        _ => Err(CmdError::owned(format!("ERR Unknown PFDEBUG subcommand '{}'", String::from_utf8_lossy(sub)))),
    }
}

/// PFSELFTEST: dense registers keep what is written to them and leave their neighbours alone;
/// sparse and dense HLLs fed the same ten million elements agree, the sparse one stays sparse
/// while small, and the estimate stays within six standard errors at each power of ten.
fn pfselftest(engine: &mut Engine, _ctx: &mut CallCtx, _args: &[Bytes]) -> Result<Reply, CmdError> {
    let mut regs = vec![0u8; DENSE_LEN - HEADER];
    let mut want = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, w) in want.iter_mut().enumerate() {
            *w = (engine.random_u64() & 63) as u8;
            dense_put(&mut regs, i, *w);
        }
        for (i, w) in want.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != *w {
                return Err(CmdError::owned(format!("TESTFAILED Register {i} should be {w} but is {got}")));
            }
        }
    }
    let mut dense = new_sparse();
    dense = sparse_to_dense(&dense).map_err(|_| CORRUPT)?;
    let mut sparse = new_sparse();
    let max_len = max_sparse_len(engine);
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let seed = engine.random_u64();
    let mut checkpoint: u64 = 1;
    for j in 1..=10_000_000u64 {
        let element = (j ^ seed).to_le_bytes();
        let (index, value) = register_of(&element);
        dense_raise(&mut dense, index, value);
        raise(&mut sparse, index, value, max_len).map_err(|_| CORRUPT)?;
        if j != checkpoint {
            continue;
        }
        if j < (max_len / 2) as u64 && encoding(&sparse) != SPARSE {
            return Err(CmdError::full("TESTFAILED sparse encoding not used"));
        }
        let d = estimate(&histogram(&dense).map_err(|_| CORRUPT)?);
        let s = estimate(&histogram(&sparse).map_err(|_| CORRUPT)?);
        if d != s {
            return Err(CmdError::full("TESTFAILED dense/sparse disagree"));
        }
        let allowed = if j == 10 { 1 } else { (relative_error * 6.0 * checkpoint as f64).ceil() as u64 };
        let error = checkpoint.abs_diff(d);
        if error > allowed {
            return Err(CmdError::owned(format!("TESTFAILED Too big error. card:{checkpoint} abserr:{error}")));
        }
        checkpoint *= 10;
    }
    Ok(Reply::ok())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn elements_fall_in_the_registers_redis_puts_them_in() {
        // Redis 8.2.3's PFDEBUG DECODE after `PFADD x <element>`: `Z:<index> v:<value>,1 ...`.
        // A short input (tail only), 7 bytes, 8 (one word, no tail) and 11 (word and tail).
        assert_eq!(register_of(b"a"), (12711, 2));
        assert_eq!(register_of(b"hello12"), (10449, 1));
        assert_eq!(register_of(b"hello123"), (5077, 1));
        assert_eq!(register_of(b"hello world"), (9399, 4));
    }

    #[test]
    fn dense_registers_keep_their_values_and_leave_neighbours_alone() {
        let mut regs = vec![0u8; DENSE_LEN - HEADER];
        for i in 0..REGISTERS {
            dense_put(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "register {i}");
        }
    }

    #[test]
    fn a_new_hll_is_one_xzero_and_counts_zero() {
        let s = new_sparse();
        assert_eq!(s.len(), 18);
        assert_eq!(&s[16..], &[0x7f, 0xff]);
        assert_eq!(estimate(&histogram(&s).unwrap()), 0);
        assert_eq!(cached_count(&s), Some(0));
    }

    #[test]
    fn sparse_and_dense_agree_and_the_sparse_form_turns_dense_when_long() {
        let mut sparse = new_sparse();
        let mut dense = sparse_to_dense(&sparse).unwrap();
        for j in 0..5000u32 {
            let (i, v) = register_of(&j.to_le_bytes());
            raise(&mut sparse, i, v, 3000).unwrap();
            dense_raise(&mut dense, i, v);
            if encoding(&sparse) == SPARSE {
                assert!(sparse.len() <= 3000);
                assert_eq!(sparse_to_dense(&sparse).unwrap()[HEADER..], dense[HEADER..], "after {j}");
            }
        }
        assert_eq!(encoding(&sparse), DENSE);
        assert_eq!(sparse[HEADER..], dense[HEADER..]);
        let n = estimate(&histogram(&dense).unwrap());
        assert!((4800..5200).contains(&n), "{n}");
    }

    #[test]
    fn a_value_over_32_turns_a_sparse_hll_dense() {
        let mut s = new_sparse();
        assert!(raise(&mut s, 5, 32, 3000).unwrap());
        assert_eq!(encoding(&s), SPARSE);
        assert!(raise(&mut s, 6, 33, 3000).unwrap());
        assert_eq!(encoding(&s), DENSE);
        let regs = &s[HEADER..];
        assert_eq!((dense_get(regs, 5), dense_get(regs, 6), dense_get(regs, 7)), (32, 33, 0));
    }

    #[test]
    fn corrupt_sparse_runs_are_refused() {
        let mut s = new_sparse();
        s.push(0x80);
        assert_eq!(histogram(&s), Err(Corrupt), "a run past the last register");
        let mut short = new_sparse();
        short.truncate(HEADER);
        short.push(0);
        assert_eq!(sparse_to_dense(&short), Err(Corrupt), "too few registers");
    }
}
