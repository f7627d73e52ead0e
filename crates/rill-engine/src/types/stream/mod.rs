//! Streams: an append-only log of field/value entries ordered by [`StreamId`], stored
//! compactly (see [`block`] for the byte layout), plus the metadata Redis keeps beside it
//! (spec §1.1). The storage is this file and [`block`]/[`codec`]/[`id`]/[`idmp`]; the commands
//! live one family per `cmd_*.rs` file beside it and are collected in [`COMMANDS`].
//!
//! ```text
//! Stream
//!   blocks: BTreeMap<StreamId, Block>     key = first ID stored in the block
//!     [1-0 .. 1-99]  [5-0 .. 9-3]  [12-0 .. ]   <- tail block takes appends
//!   length, last_generated_id, max_deleted_entry_id, entries_added, first_id
//!   groups: BTreeMap<name, ConsumerGroup>      see [`group`] (state, effects) and [`pel`]
//! ```
//!
//! Consumer groups change only through [`group::GroupEffect`] records applied by
//! [`Stream::apply_group_effect`]: commands decide (reading the clock), effects carry the
//! outcome, so the log and replicas can replay them.
//!
//! Costs below use `B` = entries per block (≤ `node_max_entries`, 100 by default) and `K` =
//! number of blocks.

pub mod block;
pub mod chunked;
pub(crate) mod codec;
pub mod group;
pub mod id;
pub mod idmp;
pub mod max_age;
pub mod metrics;
pub mod order;
pub mod pel;
pub mod policy;
pub mod policy_act;
pub mod policy_close;

mod args;
mod cmd_ack;
mod cmd_add;
mod cmd_claim;
mod cmd_config;
mod cmd_delete;
mod cmd_group;
mod cmd_idmp_record;
mod cmd_info;
mod cmd_nack;
mod cmd_pending;
mod cmd_policy;
mod cmd_range;
mod cmd_read;
mod cmd_readgroup;
mod cmd_setid;
mod cmd_stream_policy;
mod cmd_trim;
mod reply;

#[cfg(test)]
mod cmd_tests;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod max_age_tests;
#[cfg(test)]
mod pel_tests;
#[cfg(test)]
mod policy_close_tests;
#[cfg(test)]
mod policy_model_tests;
#[cfg(test)]
mod tests;

use crate::command::CommandSpec;

use crate::CmdError;
use block::{Block, EntryCursor, EntryPos, Master};
use bytes::Bytes;
use std::collections::btree_map;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use block::NodeLimits;
pub use id::{StreamId, XaddId};
pub use idmp::Idmp;

/// Every stream command, in the order `COMMAND` lists them.
pub const COMMANDS: &[CommandSpec] = &[
    cmd_add::XADD,
    cmd_range::XLEN,
    cmd_range::XRANGE,
    cmd_range::XREVRANGE,
    cmd_read::XREAD,
    cmd_readgroup::XREADGROUP,
    cmd_ack::XACK,
    cmd_ack::XACKDEL,
    cmd_delete::XDEL,
    cmd_delete::XDELEX,
    cmd_trim::XTRIM,
    cmd_setid::XSETID,
    cmd_pending::XPENDING,
    cmd_claim::XCLAIM,
    cmd_claim::XAUTOCLAIM,
    cmd_nack::XNACK,
    cmd_group::XGROUP,
    cmd_config::XCFGSET,
    cmd_idmp_record::XIDMPRECORD,
    cmd_info::XINFO,
    cmd_policy::RILL_GROUP,
    cmd_policy::RILL_NACK,
    cmd_policy::RILL_TOUCH,
    cmd_readgroup::RILL_READGROUP,
    cmd_stream_policy::RILL_STREAM,
];

/// One entry as returned by reads: its ID and its field/value pairs in the order given to
/// XADD (duplicates kept).
pub type StreamEntry = (StreamId, Vec<(Bytes, Bytes)>);

/// An entry's field/value pairs, however the caller holds them: as pairs (snapshots, tests)
/// or as the flat `f1 v1 f2 v2 ...` arguments XADD received ([`FlatFields`]), which an append
/// then reads in place instead of copying them into pairs first.
pub trait Fields {
    /// Number of pairs.
    fn pair_count(&self) -> usize;
    /// Pair `i`.
    fn pair(&self, i: usize) -> Option<(&[u8], &[u8])>;
    /// The pairs in order.
    fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        (0..self.pair_count()).filter_map(|i| self.pair(i))
    }
}

impl Fields for [(Bytes, Bytes)] {
    fn pair_count(&self) -> usize {
        self.len()
    }
    fn pair(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.get(i).map(|(f, v)| (&f[..], &v[..]))
    }
    fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.iter().map(|(f, v)| (&f[..], &v[..]))
    }
}

impl Fields for Vec<(Bytes, Bytes)> {
    fn pair_count(&self) -> usize {
        self.len()
    }
    fn pair(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.as_slice().pair(i)
    }
    fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.as_slice().pairs()
    }
}

impl<const N: usize> Fields for [(Bytes, Bytes); N] {
    fn pair_count(&self) -> usize {
        N
    }
    fn pair(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.as_slice().pair(i)
    }
    fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.as_slice().pairs()
    }
}

/// Field/value pairs as a flat argument list `f1 v1 f2 v2 ...` (a trailing odd argument is
/// ignored).
#[derive(Debug, Clone, Copy)]
pub struct FlatFields<'a>(pub &'a [Bytes]);

