//! The busy gate: what a connection looks at before it takes the state lock for a batch, so
//! that while a long script holds the lock the other clients are answered `-BUSY` at once
//! instead of queueing on the mutex (which would also stall the runtime thread they run on).
//!
//! The gate has three states. **Open**: connections take the lock (a script that runs for less
//! than its hook's first look, about a million Lua instructions, never moves the gate: waiting
//! on the mutex for it is cheaper than waking every connection afterwards). **Running**: a
//! script holds the lock and has run that long but not `busy-reply-threshold`: connections do
//! not take the lock (it would hold their runtime thread for the script's run) but wait for the
//! gate to change, reading input meanwhile, as Redis leaves their requests unread. **Closed** (busy): the script
//! ran past the threshold; a connection runs its requests without the lock
//! (`session/busy_path.rs`), one at a time in order:
//!
//! * a request the gate can decide alone — a known command with the right arity, from an
//!   authenticated client (or a `no-auth` command), not `protected` (DEBUG, MODULE), and not
//!   flagged `allow-busy` — is refused with Redis' reply, byte for byte: [`BUSY_SCRIPT`], or for
//!   EXEC `-EXECABORT Transaction discarded because of: BUSY ...` (the transaction is
//!   discarded, as Redis discards it). Inside MULTI the refusal dooms the transaction. The
//!   counters it moves (`rejected_calls`, `errorstat_BUSY`, `errorstat_EXECABORT`) and the
//!   watched keys an EXEC drops are applied the next time the connection holds the lock;
//!   nothing can read them before that, since INFO and CLIENT LIST need the lock too.
//! * MULTI (flagged `busy-multi`) is answered there, as Redis runs it between the script's
//!   slices: it opens the connection's transaction (the commands queued into it meanwhile are
//!   refused `-BUSY`, which dooms it), its `calls` and CLIENT LIST's `multi` applied later.
//! * anything else waits, with every request after it, until the gate opens, and then runs
//!   through dispatch as usual: the other `allow-busy` commands (HELLO, QUIT, RESET,
//!   DISCARD, WATCH, UNWATCH; AUTH is answered there), and the requests whose reply depends on checks that
//!   come before BUSY in Redis' order (unknown command or subcommand, arity, NOAUTH, DEBUG's
//!   protection). They get the same reply Redis gives, later than Redis gives it.
//!
//! Where this differs from Redis, on purpose: Redis runs the `allow-busy` commands between
//! the slices of a running script, and answers the errors above at once. Redis also checks
//! OOM and MISCONF before BUSY; the gate cannot read the memory limit or the log's state
//! without the lock, so while a script runs on a server that is also over `maxmemory` or
//! failing to write its log, a refused command is answered BUSY where Redis says OOM or
//! MISCONF.
//!
//! What the script runner does (`script/`):
//!
//! 1. [`BusyGate::start_script`] when a script starts (under the lock), [`BusyGate::script_running`]
//!    from its hook at every look, [`BusyGate::script_past_threshold`] once it has run
//!    `busy-reply-threshold` (Redis' `lua-time-limit`), and dropping the [`ScriptRun`] when it
//!    ends opens the gate and wakes every waiting connection.
//! 2. A connection never waits on the mutex for a script: the session takes the lock with
//!    `try_lock` first, and when a script holds it ([`BusyGate::script_started`]) waits on
//!    the gate instead (`settled`: the script's end or its threshold), even before the hook
//!    marked the script running. A connection that finds the lock held by an ordinary batch
//!    does not wait in `lock()` either (that batch may be an EVAL about to start its script):
//!    it yields its thread a few times, then yields to the runtime and looks again
//!    (`session::lock_contended`).
//! 3. `SCRIPT KILL` and `FUNCTION KILL` (flagged `busy-kill`) are answered by the busy path
//!    itself: `+OK` and the run's kill flag set, which the script's hook reads and stops it
//!    with; `-UNKILLABLE` once the script wrote; `-NOTBUSY` while no script runs; the other
//!    kind's `-BUSY` for a function killed with SCRIPT KILL and the reverse.
//!    `SHUTDOWN` (flagged `busy-shutdown`) too: with NOSAVE the process ends there (the
//!    script's writes were never committed, so none of them is kept, as with kill -9),
//!    without it the BUSY reply, as Redis answers.
//!    `FUNCTION STATS` (flagged `script-stats`) is answered there too, from what the runner
//!    told the gate ([`BusyGate::describe_run`], [`BusyGate::set_function_counts`]): the
//!    running function, or the BUSY reply while an EVAL script runs, as Redis answers.
//! 4. Admission, CLIENT LIST and INFO make no progress while a script holds the lock: they
//!    take it. A connection that ends while the gate is not open waits for it before it takes
//!    the lock to remove its client record.

