//! Differential tests: every script in `tests/diff/*.redis` runs against rill and against the
//! reference servers (Redis 8.2.3 and Redis 7.0.15), and the replies are compared command by
//! command, as raw RESP bytes.
//!
//! # Script format
//!
//! One command per line, split into arguments like redis-cli does: whitespace separates
//! arguments; `"..."` honours `\n \r \t \b \a \\ \"` and `\xHH`; `'...'` honours only `\'`; a
//! closing quote must be followed by whitespace or the end of the line. Blank lines and lines
//! whose first non-blank character is `#` are ignored.
//!
//! Lines starting with `@` are directives:
//!
//! | directive      | effect |
//! | -------------- | ------ |
//! | `@conn NAME`   | switch to connection NAME (opened on first use on every server; the first connection is `default`) |
//! | `@resp3`       | send `HELLO 3` on the current connection; the reply must be a map on every server, its contents are not compared |
//! | `@resp2`       | the same with `HELLO 2` |
//! | `@sleep MS`    | pause MS milliseconds (let a blocked client block before another connection writes) |
//! | `@await`       | read the oldest reply still pending on the current connection (see `@nowait`) and compare it |
//!
//! Modifiers apply to one command. They stand either on the command's own line, before the
//! command (`@sort KEYS *`), or alone on the line(s) just above it:
//!
//! | modifier      | effect |
//! | ------------- | ------ |
//! | `@skip-7.0`   | not sent to Redis 7.0.15 at all (7.0 lacks it or answers differently; 8.x is the reference). The script must leave the same state on 7.0 either way. |
//! | `@ignore`     | executed everywhere, reply not compared (run ids, times, client ids) |
//! | `@type`       | compare only the reply's type byte (`+ - : $ * % ~ _ ...`) |
//! | `@sort`       | compare an array/set reply as a multiset of elements, a map as a set of pairs; nested arrays too (SCAN) |
//! | `@sort-pairs` | compare a flat array as a set of (even, odd) pairs: RESP2 HGETALL, CONFIG GET; nested arrays sorted |
//! | `@nowait`     | send without reading the reply; read it later with `@await` (blocking commands) |
//! | `@noreply`    | send and read nothing: the command has no reply (CLIENT REPLY OFF / SKIP) |
//! | `@ignore-fields=a,b` | drop these keys (and their values) from a map or flat key/value array before comparing: `HELLO`'s `version,id,modules` |
//!
//! Comparison: rill's reply must equal Redis 8.2.3's. Independently, Redis 7.0.15's reply must
//! equal Redis 8.2.3's on every line not marked `@skip-7.0`, so a script cannot silently depend on
//! a version difference. Before each script every server gets `FLUSHALL` and all connections
//! are new.
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

use rill_testkit::{escape, parse_value, split_aggregate, RawClient, ReferenceServer, Server};
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Mismatches printed in full per script; the rest are counted. `RILL_DIFF_MAX` overrides.
const MAX_REPORTED_PER_SCRIPT: usize = 15;

fn max_reported() -> usize {
    std::env::var("RILL_DIFF_MAX").ok().and_then(|v| v.parse().ok()).unwrap_or(MAX_REPORTED_PER_SCRIPT)
}

#[derive(Debug, Default, Clone)]
struct Modifiers {
    skip_7_0: bool,
    ignore: bool,
    type_only: bool,
    sort: bool,
    sort_pairs: bool,
    nowait: bool,
    /// The command sends no reply (CLIENT REPLY OFF/SKIP): send, read nothing. A server that
    /// replies anyway is caught by the next command's comparison.
    noreply: bool,
    /// Map keys whose pairs are dropped before comparing.
    ignore_fields: Vec<Vec<u8>>,
}

impl Modifiers {
    /// Applies `@name`; false if it is not a modifier.
    fn apply(&mut self, name: &str) -> bool {
        match name {
            "@skip-7.0" => self.skip_7_0 = true,
            "@ignore" => self.ignore = true,
            "@type" => self.type_only = true,
            "@sort" => self.sort = true,
            "@sort-pairs" => self.sort_pairs = true,
            "@nowait" => self.nowait = true,
            "@noreply" => self.noreply = true,
            _ => match name.strip_prefix("@ignore-fields=") {
                Some(list) => self.ignore_fields.extend(list.split(',').map(|f| f.as_bytes().to_vec())),
                None => return false,
            },
        }
        true
    }

    fn is_empty(&self) -> bool {
        !(self.skip_7_0
            || self.ignore
            || self.type_only
            || self.sort
            || self.sort_pairs
            || self.nowait
            || self.noreply
            || !self.ignore_fields.is_empty())
    }
}

#[derive(Debug)]
enum Step {
    Command { args: Vec<Vec<u8>>, mods: Modifiers },
    Conn(String),
    Hello(u8),
    Sleep(u64),
    Await,
}

#[derive(Debug)]
struct Line {
    number: usize,
    text: String,
    step: Step,
}