impl Fields for FlatFields<'_> {
    fn pair_count(&self) -> usize {
        self.0.len() / 2
    }
    fn pair(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self.0.get(2 * i..2 * i + 2) {
            Some([f, v]) => Some((&f[..], &v[..])),
            _ => None,
        }
    }
    fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.0.chunks_exact(2).filter_map(|p| match p {
            [f, v] => Some((&f[..], &v[..])),
            _ => None,
        })
    }
}

/// `ERR Elements are too large to be stored`
pub const ELEMENTS_TOO_LARGE: CmdError = CmdError::full("ERR Elements are too large to be stored");
/// `ERR The ID specified in XSETID is smaller than current max_deleted_entry_id`
pub const SETID_BELOW_MAX_DELETED: CmdError =
    CmdError::full("ERR The ID specified in XSETID is smaller than current max_deleted_entry_id");
/// `ERR The ID specified in XSETID is smaller than the target stream top item`
pub const SETID_BELOW_TOP: CmdError =
    CmdError::full("ERR The ID specified in XSETID is smaller than the target stream top item");
/// `ERR The entries_added specified in XSETID is smaller than the target stream length`
pub const SETID_ENTRIES_ADDED_BELOW_LENGTH: CmdError =
    CmdError::full("ERR The entries_added specified in XSETID is smaller than the target stream length");

/// Largest total of field and value bytes one entry may carry (Redis' listpack limit).
pub const ENTRY_MAX_RAW_BYTES: u64 = 1 << 30;
/// `entries-added` saturates here (2^63 − 1), as in Redis.
pub const ENTRIES_ADDED_MAX: u64 = i64::MAX as u64;
/// Approximate trimming's LIMIT when none is given: this many times `node_max_entries` ...
pub const TRIM_DEFAULT_LIMIT_PER_NODE_ENTRY: u64 = 100;
/// ... or this when `node_max_entries` is 0 ...
pub const TRIM_DEFAULT_LIMIT_UNBOUNDED_NODES: u64 = 10_000;
/// ... and never more than this.
pub const TRIM_DEFAULT_LIMIT_MAX: u64 = 1_000_000;

/// A stream value.
///
/// Equality compares the stored representation (block boundaries included), not only the
/// logical entries: two streams built by different operation sequences may hold the same
/// entries and still differ.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stream {
    /// Entries, in blocks keyed by each block's first stored ID. Invariant: every block has at
    /// least one live entry; blocks' ID ranges do not overlap and are in key order.
    blocks: BTreeMap<StreamId, Arc<Block>>,
    /// `length`: live entries. Equals the sum of the blocks' live counts.
    length: u64,
    /// `last-generated-id`: highest ID ever added (only XSETID lowers it). ≥ every live ID.
    last_generated_id: StreamId,
    /// `max-deleted-entry-id`: highest ID removed by a delete (never by trimming).
    max_deleted_entry_id: StreamId,
    /// `entries-added`: lifetime appends, saturating at [`ENTRIES_ADDED_MAX`].
    entries_added: u64,
    /// `recorded-first-entry-id`: the first live ID, 0-0 when empty.
    first_id: StreamId,
    /// Idempotent-production state (XADD IDMP/IDMPAUTO, XCFGSET; spec §3.1.1).
    pub idmp: Idmp,
    /// Consumer groups by name (see [`group`]).
    groups: BTreeMap<Bytes, group::ConsumerGroup>,
    /// rill's retention by age (RILL.STREAM SET MAXAGE, see [`max_age`]); `None`: off.
    max_age: Option<max_age::MaxAge>,
}

/// Mark entry `id` deleted in a block that may be shared with a snapshot (blocks are
/// copy-on-write: a clone of the stream shares them): a shared block is copied only if the
/// entry is there to delete. False if there is no such live entry.
fn mark_deleted(block: &mut Arc<Block>, first: StreamId, id: StreamId) -> bool {
    if Arc::get_mut(block).is_none() && block.find(first, id).is_none_or(|p| p.deleted) {
        return false;
    }
    Arc::make_mut(block).mark_deleted(first, id)
}

/// What a trim aims for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimGoal {
    /// `MAXLEN n`: keep at most n live entries.
    MaxLen(u64),
    /// `MINID id`: remove live entries below id.
    MinId(StreamId),
}

/// Which entries a trim removed, as the log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrimRecord {
    /// Nothing was removed.
    Nothing,
    /// This many entries, all below the stream's (new) first entry: every live entry there.
    Prefix(u64),
    /// Exactly these entries (DELREF/ACKED trimming with groups).
    Ids(Vec<StreamId>),
}

/// What trimming and deletion do about consumer-group references (spec §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RefStrategy {
    /// Remove entries regardless of groups; PEL references stay (the default).
    #[default]
    KeepRef,
    /// Remove entries and every group's PEL references to them.
    DelRef,
    /// Remove only entries no group still references.
    Acked,
}

impl Stream {
    /// An empty stream (all metadata 0-0 / 0).
    pub fn new() -> Stream {
        Stream::default()
    }

    /// `length`: live entries. O(1).
    pub fn len(&self) -> u64 {
        self.length
    }

    /// Whether no entry is live. O(1).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// `last-generated-id`. O(1).
    pub fn last_generated_id(&self) -> StreamId {
        self.last_generated_id
    }

    /// `max-deleted-entry-id`. O(1).
    pub fn max_deleted_entry_id(&self) -> StreamId {
        self.max_deleted_entry_id
    }

    /// `entries-added`. O(1).
    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// `recorded-first-entry-id`: the first live ID, 0-0 if empty. O(1).
    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    // -----------------------------------------------------------------------------------------
    // IDs for XADD
    // -----------------------------------------------------------------------------------------

