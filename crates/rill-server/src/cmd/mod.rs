//! Commands the server runs itself, one module per family. [`run`] maps a spec's full name to
//! its handler.

pub mod connection;
pub mod introspect;
pub mod multi;
pub mod server;
pub mod specs;

use crate::dispatch::{Action, Conn};
use crate::state::{Shared, State};
use bytes::Bytes;
use rill_engine::command::CommandSpec;
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
    /// Now, Unix ms.
    pub now_ms: i64,
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

/// Run the server command `spec`.
pub fn run(
    shared: &Shared,
    st: &mut State,
    conn: &mut Conn,
    spec: &'static CommandSpec,
    args: &[Bytes],
    now_ms: i64,
) -> CmdResult {
    let mut c = Call { shared, st, conn, args, now_ms };
    match spec.name {
        "ping" => connection::ping(&mut c),
        "echo" => reply(Reply::Bulk(args.get(1).cloned().unwrap_or_default())),
        "hello" => connection::hello(&mut c),
        "auth" => connection::auth(&mut c),
        "select" => connection::select(&mut c),
        "quit" => Ok(Action::Close(Some(Reply::ok()))),
        "reset" => connection::reset(&mut c),
        "client|setname" => connection::client_setname(&mut c),
        "client|getname" => connection::client_getname(&mut c),
        "client|setinfo" => connection::client_setinfo(&mut c),
        "client|id" => reply(Reply::Integer(c.conn.id as i64)),
        "client|info" => connection::client_info(&mut c),
        "client|list" => connection::client_list(&mut c),
        "client|kill" => connection::client_kill(&mut c),
        "client|no-evict" | "client|no-touch" => connection::client_on_off(&mut c, spec.name),
        "client|reply" => connection::client_reply(&mut c),
        "client|unblock" => connection::client_unblock(&mut c),
        "client|help" => reply(help("CLIENT", connection::CLIENT_HELP)),
        "config|get" => server::config_get(&mut c),
        "config|set" => server::config_set(&mut c),
        "config|resetstat" => server::config_resetstat(&mut c),
        "config|rewrite" => server::config_rewrite(&mut c),
        "config|help" => reply(help("CONFIG", server::CONFIG_HELP)),
        "info" => server::info(&mut c),
        "dbsize" => reply(Reply::Integer(c.st.engine.db(c.conn.db).len() as i64)),
        "flushdb" | "flushall" => server::flush(&mut c, spec.name == "flushall"),
        "swapdb" => server::swapdb(&mut c),
        "time" => server::time(),
        "lastsave" => reply(Reply::Integer(c.st.last_save_unix)),
        "save" => server::save(&mut c),
        "bgsave" => server::bgsave(&mut c),
        "bgrewriteaof" => server::bgrewriteaof(&mut c),
        "debug" => server::debug(&mut c),
        "shutdown" => server::shutdown(&mut c),
        "function|flush" => server::function_flush(&mut c),
        "script|flush" => server::script_flush(&mut c),
        "module|help" => reply(help("MODULE", server::MODULE_HELP)),
        "module|list" => reply(Reply::Array(Vec::new())),
        "module|load" | "module|loadex" => {
            tracing::warn!("Module {} failed to load: rill does not load modules", c.text(2));
            Err(CmdError::full("ERR Error loading the extension. Please check the server logs."))
        }
        "module|unload" => Err(CmdError::full("ERR Error unloading module: no such module with that name")),
        "script|help" => reply(help("SCRIPT", &["FLUSH [ASYNC|SYNC]", "    Flush the Lua scripts cache."])),
        "function|help" => reply(help("FUNCTION", &["FLUSH [ASYNC|SYNC]", "    Delete all functions."])),
        "command" => introspect::command(&mut c),
        "command|count" => reply(Reply::Integer(c.shared.table.len() as i64)),
        "command|info" => introspect::command_info(&mut c),
        "command|docs" => introspect::command_docs(&mut c),
        "command|list" => introspect::command_list(&mut c),
        "command|getkeys" => introspect::command_getkeys(&mut c),
        "command|help" => reply(help("COMMAND", introspect::COMMAND_HELP)),
        "multi" => multi::multi(&mut c),
        "exec" => multi::exec(&mut c),
        "discard" => multi::discard(&mut c),
        "watch" => multi::watch(&mut c),
        "unwatch" => multi::unwatch(&mut c),
        other => Err(CmdError::owned(format!("ERR command '{other}' is declared but has no handler"))),
    }
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

/// `ERR syntax error`
pub fn syntax() -> CmdError {
    CmdError::SYNTAX
}