use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// Redis' reply to a command refused while a script runs past `busy-reply-threshold`.
pub const BUSY_SCRIPT: &str = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// The same while a function runs.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

const OPEN: u8 = 0;
const RUNNING: u8 = 1;
const CLOSED: u8 = 2;

/// The gate in front of the state lock. Lives in [`crate::state::Shared`] as `busy`; see the
/// module documentation for the contract.
#[derive(Debug, Default)]
pub struct BusyGate {
    /// OPEN, RUNNING (a script holds the lock) or CLOSED (past the threshold).
    state: AtomicU8,
    /// The running script is a function (FCALL), not an EVAL script.
    function: AtomicBool,
    /// The running script wrote: it can no longer be killed.
    dirty: AtomicBool,
    /// SCRIPT KILL / FUNCTION KILL asked the running script to stop.
    kill: AtomicBool,
    /// When the running script started, a [`crate::clock::Tick`] (0: none runs).
    started: AtomicU64,
    /// The running script's `busy-reply-threshold`, ms (0: never busy).
    threshold_ms: AtomicI64,
    /// Times the running script's runtime thread was handed on (`script/vm.rs`).
    pub handoffs: AtomicU8,
    /// Woken when the state changes.
    changed: Notify,
    /// Connections waiting on `changed` (a script that ends with none waiting and the gate
    /// open wakes nobody).
    waiters: AtomicUsize,
    /// The running function's name and the command that called it (FUNCTION STATS).
    running: std::sync::Mutex<Option<(String, Vec<Bytes>)>>,
    /// How many function libraries and functions there are (FUNCTION STATS while busy).
    libraries: AtomicUsize,
    functions: AtomicUsize,
}

impl BusyGate {
    /// Whether requests may take the state lock. One atomic load: connections ask before
    /// every batch.
    pub fn is_open(&self) -> bool {
        self.state.load(Ordering::Acquire) == OPEN
    }

    /// Whether a script runs below the threshold: wait, do not take the lock.
    pub fn is_running(&self) -> bool {
        self.state.load(Ordering::Acquire) == RUNNING
    }