    fn check_not_exhausted(&self) -> Result<(), CmdError> {
        if self.last_generated_id == StreamId::MAX {
            Err(id::STREAM_EXHAUSTED)
        } else {
            Ok(())
        }
    }

    /// The ID `*` produces at `now_ms` (spec §1.2): `now-0` if the clock is ahead of the last
    /// ID, else the last ID + 1. O(1).
    pub fn next_id_auto(&self, now_ms: u64) -> Result<StreamId, CmdError> {
        self.check_not_exhausted()?;
        let last = self.last_generated_id;
        if now_ms > last.ms {
            Ok(StreamId::new(now_ms, 0))
        } else {
            last.next().ok_or(id::STREAM_EXHAUSTED)
        }
    }

    /// The ID `ms-*` produces: the next seq if `ms` is the last ID's ms, else `ms-0`; it must
    /// exceed the last ID. O(1).
    ///
    /// When the last seq is already 2^64−1 this is the "equal or smaller" error, as the spec
    /// reads the 8.x source; redis-server 7.0.15 answers `Elements are too large to be stored`
    /// there instead (to re-check against an 8.x server).
    pub fn next_id_for(&self, ms: u64) -> Result<StreamId, CmdError> {
        self.check_not_exhausted()?;
        let last = self.last_generated_id;
        let candidate = if ms == last.ms {
            StreamId::new(ms, last.seq.checked_add(1).ok_or(id::XADD_ID_TOO_SMALL)?)
        } else {
            StreamId::new(ms, 0)
        };
        self.check_explicit_id(candidate)
    }

    /// Check an explicit XADD ID: it must exceed `last-generated-id` (not just the last live
    /// entry). O(1).
    pub fn check_explicit_id(&self, id: StreamId) -> Result<StreamId, CmdError> {
        self.check_not_exhausted()?;
        if id > self.last_generated_id {
            Ok(id)
        } else {
            Err(id::XADD_ID_TOO_SMALL)
        }
    }

