//! Child processes a test starts: killed by their own pid when dropped, waited for with a
//! deadline; and `redis-cli`, run once per call.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A child process that is killed (SIGKILL to its pid, nothing else) and reaped when
/// dropped, also when the test panics.
#[derive(Debug)]
pub struct ChildGuard(Child);

impl ChildGuard {
    pub fn new(child: Child) -> ChildGuard {
        ChildGuard(child)
    }

    /// Spawns `command`; panics with the program's name if it cannot be started.
    pub fn spawn(command: &mut Command) -> ChildGuard {
        match command.spawn() {
            Ok(child) => ChildGuard(child),
            Err(e) => panic!("cannot start {:?}: {e}", command.get_program()),
        }
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// The process, for its pipes.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.0
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }

    /// Its exit status if it has exited, without waiting.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.0.try_wait().ok().flatten()
    }

    /// Waits up to `timeout` for the process to exit: its status, or `None` if it is still
    /// running (it is left running; dropping the guard kills it).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_exit(&mut self.0, timeout)
    }

    /// `kill -9` and reap (a no-op if it has exited already).
    pub fn kill9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Waits up to `timeout` for `child` to exit: its status, or `None` if it is still running
/// (the caller decides whether to kill it).
pub fn wait_exit(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(e) => panic!("waiting for pid {}: {e}", child.id()),
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `redis-cli -h 127.0.0.1 -p PORT ARGS...`: its stdout, or `None` if it could not run
/// or exited non-zero.
pub fn redis_cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_kills_its_child_on_drop() {
        let mut guard = ChildGuard::spawn(Command::new("sleep").arg("60"));
        let pid = guard.pid();
        assert!(guard.is_running());
        assert_eq!(guard.wait_exit(Duration::from_millis(100)), None, "sleep 60 exited by itself");
        drop(guard);
        // Killed and reaped: no process, not even a zombie, has the pid (unless reused at once).
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(!stat.starts_with(&format!("{pid} (sleep)")), "still there: {stat}");
    }

    #[test]
    fn wait_exit_returns_the_status() {
        let mut guard = ChildGuard::spawn(&mut Command::new("false"));
        let status = guard.wait_exit(Duration::from_secs(10)).expect("`false` did not exit");
        assert!(!status.success());
    }
}
