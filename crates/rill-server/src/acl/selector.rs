//! One selector of a user: the commands it allows (with the rule text that describes them),
//! the key patterns with their read/write flags, and the channel patterns. The rules and
//! their error cases are Redis 7/8's (`ACL SETUSER`); the text forms are what `ACL LIST` and
//! `ACL GETUSER` show.

use super::Commands;
use rill_engine::command::{Channels, CommandSpec, Flags, KeyAccess, KeyPlan};
use rill_engine::glob::glob_match;
use std::collections::HashMap;

/// Why a rule was refused: each is one of Redis' `ACL SETUSER` error texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// A command, subcommand or category that does not exist.
    Unknown,
    /// Anything else malformed.
    Syntax,
    /// A key pattern after `allkeys`.
    AfterAllKeys,
    /// A channel pattern after `allchannels`.
    AfterAllChannels,
    /// `<pass` or `!hash` of a password the user does not have.
    NoSuchPassword,
    /// `#hash` or `!hash` that is not 64 lower-case hex digits.
    BadHash,
    /// `+cmd|sub|arg`: a first argument of a subcommand.
    FirstArgOfSubcommand,
}

impl RuleError {
    /// Redis' text for it.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::AfterAllKeys => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::AfterAllChannels => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// What a check refused, in Redis' order of relevance (a later variant wins when several
/// selectors refuse for different reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// The command.
    Command,
    /// The key at this argument index.
    Key(usize),
    /// The channel at this argument index.
    Channel(usize),
}

impl Denied {
    /// What ACL LOG records of this refusal: the reason and the object refused (the command's
    /// name, or the key or channel argument).
    pub fn logged(self, spec: &CommandSpec, args: &[bytes::Bytes]) -> (super::Reason, bytes::Bytes) {
        match self {
            Denied::Command => (super::Reason::Command, bytes::Bytes::from_static(spec.name.as_bytes())),
            Denied::Key(i) => (super::Reason::Key, args.get(i).cloned().unwrap_or_default()),
            Denied::Channel(i) => (super::Reason::Channel, args.get(i).cloned().unwrap_or_default()),
        }
    }

    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    /// Whether `self` says more than `other` (Redis reports the most relevant refusal).
    pub fn outranks(self, other: Denied) -> bool {
        self.rank() > other.rank()
    }
}

/// A key pattern and the access it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    /// The glob.
    pub pattern: Vec<u8>,
    /// Reads allowed (`%R~`, `~`).
    pub read: bool,
    /// Writes allowed (`%W~`, `~`).
    pub write: bool,
    /// The pattern is this many plain bytes and one `*` (`orders:*`, the usual form): it
    /// matches a key starting with them, no glob walk needed.
    prefix: Option<usize>,
    /// A prefix of at most 8 bytes as a word and the mask of its bytes: a key of 8 bytes or
    /// more is matched with one load and compare (checked for every key of every command).
    short_prefix: Option<(u64, u64)>,
}

impl KeyPattern {
    fn new(pattern: &[u8], read: bool, write: bool) -> KeyPattern {
        let prefix = match pattern.split_last() {
            Some((b'*', head)) if !head.is_empty() && !head.iter().any(|c| matches!(c, b'*' | b'?' | b'[' | b'\\')) => {
                Some(head.len())
            }
            _ => None,
        };
        let short_prefix = prefix.filter(|&n| n <= 8).map(|n| {
            let mut word = [0u8; 8];
            word.iter_mut().zip(pattern).for_each(|(w, p)| *w = *p);
            (u64::from_le_bytes(word), u64::MAX >> (64 - 8 * n))
        });
        KeyPattern { pattern: pattern.to_vec(), read, write, prefix, short_prefix }
    }

    /// Whether `key` matches the glob.
    #[inline]
    fn matches(&self, key: &[u8]) -> bool {
        match self.prefix {
            Some(n) => match (self.short_prefix, key.first_chunk::<8>()) {
                (Some((word, mask)), Some(head)) => (u64::from_le_bytes(*head) ^ word) & mask == 0,
                _ => key.get(..n) == self.pattern.get(..n),
            },
            None => glob_match(&self.pattern, key, false),
        }
    }