    /// Close the gate until the returned value is dropped (tests; a script closes it through
    /// [`ScriptRun`]).
    pub fn close(&self) -> Closed<'_> {
        self.set(CLOSED);
        Closed { gate: self }
    }

    /// A script starts (called under the state lock): the gate is RUNNING until the returned
    /// value is dropped.
    pub fn start_script(&self, function: bool, threshold_ms: i64) -> ScriptRun<'_> {
        self.function.store(function, Ordering::Release);
        self.threshold_ms.store(threshold_ms, Ordering::Release);
        self.handoffs.store(0, Ordering::Release);
        self.dirty.store(false, Ordering::Release);
        self.kill.store(false, Ordering::Release);
        self.started.store(crate::clock::Tick::now().raw().max(1), Ordering::SeqCst);
        ScriptRun { gate: self }
    }

    /// The running script is still running at its hook's look: connections wait on the gate
    /// from now on instead of the mutex.
    pub fn script_running(&self) {
        if self.state.compare_exchange(OPEN, RUNNING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            self.changed.notify_waiters();
        }
    }

    /// How long the running script has run, ms (`None`: no script runs).
    pub fn script_ran_ms(&self) -> Option<i64> {
        let started = self.started.load(Ordering::Acquire);
        (started > 0).then(|| {
            let us = crate::clock::Tick::now().micros_since(crate::clock::Tick::from_raw(started));
            i64::try_from(us / 1000).unwrap_or(i64::MAX)
        })
    }

    /// The running script's `busy-reply-threshold`, ms.
    pub fn threshold_ms(&self) -> i64 {
        self.threshold_ms.load(Ordering::Acquire)
    }

    /// The running script passed `busy-reply-threshold`: close the gate (other clients get
    /// BUSY). True the first time.
    pub fn script_past_threshold(&self) -> bool {
        self.script_running();
        if self.state.compare_exchange(RUNNING, CLOSED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            self.changed.notify_waiters();
            return true;
        }
        false
    }

    /// The running script wrote: SCRIPT KILL can no longer stop it.
    pub fn script_wrote(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Whether SCRIPT KILL / FUNCTION KILL asked the running script to stop.
    pub fn script_killed(&self) -> bool {
        self.kill.load(Ordering::Acquire)
    }

    /// Whether the running script is a function.
    pub fn running_function(&self) -> bool {
        self.function.load(Ordering::Acquire)
    }

    /// Wait until the gate is open.
    pub async fn opened(&self) {
        self.wait_until(|s| s == OPEN).await;
    }

    /// Wait until no script runs below the threshold: the gate is closed (past it), or open
    /// with no script running.
    pub async fn settled(&self) {
        self.wait_until(|s| s == CLOSED || (s == OPEN && self.started.load(Ordering::SeqCst) == 0)).await;
    }

    /// Whether a script runs now (it holds the lock), whatever the gate's state.
    pub fn script_started(&self) -> bool {
        self.started.load(Ordering::Acquire) != 0
    }

    async fn wait_until(&self, done: impl Fn(u8) -> bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change between the two is not missed; counted
            // after registering, so a script's end that does not see the count happened
            // before the check (see `ScriptRun`'s drop).
            changed.as_mut().enable();
            let _counted = Waiting::new(&self.waiters);
            if done(self.state.load(Ordering::SeqCst)) {
                return;
            }
            changed.await;
        }
    }

    /// What SCRIPT KILL (`function: false`) or FUNCTION KILL answers while the gate is not
    /// open, without the lock: `Ok` when the script was told to stop, else the error text.
    pub fn kill(&self, function: bool) -> Result<(), &'static str> {
        if self.state.load(Ordering::Acquire) == OPEN {
            return Err("NOTBUSY No scripts in execution right now.");
        }
        if self.dirty.load(Ordering::Acquire) {
            return Err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
        }
        let running_function = self.function.load(Ordering::Acquire);
        if running_function && !function {
            return Err(BUSY_FUNCTION);
        }
        if !running_function && function {
            return Err(BUSY_SCRIPT);
        }
        self.kill.store(true, Ordering::Release);
        Ok(())
    }

    /// The running function is `name`, called by `args` (FUNCTION STATS while it runs).
    pub fn describe_run(&self, name: &str, args: &[Bytes]) {
        if let Ok(mut r) = self.running.lock() {
            *r = Some((name.to_string(), args.to_vec()));
        }
    }

    /// How many function libraries and functions there are now.
    pub fn set_function_counts(&self, libraries: usize, functions: usize) {
        self.libraries.store(libraries, Ordering::Release);
        self.functions.store(functions, Ordering::Release);
    }

    /// FUNCTION STATS while the gate is not open, without the lock: the running function and
    /// the counts, or the BUSY reply while an EVAL script runs.
    pub fn function_stats(&self) -> Result<rill_resp::Reply, &'static str> {
        if !self.function.load(Ordering::Acquire) {
            return Err(BUSY_SCRIPT);
        }
        let running = self.running.lock().ok().and_then(|r| r.clone());
        let ms = self.script_ran_ms().unwrap_or(0);
        Ok(crate::script::functions::stats_reply(
            running.map(|(name, args)| (name, args, ms)),
            self.libraries.load(Ordering::Acquire),
            self.functions.load(Ordering::Acquire),
        ))
    }

    /// The BUSY reply for the running kind of script.
    pub fn busy_reply(&self) -> &'static str {
        if self.function.load(Ordering::Acquire) {
            BUSY_FUNCTION
        } else {
            BUSY_SCRIPT
        }
    }

    fn set(&self, state: u8) {
        self.state.store(state, Ordering::Release);
        self.changed.notify_waiters();
    }
}

