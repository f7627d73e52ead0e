//! Effects: what a write command *did*, in a form whose replay reaches exactly the same state.
//! The append-only log stores them and replication will send them; neither ever re-decides
//! anything a command decided from the clock, a random number or block layout.
//!
//! A command produces effects in one of two ways:
//!
//! * **Implicitly**: a command that changed the keyspace and whose outcome depends only on the
//!   keyspace, its arguments and the record's time is logged as itself ([`Effect::Command`]).
//!   Replay runs it with `now_ms` = the record's time, expiry off and blocking off, so
//!   relative TTLs (`SET k v EX 10`, `EXPIRE`, `RESTORE k 5000 ...`) land on the same
//!   absolute times and every other decision is a function of the same state.
//! * **Explicitly**: a handler whose outcome depends on anything else emits concrete records
//!   through [`CallCtx::emit`]:
//!   - XADD with `*` / `ms-*`: `XADD key [IDMP pid iid] <final id> field value ...`, IDMPAUTO
//!     resolved to its IID;
//!   - trimming (`~` depends on block layout): the exact prefix (`XTRIM key MINID = id`,
//!     `MAXLEN = 0`) or, for DELREF/ACKED with groups, an exact `XTRIM key MAXLEN|MINID = n
//!     DELREF|ACKED` that removes the same entries (rill before that wrote the removed IDs,
//!     [`Effect::TrimIds`], which still replays);
//!   - XREADGROUP, XCLAIM, XAUTOCLAIM, XNACK, XGROUP CREATECONSUMER: the consumer-group
//!     changes with every time, count and owner spelled out ([`Effect::Group`]);
//!   - SPOP: `SREM` of the members it picked.
//!
//!   Lazy and active expiry are logged as `DEL key`, in order, before the effects of the
//!   command that found the key expired.
//!
//! # Record body
//!
//! The server frames each record (length + checksum, see the server's log module); the body
//! this module encodes is:
//!
//! ```text
//! body    := time_ms:i64le count:varint effect{count}
//! effect  := 0x01 db:varint argc:varint (len:varint bytes){argc}            Command
//!          | 0x02 db:varint key:str group-effect                           Group
//!          | 0x03 db:varint key:str delref:u8 n:varint id{n}                TrimIds
//!          | 0x04 code:str                                                 Library
//!          | 0x05 name:str                                                 LibraryDeleted
//!          | 0x06                                                          LibrariesFlushed
//! str     := len:varint bytes          id := ms:varint seq:varint
//! opt-u64 := 0x00 | 0x01 varint       varint := unsigned LEB128, at most 10 bytes
//! group-effect := tag:u8 group:str fields (in the order of the GroupEffect variant)
//! ```

use crate::types::stream::codec;
use crate::types::stream::group::GroupEffect;
use crate::types::stream::policy::{Counters, PolicyState, Release, Settings};
use crate::types::stream::StreamId;
use bytes::Bytes;

/// The first byte of each effect: which [`Effect`] variant follows. Part of the log format:
/// a value, once written, keeps its meaning for ever (see the golden fixtures' test).
mod tag {
    /// [`super::Effect::Command`].
    pub const COMMAND: u8 = 1;
    /// [`super::Effect::Group`].
    pub const GROUP: u8 = 2;
    /// [`super::Effect::TrimIds`].
    pub const TRIM_IDS: u8 = 3;
    /// [`super::Effect::Library`].
    pub const LIBRARY: u8 = 4;
    /// [`super::Effect::LibraryDeleted`].
    pub const LIBRARY_DELETED: u8 = 5;
    /// [`super::Effect::LibrariesFlushed`].
    pub const LIBRARIES_FLUSHED: u8 = 6;
}

/// The first byte of a group effect: which [`GroupEffect`] variant follows (log format, as
/// [`tag`]).
mod group_tag {
    pub const GROUP_CREATED: u8 = 1;
    pub const GROUP_DESTROYED: u8 = 2;
    pub const SET_ID: u8 = 3;
    pub const LAST_ID_RAISED: u8 = 4;
    pub const CONSUMER_CREATED: u8 = 5;
    pub const CONSUMER_SEEN: u8 = 6;
    pub const CONSUMER_DELETED: u8 = 7;
    pub const DELIVERED: u8 = 8;
    pub const REDELIVERED: u8 = 9;
    pub const CLAIMED: u8 = 10;
    pub const NACKED: u8 = 11;
    pub const ACKED: u8 = 12;
    /// `LastIdRaised` with the group's entries-read (tag 4, written before, lacks it).
    pub const LAST_ID_RAISED_READ: u8 = 13;
    /// `Redelivered` with the owner (tag 9, written before, lacks it).
    pub const REDELIVERED_TO: u8 = 14;
    pub const POLICY_SET: u8 = 15;
    pub const POLICY_RESTORED: u8 = 16;
    pub const HANDED_BACK: u8 = 17;
    pub const DEAD_LETTERED: u8 = 18;
    pub const TOUCHED: u8 = 19;
    pub const DEFERRED: u8 = 20;
    pub const DEFERRED_DROPPED: u8 = 21;
    /// `PolicyRestored` with the consumers-expired counter, ORDERBY's deferred entries and the
    /// activity times (tag 16, written before, lacks them).
    pub const POLICY_RESTORED_2: u8 = 22;
    /// `PolicySet` with its time (tag 15, written before, lacks it).
    pub const POLICY_SET_AT: u8 = 23;
    pub const CONSUMER_EXPIRED: u8 = 24;
    /// `PolicyRestored` with its counters' number before them (the released-on-close counter
    /// and any later one; tag 22, written before, holds 8).
    pub const POLICY_RESTORED_3: u8 = 25;
}

