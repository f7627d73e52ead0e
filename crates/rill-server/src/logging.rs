//! `tracing` logs, with Redis' `loglevel` names mapped onto tracing levels and changeable at
//! run time with CONFIG SET loglevel.

use std::sync::atomic::{AtomicU8, Ordering};
use tracing::{Level, Metadata};
use tracing_subscriber::layer::{Context, Filter};

static LEVEL: AtomicU8 = AtomicU8::new(2);

fn rank(level: &str) -> u8 {
    match level {
        "debug" => 4,
        "verbose" => 3,
        "notice" => 2,
        "warning" => 1,
        _ => 0,
    }
}

/// Set the level from a Redis `loglevel` word.
pub fn set_level(level: &str) {
    LEVEL.store(rank(level), Ordering::Relaxed);
}

struct Dynamic;

impl<S> Filter<S> for Dynamic {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        let want = LEVEL.load(Ordering::Relaxed);
        let have = match *meta.level() {
            Level::ERROR | Level::WARN => 1,
            Level::INFO => 2,
            Level::DEBUG => 3,
            Level::TRACE => 4,
        };
        have <= want
    }
}

/// Install the subscriber: stderr, or `logfile` if set.
pub fn init(level: &str, logfile: &str) {
    use tracing_subscriber::prelude::*;
    set_level(level);
    let file = if logfile.is_empty() {
        None
    } else {
        std::fs::OpenOptions::new().create(true).append(true).open(logfile).ok()
    };
    let layer = match file {
        Some(f) => tracing_subscriber::fmt::layer().with_ansi(false).with_writer(std::sync::Mutex::new(f)).boxed(),
        // Colour only on a terminal: a pipe or a redirected stderr (systemd, a test's log
        // file) must not fill with escape codes.
        None => {
            use std::io::IsTerminal;
            let ansi = std::io::stderr().is_terminal();
            tracing_subscriber::fmt::layer().with_ansi(ansi).with_writer(std::io::stderr).boxed()
        }
    };
    let _ = tracing_subscriber::registry().with(layer.with_filter(Dynamic)).try_init();
}
