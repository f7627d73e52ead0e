//! One module per command family. Each exposes `COMMANDS: &[CommandSpec]`, and
//! [`families`] hands them all to the command table.
//!
//! Rules every handler here follows:
//! - **Parse everything first.** All arguments are validated before the keyspace is touched, so
//!   an error leaves it exactly as it was.
//! - **Every write reports itself.** Each changed key gets one [`Engine::modified`] call (WATCH,
//!   the change counter). A collection emptied by a command is deleted, and that deletion is a
//!   write of its own ([`delete_key`]).
//! - **Expiry is lazy.** Lookups go through [`Engine::lookup`] / [`Engine::lookup_mut`] /
//!   [`Engine::lookup_read`], which remove an expired key first (and touch its WATCHes).
//! - **Stored bytes are copied.** Arguments may be slices of a large network read buffer;
//!   keeping a slice would pin the whole buffer, so keys and values are copied on insert.

pub(crate) mod collection_scan;
pub mod dump;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod keys;
pub mod list;
pub mod object;
pub(crate) mod pick;
pub mod set;
pub mod sort;
pub mod strings;
pub mod zset;

#[cfg(test)]
mod events_tests;
#[cfg(test)]
pub(crate) mod testkit;

use crate::command::CommandSpec;
use crate::KeyEvent;
use crate::{CmdError, Engine};
use bytes::Bytes;

pub mod stream;

/// Every engine command family, for the command table.
pub fn families() -> Vec<&'static [CommandSpec]> {
    vec![
        keys::COMMANDS,
        keys::databases::COMMANDS,
        dump::COMMANDS,
        strings::COMMANDS,
        strings::bits::COMMANDS,
        hash::COMMANDS,
        hash::expire::COMMANDS,
        list::COMMANDS,
        set::COMMANDS,
        sort::COMMANDS,
        zset::COMMANDS,
        geo::COMMANDS,
        hll::COMMANDS,
        stream::COMMANDS,
        object::COMMANDS,
    ]
}

/// Argument `i` (0 = the command name). A missing argument can only mean the table's arity was
/// not checked, so it is reported as an arity error rather than a panic.
pub(crate) fn arg(args: &[Bytes], i: usize) -> Result<&Bytes, CmdError> {
    args.get(i).ok_or_else(|| arity_error(args))
}

/// `ERR wrong number of arguments for '<name>' command`, named as the client spelled it, in
/// lower case (Redis uses the command's canonical lower-case name).
pub(crate) fn arity_error(args: &[Bytes]) -> CmdError {
    let name = args.first().map(|n| String::from_utf8_lossy(n).to_ascii_lowercase());
    CmdError::arity(name.as_deref().unwrap_or(""))
}

/// An owned copy of argument bytes, for storing in the keyspace (see the module doc).
pub(crate) fn owned(b: &[u8]) -> Bytes {
    Bytes::copy_from_slice(b)
}

/// Whether `arg` is the option `token`, ignoring ASCII case.
pub(crate) fn is_token(arg: &[u8], token: &str) -> bool {
    arg.eq_ignore_ascii_case(token.as_bytes())
}

/// Remove `key` as a write: WATCH and the change counter see it, and clients blocked on it are
/// woken to re-check (Redis signals deleted keys too, so stream group readers learn of it).
/// Returns whether a key was there.
pub(crate) fn delete_key(engine: &mut Engine, db: usize, key: &[u8]) -> bool {
    delete_key_for(engine, db, key, crate::keyspace::Cause::Server)
}

/// [`delete_key`], the value freed as `cause` says (`keyspace/lazyfree.rs`).
pub(crate) fn delete_key_for(engine: &mut Engine, db: usize, key: &[u8], cause: crate::keyspace::Cause) -> bool {
    if engine.remove_for(db, key, cause) {
        engine.modified(db, key, KeyEvent::Del);
        engine.signal_ready(db, key);
        true
    } else {
        false
    }
}

/// A count or rank argument that may be negative but not `i64::MIN` (Redis reads it into the
/// range `-LONG_MAX..=LONG_MAX`, so that negating it cannot overflow): LPOS RANK, SRANDMEMBER
/// and HRANDFIELD counts.
pub(crate) fn negatable_int_arg(raw: &[u8]) -> Result<i64, CmdError> {
    match crate::util::int_arg(raw)? {
        i64::MIN => Err(CmdError::full(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807",
        )),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::families;
    use crate::command::{CommandTable, Handler};
    use std::collections::HashSet;

    /// Every spec is well formed: unique lower-case name, an engine handler, docs filled in,
    /// balanced syntax, and `fast` never on a command we document as O(N) in the data.
    #[test]
    fn specs_are_well_formed() {
        let mut names = HashSet::new();
        let top = families().into_iter().flatten();
        let subs = families().into_iter().flatten().flat_map(|s| s.subcommands.iter());
        for spec in top.clone().chain(subs) {
            assert!(names.insert(spec.name), "duplicate {}", spec.name);
            assert_eq!(spec.name, spec.name.to_ascii_lowercase());
            match spec.handler {
                Handler::Engine(_) => assert!(spec.subcommands.is_empty(), "{}", spec.name),
                Handler::Container => assert!(!spec.subcommands.is_empty(), "{}", spec.name),
                Handler::Server(_) => panic!("engine command {} has a server handler", spec.name),
            }
            assert!(!spec.summary.is_empty() && !spec.complexity.is_empty(), "{}", spec.name);
            assert!(spec.arity != 0, "{}", spec.name);
            let depth = spec.syntax.chars().try_fold(0i32, |d, c| {
                let d = match c {
                    '[' | '(' => d + 1,
                    ']' | ')' => d - 1,
                    _ => d,
                };
                (d >= 0).then_some(d)
            });
            assert_eq!(depth, Some(0), "unbalanced syntax for {}", spec.name);
            assert!(!spec.acl.is_empty() && spec.acl.iter().all(|c| c.starts_with('@')));
        }
        assert_eq!(CommandTable::new(&families()).len(), top.count());
    }
}