    fn describe(&self, out: &mut Vec<u8>) {
        match (self.read, self.write) {
            (true, true) => out.push(b'~'),
            (true, false) => out.extend_from_slice(b"%R~"),
            _ => out.extend_from_slice(b"%W~"),
        }
        out.extend_from_slice(&self.pattern);
    }
}

/// One selector (the root one, or one in parentheses).
#[derive(Debug, Clone, Default)]
pub struct Selector {
    /// Every command, past and future, with nothing taken away since (`+@all`).
    all_commands: bool,
    /// Commands added to the server later are allowed (`+@all` was the last reset).
    future: bool,
    /// The commands and subcommands allowed, by the address of their spec, each with how its
    /// keys are found (worked out once here, so the check of a call is one lookup).
    allowed: HashMap<usize, KeyPlan, foldhash::fast::RandomState>,
    /// `+cmd|arg` for commands without subcommands: the first arguments allowed.
    first_args: HashMap<usize, Vec<Vec<u8>>, foldhash::fast::RandomState>,
    /// The command rules since the last `+@all`/`-@all`, as ACL LIST shows them.
    rules: String,
    /// `allkeys` / `~*`.
    pub all_keys: bool,
    /// Key patterns, in the order added.
    pub patterns: Vec<KeyPattern>,
    /// `allchannels` / `&*`.
    pub all_channels: bool,
    /// Channel patterns, in the order added.
    pub channels: Vec<Vec<u8>>,
}

fn id(spec: &CommandSpec) -> usize {
    spec as *const CommandSpec as usize
}

/// Redis' `isspace` or NUL: not allowed in patterns and user names.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0))
}

impl Selector {
    /// An empty selector: nothing allowed, channels as `acl-pubsub-default` says.
    pub fn new(all_channels: bool) -> Selector {
        Selector { all_channels, ..Selector::default() }
    }

    /// Whether it allows everything (the fast path of every check).
    pub fn unrestricted(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels
    }