    /// The ID an XADD with this ID argument would store, or its error, in Redis' order
    /// (exhausted stream first, then the ID-specific check). O(1).
    pub fn resolve_xadd_id(&self, arg: XaddId, now_ms: u64) -> Result<StreamId, CmdError> {
        match arg {
            XaddId::Auto => self.next_id_auto(now_ms),
            XaddId::AutoSeq(ms) => self.next_id_for(ms),
            XaddId::Explicit(id) => self.check_explicit_id(id),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Writes
    // -----------------------------------------------------------------------------------------

    /// Append an entry with `id` (resolved by [`Stream::resolve_xadd_id`]), returning it.
    /// Errors, changing nothing: the stream's IDs are exhausted, `id` ≤ `last-generated-id`,
    /// or the fields and values total more than [`ENTRY_MAX_RAW_BYTES`].
    ///
    /// O(size of the entry + master entry of the tail block); O(B) once when an append lands
    /// behind a deleted tail entry (possible only after XSETID lowered the last ID) and the
    /// tail block is rewritten without its deleted entries.
    pub fn append<F: Fields + ?Sized>(
        &mut self,
        id: StreamId,
        fields: &F,
        limits: NodeLimits,
    ) -> Result<StreamId, CmdError> {
        self.check_explicit_id(id)?;
        let raw_bytes =
            fields.pairs().fold(0u64, |n, (f, v)| n.saturating_add(f.len() as u64).saturating_add(v.len() as u64));
        if raw_bytes > ENTRY_MAX_RAW_BYTES {
            return Err(ELEMENTS_TOO_LARGE);
        }
        self.rewrite_tail_if_behind(id);
        let appended = match self.blocks.last_entry() {
            Some(mut tail) if tail.get().has_room(raw_bytes, limits) => {
                let first = *tail.key();
                Arc::make_mut(tail.get_mut()).push(first, id, fields)
            }
            Some(mut tail) => {
                Arc::make_mut(tail.get_mut()).shrink();
                false
            }
            None => false,
        };
        if !appended {
            self.blocks.insert(id, Arc::new(Block::new(id, fields)));
        }
        if self.length == 0 {
            self.first_id = id;
        }
        self.length += 1;
        self.entries_added = self.entries_added.saturating_add(1).min(ENTRIES_ADDED_MAX);
        self.last_generated_id = id;
        Ok(id)
    }

    /// Keep blocks sorted when an append goes below the tail's (deleted) last stored ID.
    fn rewrite_tail_if_behind(&mut self, id: StreamId) {
        let Some(tail) = self.blocks.last_entry() else {
            return;
        };
        if tail.get().last_id() < id {
            return;
        }
        let first = *tail.key();
        let rewritten = tail.get().rewrite_live(first);
        tail.remove();
        if let Some((key, block)) = rewritten {
            self.blocks.insert(key, Arc::new(block));
        }
    }

    /// Delete the live entry `id` (XDEL). Raises `max-deleted-entry-id`, moves
    /// `recorded-first-entry-id` when the first entry goes, frees the block when its last live
    /// entry goes. False (nothing changes) if there is no such live entry. O(log K + B).
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&first, block)) = self.blocks.range_mut(..=id).next_back() else {
            return false;
        };
        if !mark_deleted(block, first, id) {
            return false;
        }
        if block.live_count() == 0 {
            self.blocks.remove(&first);
        }
        self.length = self.length.saturating_sub(1);
        if id > self.max_deleted_entry_id {
            self.max_deleted_entry_id = id;
        }
        if id == self.first_id {
            self.first_id = self.first_live_id();
        }
        true
    }

    /// Trim to at most `max_len` live entries, oldest first (MAXLEN). Returns the number
    /// removed. See [`Stream::trim_minid`] for `approx` and `limit`.
    pub fn trim_maxlen(&mut self, max_len: u64, approx: bool, limit: Option<u64>, limits: NodeLimits) -> u64 {
        self.trim(TrimGoal::MaxLen(max_len), approx, limit, limits)
    }

    /// Remove live entries with ID < `min_id` (MINID). Returns the number removed.
    ///
    /// Exact (`approx` false, `limit` ignored): whole blocks go while the goal allows, then
    /// entries of the boundary block are marked deleted up to the goal.
    /// Approximate (`~`): only whole blocks go, oldest first; a block goes if the goal still
    /// holds without it (MAXLEN: length − its live entries ≥ max_len; MINID: its last stored
    /// ID < min_id) and the total removed stays ≤ the limit. `limit`: `None` = the default
    /// (100 × `max_entries`, 10000 if that is 0, at most 1000000), `Some(0)` = unlimited.
    ///
    /// Trimming never changes `max-deleted-entry-id` or `entries-added`. KEEPREF semantics;
    /// DELREF/ACKED: see [`Stream::trim_with_record`].
    /// O(blocks removed × log K) + O(B) for the boundary block.
    pub fn trim_minid(&mut self, min_id: StreamId, approx: bool, limit: Option<u64>, limits: NodeLimits) -> u64 {
        self.trim(TrimGoal::MinId(min_id), approx, limit, limits)
    }

    /// Trim with a reference strategy (XADD/XTRIM `KEEPREF | DELREF | ACKED`), saying which
    /// entries went, for the log: a prefix (every live entry below the new first one) or, for
    /// DELREF/ACKED trimming with groups, a list.
    ///
    /// With KEEPREF this is [`Stream::trim_maxlen`] / [`Stream::trim_minid`]. DELREF and ACKED
    /// must look at entries one by one, so `~` no longer stops at the first block that cannot
    /// go whole: it trims to the exact goal, still refusing a block whose entries would push
    /// the total over the LIMIT (Redis 8.2.7+). Without consumer groups nothing is referenced
    /// and there is no reference to drop, so that is plain exact trimming; with groups see
    /// `trim_per_entry`.
    pub fn trim_with_record(
        &mut self,
        goal: TrimGoal,
        approx: bool,
        limit: Option<u64>,
        strategy: RefStrategy,
        limits: NodeLimits,
    ) -> TrimRecord {
        let removed = match strategy {
            RefStrategy::KeepRef => self.trim(goal, approx, limit, limits),
            RefStrategy::DelRef | RefStrategy::Acked => {
                let limit = if approx { effective_trim_limit(limit, limits) } else { 0 };
                if self.has_groups() {
                    let ids = self.trim_per_entry(goal, limit, strategy);
                    return if ids.is_empty() { TrimRecord::Nothing } else { TrimRecord::Ids(ids) };
                }
                self.trim_inner(goal, false, limit)
            }
        };
        match removed {
            0 => TrimRecord::Nothing,
            n => TrimRecord::Prefix(n),
        }
    }

    /// Replay of a [`TrimRecord::Ids`]: remove exactly these live entries as trimming does
    /// (no change to `max-deleted-entry-id`), and with `delref` every group's references to
    /// them. O(n log K + n × G log P).
    pub fn remove_trimmed(&mut self, ids: &[StreamId], delref: bool) -> u64 {
        let mut removed = 0;
        for &id in ids {
            let Some((&first, block)) = self.blocks.range_mut(..=id).next_back() else { continue };
            if mark_deleted(block, first, id) {
                removed += 1;
                self.length = self.length.saturating_sub(1);
                if block.live_count() == 0 {
                    self.blocks.remove(&first);
                }
            }
        }
        if removed > 0 {
            self.first_id = self.first_live_id();
        }
        if delref {
            for &id in ids {
                self.drop_references(id);
            }
        }
        removed
    }

    /// DELREF / ACKED trimming with groups: entries are looked at one by one from the head.
    /// ACKED skips referenced entries and goes on with newer ones; DELREF removes every
    /// group's references to what it removed. `limit` (0 = none) is checked per block, as
    /// approximate trimming does. With MAXLEN the walk stops after the block in which the goal
    /// fell when the block was reached (spec §6.2). O(E × G log n) for E entries examined, G
    /// groups and PELs of n entries.
    fn trim_per_entry(&mut self, goal: TrimGoal, limit: u64, strategy: RefStrategy) -> Vec<StreamId> {
        use std::ops::Bound::{Excluded, Unbounded};
        let mut removed_ids: Vec<StreamId> = Vec::new();
        let mut cursor: Option<StreamId> = None;
        loop {
            if let TrimGoal::MaxLen(n) = goal {
                if self.length <= n {
                    break;
                }
            }
            let next = match cursor {
                None => self.blocks.keys().next().copied(),
                Some(k) => self.blocks.range((Excluded(k), Unbounded)).next().map(|(k, _)| *k),
            };
            let Some(first) = next else { break };
            cursor = Some(first);
            let Some(block) = self.blocks.get(&first) else { break };
            let live = block.live_count();
            if limit != 0 && (removed_ids.len() as u64).saturating_add(live) > limit {
                break;
            }
            // Whether the goal allows the whole block to go. Unlike KEEPREF trimming it is not
            // dropped at once: its entries are looked at one by one, and it goes only if every
            // live one went; a block that does not qualify is the last one looked at.
            let eligible = match goal {
                TrimGoal::MaxLen(n) => self.length.saturating_sub(live) >= n,
                TrimGoal::MinId(min) => block.last_id() < min,
            };
            let removed_before = removed_ids.len();
            let ids: Vec<StreamId> =
                block.positions(first).unwrap_or_default().into_iter().filter(|p| !p.deleted).map(|p| p.id).collect();
            let mut goal_met = false;
            for id in ids {
                goal_met = match goal {
                    TrimGoal::MaxLen(n) => self.length <= n,
                    TrimGoal::MinId(min) => id >= min,
                };
                if goal_met {
                    break;
                }
                if strategy == RefStrategy::Acked && self.is_referenced(id) {
                    continue;
                }
                if let Some(b) = self.blocks.get_mut(&first) {
                    if mark_deleted(b, first, id) {
                        self.length = self.length.saturating_sub(1);
                        removed_ids.push(id);
                    }
                }
            }
            if eligible && (removed_ids.len() - removed_before) as u64 == live {
                self.blocks.remove(&first);
            }
            if goal_met || !eligible {
                break;
            }
        }
        if !removed_ids.is_empty() {
            self.first_id = self.first_live_id();
        }
        if strategy == RefStrategy::DelRef {
            for id in &removed_ids {
                self.drop_references(*id);
            }
        }
        removed_ids
    }

    fn trim(&mut self, goal: TrimGoal, approx: bool, limit: Option<u64>, limits: NodeLimits) -> u64 {
        let limit = if approx { effective_trim_limit(limit, limits) } else { 0 };
        self.trim_inner(goal, approx, limit)
    }

    /// The trim loop: `whole_blocks_only` stops at the first block that cannot go whole;
    /// `limit` (0 = none) bounds the entries removed, checked per block.
    fn trim_inner(&mut self, goal: TrimGoal, whole_blocks_only: bool, limit: u64) -> u64 {
        let approx = whole_blocks_only;
        let mut removed: u64 = 0;
        while let Some(mut head) = self.blocks.first_entry() {
            if let TrimGoal::MaxLen(n) = goal {
                if self.length <= n {
                    break;
                }
            }
            let live = head.get().live_count();
            if limit != 0 && removed.saturating_add(live) > limit {
                break;
            }
            let whole = match goal {
                TrimGoal::MaxLen(n) => self.length.saturating_sub(live) >= n,
                TrimGoal::MinId(min) => head.get().last_id() < min,
            };
            if whole {
                head.remove();
                self.length = self.length.saturating_sub(live);
                removed = removed.saturating_add(live);
                continue;
            }
            if approx {
                break;
            }
            let first = *head.key();
            let marked = match goal {
                TrimGoal::MaxLen(n) => {
                    let mut excess = self.length.saturating_sub(n);
                    Arc::make_mut(head.get_mut()).delete_front_while(first, |_| {
                        let go = excess > 0;
                        excess = excess.saturating_sub(1);
                        go
                    })
                }
                TrimGoal::MinId(min) => Arc::make_mut(head.get_mut()).delete_front_while(first, |id| id < min),
            };
            // A block this leaves without live entries (its newest entries were deleted before
            // and are ≥ MINID) stays, as Redis keeps such a node: later appends may fill it.
            self.length = self.length.saturating_sub(marked);
            removed = removed.saturating_add(marked);
            break;
        }
        if removed > 0 {
            self.first_id = self.first_live_id();
        }
        removed
    }

    /// XSETID's state change (spec §3.11 steps 4–6; argument syntax and the
    /// MAXDELETEDID ≤ last-id check are the caller's, done before the key lookup).
    /// `max_deleted` 0-0 leaves the current value. O(B) to find the last live entry.
    pub fn set_id(
        &mut self,
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    ) -> Result<(), CmdError> {
        if last_id < self.max_deleted_entry_id {
            return Err(SETID_BELOW_MAX_DELETED);
        }
        if self.length > 0 {
            if matches!(self.last_entry_id(), Some(top) if last_id < top) {
                return Err(SETID_BELOW_TOP);
            }
            if matches!(entries_added, Some(n) if n < self.length) {
                return Err(SETID_ENTRIES_ADDED_BELOW_LENGTH);
            }
        }
        self.last_generated_id = last_id;
        if let Some(n) = entries_added {
            self.entries_added = n.min(ENTRIES_ADDED_MAX);
        }
        if let Some(id) = max_deleted.filter(|id| *id != StreamId::MIN) {
            self.max_deleted_entry_id = id;
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Reads
    // -----------------------------------------------------------------------------------------

    /// Live entries with `start ≤ ID ≤ end`, ascending, or descending if `rev`. Lazy: seeks
    /// the first block in O(log K), then costs O(B) per block entered plus the decoding of
    /// each entry yielded. Bounds are inclusive; resolve `(` bounds with
    /// [`id::parse_interval_start`] / [`id::parse_interval_end`].
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> StreamRange<'_> {
        let blocks = if start > end {
            None
        } else if rev {
            Some(self.blocks.range(..=end))
        } else {
            // The block holding `start` is the last one keyed at or before it.
            let seek = self.blocks.range(..=start).next_back().map_or(start, |(k, _)| *k);
            Some(self.blocks.range(seek..=end))
        };
        StreamRange { blocks, cursor: None, start, end, rev }
    }

    /// Every live entry in ID order, read in place: `f` gets each ID and its (name, value)
    /// pairs borrowed from the blocks (a value is its bytes or a number to render), with no
    /// allocation per entry (what a snapshot's encoder walks). Stops at an entry that cannot
    /// be decoded, as [`Self::range`] does. O(entries).
    pub(crate) fn for_each_entry<'s>(&'s self, mut f: impl FnMut(StreamId, &[(&'s [u8], codec::Scalar<'s>)])) {
        struct Fields<'a>(Vec<(&'a [u8], codec::Scalar<'a>)>);
        impl<'a> block::FieldSink<'a> for Fields<'a> {
            fn count(&mut self, n: usize) {
                self.0.clear();
                self.0.reserve(n);
            }
            fn field(&mut self, name: &'a [u8], value: codec::Scalar<'a>) {
                self.0.push((name, value));
            }
        }
        let mut fields = Fields(Vec::new());
        for (&first, block) in &self.blocks {
            let block: &'s Block = block;
            let Some(mut cursor) = block.cursor(first) else { return };
            while let Some(p) = cursor.next_entry() {
                if p.deleted {
                    continue;
                }
                if cursor.fields_at(p.offset, &mut fields).is_none() {
                    return;
                }
                f(p.id, &fields.0);
            }
        }
    }

    /// The ID of the first live entry after `after`, without decoding any entry's fields: O(log
    /// K) to find the block, then the entries before it in that block (and in any block of
    /// deleted entries only).
    pub fn first_live_id_after(&self, after: StreamId) -> Option<StreamId> {
        let start = after.next()?;
        let seek = self.blocks.range(..=start).next_back().map_or(start, |(k, _)| *k);
        for (&first, block) in self.blocks.range(seek..) {
            let mut cursor = block.cursor_from(first, start)?;
            while let Some(p) = cursor.next_entry() {
                if !p.deleted && p.id >= start {
                    return Some(p.id);
                }
            }
        }
        None
    }

    /// [`Stream::range`] collected, at most `count` entries (`None` = all).
    pub fn range_vec(&self, start: StreamId, end: StreamId, count: Option<usize>, rev: bool) -> Vec<StreamEntry> {
        self.range(start, end, rev).take(count.unwrap_or(usize::MAX)).collect()
    }

    /// Whether `id` is a live entry, without decoding it. O(log K) plus a scan from the
    /// nearest position mark.
    pub fn contains(&self, id: StreamId) -> bool {
        self.blocks
            .range(..=id)
            .next_back()
            .and_then(|(&first, block)| block.find(first, id))
            .is_some_and(|p| !p.deleted)
    }

    /// Append the live entry `id` to `out` as RESP (see [`reply::EntryWriter`]); false if
    /// there is no such live entry. O(log K) plus a scan from the nearest position mark.
    fn write_entry(&self, id: StreamId, extra: usize, w: &mut reply::EntryWriter, out: &mut Vec<u8>) -> bool {
        let Some((&first, block)) = self.blocks.range(..=id).next_back() else { return false };
        match (block.find(first, id), block.cursor(first)) {
            (Some(p), Some(cursor)) if !p.deleted => w.entry(out, id, extra, &cursor, p.offset),
            _ => false,
        }
    }

    /// The live entry `id`, if any. O(log K + B).
    pub fn get(&self, id: StreamId) -> Option<StreamEntry> {
        let (&first, block) = self.blocks.range(..=id).next_back()?;
        let p = block.find(first, id).filter(|p| !p.deleted)?;
        let master = block.master(first)?;
        let names: Vec<Bytes> = master.fields.iter().map(|f| Bytes::copy_from_slice(f)).collect();
        Some((id, block.decode_at(first, &master, &names, p.offset)?))
    }

    /// The first live entry. O(B).
    pub fn first_entry(&self) -> Option<StreamEntry> {
        self.range(StreamId::MIN, StreamId::MAX, false).next()
    }

    /// The last live entry. O(B).
    pub fn last_entry(&self) -> Option<StreamEntry> {
        self.range(StreamId::MIN, StreamId::MAX, true).next()
    }

    /// The ID of the last live entry, `None` if empty. O(B).
    pub fn last_live_id(&self) -> Option<StreamId> {
        self.last_entry_id()
    }

    /// The newest live entry's ID, passing over blocks that hold only deleted entries.
    fn last_entry_id(&self) -> Option<StreamId> {
        self.blocks
            .iter()
            .rev()
            .filter(|(_, block)| block.live_count() > 0)
            .find_map(|(first, block)| block.positions(*first)?.iter().rev().find(|p| !p.deleted).map(|p| p.id))
    }

    fn first_live_id(&self) -> StreamId {
        self.blocks
            .iter()
            .filter(|(_, block)| block.live_count() > 0)
            .find_map(|(first, block)| block.positions(*first)?.into_iter().find(|p| !p.deleted))
            .map_or(StreamId::MIN, |p| p.id)
    }

    /// Every block with its key (first stored ID), in order: what a snapshot writer walks.
    pub fn blocks(&self) -> impl Iterator<Item = (StreamId, &Block)> + '_ {
        self.blocks.iter().map(|(k, b)| (*k, &**b))
    }

    /// Number of blocks. O(1).
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// Estimated bytes this stream occupies: the struct, every block's buffer capacity, and
    /// per block its key and struct with B-tree node slack (nodes of 11 slots filled about
    /// half by in-order inserts, so ×2). An estimate, not allocator-exact. O(K).
    pub fn memory_usage(&self) -> usize {
        let per_block = 2 * (std::mem::size_of::<StreamId>() + std::mem::size_of::<Block>());
        std::mem::size_of::<Stream>() + self.blocks.values().map(|b| b.heap_bytes() + per_block).sum::<usize>()
    }

    /// A copy with the same entries and state laid out afresh: the live entries re-appended
    /// under `limits`, deleted ones dropped. For comparing streams whose histories differ only
    /// in node layout (tests and fuzz targets that replay under other node limits). O(entries).
    #[doc(hidden)]
    pub fn relaid(&self, limits: NodeLimits) -> Stream {
        let mut out = self.clone();
        out.blocks.clear();
        out.length = 0;
        out.last_generated_id = StreamId::MIN;
        for (id, fields) in self.range(StreamId::MIN, StreamId::MAX, false) {
            let _ = out.append(id, &fields, limits);
        }
        out.last_generated_id = self.last_generated_id;
        out.entries_added = self.entries_added;
        out.first_id = self.first_id;
        out
    }

    /// Add a rebuilt node after the last block. False, changing nothing, if it has no entries,
    /// could not be built (IDs out of order) or does not sort after the last block's stored
    /// entries: the caller then re-appends its live entries instead. Length, first ID and
    /// counters are set as appending would; [`Stream::restore_metadata`] then sets the
    /// snapshot's own. O(B).
    pub(crate) fn restore_block(&mut self, node: NodeRebuild) -> bool {
        let NodeRebuild { block: Some((key, block)), failed: false } = node else {
            return false;
        };
        if self.blocks.last_key_value().is_some_and(|(_, last)| last.last_id() >= key) {
            return false;
        }
        let live = block.live_count();
        if self.length == 0 {
            if let Some(p) = block.positions(key).and_then(|ps| ps.into_iter().find(|p| !p.deleted)) {
                self.first_id = p.id;
            }
        }
        self.length += live;
        self.entries_added = self.entries_added.saturating_add(live).min(ENTRIES_ADDED_MAX);
        self.last_generated_id = self.last_generated_id.max(block.last_id());
        self.blocks.insert(key, Arc::new(block));
        true
    }

    /// Set the metadata a snapshot carries once its nodes have been loaded (RESTORE).
    /// Appending already set `length` and `recorded-first-entry-id`; this sets the counters
    /// appends cannot reproduce. Refuses, changing nothing, values no live stream can have:
    /// `entries_added` below the length or above [`ENTRIES_ADDED_MAX`], or a live entry above
    /// `last_generated_id`. O(B).
    pub fn restore_metadata(
        &mut self,
        last_generated_id: StreamId,
        max_deleted_entry_id: StreamId,
        entries_added: u64,
    ) -> bool {
        if entries_added < self.length
            || entries_added > ENTRIES_ADDED_MAX
            || matches!(self.last_entry_id(), Some(top) if top > last_generated_id)
        {
            return false;
        }
        self.last_generated_id = last_generated_id;
        self.max_deleted_entry_id = max_deleted_entry_id;
        self.entries_added = entries_added;
        true
    }

    /// Check every internal invariant (tests; later the snapshot loader). O(all bytes).
    pub fn validate(&self) -> bool {
        let mut live = 0u64;
        let mut prev_last: Option<StreamId> = None;
        for (first, block) in &self.blocks {
            if !block.validate(*first) {
                return false;
            }
            if matches!(prev_last, Some(p) if p >= *first) {
                return false;
            }
            prev_last = Some(block.last_id());
            live += block.live_count();
        }
        live == self.length
            && self.first_id == self.first_live_id()
            && !matches!(self.last_entry_id(), Some(top) if top > self.last_generated_id)
    }
}

