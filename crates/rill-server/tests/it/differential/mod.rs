//! Differential tests: every script in `tests/diff/*.redis` runs against rill and against the
//! reference servers (Redis 8.2.3 and Redis 7.0.15), and the replies are compared command by
//! command, as raw RESP bytes.
//!
//! The script format (directives, modifiers) is documented once, in `tests/diff/README.md`;
//! `script.rs` parses it, `normalise.rs` applies the modifiers that change what is compared.
//!
//! Comparison: rill's reply must equal Redis 8.2.3's. Independently, Redis 7.0.15's reply must
//! equal Redis 8.2.3's on every line not marked `@skip-7.0`, so a script cannot silently depend on
//! a version difference. A line that got no reply (an I/O error, a timeout) fails whatever its
//! modifiers say: servers that all time out agree on nothing. Before each script every server
//! gets `FLUSHALL` and all connections are new.
//!
//! # Environment
//!
//! * `RILL_DIFF_SELFTEST=1` — run a second Redis 7.0.15 in rill's place, to validate the scripts
//!   while the server is unfinished.
//! * `RILL_DIFF_ONLY=strings,keys` — run only these scripts (file stems).
//! * `RILL_DIFF_VERBOSE=1` — print every command with every server's reply.
//! * `RILL_DIFF_MAX=N` — print up to N mismatches per script (default 15).
//! * `RILL_SKIP_REFERENCE=1` — a missing reference server is left out instead of failing the
//!   test, which then counts as skipped (`rill_testkit::skip`); refused under `CI=true`.

mod normalise;
mod script;

use normalise::normalise;
use rill_testkit::{escape, parse_value, RawClient, ReferenceServer, Server, Value};
use script::{parse_script, Line, Modifiers, Step};
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Mismatches printed in full per script; the rest are counted. `RILL_DIFF_MAX` overrides.
const MAX_REPORTED_PER_SCRIPT: usize = 15;

fn max_reported() -> usize {
    std::env::var("RILL_DIFF_MAX").ok().and_then(|v| v.parse().ok()).unwrap_or(MAX_REPORTED_PER_SCRIPT)
}

/// The servers of one run. `subject` is rill (or a Redis 7.0.15 stand-in in self-test mode).
struct Target {
    label: String,
    server: Server,
    is_7_0: bool,
}

struct Conn {
    /// `Err` once the connection failed: later commands on it fail at once instead of each
    /// waiting for the read timeout.
    client: Result<RawClient, String>,
    /// Script lines whose replies are not read yet (`@nowait`).
    pending: VecDeque<usize>,
}

/// One server's connections during a script.
struct Session<'a> {
    target: &'a Target,
    conns: HashMap<String, Conn>,
    /// `@let` values: this server's own (a client ID, say).
    vars: HashMap<String, Vec<u8>>,
    /// The connection `@wait-blocked` asks INFO on, none of the script's own (their next reply
    /// may be pending); opened on first use.
    control: Option<RawClient>,
}

/// How long `@wait-blocked` waits for clients to block: far more than it takes on an idle
/// machine (about a millisecond), so that only a client that does not block fails it.
const BLOCK_WITHIN: Duration = Duration::from_secs(10);

impl<'a> Session<'a> {
    /// INFO's `blocked_clients`, and how many it should be: the commands sent with `@nowait`
    /// and not awaited yet.
    fn blocked(&mut self) -> Result<(usize, usize), String> {
        let expected: usize = self.conns.values().map(|c| c.pending.len()).sum();
        let port = self.target.server.port;
        let control = match &mut self.control {
            Some(c) => c,
            slot => slot.insert(RawClient::try_connect(port).map_err(|e| format!("cannot connect: {e}"))?),
        };
        let info = control.call(&["INFO", "clients"]).map_err(|e| format!("INFO clients: {e}"))?;
        let blocked = info
            .as_str()
            .and_then(|text| text.lines().find_map(|l| l.strip_prefix("blocked_clients:")))
            .and_then(|n| n.trim().parse::<usize>().ok())
            .ok_or_else(|| format!("no blocked_clients in INFO clients: {info}"))?;
        Ok((blocked, expected))
    }

    fn conn(&mut self, name: &str) -> &mut Conn {
        let port = self.target.server.port;
        self.conns.entry(name.to_owned()).or_insert_with(|| Conn {
            client: RawClient::try_connect(port).map_err(|e| format!("cannot connect: {e}")),
            pending: VecDeque::new(),
        })
    }
}

