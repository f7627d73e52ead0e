//! Streams in the RDB format: the entries as listpack nodes, then the stream metadata, the
//! consumer groups and, in the newest forms, the IDMP state.
//!
//! ```text
//! <node count>
//!   per node: <master ID: 16-byte string, big-endian ms + seq> <listpack: string>
//! <length> <last-id ms> <last-id seq>
//! [≥ v2] <first-id ms, seq> <max-deleted-id ms, seq> <entries-added>
//! <group count>
//!   per group: <name> <last-delivered ms> <seq> [≥ v2] <entries-read; 2^64−1 = unknown>
//!     <PEL count> per record: <16-byte raw ID> <delivery time: 8-byte LE ms> <delivery count>
//!     <consumer count> per consumer: <name> <seen-time ms> [≥ v3] <active-time ms>
//!                                    <owned count> <16-byte raw ID>*
//!     [≥ v5] <XNACK zone count> <16-byte raw ID>*        in zone order
//! [≥ v4] <IDMP duration s> <IDMP max size>
//!        <producer count> per producer: <pid> <IID count> (<iid> <ms> <seq>)*
//!        <iids-added> <iids-duplicates>
//! ```
//!
//! A node's listpack, all numbers as listpack integers, IDs relative to the master ID:
//!
//! ```text
//! master entry: <live count> <deleted count> <field count> <field>* <0>
//! per entry:    <flags> <ms − master ms> <seq − master seq>
//!               flags & SAMEFIELDS: <value>*                (the master's fields, in order)
//!               otherwise:          <field count> (<field> <value>)*
//!               <element count of this entry, itself excluded>
//! flags: 1 = deleted, 2 = same fields as the master
//! ```
//!
//! Writing puts each of rill's blocks in one node, and loading makes each node one block again,
//! deleted entries included, so node boundaries (which `~` trimming and XINFO show) survive
//! DUMP / RESTORE between rill and Redis, snapshots and restarts. Then loading restores the
//! metadata, groups and IDMP state through the stream's snapshot constructors.

use super::io::{id_to_raw, preallocation, Reader, Writer};
use super::listpack;
use super::{LoadContext, RdbError};
use crate::types::stream::block::{Block, FieldSink};
use crate::types::stream::codec::{self, Scalar};
use crate::types::stream::group::{ConsumerSnapshot, GroupSnapshot};
use crate::types::stream::idmp::{self, Idmp};
use crate::types::stream::pel::ClaimOrder;
use crate::types::stream::{NodeLimits, NodeRebuild, Stream, StreamId};
use bytes::Bytes;
use std::io;
use std::ops::Bound;

/// Redis 5.0 streams: no first ID, tombstone or entries-added, no entries-read.
pub const TYPE_STREAM_V1: u8 = 15;
/// Redis 7.0: adds first ID, max-deleted ID, entries-added and per-group entries-read.
pub const TYPE_STREAM_V2: u8 = 19;
/// Redis 7.2: adds consumer active-time.
pub const TYPE_STREAM_V3: u8 = 21;
/// Adds IDMP configuration, producers and counters.
pub const TYPE_STREAM_V4: u8 = 26;
/// Adds the XNACK zone of each group.
pub const TYPE_STREAM_V5: u8 = 27;

/// rill's own stream type, which only a rill primary writes and only for a rill replica (one
/// that said `REPLCONF capa rill`), which reads it only from its primary
/// ([`super::LoadContext::rill_streams`]): no Redis and no file ever holds it. Each node is the
/// primary's block as it is in memory (no listpack made, none decoded: a full sync of a big
/// stream is a copy), then everything after the nodes as in [`TYPE_STREAM_V5`].
///
/// ```text
/// per node: <key: 16-byte ID> <last ID: 16-byte ID> <live> <deleted> <listpack size>
///           <the block's bytes: string>
/// ```
pub const TYPE_STREAM_RILL: u8 = 0xD0;

