//! The effect journal: what every command *did* ([`rill_engine::effect`]), gathered per unit
//! (a command, an EXEC, a served blocked client, an expiry sweep) and, when the unit closes,
//! handed to every sink at once: the log (`aof/`) and the replication backlog
//! (`replication/`), or a [`MemorySink`] in tests.
//!
//! ```text
//!  handler ──emit──► CallCtx.effects ─┐
//!  expiry ──DEL──────────────────────┼─► Journal.unit ──commit──► the log: a LogSink (offset a reply waits for)
//!  logged as itself ─────────────────┘                       └──► other sinks: Sink
//! ```
//!
//! Every sink is reached through this journal and answers how far it has got through one
//! interface, [`Progress`]: the log how many bytes of the units are safe, a replication sink
//! how many replicas hold them. A reply waits on the log's answer; `WAITAOF` and `WAIT` ask
//! the same question of the log and of the replicas. The journal knows sinks only by these
//! traits: it imports no sink.
//!
//! Effects are recorded whenever any sink exists, whatever `appendonly` says: a replica must
//! get the effects of a primary that keeps no log. With no sink, handlers are told not to build
//! effects ([`Journal::recording`]), and a closed unit is dropped.

use bytes::Bytes;
use rill_engine::effect::EffectBuf;
use std::sync::Arc;

/// How far a sink has got with the units committed to it, in the sink's own count (the log
/// counts bytes of its records; a replication stream bytes of Redis' protocol).
pub trait Progress {
    /// Position after the last unit the sink took.
    fn end(&self) -> u64;
    /// How many copies hold everything up to `position` where a crash of this process does
    /// not reach them: the log one once it is fsynced (`WAITAOF`'s local count), a
    /// replication sink one per replica that acknowledged it (`WAIT`).
    fn copies_at(&self, position: u64) -> usize;
}

/// Where committed units go besides the log.
pub trait Sink: Progress + Send + std::fmt::Debug {
    /// Take one committed unit: its effects (encoded, `rill_engine::effect`) and the time it
    /// closed. Called under the state lock, in execution order; it must not block.
    fn commit(&mut self, time_ms: i64, unit: &EffectBuf);

    /// Take one committed unit whose commands a replication stream sends one by one, not as
    /// a transaction (see [`Journal::send_apart`]). Any other sink takes it as a unit.
    fn commit_apart(&mut self, time_ms: i64, unit: &EffectBuf) {
        self.commit(time_ms, unit);
    }

    /// Take a command that belongs to a replication stream but to no log: `PING` (the
    /// primary's keep-alive), `REPLCONF GETACK *`, `PUBLISH`. Outside any database (no
    /// `SELECT` before it). A sink that is no replication stream ignores it.
    fn stream_only(&mut self, _args: &[Bytes]) {}

    /// A new reader starts at the current end of the stream with nothing selected (a replica
    /// that loaded a snapshot): the next unit must say its database again.
    fn new_reader(&mut self) {}

    /// This server became a replica (`true`) or a primary again: a replica's stream is its
    /// primary's, relayed byte for byte ([`Sink::relay`]) so that its own replicas and a
    /// failover keep the primary's offsets; the units it applies then go to the log only.
    fn set_relaying(&mut self, _relaying: bool) {}

    /// Bytes of the primary's stream, as received (a replica's stream for its own replicas).
    fn relay(&mut self, _bytes: &[u8]) {}

    /// rill's record of the primary's next unit, as received (a rill primary's `RILL.UNIT`):
    /// its `len` bytes are relayed next.
    fn relay_record(&mut self, _len: u64, _body: &Bytes) {}

    /// Whether the sink is done (a replication backlog that was freed): the journal drops it
    /// at [`Journal::drop_closed_sinks`].
    fn closed(&self) -> bool {
        false
    }
}