/// A reply the harness made up because there was none (an I/O error, a broken connection).
/// It starts with `<`, which no RESP reply does, and it never counts as agreement.
fn harness_error(reply: &[u8]) -> bool {
    reply.first() == Some(&b'<')
}

/// What `@let` keeps of a reply: an integer's digits, a string's bytes.
fn let_value(reply: &[u8]) -> Option<Vec<u8>> {
    match parse_value(reply).ok()? {
        Value::Int(n) => Some(n.to_string().into_bytes()),
        Value::Bulk(b) => Some(b),
        Value::Simple(s) => Some(s.into_bytes()),
        _ => None,
    }
}

impl Conn {
    fn send(&mut self, args: &[&[u8]]) -> Result<(), Vec<u8>> {
        let client = self.client.as_mut().map_err(|e| format!("<{e}>").into_bytes())?;
        if let Err(e) = client.send_command(args) {
            self.client = Err(format!("connection broken earlier: {e}"));
            return Err(format!("<I/O error on send: {e}>").into_bytes());
        }
        Ok(())
    }

    fn read(&mut self) -> Vec<u8> {
        let client = match self.client.as_mut() {
            Ok(client) => client,
            Err(e) => return format!("<{e}>").into_bytes(),
        };
        match client.read_reply() {
            Ok(reply) => reply,
            Err(e) => {
                self.client = Err(format!("connection broken earlier: {e}"));
                format!("<I/O error: {e}>").into_bytes()
            }
        }
    }
}

fn describe(reply: &[u8]) -> String {
    match parse_value(reply) {
        Ok(v) => format!("{}\n{:>18}{v}", escape(reply), ""),
        Err(_) => escape(reply),
    }
}

struct Report {
    failures: usize,
    text: String,
}

impl Report {
    fn mismatch(&mut self, script: &str, line: &Line, what: &str, sides: &[(&str, &[u8])]) {
        self.failures += 1;
        if self.failures > max_reported() {
            return;
        }
        let _ = writeln!(self.text, "\n{script}:{}: {}\n  {what}", line.number, line.text);
        for (label, reply) in sides {
            let _ = writeln!(self.text, "  {label:>14}: {}", describe(reply));
        }
    }
}

