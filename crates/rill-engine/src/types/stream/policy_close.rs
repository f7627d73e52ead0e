//! RELEASEONCLOSE (docs/spec/policies.md §4): a consumer whose last reading connection closed
//! has its entries handed back at once, without waiting for ACKWAIT.
//!
//! ```text
//! Engine.policy_readers: PolicyReaders
//!   by_client: {client -> {(db, key, group, consumer)}}   what each connection read as
//!   count:     {(db, key, group, consumer) -> n}          live connections per consumer
//!
//!  XREADGROUP as c on a RELEASEONCLOSE group ─► note_policy_reader(client, ...): counted once
//!      per connection; c leaves the group's `closing` set (it is alive again)
//!  the server closes a connection ─► policy_client_closed(client): each consumer it read as
//!      whose count falls to 0 joins its group's `closing` set; the group is armed for now
//!  the policy timer ─► release_closed(): each closing consumer with no live reader has its
//!      entries handed back as failed attempts (Release::Closed), in budgets
//! ```
//!
//! Which connections are alive is what this server sees, not state: it is neither logged nor
//! replicated, and a restart or a promoted replica starts with no readers (ACKWAIT then covers
//! consumers whose connections went away). The hand-backs themselves are effects like every
//! other policy action, run by the timer through the server's unit runner.

use super::policy::Release;
use super::policy_act::{end_attempt, Ending};
use super::StreamId;
use crate::{CallCtx, Engine, Value};
use bytes::Bytes;
use std::collections::{HashMap, HashSet};

/// A consumer of a group of a stream in a database.
type Reader = (usize, Bytes, Bytes, Bytes);

/// Which connections read as which consumers of RELEASEONCLOSE groups (see the module doc).
#[derive(Debug, Default)]
pub struct PolicyReaders {
    by_client: HashMap<u64, HashSet<Reader>>,
    count: HashMap<Reader, u32>,
}

impl PolicyReaders {
    /// Whether some live connection has read as `consumer` of `group` of `key`.
    fn live(&self, db: usize, key: &Bytes, group: &Bytes, consumer: &Bytes) -> bool {
        self.count.contains_key(&(db, key.clone(), group.clone(), consumer.clone()))
    }
}

impl Engine {
    /// Connection `client` read as `consumer` of `group` (a group whose policy has
    /// RELEASEONCLOSE) of the stream at `key`. Client 0 (the server itself: replay, a
    /// primary's stream, timers) is not a connection.
    pub(crate) fn note_policy_reader(&mut self, client: u64, db: usize, key: &Bytes, group: &Bytes, consumer: &Bytes) {
        if client == 0 {
            return;
        }
        if let Some(Value::Stream(s)) = self.dbs.get_mut(db).and_then(|d| d.keys.get_mut(key)).map(|e| &mut e.value) {
            if let Some(p) = s.groups.get_mut(group).and_then(|g| g.policy_mut()) {
                p.closing.0.remove(consumer);
            }
        }
        let readers = &mut self.policy_readers;
        let reader = (db, key.clone(), group.clone(), consumer.clone());
        if readers.by_client.entry(client).or_default().insert(reader.clone()) {
            *readers.count.entry(reader).or_default() += 1;
        }
    }

    /// Connection `client` closed: each consumer it read as that no other live connection
    /// reads as, on a group that still has RELEASEONCLOSE, is marked for the timer to hand its
    /// entries back. Returns whether one was (the server's timer must look now).
    pub fn policy_client_closed(&mut self, client: u64) -> bool {
        let Some(reads) = self.policy_readers.by_client.remove(&client) else { return false };
        let mut marked = false;
        for reader in reads {
            let Some(n) = self.policy_readers.count.get_mut(&reader) else { continue };
            *n = n.saturating_sub(1);
            if *n > 0 {
                continue;
            }
            self.policy_readers.count.remove(&reader);
            let (db, key, group, consumer) = reader;
            let Some(Value::Stream(s)) = self.dbs.get_mut(db).and_then(|d| d.keys.get_mut(&key)).map(|e| &mut e.value)
            else {
                continue;
            };
            let Some(g) = s.groups.get_mut(&group) else { continue };
            let owns =
                g.consumer(&consumer).is_some_and(|c| g.pending_ids(c, std::ops::Bound::Unbounded).next().is_some());
            let Some(p) = g.policy_mut() else { continue };
            if p.settings.release_on_close && owns {
                p.closing.0.insert(consumer);
                self.policy_timer.arm_now(db, &key, &group);
                marked = true;
            }
        }
        marked
    }