const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;
/// The entries-read value that stands for "unknown" (−1 as an unsigned length).
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;

/// The stream type a DUMP writes: the oldest one that holds this stream without loss, so a
/// stream without IDMP state or released entries restores into servers that predate those
/// features (Redis 7.2 .. 8.2), and the newest form otherwise.
pub fn type_for(s: &Stream) -> u8 {
    let idmp = &s.idmp;
    let idmp_state = idmp.duration_secs() != idmp::DURATION_DEFAULT_SECS
        || idmp.max_size() != idmp::MAX_SIZE_DEFAULT
        || idmp.pids_tracked() > 0
        || idmp.iids_added() > 0
        || idmp.iids_duplicates() > 0;
    let released = s
        .groups()
        .values()
        .any(|g| g.pel().claim_order().next().is_some_and(|(_, e)| matches!(e.claim_order(), ClaimOrder::Nacked(_))));
    if idmp_state || released {
        TYPE_STREAM_V5
    } else {
        TYPE_STREAM_V3
    }
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// Write the body of a stream of type `rdb_type` (one of [`type_for`]'s answers, or
/// [`TYPE_STREAM_V2`] for Redis 7.0: no consumer active-time; only for a stream whose
/// [`type_for`] is at most V3, since V2 has no place for IDMP state or XNACKed entries). IIDs
/// already expired at `now_ms` are left out, as Redis does. Each block is written as the node
/// Redis would hold for it — its deleted entries and counts included — so a Redis (or rill)
/// that loads it has the same node boundaries, which trimming and XINFO show. The entries are
/// read in place and `out` may pass the bytes on after each node and every few thousand PEL
/// records, so a stream is never held decoded or encoded whole.
pub(super) fn encode(out: &mut impl BodyOut, s: &Stream, rdb_type: u8, now_ms: i64) -> io::Result<()> {
    out.w().length(s.block_count() as u64);
    let mut node = NodeWriter::default();
    if rdb_type == TYPE_STREAM_RILL {
        for (first, block) in s.blocks() {
            let (buf, last_id, live, deleted, lp_body) = block.raw_parts();
            let w = out.w();
            w.raw(&id_to_raw(first));
            w.raw(&id_to_raw(last_id));
            w.length(u64::from(live));
            w.length(u64::from(deleted));
            w.length(u64::from(lp_body));
            w.raw_string(buf);
            out.node_done()?;
        }
    }
    for (first, block) in s.blocks().filter(|_| rdb_type != TYPE_STREAM_RILL) {
        let mut cursor = block.cursor(first).ok_or_else(|| io::Error::other("a stream block cannot be decoded"))?;
        node.start(first, &cursor.master().fields, block.live_count(), block.deleted_count());
        let mut fields = EntryFields::default();
        while let Some(p) = cursor.next_entry() {
            cursor
                .fields_at(p.offset, &mut fields)
                .ok_or_else(|| io::Error::other("a stream entry cannot be decoded"))?;
            node.push(p.id, &fields.0, p.deleted);
        }
        let w = out.w();
        w.raw_string(&id_to_raw(first));
        w.raw_string(&std::mem::take(&mut node.lp).finish());
        out.node_done()?;
    }
    let w = out.w();
    w.length(s.len());
    w.length_id(s.last_generated_id());
    w.length_id(s.first_id());
    w.length_id(s.max_deleted_entry_id());
    w.length(s.entries_added());

    w.length(s.groups().len() as u64);
    for (name, g) in s.groups() {
        let w = out.w();
        w.string(name);
        w.length_id(g.last_delivered_id);
        w.length(g.entries_read.unwrap_or(ENTRIES_READ_UNKNOWN));
        w.length(g.pel().len());
        for (i, (id, e)) in g.pel().iter().enumerate() {
            let w = out.w();
            w.raw(&id_to_raw(id));
            w.millis(e.delivery_time_ms);
            w.length(e.delivery_count);
            if i % RECORDS_PER_PASS == RECORDS_PER_PASS - 1 {
                out.node_done()?;
            }
        }
        out.w().length(g.consumers().len() as u64);
        for (cname, c) in g.consumers() {
            let w = out.w();
            w.string(cname);
            w.millis(c.seen_time_ms);
            if rdb_type >= TYPE_STREAM_V3 {
                w.millis(c.active_time_ms);
            }
            w.length(g.pending_count(c));
            for (i, id) in g.pending_ids(c, Bound::Unbounded).enumerate() {
                out.w().raw(&id_to_raw(id));
                if i % RECORDS_PER_PASS == RECORDS_PER_PASS - 1 {
                    out.node_done()?;
                }
            }
        }
        if rdb_type >= TYPE_STREAM_V5 {
            let zone: Vec<StreamId> = g
                .pel()
                .claim_order()
                .take_while(|(_, e)| matches!(e.claim_order(), ClaimOrder::Nacked(_)))
                .map(|(id, _)| id)
                .collect();
            let w = out.w();
            w.length(zone.len() as u64);
            for id in zone {
                w.raw(&id_to_raw(id));
            }
        }
        out.node_done()?;
    }

    if rdb_type >= TYPE_STREAM_V4 {
        let w = out.w();
        let idmp = &s.idmp;
        w.length(idmp.duration_secs());
        w.length(idmp.max_size());
        let cutoff =
            now_ms.saturating_sub(i64::try_from(idmp.duration_secs().saturating_mul(1000)).unwrap_or(i64::MAX));
        let producers: Vec<(&Bytes, Vec<&(Bytes, StreamId)>)> = idmp
            .producers()
            .map(|(pid, iids)| (pid, iids.filter(|(_, id)| i128::from(id.ms) > i128::from(cutoff)).collect()))
            .collect();
        w.length(producers.len() as u64);
        for (pid, iids) in producers {
            w.string(pid);
            w.length(iids.len() as u64);
            for (iid, id) in iids {
                w.string(iid);
                w.length_id(*id);
            }
        }
        w.length(idmp.iids_added());
        w.length(idmp.iids_duplicates());
    }
    Ok(())
}

/// PEL records written between two chances for the writer to pass its bytes on.
const RECORDS_PER_PASS: usize = 4096;

/// Where a value's body goes: the bytes so far, and the points (between a stream's nodes and
/// every [`RECORDS_PER_PASS`] PEL records) where a file writer may pass them on. A DUMP
/// payload ([`Writer`]) keeps them all.
pub(crate) trait BodyOut {
    /// The bytes written so far.
    fn w(&mut self) -> &mut Writer;
    /// A point where what was written may be passed on.
    fn node_done(&mut self) -> io::Result<()>;
}

impl BodyOut for Writer {
    fn w(&mut self) -> &mut Writer {
        self
    }

    fn node_done(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One entry's fields as a cursor hands them over, borrowed from the block.
#[derive(Default)]
struct EntryFields<'s>(Vec<(&'s [u8], Scalar<'s>)>);

impl<'s> FieldSink<'s> for EntryFields<'s> {
    fn count(&mut self, n: usize) {
        self.0.clear();
        self.0.reserve(n);
    }

    fn field(&mut self, name: &'s [u8], value: Scalar<'s>) {
        self.0.push((name, value));
    }
}

/// The node being encoded: its listpack, its master ID and field names (the first entry's).
#[derive(Default)]
struct NodeWriter<'s> {
    lp: listpack::Builder,
    master: StreamId,
    names: Vec<&'s [u8]>,
    scratch: Vec<u8>,
}

impl<'s> NodeWriter<'s> {
    /// Begin a node keyed `master` with these master fields and entry counts.
    fn start(&mut self, master: StreamId, names: &[&'s [u8]], live: u64, deleted: u64) {
        self.master = master;
        self.names.clear();
        self.names.extend_from_slice(names);
        let lp = &mut self.lp;
        lp.push_int(live as i64);
        lp.push_int(deleted as i64);
        lp.push_int(self.names.len() as i64);
        for f in &self.names {
            lp.push_str(f);
        }
        lp.push_int(0);
    }

    fn push(&mut self, id: StreamId, fields: &[(&'s [u8], Scalar<'s>)], deleted: bool) {
        let same = fields.len() == self.names.len() && fields.iter().zip(&self.names).all(|((f, _), m)| f == m);
        let master = self.master;
        let flags = if same { FLAG_SAME_FIELDS } else { 0 } | if deleted { FLAG_DELETED } else { 0 };
        self.lp.push_int(flags);
        self.lp.push_int(id.ms.wrapping_sub(master.ms) as i64);
        self.lp.push_int(id.seq.wrapping_sub(master.seq) as i64);
        if same {
            for (_, v) in fields {
                self.value(*v);
            }
            self.lp.push_int(fields.len() as i64 + 3);
        } else {
            self.lp.push_int(fields.len() as i64);
            for (f, v) in fields {
                self.lp.push_str(f);
                self.value(*v);
            }
            self.lp.push_int(2 * fields.len() as i64 + 4);
        }
    }

    fn value(&mut self, v: Scalar<'_>) {
        match v {
            Scalar::Raw(b) => self.lp.push_str(b),
            Scalar::Int(n) => self.lp.push_int(n),
            number => {
                self.scratch.clear();
                codec::render(number, &mut self.scratch);
                self.lp.push_str(&self.scratch);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

fn corrupt(why: &'static str) -> RdbError {
    RdbError::Corrupt(why)
}

/// Read a stream of any of the five types.
pub fn decode(r: &mut Reader<'_>, rdb_type: u8, ctx: &LoadContext) -> Result<Stream, RdbError> {
    let mut s = Stream::new();
    let nodes = r.count()?;
    if rdb_type == TYPE_STREAM_RILL {
        for _ in 0..nodes {
            let first = r.raw_id()?;
            let last_id = r.raw_id()?;
            let mut count =
                || r.length().ok().and_then(|n| u32::try_from(n).ok()).ok_or(corrupt("stream block counts"));
            let (live, deleted, lp_body) = (count()?, count()?, count()?);
            let bytes = r.string()?;
            let block = Block::from_raw(first, bytes, last_id, live, deleted, lp_body)
                .ok_or(corrupt("stream block does not decode"))?;
            if !s.restore_block(NodeRebuild::from_block(first, block)) {
                return Err(corrupt("stream blocks out of order"));
            }
        }
    }
    for _ in (0..nodes).filter(|_| rdb_type != TYPE_STREAM_RILL) {
        let key = r.string()?;
        let raw: [u8; 16] = key.as_slice().try_into().map_err(|_| corrupt("stream node key is not an ID"))?;
        let master = super::io::id_from_raw(&raw);
        let lp = r.string()?;
        append_node(&mut s, master, &lp, ctx.limits)?;
    }
    let length = r.length()?;
    if length != s.len() {
        return Err(corrupt("stream length differs from its live entries"));
    }
    let last_id = r.length_id()?;
    let (max_deleted, entries_added) = if rdb_type >= TYPE_STREAM_V2 {
        // The recorded first ID is recomputed from the entries (it is the first live one).
        let _first_id = r.length_id()?;
        (r.length_id()?, r.length()?)
    } else {
        (StreamId::MIN, s.len())
    };
    if !s.restore_metadata(last_id, max_deleted, entries_added) {
        return Err(corrupt("stream metadata inconsistent with its entries"));
    }

    let groups = r.count()?;
    for _ in 0..groups {
        let name = Bytes::from(r.string()?);
        let last_delivered_id = r.length_id()?;
        let entries_read = if rdb_type >= TYPE_STREAM_V2 {
            // Above entries-added is a state the server reaches (XGROUP SETID ... ENTRIESREAD n,
            // then reads: lag goes negative), so it loads as it was saved. (Redis 8.2 loads it
            // too; later Redis calls it corrupt and cannot load its own snapshot.)
            match r.length()? {
                ENTRIES_READ_UNKNOWN => None,
                n => Some(n),
            }
        } else {
            s.estimate_entries_read(last_delivered_id)
        };
        let mut snap = GroupSnapshot { last_delivered_id, entries_read, ..GroupSnapshot::default() };
        let pending = r.count()?;
        snap.pending.reserve(preallocation(pending));
        for _ in 0..pending {
            let id = r.raw_id()?;
            let time = r.millis()?;
            let count = r.length()?;
            snap.pending.push((id, time, count));
        }
        let consumers = r.count()?;
        for _ in 0..consumers {
            let name = Bytes::from(r.string()?);
            let seen_time_ms = r.millis()?;
            // Before active-time existed, seen-time is the best estimate (as Redis loads it).
            let active_time_ms = if rdb_type >= TYPE_STREAM_V3 { r.millis()? } else { seen_time_ms };
            let owned = r.count()?;
            let mut pending = Vec::with_capacity(preallocation(owned));
            for _ in 0..owned {
                pending.push(r.raw_id()?);
            }
            snap.consumers.push(ConsumerSnapshot { name, seen_time_ms, active_time_ms, pending });
        }
        if rdb_type >= TYPE_STREAM_V5 {
            let zone = r.count()?;
            snap.nacked = Vec::with_capacity(preallocation(zone));
            for _ in 0..zone {
                snap.nacked.push(r.raw_id()?);
            }
        }
        s.restore_group(name, snap).map_err(corrupt)?;
    }

    s.idmp = if rdb_type >= TYPE_STREAM_V4 {
        decode_idmp(r, ctx.now_ms)?
    } else {
        let mut idmp = Idmp::default();
        idmp.configure(Some(ctx.idmp_duration_secs), Some(ctx.idmp_max_size));
        idmp
    };
    Ok(s)
}

fn decode_idmp(r: &mut Reader<'_>, now_ms: i64) -> Result<Idmp, RdbError> {
    let duration = r.length()?;
    if !i64::try_from(duration).is_ok_and(|d| idmp::DURATION_RANGE_SECS.contains(&d)) {
        return Err(corrupt("IDMP duration out of range"));
    }
    let max_size = r.length()?;
    if !i64::try_from(max_size).is_ok_and(|m| idmp::MAX_SIZE_RANGE.contains(&m)) {
        return Err(corrupt("IDMP max size out of range"));
    }
    let producers = r.count()?;
    let mut table = Vec::with_capacity(preallocation(producers));
    for _ in 0..producers {
        let pid = Bytes::from(r.string()?);
        let n = r.count()?;
        let mut iids = Vec::with_capacity(preallocation(n));
        for _ in 0..n {
            let iid = Bytes::from(r.string()?);
            iids.push((iid, r.length_id()?));
        }
        table.push((pid, iids));
    }
    let added = r.length()?;
    let duplicates = r.length()?;
    Ok(Idmp::restore(duration, max_size, table, added, duplicates, now_ms))
}

/// Load one node: as it was laid out (its deleted entries and boundaries kept, as Redis keeps
/// a loaded listpack), or, if it cannot be a block after the ones before it (IDs out of order,
/// which a Redis stream can hold after XSETID moved below a deleted entry), by re-appending
/// its live entries through [`Stream::append`].
fn append_node(s: &mut Stream, master: StreamId, lp: &[u8], limits: NodeLimits) -> Result<(), RdbError> {
    let mut node = NodeRebuild::default();
    each_node_entry(master, lp, |id, deleted, fields| {
        node.push(id, deleted, fields);
        Ok(())
    })?;
    if s.restore_block(node) {
        return Ok(());
    }
    each_node_entry(master, lp, |id, deleted, fields| {
        if !deleted {
            s.append(id, fields, limits).map_err(|_| corrupt("stream entries out of order"))?;
        }
        Ok(())
    })
}

/// Parse one node's listpack, checking its structure and counts, and pass each entry (ID,
/// whether deleted, fields) to `f` in order.
fn each_node_entry(
    master: StreamId,
    lp: &[u8],
    mut f: impl FnMut(StreamId, bool, &EntryText) -> Result<(), RdbError>,
) -> Result<(), RdbError> {
    let items = listpack::decode(lp)?;
    let mut it = items.into_iter();
    let mut next = || it.next().ok_or(corrupt("stream node truncated"));
    let live = next()?.int()?;
    let deleted = next()?.int()?;
    // A node whose entries are all deleted is legal: Redis leaves one behind when an exact
    // trim removes the live rest of a node holding deleted entries, and DUMPs it as it is.
    if live < 0 || deleted < 0 {
        return Err(corrupt("stream node entry counts"));
    }
    let field_count = usize::try_from(next()?.int()?).map_err(|_| corrupt("stream node field count"))?;
    let mut master_fields = Vec::with_capacity(preallocation(field_count));
    for _ in 0..field_count {
        master_fields.push(next()?);
    }
    if next()?.int()? != 0 {
        return Err(corrupt("stream master entry terminator"));
    }
    let (mut seen_live, mut seen_deleted) = (0i64, 0i64);
    // Each entry's fields are copied into one reused buffer (no allocation per value).
    let mut fields = EntryText::default();
    for _ in 0..live.saturating_add(deleted) {
        let flags = next()?.int()?;
        let ms = master.ms.wrapping_add(next()?.int()? as u64);
        let seq = master.seq.wrapping_add(next()?.int()? as u64);
        fields.clear();
        let expected_count = if flags & FLAG_SAME_FIELDS != 0 {
            for name in &master_fields {
                fields.push(*name, next()?);
            }
            master_fields.len() as i64 + 3
        } else {
            let n = usize::try_from(next()?.int()?).map_err(|_| corrupt("stream entry field count"))?;
            for _ in 0..n {
                let name = next()?;
                fields.push(name, next()?);
            }
            2 * n as i64 + 4
        };
        if next()?.int()? != expected_count {
            return Err(corrupt("stream entry element count"));
        }
        let is_deleted = flags & FLAG_DELETED != 0;
        if is_deleted {
            seen_deleted += 1;
        } else {
            seen_live += 1;
        }
        f(StreamId::new(ms, seq), is_deleted, &fields)?;
    }
    if seen_live != live || seen_deleted != deleted || next().is_ok() {
        return Err(corrupt("stream node counts differ from its entries"));
    }
    Ok(())
}

/// One entry's field/value pairs as text in one buffer, reused from entry to entry.
#[derive(Debug, Default)]
struct EntryText {
    text: Vec<u8>,
    /// Per pair: where the name starts, where the value starts, where the value ends.
    spans: Vec<(usize, usize, usize)>,
}

impl EntryText {
    fn clear(&mut self) {
        self.text.clear();
        self.spans.clear();
    }

    fn push(&mut self, name: listpack::Item<'_>, value: listpack::Item<'_>) {
        let start = self.text.len();
        self.put(name);
        let mid = self.text.len();
        self.put(value);
        self.spans.push((start, mid, self.text.len()));
    }

    fn put(&mut self, item: listpack::Item<'_>) {
        match item {
            listpack::Item::Str(s) => self.text.extend_from_slice(s),
            listpack::Item::Int(v) => codec::render(Scalar::Int(v), &mut self.text),
        }
    }
}

impl crate::types::stream::Fields for EntryText {
    fn pair_count(&self) -> usize {
        self.spans.len()
    }

    fn pair(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let &(a, b, c) = self.spans.get(i)?;
        Some((self.text.get(a..b)?, self.text.get(b..c)?))
    }
}
