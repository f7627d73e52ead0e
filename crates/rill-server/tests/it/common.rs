//! What several of rill-server's integration tests share beyond `rill-testkit`: restart
//! pictures, the fuzz tests' MULTI steps and side connections, and RESP client steps that know
//! rill's commands (RESTORE of a DUMP, BGREWRITEAOF until done).

use rill_testkit::{parse_value, Proc, RawClient, Server, Value};
use std::path::Path;

/// What a restart test compares: pairs of (command, reply) read from the server.
pub type Picture = Vec<(String, Value)>;

/// Take `look`'s picture through `c`, kill `p` with -9, start rill again in `dir` with `args`
/// and take the picture again: the new server, and the first difference, described, if any.
pub fn kill9_and_compare(
    p: Proc,
    c: &mut RawClient,
    dir: &Path,
    args: &[&str],
    look: fn(&mut RawClient) -> Picture,
) -> (Proc, Option<String>) {
    let before = look(c);
    p.kill9();
    let p = Proc::start(dir, args);
    let after = look(&mut p.client());
    let diff = if before.len() != after.len() {
        Some(format!("a different picture after the restart\n  before: {before:?}\n  after:  {after:?}"))
    } else {
        before
            .iter()
            .zip(&after)
            .find(|(b, a)| a != b)
            .map(|((what, b), (_, a))| format!("{what} after the restart\n  before: {b}\n  after:  {a}"))
    };
    (p, diff)
}

/// Steps of the restart and fuzz tests, on a [`RawClient`].
pub trait ClientExt {
    /// `RESTORE key 0 payload REPLACE` of a DUMP reply, parsed; a DUMP reply that is no payload
    /// (nil for a missing key) is returned as it is.
    fn restore_dump(&mut self, key: &str, dump: &Value) -> Value;

    /// Send each command and read its reply; inside MULTI / EXEC if `transaction` (the
    /// replies are not looked at: the restart tests compare the state afterwards).
    fn run_all(&mut self, cmds: &[&[String]], transaction: bool);

    /// BGREWRITEAOF, waiting until it is done.
    fn rewrite_log(&mut self);
}

impl ClientExt for RawClient {
    fn restore_dump(&mut self, key: &str, dump: &Value) -> Value {
        match dump {
            Value::Bulk(p) => {
                let args: [&[u8]; 5] = [b"RESTORE", key.as_bytes(), b"0", p, b"REPLACE"];
                parse_value(&self.request(&args).unwrap()).unwrap()
            }
            other => other.clone(),
        }
    }

    fn run_all(&mut self, cmds: &[&[String]], transaction: bool) {
        if transaction {
            self.cmd(&["MULTI"]);
        }
        for cmd in cmds {
            let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
            self.request(&args).unwrap();
        }
        if transaction {
            self.cmd(&["EXEC"]);
        }
    }

    fn rewrite_log(&mut self) {
        fn count(c: &mut RawClient) -> (String, String) {
            let info = String::from_utf8_lossy(&c.cmd(&["INFO", "persistence"])).into_owned();
            let field = |name: &str| {
                let line = info.lines().find_map(|l| l.strip_prefix(name));
                line.map(|v| v.trim().to_string()).unwrap_or_default()
            };
            (field("aof_rewrites:"), field("aof_rewrite_in_progress:"))
        }
        let (done_before, _) = count(self);
        self.cmd(&["BGREWRITEAOF"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let (done, running) = count(self);
            if done != done_before && running == "0" {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "BGREWRITEAOF did not finish");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// The commands of a fuzz test's MULTI step, `n1 CMD1... n2 CMD2...` (each preceded by its
/// number of arguments).
pub fn multi_commands(mut rest: &[String]) -> Vec<&[String]> {
    let mut cmds = Vec::new();
    while let Some((n, tail)) = rest.split_first() {
        let n: usize = n.parse().unwrap();
        cmds.push(&tail[..n]);
        rest = &tail[n..];
    }
    cmds
}

/// A side connection to each of two servers (rill's first) for a blocking command, as the
/// differential fuzz tests use them: the command is sent to both and left parked, the main
/// connections' later commands wake it or not, and [`Side::unpark`] ends it with CLIENT
/// UNBLOCK (whose reply tells whether it was still blocked) and reads what it got.
pub struct Side {
    conns: [RawClient; 2],
    ids: [String; 2],
    pending: Option<Vec<String>>,
}

impl Side {
    /// New connections to `a` and `b`.
    pub fn open(a: &Server, b: &Server) -> Side {
        let mut conns = [a.connect(), b.connect()];
        let ids = conns.each_mut().map(|c| match parse_value(&c.cmd(&["CLIENT", "ID"])).unwrap() {
            Value::Int(id) => id.to_string(),
            other => panic!("CLIENT ID: {other}"),
        });
        Side { conns, ids, pending: None }
    }

    /// Send `cmd` on both side connections (nothing if a command is already parked here) and
    /// wait until each server has taken it (served it or parked the client), watching through
    /// `main`, so the main connections' next commands come after it.
    pub fn park(&mut self, main: &mut [RawClient; 2], cmd: Vec<String>) {
        if self.pending.is_some() {
            return;
        }
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        for ((side, id), main) in self.conns.iter_mut().zip(&self.ids).zip(main.iter_mut()) {
            side.cmd(&["PING"]);
            side.send_command(&args).unwrap();
            // Until CLIENT LIST shows the side's last command is no longer the PING.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                let list = main.cmd(&["CLIENT", "LIST", "ID", id]);
                let list = String::from_utf8_lossy(&list).into_owned();
                if !list.contains(" cmd=ping ") {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "side command never ran: {list}");
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        self.pending = Some(cmd);
    }

    /// End the parked command, if any: the command, CLIENT UNBLOCK's reply on each server, and
    /// what each side connection got.
    pub fn unpark(&mut self, main: &mut [RawClient; 2]) -> Option<(Vec<String>, [Value; 2], [Value; 2])> {
        let cmd = self.pending.take()?;
        let [a, b] = main;
        let unblock = [(a, &self.ids[0]), (b, &self.ids[1])]
            .map(|(c, id)| parse_value(&c.cmd(&["CLIENT", "UNBLOCK", id])).unwrap());
        let got = self.conns.each_mut().map(|c| parse_value(&c.read_reply().unwrap()).unwrap());
        Some((cmd, unblock, got))
    }
}

/// Waits until INFO counts exactly `n` blocked clients, asking through `admin`; panics if it
/// does not within 10 s. What a test waits for before it writes to a blocked client's key:
/// a fixed sleep is too short on a loaded machine.
pub fn wait_blocked(admin: &mut RawClient, n: usize) {
    let want = format!("\r\nblocked_clients:{n}\r\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let info = admin.cmd(&["INFO", "clients"]);
        if String::from_utf8_lossy(&info).contains(&want) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "never {n} blocked clients: {}", rill_testkit::escape(&info));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A small tmpfs mounted on `dir/mnt` (a disk that fills up), unmounted on drop. `None`, counted
/// as a skip, where mounting is not allowed (not root); under `CI=true` that fails the test.
#[derive(Debug)]
pub struct Tmpfs {
    pub path: std::path::PathBuf,
}

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        use std::process::{Command, Stdio};
        let path = dir.join("mnt");
        std::fs::create_dir_all(&path).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", path.to_str().unwrap()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            rill_testkit::skip("cannot mount a tmpfs here (needs root)");
            return None;
        }
        Some(Tmpfs { path })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