/// One node of a snapshot rebuilt as it was laid out, deleted entries included (see
/// [`Stream::restore_block`]): Redis keeps a loaded node's listpack as it is, so the node
/// boundaries a DUMP or snapshot carries survive RESTORE and restart.
#[derive(Debug, Default)]
pub(crate) struct NodeRebuild {
    block: Option<(StreamId, Block)>,
    failed: bool,
}

impl NodeRebuild {
    /// A node already built: a block as a rill primary sent it ([`Block::from_raw`]).
    pub(crate) fn from_block(key: StreamId, block: Block) -> NodeRebuild {
        NodeRebuild { block: Some((key, block)), failed: false }
    }

    /// Add the node's next entry. Entries must come in increasing ID order.
    pub(crate) fn push<F: Fields + ?Sized>(&mut self, id: StreamId, deleted: bool, fields: &F) {
        if self.failed {
            return;
        }
        let ok = match &mut self.block {
            None => {
                let mut block = Block::new(id, fields);
                let ok = !deleted || block.mark_first(id);
                self.block = Some((id, block));
                ok
            }
            Some((key, block)) => block.push_marked(*key, id, fields, deleted),
        };
        self.failed = !ok;
    }
}

/// The LIMIT approximate trimming uses (0 = unlimited).
fn effective_trim_limit(limit: Option<u64>, limits: NodeLimits) -> u64 {
    match limit {
        Some(l) => l,
        None if limits.max_entries == 0 => TRIM_DEFAULT_LIMIT_UNBOUNDED_NODES,
        None => limits.max_entries.saturating_mul(TRIM_DEFAULT_LIMIT_PER_NODE_ENTRY).min(TRIM_DEFAULT_LIMIT_MAX),
    }
}

