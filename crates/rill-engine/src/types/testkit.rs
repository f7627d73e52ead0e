//! Test harness for the command families: resolves a command through the real command table,
//! checks arity as the server does, then calls the engine handler.

use crate::command::{CommandTable, Handler, Lookup};
use crate::types::families;
use crate::types::object::TEST_MEMORY;
use crate::{CallCtx, CmdError, Engine, EngineConfig};
use bytes::Bytes;
use rill_resp::Reply;

/// An engine, a clock and a selected database.
pub(crate) struct Harness {
    pub engine: Engine,
    pub now_ms: i64,
    pub db: usize,
    pub client_id: u64,
    table: CommandTable,
}

impl Harness {
    pub fn new() -> Harness {
        Harness {
            engine: Engine::new(EngineConfig::default()),
            now_ms: 1_700_000_000_000,
            db: 0,
            client_id: 1,
            table: CommandTable::new(&[&families()[..], &[TEST_MEMORY]].concat()),
        }
    }

    /// A fresh context for the harness' database, clock and client.
    pub fn ctx(&self) -> CallCtx {
        CallCtx::new(self.db, self.now_ms, self.client_id)
    }

    /// Run one command; errors come back as error replies.
    pub fn run(&mut self, args: &[&str]) -> Reply {
        let mut ctx = self.ctx();
        self.run_ctx(&mut ctx, args)
    }

    /// Run one command with a caller-supplied context (blocking tests inspect `ctx.block`).
    pub fn run_ctx(&mut self, ctx: &mut CallCtx, args: &[&str]) -> Reply {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        self.run_args(ctx, args)
    }

    /// Run one command whose arguments are arbitrary bytes (DUMP payloads).
    pub fn run_bytes(&mut self, args: &[&[u8]]) -> Reply {
        let mut ctx = self.ctx();
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        self.run_args(&mut ctx, args)
    }

    fn run_args(&mut self, ctx: &mut CallCtx, args: Vec<Bytes>) -> Reply {
        let spec = match self.table.resolve(&args) {
            Lookup::Found(spec) => spec,
            Lookup::UnknownCommand => return Reply::error("ERR unknown command"),
            Lookup::UnknownSubcommand(_) => return Reply::error("ERR unknown subcommand"),
        };
        if !spec.arity_ok(args.len()) {
            return CmdError::arity(spec.name).to_reply();
        }
        let Handler::Engine(f) = spec.handler else {
            return Reply::error("ERR not an engine command");
        };
        // Through `Engine::call`, as the server runs a command: it resets the per-command
        // state (changes, events) first.
        match self.engine.call(f, ctx, &args).reply {
            Ok(r) => r,
            Err(e) => e.to_reply(),
        }
    }
}

/// The events the last command recorded, as `name:key` (the database left out).
pub(crate) fn events(h: &Harness) -> Vec<String> {
    h.engine.events().map(|e| format!("{}:{}", e.event.name(), String::from_utf8_lossy(e.key))).collect()
}

pub(crate) fn bulk(s: &str) -> Reply {
    Reply::bulk(s)
}

pub(crate) fn int(n: i64) -> Reply {
    Reply::Integer(n)
}

pub(crate) fn err(s: &str) -> Reply {
    Reply::error(s)
}

pub(crate) fn ok() -> Reply {
    Reply::ok()
}

pub(crate) fn bulks(items: &[&str]) -> Reply {
    Reply::Array(items.iter().map(|s| bulk(s)).collect())
}

/// The bulk strings of an array or set reply, sorted (for unordered replies).
pub(crate) fn sorted_strings(r: &Reply) -> Vec<String> {
    let items = match r {
        Reply::Array(v) | Reply::Set(v) => v,
        other => panic!("not an array: {other:?}"),
    };
    let mut out: Vec<String> = items
        .iter()
        .map(|i| match i {
            Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("not a bulk: {other:?}"),
        })
        .collect();
    out.sort();
    out
}
