//! Lookup over all command specs, case-insensitive, with container/subcommand resolution.

use super::CommandSpec;
use std::collections::HashMap;

/// All top-level commands by lower-case name.
#[derive(Debug, Default)]
pub struct CommandTable {
    by_name: HashMap<Vec<u8>, &'static CommandSpec, foldhash::fast::RandomState>,
    ordered: Vec<&'static CommandSpec>,
}

/// The outcome of resolving a request's first one or two arguments.
#[derive(Debug)]
pub enum Lookup {
    /// The command (or, for a container, the subcommand) to run.
    Found(&'static CommandSpec),
    /// No such command.
    UnknownCommand,
    /// A container without a valid subcommand; carries the container.
    UnknownSubcommand(&'static CommandSpec),
}

impl CommandTable {
    /// A table over the given families of specs. Later duplicates replace earlier ones.
    pub fn new(families: &[&'static [CommandSpec]]) -> CommandTable {
        let mut t = CommandTable::default();
        for fam in families {
            for spec in fam.iter() {
                if t.by_name.insert(spec.name.as_bytes().to_vec(), spec).is_none() {
                    t.ordered.push(spec);
                }
            }
        }
        t
    }

    /// `rename-command FROM TO`: serve the top-level command `from` as `to`, or not at all
    /// when `to` is empty. The command keeps its own name in COMMAND's replies, as in Redis.
    /// Errors are Redis' start-up messages.
    pub fn rename(&mut self, from: &[u8], to: &[u8]) -> Result<(), &'static str> {
        let from = from.to_ascii_lowercase();
        let Some(spec) = self.by_name.remove(&from) else { return Err("No such command in rename-command") };
        if to.is_empty() {
            self.ordered.retain(|s| !std::ptr::eq(*s, spec));
            return Ok(());
        }
        let to = to.to_ascii_lowercase();
        if self.by_name.contains_key(&to) {
            return Err("Target command name already exists");
        }
        self.by_name.insert(to, spec);
        Ok(())
    }

    /// A top-level command by name, any case.
    pub fn get(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        if name.iter().any(u8::is_ascii_uppercase) {
            // Hot path: fold case on the stack for every real command name.
            let mut buf = [0u8; 32];
            match buf.get_mut(..name.len()) {
                Some(dst) => {
                    dst.copy_from_slice(name);
                    dst.make_ascii_lowercase();
                    self.by_name.get(&*dst).copied()
                }
                None => self.by_name.get(&name.to_ascii_lowercase()).copied(),
            }
        } else {
            self.by_name.get(name).copied()
        }
    }

    /// A command or subcommand by full name (`xgroup|create`), any case.
    pub fn get_full(&self, full: &[u8]) -> Option<&'static CommandSpec> {
        let lower = full.to_ascii_lowercase();
        match lower.iter().position(|&c| c == b'|') {
            None => self.get(&lower),
            Some(p) => {
                let parent = self.get(lower.get(..p)?)?;
                let sub = lower.get(p + 1..)?;
                parent.subcommands.iter().find(|s| s.sub_name().as_bytes() == sub)
            }
        }
    }

    /// Resolve a request: the command, or for a container the subcommand named by `args[1]`.
    pub fn resolve(&self, args: &[bytes::Bytes]) -> Lookup {
        let Some(name) = args.first() else { return Lookup::UnknownCommand };
        self.resolve_parts(name, args.get(1).map(|s| &s[..]))
    }

    /// [`CommandTable::resolve`] from the command's name and its next argument (`sub`).
    pub fn resolve_parts(&self, name: &[u8], sub: Option<&[u8]>) -> Lookup {
        let Some(spec) = self.get(name) else { return Lookup::UnknownCommand };
        if !spec.is_container() {
            return Lookup::Found(spec);
        }
        let Some(sub) = sub else {
            // Arity of the container (−2) reports the error.
            return Lookup::Found(spec);
        };
        match spec.subcommands.iter().find(|s| s.sub_name().as_bytes().eq_ignore_ascii_case(sub)) {
            Some(s) => Lookup::Found(s),
            None => Lookup::UnknownSubcommand(spec),
        }
    }

    /// Every top-level command in declaration order.
    pub fn all(&self) -> &[&'static CommandSpec] {
        &self.ordered
    }

    /// Number of top-level commands.
    pub fn len(&self) -> usize {
        self.ordered.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }
}