/// One concrete change, as logged and replayed (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Replay by running this command in database `db` at the record's time.
    Command {
        /// Database index.
        db: usize,
        /// The command and its arguments.
        args: Vec<Bytes>,
    },
    /// A consumer-group change on the stream at `key`.
    Group {
        /// Database index.
        db: usize,
        /// The stream's key.
        key: Bytes,
        /// The change.
        effect: GroupEffect,
    },
    /// Trimming removed exactly these entries (DELREF / ACKED trimming with groups, where the
    /// removed set need not be a prefix). `delref`: every group's references to them go too.
    /// Written by older rills only (such a trim is now recorded as an exact `XTRIM`, see the
    /// module doc); logs holding it still replay.
    TrimIds {
        /// Database index.
        db: usize,
        /// The stream's key.
        key: Bytes,
        /// Removed entry IDs, ascending.
        ids: Vec<StreamId>,
        /// DELREF: drop group references to the removed entries.
        delref: bool,
    },
    /// FUNCTION LOAD (and RESTORE): the library `code`, named by its first line, added or
    /// replacing the one of that name. The server checked it before (it compiles, registers
    /// functions, collides with nothing): replay only keeps it.
    Library {
        /// The library's whole code.
        code: Bytes,
    },
    /// FUNCTION DELETE: the library `name` is gone.
    LibraryDeleted {
        /// The library's name.
        name: Bytes,
    },
    /// FUNCTION FLUSH (and RESTORE ... FLUSH): no libraries.
    LibrariesFlushed,
}

impl Effect {
    /// A command effect from string slices (tests, and effects the engine builds).
    pub fn command(db: usize, args: Vec<Bytes>) -> Effect {
        Effect::Command { db, args }
    }

    /// `DEL key` in `db` (expiry).
    pub fn del(db: usize, key: Bytes) -> Effect {
        Effect::Command { db, args: vec![Bytes::from_static(b"DEL"), key] }
    }

    /// The database the effect changes.
    pub fn db(&self) -> usize {
        match self {
            Effect::Command { db, .. } | Effect::Group { db, .. } | Effect::TrimIds { db, .. } => *db,
            // Libraries belong to no database.
            Effect::Library { .. } | Effect::LibraryDeleted { .. } | Effect::LibrariesFlushed => 0,
        }
    }
}

/// Why an effect could not be applied. On replay these are reported, not fatal (but
/// [`ApplyError::DbOutOfRange`], which says the log is not this server's to replay): a command
/// that failed when it first ran fails the same way again, and that is the state the
/// original server had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// The effect names a database the engine does not have: the log was written by a server
    /// with more databases, and every effect on that database would be lost.
    DbOutOfRange(usize),
    /// A command effect whose name the table does not know.
    UnknownCommand(String),
    /// A command effect for a command only the server runs (never logged by this server).
    NotAnEngineCommand(&'static str),
    /// The command ran and replied this error.
    Command(String),
    /// A stream effect that does not fit the keyspace (no stream at the key, ...).
    Stream(&'static str),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::DbOutOfRange(db) => write!(f, "database {db} out of range"),
            ApplyError::UnknownCommand(name) => write!(f, "unknown command '{name}'"),
            ApplyError::NotAnEngineCommand(name) => write!(f, "command '{name}' cannot be replayed"),
            ApplyError::Command(text) => f.write_str(text),
            ApplyError::Stream(why) => f.write_str(why),
        }
    }
}

impl crate::Engine {
    /// Apply one effect at time `time_ms`: the one way a log replay (and, next, a replication
    /// stream) changes the keyspace. A command effect runs through `table` (the table without
    /// renames: the log names commands as they are); every logged command is an engine
    /// command, so no command is special-cased here.
    pub fn apply_effect(
        &mut self,
        table: &crate::command::CommandTable,
        time_ms: i64,
        effect: Effect,
    ) -> Result<(), ApplyError> {
        // One check for every kind of effect, with its own error: the caller tells a log from
        // a server with more databases apart from an effect that failed when it first ran.
        if effect.db() >= self.db_count() {
            return Err(ApplyError::DbOutOfRange(effect.db()));
        }
        // The events of this effect replace any held before, as `Engine::call` does for a
        // command: a long replay never piles them up.
        self.clear_events();
        match effect {
            Effect::Group { .. } | Effect::TrimIds { .. } => {
                self.apply_stream_effect(&effect).map_err(ApplyError::Stream)
            }
            Effect::Library { code } => self.libraries_mut().set(code).map_err(ApplyError::Command),
            Effect::LibraryDeleted { name } => {
                self.libraries_mut().remove(&String::from_utf8_lossy(&name));
                Ok(())
            }
            Effect::LibrariesFlushed => {
                self.libraries_mut().clear();
                Ok(())
            }
            Effect::Command { db, args } => {
                // The most common record, straight into the stream.
                let args = match self.replay_xadd(db, args) {
                    Ok(r) => return r.map_err(ApplyError::Stream),
                    Err(args) => args,
                };
                let spec = match table.resolve(&args) {
                    crate::command::Lookup::Found(s) => s,
                    _ => {
                        let name = args.first().map(|a| String::from_utf8_lossy(a).into_owned()).unwrap_or_default();
                        return Err(ApplyError::UnknownCommand(name));
                    }
                };
                let crate::command::Handler::Engine(handler) = spec.handler else {
                    return Err(ApplyError::NotAnEngineCommand(spec.name));
                };
                let mut ctx = crate::CallCtx::new(db, time_ms, 0);
                ctx.no_block = true;
                handler(self, &mut ctx, &args).map(|_| ()).map_err(|e| ApplyError::Command(e.text().to_string()))
            }
        }
    }