fn run_script(name: &str, path: &Path, targets: &[Target], verbose: bool) -> Report {
    let source = std::fs::read_to_string(path).unwrap();
    let lines = parse_script(&source).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut report = Report { failures: 0, text: String::new() };

    for target in targets {
        let mut c = target.server.connect();
        let reply = c.cmd(&["FLUSHALL"]);
        assert_eq!(reply, b"+OK\r\n", "FLUSHALL on {} before {name}", target.label);
    }
    let mut sessions: Vec<Session> = targets
        .iter()
        .map(|target| Session { target, conns: HashMap::new(), vars: HashMap::new(), control: None })
        .collect();
    let mut current = String::from("default");
    let by_number: HashMap<usize, &Line> = lines.iter().map(|l| (l.number, l)).collect();

    for line in &lines {
        match &line.step {
            Step::Conn(name) => current = name.clone(),
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Step::WaitBlocked => wait_blocked(&mut report, name, line, &mut sessions),
            Step::Hello(version) => {
                let v = version.to_string();
                let mut replies = Vec::new();
                for s in sessions.iter_mut() {
                    let conn = s.conn(&current);
                    let reply = match conn.send(&[b"HELLO", v.as_bytes()]) {
                        Ok(()) => conn.read(),
                        Err(e) => e,
                    };
                    replies.push((s.target.label.clone(), reply));
                }
                let expected = if *version == 3 { b'%' } else { b'*' };
                if replies.iter().any(|(_, r)| r.first() != Some(&expected)) {
                    let sides: Vec<(&str, &[u8])> = replies.iter().map(|(l, r)| (l.as_str(), r.as_slice())).collect();
                    report.mismatch(name, line, "HELLO did not reply with a map", &sides);
                }
            }
            Step::Command { args, vars, mods } => {
                let mut replies: Vec<Option<Vec<u8>>> = Vec::new();
                for s in sessions.iter_mut() {
                    if mods.skip_7_0 && s.target.is_7_0 {
                        replies.push(None);
                        continue;
                    }
                    let mut own = args.clone();
                    for (i, var) in vars {
                        own[*i] = s.vars.get(var).cloned().unwrap_or_else(|| b"<unset>".to_vec());
                    }
                    let args: Vec<&[u8]> = own.iter().map(Vec::as_slice).collect();
                    let conn = s.conn(&current);
                    if let Err(e) = conn.send(&args) {
                        replies.push(Some(e));
                        continue;
                    }
                    if mods.noreply {
                        replies.push(None);
                    } else if mods.nowait {
                        conn.pending.push_back(line.number);
                        replies.push(None);
                    } else if !conn.pending.is_empty() {
                        panic!("{name}:{}: a reply is still pending on @conn {current}; @await it first", line.number);
                    } else {
                        let reply = conn.read();
                        if let Some(var) = &mods.let_name {
                            match let_value(&reply) {
                                Some(value) => drop(s.vars.insert(var.clone(), value)),
                                None => {
                                    let what = format!("@let={var}: not an integer or a string");
                                    report.mismatch(name, line, &what, &[(&s.target.label, &reply)]);
                                }
                            }
                        }
                        replies.push(Some(reply));
                    }
                }
                if verbose {
                    print_verbose(name, line, &sessions, &replies);
                }
                compare(&mut report, name, line, mods, &sessions, &replies);
            }
            Step::Read => {
                let mut replies: Vec<Option<Vec<u8>>> = Vec::new();
                for s in sessions.iter_mut() {
                    let conn = s.conn(&current);
                    assert!(
                        conn.pending.is_empty(),
                        "{name}:{}: a reply is still pending on @conn {current}; @await it first",
                        line.number
                    );
                    replies.push(Some(conn.read()));
                }
                if verbose {
                    print_verbose(name, line, &sessions, &replies);
                }
                compare(&mut report, name, line, &Modifiers::default(), &sessions, &replies);
            }
            Step::Await => {
                let mut replies: Vec<Option<Vec<u8>>> = Vec::new();
                let mut origin = None;
                for s in sessions.iter_mut() {
                    let conn = s.conn(&current);
                    match conn.pending.pop_front() {
                        Some(n) => {
                            origin = Some(n);
                            replies.push(Some(conn.read()));
                        }
                        None => replies.push(None),
                    }
                }
                let origin = origin.unwrap_or_else(|| {
                    panic!("{name}:{}: @await with nothing pending on @conn {current}", line.number)
                });
                let sent = by_number[&origin];
                let Step::Command { mods, .. } = &sent.step else { unreachable!() };
                if verbose {
                    print_verbose(name, sent, &sessions, &replies);
                }
                compare(&mut report, name, sent, mods, &sessions, &replies);
            }
        }
    }
    // Replies nobody awaited would make the next script read garbage; connections close here.
    for s in &sessions {
        for (conn_name, conn) in &s.conns {
            if let Some(n) = conn.pending.front() {
                panic!("{name}:{n}: reply never awaited on @conn {conn_name}");
            }
        }
    }
    if report.failures > max_reported() {
        let _ = writeln!(
            report.text,
            "\n... and {} more mismatches in {name} (RILL_DIFF_MAX=N shows more)",
            report.failures - max_reported()
        );
    }
    report
}