/// Point lookups over a stream that decode each block once while consecutive lookups stay in
/// it (claims walk the PEL mostly in ID order): O(B) per block entered, then O(log B) per
/// lookup in it, instead of O(B) per lookup.
#[derive(Debug)]
pub struct EntryLookup<'a> {
    stream: &'a Stream,
    cur: Option<LookupBlock<'a>>,
    /// The block (by its first ID) that [`EntryLookup::contains`] last scanned without
    /// decoding it: a second lookup there decodes it.
    probed: Option<StreamId>,
}

/// The block an [`EntryLookup`] has decoded.
#[derive(Debug)]
struct LookupBlock<'a> {
    first: StreamId,
    /// First ID of the next block: the decoded block covers `first..next`.
    next: Option<StreamId>,
    block: &'a Block,
    /// Reads the block's entries (its master decoded once).
    cursor: EntryCursor<'a>,
    names: Vec<Bytes>,
    positions: Vec<EntryPos>,
}

impl Stream {
    /// A lookup helper for many point reads (see [`EntryLookup`]).
    pub fn lookup(&self) -> EntryLookup<'_> {
        EntryLookup { stream: self, cur: None, probed: None }
    }
}

impl<'a> EntryLookup<'a> {
    /// Whether the decoded block covers `id`.
    fn covers(&self, id: StreamId) -> bool {
        self.cur.as_ref().is_some_and(|c| c.first <= id && c.next.is_none_or(|n| id < n))
    }