/// The sink replies wait for: the log (`aof::Log`). Shared with its writer threads, hence
/// `&self`.
pub trait LogSink: Progress + Send + Sync + std::fmt::Debug {
    /// Queue one committed unit as one record at time `time_ms`; returns the offset the record
    /// ends at. Called under the state lock, in execution order; it must not block.
    fn append(&self, time_ms: i64, unit: &EffectBuf) -> u64;
    /// The offset up to which a reply may be sent: what the fsync policy promises.
    fn safe_offset(&self) -> u64;
    /// Why writes are refused (`-MISCONF`), if they are: the last write or fsync failed, or a
    /// log just turned on could not write its base.
    fn refusal(&self) -> Option<String>;
    /// Whether the log failed: nothing more may be acknowledged.
    fn failed(&self) -> bool;
    /// Whether a reply must wait for an fsync (`appendfsync always`), not only for a write.
    fn fsync_before_reply(&self) -> bool;
}

/// The most a unit buffer keeps between units: a bigger one (a script or EXEC of many writes,
/// a SADD of 100,000 members) is freed once committed rather than held for the next unit,
/// which is almost always a few hundred bytes (a megabyte kept here was most of an idle
/// server's memory after one big write).
const KEEP_BUF_BYTES: usize = 64 << 10;

/// The journal: the open unit and the sinks committed units go to.
#[derive(Debug)]
pub struct Journal<L> {
    /// The log; `None` with `appendonly no`. Replies wait for it (`Journal::appended`).
    log: Option<Arc<L>>,
    /// The other sinks.
    sinks: Vec<Box<dyn Sink>>,
    /// Effects of the open unit, encoded, not yet framed.
    unit: EffectBuf,
    /// An empty buffer, with the capacity earlier commands grew, for the next command's
    /// explicit effects: lent out by [`Journal::lend_buf`], so that emitting an effect does
    /// not allocate.
    spare: EffectBuf,
    /// Log offset after the last unit the log took.
    appended: u64,
    /// The open unit as the log gets it, when it holds a command only the other sinks get
    /// ([`Journal::push_unlogged_command`]); `None` when the log gets `unit` as it is.
    log_unit: Option<EffectBuf>,
    /// The open unit goes to the replication streams command by command ([`Journal::send_apart`]).
    apart: bool,
}

impl<L> Default for Journal<L> {
    fn default() -> Self {
        Journal {
            log: None,
            sinks: Vec::new(),
            unit: EffectBuf::default(),
            spare: EffectBuf::default(),
            appended: 0,
            log_unit: None,
            apart: false,
        }
    }
}

impl<L: LogSink> Journal<L> {
    /// Put `log` in place of the current log (start-up, CONFIG SET appendonly). Offsets count
    /// the bytes of one log: a new log starts from its own end, not from where the old one
    /// stopped, or every reply would wait for an offset the new log reaches much later (or,
    /// once the old log is shut down, never).
    pub fn set_log(&mut self, log: Option<Arc<L>>) {
        self.appended = log.as_ref().map_or(0, |l| l.end());
        self.log = log;
    }

    /// The log, if one is on: for its owner (`aof/`: rotation, rewrite, shutdown) and its
    /// status (INFO). Units reach it only through [`Journal::commit`].
    pub fn log(&self) -> Option<&Arc<L>> {
        self.log.as_ref()
    }

    /// The log offset after the last unit the log took.
    pub fn appended(&self) -> u64 {
        self.appended
    }

    /// What the replies of a batch must wait for, given the log offset before it
    /// ([`Journal::appended`]): the batch's own records, and any record before them not yet
    /// safe (a reader must not see, and act on, a write a crash could still undo). While the
    /// log is failing, a batch that wrote nothing is answered at once (writes are refused).
    pub fn reply_wait(&self, appended_before: u64) -> Option<(Arc<L>, u64)> {
        let log = self.log.as_ref()?;
        let waits = self.appended != appended_before || (!log.failed() && self.appended > log.safe_offset());
        waits.then(|| (log.clone(), self.appended))
    }

    /// Why writes are refused now (`-MISCONF`), if they are.
    pub fn refusal(&self) -> Option<String> {
        self.log.as_ref().and_then(|l| l.refusal())
    }

    /// How many copies outside this process's memory hold the log up to `offset`: 1 once it
    /// is fsynced, else 0 (and 0 with no log). `WAITAOF`'s local count.
    pub fn log_copies_at(&self, offset: u64) -> usize {
        self.log.as_ref().map_or(0, |l| l.copies_at(offset))
    }