    /// Replay `XADD key id field value ...` with an explicit ID (the form the log writes)
    /// directly, without the command's option parsing and reply. Hands `args` back when they
    /// are not that form (the caller then runs the command normally).
    pub fn replay_xadd(&mut self, db: usize, args: Vec<Bytes>) -> Result<Result<(), &'static str>, Vec<Bytes>> {
        let id = match args.as_slice() {
            [name, _, id, rest @ ..]
                if name.eq_ignore_ascii_case(b"XADD") && !rest.is_empty() && rest.len() % 2 == 0 =>
            {
                match parse_plain_id(id) {
                    Some(id) => id,
                    None => return Err(args),
                }
            }
            _ => return Err(args),
        };
        let limits = crate::types::stream::NodeLimits::new(
            self.config.stream_node_max_entries,
            self.config.stream_node_max_bytes,
        );
        let (duration, maxsize) = (self.config.stream_idmp_duration_secs, self.config.stream_idmp_maxsize);
        let Some(key) = args.get(1) else { return Ok(Err("XADD effect without a key")) };
        let fields = crate::types::stream::FlatFields(args.get(3..).unwrap_or_default());
        let Some(d) = self.dbs.get_mut(db) else { return Ok(Err("database index out of range")) };
        if !d.keys.contains_key(key.as_ref()) {
            let mut stream = Box::<crate::types::stream::Stream>::default();
            stream.idmp.configure(Some(duration), Some(maxsize));
            self.insert(db, key.clone(), crate::Value::Stream(stream));
        }
        let Some(entry) = self.dbs.get_mut(db).and_then(|d| d.keys.get_mut(key.as_ref())) else {
            return Ok(Err("stream vanished"));
        };
        let crate::Value::Stream(stream) = &mut entry.value else {
            return Ok(Err("XADD effect on a key of another type"));
        };
        if stream.append(id, &fields, limits).is_err() {
            return Ok(Err("XADD effect could not be applied"));
        }
        self.count_changes(1);
        // A replica applying its primary's records: its WATCHes break and its blocked readers
        // are served as by the command (both cost nothing when nobody waits, as in a replay).
        self.watch.touch(db, key);
        self.signal_ready(db, key);
        Ok(Ok(()))
    }

    /// Replay a [`Effect::Group`] or [`Effect::TrimIds`] (a [`Effect::Command`] is run through
    /// the command table by the caller). Errors when the key holds no stream: a log that
    /// reaches that state does not come from this server.
    pub fn apply_stream_effect(&mut self, effect: &Effect) -> Result<(), &'static str> {
        let (db, key) = match effect {
            Effect::Group { db, key, .. } | Effect::TrimIds { db, key, .. } => (*db, key),
            _ => return Err("not a stream effect"),
        };
        let entry = self
            .dbs
            .get_mut(db)
            .ok_or("database index out of range")?
            .keys
            .get_mut(key)
            .ok_or("stream effect on a missing key")?;
        let crate::Value::Stream(stream) = &mut entry.value else {
            return Err("stream effect on a key of another type");
        };
        let mut armed = None;
        match effect {
            Effect::Group { effect, .. } => {
                stream.apply_group_effect(effect);
                let group = effect.group();
                if stream.group(group).is_some_and(|g| g.policy().is_some()) {
                    armed = Some(group);
                }
            }
            Effect::TrimIds { ids, delref, .. } => {
                stream.remove_trimmed(ids, *delref);
            }
            _ => {}
        }
        self.count_changes(1);
        self.watch.touch(db, key);
        // A policy group's deadlines travel with it: a promoted replica or a restarted
        // server enforces them from the replayed state.
        if let Some(group) = armed {
            self.arm_policy(db, key, group);
        }
        Ok(())
    }
}

/// `ms-seq` in plain decimal digits (the form the log writes), without the general ID parser.
fn parse_plain_id(text: &[u8]) -> Option<StreamId> {
    let dash = text.iter().position(|&c| c == b'-')?;
    let num = |d: &[u8]| -> Option<u64> {
        if d.is_empty() || d.len() > 20 {
            return None;
        }
        d.iter().try_fold(0u64, |acc, &c| {
            if c.is_ascii_digit() {
                acc.checked_mul(10)?.checked_add(u64::from(c - b'0'))
            } else {
                None
            }
        })
    };
    Some(StreamId { ms: num(text.get(..dash)?)?, seq: num(text.get(dash + 1..)?)? })
}

/// Why a record body could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// The one LEB128 codec of the engine (the stream blocks' own).
fn put_varint(out: &mut Vec<u8>, v: u64) {
    codec::put_varint(out, u128::from(v));
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s);
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_varint(out, id.ms);
    put_varint(out, id.seq);
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_opt(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            put_varint(out, v);
        }
    }
}

/// Append the body of a record holding `effects` at `time_ms` to `out`.
pub fn encode_record(out: &mut Vec<u8>, time_ms: i64, effects: &[Effect]) {
    put_i64(out, time_ms);
    put_varint(out, effects.len() as u64);
    for e in effects {
        encode_effect(out, e);
    }
}

/// Effects already in their encoded form: what a command emits and the log appends, without
/// building [`Effect`] values (the hot path of every logged write).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EffectBuf {
    bytes: Vec<u8>,
    count: u64,
}