    /// The timer's RELEASEONCLOSE work on `group` of `key`: hand back the entries of each
    /// consumer marked closing that has no live reader again, at most `budget` entries (the
    /// rest on the next run). Returns the entries handed back.
    pub(crate) fn release_closed(&mut self, ctx: &mut CallCtx, key: &Bytes, group: &Bytes, budget: usize) -> usize {
        let closing: Vec<Bytes> = match self.dbs.get(ctx.db).and_then(|d| d.keys.get(key)).map(|e| &e.value) {
            Some(Value::Stream(s)) => match s.group(group).and_then(|g| g.policy()) {
                Some(p) if !p.closing.0.is_empty() => p.closing.0.iter().cloned().collect(),
                _ => return 0,
            },
            _ => return 0,
        };
        let mut acted = 0;
        let mut exhausted = false;
        for consumer in closing {
            let room = budget.saturating_sub(acted);
            let live = self.policy_readers.live(ctx.db, key, group, &consumer);
            let (on, owned): (bool, Vec<StreamId>) =
                match self.dbs.get(ctx.db).and_then(|d| d.keys.get(key)).map(|e| &e.value) {
                    Some(Value::Stream(s)) => match s.group(group) {
                        Some(g) => (
                            g.policy().is_some_and(|p| p.settings.release_on_close),
                            g.consumer(&consumer)
                                .map(|c| g.pending_ids(c, std::ops::Bound::Unbounded).take(room + 1).collect())
                                .unwrap_or_default(),
                        ),
                        None => return acted,
                    },
                    _ => return acted,
                };
            let more = owned.len() > room;
            if on && !live {
                for id in owned.into_iter().take(room) {
                    if end_attempt(self, ctx, key, group, id, Ending::Failed(Release::Closed, None), None) {
                        acted += 1;
                    }
                }
                if more {
                    // The rest next run (the caller looks again at once).
                    exhausted = true;
                    break;
                }
            }
            if let Some(Value::Stream(s)) =
                self.dbs.get_mut(ctx.db).and_then(|d| d.keys.get_mut(key)).map(|e| &mut e.value)
            {
                if let Some(p) = s.groups.get_mut(group).and_then(|g| g.policy_mut()) {
                    p.closing.0.remove(&consumer);
                }
            }
        }
        if acted > 0 {
            self.signal_ready(ctx.db, key);
        }
        if exhausted {
            acted.max(budget)
        } else {
            acted
        }
    }

    /// The key at `from` was renamed to `to` in database `db` (RENAME, RENAMENX): the
    /// connections that read as consumers of the stream there read as them under the new name,
    /// and those that read at `to` (a key the rename replaced) no longer read as anything.
    pub(crate) fn policy_readers_renamed(&mut self, db: usize, from: &[u8], to: &Bytes) {
        let readers = &mut self.policy_readers;
        if readers.count.is_empty() {
            return;
        }
        let renamed = |r: &Reader| -> Option<Reader> {
            match r {
                (d, k, g, c) if *d == db && k.as_ref() == to.as_ref() => {
                    Some((usize::MAX, k.clone(), g.clone(), c.clone()))
                }
                (d, k, g, c) if *d == db && k.as_ref() == from => Some((db, to.clone(), g.clone(), c.clone())),
                _ => None,
            }
        };
        // `usize::MAX` marks a reader of the replaced key: dropped.
        let count = std::mem::take(&mut readers.count);
        for (r, n) in count {
            match renamed(&r) {
                Some((usize::MAX, ..)) => {}
                Some(new) => *readers.count.entry(new).or_default() += n,
                None => *readers.count.entry(r).or_default() += n,
            }
        }
        for set in readers.by_client.values_mut() {
            if !set.iter().any(|r| renamed(r).is_some()) {
                continue;
            }
            *set = std::mem::take(set)
                .into_iter()
                .filter_map(|r| match renamed(&r) {
                    Some((usize::MAX, ..)) => None,
                    Some(new) => Some(new),
                    None => Some(r),
                })
                .collect();
        }
    }

    /// Consumers live connections read as, over every group (tests).
    #[cfg(test)]
    pub(crate) fn policy_reader_count(&self) -> usize {
        self.policy_readers.count.len()
    }
}
