//! Declarations of the commands the server itself runs (connection, server, transactions,
//! introspection). Data commands are declared next to their handlers in rill-engine.

use super::{
    acl, connection, help, hotkeys, introspect, latency, metrics, migrate, multi, pubsub, replication, reply, server,
    Run,
};
use crate::client::Action;
use crate::script::functions;
use rill_engine::command::{key_at, keys_from, BeginSearch, Channels, CommandSpec, FindKeys, Flags, Handler, KeySpec};
use rill_engine::types::object;
use rill_engine::CmdError;
use rill_resp::Reply;

/// A server command's handler in the engine's table.
const fn server(run: &'static Run) -> Handler {
    Handler::Server(run)
}

const LOADING_STALE: Flags = Flags::LOADING.and(Flags::STALE);
const CONN: &[&str] = &["@fast", "@connection"];
const SLOW_CONN: &[&str] = &["@slow", "@connection"];
const ADMIN_ACL: &[&str] = &["@admin", "@slow", "@dangerous"];
const ADMIN_FLAGS: Flags = Flags::ADMIN.and(Flags::NOSCRIPT).and(LOADING_STALE);

const fn conn_cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    syntax: &'static str,
    summary: &'static str,
    since: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        acl: CONN,
        group: "connection",
        summary,
        since,
        syntax,
        ..CommandSpec::of(handler)
    }
}

// One argument per column of the spec table it builds; a struct literal would only rename them.
#[allow(clippy::too_many_arguments)]
const fn sub(
    name: &'static str,
    arity: i32,
    flags: Flags,
    acl: &'static [&'static str],
    group: &'static str,
    syntax: &'static str,
    summary: &'static str,
    since: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        acl,
        group,
        summary,
        since,
        syntax,
        complexity: "O(1)",
        ..CommandSpec::of(handler)
    }
}

const CLIENT_FLAGS: Flags = Flags::NOSCRIPT.and(LOADING_STALE);

/// CLIENT subcommands.
pub const CLIENT_SUBS: &[CommandSpec] = &[
    sub("client|setname", 3, CLIENT_FLAGS, SLOW_CONN, "connection", "connection-name", "Names the connection.", "2.6.9", server(&Run(connection::client_setname))),
    sub("client|getname", 2, CLIENT_FLAGS, SLOW_CONN, "connection", "", "Returns the connection's name.", "2.6.9", server(&Run(connection::client_getname))),
    sub("client|setinfo", 4, CLIENT_FLAGS, SLOW_CONN, "connection", "attr@(LIB-NAME libname | LIB-VER libver)", "Records the client library's name or version.", "7.2.0", server(&Run(connection::client_setinfo))),
    sub("client|id", 2, CLIENT_FLAGS, SLOW_CONN, "connection", "", "Returns the connection's unique id.", "5.0.0", server(&Run(|c| reply(Reply::Integer(c.conn.id as i64))))),
    sub("client|info", 2, CLIENT_FLAGS, SLOW_CONN, "connection", "", "Describes this connection in CLIENT LIST format.", "6.2.0", server(&Run(connection::client_info))),
    sub("client|list", -2, ADMIN_FLAGS, &["@admin", "@slow", "@dangerous", "@connection"], "connection", "[TYPE client-type@(NORMAL | MASTER | REPLICA | PUBSUB)] [ID client-id:integer ...]", "Lists the open connections.", "2.4.0", server(&Run(connection::client_list))),
    sub("client|kill", -3, ADMIN_FLAGS, &["@admin", "@slow", "@dangerous", "@connection"], "connection", "filter@(old-format | new-format@([ID client-id:integer] [TYPE client-type@(NORMAL | MASTER | SLAVE | REPLICA | PUBSUB)] [USER username] [ADDR ip-port] [LADDR ip-port] [SKIPME yes-no@(YES | NO)] [MAXAGE maxage:integer]) ...)", "Closes connections chosen by id, type, user, address or age.", "2.4.0", server(&Run(connection::client_kill))),
    sub("client|no-evict", 3, ADMIN_FLAGS, &["@admin", "@slow", "@dangerous", "@connection"], "connection", "enabled@(ON | OFF)", "Sets the connection's eviction exemption.", "7.0.0", server(&Run(|c| connection::client_on_off(c, "client|no-evict")))),
    sub("client|no-touch", 3, Flags::NOSCRIPT.and(LOADING_STALE), SLOW_CONN, "connection", "enabled@(ON | OFF)", "Sets whether this connection's reads update key access times.", "7.2.0", server(&Run(|c| connection::client_on_off(c, "client|no-touch")))),
    sub("client|reply", 3, CLIENT_FLAGS, SLOW_CONN, "connection", "action@(ON | OFF | SKIP)", "Turns replies to this connection on, off, or off for one command.", "3.2.0", server(&Run(connection::client_reply))),
    sub("client|unblock", -3, ADMIN_FLAGS, &["@admin", "@slow", "@dangerous", "@connection"], "connection", "client-id:integer [unblock-type@(TIMEOUT | ERROR)]", "Releases a client blocked on keys.", "5.0.0", server(&Run(connection::client_unblock))),
    sub("client|pause", -3, ADMIN_FLAGS, &["@admin", "@slow", "@dangerous", "@connection"], "connection", "timeout:integer [mode@(WRITE | ALL)]", "Holds the commands of normal clients, all or the writing ones, for a time.", "3.0.0", server(&Run(connection::client_pause))),
    sub("client|unpause", 2, ADMIN_FLAGS, &["@admin", "@slow", "@dangerous", "@connection"], "connection", "", "Ends a CLIENT PAUSE.", "6.2.0", server(&Run(connection::client_unpause))),
    sub("client|tracking", -3, CLIENT_FLAGS, SLOW_CONN, "connection", "status@(ON | OFF) [REDIRECT client-id:integer] [PREFIX prefix ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]", "Turns client-side caching's invalidation messages on or off for the connection.", "6.0.0", server(&Run(connection::client_tracking))),
    sub("client|caching", 3, CLIENT_FLAGS, SLOW_CONN, "connection", "mode@(YES | NO)", "Says whether the keys the next command reads are tracked, in OPTIN or OPTOUT mode.", "6.0.0", server(&Run(connection::client_caching))),
    sub("client|getredir", 2, CLIENT_FLAGS, SLOW_CONN, "connection", "", "Returns the client id invalidation messages are redirected to.", "6.0.0", server(&Run(connection::client_getredir))),
    sub("client|trackinginfo", 2, CLIENT_FLAGS, SLOW_CONN, "connection", "", "Describes the connection's client-side caching tracking.", "6.2.0", server(&Run(connection::client_trackinginfo))),
    sub("client|help", 2, LOADING_STALE, SLOW_CONN, "connection", "", "Lists the CLIENT subcommands.", "5.0.0", server(&Run(|_| reply(help("CLIENT", connection::CLIENT_HELP))))),
];

/// CONFIG subcommands.
pub const CONFIG_SUBS: &[CommandSpec] = &[
    sub(
        "config|get",
        -3,
        ADMIN_FLAGS,
        ADMIN_ACL,
        "server",
        "parameter ...",
        "Returns the values of configuration parameters matching patterns.",
        "2.0.0",
        server(&Run(server::config_get)),
    ),
    sub(
        "config|set",
        -4,
        ADMIN_FLAGS,
        ADMIN_ACL,
        "server",
        "data@(parameter value) ...",
        "Changes configuration parameters at run time, all or none.",
        "2.0.0",
        server(&Run(server::config_set)),
    ),
    sub(
        "config|resetstat",
        2,
        ADMIN_FLAGS,
        ADMIN_ACL,
        "server",
        "",
        "Resets the counters INFO reports.",
        "2.0.0",
        server(&Run(server::config_resetstat)),
    ),
    sub(
        "config|rewrite",
        2,
        ADMIN_FLAGS,
        ADMIN_ACL,
        "server",
        "",
        "Writes the running configuration to the config file.",
        "2.8.0",
        server(&Run(server::config_rewrite)),
    ),
    sub(
        "config|help",
        2,
        LOADING_STALE,
        &["@slow"],
        "server",
        "",
        "Lists the CONFIG subcommands.",
        "5.0.0",
        server(&Run(|_| reply(help("CONFIG", server::CONFIG_HELP)))),
    ),
];

