//! The log as the journal sees it: one sink among others (`journal::LogSink`), reached only
//! through the journal, answering how far it has got through the same interface as every
//! sink (`journal::Progress`).

use super::base::Base;
use super::writer::Log;
use super::FsyncPolicy;
use crate::journal::{LogSink, Progress};
use rill_engine::effect::{encode_record_buf, EffectBuf};

impl Progress for Log {
    fn end(&self) -> u64 {
        self.end_offset()
    }

    /// One copy once fsynced (under `appendfsync no`, once handed to the OS: nothing is
    /// ever fsynced then, see `Log::synced`).
    fn copies_at(&self, offset: u64) -> usize {
        usize::from(self.synced() >= offset)
    }
}

impl LogSink for Log {
    fn append(&self, time_ms: i64, unit: &EffectBuf) -> u64 {
        self.append_with(|out| encode_record_buf(out, time_ms, unit))
    }

    fn safe_offset(&self) -> u64 {
        Log::safe_offset(self)
    }

    fn refusal(&self) -> Option<String> {
        if self.failed() {
            let why = self.status.lock().ok().and_then(|s| s.last_error.clone()).unwrap_or_default();
            return Some(why);
        }
        if !self.base.ready() {
            if let Base::Failed(why) = self.base.get() {
                return Some(why);
            }
        }
        None
    }

    fn failed(&self) -> bool {
        Log::failed(self)
    }

    fn fsync_before_reply(&self) -> bool {
        self.policy() == FsyncPolicy::Always
    }
}