/// A script's run: the gate is RUNNING, then CLOSED past the threshold, and open again when
/// this is dropped.
#[derive(Debug)]
#[must_use = "the gate opens again when this is dropped"]
pub struct ScriptRun<'a> {
    gate: &'a BusyGate,
}

impl Drop for ScriptRun<'_> {
    fn drop(&mut self) {
        let gate = self.gate;
        gate.kill.store(false, Ordering::Release);
        gate.started.store(0, Ordering::SeqCst);
        if gate.function.load(Ordering::Acquire) {
            if let Ok(mut r) = gate.running.lock() {
                *r = None;
            }
        }
        // Also when it stayed open: a connection that found the lock taken by the script
        // waits for its end (`settled`). One that counted itself after this looked sees the
        // script ended when it checks.
        let was = gate.state.swap(OPEN, Ordering::SeqCst);
        if was != OPEN || gate.waiters.load(Ordering::SeqCst) > 0 {
            gate.changed.notify_waiters();
        }
    }
}

/// A connection counted in [`BusyGate`]'s `waiters` while it lives (a wait given up when its
/// future is dropped too).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The gate held closed; dropping it opens the gate.
#[derive(Debug)]
#[must_use = "the gate opens again when this is dropped"]
pub struct Closed<'a> {
    gate: &'a BusyGate,
}

impl Drop for Closed<'_> {
    fn drop(&mut self) {
        self.gate.set(OPEN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_waiter_is_woken_when_the_gate_opens_and_not_before() {
        let gate = std::sync::Arc::new(BusyGate::default());
        assert!(gate.is_open());
        let closed = gate.close();
        assert!(!gate.is_open());
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.opened().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "the gate is still closed");
        drop(closed);
        assert!(gate.is_open());
        let woke = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(matches!(woke, Ok(Ok(()))), "the waiter saw the gate open");
        // Open already: no wait at all.
        tokio::time::timeout(Duration::from_secs(5), gate.opened()).await.unwrap_or_else(|_| panic!("open gate"));
    }

    #[tokio::test]
    async fn a_running_script_settles_when_it_passes_the_threshold_and_kill_follows_the_rules() {
        let gate = std::sync::Arc::new(BusyGate::default());
        assert_eq!(gate.kill(false), Err("NOTBUSY No scripts in execution right now."));
        let run = gate.start_script(false, 5000);
        assert!(gate.is_open(), "a script that just started moves nothing");
        gate.script_running();
        assert!(gate.is_running() && !gate.is_open());
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.settled().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "below the threshold: still waiting");
        assert!(gate.script_past_threshold());
        let woke = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(matches!(woke, Ok(Ok(()))));
        assert_eq!(gate.kill(true), Err(BUSY_SCRIPT), "FUNCTION KILL does not stop an EVAL script");
        assert_eq!(gate.kill(false), Ok(()));
        assert!(gate.script_killed());
        drop(run);
        assert!(gate.is_open());
        let run = gate.start_script(true, 5000);
        gate.script_running();
        gate.script_wrote();
        assert!(gate.kill(true).is_err_and(|e| e.starts_with("UNKILLABLE")));
        drop(run);
    }
}