    /// Add a sink: every unit committed from now on goes to it too.
    pub fn add_sink(&mut self, sink: Box<dyn Sink>) {
        self.sinks.push(sink);
    }

    /// Drop the sinks that say they are done ([`Sink::closed`]).
    pub fn drop_closed_sinks(&mut self) {
        self.sinks.retain(|s| !s.closed());
    }

    /// Whether effects are being recorded: some sink exists.
    pub fn recording(&self) -> bool {
        self.log.is_some() || !self.sinks.is_empty()
    }

    /// An empty effect buffer for a command to write into (give it back with
    /// [`Journal::return_buf`]).
    pub fn lend_buf(&mut self) -> EffectBuf {
        std::mem::take(&mut self.spare)
    }

    /// Take back a buffer from [`Journal::lend_buf`] (emptied here).
    pub fn return_buf(&mut self, mut buf: EffectBuf) {
        buf.clear_to(KEEP_BUF_BYTES);
        self.spare = buf;
    }

    /// Add a command's explicit effects to the open unit.
    pub fn push(&mut self, effects: &mut EffectBuf) {
        if let (Some(log_unit), false) = (self.log_unit.as_mut(), effects.is_empty()) {
            log_unit.append(&mut effects.clone());
        }
        if self.recording() && !effects.is_empty() {
            if self.unit.is_empty() {
                // The common case, one command per unit: take its buffer instead of copying
                // it (the caller keeps the emptied one, with its capacity).
                std::mem::swap(&mut self.unit, effects);
                effects.clear();
            } else {
                self.unit.append(effects);
            }
        }
    }

    /// Add an effect a server command made (FUNCTION LOAD and kin: changes outside the
    /// keyspace, which no engine command records).
    pub fn push_effect(&mut self, effect: &rill_engine::effect::Effect) {
        if self.recording() {
            self.unit.push(effect);
            if let Some(log_unit) = self.log_unit.as_mut() {
                log_unit.push(effect);
            }
        }
    }

    /// Add a command effect (a write logged as itself).
    pub fn push_command(&mut self, db: usize, args: &[Bytes]) {
        if self.recording() {
            self.unit.command(db, args.iter().map(|a| &a[..]));
            if let Some(log_unit) = self.log_unit.as_mut() {
                log_unit.command(db, args.iter().map(|a| &a[..]));
            }
        }
    }

    /// Add a command that every sink but the log gets: one that changes nothing a replay
    /// must redo, but that a replica must run (PUBLISH, which Redis propagates to replicas
    /// and not to its AOF: `PROPAGATE_REPL`). It keeps its place in the unit for those sinks.
    pub fn push_unlogged_command(&mut self, db: usize, args: &[Bytes]) {
        if self.sinks.is_empty() {
            return;
        }
        if self.log_unit.is_none() && self.log.is_some() {
            self.log_unit = Some(self.unit.clone());
        }
        self.unit.command(db, args.iter().map(|a| &a[..]));
    }

    /// Add the deletion of an expired key.
    pub fn push_del(&mut self, db: usize, key: &[u8]) {
        if self.recording() {
            self.unit.del(db, key);
            if let Some(log_unit) = self.log_unit.as_mut() {
                log_unit.del(db, key);
            }
        }
    }

    /// Add the deletion of a key the server removed (expired, evicted): `UNLINK` if `unlink`
    /// (a `lazyfree-lazy-*` setting), as Redis logs and propagates it then; `DEL` otherwise.
    pub fn push_deletion(&mut self, db: usize, key: &[u8], unlink: bool) {
        if !unlink {
            self.push_del(db, key);
        } else if self.recording() {
            let args = [&b"UNLINK"[..], key];
            self.unit.command(db, args.into_iter());
            if let Some(log_unit) = self.log_unit.as_mut() {
                log_unit.command(db, args.into_iter());
            }
        }
    }

    /// Hand a command to the replication streams only (see [`Sink::stream_only`]), after the
    /// units committed so far.
    pub fn stream_only(&mut self, args: &[Bytes]) {
        for sink in &mut self.sinks {
            sink.stream_only(args);
        }
    }

