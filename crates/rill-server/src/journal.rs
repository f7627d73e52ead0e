//! The effect journal: what every command *did* ([`rill_engine::effect`]), gathered per unit
//! (a command, an EXEC, a served blocked client, an expiry sweep) and, when the unit closes,
//! handed to every sink at once: the log writer (`aof/`) now, the replication backlog next.
//!
//! ```text
//!  handler ──emit──► CallCtx.effects ─┐
//!  expiry ──DEL──────────────────────┼─► Journal.unit ──commit──► log (offset a reply waits for)
//!  logged as itself ─────────────────┘                       └──► other sinks
//! ```
//!
//! Effects are recorded whenever any sink exists, whatever `appendonly` says: a replica must
//! get the effects of a primary that keeps no log. With no sink, handlers are told not to build
//! effects ([`Journal::recording`]), and a closed unit is dropped.

use crate::aof::Log;
use bytes::Bytes;
use rill_engine::effect::{encode_record_buf, EffectBuf};
use std::sync::Arc;

/// Where committed units go besides the log.
pub trait Sink: Send + std::fmt::Debug {
    /// Take one committed unit: its effects (encoded, `rill_engine::effect`) and the time it
    /// closed. Called under the state lock, in execution order; it must not block.
    fn commit(&mut self, time_ms: i64, unit: &EffectBuf);
}

/// The journal: the open unit and the sinks committed units go to.
#[derive(Debug, Default)]
pub struct Journal {
    /// The log writer; `None` with `appendonly no`. Replies wait for it (`Journal::appended`).
    pub log: Option<Arc<Log>>,
    /// The other sinks.
    sinks: Vec<Box<dyn Sink>>,
    /// Effects of the open unit, encoded, not yet framed.
    unit: EffectBuf,
    /// An empty buffer, with the capacity earlier commands grew, for the next command's
    /// explicit effects: lent out by [`Journal::lend_buf`], so that emitting an effect does
    /// not allocate.
    spare: EffectBuf,
    /// Log offset after the last unit the log took.
    pub appended: u64,
    /// The open unit as the log gets it, when it holds a command only the other sinks get
    /// ([`Journal::push_unlogged_command`]); `None` when the log gets `unit` as it is.
    log_unit: Option<EffectBuf>,
}

impl Journal {
    /// Put `log` in place of the current log (start-up, CONFIG SET appendonly). Offsets count
    /// the bytes of one log: a new log starts from its own end, not from where the old one
    /// stopped, or every reply would wait for an offset the new log reaches much later (or,
    /// once the old log is shut down, never).
    pub fn set_log(&mut self, log: Option<Arc<Log>>) {
        self.appended = log.as_ref().map_or(0, |l| l.end_offset());
        self.log = log;
    }

    /// Add a sink: every unit committed from now on goes to it too.
    pub fn add_sink(&mut self, sink: Box<dyn Sink>) {
        self.sinks.push(sink);
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
        buf.clear();
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

    /// Add a command logged as itself.
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

    /// Close the open unit: hand it to every sink (the log frames it as one record at time
    /// `now_ms`). Returns the log offset the unit ends at: what a reply must wait for.
    pub fn commit(&mut self, now_ms: i64) -> u64 {
        if self.unit.is_empty() {
            return self.appended;
        }
        for sink in &mut self.sinks {
            sink.commit(now_ms, &self.unit);
        }
        let log_unit = self.log_unit.take();
        if let Some(log) = &self.log {
            let unit = log_unit.as_ref().unwrap_or(&self.unit);
            if !unit.is_empty() {
                self.appended = log.append_with(|out| encode_record_buf(out, now_ms, unit));
            }
        }
        self.unit.clear();
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

    #[test]
    fn units_reach_every_sink_only_when_one_exists() {
        let mut j = Journal::default();
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