    fn enter(&mut self, id: StreamId) -> Option<&LookupBlock<'a>> {
        use std::ops::Bound::{Excluded, Unbounded};
        if !self.covers(id) {
            let (&first, block) = self.stream.blocks.range(..=id).next_back()?;
            let next = self.stream.blocks.range((Excluded(first), Unbounded)).next().map(|(k, _)| *k);
            let cursor = block.cursor(first)?;
            let names = cursor.master().fields.iter().map(|f| Bytes::copy_from_slice(f)).collect();
            let positions = block.positions(first)?;
            self.cur = Some(LookupBlock { first, next, block, cursor, names, positions });
        }
        self.cur.as_ref()
    }

    fn position(&mut self, id: StreamId) -> Option<(&LookupBlock<'a>, usize)> {
        let c = self.enter(id)?;
        let i = c.positions.binary_search_by_key(&id, |p| p.id).ok()?;
        let p = c.positions.get(i)?;
        (!p.deleted).then_some((c, p.offset))
    }

    /// Whether `id` is a live entry. The first lookup in a block scans it from the mark
    /// before `id` without decoding it (one lookup, as XAUTOCLAIM ... COUNT 1 makes, costs no
    /// more than that); a second one in the same block decodes it for the lookups to come.
    pub fn contains(&mut self, id: StreamId) -> bool {
        if !self.covers(id) {
            let Some((&first, block)) = self.stream.blocks.range(..=id).next_back() else { return false };
            if self.probed != Some(first) {
                self.probed = Some(first);
                return block.find(first, id).is_some_and(|p| !p.deleted);
            }
        }
        self.position(id).is_some()
    }

    /// Append the live entry `id` to `out` as RESP, an array of `2 + extra` elements whose
    /// last `extra` the caller appends (see [`reply::EntryWriter`]). False (nothing written) if
    /// there is no such live entry.
    fn write(&mut self, id: StreamId, extra: usize, w: &mut reply::EntryWriter, out: &mut Vec<u8>) -> bool {
        match self.position(id) {
            Some((c, offset)) => w.entry(out, id, extra, &c.cursor, offset),
            None => false,
        }
    }

    /// The live entry `id`, if any.
    pub fn get(&mut self, id: StreamId) -> Option<StreamEntry> {
        let (c, offset) = self.position(id)?;
        let fields = c.block.decode_at(c.first, c.cursor.master(), &c.names, offset)?;
        Some((id, fields))
    }
}