impl EffectBuf {
    /// No effects.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Number of effects.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Forget every effect, keeping the allocation.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.count = 0;
    }

    /// Bytes allocated.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// [`EffectBuf::clear`], and give the allocation back when it holds more than `keep`
    /// bytes: one huge unit (a script of a million writes) must not pin its size for good.
    pub fn clear_to(&mut self, keep: usize) {
        self.clear();
        if self.bytes.capacity() > keep {
            self.bytes = Vec::new();
        }
    }

    /// Encoded size in bytes.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Add one effect.
    pub fn push(&mut self, effect: &Effect) {
        encode_effect(&mut self.bytes, effect);
        self.count += 1;
    }

    /// Add a command effect from its arguments.
    pub fn command<'a>(&mut self, db: usize, args: impl ExactSizeIterator<Item = &'a [u8]>) {
        put_command(&mut self.bytes, db, args);
        self.count += 1;
    }

    /// Add `DEL key` (expiry).
    pub fn del(&mut self, db: usize, key: &[u8]) {
        self.command(db, [&b"DEL"[..], key].into_iter());
    }

    /// Add a consumer-group change on the stream at `key`.
    pub fn group(&mut self, db: usize, key: &[u8], effect: &GroupEffect) {
        put_group(&mut self.bytes, db, key, effect);
        self.count += 1;
    }

    /// Move every effect of `other` after ours.
    pub fn append(&mut self, other: &mut EffectBuf) {
        self.bytes.extend_from_slice(&other.bytes);
        self.count += other.count;
        other.clear();
    }

    /// Add every effect of an encoded record (`encode_record`), its bytes copied as they are:
    /// what a replica hands its own journal for a unit its primary recorded, with nothing
    /// encoded again. False, and nothing added, if the record's header is malformed; the
    /// effects themselves are not checked (decode the record first).
    pub fn append_record(&mut self, body: &[u8]) -> bool {
        let Some(rest) = body.get(8..) else { return false };
        let mut pos = 0;
        let Some(count) = codec::get_varint_u64(rest, &mut pos) else { return false };
        let Some(effects) = rest.get(pos..) else { return false };
        self.bytes.extend_from_slice(effects);
        self.count += count;
        true
    }

    /// The effects read in place, if every one of them is a command (the common unit: one
    /// XADD, SET, ...): each command's database and arguments as slices of the buffer, with
    /// nothing decoded into values. `None` if any effect is of another kind or the buffer does
    /// not decode.
    pub fn commands_in_place(&self) -> Option<CommandsInPlace<'_>> {
        let all = CommandsInPlace { rest: &self.bytes, left: self.count };
        // Checked whole first, so the iterator met by the caller cannot end early.
        let mut check = all.clone();
        for _ in 0..self.count {
            check.next_checked()?;
        }
        check.rest.is_empty().then_some(all)
    }

    /// The effects as values (tests, tools).
    pub fn decode(&self) -> Result<Vec<Effect>, DecodeError> {
        let mut body = Vec::with_capacity(self.bytes.len() + 16);
        encode_record_buf(&mut body, 0, self);
        decode_record(&body).map(|(_, e)| e)
    }
}

/// The command effects of an [`EffectBuf`] read in place ([`EffectBuf::commands_in_place`]).
#[derive(Debug, Clone)]
pub struct CommandsInPlace<'a> {
    rest: &'a [u8],
    left: u64,
}

impl<'a> CommandsInPlace<'a> {
    /// How many commands are left.
    pub fn remaining(&self) -> usize {
        usize::try_from(self.left).unwrap_or(usize::MAX)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut pos = 0;
        let v = codec::get_varint_u64(self.rest, &mut pos)?;
        self.rest = self.rest.get(pos..)?;
        Some(v)
    }

    fn next_checked(&mut self) -> Option<(usize, ArgsInPlace<'a>)> {
        if self.left == 0 || *self.rest.first()? != tag::COMMAND {
            return None;
        }
        self.rest = self.rest.get(1..)?;
        let db = usize::try_from(self.varint()?).ok()?;
        let argc = self.varint()?;
        if argc == 0 {
            return None;
        }
        let start = self.rest;
        for _ in 0..argc {
            let n = usize::try_from(self.varint()?).ok()?;
            self.rest = self.rest.get(n..)?;
        }
        let used = start.len() - self.rest.len();
        self.left -= 1;
        Some((db, ArgsInPlace { rest: start.get(..used)?, left: usize::try_from(argc).ok()? }))
    }
}

impl<'a> Iterator for CommandsInPlace<'a> {
    /// A command's database and its arguments (the command's name first).
    type Item = (usize, ArgsInPlace<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        self.next_checked()
    }
}

/// One command's arguments, slices of its [`EffectBuf`].
#[derive(Debug, Clone)]
pub struct ArgsInPlace<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for ArgsInPlace<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let mut pos = 0;
        let n = usize::try_from(codec::get_varint_u64(self.rest, &mut pos)?).ok()?;
        let arg = self.rest.get(pos..pos.checked_add(n)?)?;
        self.rest = self.rest.get(pos + n..)?;
        self.left -= 1;
        Some(arg)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ArgsInPlace<'_> {}

/// Append the body of a record holding the effects of `buf` at `time_ms` to `out`.
pub fn encode_record_buf(out: &mut Vec<u8>, time_ms: i64, buf: &EffectBuf) {
    put_i64(out, time_ms);
    put_varint(out, buf.count);
    out.extend_from_slice(&buf.bytes);
}

fn put_command<'a>(out: &mut Vec<u8>, db: usize, args: impl ExactSizeIterator<Item = &'a [u8]>) {
    out.push(tag::COMMAND);
    put_varint(out, db as u64);
    put_varint(out, args.len() as u64);
    for a in args {
        put_str(out, a);
    }
}

fn put_group(out: &mut Vec<u8>, db: usize, key: &[u8], effect: &GroupEffect) {
    out.push(tag::GROUP);
    put_varint(out, db as u64);
    put_str(out, key);
    encode_group(out, effect);
}

fn encode_effect(out: &mut Vec<u8>, effect: &Effect) {
    match effect {
        Effect::Command { db, args } => put_command(out, *db, args.iter().map(|a| &a[..])),
        Effect::Group { db, key, effect } => put_group(out, *db, key, effect),
        Effect::TrimIds { db, key, ids, delref } => {
            out.push(tag::TRIM_IDS);
            put_varint(out, *db as u64);
            put_str(out, key);
            out.push(u8::from(*delref));
            put_varint(out, ids.len() as u64);
            for id in ids {
                put_id(out, *id);
            }
        }
        Effect::Library { code } => {
            out.push(tag::LIBRARY);
            put_str(out, code);
        }
        Effect::LibraryDeleted { name } => {
            out.push(tag::LIBRARY_DELETED);
            put_str(out, name);
        }
        Effect::LibrariesFlushed => out.push(tag::LIBRARIES_FLUSHED),
    }
}

