//! Access control: users (passwords, on/off, selectors of commands, keys and channels), the
//! checks every command passes before it runs, and the ACL log — Redis 7/8 semantics, syntax
//! and texts (`ACL SETUSER` rules, `-NOPERM` errors, `ACL LIST` lines).
//!
//! The users live in a [`Registry`] of their own, beside the state lock, not inside it: the
//! busy path answers a few commands while a script holds the state (SCRIPT KILL, SHUTDOWN
//! NOSAVE) and checks them first, as Redis does. A connection keeps its user as an
//! `Arc<User>` with the registry's generation; any change of any user moves the generation,
//! and a connection looks its user up again (by name) at its next command. The check of an
//! unrestricted user (`+@all ~* &*`, the default user) is one atomic load and one flag.
//!
//! Categories and key access come from the one command table (`CommandSpec::acl`,
//! `key_specs`, `channels`), so a new command is covered by its spec.

mod log;
mod selector;

pub use log::{AclLog, Context, LogEntry, Origin, Reason};
pub use selector::{has_spaces, Denied, RuleError, Selector};

use bytes::Bytes;
use rill_engine::command::{CommandSpec, CommandTable};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// The command categories, in Redis' order (`ACL CAT`).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Every command and subcommand under its own (not renamed) name.
#[derive(Debug, Default)]
pub struct Commands {
    by_name: HashMap<String, &'static CommandSpec>,
    /// Every command, each container followed by its subcommands.
    pub all: Vec<&'static CommandSpec>,
    parents: HashMap<usize, &'static CommandSpec>,
}

impl Commands {
    /// From the table of commands under their own names.
    pub fn new(table: &CommandTable) -> Commands {
        let mut c = Commands::default();
        for &spec in table.all() {
            c.by_name.insert(spec.name.to_string(), spec);
            c.all.push(spec);
            for sub in spec.subcommands {
                c.by_name.insert(sub.name.to_string(), sub);
                c.all.push(sub);
                c.parents.insert(sub as *const CommandSpec as usize, spec);
            }
        }
        c
    }

    /// A command (`get`) or subcommand (`config|get`) by name, any case.
    pub fn lookup(&self, name: &str) -> Option<&'static CommandSpec> {
        if name.matches('|').count() > 1 {
            return None;
        }
        self.by_name.get(&name.to_ascii_lowercase()).copied()
    }

    /// The container of a subcommand.
    pub fn parent(&self, spec: &CommandSpec) -> Option<&'static CommandSpec> {
        self.parents.get(&(spec as *const CommandSpec as usize)).copied()
    }
}

/// One user.
#[derive(Debug, Clone)]
pub struct User {
    /// Its name.
    pub name: Bytes,
    /// `on` (else `off`: it cannot authenticate).
    pub enabled: bool,
    /// Any password is accepted.
    pub nopass: bool,
    /// `skip-sanitize-payload` (else `sanitize-payload`).
    pub skip_sanitize: bool,
    /// SHA-256 of each password, 64 lower-case hex digits.
    pub passwords: Vec<String>,
    /// The root selector first, then the ones in parentheses.
    pub selectors: Vec<Selector>,
}

/// The outcome of a rule list applied to a user: Redis' error text on failure.
pub type SetResult = Result<(), String>;

