//! The script language: lines, directives and modifiers (`tests/diff/README.md`).

use super::normalise::TimeFields;

#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Modifiers {
    pub(super) skip_7_0: bool,
    /// `@ignore=WHY`: run, reply not compared; the reason is required.
    pub(super) ignore: Option<String>,
    /// `@type=WHY`: only the reply's type byte is compared; the reason is required.
    pub(super) type_only: Option<String>,
    /// `@times`: the clock readings in the reply are blanked (`normalise::TimeFields`).
    pub(super) times: bool,
    pub(super) sort: bool,
    pub(super) sort_pairs: bool,
    pub(super) nowait: bool,
    /// The command sends no reply (CLIENT REPLY OFF/SKIP): send, read nothing. A server that
    /// replies anyway is caught by the next command's comparison.
    pub(super) noreply: bool,
    /// Map keys whose pairs are dropped before comparing.
    pub(super) ignore_fields: Vec<Vec<u8>>,
    /// `@let=NAME`: keep the reply (an integer or a string), per server, for `{NAME}`.
    pub(super) let_name: Option<String>,
}

impl Modifiers {
    /// Applies the modifier `word`: `Ok(false)` if it is not one, an error if it is one used
    /// wrongly.
    pub(super) fn apply(&mut self, word: &str) -> Result<bool, String> {
        let (name, value) = match word.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (word, None),
        };
        let reason = |value: Option<&str>| match value.map(str::trim) {
            Some(why) if !why.is_empty() => Ok(why.to_owned()),
            _ => Err(format!("{name} needs a reason: {name}=\"why this reply cannot be compared\"")),
        };
        match (name, value) {
            ("@skip-7.0", None) => self.skip_7_0 = true,
            ("@ignore", _) => self.ignore = Some(reason(value)?),
            ("@type", _) => self.type_only = Some(reason(value)?),
            ("@times", None) => self.times = true,
            ("@sort", None) => self.sort = true,
            ("@sort-pairs", None) => self.sort_pairs = true,
            ("@nowait", None) => self.nowait = true,
            ("@noreply", None) => self.noreply = true,
            ("@ignore-fields", Some(list)) if !list.is_empty() => {
                self.ignore_fields.extend(list.split(',').map(|f| f.as_bytes().to_vec()))
            }
            ("@let", Some(var)) if !var.is_empty() => self.let_name = Some(var.to_owned()),
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn is_empty(&self) -> bool {
        *self == Modifiers::default()
    }
}

#[derive(Debug)]
pub(super) enum Step {
    /// `vars`: the arguments that are `{NAME}` of an earlier `@let=NAME`, by position, which
    /// each server gets its own value for.
    Command {
        args: Vec<Vec<u8>>,
        vars: Vec<(usize, String)>,
        mods: Modifiers,
    },
    Conn(String),
    Hello(u8),
    Sleep(u64),
    /// `@wait-blocked`: until every command sent with `@nowait` and not awaited is blocked.
    WaitBlocked,
    Await,
    /// `@read`: one more frame the server sent on this connection without a request of its
    /// own (a pub/sub message, the second confirmation of `SUBSCRIBE a b`).
    Read,
}

#[derive(Debug)]
pub(super) struct Line {
    pub(super) number: usize,
    pub(super) text: String,
    pub(super) step: Step,
}

/// Parses a script; errors name the line.
pub(super) fn parse_script(source: &str) -> Result<Vec<Line>, String> {
    let mut lines = Vec::new();
    let mut pending = Modifiers::default();
    let mut defined: Vec<String> = Vec::new();
    // `@skip-7.0-script` before the first step: no line is sent to Redis 7.0.15.
    let mut whole_skip = false;
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
        if first == "@skip-7.0-script" {
            if !lines.is_empty() || !pending.is_empty() || words.len() > 1 {
                return Err(err("@skip-7.0-script comes alone, before the first step".into()));
            }
            whole_skip = true;
            continue;
        }
        let step = if first.starts_with('@') && !pending.clone().apply(&first).map_err(err)? {
            let arg = word(1);
            let step = match (first.as_str(), arg) {
                ("@conn", Some(name)) => Step::Conn(name),
                ("@resp3", None) => Step::Hello(3),
                ("@resp2", None) => Step::Hello(2),
                ("@sleep", Some(ms)) => Step::Sleep(ms.parse().map_err(|_| err("bad @sleep".into()))?),
                ("@await", None) => Step::Await,
                ("@wait-blocked", None) => Step::WaitBlocked,
                ("@read", None) => Step::Read,
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
            mods.skip_7_0 |= whole_skip;
            let mut args = words.into_iter().peekable();
            while let Some(w) = args.peek() {
                let w = String::from_utf8_lossy(w).into_owned();
                if !w.starts_with('@') {
                    break;
                }
                // No command starts with `@`: an unknown modifier would otherwise be sent as
                // one, and every server's "unknown command" would agree.
                if !mods.apply(&w).map_err(err)? {
                    return Err(err(format!("unknown modifier {w}")));
                }
                args.next();
            }
            let args: Vec<Vec<u8>> = args.collect();
            if args.is_empty() {
                // Modifiers alone on a line apply to the next command.
                pending = mods;
                continue;
            }
            let vars: Vec<(usize, String)> = args
                .iter()
                .enumerate()
                .filter_map(|(i, a)| {
                    let name = std::str::from_utf8(a).ok()?.strip_prefix('{')?.strip_suffix('}')?;
                    defined.iter().any(|d| d == name).then(|| (i, name.to_owned()))
                })
                .collect();
            if mods.times && TimeFields::of(&args).is_none() {
                return Err(err("@times knows no clock readings in this command's reply".into()));
            }
            if let Some(name) = &mods.let_name {
                if mods.nowait || mods.noreply {
                    return Err(err("@let needs the reply at once: not with @nowait or @noreply".into()));
                }
                defined.push(name.clone());
            }
            Step::Command { args, vars, mods }
        };
        lines.push(Line { number, text: text.to_owned(), step });
    }
    if !pending.is_empty() {
        return Err("modifiers at the end of the script apply to no command".into());
    }
    Ok(lines)
}

/// Splits a line the way redis-cli splits what the user types (Redis' `sdssplitargs`).
fn split_args(line: &str) -> Result<Vec<Vec<u8>>, String> {
    rill_engine::util::split_args(line.as_bytes()).map_err(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_parser() {
        let lines = parse_script(
            "# comment\n@conn b\n@sort KEYS *\n@ignore=\"a reason\"\n@skip-7.0\nSET \"a b\" 'c\\'d' \"\\x41\\n\"\n@sleep 5\n@nowait BLPOP q 1\n@await\n@resp3\n",
        )
        .unwrap();
        assert_eq!(lines.len(), 7);
        assert!(matches!(&lines[0].step, Step::Conn(n) if n == "b"));
        assert!(matches!(&lines[1].step, Step::Command { mods, args, .. } if mods.sort && args[0] == b"KEYS"));
        match &lines[2].step {
            Step::Command { args, mods, .. } => {
                assert!(mods.ignore.as_deref() == Some("a reason") && mods.skip_7_0 && !mods.sort);
                assert_eq!(args, &vec![b"SET".to_vec(), b"a b".to_vec(), b"c'd".to_vec(), b"A\n".to_vec()]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(lines[3].step, Step::Sleep(5)));
        assert!(matches!(&lines[4].step, Step::Command { mods, .. } if mods.nowait));
        assert!(matches!(lines[5].step, Step::Await));
        assert!(matches!(lines[6].step, Step::Hello(3)));
        assert!(matches!(parse_script("@wait-blocked\n").unwrap()[0].step, Step::WaitBlocked));
        assert!(matches!(parse_script("@read\n").unwrap()[0].step, Step::Read));
        assert!(parse_script("@read 2\n").is_err());
        assert!(parse_script("@wait-blocked 5\n").is_err());
        assert!(parse_script("@bogus\n").is_err());
        assert!(parse_script("SET \"a\n").is_err());
        assert!(parse_script("@sort\n").is_err());
        // `{NAME}` is a variable once `@let=NAME` defined it, and a literal before.
        let lines = parse_script("GET {id}\n@let=id CLIENT ID\nCLIENT KILL ID {id}\n").unwrap();
        assert!(matches!(&lines[0].step, Step::Command { vars, .. } if vars.is_empty()));
        assert!(matches!(&lines[1].step, Step::Command { mods, .. } if mods.let_name.as_deref() == Some("id")));
        assert!(matches!(&lines[2].step, Step::Command { vars, .. } if vars == &[(3, "id".to_owned())]));
        assert!(parse_script("@let=x @nowait BLPOP q 0\n").is_err());
        // A reply left uncompared says why; an unknown modifier is not sent as a command.
        for bad in
            ["@ignore CLIENT ID\n", "@type=\"\" TIME\n", "@ignore\nCLIENT ID\n", "@bogus GET k\n", "@times GET k\n"]
        {
            assert!(parse_script(bad).is_err(), "{bad}");
        }
        let lines = parse_script("@type=\"random\" SPOP s\n@times XPENDING s g - + 10\n").unwrap();
        assert!(matches!(&lines[0].step, Step::Command { mods, .. } if mods.type_only.as_deref() == Some("random")));
        assert!(matches!(&lines[1].step, Step::Command { mods, .. } if mods.times));
    }
}