/// COMMAND subcommands.
pub const COMMAND_SUBS: &[CommandSpec] = &[
    sub(
        "command|count",
        2,
        LOADING_STALE,
        &["@slow", "@connection"],
        "server",
        "",
        "Returns the number of commands.",
        "2.8.13",
        server(&Run(|c| reply(Reply::Integer(c.shared.table.len() as i64)))),
    ),
    sub(
        "command|info",
        -2,
        LOADING_STALE,
        &["@slow", "@connection"],
        "server",
        "[command-name ...]",
        "Describes commands: arity, flags, keys.",
        "2.8.13",
        server(&Run(introspect::command_info)),
    ),
    sub(
        "command|docs",
        -2,
        LOADING_STALE,
        &["@slow", "@connection"],
        "server",
        "[command-name ...]",
        "Returns the documentation of commands.",
        "7.0.0",
        server(&Run(introspect::command_docs)),
    ),
    sub(
        "command|list",
        -2,
        LOADING_STALE,
        &["@slow", "@connection"],
        "server",
        "[FILTERBY filterby@(MODULE module-name | ACLCAT category | PATTERN pattern:pattern)]",
        "Lists command names, optionally filtered.",
        "7.0.0",
        server(&Run(introspect::command_list)),
    ),
    sub(
        "command|getkeys",
        -3,
        LOADING_STALE,
        &["@slow", "@connection"],
        "server",
        "command arg ...",
        "Extracts the key names from a full command.",
        "2.8.13",
        server(&Run(introspect::command_getkeys)),
    ),
    sub(
        "command|getkeysandflags",
        -3,
        LOADING_STALE,
        &["@slow", "@connection"],
        "server",
        "command arg ...",
        "Extracts the key names and their access flags from a full command.",
        "7.0.0",
        server(&Run(introspect::command_getkeysandflags)),
    ),
    sub(
        "command|help",
        2,
        LOADING_STALE,
        &["@slow", "@connection"],
        "server",
        "",
        "Lists the COMMAND subcommands.",
        "5.0.0",
        server(&Run(|_| reply(help("COMMAND", introspect::COMMAND_HELP)))),
    ),
];

/// CLUSTER subcommands. rill runs alone, as a Redis with `cluster-enabled no`: every one
/// answers Redis' `This instance has cluster support disabled` (after the table's arity and
/// unknown-subcommand checks, as Redis' are made first). Clients that probe `CLUSTER INFO` or
/// `CLUSTER SLOTS` to tell a cluster from a single server read the answer they expect.
pub const CLUSTER_SUBS: &[CommandSpec] = &[
    CommandSpec {
        tips: &[],
        ..sub("cluster|addslots", -3, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "slot:integer ...", "Assigns hash slots to this node.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|addslotsrange", -4, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "range@(start-slot:integer end-slot:integer) ...", "Assigns ranges of hash slots to this node.", "7.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|bumpepoch", 2, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "", "Raises this node's configuration epoch.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|count-failure-reports", 3, Flags::ADMIN.and(Flags::STALE), ADMIN_ACL, "cluster", "node-id", "Counts the failure reports about a node.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|countkeysinslot", 3, Flags::STALE, &["@slow"], "cluster", "slot:integer", "Counts the keys in a hash slot.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|delslots", -3, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "slot:integer ...", "Unassigns hash slots from this node.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|delslotsrange", -4, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "range@(start-slot:integer end-slot:integer) ...", "Unassigns ranges of hash slots from this node.", "7.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|failover", -2, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "[options@(FORCE | TAKEOVER)]", "Makes a replica take over from its primary.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|flushslots", 2, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "", "Unassigns every hash slot of this node.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|forget", 3, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "node-id", "Drops a node from this node's view of the cluster.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|getkeysinslot", 4, Flags::STALE, &["@slow"], "cluster", "slot:integer count:integer", "Lists key names in a hash slot.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|help", 2, LOADING_STALE, &["@slow"], "cluster", "", "Lists the CLUSTER subcommands.", "5.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|info", 2, Flags::STALE, &["@slow"], "cluster", "", "Describes the cluster's state.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|keyslot", 3, Flags::STALE, &["@slow"], "cluster", "key", "Gives the hash slot of a key name.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|links", 2, Flags::STALE, &["@slow"], "cluster", "", "Lists this node's links on the cluster bus.", "7.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|meet", -4, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "ip port:integer [cluster-bus-port:integer]", "Joins another node into the cluster.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|myid", 2, Flags::STALE, &["@slow"], "cluster", "", "Gives this node's ID.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|myshardid", 2, Flags::STALE, &["@slow"], "cluster", "", "Gives this node's shard ID.", "7.2.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|nodes", 2, Flags::STALE, &["@slow"], "cluster", "", "Describes every node of the cluster.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|replicas", 3, Flags::ADMIN.and(Flags::STALE), ADMIN_ACL, "cluster", "node-id", "Lists the replicas of a primary node.", "5.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|replicate", 3, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "node-id", "Makes this node a replica of another.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|reset", -2, Flags::ADMIN.and(Flags::NOSCRIPT).and(Flags::STALE), ADMIN_ACL, "cluster", "[reset-type@(HARD | SOFT)]", "Resets this node's cluster state.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|saveconfig", 2, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "", "Writes the cluster configuration to disk.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|set-config-epoch", 3, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "config-epoch:integer", "Sets a new node's configuration epoch.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &[],
        ..sub("cluster|setslot", -4, Flags::ADMIN.and(Flags::STALE).and(Flags::NO_ASYNC_LOADING), ADMIN_ACL, "cluster", "slot:integer subcommand@(IMPORTING importing@node-id | MIGRATING migrating@node-id | NODE node@node-id | STABLE)", "Changes the state of a hash slot on this node.", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|shards", 2, LOADING_STALE, &["@slow"], "cluster", "", "Describes the cluster's shards.", "7.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|slaves", 3, Flags::ADMIN.and(Flags::STALE), ADMIN_ACL, "cluster", "node-id", "Lists the replicas of a primary node (old name of CLUSTER REPLICAS).", "3.0.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output", "request_policy:all_shards"],
        ..sub("cluster|slot-stats", -4, LOADING_STALE, &["@slow"], "cluster", "filter@(SLOTSRANGE slotsrange@(start-slot:integer end-slot:integer) | ORDERBY orderby@(metric [LIMIT limit:integer] [order@(ASC | DESC)]))", "Reports statistics per hash slot.", "8.2.0", server(&Run(cluster_disabled)))
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..sub("cluster|slots", 2, LOADING_STALE, &["@slow"], "cluster", "", "Maps hash slots to nodes.", "3.0.0", server(&Run(cluster_disabled)))
    },
];

/// Every CLUSTER subcommand on a server that is no cluster node.
fn cluster_disabled(_: &mut super::Call) -> super::CmdResult {
    Err(CmdError::full("ERR This instance has cluster support disabled"))
}

/// FUNCTION subcommands: function libraries (`script/functions.rs`).
pub const FUNCTION_SUBS: &[CommandSpec] = &[
    sub(
        "function|delete",
        3,
        Flags::NOSCRIPT.and(Flags::WRITE),
        &["@write", "@slow", "@scripting"],
        "scripting",
        "library-name:string",
        "Deletes a library and its functions.",
        "7.0.0",
        server(&Run(functions::function_delete)),
    ),
    sub(
        "function|dump",
        2,
        Flags::NOSCRIPT,
        &["@slow", "@scripting"],
        "scripting",
        "",
        "Dumps every library into a payload FUNCTION RESTORE loads.",
        "7.0.0",
        server(&Run(functions::function_dump)),
    ),
    sub(
        "function|flush",
        -2,
        Flags::NOSCRIPT.and(Flags::WRITE),
        &["@write", "@slow", "@scripting"],
        "scripting",
        "[flush-type@(ASYNC | SYNC)]",
        "Deletes every library and function.",
        "7.0.0",
        server(&Run(functions::function_flush)),
    ),
    sub(
        "function|help",
        2,
        LOADING_STALE,
        &["@slow", "@scripting"],
        "scripting",
        "",
        "Lists the FUNCTION subcommands.",
        "7.0.0",
        server(&Run(|_| reply(help("FUNCTION", functions::FUNCTION_HELP)))),
    ),
    sub(
        "function|kill",
        2,
        Flags::NOSCRIPT.and(Flags::ALLOW_BUSY).and(Flags::KILL_FUNCTION),
        &["@slow", "@scripting"],
        "scripting",
        "",
        "Stops the function running now, if it has written nothing.",
        "7.0.0",
        server(&Run(crate::script::script_kill)),
    ),
    sub(
        "function|list",
        -2,
        Flags::NOSCRIPT,
        &["@slow", "@scripting"],
        "scripting",
        "[LIBRARYNAME library-name-pattern:string] [WITHCODE]",
        "Lists the libraries and their functions.",
        "7.0.0",
        server(&Run(functions::function_list)),
    ),
    sub(
        "function|load",
        -3,
        Flags::NOSCRIPT.and(Flags::WRITE).and(Flags::DENYOOM),
        &["@write", "@slow", "@scripting"],
        "scripting",
        "[REPLACE] function-code:string",
        "Loads a library of functions.",
        "7.0.0",
        server(&Run(functions::function_load)),
    ),
    sub(
        "function|restore",
        -3,
        Flags::NOSCRIPT.and(Flags::WRITE).and(Flags::DENYOOM),
        &["@write", "@slow", "@scripting"],
        "scripting",
        "serialized-value:string [policy@(FLUSH | APPEND | REPLACE)]",
        "Loads the libraries of a FUNCTION DUMP payload.",
        "7.0.0",
        server(&Run(functions::function_restore)),
    ),
    sub(
        "function|stats",
        2,
        Flags::NOSCRIPT.and(Flags::ALLOW_BUSY).and(Flags::SCRIPT_STATS),
        &["@slow", "@scripting"],
        "scripting",
        "",
        "Reports the function running now and how many libraries and functions there are.",
        "7.0.0",
        server(&Run(functions::function_stats)),
    ),
];

/// SCRIPT subcommands: the script cache (`script/`).
pub const SCRIPT_SUBS: &[CommandSpec] = &[
    sub(
        "script|debug",
        3,
        Flags::NOSCRIPT,
        &["@slow", "@scripting"],
        "scripting",
        "mode@(YES | SYNC | NO)",
        "Sets the debug mode of the scripts this connection runs (rill: NO only).",
        "3.2.0",
        server(&Run(crate::script::script_debug)),
    ),
    sub(
        "script|exists",
        -3,
        Flags::NOSCRIPT,
        &["@slow", "@scripting"],
        "scripting",
        "sha1 ...",
        "Says, per SHA1, whether the script is in the script cache.",
        "2.6.0",
        server(&Run(crate::script::script_exists)),
    ),
    sub(
        "script|flush",
        -2,
        Flags::NOSCRIPT,
        &["@slow", "@scripting"],
        "scripting",
        "[flush-type@(ASYNC | SYNC)]",
        "Empties the script cache.",
        "2.6.0",
        server(&Run(crate::script::script_flush)),
    ),
    sub(
        "script|help",
        2,
        LOADING_STALE,
        &["@slow", "@scripting"],
        "scripting",
        "",
        "Lists the SCRIPT subcommands.",
        "5.0.0",
        server(&Run(|_| reply(help("SCRIPT", crate::script::SCRIPT_HELP)))),
    ),
    sub(
        "script|kill",
        2,
        Flags::NOSCRIPT.and(Flags::ALLOW_BUSY).and(Flags::KILL_SCRIPT),
        &["@slow", "@scripting"],
        "scripting",
        "",
        "Stops the script running now, if it has written nothing.",
        "2.6.0",
        server(&Run(crate::script::script_kill)),
    ),
    sub(
        "script|load",
        3,
        Flags::NOSCRIPT.and(Flags::STALE),
        &["@slow", "@scripting"],
        "scripting",
        "script:string",
        "Compiles a script into the script cache without running it.",
        "2.6.0",
        server(&Run(crate::script::script_load)),
    ),
];

/// The key spec of EVAL and FCALL: `numkeys` keys after the script, used in any way.
const SCRIPT_KEYS_RW: &[KeySpec] = &[KeySpec {
    flags: &["RW", "ACCESS", "UPDATE"],
    begin: BeginSearch::Index(2),
    find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 },
    notes: "",
}];

/// The same for the read-only forms.
const SCRIPT_KEYS_RO: &[KeySpec] = &[KeySpec {
    flags: &["RO", "ACCESS"],
    begin: BeginSearch::Index(2),
    find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, keystep: 1 },
    notes: "",
}];

