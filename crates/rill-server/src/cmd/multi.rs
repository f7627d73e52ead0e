//! MULTI / EXEC / DISCARD / WATCH / UNWATCH (docs/spec/connection.md §3.8).
//!
//! Queued commands were fully checked when queued (lookup, arity, auth); a rejected one dooms
//! the transaction (EXECABORT). EXEC runs the queue under the same lock acquisition, so no
//! other client's command interleaves; blocking commands inside it do not block.

use super::{ok, reply, Call, CmdResult};
use crate::client::{Action, Multi};
use crate::dispatch;
use crate::state::State;
use rill_engine::CmdError;
use rill_resp::Reply;

/// MULTI
pub fn multi(c: &mut Call) -> CmdResult {
    if c.conn.multi.is_some() {
        return Err(CmdError::full("ERR MULTI calls can not be nested"));
    }
    c.conn.multi = Some(Multi::default());
    if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
        ci.multi = 0;
    }
    ok()
}

fn end_transaction(c: &mut Call) {
    c.conn.multi = None;
    c.st.engine.unwatch_all(c.conn.id);
    if let Some(ci) = c.st.clients.get_mut(&c.conn.id) {
        ci.multi = -1;
    }
}

/// EXEC
pub fn exec(c: &mut Call) -> CmdResult {
    let Some(m) = c.conn.multi.take() else {
        return Err(CmdError::full("ERR EXEC without MULTI"));
    };
    if m.failed {
        end_transaction(c);
        return Err(CmdError::full("EXECABORT Transaction discarded because of previous errors."));
    }
    if c.st.engine.watch_broken(c.conn.id, c.now_ms) {
        end_transaction(c);
        return reply(Reply::NullArray);
    }
    // Unwatch before running: the transaction's own writes must not mark it dirty later.
    end_transaction(c);
    let mut replies = Vec::with_capacity(m.queued.len());
    // CLIENT LIST, INFO and MEMORY STATS of a command later in the transaction see the large
    // payloads of the replies so far as this client's output, as Redis' do.
    let mut shared = 0;
    for (spec, mut args) in m.queued {
        // The rules may have changed since the command was queued: checked again, as Redis.
        let outcome = dispatch::acl_check(
            c.shared,
            c.st,
            c.conn,
            spec,
            &args,
            crate::acl::Origin { context: crate::acl::Context::Multi, running: c.spec.name },
            c.now_ms,
        );
        if let dispatch::AclOutcome::Denied(_) | dispatch::AclOutcome::Gone = outcome {
            let why = match c.conn.user.as_ref().map(|u| u.check(&c.shared.acl.commands, spec, &args)) {
                Some(Err(crate::acl::Denied::Key(_))) => "no permission to touch the specified keys",
                Some(Err(crate::acl::Denied::Channel(_))) => {
                    "no permission to access one of the channels used as arguments"
                }
                _ => "no permission to execute the command or subcommand",
            };
            replies.push(Reply::Error(bytes::Bytes::from(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {why}"))));
            continue;
        }
        let action = dispatch::call(c.shared, c.st, c.conn, spec, &mut args, c.now_ms, true);
        let before = replies.len();
        inline_replies(c.st, action, &mut replies);
        let more: usize = replies.get(before..).unwrap_or_default().iter().map(rill_resp::referenced_bytes).sum();
        if more > 0 {
            shared += more;
            if let Some(ci) = c.st.clients.get(&c.conn.id) {
                crate::client_limits::ClientMemory::set(&ci.mem.exec_shared, shared);
            }
        }
    }
    if shared > 0 {
        if let Some(ci) = c.st.clients.get(&c.conn.id) {
            crate::client_limits::ClientMemory::set(&ci.mem.exec_shared, 0);
        }
    }
    reply(Reply::Array(replies))
}

/// The reply of a command run where nothing may wait (inside EXEC, or called by a script),
/// added to `out`: what each kind of action answers there.
pub fn inline_replies(st: &State, action: Action, out: &mut Vec<Reply>) {
    let r = match action {
        Action::Reply(r) | Action::Close(Some(r)) => r,
        Action::Close(None) => Reply::ok(),
        // Redis would add no element for REPLCONF ACK inside EXEC, leaving its array one
        // short; a null keeps the reply well-formed.
        Action::Nothing => Reply::Null,
        // Nothing waits here (WAIT answers with what there is).
        Action::AwaitCopies(w) => w.reply(&st.journal, &st.replication),
        // A flush here frees in place (`Engine::flush_waits`): nothing to wait for.
        Action::AwaitFreed(_, r) => r,
        // PSYNC, SYNC and SHUTDOWN are flagged no-multi and noscript: never run here.
        Action::Replica { .. } | Action::AwaitShutdown(_) => {
            CmdError::full("ERR Command not allowed inside a transaction").to_reply()
        }
        Action::Block { request, .. } => request.timeout_reply,
        // Only dispatch's checks hold a command, and the caller passed them.
        Action::Held(_) => Reply::Null,
        // One element per confirmation. (Redis writes them into EXEC's reply without
        // counting them, so its array is malformed for more than one channel: redis#12207.)
        Action::Pushes(rs) => {
            out.extend(rs);
            return;
        }
    };
    out.push(r);
}

/// DISCARD
pub fn discard(c: &mut Call) -> CmdResult {
    if c.conn.multi.is_none() {
        return Err(CmdError::full("ERR DISCARD without MULTI"));
    }
    end_transaction(c);
    ok()
}

/// WATCH key [key ...]
pub fn watch(c: &mut Call) -> CmdResult {
    if c.conn.multi.is_some() {
        return Err(CmdError::full("ERR WATCH inside MULTI is not allowed"));
    }
    let (db, now, id) = (c.conn.db, c.now_ms, c.conn.id);
    for key in c.args.iter().skip(1) {
        c.st.engine.watch_key(id, db, key.clone(), now);
    }
    ok()
}

/// UNWATCH
pub fn unwatch(c: &mut Call) -> CmdResult {
    c.st.engine.unwatch_all(c.conn.id);
    ok()
}