    /// See [`Sink::set_relaying`].
    pub fn set_relaying(&mut self, relaying: bool) {
        for sink in &mut self.sinks {
            sink.set_relaying(relaying);
        }
    }

    /// Hand bytes of the primary's stream to the replication streams (see [`Sink::relay`]).
    pub fn relay(&mut self, bytes: &[u8]) {
        for sink in &mut self.sinks {
            sink.relay(bytes);
        }
    }

    /// Hand rill's record of the primary's next unit to the replication streams (see
    /// [`Sink::relay_record`]).
    pub fn relay_record(&mut self, len: u64, body: &Bytes) {
        for sink in &mut self.sinks {
            sink.relay_record(len, body);
        }
    }

    /// Tell every stream a reader starts at its current end (see [`Sink::new_reader`]).
    pub fn new_reader(&mut self) {
        for sink in &mut self.sinks {
            sink.new_reader();
        }
    }

    /// The open unit, if it holds more than one command, reaches the replication streams as
    /// separate commands rather than one `MULTI`/`EXEC` (a command that may delete expired
    /// keys anywhere, as Redis propagates SCAN's and RANDOMKEY's deletions). The log still
    /// takes it as one record. Lasts until the unit is committed.
    pub fn send_apart(&mut self) {
        self.apart = true;
    }

    /// Close the open unit: hand it to every sink (the log frames it as one record at time
    /// `now_ms`). Returns the log offset the unit ends at: what a reply must wait for.
    pub fn commit(&mut self, now_ms: i64) -> u64 {
        let apart = std::mem::take(&mut self.apart);
        if self.unit.is_empty() {
            return self.appended;
        }
        for sink in &mut self.sinks {
            if apart {
                sink.commit_apart(now_ms, &self.unit);
            } else {
                sink.commit(now_ms, &self.unit);
            }
        }
        let log_unit = self.log_unit.take();
        if let Some(log) = &self.log {
            let unit = log_unit.as_ref().unwrap_or(&self.unit);
            if !unit.is_empty() {
                self.appended = log.append(now_ms, unit);
            }
        }
        self.unit.clear_to(KEEP_BUF_BYTES);
        self.appended
    }
}

/// A committed unit, decoded: its time and effects.
pub type Unit = (i64, Vec<rill_engine::effect::Effect>);

/// A sink that keeps every unit in memory, decoded: for tests (of the journal, of dispatch
/// without a socket), and a model of what the replication backlog will receive.
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    /// The units committed, in order: time and effects.
    pub units: Arc<std::sync::Mutex<Vec<Unit>>>,
}

impl Progress for MemorySink {
    fn end(&self) -> u64 {
        self.units.lock().map_or(0, |u| u.len() as u64)
    }

    /// A test's memory is no copy.
    fn copies_at(&self, _position: u64) -> usize {
        0
    }
}

