//! HOTKEYS START|STOP|GET|RESET|HELP: the tracking session of `crate::hotkeys`, with Redis
//! 8.6's arguments, replies and error texts.

use super::{reply, Call, CmdResult};
use crate::hotkeys::{Start, MAX_COUNT};
use rill_engine::util::parse_i64;
use rill_engine::CmdError;
use rill_resp::Reply;

/// HOTKEYS HELP's lines.
pub const HELP: &[&str] = &[
    "START METRICS <count> [CPU] [NET] [COUNT <k>] [DURATION <seconds>] [SAMPLE <ratio>]",
    "    Begin tracking which keys commands spend the most time (CPU) and network bytes",
    "    (NET) on; <count> says how many of the metrics follow. COUNT: how many keys GET",
    "    lists per metric (1 to 64, 10 by default). DURATION: stop by itself after that many",
    "    seconds (0, the default: run until STOP). SAMPLE: count a command for its keys with",
    "    probability 1/<ratio> (1 by default: every command).",
    "    [SLOTS <count> <slot> ...] limits tracking to some slots, in cluster mode only.",
    "STOP",
    "    Stop tracking; GET still shows what was gathered.",
    "GET",
    "    Return the session's figures and the heaviest keys by each metric tracked.",
    "RESET",
    "    Drop a stopped session and what it gathered.",
];

/// An integer argument in `lo..=hi`, or the error `msg` (as Redis answers both a non-number
/// and a number out of range).
fn ranged(arg: Option<&bytes::Bytes>, lo: i64, hi: i64, msg: &'static str) -> Result<i64, CmdError> {
    arg.and_then(|a| parse_i64(a)).filter(|n| (lo..=hi).contains(n)).ok_or(CmdError::full(msg))
}

/// HOTKEYS START METRICS count [CPU] [NET] [COUNT k] [DURATION s] [SAMPLE ratio] [SLOTS ...]
pub fn start(c: &mut Call) -> CmdResult {
    if c.st.hotkeys.active(c.now_ms) {
        return Err(CmdError::full("ERR hotkey tracking session already in progress"));
    }
    let args = c.args;
    if args.len() < 4 || !args.get(2).is_some_and(|a| a.eq_ignore_ascii_case(b"METRICS")) {
        return Err(CmdError::full("ERR METRICS parameter is required"));
    }
    let metrics = ranged(args.get(3), 1, 2, "ERR METRICS count must be > 0 and <= 2")?;
    let (mut cpu, mut net) = (false, false);
    let mut j = 4;
    let mut parsed = 0;
    while j < args.len() && parsed < metrics {
        let a = args.get(j).map(|a| &a[..]).unwrap_or_default();
        if a.eq_ignore_ascii_case(b"CPU") {
            if cpu {
                return Err(CmdError::full("ERR METRICS CPU defined more than once!"));
            }
            cpu = true;
        } else if a.eq_ignore_ascii_case(b"NET") {
            if net {
                return Err(CmdError::full("ERR METRICS NET defined more than once!"));
            }
            net = true;
        }
        // Any other name counts as a metric and is ignored (names a later server may add).
        parsed += 1;
        j += 1;
    }
    if parsed != metrics {
        return Err(CmdError::full("ERR METRICS count does not match number of metric types provided"));
    }
    if !cpu && !net {
        return Err(CmdError::full("ERR METRICS no valid metrics passed. Supported: CPU|NET"));
    }
    let mut how = Start { cpu, net, count: 10, duration_ms: 0, sample_ratio: 1 };
    while j < args.len() {
        let a = args.get(j).map(|a| &a[..]).unwrap_or_default();
        let value = args.get(j + 1);
        if value.is_some() && a.eq_ignore_ascii_case(b"COUNT") {
            let n = ranged(value, 1, MAX_COUNT, "ERR COUNT must be between 1 and 64")?;
            how.count = usize::try_from(n).unwrap_or(10);
        } else if value.is_some() && a.eq_ignore_ascii_case(b"DURATION") {
            how.duration_ms = ranged(value, 1, 1_000_000, "ERR DURATION must be between 1 and 1000000")? * 1000;
        } else if value.is_some() && a.eq_ignore_ascii_case(b"SAMPLE") {
            let n = ranged(value, 1, i64::from(i32::MAX), "ERR SAMPLE ratio must be positive")?;
            how.sample_ratio = u32::try_from(n).unwrap_or(1);
        } else if value.is_some() && a.eq_ignore_ascii_case(b"SLOTS") {
            return Err(CmdError::full("ERR SLOTS parameter cannot be used in non-cluster mode"));
        } else {
            return Err(CmdError::SYNTAX);
        }
        j += 2;
    }
    c.st.hotkeys.start(how, c.now_ms);
    reply(Reply::ok())
}

/// HOTKEYS STOP: nil when no session is counting.
pub fn stop(c: &mut Call) -> CmdResult {
    reply(if c.st.hotkeys.stop(c.now_ms) { Reply::ok() } else { Reply::Null })
}

/// HOTKEYS GET
pub fn get(c: &mut Call) -> CmdResult {
    reply(c.st.hotkeys.report(c.now_ms))
}

/// HOTKEYS RESET
pub fn reset(c: &mut Call) -> CmdResult {
    if !c.st.hotkeys.reset(c.now_ms) {
        return Err(CmdError::full("ERR hotkey tracking session in progress, stop tracking first"));
    }
    reply(Reply::ok())
}