/// Parses a script; errors name the line.
fn parse_script(source: &str) -> Result<Vec<Line>, String> {
    let mut lines = Vec::new();
    let mut pending = Modifiers::default();
    for (i, raw) in source.lines().enumerate() {
        let number = i + 1;
        let text = raw.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let err = |msg: String| format!("line {number}: {msg}: {text}");
        let words = split_args(text).map_err(err)?;
        let word = |i: usize| words.get(i).map(|w| String::from_utf8_lossy(w).into_owned());
        let first = word(0).unwrap_or_default();
        let step = if first.starts_with('@') && !pending.clone().apply(&first) {
            let arg = word(1);
            let step = match (first.as_str(), arg) {
                ("@conn", Some(name)) => Step::Conn(name),
                ("@resp3", None) => Step::Hello(3),
                ("@resp2", None) => Step::Hello(2),
                ("@sleep", Some(ms)) => Step::Sleep(ms.parse().map_err(|_| err("bad @sleep".into()))?),
                ("@await", None) => Step::Await,
                _ => return Err(err("unknown directive or wrong arguments".into())),
            };
            if words.len() > 2 {
                return Err(err("too many arguments to directive".into()));
            }
            if !pending.is_empty() {
                return Err(err("modifiers must be followed by a command".into()));
            }
            step
        } else {
            let mut mods = std::mem::take(&mut pending);
            let mut args = words.into_iter().peekable();
            while let Some(w) = args.peek() {
                let w = String::from_utf8_lossy(w).into_owned();
                if !w.starts_with('@') || !mods.apply(&w) {
                    break;
                }
                args.next();
            }
            let args: Vec<Vec<u8>> = args.collect();
            if args.is_empty() {
                // Modifiers alone on a line apply to the next command.
                pending = mods;
                continue;
            }
            Step::Command { args, mods }
        };
        lines.push(Line { number, text: text.to_owned(), step });
    }
    if !pending.is_empty() {
        return Err("modifiers at the end of the script apply to no command".into());
    }
    Ok(lines)
}

/// Splits a line the way redis-cli splits what the user types.
fn split_args(line: &str) -> Result<Vec<Vec<u8>>, String> {
    let bytes = line.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() {
            return Ok(args);
        }
        let mut arg = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            let c = bytes.get(i).copied();
            if in_double {
                match c {
                    None => return Err("unbalanced double quote".into()),
                    Some(b'\\') if bytes.get(i + 1) == Some(&b'x') => {
                        let hex = bytes.get(i + 2..i + 4).and_then(|h| std::str::from_utf8(h).ok());
                        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                            Some(b) => {
                                arg.push(b);
                                i += 3;
                            }
                            None => {
                                arg.push(b'x');
                                i += 1;
                            }
                        }
                    }
                    Some(b'\\') if i + 1 < bytes.len() => {
                        i += 1;
                        arg.push(match bytes[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                    }
                    Some(b'"') => {
                        if bytes.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                            return Err("closing quote must be followed by a space".into());
                        }
                        i += 1;
                        break;
                    }
                    Some(b) => arg.push(b),
                }
            } else if in_single {
                match c {
                    None => return Err("unbalanced single quote".into()),
                    Some(b'\\') if bytes.get(i + 1) == Some(&b'\'') => {
                        arg.push(b'\'');
                        i += 1;
                    }
                    Some(b'\'') => {
                        if bytes.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                            return Err("closing quote must be followed by a space".into());
                        }
                        i += 1;
                        break;
                    }
                    Some(b) => arg.push(b),
                }
            } else {
                match c {
                    None => break,
                    Some(b) if b.is_ascii_whitespace() => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(b) => arg.push(b),
                }
            }
            i += 1;
        }
        args.push(arg);
    }
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
}