fn encode_group(out: &mut Vec<u8>, effect: &GroupEffect) {
    match effect {
        GroupEffect::GroupCreated { group, last_id, entries_read } => {
            out.push(group_tag::GROUP_CREATED);
            put_str(out, group);
            put_id(out, *last_id);
            put_opt(out, *entries_read);
        }
        GroupEffect::GroupDestroyed { group } => {
            out.push(group_tag::GROUP_DESTROYED);
            put_str(out, group);
        }
        GroupEffect::SetId { group, last_id, entries_read } => {
            out.push(group_tag::SET_ID);
            put_str(out, group);
            put_id(out, *last_id);
            put_opt(out, *entries_read);
        }
        GroupEffect::LastIdRaised { group, last_id, entries_read } => {
            out.push(group_tag::LAST_ID_RAISED_READ);
            put_str(out, group);
            put_id(out, *last_id);
            put_opt(out, *entries_read);
        }
        GroupEffect::ConsumerCreated { group, consumer, time_ms } => {
            out.push(group_tag::CONSUMER_CREATED);
            put_str(out, group);
            put_str(out, consumer);
            put_i64(out, *time_ms);
        }
        GroupEffect::ConsumerSeen { group, consumer, time_ms } => {
            out.push(group_tag::CONSUMER_SEEN);
            put_str(out, group);
            put_str(out, consumer);
            put_i64(out, *time_ms);
        }
        GroupEffect::ConsumerDeleted { group, consumer } => {
            out.push(group_tag::CONSUMER_DELETED);
            put_str(out, group);
            put_str(out, consumer);
        }
        GroupEffect::Delivered { group, consumer, id, time_ms, entries_read, noack } => {
            out.push(group_tag::DELIVERED);
            put_str(out, group);
            put_str(out, consumer);
            put_id(out, *id);
            put_i64(out, *time_ms);
            put_opt(out, *entries_read);
            out.push(u8::from(*noack));
        }
        GroupEffect::Redelivered { group, consumer, id, time_ms, count } => {
            out.push(group_tag::REDELIVERED_TO);
            put_str(out, group);
            put_str(out, consumer);
            put_id(out, *id);
            put_i64(out, *time_ms);
            put_varint(out, *count);
        }
        GroupEffect::Claimed { group, consumer, id, time_ms, count, active_ms } => {
            out.push(group_tag::CLAIMED);
            put_str(out, group);
            put_str(out, consumer);
            put_id(out, *id);
            put_i64(out, *time_ms);
            put_varint(out, *count);
            put_i64(out, *active_ms);
        }
        GroupEffect::Nacked { group, id, count } => {
            out.push(group_tag::NACKED);
            put_str(out, group);
            put_id(out, *id);
            put_varint(out, *count);
        }
        GroupEffect::Acked { group, id } => {
            out.push(group_tag::ACKED);
            put_str(out, group);
            put_id(out, *id);
        }
        GroupEffect::PolicySet { group, settings, time_ms } => {
            out.push(group_tag::POLICY_SET_AT);
            put_str(out, group);
            put_settings(out, settings);
            put_i64(out, *time_ms);
        }
        GroupEffect::PolicyRestored { group, state } => {
            out.push(group_tag::POLICY_RESTORED_3);
            put_str(out, group);
            put_varint(out, Counters::LEN as u64);
            for n in state.counters.to_array() {
                put_varint(out, n);
            }
            for list in [&state.delayed, &state.first_delivery] {
                put_varint(out, list.len() as u64);
                for (id, at) in list {
                    put_id(out, *id);
                    put_i64(out, *at);
                }
            }
            put_varint(out, state.deferred.len() as u64);
            for (id, key) in &state.deferred {
                put_id(out, *id);
                put_opt_str(out, key.as_ref());
            }
            put_i64(out, state.group_active_ms);
            put_varint(out, state.activity.len() as u64);
            for (consumer, t) in &state.activity {
                put_str(out, consumer);
                put_i64(out, *t);
            }
        }
        GroupEffect::HandedBack { group, id, count, ready_at_ms, why } => {
            out.push(group_tag::HANDED_BACK);
            put_str(out, group);
            put_id(out, *id);
            put_varint(out, *count);
            put_i64(out, *ready_at_ms);
            out.push(why.code());
        }
        GroupEffect::DeadLettered { group, id } => {
            out.push(group_tag::DEAD_LETTERED);
            put_str(out, group);
            put_id(out, *id);
        }
        GroupEffect::Touched { group, consumer, id, time_ms, count } => {
            out.push(group_tag::TOUCHED);
            put_str(out, group);
            put_str(out, consumer);
            put_id(out, *id);
            put_i64(out, *time_ms);
            put_varint(out, *count);
        }
        GroupEffect::Deferred { group, id, key } => {
            out.push(group_tag::DEFERRED);
            put_str(out, group);
            put_id(out, *id);
            put_str(out, key);
        }
        GroupEffect::DeferredDropped { group, id } => {
            out.push(group_tag::DEFERRED_DROPPED);
            put_str(out, group);
            put_id(out, *id);
        }
        GroupEffect::ConsumerExpired { group, consumer } => {
            out.push(group_tag::CONSUMER_EXPIRED);
            put_str(out, group);
            put_str(out, consumer);
        }
    }
}

/// A flag byte (0: none, 1: some) then the string ([`Cursor::opt_str`]' inverse).
fn put_opt_str(out: &mut Vec<u8>, v: Option<&Bytes>) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            put_str(out, v);
        }
    }
}