/// `@wait-blocked`: polls every server until each has all its `@nowait` commands blocked,
/// all servers in turn against one deadline (a server that fails does not make the others'
/// clients time out meanwhile).
fn wait_blocked(report: &mut Report, script: &str, line: &Line, sessions: &mut [Session]) {
    let deadline = std::time::Instant::now() + BLOCK_WITHIN;
    let mut waiting: Vec<usize> = (0..sessions.len()).collect();
    while !waiting.is_empty() {
        let late = std::time::Instant::now() > deadline;
        waiting.retain(|&i| {
            let s = &mut sessions[i];
            let failure = match s.blocked() {
                Ok((blocked, expected)) if blocked == expected => return false,
                Ok(_) if !late => return true,
                Ok((blocked, expected)) => {
                    format!("blocked_clients:{blocked} after {BLOCK_WITHIN:?}, expected {expected}")
                }
                Err(e) => e,
            };
            report.mismatch(script, line, &format!("{}: {failure}", s.target.label), &[]);
            false
        });
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn print_verbose(script: &str, line: &Line, sessions: &[Session], replies: &[Option<Vec<u8>>]) {
    println!("{script}:{}: {}", line.number, line.text);
    for (s, r) in sessions.iter().zip(replies) {
        if let Some(r) = r {
            println!("  {:>14}: {}", s.target.label, escape(r));
        }
    }
}

/// Subject (index 0) against Redis 8.2.3; Redis 7.0.15 against Redis 8.2.3.
fn compare(
    report: &mut Report,
    script: &str,
    line: &Line,
    mods: &Modifiers,
    sessions: &[Session],
    replies: &[Option<Vec<u8>>],
) {
    let labelled: Vec<(&Target, &Vec<u8>)> =
        sessions.iter().zip(replies).filter_map(|(s, r)| r.as_ref().map(|r| (s.target, r))).collect();
    // No reply is a failure on any line, compared or not: three servers timing out alike
    // agree on nothing.
    for &(target, reply) in &labelled {
        if harness_error(reply) {
            report.mismatch(script, line, &format!("no reply from {}", target.label), &[(&target.label, reply)]);
        }
    }
    if mods.ignore.is_some() {
        return;
    }
    let command: &[Vec<u8>] = match &line.step {
        Step::Command { args, .. } => args,
        _ => &[],
    };
    let Some(&(subject, subject_reply)) = labelled.first().filter(|(t, _)| std::ptr::eq(*t, sessions[0].target)) else {
        return;
    };
    let reference = labelled.iter().skip(1).find(|(t, _)| !t.is_7_0).or_else(|| labelled.get(1));
    if let Some(&(reference, reference_reply)) = reference {
        if normalise(subject_reply, mods, command) != normalise(reference_reply, mods, command) {
            report.mismatch(
                script,
                line,
                &format!("{} differs from {}", subject.label, reference.label),
                &[(&subject.label, subject_reply), (&reference.label, reference_reply)],
            );
        }
        // Script validity: the two reference versions must agree unless the line says otherwise.
        for &(other, other_reply) in labelled.iter().skip(1) {
            if !std::ptr::eq(other, reference)
                && normalise(other_reply, mods, command) != normalise(reference_reply, mods, command)
            {
                report.mismatch(
                    script,
                    line,
                    &format!("{} differs from {}: mark the line @skip-7.0", other.label, reference.label),
                    &[(&other.label, other_reply), (&reference.label, reference_reply)],
                );
            }
        }
    }
}

fn scripts() -> Vec<(String, PathBuf)> {
    let dir = rill_testkit::workspace_root().join("tests/diff");
    let only: Option<Vec<String>> = std::env::var("RILL_DIFF_ONLY")
        .ok()
        .map(|s| s.split(',').map(|x| x.trim().to_owned()).filter(|x| !x.is_empty()).collect());
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "redis"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), p))
        .filter(|(stem, _)| only.as_ref().is_none_or(|o| o.contains(stem)))
        .collect();
    out.sort();
    out
}

#[test]
fn differential_scripts() {
    let selftest = rill_testkit::selftest();
    let verbose = std::env::var("RILL_DIFF_VERBOSE").is_ok_and(|v| v == "1");

    let subject = if selftest {
        match Server::reference(ReferenceServer::Redis7) {
            Some(server) => Target { label: "7.0 (as rill)".into(), server, is_7_0: true },
            None => return,
        }
    } else {
        Target { label: "rill".into(), server: rill_testkit::Launch::rill().server_defaults().start(), is_7_0: false }
    };
    let mut targets = vec![subject];
    for which in [ReferenceServer::Redis8, ReferenceServer::Redis7] {
        if let Some(server) = Server::reference(which) {
            let label = which.label().to_owned();
            targets.push(Target { label, server, is_7_0: which == ReferenceServer::Redis7 });
        }
    }
    if targets.len() == 1 {
        // Both references missing (RILL_SKIP_REFERENCE=1): each was counted as a skip.
        rill_testkit::skip("no reference server: the scripts have nothing to be compared with");
        return;
    }

    let mut failed = Vec::new();
    let mut output = String::new();
    let all = scripts();
    assert!(!all.is_empty(), "no scripts in tests/diff");
    for (name, path) in &all {
        let script = format!("tests/diff/{name}.redis");
        if !targets[0].server.is_running() {
            panic!("{} exited before {script}; its log:\n{}\n{output}", targets[0].label, targets[0].server.log());
        }
        let report = run_script(&script, path, &targets, verbose);
        println!(
            "{script}: {}",
            if report.failures == 0 { "ok".into() } else { format!("{} mismatches", report.failures) }
        );
        if report.failures > 0 {
            failed.push(script);
            output.push_str(&report.text);
        }
    }
    if !failed.is_empty() {
        panic!("\n{output}\n\ndifferential: {} of {} scripts failed: {}\n", failed.len(), all.len(), failed.join(", "));
    }
}
