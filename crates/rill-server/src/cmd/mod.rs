//! Commands the server runs itself, one module per family. Each is bound to its handler in its
//! spec (`specs.rs`, `Handler::Server(&Run(f))`); [`run`] calls it.

pub mod acl;
pub mod connection;
pub mod hotkeys;
pub mod introspect;
pub mod latency;
pub mod metrics;
pub mod migrate;
pub mod multi;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod specs;

use crate::client::{Action, Conn};
use crate::state::{Shared, State};
use bytes::Bytes;
use rill_engine::command::{CommandSpec, Handler};
use rill_engine::CmdError;
use rill_resp::Reply;

/// Result of a server command.
pub type CmdResult = Result<Action, CmdError>;

/// Everything a server command gets.
#[derive(Debug)]
pub struct Call<'a> {
    /// Shared, lock-free parts.
    pub shared: &'a Shared,
    /// The locked state.
    pub st: &'a mut State,
    /// The calling connection.
    pub conn: &'a mut Conn,
    /// Arguments, name included.
    pub args: &'a [Bytes],
    /// The command running.
    pub spec: &'static CommandSpec,
    /// Now, Unix ms.
    pub now_ms: i64,
    /// Run by EXEC (nothing may block; MONITOR is refused).
    pub in_exec: bool,
}

impl Call<'_> {
    /// Argument `i` (callers check arity first).
    pub fn arg(&self, i: usize) -> &[u8] {
        self.args.get(i).map(|b| &b[..]).unwrap_or(&[])
    }

    /// Argument `i` as lossy text.
    pub fn text(&self, i: usize) -> String {
        String::from_utf8_lossy(self.arg(i)).into_owned()
    }
}

/// Shorthand for a reply action.
pub fn reply(r: Reply) -> CmdResult {
    Ok(Action::Reply(r))
}

/// Shorthand for `+OK`.
pub fn ok() -> CmdResult {
    reply(Reply::ok())
}

/// A server command's handler, as its spec holds it (`Handler::Server(&Run(f))`).
#[derive(Debug)]
pub struct Run(pub fn(&mut Call) -> CmdResult);

/// The handler a server command's spec is bound to. `None` only for a handler of another
/// crate's type, which `every_server_command_is_bound` rules out.
pub fn bound(handler: rill_engine::command::ServerHandler) -> Option<&'static Run> {
    handler.downcast_ref::<Run>()
}

/// Run the server command `spec`.
pub fn run(
    shared: &Shared,
    st: &mut State,
    conn: &mut Conn,
    spec: &'static CommandSpec,
    args: &[Bytes],
    now_ms: i64,
    in_exec: bool,
) -> CmdResult {
    let Handler::Server(handler) = spec.handler else {
        return Err(CmdError::owned(format!("ERR '{}' is not a server command", spec.name)));
    };
    let Some(Run(f)) = bound(handler) else {
        return Err(CmdError::owned(format!(
            "ERR command '{}' is bound to a handler rill-server cannot run",
            spec.name
        )));
    };
    f(&mut Call { shared, st, conn, args, spec, now_ms, in_exec })
}

/// The command table: every engine command family and the server's own commands.
pub fn table() -> rill_engine::command::CommandTable {
    let mut families = rill_engine::types::families();
    families.push(specs::COMMANDS);
    families.push(specs::SCRIPT_COMMANDS);
    rill_engine::command::CommandTable::new(&families)
}

/// Whether a protected action (`enable-protected-configs`, `enable-debug-command`,
/// `enable-module-command` set to `setting`) is open to this connection: `yes` opens it to
/// everyone, `local` to clients on a loopback address, `no` (the default) to nobody.
pub fn protected_action_allowed(st: &State, conn_id: u64, setting: &str) -> bool {
    match setting {
        "yes" => true,
        "local" => st.clients.get(&conn_id).is_some_and(|ci| is_loopback(&ci.addr)),
        _ => false,
    }
}

/// Whether a peer address (`ip:port`, `[ip]:port`) is a loopback one, IPv4-mapped too.
pub fn is_loopback(addr: &str) -> bool {
    match addr.parse::<std::net::SocketAddr>() {
        Ok(std::net::SocketAddr::V4(a)) => a.ip().is_loopback(),
        Ok(std::net::SocketAddr::V6(a)) => {
            a.ip().is_loopback() || a.ip().to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

/// A HELP reply: the header line, the given lines, and the trailing HELP line, as simple
/// strings (Redis' `addReplyHelp` shape).
pub fn help(container: &str, lines: &[&str]) -> Reply {
    let mut out = vec![Reply::Simple(Bytes::from(format!(
        "{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    )))];
    out.extend(lines.iter().map(|l| Reply::Simple(Bytes::copy_from_slice(l.as_bytes()))));
    out.push(Reply::simple("HELP"));
    out.push(Reply::simple("    Print this help."));
    Reply::Array(out)
}

/// Redis' error for a subcommand given the wrong arguments: the subcommand as sent, and the
/// container (from the spec's name) to ask for HELP.
pub fn subcommand_syntax(c: &Call) -> CmdError {
    let container = c.spec.name.split('|').next().unwrap_or(c.spec.name).to_ascii_uppercase();
    CmdError::owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {container} HELP.",
        String::from_utf8_lossy(c.args.get(1).map(|a| &a[..]).unwrap_or_default())
    ))
}

/// `ERR syntax error`
pub fn syntax() -> CmdError {
    CmdError::SYNTAX
}

#[cfg(test)]
mod tests {
    use rill_engine::command::{CommandSpec, Handler};

    fn every_spec(specs: &'static [CommandSpec], out: &mut Vec<&'static CommandSpec>) {
        for s in specs {
            out.push(s);
            every_spec(s.subcommands, out);
        }
    }

    #[test]
    fn every_server_command_is_bound() {
        let mut all = Vec::new();
        every_spec(super::specs::COMMANDS, &mut all);
        for f in rill_engine::types::families() {
            every_spec(f, &mut all);
        }
        assert!(all.len() > 150, "{}", all.len());
        for spec in all {
            match spec.handler {
                Handler::Server(h) => assert!(super::bound(h).is_some(), "{} is bound to a foreign handler", spec.name),
                Handler::Container => assert!(spec.is_container(), "{} has no handler and no subcommands", spec.name),
                Handler::Engine(_) => {}
            }
        }
    }
}