/// Policy settings: `version:u8 maxdeliver:varint deadletter:opt-str ackwait:varint
/// n:varint backoff:varint{n}`, then from version 2 `maxackpending:varint
/// maxackpendingconsumer:varint`, from version 3 `orderby:opt-str`, from version 4
/// `consumeridle:varint groupidle:varint`; a later version appends fields.
fn put_settings(out: &mut Vec<u8>, s: &Settings) {
    out.push(5);
    put_varint(out, s.max_deliver);
    put_opt_str(out, s.dead_letter.as_ref());
    put_varint(out, s.ack_wait_ms);
    put_varint(out, s.backoff_ms.len() as u64);
    for d in &s.backoff_ms {
        put_varint(out, *d);
    }
    put_varint(out, s.max_ack_pending);
    put_varint(out, s.max_ack_pending_consumer);
    put_opt_str(out, s.order_by.as_ref());
    put_varint(out, s.consumer_idle_ms);
    put_varint(out, s.group_idle_ms);
    out.push(u8::from(s.release_on_close));
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

struct Cursor {
    buf: Bytes,
}

impl Cursor {
    fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.first().ok_or(DecodeError("record ends early"))?;
        bytes::Buf::advance(&mut self.buf, 1);
        Ok(b)
    }

    fn bytes(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError("record ends early"));
        }
        Ok(self.buf.split_to(n))
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut pos = 0;
        let v = codec::get_varint_u64(&self.buf, &mut pos).ok_or(DecodeError("bad or truncated varint"))?;
        bytes::Buf::advance(&mut self.buf, pos);
        Ok(v)
    }

    fn len(&mut self) -> Result<usize, DecodeError> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| DecodeError("length out of range"))?;
        if n > self.buf.len() {
            return Err(DecodeError("length exceeds the record"));
        }
        Ok(n)
    }

    /// A string: a slice of the record, no copy.
    fn str(&mut self) -> Result<Bytes, DecodeError> {
        let n = self.len()?;
        self.bytes(n)
    }

    /// A flag byte (0: none) then a string.
    fn opt_str(&mut self) -> Result<Option<Bytes>, DecodeError> {
        Ok(match self.u8()? {
            0 => None,
            _ => Some(self.str()?),
        })
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(&b);
        Ok(i64::from_le_bytes(a))
    }

    fn id(&mut self) -> Result<StreamId, DecodeError> {
        Ok(StreamId { ms: self.varint()?, seq: self.varint()? })
    }

    fn opt(&mut self) -> Result<Option<u64>, DecodeError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.varint()?)),
            _ => Err(DecodeError("bad optional marker")),
        }
    }

    fn db(&mut self) -> Result<usize, DecodeError> {
        usize::try_from(self.varint()?).map_err(|_| DecodeError("database index out of range"))
    }
}

/// Decode a record body: its time and effects.
pub fn decode_record(body: &[u8]) -> Result<(i64, Vec<Effect>), DecodeError> {
    decode_record_shared(Bytes::copy_from_slice(body))
}

/// [`decode_record`] over a shared buffer: the effects' strings are slices of it (replay
/// of a whole file copies nothing per argument).
pub fn decode_record_shared(body: Bytes) -> Result<(i64, Vec<Effect>), DecodeError> {
    let mut c = Cursor { buf: body };
    let time = c.i64()?;
    let n = c.varint()?;
    let mut effects = Vec::with_capacity(usize::try_from(n.min(1024)).unwrap_or(0));
    for _ in 0..n {
        effects.push(decode_effect(&mut c)?);
    }
    if !c.buf.is_empty() {
        return Err(DecodeError("trailing bytes after the last effect"));
    }
    Ok((time, effects))
}

fn decode_effect(c: &mut Cursor) -> Result<Effect, DecodeError> {
    match c.u8()? {
        tag::COMMAND => {
            let db = c.db()?;
            let argc = c.varint()?;
            let mut args = Vec::with_capacity(usize::try_from(argc.min(1024)).unwrap_or(0));
            for _ in 0..argc {
                args.push(c.str()?);
            }
            if args.is_empty() {
                return Err(DecodeError("command effect without a command"));
            }
            Ok(Effect::Command { db, args })
        }
        tag::GROUP => {
            let db = c.db()?;
            let key = c.str()?;
            let effect = decode_group(c)?;
            Ok(Effect::Group { db, key, effect })
        }
        tag::TRIM_IDS => {
            let db = c.db()?;
            let key = c.str()?;
            let delref = c.u8()? != 0;
            let n = c.varint()?;
            let mut ids = Vec::with_capacity(usize::try_from(n.min(4096)).unwrap_or(0));
            for _ in 0..n {
                ids.push(c.id()?);
            }
            Ok(Effect::TrimIds { db, key, ids, delref })
        }
        tag::LIBRARY => Ok(Effect::Library { code: c.str()? }),
        tag::LIBRARY_DELETED => Ok(Effect::LibraryDeleted { name: c.str()? }),
        tag::LIBRARIES_FLUSHED => Ok(Effect::LibrariesFlushed),
        _ => Err(DecodeError("unknown effect type")),
    }
}