    /// Apply one rule.
    pub fn set(&mut self, cmds: &Commands, op: &[u8]) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"allkeys" | b"~*" => {
                self.all_keys = true;
                self.patterns.clear();
            }
            b"resetkeys" => {
                self.all_keys = false;
                self.patterns.clear();
            }
            b"allchannels" | b"&*" => {
                self.all_channels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            b"allcommands" | b"+@all" => {
                self.allowed = cmds.all.iter().map(|s| (id(s), s.key_plan())).collect();
                self.all_commands = true;
                self.future = true;
                self.rules.clear();
                self.first_args.clear();
            }
            b"nocommands" | b"-@all" => {
                self.allowed.clear();
                self.all_commands = false;
                self.future = false;
                self.rules.clear();
                self.first_args.clear();
            }
            _ => return self.set_other(cmds, op),
        }
        Ok(())
    }

    fn set_other(&mut self, cmds: &Commands, op: &[u8]) -> Result<(), RuleError> {
        match op.first() {
            Some(b'~' | b'%') => self.add_key_pattern(op),
            Some(b'&') => {
                if self.all_channels {
                    return Err(RuleError::AfterAllChannels);
                }
                let pattern = op.get(1..).unwrap_or_default();
                if has_spaces(pattern) {
                    return Err(RuleError::Syntax);
                }
                if !self.channels.iter().any(|c| c == pattern) {
                    self.channels.push(pattern.to_vec());
                }
                Ok(())
            }
            Some(&sign @ (b'+' | b'-')) if op.get(1) == Some(&b'@') => {
                let name = String::from_utf8_lossy(op.get(2..).unwrap_or_default()).to_ascii_lowercase();
                if !super::CATEGORIES.contains(&name.as_str()) {
                    return Err(RuleError::Unknown);
                }
                let allow = sign == b'+';
                self.update_rules(&format!("@{name}"), allow);
                let tag = format!("@{name}");
                for spec in cmds.all.iter().filter(|s| s.acl.contains(&tag.as_str())) {
                    self.change(spec, allow);
                }
                Ok(())
            }
            Some(b'+') => self.allow_command(cmds, op),
            Some(b'-') => {
                let name = std::str::from_utf8(op.get(1..).unwrap_or_default()).map_err(|_| RuleError::Unknown)?;
                let spec = cmds.lookup(name).ok_or(RuleError::Unknown)?;
                self.change(spec, false);
                self.update_rules(spec.name, false);
                Ok(())
            }
            _ => Err(RuleError::Syntax),
        }
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::AfterAllKeys);
        }
        let (mut read, mut write, mut offset) = (false, false, 1);
        if op.first() == Some(&b'%') {
            let mut ok = true;
            while let Some(&c) = op.get(offset) {
                match c.to_ascii_uppercase() {
                    b'R' if !read => read = true,
                    b'W' if !write => write = true,
                    b'~' => {
                        offset += 1;
                        break;
                    }
                    _ => {
                        ok = false;
                        break;
                    }
                }
                offset += 1;
            }
            if !(read || write) || !ok {
                return Err(RuleError::Syntax);
            }
        } else {
            (read, write) = (true, true);
        }
        let pattern = op.get(offset..).unwrap_or_default();
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.patterns.iter_mut().find(|p| p.pattern == pattern) {
            Some(p) => {
                p.read |= read;
                p.write |= write;
            }
            None => self.patterns.push(KeyPattern::new(pattern, read, write)),
        }
        self.all_keys = false;
        Ok(())
    }

    /// `+cmd`, `+cmd|sub`, `+cmd|firstarg`.
    fn allow_command(&mut self, cmds: &Commands, op: &[u8]) -> Result<(), RuleError> {
        let name = std::str::from_utf8(op.get(1..).unwrap_or_default()).map_err(|_| RuleError::Unknown)?;
        let Some(bar) = name.rfind('|') else {
            let spec = cmds.lookup(name).ok_or(RuleError::Unknown)?;
            self.change(spec, true);
            self.update_rules(spec.name, true);
            return Ok(());
        };
        let (base, sub) = (name.get(..bar).unwrap_or_default(), name.get(bar + 1..).unwrap_or_default());
        let spec = cmds.lookup(base).ok_or(RuleError::Unknown)?;
        if cmds.parent(spec).is_some() {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if spec.is_container() {
            let subspec = cmds.lookup(name).ok_or(RuleError::Unknown)?;
            self.change(subspec, true);
        } else {
            tracing::warn!(
                "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{name})"
            );
            let list = self.first_args.entry(id(spec)).or_default();
            if !list.iter().any(|a| a.eq_ignore_ascii_case(sub.as_bytes())) {
                list.push(sub.as_bytes().to_vec());
            }
        }
        self.update_rules(name, true);
        Ok(())
    }

    /// Allow or deny a command and, for a container, all its subcommands.
    fn change(&mut self, spec: &'static CommandSpec, allow: bool) {
        self.set_bit(spec, allow);
        self.first_args.remove(&id(spec));
        for sub in spec.subcommands {
            self.set_bit(sub, allow);
        }
    }

    fn set_bit(&mut self, spec: &CommandSpec, allow: bool) {
        if allow {
            self.allowed.insert(id(spec), spec.key_plan());
        } else {
            self.allowed.remove(&id(spec));
            self.all_commands = false;
        }
    }

    /// Record a command rule: an earlier rule for the same command (or one of its
    /// subcommands) is dropped, and this one goes last.
    fn update_rules(&mut self, rule: &str, allow: bool) {
        let new = rule.to_ascii_lowercase();
        let kept: Vec<&str> = self
            .rules
            .split(' ')
            .filter(|r| !r.is_empty())
            .filter(|r| {
                let name = r.get(1..).unwrap_or_default();
                !(name == new
                    || (name.len() > new.len()
                        && name.starts_with(&new)
                        && name.as_bytes().get(new.len()) == Some(&b'|')))
            })
            .collect();
        let mut rules = kept.join(" ");
        if !rules.is_empty() {
            rules.push(' ');
        }
        rules.push(if allow { '+' } else { '-' });
        rules.push_str(&new);
        self.rules = rules;
    }

    /// The command rules as ACL GETUSER `commands` shows them.
    pub fn describe_commands(&self) -> String {
        let base = if self.future { "+@all" } else { "-@all" };
        if self.rules.is_empty() {
            base.to_string()
        } else {
            format!("{base} {}", self.rules)
        }
    }

    /// The key patterns as ACL GETUSER `keys` shows them.
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, p) in self.patterns.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            p.describe(&mut out);
        }
        out
    }

    /// The channel patterns as ACL GETUSER `channels` shows them.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// The whole selector as ACL LIST shows it.
    pub fn describe(&self, out: &mut Vec<u8>) {
        if self.all_keys {
            out.extend_from_slice(b"~* ");
        } else {
            for p in &self.patterns {
                p.describe(out);
                out.push(b' ');
            }
        }
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands().as_bytes());
    }

    /// Whether the selector allows `spec` with `args` (name at index 0).
    pub fn check(&self, cmds: &Commands, spec: &'static CommandSpec, args: &[bytes::Bytes]) -> Result<(), Denied> {
        let plan = match self.allowed.get(&id(spec)) {
            Some(&plan) => plan,
            None if self.all_commands || spec.flags.has(Flags::NO_AUTH) => KeyPlan::Walk,
            None => {
                let idx = if cmds.parent(spec).is_some() { 2 } else { 1 };
                let allowed_arg = args.len() >= 2
                    && self.first_args.get(&id(spec)).is_some_and(|list| {
                        args.get(idx).is_some_and(|a| list.iter().any(|f| f.eq_ignore_ascii_case(a)))
                    });
                if !allowed_arg {
                    return Err(Denied::Command);
                }
                KeyPlan::Walk
            }
        };
        if !self.all_keys {
            plan.try_keys(spec, args, |i, access| {
                if self.key_allowed(args.get(i).map(|a| &a[..]).unwrap_or_default(), access) {
                    Ok(())
                } else {
                    Err(Denied::Key(i))
                }
            })?;
        }
        if !self.all_channels && spec.channels != Channels::None {
            let (range, pattern) = match spec.channels {
                Channels::Publish => (1..2.min(args.len()), false),
                Channels::PatternSubscribe => (1..args.len(), true),
                _ => (1..args.len(), false),
            };
            for i in range {
                let channel = args.get(i).map(|a| &a[..]).unwrap_or_default();
                if !self.channel_allowed(channel, pattern) {
                    return Err(Denied::Channel(i));
                }
            }
        }
        Ok(())
    }

    /// Whether every key may be accessed as `access` says: `allkeys`, or a pattern `*` whose
    /// permissions cover it (`~*`, or `%R~*` for reading).
    pub fn all_keys_allowed(&self, access: KeyAccess) -> bool {
        self.all_keys
            || self.patterns.iter().any(|p| (p.read || !access.read) && (p.write || !access.write) && p.pattern == b"*")
    }

    /// Whether a key may be accessed as `access` says.
    #[inline]
    pub fn key_allowed(&self, key: &[u8], access: KeyAccess) -> bool {
        if self.all_keys {
            return true;
        }
        // A loop rather than `any`, which stays a call of its own in the check of every key.
        for p in &self.patterns {
            if (p.read || !access.read) && (p.write || !access.write) && p.matches(key) {
                return true;
            }
        }
        false
    }

    /// Whether a channel (or, `pattern`, a pattern subscription) is allowed.
    pub fn channel_allowed(&self, channel: &[u8], pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|c| if pattern { c == channel } else { glob_match(c, channel, false) })
    }
}