/// Iterator returned by [`Stream::range`].
#[derive(Debug)]
pub struct StreamRange<'a> {
    /// Blocks still to visit, consumed from the front (forward) or the back (`rev`).
    blocks: Option<btree_map::Range<'a, StreamId, Arc<Block>>>,
    cursor: Option<BlockCursor<'a>>,
    start: StreamId,
    end: StreamId,
    rev: bool,
}

/// The block being read: its decoded master and the live in-range entries not yet yielded.
#[derive(Debug)]
struct BlockCursor<'a> {
    first: StreamId,
    block: &'a Block,
    master: Master<'a>,
    names: Vec<Bytes>,
    pending: std::collections::VecDeque<EntryPos>,
}

impl<'a> StreamRange<'a> {
    fn enter(&mut self, first: StreamId, block: &'a Block) -> Option<BlockCursor<'a>> {
        let master = block.master(first);
        let positions = block.positions(first);
        debug_assert!(master.is_some() && positions.is_some(), "undecodable stream block");
        let master = master?;
        let names = master.fields.iter().map(|f| Bytes::copy_from_slice(f)).collect();
        let pending = positions?.into_iter().filter(|p| !p.deleted && p.id >= self.start && p.id <= self.end).collect();
        Some(BlockCursor { first, block, master, names, pending })
    }
}

impl Iterator for StreamRange<'_> {
    type Item = StreamEntry;

    fn next(&mut self) -> Option<StreamEntry> {
        loop {
            if let Some(c) = self.cursor.as_mut() {
                let pos = if self.rev { c.pending.pop_back() } else { c.pending.pop_front() };
                if let Some(p) = pos {
                    let fields = c.block.decode_at(c.first, &c.master, &c.names, p.offset);
                    debug_assert!(fields.is_some(), "undecodable stream entry");
                    return Some((p.id, fields?));
                }
                self.cursor = None;
            }
            let blocks = self.blocks.as_mut()?;
            let (first, block) = if self.rev { blocks.next_back()? } else { blocks.next()? };
            if self.rev && block.last_id() < self.start {
                self.blocks = None;
                return None;
            }
            self.cursor = self.enter(*first, block);
        }
    }
}