const SCRIPT_RUN: Flags = Flags::NOSCRIPT
    .and(Flags::STALE)
    .and(Flags::SKIP_MONITOR)
    .and(Flags::NO_MANDATORY_KEYS)
    .and(Flags::MOVABLEKEYS)
    .and(Flags::SCRIPT);

/// A command that runs a script; `names`: how it names it (no flag: by its body).
const fn script_run(
    name: &'static str,
    read_only: bool,
    names: Flags,
    syntax: &'static str,
    summary: &'static str,
    since: &'static str,
    run: &'static Run,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -3,
        // MAY_REPLICATE: a script that may write is held by CLIENT PAUSE WRITE (a shebang's
        // `no-writes` clears it for dispatch's checks).
        flags: if read_only { SCRIPT_RUN.and(Flags::READONLY) } else { SCRIPT_RUN.and(Flags::MAY_REPLICATE) }
            .and(names),
        acl: &["@slow", "@scripting"],
        key_specs: if read_only { SCRIPT_KEYS_RO } else { SCRIPT_KEYS_RW },
        group: "scripting",
        summary,
        since,
        complexity: "Depends on the script.",
        syntax,
        ..CommandSpec::of(server(run))
    }
}

/// EVAL and its kin.
pub const SCRIPT_COMMANDS: &[CommandSpec] = &[
    script_run(
        "eval",
        false,
        Flags(0),
        "script:string numkeys:integer [key:key ...] [arg:string ...]",
        "Runs a Lua script on the server.",
        "2.6.0",
        &Run(crate::script::eval),
    ),
    script_run(
        "eval_ro",
        true,
        Flags(0),
        "script:string numkeys:integer [key:key ...] [arg:string ...]",
        "Runs a Lua script that may not write.",
        "7.0.0",
        &Run(crate::script::eval_ro),
    ),
    script_run(
        "evalsha",
        false,
        Flags::SCRIPT_BY_SHA,
        "sha1:string numkeys:integer [key:key ...] [arg:string ...]",
        "Runs a cached Lua script by its SHA1.",
        "2.6.0",
        &Run(crate::script::evalsha),
    ),
    script_run(
        "evalsha_ro",
        true,
        Flags::SCRIPT_BY_SHA,
        "sha1:string numkeys:integer [key:key ...] [arg:string ...]",
        "Runs a cached Lua script that may not write, by its SHA1.",
        "7.0.0",
        &Run(crate::script::evalsha_ro),
    ),
    script_run(
        "fcall",
        false,
        Flags::SCRIPT_FUNCTION,
        "function:string numkeys:integer [key:key ...] [arg:string ...]",
        "Runs a function of a loaded library.",
        "7.0.0",
        &Run(functions::fcall),
    ),
    script_run(
        "fcall_ro",
        true,
        Flags::SCRIPT_FUNCTION,
        "function:string numkeys:integer [key:key ...] [arg:string ...]",
        "Runs a function of a loaded library that may not write.",
        "7.0.0",
        &Run(functions::fcall_ro),
    ),
];

const MODULE_ADMIN: Flags = Flags::NO_ASYNC_LOADING.and(Flags::ADMIN).and(Flags::NOSCRIPT).and(Flags::PROTECTED);

