//! `rill-server`: a Redis-protocol stream server.
//!
//! Start-up follows redis-server's conventions: `rill-server [config-file] [--directive value ...]`.
//! With no arguments it listens on 127.0.0.1:6379 and keeps its data in `./data`.

use rill_server::config::Config;
use rill_server::{aof, clock, cmd, logging};
use std::time::Duration;

#[global_allocator]
static GLOBAL: rill_server::alloc::Counting = rill_server::alloc::Counting;

fn usage() {
    println!(
        "Usage: rill-server [/path/to/rill.conf] [options]\n       rill-server -v or --version\n       rill-server -h or --help\n       rill-server --check-log <file.incr.rlog> [--fix]   check (and with --fix, cut back to its last good record) a log file\n\nExamples:\n       rill-server (listen on 127.0.0.1:6379, data in ./data)\n       rill-server --port 7777\n       rill-server /etc/rill/rill.conf --loglevel verbose"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => {
            println!("rill-server v={} (Redis protocol {})", env!("CARGO_PKG_VERSION"), cmd::connection::REDIS_VERSION);
            return;
        }
        Some("-h" | "--help") => {
            usage();
            return;
        }
        Some("--check-log") => std::process::exit(aof::check::run(args.get(1..).unwrap_or_default())),
        _ => {}
    }
    let config = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("\n*** FATAL CONFIG FILE ERROR (rill {}) ***", env!("CARGO_PKG_VERSION"));
            if e.line > 0 {
                eprintln!("Reading the configuration file, at line {}", e.line);
            }
            eprintln!(">>> '{}'", e.text);
            eprintln!("{}", e.reason);
            std::process::exit(1);
        }
    };
    logging::init(config.get("loglevel"), config.get("logfile"));
    crash_on_panic();
    // First line of the log, as Redis' start-up banner: the version and the process id
    // (tools that start servers match " PID: <pid>" to tell this process' log from an older one).
    tracing::info!(
        "rill-server {} (Redis protocol {}) starting, PID: {}",
        env!("CARGO_PKG_VERSION"),
        cmd::connection::REDIS_VERSION,
        std::process::id()
    );
    for name in &config.ignored {
        tracing::warn!(
            "directive '{name}' is accepted for compatibility with redis.conf but not implemented by rill; ignored"
        );
    }
    for name in config.inert() {
        tracing::warn!("directive '{name}' is stored and reported, but rill's replication does not act on it yet");
    }
    if config.get("daemonize") == "yes" {
        tracing::warn!("daemonize yes is not supported; running in the foreground");
    }
    let dir = config.get("dir").to_string();
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::env::set_current_dir(&dir)) {
        eprintln!("Can't chdir to '{dir}': {e}");
        std::process::exit(1);
    }
    // As Redis: the server works inside `dir`, and CONFIG GET dir reports it as an absolute path.
    let mut config = config;
    if let Ok(abs) = std::env::current_dir() {
        let _ = config.set_startup("dir", &abs.display().to_string());
    }
    // Where the data lives and how safe an acknowledged write is: the first things an
    // operator looks for in the log.
    tracing::info!(
        "Data directory {}; append-only log {} (appendfsync {}); snapshots: save \"{}\" to {}",
        config.get("dir"),
        if config.get("appendonly") == "yes" { "on" } else { "off" },
        config.get("appendfsync"),
        config.get("save"),
        config.get("dbfilename")
    );
    clock::calibrate();
    // Fairness among many ready connections: a worker's local run queue holds 256 tasks, and
    // the connections that one poll of the socket events wakes beyond that go to the global
    // queue, which the worker looks at only every few dozen polls while its local queue keeps
    // refilling. With 1,000 or 10,000 connections each with one request in flight, some
    // connections then waited seconds while others were served at once (XADD p99 164 ms at
    // 1,000 connections and 1.9 s at 10,000, against Redis' 22 ms and 356 ms). Looking at the
    // global queue at every poll serves them in arrival order (p99 19 ms and 233 ms, and more
    // requests per second); with 50 connections the cost does not show (bench/scale-curve.sh).
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all().global_queue_interval(1);
    let runtime = match builder.build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(rill_server::run::run(config));
    runtime.shutdown_timeout(Duration::from_millis(200));
    std::process::exit(code);
}

/// Crash-only: a panic anywhere (a command, a connection task, the log writer) ends the
/// process once the message is logged. A command that panics may have changed part of the
/// keyspace; serving that state, as tokio (which drops a panicking task) and a recovered
/// poisoned lock would, could acknowledge writes on top of a state the log does not
/// describe. A restart replays the log instead, which holds only whole commands. A hook and
/// not `panic = "abort"` in a profile: profiles are workspace-wide (the client crates and every
/// test build would follow), and the hook logs the message through the server's log first.
/// The hook runs before any unwinding, so the lock the panicking thread holds is never
/// released, and no other thread can see what the command left half-done.
fn crash_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!("panic: {info}; aborting (restart replays the log)");
        default(info);
        std::process::abort();
    }));
}
