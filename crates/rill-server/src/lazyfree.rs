//! The thread that frees what deletions leave behind (Redis' lazyfree thread): a big value
//! removed by UNLINK, a flushed database, an old function VM. The engine sets such things
//! aside ([`rill_engine::Garbage`], `keyspace/lazyfree.rs` says which); [`crate::unit::run`]
//! hands them here after each unit, so the state lock is never held while they are freed.
//!
//! The thread starts with the first job. INFO reads the two counters: objects handed over and
//! not yet freed (`lazyfree_pending_objects`), objects freed since start or CONFIG RESETSTAT
//! (`lazyfreed_objects`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};

/// One thing to free, the objects it counts for, and who waits for it to be freed.
struct Job {
    item: Box<dyn Send>,
    objects: u64,
    done: Option<tokio::sync::oneshot::Sender<()>>,
}

#[derive(Default)]
struct Inner {
    jobs: OnceLock<Option<mpsc::Sender<Job>>>,
    pending: AtomicU64,
    freed: AtomicU64,
}

/// The handle every part of the server frees through (cheap to clone).
#[derive(Clone, Default)]
pub struct LazyFreer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LazyFreer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyFreer").field("pending", &self.pending()).field("freed", &self.freed()).finish()
    }
}

impl LazyFreer {
    /// Free `item`, counting `objects`, on the thread; `done` is told once it is freed. If the
    /// thread cannot be started, it is freed here (and not counted).
    pub fn free(&self, item: Box<dyn Send>, objects: u64, done: Option<tokio::sync::oneshot::Sender<()>>) {
        let Some(jobs) = self.jobs() else {
            drop(item);
            if let Some(d) = done {
                let _ = d.send(());
            }
            return;
        };
        self.inner.pending.fetch_add(objects, Ordering::Relaxed);
        if let Err(mpsc::SendError(job)) = jobs.send(Job { item, objects, done }) {
            // The thread is gone (it only ends with the process): free here.
            self.inner.pending.fetch_sub(job.objects, Ordering::Relaxed);
            drop(job.item);
            if let Some(d) = job.done {
                let _ = d.send(());
            }
        }
    }

    /// Free what the engine set aside, as one job. When the command's caller waits for some
    /// of it (a flush without ASYNC), the receiver that is told once all of it is freed.
    pub fn free_garbage(&self, garbage: Vec<rill_engine::Garbage>) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let objects = garbage.iter().map(rill_engine::Garbage::objects).sum();
        let (done, rx) = if garbage.iter().any(rill_engine::Garbage::waited) {
            let (tx, rx) = tokio::sync::oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        self.free(Box::new(garbage), objects, done);
        rx
    }

    /// `lazyfree_pending_objects`.
    pub fn pending(&self) -> u64 {
        self.inner.pending.load(Ordering::Relaxed)
    }

    /// `lazyfreed_objects`.
    pub fn freed(&self) -> u64 {
        self.inner.freed.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT.
    pub fn reset_freed(&self) {
        self.inner.freed.store(0, Ordering::Relaxed);
    }

    fn jobs(&self) -> Option<&mpsc::Sender<Job>> {
        self.inner
            .jobs
            .get_or_init(|| {
                let (tx, rx) = mpsc::channel::<Job>();
                let inner = Arc::downgrade(&self.inner);
                let spawned = std::thread::Builder::new().name("rill-lazyfree".into()).spawn(move || {
                    for job in rx {
                        drop(job.item);
                        if let Some(inner) = inner.upgrade() {
                            inner.pending.fetch_sub(job.objects, Ordering::Relaxed);
                            inner.freed.fetch_add(job.objects, Ordering::Relaxed);
                        }
                        if let Some(d) = job.done {
                            let _ = d.send(());
                        }
                    }
                });
                match spawned {
                    Ok(_) => Some(tx),
                    Err(e) => {
                        tracing::warn!("Freeing in the foreground: the lazyfree thread did not start ({e})");
                        None
                    }
                }
            })
            .as_ref()
    }
}