/// SHA-256 of a password as 64 lower-case hex digits (how users keep passwords).
pub fn hash_password(password: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(password).iter().map(|b| format!("{b:02x}")).collect()
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// The stored form of a password rule's argument: a cleartext password (`>`, `<`) hashed, or
/// a hash (`#`, `!`) checked.
fn password_or_hash(cleartext: bool, rest: &[u8]) -> Result<String, RuleError> {
    if cleartext {
        Ok(hash_password(rest))
    } else if valid_hash(rest) {
        Ok(String::from_utf8_lossy(rest).into_owned())
    } else {
        Err(RuleError::BadHash)
    }
}

impl User {
    /// A new user as `ACL SETUSER name` makes it: off, no password, nothing allowed.
    pub fn new(name: &[u8], all_channels: bool) -> User {
        User {
            name: Bytes::copy_from_slice(name),
            enabled: false,
            nopass: false,
            skip_sanitize: false,
            passwords: Vec::new(),
            selectors: vec![Selector::new(all_channels)],
        }
    }

    /// The default user of a new server: `on nopass ~* &* +@all`.
    pub fn default_user(cmds: &Commands) -> User {
        let mut u = User::new(b"default", false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = u.set(cmds, op.as_bytes(), false);
        }
        u
    }

    /// Whether every command, key and channel is allowed (the check can be skipped).
    pub fn unrestricted(&self) -> bool {
        self.selectors.first().is_some_and(Selector::unrestricted)
    }

    /// Apply one rule (`ACLSetUser`). `all_channels`: `acl-pubsub-default` is `allchannels`.
    pub fn set(&mut self, cmds: &Commands, op: &[u8], all_channels: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"skip-sanitize-payload" => self.skip_sanitize = true,
            b"sanitize-payload" => self.skip_sanitize = false,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"clearselectors" => self.selectors.truncate(1),
            b"reset" => {
                for op in ["resetpass", "resetkeys", "resetchannels"] {
                    self.set(cmds, op.as_bytes(), all_channels)?;
                }
                if all_channels {
                    self.set(cmds, b"allchannels", all_channels)?;
                }
                for op in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                    self.set(cmds, op.as_bytes(), all_channels)?;
                }
            }
            _ => match op.first() {
                Some(&c @ (b'>' | b'#')) => {
                    let hash = password_or_hash(c == b'>', op.get(1..).unwrap_or_default())?;
                    if !self.passwords.contains(&hash) {
                        self.passwords.push(hash);
                    }
                    self.nopass = false;
                }
                Some(&c @ (b'<' | b'!')) => {
                    let hash = password_or_hash(c == b'<', op.get(1..).unwrap_or_default())?;
                    let at = self.passwords.iter().position(|p| *p == hash).ok_or(RuleError::NoSuchPassword)?;
                    self.passwords.remove(at);
                }
                Some(b'(') if op.last() == Some(&b')') => {
                    let inner = op.get(1..op.len() - 1).unwrap_or_default();
                    let mut s = Selector::new(all_channels);
                    let words = rill_engine::util::split_args(inner).map_err(|_| RuleError::Syntax)?;
                    for w in words {
                        s.set(cmds, &w)?;
                    }
                    self.selectors.push(s);
                }
                _ => match self.selectors.first_mut() {
                    Some(root) => root.set(cmds, op)?,
                    None => {
                        let mut root = Selector::new(all_channels);
                        root.set(cmds, op)?;
                        self.selectors.push(root);
                    }
                },
            },
        }
        Ok(())
    }

    /// Apply `ops` as ACL SETUSER does: selectors in parentheses may span several arguments;
    /// all or nothing. The error is Redis' text, without the `ERR ` code.
    pub fn set_all(&mut self, cmds: &Commands, ops: &[Bytes], all_channels: bool) -> SetResult {
        let merged = merge_selectors(ops).map_err(|start| {
            format!("Unmatched parenthesis in acl selector starting at '{}'.", String::from_utf8_lossy(start))
        })?;
        let mut copy = self.clone();
        for op in &merged {
            if let Err(e) = copy.set(cmds, op, all_channels) {
                return Err(format!("Error in ACL SETUSER modifier '{}': {}", String::from_utf8_lossy(op), e.text()));
            }
        }
        *self = copy;
        Ok(())
    }

    /// The rules that make this user, as `ACL LIST` shows them after `user <name> `.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(if self.enabled { b"on " } else { b"off " });
        if self.nopass {
            out.extend_from_slice(b"nopass ");
        }
        out.extend_from_slice(if self.skip_sanitize { b"skip-sanitize-payload " } else { b"sanitize-payload " });
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        for (i, s) in self.selectors.iter().enumerate() {
            if i == 0 {
                s.describe(&mut out);
            } else {
                out.extend_from_slice(b" (");
                s.describe(&mut out);
                out.push(b')');
            }
        }
        out
    }

    /// The flags as ACL GETUSER lists them.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut v = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            v.push("nopass");
        }
        v.push(if self.skip_sanitize { "skip-sanitize-payload" } else { "sanitize-payload" });
        v
    }

    /// Whether `password` authenticates this user (an `off` user never authenticates).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let given = hash_password(password);
        // Compare every stored hash in full, in a time independent of where they differ.
        self.passwords
            .iter()
            .fold(false, |found, p| found | crate::cmd::connection::password_matches(p.as_bytes(), given.as_bytes()))
    }

    /// Check a command: `Ok` or the most relevant refusal over all selectors.
    pub fn check(&self, cmds: &Commands, spec: &'static CommandSpec, args: &[Bytes]) -> Result<(), Denied> {
        if self.unrestricted() {
            return Ok(());
        }
        let mut worst = Denied::Command;
        for s in &self.selectors {
            match s.check(cmds, spec, args) {
                Ok(()) => return Ok(()),
                Err(d) if d.outranks(worst) => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// Whether one selector both allows the command and gives `access` to every key (what
    /// SORT's BY and GET need: the keys their patterns name are known only while it runs).
    pub fn allows_with_all_keys(
        &self,
        cmds: &Commands,
        spec: &'static CommandSpec,
        args: &[Bytes],
        access: rill_engine::command::KeyAccess,
    ) -> bool {
        self.unrestricted()
            || self.selectors.iter().any(|s| s.all_keys_allowed(access) && s.check(cmds, spec, args).is_ok())
    }

    /// Whether any selector allows access to `key` as `access` says (scripts' and modules'
    /// key checks).
    pub fn key_allowed(&self, key: &[u8], access: rill_engine::command::KeyAccess) -> bool {
        self.selectors.iter().any(|s| s.key_allowed(key, access))
    }

    /// Whether any selector allows `channel` (a pattern subscription when `pattern`).
    pub fn channel_allowed(&self, channel: &[u8], pattern: bool) -> bool {
        self.selectors.iter().any(|s| s.channel_allowed(channel, pattern))
    }
}

/// Join the words of a selector that spans several arguments (`(~x` `+get)`); the error is
/// the argument where an unclosed one starts.
fn merge_selectors(ops: &[Bytes]) -> Result<Vec<Vec<u8>>, &[u8]> {
    let mut out = Vec::new();
    let mut open: Option<(Vec<u8>, &[u8])> = None;
    for op in ops {
        if let Some((mut acc, start)) = open.take() {
            acc.push(b' ');
            acc.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(acc);
            } else {
                open = Some((acc, start));
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((op.to_vec(), &op[..]));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((_, start)) => Err(start),
        None => Ok(out),
    }
}

/// The error text of a refusal: `-NOPERM ...` for a client (`verbose` false), or the longer
/// form ACL DRYRUN answers.
pub fn denied_text(denied: Denied, user: &User, spec: &CommandSpec, args: &[Bytes], verbose: bool) -> String {
    let arg = |i: usize| String::from_utf8_lossy(args.get(i).map(|a| &a[..]).unwrap_or_default()).into_owned();
    let name = String::from_utf8_lossy(&user.name);
    match (denied, verbose) {
        (Denied::Command, _) => format!("User {name} has no permissions to run the '{}' command", spec.name),
        (Denied::Key(i), true) => format!("User {name} has no permissions to access the '{}' key", arg(i)),
        (Denied::Channel(i), true) => format!("User {name} has no permissions to access the '{}' channel", arg(i)),
        (Denied::Key(_), false) => "No permissions to access a key".to_string(),
        (Denied::Channel(_), false) => "No permissions to access a channel".to_string(),
    }
}

/// The users.
#[derive(Debug, Clone)]
pub struct Users {
    /// By name, in byte order (`ACL LIST`, `ACL USERS`).
    pub by_name: BTreeMap<Bytes, Arc<User>>,
}

/// Users, the log and the command index, shared by every connection.
#[derive(Debug)]
pub struct Registry {
    generation: AtomicU64,
    users: RwLock<Users>,
    /// `acl-pubsub-default allchannels`: new users and selectors may use every channel.
    all_channels_default: std::sync::atomic::AtomicBool,
    /// The ACL log and the denial counters of INFO.
    pub log: Mutex<AclLog>,
    /// Every command under its own name.
    pub commands: Commands,
}

impl Registry {
    /// A registry with only the default user (`on nopass ~* &* +@all`).
    pub fn new(table: &CommandTable) -> Registry {
        let commands = Commands::new(table);
        let default = User::default_user(&commands);
        let mut by_name = BTreeMap::new();
        by_name.insert(Bytes::from_static(b"default"), Arc::new(default));
        Registry {
            generation: AtomicU64::new(0),
            users: RwLock::new(Users { by_name }),
            all_channels_default: Default::default(),
            log: Mutex::new(AclLog::default()),
            commands,
        }
    }

    /// Moves whenever any user changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Bring a connection's user up to date after any change of the users: false when its
    /// user was deleted (the connection must close).
    pub fn refresh(&self, user: &mut Arc<User>, seen: &mut u64) -> bool {
        let now = self.generation();
        if now == *seen {
            return true;
        }
        match self.user(&user.name) {
            Some(u) => {
                *user = u;
                *seen = now;
                true
            }
            None => false,
        }
    }

    /// A user by name.
    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().unwrap_or_else(|p| p.into_inner()).by_name.get(name).cloned()
    }

    /// The default user.
    pub fn default_user(&self) -> Arc<User> {
        self.user(b"default").unwrap_or_else(|| Arc::new(User::default_user(&self.commands)))
    }

    /// Whether a new connection starts authenticated: the default user is on and takes any
    /// password.
    pub fn default_open(&self) -> bool {
        let u = self.default_user();
        u.enabled && u.nopass
    }

    /// A copy of every user.
    pub fn snapshot(&self) -> Users {
        self.users.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replace every user (ACL LOAD, start-up), the generation moved.
    pub fn replace(&self, users: Users) {
        *self.users.write().unwrap_or_else(|p| p.into_inner()) = users;
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Change the users with `f` (its result returned), the generation moved.
    pub fn update<R>(&self, f: impl FnOnce(&mut Users) -> R) -> R {
        let r = f(&mut self.users.write().unwrap_or_else(|p| p.into_inner()));
        self.generation.fetch_add(1, Ordering::AcqRel);
        r
    }

    /// `acl-pubsub-default`.
    pub fn all_channels_default(&self) -> bool {
        self.all_channels_default.load(Ordering::Relaxed)
    }

    /// Set `acl-pubsub-default` (`allchannels`: true).
    pub fn set_all_channels_default(&self, all: bool) {
        self.all_channels_default.store(all, Ordering::Relaxed);
    }

    /// `requirepass`: the default user's only password, or `nopass` when empty.
    pub fn set_default_password(&self, password: &[u8]) {
        let all = self.all_channels_default();
        self.update(|users| {
            let mut u = users.by_name.get(&b"default"[..]).map(|u| (**u).clone());
            let u = u.get_or_insert_with(|| User::default_user(&self.commands));
            let _ = u.set(&self.commands, b"resetpass", all);
            if password.is_empty() {
                let _ = u.set(&self.commands, b"nopass", all);
            } else {
                let mut op = b">".to_vec();
                op.extend_from_slice(password);
                let _ = u.set(&self.commands, &op, all);
            }
            users.by_name.insert(Bytes::from_static(b"default"), Arc::new(u.clone()));
        });
    }

    /// Users as `user <name> <rules...>` lines (an ACL file, ACL LIST, CONFIG REWRITE).
    pub fn lines(&self) -> Vec<Vec<u8>> {
        self.snapshot()
            .by_name
            .values()
            .map(|u| {
                let mut line = b"user ".to_vec();
                line.extend_from_slice(&u.name);
                line.push(b' ');
                line.extend_from_slice(&u.describe());
                line
            })
            .collect()
    }

    /// [`Registry::lines`] as text (CONFIG REWRITE).
    pub fn lines_text(&self) -> Vec<String> {
        self.lines().into_iter().map(|l| String::from_utf8_lossy(&l).into_owned()).collect()
    }

    /// Build users from `user` lines (config directives or an ACL file's lines, each split
    /// into words with `user` first): the default user is reset first when a line names it,
    /// as Redis does. Errors name `source` (the file), the line and Redis' text.
    pub fn users_from_lines(&self, source: &str, lines: &[(usize, Vec<Bytes>)]) -> Result<Users, String> {
        let all = self.all_channels_default();
        let mut by_name: BTreeMap<Bytes, Arc<User>> = BTreeMap::new();
        let mut errors = String::new();
        for (n, words) in lines {
            let Some(name) = words.get(1).filter(|_| words.first().is_some_and(|w| &w[..] == b"user")) else {
                errors.push_str(&format!("{source}:{n} should start with user keyword followed by the username. "));
                continue;
            };
            if has_spaces(name) {
                errors.push_str(&format!(
                    "'{source}:{n}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            if by_name.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {n}. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            let mut u = User::new(name, all);
            let merged = match merge_selectors(words.get(2..).unwrap_or_default()) {
                Ok(m) => m,
                Err(_) => {
                    errors.push_str(&format!("{source}:{n}: Unmatched parenthesis in selector definition."));
                    continue;
                }
            };
            let mut failed = false;
            for op in &merged {
                if let Err(e) = u.set(&self.commands, op, all) {
                    if e == RuleError::Unknown {
                        errors.push_str(&format!(
                            "{source}:{n}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(op),
                            e.text()
                        ));
                    } else if !failed {
                        errors.push_str(&format!("{source}:{n}: {}. ", e.text()));
                    }
                    failed = true;
                }
            }
            by_name.insert(name.clone(), Arc::new(u));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        by_name.entry(Bytes::from_static(b"default")).or_insert_with(|| Arc::new(User::default_user(&self.commands)));
        Ok(Users { by_name })
    }
}

/// A placeholder the connection holds until it first looks up its user: named `default`,
/// allowed nothing, at a generation no registry has.
pub fn unresolved_default() -> Arc<User> {
    static ONE: std::sync::OnceLock<Arc<User>> = std::sync::OnceLock::new();
    ONE.get_or_init(|| Arc::new(User::new(b"default", false))).clone()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests;