/// MODULE subcommands. rill loads no modules: LIST is empty, LOAD and UNLOAD fail as they do
/// in Redis when a module cannot be loaded or is not there (behind `enable-module-command`).
pub const MODULE_SUBS: &[CommandSpec] = &[
    sub(
        "module|help",
        2,
        LOADING_STALE,
        &["@slow"],
        "server",
        "",
        "Lists the MODULE subcommands.",
        "5.0.0",
        server(&Run(|_| reply(help("MODULE", server::MODULE_HELP)))),
    ),
    sub(
        "module|list",
        2,
        Flags::ADMIN.and(Flags::NOSCRIPT),
        ADMIN_ACL,
        "server",
        "",
        "Returns the loaded modules (rill has none).",
        "4.0.0",
        server(&Run(|_| reply(Reply::Array(Vec::new())))),
    ),
    sub(
        "module|load",
        -3,
        MODULE_ADMIN,
        ADMIN_ACL,
        "server",
        "path [arg ...]",
        "Loads a module (rill cannot: always an error).",
        "4.0.0",
        server(&Run(server::module_load)),
    ),
    sub(
        "module|loadex",
        -3,
        MODULE_ADMIN,
        ADMIN_ACL,
        "server",
        "path [CONFIG name value ...] [ARGS args ...]",
        "Loads a module with configuration (rill cannot: always an error).",
        "7.0.0",
        server(&Run(server::module_load)),
    ),
    sub(
        "module|unload",
        3,
        MODULE_ADMIN,
        ADMIN_ACL,
        "server",
        "name",
        "Unloads a module (rill has none: always an error).",
        "4.0.0",
        server(&Run(|_| Err(CmdError::full("ERR Error unloading module: no such module with that name")))),
    ),
];

const PUBSUB_ACL: &[&str] = &["@pubsub", "@slow"];
const PUBSUB_INTROSPECT: Flags = Flags::PUBSUB.and(LOADING_STALE);
/// (P|S)(UN)SUBSCRIBE: allowed in a RESP2 client's subscribe mode.
const SUBSCRIBE_FLAGS: Flags = Flags::PUBSUB.and(Flags::NOSCRIPT).and(LOADING_STALE).and(Flags::SUBSCRIBE_CONTEXT);
/// (P|S)SUBSCRIBE: as the newest Redis (8.4+) flags them, refused with `-OOM` over
/// `maxmemory` (each subscription takes memory); Redis 8.2 accepted them. Redis' own pub/sub
/// suite checks it.
const SUBSCRIBE_GROWS: Flags = SUBSCRIBE_FLAGS.and(Flags::DENYOOM);
/// A shard channel in the key positions, marked as not a key (Redis' `not_key`), so that a
/// cluster would route it.
const SHARD_CHANNELS: &[rill_engine::command::KeySpec] = &[keys_from(1, 1, &["not_key"])];
const SHARD_CHANNEL: &[rill_engine::command::KeySpec] = &[key_at(1, &["not_key"])];

const ACL_FLAGS: Flags = Flags::NOSCRIPT.and(LOADING_STALE);
const ACL_ADMIN: Flags = Flags::ADMIN.and(ACL_FLAGS);
const ALL_NODES_OK: &[&str] = &["request_policy:all_nodes", "response_policy:all_succeeded"];

/// ACL subcommands.
pub const ACL_SUBS: &[CommandSpec] = &[
    sub(
        "acl|cat",
        -2,
        ACL_FLAGS,
        &["@slow"],
        "server",
        "[category]",
        "Lists the command categories, or the commands in one.",
        "6.0.0",
        server(&Run(acl::cat)),
    ),
    CommandSpec {
        tips: ALL_NODES_OK,
        ..sub(
            "acl|deluser",
            -3,
            ACL_ADMIN,
            ADMIN_ACL,
            "server",
            "username ...",
            "Deletes users and closes their connections.",
            "6.0.0",
            server(&Run(acl::deluser)),
        )
    },
    sub(
        "acl|dryrun",
        -4,
        ACL_ADMIN,
        ADMIN_ACL,
        "server",
        "username command [arg ...]",
        "Says whether a user may run a command, without running it.",
        "7.0.0",
        server(&Run(acl::dryrun)),
    ),
    sub(
        "acl|genpass",
        -2,
        ACL_FLAGS,
        &["@slow"],
        "server",
        "[bits:integer]",
        "Returns a random password as hex digits.",
        "6.0.0",
        server(&Run(acl::genpass)),
    ),
    sub(
        "acl|getuser",
        3,
        ACL_ADMIN,
        ADMIN_ACL,
        "server",
        "username",
        "Describes a user's flags, passwords and selectors.",
        "6.0.0",
        server(&Run(acl::getuser)),
    ),
    sub(
        "acl|help",
        2,
        LOADING_STALE,
        &["@slow"],
        "server",
        "",
        "Lists the ACL subcommands.",
        "6.0.0",
        server(&Run(|_| reply(help("ACL", acl::ACL_HELP)))),
    ),
    sub(
        "acl|list",
        2,
        ACL_ADMIN,
        ADMIN_ACL,
        "server",
        "",
        "Describes every user as a config file line.",
        "6.0.0",
        server(&Run(acl::users)),
    ),
    sub(
        "acl|load",
        2,
        ACL_ADMIN,
        ADMIN_ACL,
        "server",
        "",
        "Replaces the users with the ACL file's.",
        "6.0.0",
        server(&Run(acl::load)),
    ),
    sub(
        "acl|log",
        -2,
        ACL_ADMIN,
        ADMIN_ACL,
        "server",
        "[count:integer | RESET]",
        "Shows the newest ACL denials and failed logins.",
        "6.0.0",
        server(&Run(acl::log)),
    ),
    CommandSpec {
        tips: ALL_NODES_OK,
        ..sub(
            "acl|save",
            2,
            ACL_ADMIN,
            ADMIN_ACL,
            "server",
            "",
            "Writes the users to the ACL file.",
            "6.0.0",
            server(&Run(acl::save)),
        )
    },
    CommandSpec {
        tips: ALL_NODES_OK,
        ..sub(
            "acl|setuser",
            -3,
            ACL_ADMIN,
            ADMIN_ACL,
            "server",
            "username [rule ...]",
            "Creates a user or changes its rules.",
            "6.0.0",
            server(&Run(acl::setuser)),
        )
    },
    sub("acl|users", 2, ACL_ADMIN, ADMIN_ACL, "server", "", "Lists the user names.", "6.0.0", server(&Run(acl::users))),
    sub(
        "acl|whoami",
        2,
        ACL_FLAGS,
        &["@slow"],
        "server",
        "",
        "Returns the user this connection runs as.",
        "6.0.0",
        server(&Run(acl::whoami)),
    ),
];

/// MEMORY subcommands: the engine's, and DOCTOR, which reads the process's figures.
pub const MEMORY_SUBS: &[CommandSpec] = &[
    object::MEMORY_USAGE,
    object::MEMORY_MALLOC_STATS,
    object::MEMORY_PURGE,
    CommandSpec {
        name: "memory|doctor",
        tips: &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"],
        summary: "Looks for memory problems and describes them.",
        ..object::memory_sub(server(&Run(introspect::memory_doctor)))
    },
    CommandSpec {
        name: "memory|stats",
        tips: &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"],
        summary: "Reports where the memory goes: data, buffers, scripts, the allocator.",
        ..object::memory_sub(server(&Run(introspect::memory_stats)))
    },
    object::MEMORY_HELP,
];