fn decode_group(c: &mut Cursor) -> Result<GroupEffect, DecodeError> {
    let tag = c.u8()?;
    let group = c.str()?;
    Ok(match tag {
        group_tag::GROUP_CREATED => GroupEffect::GroupCreated { group, last_id: c.id()?, entries_read: c.opt()? },
        group_tag::GROUP_DESTROYED => GroupEffect::GroupDestroyed { group },
        group_tag::SET_ID => GroupEffect::SetId { group, last_id: c.id()?, entries_read: c.opt()? },
        group_tag::LAST_ID_RAISED => GroupEffect::LastIdRaised { group, last_id: c.id()?, entries_read: None },
        group_tag::LAST_ID_RAISED_READ => GroupEffect::LastIdRaised { group, last_id: c.id()?, entries_read: c.opt()? },
        group_tag::CONSUMER_CREATED => GroupEffect::ConsumerCreated { group, consumer: c.str()?, time_ms: c.i64()? },
        group_tag::CONSUMER_SEEN => GroupEffect::ConsumerSeen { group, consumer: c.str()?, time_ms: c.i64()? },
        group_tag::CONSUMER_DELETED => GroupEffect::ConsumerDeleted { group, consumer: c.str()? },
        group_tag::DELIVERED => GroupEffect::Delivered {
            group,
            consumer: c.str()?,
            id: c.id()?,
            time_ms: c.i64()?,
            entries_read: c.opt()?,
            noack: c.u8()? != 0,
        },
        group_tag::REDELIVERED => GroupEffect::Redelivered {
            group,
            consumer: Bytes::new(),
            id: c.id()?,
            time_ms: c.i64()?,
            count: c.varint()?,
        },
        group_tag::REDELIVERED_TO => {
            GroupEffect::Redelivered { group, consumer: c.str()?, id: c.id()?, time_ms: c.i64()?, count: c.varint()? }
        }
        group_tag::CLAIMED => GroupEffect::Claimed {
            group,
            consumer: c.str()?,
            id: c.id()?,
            time_ms: c.i64()?,
            count: c.varint()?,
            active_ms: c.i64()?,
        },
        group_tag::NACKED => GroupEffect::Nacked { group, id: c.id()?, count: c.varint()? },
        group_tag::ACKED => GroupEffect::Acked { group, id: c.id()? },
        group_tag::POLICY_SET => GroupEffect::PolicySet { group, settings: settings(c)?, time_ms: 0 },
        group_tag::POLICY_SET_AT => GroupEffect::PolicySet { group, settings: settings(c)?, time_ms: c.i64()? },
        tag @ (group_tag::POLICY_RESTORED | group_tag::POLICY_RESTORED_2 | group_tag::POLICY_RESTORED_3) => {
            let newer = tag != group_tag::POLICY_RESTORED;
            let held = match tag {
                group_tag::POLICY_RESTORED => 7,
                group_tag::POLICY_RESTORED_2 => 8,
                _ => c.len()?,
            };
            let mut counters = [0u64; Counters::LEN];
            for i in 0..held {
                // Counters a later version added are skipped.
                let n = c.varint()?;
                if let Some(slot) = counters.get_mut(i) {
                    *slot = n;
                }
            }
            let mut lists = [Vec::new(), Vec::new()];
            for list in &mut lists {
                let n = c.len()?;
                for _ in 0..n {
                    list.push((c.id()?, c.i64()?));
                }
            }
            let [delayed, first_delivery] = lists;
            let mut deferred = Vec::new();
            let mut group_active_ms = 0;
            let mut activity = Vec::new();
            if newer {
                let n = c.len()?;
                for _ in 0..n {
                    let id = c.id()?;
                    deferred.push((id, c.opt_str()?));
                }
                group_active_ms = c.i64()?;
                let n = c.len()?;
                for _ in 0..n {
                    let consumer = c.str()?;
                    activity.push((consumer, c.i64()?));
                }
            }
            GroupEffect::PolicyRestored {
                group,
                state: PolicyState {
                    counters: Counters::from_array(counters),
                    delayed,
                    first_delivery,
                    deferred,
                    group_active_ms,
                    activity,
                },
            }
        }
        group_tag::HANDED_BACK => GroupEffect::HandedBack {
            group,
            id: c.id()?,
            count: c.varint()?,
            ready_at_ms: c.i64()?,
            why: Release::from_code(c.u8()?),
        },
        group_tag::DEAD_LETTERED => GroupEffect::DeadLettered { group, id: c.id()? },
        group_tag::TOUCHED => {
            GroupEffect::Touched { group, consumer: c.str()?, id: c.id()?, time_ms: c.i64()?, count: c.varint()? }
        }
        group_tag::DEFERRED => GroupEffect::Deferred { group, id: c.id()?, key: c.str()? },
        group_tag::DEFERRED_DROPPED => GroupEffect::DeferredDropped { group, id: c.id()? },
        group_tag::CONSUMER_EXPIRED => GroupEffect::ConsumerExpired { group, consumer: c.str()? },
        _ => return Err(DecodeError("unknown group effect type")),
    })
}

