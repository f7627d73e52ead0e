//! Persistence run against the server: loading the dataset into it at start-up (and a
//! replica's snapshot), compacting the log from its data, turning the log on and off. The log
//! itself (`crate::aof`) is a sink that gets units and snapshots, never the server state.

pub mod load;
pub mod rewrite;

use std::sync::Arc;

/// CONFIG SET appendonly: turning the log on starts a new log file and a rewrite that
/// snapshots the current data as its base; turning it off writes out and closes the log. An
/// I/O error keeps its kind (a full disk, a missing permission) for the caller's message.
pub fn set_appendonly(
    shared: &Arc<crate::state::Shared>,
    st: &mut crate::state::State,
    on: bool,
) -> std::io::Result<()> {
    match (st.journal.log(), on) {
        (Some(_), true) | (None, false) => Ok(()),
        (Some(log), false) => {
            let log = log.clone();
            st.journal.set_log(None);
            // A rewrite still running for this log (the one writing its base, say) must not
            // switch the manifest from now on: a later `appendonly yes` starts a log of its
            // own in the same directory.
            log.retire(&log.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            log.shutdown();
            // Replies still waiting for its base go out: with the log off, nothing is
            // promised about a crash (`base.rs`).
            log.base.set(crate::aof::base::Base::Ready);
            Ok(())
        }
        (None, true) => {
            let mut files =
                crate::aof::files::Files::new(st.config.get("appenddirname"), st.config.get("appendfilename"));
            std::fs::create_dir_all(&files.dir)?;
            // The files of an earlier log stay as they are, manifest included, until the
            // rewrite below has written this log's base: a crash before then restarts from
            // them (the state when that log was turned off; nothing written since is
            // acknowledged yet, `base.rs`), and start-up removes this log's unlisted file.
            // The new files are numbered after theirs.
            let _ = files.read_manifest();
            let seq = files.last_seq() + 1;
            files.provisional = true;
            let file = files.create_incr(seq)?;
            files.write_manifest(crate::aof::files::Manifest { base: None, incrs: vec![files.incr_name(seq)] })?;
            let policy = crate::aof::FsyncPolicy::parse(st.config.get("appendfsync"));
            let log = crate::aof::Log::start(files, file, seq, crate::aof::LOG_MAGIC.len() as u64, policy)?;
            // No write is acknowledged until the base is on disk (`base.rs`).
            log.base.set(crate::aof::base::Base::Pending);
            st.journal.set_log(Some(log));
            st.persist.base_file_size = 0;
            st.persist.rewrite_base_size = 0;
            // A rewrite of the log just turned off may still be finishing (it will not touch
            // the manifest): the cron starts this one once it has ended.
            if !st.persist.rewrite_in_progress {
                rewrite::start_base(shared, st).map_err(std::io::Error::other)?;
            }
            Ok(())
        }
    }
}