/// SLOWLOG subcommands.
pub const SLOWLOG_SUBS: &[CommandSpec] = &[
    CommandSpec {
        tips: &["request_policy:all_nodes", "nondeterministic_output"],
        complexity: "O(N) where N is the number of entries returned",
        ..sub(
            "slowlog|get",
            -2,
            Flags::ADMIN.and(LOADING_STALE),
            ADMIN_ACL,
            "server",
            "[count:integer]",
            "Returns the newest entries of the slow log.",
            "2.2.12",
            server(&Run(latency::slowlog_get)),
        )
    },
    CommandSpec {
        tips: &["request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"],
        ..sub(
            "slowlog|len",
            2,
            Flags::ADMIN.and(LOADING_STALE),
            ADMIN_ACL,
            "server",
            "",
            "Returns how many entries the slow log holds.",
            "2.2.12",
            server(&Run(latency::slowlog_len)),
        )
    },
    CommandSpec {
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        complexity: "O(N) where N is the number of entries in the slow log",
        ..sub(
            "slowlog|reset",
            2,
            Flags::ADMIN.and(LOADING_STALE),
            ADMIN_ACL,
            "server",
            "",
            "Empties the slow log.",
            "2.2.12",
            server(&Run(latency::slowlog_reset)),
        )
    },
    sub(
        "slowlog|help",
        2,
        LOADING_STALE,
        &["@slow"],
        "server",
        "",
        "Lists the SLOWLOG subcommands.",
        "6.2.0",
        server(&Run(|_| reply(help("SLOWLOG", latency::SLOWLOG_HELP)))),
    ),
];

/// HOTKEYS subcommands (Redis 8.6).
pub const HOTKEYS_SUBS: &[CommandSpec] = &[
    CommandSpec {
        tips: &["request_policy:special"],
        ..sub(
            "hotkeys|start",
            -2,
            HOTKEYS_FLAGS,
            ADMIN_ACL,
            "server",
            "METRICS count:integer [CPU] [NET] [COUNT k:integer] [DURATION seconds:integer] [SAMPLE ratio:integer] \
             [SLOTS count:integer slot:integer ...]",
            "Starts tracking the keys commands spend the most time and network bytes on.",
            "8.6.0",
            server(&Run(hotkeys::start)),
        )
    },
    CommandSpec {
        tips: &["request_policy:special"],
        ..sub(
            "hotkeys|stop",
            2,
            HOTKEYS_FLAGS,
            ADMIN_ACL,
            "server",
            "",
            "Stops tracking hot keys; what was gathered stays for GET.",
            "8.6.0",
            server(&Run(hotkeys::stop)),
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output", "request_policy:special", "response_policy:special"],
        complexity: "O(K) where K is the number of hotkeys returned.",
        ..sub(
            "hotkeys|get",
            2,
            HOTKEYS_FLAGS,
            ADMIN_ACL,
            "server",
            "",
            "Returns the tracking session's figures and its heaviest keys by each metric.",
            "8.6.0",
            server(&Run(hotkeys::get)),
        )
    },
    CommandSpec {
        tips: &["request_policy:special"],
        ..sub(
            "hotkeys|reset",
            2,
            HOTKEYS_FLAGS,
            ADMIN_ACL,
            "server",
            "",
            "Drops a stopped tracking session and what it gathered.",
            "8.6.0",
            server(&Run(hotkeys::reset)),
        )
    },
    sub(
        "hotkeys|help",
        2,
        LOADING_STALE,
        &["@slow"],
        "server",
        "",
        "Lists the HOTKEYS subcommands.",
        "8.6.1",
        server(&Run(|_| reply(help("HOTKEYS", hotkeys::HELP)))),
    ),
];

const HOTKEYS_FLAGS: Flags = Flags::ADMIN.and(Flags::NOSCRIPT);

/// LATENCY subcommands.
pub const LATENCY_SUBS: &[CommandSpec] = &[
    CommandSpec {
        tips: LATENCY_REPORT_TIPS,
        ..sub(
            "latency|latest",
            2,
            ADMIN_FLAGS,
            ADMIN_ACL,
            "server",
            "",
            "Returns each latency event's newest sample and all-time high.",
            "2.8.13",
            server(&Run(latency::latency_latest)),
        )
    },
    CommandSpec {
        tips: LATENCY_REPORT_TIPS,
        complexity: "O(N) where N is the number of samples",
        ..sub(
            "latency|history",
            3,
            ADMIN_FLAGS,
            ADMIN_ACL,
            "server",
            "event",
            "Returns a latency event's samples.",
            "2.8.13",
            server(&Run(latency::latency_history)),
        )
    },
    CommandSpec {
        tips: &["request_policy:all_nodes", "response_policy:agg_sum"],
        complexity: "O(N) where N is the number of events",
        ..sub(
            "latency|reset",
            -2,
            ADMIN_FLAGS,
            ADMIN_ACL,
            "server",
            "[event ...]",
            "Forgets the samples of some or all latency events.",
            "2.8.13",
            server(&Run(latency::latency_reset)),
        )
    },
    CommandSpec {
        tips: LATENCY_REPORT_TIPS,
        complexity: "O(N) where N is the number of samples",
        ..sub(
            "latency|graph",
            3,
            ADMIN_FLAGS,
            ADMIN_ACL,
            "server",
            "event",
            "Draws a latency event's samples as text.",
            "2.8.13",
            server(&Run(latency::latency_graph)),
        )
    },
    CommandSpec {
        tips: LATENCY_REPORT_TIPS,
        complexity: "O(N) where N is the number of events",
        ..sub(
            "latency|doctor",
            2,
            ADMIN_FLAGS,
            ADMIN_ACL,
            "server",
            "",
            "Reports on the latency events recorded, in words.",
            "2.8.13",
            server(&Run(latency::latency_doctor)),
        )
    },
    CommandSpec {
        tips: LATENCY_REPORT_TIPS,
        complexity: "O(N) where N is the number of commands with durations",
        ..sub(
            "latency|histogram",
            -2,
            ADMIN_FLAGS,
            ADMIN_ACL,
            "server",
            "[command ...]",
            "Returns the cumulative distribution of commands' durations.",
            "7.0.0",
            server(&Run(latency::latency_histogram)),
        )
    },
    sub(
        "latency|help",
        2,
        LOADING_STALE,
        &["@slow"],
        "server",
        "",
        "Lists the LATENCY subcommands.",
        "2.8.13",
        server(&Run(|_| reply(help("LATENCY", latency::LATENCY_HELP)))),
    ),
];

const LATENCY_REPORT_TIPS: &[&str] =
    &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"];

/// RILL.METRICS subcommands.
pub const RILL_METRICS_SUBS: &[CommandSpec] = &[
    CommandSpec {
        tips: &["nondeterministic_output"],
        complexity: "O(C + D) for C commands run and D databases",
        ..sub(
            "rill.metrics|server",
            2,
            LOADING_STALE,
            &["@slow"],
            "server",
            "",
            "Returns the server's figures as a map (rill's own command).",
            "0.1.0",
            server(&Run(metrics::server)),
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        complexity: "O(N) for the N keys looked at (COUNT), plus each stream's groups",
        ..sub(
            "rill.metrics|streams",
            -3,
            LOADING_STALE,
            &["@slow", "@stream"],
            "server",
            "cursor [COUNT count:integer] [CONSUMERS]",
            "Returns the figures of the next streams of a keyspace walk (rill's own command).",
            "0.1.0",
            server(&Run(metrics::streams)),
        )
    },
    sub(
        "rill.metrics|help",
        2,
        LOADING_STALE,
        &["@slow"],
        "server",
        "",
        "Lists the RILL.METRICS subcommands.",
        "0.1.0",
        server(&Run(|_| reply(help("RILL.METRICS", metrics::HELP)))),
    ),
];

/// PUBSUB subcommands.
pub const PUBSUB_SUBS: &[CommandSpec] = &[
    sub(
        "pubsub|channels",
        -2,
        PUBSUB_INTROSPECT,
        PUBSUB_ACL,
        "pubsub",
        "[pattern:pattern]",
        "Lists the channels with subscribers, optionally those matching a pattern.",
        "2.8.0",
        server(&Run(pubsub::channels)),
    ),
    sub(
        "pubsub|numsub",
        -2,
        PUBSUB_INTROSPECT,
        PUBSUB_ACL,
        "pubsub",
        "[channel ...]",
        "Counts each channel's subscribers.",
        "2.8.0",
        server(&Run(pubsub::numsub)),
    ),
    sub(
        "pubsub|numpat",
        2,
        PUBSUB_INTROSPECT,
        PUBSUB_ACL,
        "pubsub",
        "",
        "Counts the distinct patterns subscribed to.",
        "2.8.0",
        server(&Run(pubsub::numpat)),
    ),
    sub(
        "pubsub|shardchannels",
        -2,
        PUBSUB_INTROSPECT,
        PUBSUB_ACL,
        "pubsub",
        "[pattern:pattern]",
        "Lists the shard channels with subscribers, optionally those matching a pattern.",
        "7.0.0",
        server(&Run(pubsub::shardchannels)),
    ),
    sub(
        "pubsub|shardnumsub",
        -2,
        PUBSUB_INTROSPECT,
        PUBSUB_ACL,
        "pubsub",
        "[shardchannel ...]",
        "Counts each shard channel's subscribers.",
        "7.0.0",
        server(&Run(pubsub::shardnumsub)),
    ),
    sub(
        "pubsub|help",
        2,
        LOADING_STALE,
        &["@slow"],
        "pubsub",
        "",
        "Lists the PUBSUB subcommands.",
        "6.2.0",
        server(&Run(|_| reply(help("PUBSUB", pubsub::PUBSUB_HELP)))),
    ),
];

/// The pub/sub commands a client runs (PUBSUB is a container, below).
const fn pubsub_cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    syntax: &'static str,
    summary: &'static str,
    since: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        acl: PUBSUB_ACL,
        group: "pubsub",
        summary,
        since,
        syntax,
        complexity: "O(N) for N channels",
        ..CommandSpec::of(handler)
    }
}