impl Sink for MemorySink {
    fn commit(&mut self, time_ms: i64, unit: &EffectBuf) {
        if let (Ok(effects), Ok(mut units)) = (unit.decode(), self.units.lock()) {
            units.push((time_ms, effects));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rill_engine::effect::Effect;

    /// A log type for a journal that never has one.
    #[derive(Debug)]
    struct NoLog;
    impl Progress for NoLog {
        fn end(&self) -> u64 {
            0
        }
        fn copies_at(&self, _: u64) -> usize {
            0
        }
    }
    impl LogSink for NoLog {
        fn append(&self, _: i64, _: &EffectBuf) -> u64 {
            0
        }
        fn safe_offset(&self) -> u64 {
            0
        }
        fn refusal(&self) -> Option<String> {
            None
        }
        fn failed(&self) -> bool {
            false
        }
        fn fsync_before_reply(&self) -> bool {
            false
        }
    }

    #[test]
    fn a_huge_unit_does_not_keep_its_buffers_once_committed() {
        let mut j = Journal::<NoLog>::default();
        j.add_sink(Box::new(MemorySink::default()));
        let value = Bytes::from(vec![b'v'; 1000]);
        for i in 0..3000 {
            j.push_command(
                0,
                &[Bytes::from_static(b"SADD"), Bytes::from_static(b"s"), Bytes::from(i.to_string()), value.clone()],
            );
        }
        let mut lent = j.lend_buf();
        lent.command(0, [&b"SET"[..], b"k", &vec![b'x'; 2 << 20]].into_iter());
        j.return_buf(lent);
        assert!(j.unit.capacity() > KEEP_BUF_BYTES);
        j.commit(1);
        assert!(j.unit.capacity() <= KEEP_BUF_BYTES, "{}", j.unit.capacity());
        assert!(j.spare.capacity() <= KEEP_BUF_BYTES, "{}", j.spare.capacity());
        // A small unit keeps its buffer for the next one.
        j.push_command(0, &[Bytes::from_static(b"SET"), Bytes::from_static(b"k")]);
        let kept = j.unit.capacity();
        j.commit(2);
        assert_eq!(j.unit.capacity(), kept);
    }

    #[test]
    fn units_reach_every_sink_only_when_one_exists() {
        let mut j = Journal::<NoLog>::default();
        assert!(!j.recording());
        j.push_command(0, &[Bytes::from_static(b"SET"), Bytes::from_static(b"k")]);
        assert_eq!(j.commit(5), 0, "no sink: nothing recorded");
        let sink = MemorySink::default();
        j.add_sink(Box::new(sink.clone()));
        assert!(j.recording(), "a sink other than the log turns recording on");
        j.push_del(1, b"gone");
        j.push_command(1, &[Bytes::from_static(b"SET"), Bytes::from_static(b"k")]);
        j.commit(7);
        j.commit(8); // an empty unit goes nowhere
        let units = sink.units.lock().unwrap().clone();
        let expected: Vec<Unit> = vec![(
            7,
            vec![
                Effect::del(1, Bytes::from_static(b"gone")),
                Effect::command(1, vec![Bytes::from_static(b"SET"), Bytes::from_static(b"k")]),
            ],
        )];
        assert_eq!(units, expected);
    }

    #[test]
    fn an_unlogged_command_reaches_the_other_sinks_in_its_place_and_not_the_log() {
        use crate::aof::{files::Files, FsyncPolicy, Log, LOG_MAGIC};
        let dir = std::env::temp_dir().join(format!("rill-journal-unlogged-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let files = Files::new(dir.to_str().unwrap(), "t");
        let file = files.create_incr(1).unwrap();
        let path = files.path(&files.incr_name(1));
        let log = Log::start(files, file, 1, LOG_MAGIC.len() as u64, FsyncPolicy::No).unwrap();
        let mut j = Journal::default();
        j.set_log(Some(log.clone()));
        let b = |s: &'static str| Bytes::from_static(s.as_bytes());
        let (set, publish) = (vec![b("SET"), b("k"), b("v")], vec![b("PUBLISH"), b("ch"), b("m")]);
        // Without another sink, it is recorded nowhere.
        j.push_unlogged_command(0, &publish);
        assert_eq!(j.commit(1), 0, "the log alone gets nothing of it");
        let sink = MemorySink::default();
        j.add_sink(Box::new(sink.clone()));
        // A transaction: SET, PUBLISH, SET; then a PUBLISH alone.
        j.push_command(0, &set);
        j.push_unlogged_command(0, &publish);
        j.push_del(0, b"gone");
        let after = j.commit(2);
        j.push_unlogged_command(0, &publish);
        assert_eq!(j.commit(3), after, "a unit of unlogged commands only adds nothing to the log");
        let units = sink.units.lock().unwrap().clone();
        let expected: Vec<Unit> = vec![
            (2, vec![Effect::command(0, set.clone()), Effect::command(0, publish.clone()), Effect::del(0, b("gone"))]),
            (3, vec![Effect::command(0, publish.clone())]),
        ];
        assert_eq!(units, expected);
        assert!(log.write_through(after), "the log takes the unit");
        log.shutdown();
        let mut records = crate::aof::check::Records::new(Bytes::from(std::fs::read(&path).unwrap()));
        let mut logged = Vec::new();
        while let Some((_, time, effects)) = records.next_record() {
            logged.push((time, effects));
        }
        assert_eq!(logged, vec![(2, vec![Effect::command(0, set), Effect::del(0, b("gone"))])]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