impl<'a> Session<'a> {
    fn conn(&mut self, name: &str) -> &mut Conn {
        let port = self.target.server.port;
        self.conns.entry(name.to_owned()).or_insert_with(|| Conn {
            client: RawClient::try_connect(port).map_err(|e| format!("cannot connect: {e}")),
            pending: VecDeque::new(),
        })
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

/// Reply bytes normalised according to the modifiers.
fn normalise(reply: &[u8], mods: &Modifiers) -> Vec<u8> {
    if mods.type_only {
        return reply.get(..1).unwrap_or_default().to_vec();
    }
    if !mods.ignore_fields.is_empty() {
        if let Some((header, elems)) = split_aggregate(reply) {
            let kept: Vec<Vec<u8>> = elems
                .chunks(2)
                .filter(|kv| {
                    let key = parse_value(&kv[0]).ok();
                    let key = key.as_ref().and_then(|k| k.as_bytes());
                    !key.is_some_and(|k| mods.ignore_fields.iter().any(|f| f == k))
                })
                .map(|kv| kv.concat())
                .collect();
            let count = if header.first() == Some(&b'%') { kept.len() } else { kept.len() * 2 };
            let mut out = vec![header[0]];
            out.extend(format!("{count}\r\n").into_bytes());
            out.extend(kept.concat());
            let rest = Modifiers { ignore_fields: Vec::new(), ..mods.clone() };
            return normalise(&out, &rest);
        }
    }
    if mods.sort || mods.sort_pairs {
        if let Some((header, elems)) = split_aggregate(reply) {
            let pairwise = mods.sort_pairs || header.first() == Some(&b'%');
            // Nested aggregates are sorted too: SCAN's `[cursor, [keys...]]`.
            let nested = Modifiers { sort: true, sort_pairs: false, ..Default::default() };
            let elems: Vec<Vec<u8>> = elems.iter().map(|e| normalise(e, &nested)).collect();
            let mut groups: Vec<Vec<u8>> = if pairwise { elems.chunks(2).map(|c| c.concat()).collect() } else { elems };
            groups.sort();
            let mut out = header;
            for g in groups {
                out.extend(g);
            }
            return out;
        }
    }
    reply.to_vec()
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
    let mut sessions: Vec<Session> = targets.iter().map(|target| Session { target, conns: HashMap::new() }).collect();
    let mut current = String::from("default");
    let by_number: HashMap<usize, &Line> = lines.iter().map(|l| (l.number, l)).collect();

    for line in &lines {
        match &line.step {
            Step::Conn(name) => current = name.clone(),
            Step::Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
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
            Step::Command { args, mods } => {
                let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                let mut replies: Vec<Option<Vec<u8>>> = Vec::new();
                for s in sessions.iter_mut() {
                    if mods.skip_7_0 && s.target.is_7_0 {
                        replies.push(None);
                        continue;
                    }
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
                        replies.push(Some(conn.read()));
                    }
                }
                if verbose {
                    print_verbose(name, line, &sessions, &replies);
                }
                compare(&mut report, name, line, mods, &sessions, &replies);
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
    if mods.ignore {
        return;
    }
    let labelled: Vec<(&Target, &Vec<u8>)> =
        sessions.iter().zip(replies).filter_map(|(s, r)| r.as_ref().map(|r| (s.target, r))).collect();
    let Some(&(subject, subject_reply)) = labelled.first().filter(|(t, _)| std::ptr::eq(*t, sessions[0].target)) else {
        return;
    };
    let reference = labelled.iter().skip(1).find(|(t, _)| !t.is_7_0).or_else(|| labelled.get(1));
    if let Some(&(reference, reference_reply)) = reference {
        if normalise(subject_reply, mods) != normalise(reference_reply, mods) {
            report.mismatch(
                script,
                line,
                &format!("{} differs from {}", subject.label, reference.label),
                &[(&subject.label, subject_reply), (&reference.label, reference_reply)],
            );
        }
        // Script validity: the two reference versions must agree unless the line says otherwise.
        for &(other, other_reply) in labelled.iter().skip(1) {
            if !std::ptr::eq(other, reference) && normalise(other_reply, mods) != normalise(reference_reply, mods) {
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
        Target { label: "rill".into(), server: Server::rill(), is_7_0: false }
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

#[test]
fn script_parser() {
    let lines = parse_script(
        "# comment\n@conn b\n@sort KEYS *\n@ignore\n@skip-7.0\nSET \"a b\" 'c\\'d' \"\\x41\\n\"\n@sleep 5\n@nowait BLPOP q 1\n@await\n@resp3\n",
    )
    .unwrap();
    assert_eq!(lines.len(), 7);
    assert!(matches!(&lines[0].step, Step::Conn(n) if n == "b"));
    assert!(matches!(&lines[1].step, Step::Command { mods, args } if mods.sort && args[0] == b"KEYS"));
    match &lines[2].step {
        Step::Command { args, mods } => {
            assert!(mods.ignore && mods.skip_7_0 && !mods.sort);
            assert_eq!(args, &vec![b"SET".to_vec(), b"a b".to_vec(), b"c'd".to_vec(), b"A\n".to_vec()]);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(lines[3].step, Step::Sleep(5)));
    assert!(matches!(&lines[4].step, Step::Command { mods, .. } if mods.nowait));
    assert!(matches!(lines[5].step, Step::Await));
    assert!(matches!(lines[6].step, Step::Hello(3)));
    assert!(parse_script("@bogus\n").is_err());
    assert!(parse_script("SET \"a\n").is_err());
    assert!(parse_script("@sort\n").is_err());
}

#[test]
fn normalise_sorts() {
    let sorted = normalise(b"*2\r\n$1\r\nb\r\n$1\r\na\r\n", &Modifiers { sort: true, ..Default::default() });
    assert_eq!(sorted, b"*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    let pairs = normalise(
        b"*4\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n2\r\n",
        &Modifiers { sort_pairs: true, ..Default::default() },
    );
    assert_eq!(pairs, b"*4\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n1\r\n");
    let mut mods = Modifiers::default();
    assert!(mods.apply("@ignore-fields=id,version"));
    let map = normalise(b"%3\r\n+id\r\n:7\r\n+proto\r\n:3\r\n+version\r\n$1\r\n8\r\n", &mods);
    assert_eq!(map, b"%1\r\n+proto\r\n:3\r\n");
    let flat = normalise(b"*4\r\n+id\r\n:7\r\n+proto\r\n:2\r\n", &mods);
    assert_eq!(flat, b"*2\r\n+proto\r\n:2\r\n");
}