/// Every server-run command.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        channels: Channels::Subscribe,
        ..pubsub_cmd(
            "subscribe",
            -2,
            SUBSCRIBE_GROWS,
            "channel ...",
            "Subscribes the connection to channels.",
            "2.0.0",
            server(&Run(pubsub::subscribe)),
        )
    },
    pubsub_cmd(
        "unsubscribe",
        -1,
        SUBSCRIBE_FLAGS,
        "[channel ...]",
        "Unsubscribes the connection from channels, or from all of them.",
        "2.0.0",
        server(&Run(pubsub::unsubscribe)),
    ),
    CommandSpec {
        channels: Channels::PatternSubscribe,
        ..pubsub_cmd(
            "psubscribe",
            -2,
            SUBSCRIBE_GROWS,
            "pattern:pattern ...",
            "Subscribes the connection to the channels matching patterns.",
            "2.0.0",
            server(&Run(pubsub::psubscribe)),
        )
    },
    pubsub_cmd(
        "punsubscribe",
        -1,
        SUBSCRIBE_FLAGS,
        "[pattern:pattern ...]",
        "Unsubscribes the connection from patterns, or from all of them.",
        "2.0.0",
        server(&Run(pubsub::punsubscribe)),
    ),
    CommandSpec {
        first_key: 1,
        last_key: -1,
        step: 1,
        key_specs: SHARD_CHANNELS,
        channels: Channels::Subscribe,
        ..pubsub_cmd(
            "ssubscribe",
            -2,
            SUBSCRIBE_GROWS,
            "shardchannel ...",
            "Subscribes the connection to shard channels.",
            "7.0.0",
            server(&Run(pubsub::ssubscribe)),
        )
    },
    CommandSpec {
        first_key: 1,
        last_key: -1,
        step: 1,
        key_specs: SHARD_CHANNELS,
        ..pubsub_cmd(
            "sunsubscribe",
            -1,
            SUBSCRIBE_FLAGS,
            "[shardchannel ...]",
            "Unsubscribes the connection from shard channels, or from all of them.",
            "7.0.0",
            server(&Run(pubsub::sunsubscribe)),
        )
    },
    CommandSpec {
        acl: &["@pubsub", "@fast"],
        complexity: "O(N+M): N subscribers of the channel, M patterns subscribed to",
        channels: Channels::Publish,
        ..pubsub_cmd(
            "publish",
            3,
            Flags::PUBSUB.and(LOADING_STALE).and(Flags::FAST).and(Flags::MAY_REPLICATE),
            "channel message",
            "Sends a message to a channel's subscribers; returns how many got it.",
            "2.0.0",
            server(&Run(pubsub::publish)),
        )
    },
    CommandSpec {
        acl: &["@pubsub", "@fast"],
        first_key: 1,
        last_key: 1,
        step: 1,
        key_specs: SHARD_CHANNEL,
        complexity: "O(N): N subscribers of the shard channel",
        channels: Channels::Publish,
        ..pubsub_cmd(
            "spublish",
            3,
            Flags::PUBSUB.and(LOADING_STALE).and(Flags::FAST).and(Flags::MAY_REPLICATE),
            "shardchannel message",
            "Sends a message to a shard channel's subscribers; returns how many got it.",
            "7.0.0",
            server(&Run(pubsub::spublish)),
        )
    },
    CommandSpec {
        name: "pubsub",
        arity: -2,
        acl: &["@slow"],
        group: "pubsub",
        summary: "Commands about the pub/sub subscriptions.",
        since: "2.8.0",
        subcommands: PUBSUB_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    conn_cmd(
        "ping",
        -1,
        Flags::REFUSED_ON_DISK_ERROR.and(Flags::FAST).and(Flags::SUBSCRIBE_CONTEXT),
        "[message]",
        "Returns PONG, or the message given.",
        "1.0.0",
        server(&Run(connection::ping)),
    ),
    conn_cmd(
        "echo",
        2,
        Flags::FAST,
        "message",
        "Returns the message given.",
        "1.0.0",
        server(&Run(|c| reply(Reply::Bulk(c.args.get(1).cloned().unwrap_or_default())))),
    ),
    conn_cmd(
        "hello",
        -1,
        Flags::NO_AUTH.and(Flags::FAST).and(Flags::NOSCRIPT).and(LOADING_STALE).and(Flags::ALLOW_BUSY),
        "[arguments@(protover:integer [AUTH (username password)] [SETNAME clientname])]",
        "Handshakes: chooses the protocol, authenticates, names the connection.",
        "6.0.0",
        server(&Run(connection::hello)),
    ),
    conn_cmd(
        "auth",
        -2,
        Flags::NOSCRIPT
            .and(LOADING_STALE)
            .and(Flags::FAST)
            .and(Flags::NO_AUTH)
            .and(Flags::ALLOW_BUSY)
            .and(Flags::BUSY_AUTH),
        "[username] password",
        "Authenticates the connection.",
        "1.0.0",
        server(&Run(connection::auth)),
    ),
    conn_cmd(
        "select",
        2,
        LOADING_STALE.and(Flags::FAST),
        "index:integer",
        "Changes the selected database.",
        "1.0.0",
        server(&Run(connection::select)),
    ),
    conn_cmd(
        "quit",
        -1,
        Flags::TRANSACTION_CONTROL
            .and(Flags::SUBSCRIBE_CONTEXT)
            .and(Flags::ALLOW_BUSY.and(Flags::NOSCRIPT).and(LOADING_STALE).and(Flags::FAST).and(Flags::NO_AUTH)),
        "",
        "Closes the connection after replying.",
        "1.0.0",
        server(&Run(|_| Ok(Action::Close(Some(Reply::ok()))))),
    ),
    conn_cmd(
        "reset",
        1,
        Flags::TRANSACTION_CONTROL
            .and(Flags::SUBSCRIBE_CONTEXT)
            .and(Flags::NOSCRIPT.and(LOADING_STALE).and(Flags::FAST).and(Flags::NO_AUTH).and(Flags::ALLOW_BUSY)),
        "",
        "Resets the connection to its initial state.",
        "6.2.0",
        server(&Run(connection::reset)),
    ),
    CommandSpec {
        name: "client",
        arity: -2,
        acl: &["@slow"],
        group: "connection",
        summary: "Commands about client connections.",
        since: "2.4.0",
        subcommands: CLIENT_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "rill.metrics",
        arity: -2,
        acl: &["@slow"],
        group: "server",
        summary: "The figures /metrics shows, over the Redis protocol (rill's own command).",
        since: "0.1.0",
        subcommands: RILL_METRICS_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "migrate",
        arity: -6,
        flags: Flags::WRITE.and(Flags::MOVABLEKEYS),
        first_key: 3,
        last_key: 3,
        step: 1,
        acl: &["@keyspace", "@write", "@slow", "@dangerous"],
        tips: &["nondeterministic_output"],
        key_specs: &[
            key_at(3, &["RW", "ACCESS", "DELETE"]),
            KeySpec {
                flags: &["RW", "ACCESS", "DELETE", "INCOMPLETE"],
                begin: BeginSearch::Keyword { keyword: "KEYS", startfrom: -2 },
                find: FindKeys::Range { lastkey: -1, keystep: 1, limit: 0 },
                notes: "",
            },
        ],
        group: "generic",
        summary: "Moves (or copies) keys to another server, over its RESTORE command.",
        since: "2.6.0",
        complexity: "O(N) in the bytes moved: a DUMP and DEL here, a RESTORE there.",
        syntax: "host port:integer key:key destination-db:integer timeout:integer [COPY] [REPLACE] [authentication@(AUTH password | AUTH2 username password)] [KEYS key:key ...]",
        get_keys: Some(migrate::migrate_keys),
        ..CommandSpec::of(server(&Run(migrate::migrate)))
    },
    CommandSpec {
        name: "monitor",
        arity: 1,
        flags: ADMIN_FLAGS,
        acl: ADMIN_ACL,
        group: "server",
        summary: "Streams every command the server runs to this connection.",
        since: "1.0.0",
        ..CommandSpec::of(server(&Run(connection::monitor)))
    },
    CommandSpec {
        group: "cluster",
        ..conn_cmd(
            "readonly",
            1,
            LOADING_STALE.and(Flags::FAST),
            "",
            "Lets a cluster replica serve reads on this connection (rill runs without cluster mode).",
            "3.0.0",
            server(&Run(|_| Err(CmdError::full("ERR This instance has cluster support disabled")))),
        )
    },
    CommandSpec {
        group: "cluster",
        ..conn_cmd(
            "readwrite",
            1,
            LOADING_STALE.and(Flags::FAST),
            "",
            "Ends READONLY on this connection (rill runs without cluster mode).",
            "3.0.0",
            server(&Run(|_| Err(CmdError::full("ERR This instance has cluster support disabled")))),
        )
    },
    CommandSpec {
        name: "memory",
        arity: -2,
        acl: &["@slow"],
        group: "server",
        summary: "Memory diagnostics: what a key costs, what the allocator says, what looks wrong.",
        since: "4.0.0",
        complexity: "Depends on the subcommand.",
        subcommands: MEMORY_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "acl",
        arity: -2,
        acl: &["@slow"],
        group: "server",
        summary: "Commands about ACL users and permissions.",
        since: "6.0.0",
        subcommands: ACL_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "slowlog",
        arity: -2,
        acl: &["@slow"],
        group: "server",
        summary: "Commands about the slow log.",
        since: "2.2.12",
        subcommands: SLOWLOG_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "latency",
        arity: -2,
        acl: &["@slow"],
        group: "server",
        summary: "Commands about latency: the monitor's events and command durations.",
        since: "2.8.13",
        subcommands: LATENCY_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "hotkeys",
        arity: -2,
        acl: &["@slow"],
        group: "server",
        summary: "Commands about tracking the keys commands spend the most time and bytes on.",
        since: "8.6.0",
        subcommands: HOTKEYS_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "config",
        arity: -2,
        acl: &["@slow"],
        group: "server",
        summary: "Commands about the server configuration.",
        since: "2.0.0",
        subcommands: CONFIG_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "cluster",
        arity: -2,
        acl: &["@slow"],
        group: "cluster",
        summary: "Commands about a Redis Cluster (none is served: rill is a single server).",
        since: "3.0.0",
        subcommands: CLUSTER_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "command",
        arity: -1,
        flags: LOADING_STALE,
        acl: &["@slow", "@connection"],
        group: "server",
        summary: "Describes every command.",
        since: "2.8.13",
        complexity: "O(N) where N is the number of commands",
        subcommands: COMMAND_SUBS,
        ..CommandSpec::of(server(&Run(introspect::command)))
    },
    CommandSpec {
        name: "function",
        arity: -2,
        acl: &["@slow"],
        group: "scripting",
        summary: "Commands about functions.",
        since: "7.0.0",
        subcommands: FUNCTION_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "module",
        arity: -2,
        acl: &["@slow"],
        group: "server",
        summary: "Commands about modules.",
        since: "4.0.0",
        subcommands: MODULE_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "script",
        arity: -2,
        acl: &["@slow"],
        group: "scripting",
        summary: "Commands about the script cache.",
        since: "2.6.0",
        subcommands: SCRIPT_SUBS,
        ..CommandSpec::of(Handler::Container)
    },
    CommandSpec {
        name: "info",
        arity: -1,
        flags: LOADING_STALE,
        acl: &["@slow", "@dangerous"],
        group: "server",
        summary: "Reports server information and statistics by section.",
        since: "1.0.0",
        syntax: "[section ...]",
        tips: &["nondeterministic_output"],
        ..CommandSpec::of(server(&Run(server::info)))
    },
    CommandSpec {
        name: "time",
        arity: 1,
        flags: LOADING_STALE.and(Flags::FAST),
        acl: &["@fast"],
        group: "server",
        summary: "Returns the server's time as seconds and microseconds.",
        since: "2.6.0",
        ..CommandSpec::of(server(&Run(|_| server::time())))
    },
    CommandSpec {
        name: "save",
        arity: 1,
        flags: Flags::ADMIN.and(Flags::NOSCRIPT).and(Flags::NO_ASYNC_LOADING).and(Flags::NO_MULTI),
        acl: ADMIN_ACL,
        group: "server",
        summary: "Synchronously saves the database(s) to disk.",
        since: "1.0.0",
        complexity: "O(N) where N is the total number of keys in all databases",
        ..CommandSpec::of(server(&Run(server::save)))
    },
    CommandSpec {
        name: "bgsave",
        arity: -1,
        flags: Flags::ADMIN.and(Flags::NOSCRIPT).and(Flags::NO_ASYNC_LOADING),
        acl: ADMIN_ACL,
        group: "server",
        summary: "Asynchronously saves the database(s) to disk.",
        since: "1.0.0",
        complexity: "O(1)",
        syntax: "[SCHEDULE]",
        ..CommandSpec::of(server(&Run(server::bgsave)))
    },
    CommandSpec {
        name: "bgrewriteaof",
        arity: 1,
        flags: Flags::ADMIN.and(Flags::NOSCRIPT).and(Flags::NO_ASYNC_LOADING),
        acl: ADMIN_ACL,
        group: "server",
        summary: "Asynchronously rewrites the append-only file to disk.",
        since: "1.0.0",
        complexity: "O(1)",
        ..CommandSpec::of(server(&Run(server::bgrewriteaof)))
    },
    CommandSpec {
        name: "replconf",
        arity: -1,
        flags: Flags::ADMIN.and(Flags::NOSCRIPT).and(LOADING_STALE).and(Flags::ALLOW_BUSY),
        acl: &["@admin", "@slow", "@dangerous"],
        group: "server",
        summary: "What a replica tells its primary about itself (its port, address and \
                  capabilities) and, once linked, how far it has applied the stream.",
        since: "3.0.0",
        ..CommandSpec::of(server(&Run(replication::replconf)))
    },
    CommandSpec {
        name: "wait",
        arity: 3,
        flags: Flags::BLOCKING,
        acl: &["@slow", "@blocking", "@connection"],
        tips: &["request_policy:all_shards", "response_policy:agg_min"],
        group: "generic",
        summary: "Waits until this connection's last write is acknowledged by a number of \
                  replicas, or the timeout passes; returns how many acknowledged it.",
        since: "3.0.0",
        complexity: "O(1) per check, O(replicas) per acknowledgement",
        syntax: "numreplicas timeout",
        ..CommandSpec::of(server(&Run(replication::wait)))
    },
    CommandSpec {
        name: "waitaof",
        arity: 4,
        flags: Flags::BLOCKING,
        acl: &["@slow", "@blocking", "@connection"],
        tips: &["request_policy:all_shards", "response_policy:agg_min"],
        group: "generic",
        summary: "Waits until this connection's last write is on disk in the local log and in \
                  a number of replicas' logs, or the timeout passes; returns both counts.",
        since: "7.2.0",
        complexity: "O(1) per check, O(replicas) per acknowledgement",
        syntax: "numlocal numreplicas timeout",
        ..CommandSpec::of(server(&Run(replication::waitaof)))
    },
    CommandSpec {
        name: "replicaof",
        arity: 3,
        flags: Flags::NO_ASYNC_LOADING.and(Flags::ADMIN).and(Flags::NOSCRIPT).and(Flags::STALE),
        acl: &["@admin", "@slow", "@dangerous"],
        group: "server",
        summary: "Makes this server a replica of another one, or (NO ONE) a primary again.",
        since: "5.0.0",
        syntax: "<host port | NO ONE>",
        ..CommandSpec::of(server(&Run(replication::replicaof)))
    },
    CommandSpec {
        name: "slaveof",
        arity: 3,
        flags: Flags::NO_ASYNC_LOADING.and(Flags::ADMIN).and(Flags::NOSCRIPT).and(Flags::STALE),
        acl: &["@admin", "@slow", "@dangerous"],
        group: "server",
        summary: "The old name of REPLICAOF.",
        since: "1.0.0",
        syntax: "<host port | NO ONE>",
        ..CommandSpec::of(server(&Run(replication::replicaof)))
    },
    CommandSpec {
        name: "failover",
        arity: -1,
        flags: Flags::ADMIN.and(Flags::NOSCRIPT).and(Flags::STALE),
        acl: &["@admin", "@slow", "@dangerous"],
        group: "server",
        summary: "Hands the primary role to a replica once it has the whole stream, writes held \
                  meanwhile.",
        since: "6.2.0",
        syntax: "[target@TO (host port:integer [FORCE])] [ABORT] [TIMEOUT milliseconds:integer]",
        ..CommandSpec::of(server(&Run(replication::failover)))
    },
    CommandSpec {
        name: "psync",
        arity: -3,
        flags: Flags::NO_ASYNC_LOADING.and(Flags::ADMIN).and(Flags::NO_MULTI).and(Flags::NOSCRIPT),
        acl: &["@admin", "@slow", "@dangerous"],
        group: "server",
        summary: "A replica asks to continue the replication stream from an offset, or to start \
                  over from a snapshot.",
        since: "2.8.0",
        syntax: "replicationid offset",
        ..CommandSpec::of(server(&Run(replication::psync)))
    },
    CommandSpec {
        name: "sync",
        arity: 1,
        flags: Flags::NO_ASYNC_LOADING.and(Flags::ADMIN).and(Flags::NO_MULTI).and(Flags::NOSCRIPT),
        acl: &["@admin", "@slow", "@dangerous"],
        group: "server",
        summary: "The old form of PSYNC: a snapshot, then the replication stream.",
        since: "1.0.0",
        ..CommandSpec::of(server(&Run(replication::sync)))
    },
    CommandSpec {
        name: "role",
        arity: 1,
        flags: Flags::NOSCRIPT.and(LOADING_STALE).and(Flags::FAST),
        acl: &["@admin", "@fast", "@dangerous"],
        group: "server",
        summary: "Says whether this server is a primary or a replica, with its replication offset \
                  and its replicas (or its primary and link state).",
        since: "2.8.12",
        ..CommandSpec::of(server(&Run(replication::role)))
    },
    CommandSpec {
        name: "lastsave",
        arity: 1,
        flags: LOADING_STALE.and(Flags::FAST),
        acl: &["@admin", "@fast", "@dangerous"],
        group: "server",
        summary: "Returns the Unix time of the last successful save.",
        since: "1.0.0",
        ..CommandSpec::of(server(&Run(|c| reply(Reply::Integer(c.st.last_save_unix)))))
    },
    CommandSpec {
        name: "debug",
        arity: -2,
        flags: ADMIN_FLAGS.and(Flags::PROTECTED),
        acl: ADMIN_ACL,
        group: "server",
        summary:
            "Debugging helpers: SLEEP, LOG, SET-ACTIVE-EXPIRE, SET-ALLOW-ACCESS-EXPIRED, OBJECT, LISTPACK, PANIC, DIGEST, DIGEST-VALUE, POPULATE, HELP.",
        since: "1.0.0",
        syntax: "subcommand [arg ...]",
        ..CommandSpec::of(server(&Run(server::debug)))
    },
    CommandSpec {
        name: "shutdown",
        arity: -1,
        flags: Flags::ADMIN
            .and(Flags::NOSCRIPT)
            .and(LOADING_STALE)
            .and(Flags::NO_MULTI)
            .and(Flags::ALLOW_BUSY)
            .and(Flags::BUSY_SHUTDOWN),
        acl: ADMIN_ACL,
        group: "server",
        summary: "Stops the server.",
        since: "1.0.0",
        syntax: "[save-selector@(NOSAVE | SAVE)] [NOW] [FORCE] [ABORT]",
        ..CommandSpec::of(server(&Run(server::shutdown)))
    },
    CommandSpec {
        name: "multi",
        arity: 1,
        flags: Flags::TRANSACTION_CONTROL
            .and(Flags::NOSCRIPT.and(LOADING_STALE).and(Flags::FAST).and(Flags::ALLOW_BUSY))
            .and(Flags::BUSY_MULTI),
        acl: &["@fast", "@transaction"],
        group: "transactions",
        summary: "Starts a transaction.",
        since: "1.2.0",
        ..CommandSpec::of(server(&Run(multi::multi)))
    },
    CommandSpec {
        name: "exec",
        arity: 1,
        flags: Flags::EXEC
            .and(Flags::TRANSACTION_CONTROL.and(Flags::NOSCRIPT.and(LOADING_STALE).and(Flags::SKIP_SLOWLOG))),
        acl: &["@slow", "@transaction"],
        group: "transactions",
        summary: "Runs the queued commands of a transaction atomically.",
        since: "1.2.0",
        complexity: "The sum of the queued commands' costs",
        ..CommandSpec::of(server(&Run(multi::exec)))
    },
    CommandSpec {
        name: "discard",
        arity: 1,
        flags: Flags::TRANSACTION_CONTROL
            .and(Flags::NOSCRIPT.and(LOADING_STALE).and(Flags::FAST).and(Flags::ALLOW_BUSY)),
        acl: &["@fast", "@transaction"],
        group: "transactions",
        summary: "Drops the queued commands of a transaction.",
        since: "2.0.0",
        ..CommandSpec::of(server(&Run(multi::discard)))
    },
    CommandSpec {
        name: "watch",
        arity: -2,
        flags: Flags::TRANSACTION_CONTROL
            .and(Flags::NOSCRIPT.and(LOADING_STALE).and(Flags::FAST).and(Flags::ALLOW_BUSY)),
        first_key: 1,
        last_key: -1,
        step: 1,
        acl: &["@fast", "@transaction"],
        key_specs: &[keys_from(1, 1, &["RO"])],
        group: "transactions",
        summary: "Makes the next EXEC conditional on keys staying unchanged.",
        since: "2.2.0",
        complexity: "O(1) per key",
        syntax: "key:key ...",
        ..CommandSpec::of(server(&Run(multi::watch)))
    },
    CommandSpec {
        name: "unwatch",
        arity: 1,
        flags: Flags::NOSCRIPT.and(LOADING_STALE).and(Flags::FAST).and(Flags::ALLOW_BUSY),
        acl: &["@fast", "@transaction"],
        group: "transactions",
        summary: "Forgets every watched key.",
        since: "2.2.0",
        ..CommandSpec::of(server(&Run(multi::unwatch)))
    },
];