/// [`put_settings`]' inverse.
fn settings(c: &mut Cursor) -> Result<Settings, DecodeError> {
    let version = c.u8()?;
    if !(1..=5).contains(&version) {
        return Err(DecodeError("unknown policy settings version"));
    }
    let max_deliver = c.varint()?;
    let dead_letter = c.opt_str()?;
    let ack_wait_ms = c.varint()?;
    let n = c.len()?;
    let mut backoff_ms = Vec::new();
    for _ in 0..n {
        backoff_ms.push(c.varint()?);
    }
    let (max_ack_pending, max_ack_pending_consumer) = match version {
        1 => (0, 0),
        _ => (c.varint()?, c.varint()?),
    };
    let order_by = if version >= 3 { c.opt_str()? } else { None };
    let (consumer_idle_ms, group_idle_ms) = if version >= 4 { (c.varint()?, c.varint()?) } else { (0, 0) };
    let release_on_close = version >= 5 && c.u8()? != 0;
    Ok(Settings {
        max_deliver,
        dead_letter,
        ack_wait_ms,
        backoff_ms,
        max_ack_pending,
        max_ack_pending_consumer,
        order_by,
        consumer_idle_ms,
        group_idle_ms,
        release_on_close,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id() -> impl Strategy<Value = StreamId> {
        (any::<u64>(), any::<u64>()).prop_map(|(ms, seq)| StreamId { ms, seq })
    }

    fn bytes() -> impl Strategy<Value = Bytes> {
        proptest::collection::vec(any::<u8>(), 0..12).prop_map(Bytes::from)
    }

    fn group_effect() -> impl Strategy<Value = GroupEffect> {
        prop_oneof![
            (bytes(), id(), any::<Option<u64>>())
                .prop_map(|(group, last_id, entries_read)| GroupEffect::GroupCreated { group, last_id, entries_read }),
            bytes().prop_map(|group| GroupEffect::GroupDestroyed { group }),
            (bytes(), id(), any::<Option<u64>>()).prop_map(|(group, last_id, entries_read)| GroupEffect::SetId {
                group,
                last_id,
                entries_read
            }),
            (bytes(), id(), any::<Option<u64>>())
                .prop_map(|(group, last_id, entries_read)| GroupEffect::LastIdRaised { group, last_id, entries_read }),
            (bytes(), bytes(), any::<i64>()).prop_map(|(group, consumer, time_ms)| GroupEffect::ConsumerCreated {
                group,
                consumer,
                time_ms
            }),
            (bytes(), bytes(), any::<i64>()).prop_map(|(group, consumer, time_ms)| GroupEffect::ConsumerSeen {
                group,
                consumer,
                time_ms
            }),
            (bytes(), bytes()).prop_map(|(group, consumer)| GroupEffect::ConsumerDeleted { group, consumer }),
            (bytes(), bytes(), id(), any::<i64>(), any::<Option<u64>>(), any::<bool>()).prop_map(
                |(group, consumer, id, time_ms, entries_read, noack)| GroupEffect::Delivered {
                    group,
                    consumer,
                    id,
                    time_ms,
                    entries_read,
                    noack
                }
            ),
            (bytes(), bytes(), id(), any::<i64>(), any::<u64>()).prop_map(|(group, consumer, id, time_ms, count)| {
                GroupEffect::Redelivered { group, consumer, id, time_ms, count }
            }),
            (bytes(), bytes(), id(), any::<i64>(), any::<u64>(), any::<i64>()).prop_map(
                |(group, consumer, id, time_ms, count, active_ms)| GroupEffect::Claimed {
                    group,
                    consumer,
                    id,
                    time_ms,
                    count,
                    active_ms
                }
            ),
            (bytes(), id(), any::<u64>()).prop_map(|(group, id, count)| GroupEffect::Nacked { group, id, count }),
            (bytes(), id()).prop_map(|(group, id)| GroupEffect::Acked { group, id }),
            (
                bytes(),
                any::<u64>(),
                proptest::option::of(bytes()),
                any::<u64>(),
                proptest::collection::vec(any::<u64>(), 0..4),
                any::<(u64, u64)>(),
                proptest::option::of(bytes()),
                any::<(u64, u64, i64, bool)>()
            )
                .prop_map(
                    |(
                        group,
                        max_deliver,
                        dead_letter,
                        ack_wait_ms,
                        backoff_ms,
                        (cap, cap_c),
                        order_by,
                        (ci, gi, t, release_on_close),
                    )| {
                        GroupEffect::PolicySet {
                            group,
                            settings: Settings {
                                max_deliver,
                                dead_letter,
                                ack_wait_ms,
                                backoff_ms,
                                max_ack_pending: cap,
                                max_ack_pending_consumer: cap_c,
                                order_by,
                                consumer_idle_ms: ci,
                                group_idle_ms: gi,
                                release_on_close,
                            },
                            time_ms: t,
                        }
                    }
                ),
            (
                bytes(),
                any::<[u64; Counters::LEN]>(),
                proptest::collection::vec((id(), any::<i64>()), 0..3),
                proptest::collection::vec((id(), any::<i64>()), 0..3),
                proptest::collection::vec((id(), proptest::option::of(bytes())), 0..3),
                (any::<i64>(), proptest::collection::vec((bytes(), any::<i64>()), 0..3))
            )
                .prop_map(
                    |(group, counters, delayed, first_delivery, deferred, (group_active_ms, activity))| {
                        GroupEffect::PolicyRestored {
                            group,
                            state: PolicyState {
                                counters: Counters::from_array(counters),
                                delayed,
                                first_delivery,
                                deferred,
                                group_active_ms,
                                activity,
                            },
                        }
                    }
                ),
            (bytes(), id(), any::<u64>(), any::<i64>(), 0u8..4).prop_map(|(group, id, count, ready_at_ms, why)| {
                GroupEffect::HandedBack { group, id, count, ready_at_ms, why: Release::from_code(why) }
            }),
            (bytes(), id()).prop_map(|(group, id)| GroupEffect::DeadLettered { group, id }),
            (bytes(), bytes(), id(), any::<i64>(), any::<u64>()).prop_map(|(group, consumer, id, time_ms, count)| {
                GroupEffect::Touched { group, consumer, id, time_ms, count }
            }),
            (bytes(), id(), bytes()).prop_map(|(group, id, key)| GroupEffect::Deferred { group, id, key }),
            (bytes(), id()).prop_map(|(group, id)| GroupEffect::DeferredDropped { group, id }),
            (bytes(), bytes()).prop_map(|(group, consumer)| GroupEffect::ConsumerExpired { group, consumer }),
        ]
    }

    fn effect() -> impl Strategy<Value = Effect> {
        prop_oneof![
            (0usize..16, proptest::collection::vec(bytes(), 1..5)).prop_map(|(db, args)| Effect::Command { db, args }),
            (0usize..16, bytes(), group_effect()).prop_map(|(db, key, effect)| Effect::Group { db, key, effect }),
            (0usize..16, bytes(), proptest::collection::vec(id(), 0..5), any::<bool>())
                .prop_map(|(db, key, ids, delref)| Effect::TrimIds { db, key, ids, delref }),
            bytes().prop_map(|code| Effect::Library { code }),
            bytes().prop_map(|name| Effect::LibraryDeleted { name }),
            Just(Effect::LibrariesFlushed),
        ]
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(time in any::<i64>(), effects in proptest::collection::vec(effect(), 0..6)) {
            let mut body = Vec::new();
            encode_record(&mut body, time, &effects);
            prop_assert_eq!(decode_record(&body).unwrap(), (time, effects));
        }

        #[test]
        fn truncated_bodies_fail_cleanly(effects in proptest::collection::vec(effect(), 1..4), cut in any::<prop::sample::Index>()) {
            let mut body = Vec::new();
            encode_record(&mut body, 7, &effects);
            let cut = cut.index(body.len());
            prop_assert!(decode_record(&body[..cut]).is_err());
        }

        #[test]
        fn commands_in_place_read_what_decode_reads(effects in proptest::collection::vec(effect(), 0..6)) {
            let mut buf = EffectBuf::default();
            for e in &effects {
                buf.push(e);
            }
            let all_commands = effects.iter().all(|e| matches!(e, Effect::Command { .. }));
            match buf.commands_in_place() {
                None => prop_assert!(!all_commands, "{:?}", effects),
                Some(read) => {
                    prop_assert!(all_commands);
                    prop_assert_eq!(read.remaining(), effects.len());
                    let read: Vec<Effect> = read
                        .map(|(db, args)| Effect::Command { db, args: args.map(Bytes::copy_from_slice).collect() })
                        .collect();
                    prop_assert_eq!(read, effects);
                }
            }
        }
    }
}
