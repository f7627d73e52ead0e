//! Listening sockets and the admission of new connections, done as redis-server does them:
//!
//! * the open-files limit is fitted to `maxclients` at start-up and on `CONFIG SET maxclients`
//!   ([`adjust_open_files_limit`]): raised to `maxclients + RESERVED_FDS`, or, when the hard
//!   limit forbids that, `maxclients` is lowered to what fits, with Redis' warnings;
//! * listeners are bound with `SO_REUSEADDR`, `IPV6_V6ONLY` on IPv6 (so `* ::*` can bind both
//!   families on one port) and the `tcp-backlog` as the listen backlog ([`bind_all`]); an
//!   address written with a leading `-` is skipped when the host does not have it;
//! * protected mode refuses peers that are not loopback while the default user has no
//!   password ([`protected_mode_denies`], [`DENIED`]);
//! * accept errors never spin: the ones the kernel reports for a connection that already went
//!   away are retried at once, a full descriptor table is met with a spare descriptor kept for
//!   the purpose (the waiting client gets the max-clients error instead of hanging), and the
//!   log line is rate-limited ([`AcceptErrors`]).

use crate::ratelimit::LogLimiter;
use std::io::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Descriptors kept free beyond `maxclients` for listeners, the log, snapshots and the like
/// (Redis' `CONFIG_MIN_RESERVED_FDS`).
pub const RESERVED_FDS: u64 = 32;

/// The reply to a client over `maxclients`, as Redis sends it before closing.
pub const MAX_CLIENTS_REACHED: &[u8] = b"-ERR max number of clients reached\r\n";

/// The reply to a client protected mode refuses, byte for byte as Redis sends it before closing.
pub const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

// ------------------------------------------------------------------------------------------------
// Protected mode
// ------------------------------------------------------------------------------------------------

/// Whether Redis counts `peer` as local: an IPv4 address in 127.0.0.0/8 or `::1` (it compares
/// the printed address with `127.` and `::1`). An IPv4-mapped IPv6 address is not local; it
/// cannot occur, as IPv6 listeners are bound `IPV6_V6ONLY`.
pub fn is_local_peer(peer: IpAddr) -> bool {
    match peer {
        IpAddr::V4(a) => a.octets().first() == Some(&127),
        IpAddr::V6(a) => a == Ipv6Addr::LOCALHOST,
    }
}

/// Whether a new connection from `peer` is refused with [`DENIED`]: `protected-mode yes`, the
/// default user has no password, and the peer is not local. Redis decides on the peer alone,
/// whatever `bind` says (since 7.0; 6.x also let any peer in once `bind` was given).
pub fn protected_mode_denies(protected_mode: bool, default_user_nopass: bool, peer: IpAddr) -> bool {
    protected_mode && default_user_nopass && !is_local_peer(peer)
}

// ------------------------------------------------------------------------------------------------
// Open-files limit
// ------------------------------------------------------------------------------------------------

/// Redis lowers its attempts by this many descriptors at a time when the hard limit refuses one.
const LIMIT_STEP: u64 = 16;

/// The best open-files limit reachable: `wanted` if `try_set` accepts it, else the highest of
/// `wanted - k·16` it accepts, else `current` (which stays valid). Redis' search, with the
/// system call injected so it can be tested. Also returns the last refusal.
fn best_limit(current: u64, wanted: u64, mut try_set: impl FnMut(u64) -> io::Result<()>) -> (u64, Option<io::Error>) {
    let mut refusal = None;
    let mut best = wanted;
    while best > current {
        match try_set(best) {
            Ok(()) => return (best, refusal),
            Err(e) => refusal = Some(e),
        }
        if best < LIMIT_STEP {
            break;
        }
        best -= LIMIT_STEP;
    }
    (current, refusal)
}

/// Redis prints `strerror()` alone: Rust's error text without its " (os error N)" suffix.
pub fn strerror(e: &io::Error) -> String {
    let text = e.to_string();
    text.split(" (os error").next().unwrap_or(&text).to_string()
}

/// The soft and hard open-files limits (`None`: unlimited).
#[cfg(unix)]
pub fn open_files_limit() -> (Option<u64>, Option<u64>) {
    let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    (l.current, l.maximum)
}

#[cfg(unix)]
fn set_open_files_limit(limit: u64) -> io::Result<()> {
    // Both limits, as Redis sets them.
    let l = rustix::process::Rlimit { current: Some(limit), maximum: Some(limit) };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, l).map_err(io::Error::from)
}

/// Fit the open-files limit to `maxclients` and return the `maxclients` that fits, logging as
/// Redis does; `None` when not even the reserved descriptors fit (the caller stops the
/// server at start-up, after the message here).
#[cfg(unix)]
pub fn adjust_open_files_limit(maxclients: u64) -> Option<u64> {
    let wanted = maxclients.saturating_add(RESERVED_FDS);
    let Some(current) = open_files_limit().0 else {
        return Some(maxclients);
    };
    if current >= wanted {
        return Some(maxclients);
    }
    let (best, refusal) = best_limit(current, wanted, set_open_files_limit);
    if best >= wanted {
        tracing::info!("Increased maximum number of open files to {wanted} (it was originally set to {current}).");
        return Some(maxclients);
    }
    if best <= RESERVED_FDS {
        tracing::warn!(
            "Your current 'ulimit -n' of {current} is not enough for the server to start. Please increase your open file limit to at least {wanted}. Exiting."
        );
        return None;
    }
    let fitted = best - RESERVED_FDS;
    let reason = refusal.as_ref().map(strerror).unwrap_or_default();
    tracing::warn!("You requested maxclients of {maxclients} requiring at least {wanted} max file descriptors.");
    tracing::warn!("Server can't set maximum open files to {wanted} because of OS error: {reason}.");
    tracing::warn!(
        "Current maximum open files is {best}. maxclients has been reduced to {fitted} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
    );
    Some(fitted)
}

/// Without rlimits, `maxclients` is taken as given.
#[cfg(not(unix))]
pub fn adjust_open_files_limit(maxclients: u64) -> Option<u64> {
    Some(maxclients)
}

// ------------------------------------------------------------------------------------------------
// Listeners
// ------------------------------------------------------------------------------------------------

/// Errors with which Redis skips an address instead of failing: the address family or
/// protocol is not supported here, or (for a `-` address) the host lacks the address.
#[cfg(unix)]
fn skippable(e: &io::Error, optional: bool) -> bool {
    use rustix::io::Errno;
    let Some(code) = e.raw_os_error() else {
        return false;
    };
    let is = |errno: Errno| errno.raw_os_error() == code;
    (optional && is(Errno::ADDRNOTAVAIL))
        || [Errno::NOPROTOOPT, Errno::PROTONOSUPPORT, Errno::SOCKTNOSUPPORT, Errno::PFNOSUPPORT, Errno::AFNOSUPPORT]
            .into_iter()
            .any(is)
}

#[cfg(not(unix))]
fn skippable(_e: &io::Error, _optional: bool) -> bool {
    false
}

/// One listening socket on `addr`, configured as Redis configures its own.
fn listen_on(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv6() { TcpSocket::new_v6()? } else { TcpSocket::new_v4()? };
    #[cfg(unix)]
    if addr.is_ipv6() {
        rustix::net::sockopt::set_ipv6_v6only(&socket, true)?;
    }
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The socket address a `bind` word names: `*` and `::*` are every IPv4 and IPv6 address,
/// literals are taken as they are, names are resolved (the first address of the family the
/// word implies, IPv6 when it holds a colon).
fn resolve(word: &str, port: u16) -> io::Result<SocketAddr> {
    use std::net::ToSocketAddrs as _;
    match word {
        "*" => return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)),
        "::*" => return Ok(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)),
        _ => {}
    }
    if let Ok(ip) = word.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let v6 = word.contains(':');
    (word, port)
        .to_socket_addrs()?
        .find(|a| a.is_ipv6() == v6)
        .ok_or_else(|| io::Error::new(io::ErrorKind::AddrNotAvailable, "no address of that family"))
}

/// Bind every address of `bind` (space separated) on `port` with `backlog`. `Err` carries the
/// message to log before exiting.
pub async fn bind_all(bind: &str, port: u16, backlog: u32) -> Result<Vec<TcpListener>, String> {
    warn_if_backlog_capped(backlog);
    bind_now(bind, port, backlog)
}

/// [`bind_all`] from synchronous code (CONFIG SET; in the runtime's context): a name in
/// `bind` is resolved by the system resolver, blocking.
pub fn bind_now(bind: &str, port: u16, backlog: u32) -> Result<Vec<TcpListener>, String> {
    let mut listeners = Vec::new();
    for word in bind.split_whitespace() {
        let optional = word.starts_with('-');
        let word = word.trim_start_matches('-');
        let bound = resolve(word, port).and_then(|addr| listen_on(addr, backlog));
        match bound {
            Ok(l) => listeners.push(l),
            Err(e) => {
                tracing::warn!("Warning: Could not create server TCP listening socket {word}:{port}: {}", strerror(&e));
                if !skippable(&e, optional) {
                    return Err(format!("Failed listening on port {port} (tcp), aborting."));
                }
            }
        }
    }
    if listeners.is_empty() {
        return Err("Configured to not listen anywhere, exiting.".to_string());
    }
    Ok(listeners)
}

/// What serves a newly bound listener: spawns its accept loop and returns the task's handle
/// (`None` once the server is going away).
pub type Serve = std::sync::Arc<dyn Fn(std::sync::Arc<TcpListener>) -> Option<tokio::task::AbortHandle> + Send + Sync>;

/// A listening socket and the task accepting on it.
type OpenListener = (std::sync::Arc<TcpListener>, Option<tokio::task::AbortHandle>);

/// The listening sockets of one port (the Redis port, the HTTP port), changed at run time by
/// `CONFIG SET port|bind|metrics-port` as Redis changes its own: the old sockets are closed
/// first (a new one on an overlapping address needs their port), the new ones bound, and if
/// that fails the old addresses are bound again and the change refused.
#[derive(Default)]
pub struct Port {
    inner: std::sync::Mutex<Bound>,
}

#[derive(Default)]
struct Bound {
    port: u16,
    bind: String,
    open: Vec<OpenListener>,
    serve: Option<Serve>,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port").field("port", &self.port()).finish_non_exhaustive()
    }
}

impl Port {
    /// A port known to be `port`, with nothing bound here (tests, start-up before binding).
    pub fn at(port: u16) -> Port {
        Port { inner: std::sync::Mutex::new(Bound { port, ..Bound::default() }) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bound> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The port listened on (0: none).
    pub fn port(&self) -> u16 {
        self.lock().port
    }

    /// Serve `listeners`, bound to `bind` on `port`, with `serve`; and later rebinds too.
    pub fn install(&self, port: u16, bind: &str, listeners: Vec<TcpListener>, serve: Serve) {
        let mut b = self.lock();
        b.port = port;
        b.bind = bind.to_owned();
        b.open = serve_all(listeners, &serve);
        b.serve = Some(serve);
    }

    /// Listen on `port` of `bind`'s addresses instead (port 0: nowhere). Unchanged addresses
    /// are left alone. `Err` when the new sockets could not all be bound (the old ones are
    /// then bound again).
    pub fn rebind(&self, bind: &str, port: u16, backlog: u32) -> Result<(), String> {
        let mut b = self.lock();
        if b.port == port && b.bind == bind {
            return Ok(());
        }
        let Some(serve) = b.serve.clone() else { return Err("the port is not served here".to_owned()) };
        #[cfg(unix)]
        for (l, _) in &b.open {
            // Stops accepting and frees the address now; the accept loop is ended below.
            let _ = rustix::net::shutdown(&**l, rustix::net::Shutdown::Both);
        }
        let bound = if port == 0 { Ok(Vec::new()) } else { bind_now(bind, port, backlog) };
        for (_, task) in b.open.drain(..) {
            if let Some(t) = task {
                t.abort();
            }
        }
        let (listeners, result) = match bound {
            Ok(l) => {
                b.port = port;
                b.bind = bind.to_owned();
                (l, Ok(()))
            }
            Err(e) => {
                let old = if b.port == 0 { Ok(Vec::new()) } else { bind_now(&b.bind, b.port, backlog) };
                let old = old.unwrap_or_else(|e2| {
                    tracing::warn!("Could not listen again on port {}: {e2}", b.port);
                    Vec::new()
                });
                (old, Err(e))
            }
        };
        b.open = serve_all(listeners, &serve);
        result
    }
}

/// Start `serve` on each listener: the listeners with their tasks.
fn serve_all(listeners: Vec<TcpListener>, serve: &Serve) -> Vec<OpenListener> {
    listeners
        .into_iter()
        .map(|l| {
            let l = std::sync::Arc::new(l);
            let task = serve(l.clone());
            (l, task)
        })
        .collect()
}

/// The server's ports.
#[derive(Debug, Default)]
pub struct Ports {
    /// The Redis protocol's (`port`, `bind`).
    pub redis: Port,
    /// The HTTP port's (`metrics-port`, `bind`).
    pub http: Port,
    /// The TLS port's (`tls-port`, `bind`).
    pub tls: Port,
}

/// Redis' warning when the kernel caps the backlog below `tcp-backlog`.
fn warn_if_backlog_capped(backlog: u32) {
    let Ok(text) = std::fs::read_to_string("/proc/sys/net/core/somaxconn") else {
        return;
    };
    if let Ok(somaxconn) = text.trim().parse::<u32>() {
        if somaxconn > 0 && somaxconn < backlog {
            tracing::warn!(
                "WARNING: The TCP backlog setting of {backlog} cannot be enforced because /proc/sys/net/core/somaxconn is set to the lower value of {somaxconn}."
            );
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Accept errors
// ------------------------------------------------------------------------------------------------

/// What the accept loop does after an error.
#[derive(Debug, PartialEq, Eq)]
pub enum AfterError {
    /// Accept again at once.
    Retry,
    /// Wait this long first.
    Wait(Duration),
}

/// The accept loop's memory of errors: the log limit, the spare descriptor and the back-off.
#[derive(Debug)]
pub struct AcceptErrors {
    log: LogLimiter,
    /// Held open so that, with the descriptor table full, one can be freed to accept the
    /// waiting connection and answer it instead of leaving it in the backlog.
    spare: Option<std::fs::File>,
    backoff: Duration,
}

/// The shortest and longest waits after an accept error that is not retried at once.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_millis(100);

fn open_spare() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

impl Default for AcceptErrors {
    fn default() -> Self {
        AcceptErrors { log: LogLimiter::new(1), spare: open_spare(), backoff: BACKOFF_MIN }
    }
}

/// Whether `e` means the table of descriptors is full (the process' or the system's).
#[cfg(unix)]
fn out_of_descriptors(e: &io::Error) -> bool {
    use rustix::io::Errno;
    e.raw_os_error().is_some_and(|c| c == Errno::MFILE.raw_os_error() || c == Errno::NFILE.raw_os_error())
}

#[cfg(not(unix))]
fn out_of_descriptors(_e: &io::Error) -> bool {
    false
}

/// Errors accept(2) reports for a connection that failed before it was taken; the next one
/// may be fine (Redis retries these at once, as the Linux man page advises).
#[cfg(unix)]
fn retry_at_once(e: &io::Error) -> bool {
    use rustix::io::Errno;
    let Some(code) = e.raw_os_error() else {
        return false;
    };
    [
        Errno::CONNABORTED,
        Errno::NETDOWN,
        Errno::PROTO,
        Errno::NOPROTOOPT,
        Errno::HOSTDOWN,
        Errno::NONET,
        Errno::HOSTUNREACH,
        Errno::OPNOTSUPP,
        Errno::NETUNREACH,
    ]
    .into_iter()
    .any(|errno| errno.raw_os_error() == code)
}

#[cfg(not(unix))]
fn retry_at_once(_e: &io::Error) -> bool {
    false
}

impl AcceptErrors {
    /// A connection was accepted: errors are over.
    pub fn succeeded(&mut self) {
        self.backoff = BACKOFF_MIN;
        if self.spare.is_none() {
            self.spare = open_spare();
        }
    }

    /// Log `e` (at most once a second, with the count of those left out).
    fn log(&mut self, e: &io::Error) {
        if let Some(suppressed) = self.log.allow(Instant::now()) {
            if suppressed > 0 {
                tracing::warn!(
                    "Accepting client connection: {} ({suppressed} more since the last report)",
                    strerror(e)
                );
            } else {
                tracing::warn!("Accepting client connection: {}", strerror(e));
            }
        }
    }

    /// Handle an accept error on `listener`. With the descriptor table full, the spare
    /// descriptor is given up to take the first waiting connection, which is answered with
    /// the max-clients error and closed (counted by `rejected`); the spare is then reopened.
    pub fn failed(&mut self, e: &io::Error, listener: &TcpListener, rejected: impl FnOnce()) -> AfterError {
        if retry_at_once(e) {
            return AfterError::Retry;
        }
        if !out_of_descriptors(e) {
            self.log(e);
            return self.wait();
        }
        let Some(spare) = self.spare.take() else {
            self.log(e);
            self.spare = open_spare();
            return self.wait();
        };
        drop(spare);
        let taken = take_one(listener);
        let refused = taken.is_some();
        if let Some(socket) = taken {
            let _ = (&socket).write(MAX_CLIENTS_REACHED);
            // Closed before the spare is reopened, so the spare takes its descriptor back.
            drop(socket);
            rejected();
            self.log(e);
        }
        self.spare = open_spare();
        if refused && self.spare.is_some() {
            // Others may be waiting behind it.
            AfterError::Retry
        } else {
            // With nobody waiting (accept(2) reports a full table before it looks at the
            // queue), nobody was turned away: look again later.
            self.wait()
        }
    }

    /// The next pause, each twice as long as the one before, up to [`BACKOFF_MAX`]. Tokio's
    /// readiness stays set after an error, so without a pause the loop would spin.
    fn wait(&mut self) -> AfterError {
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        AfterError::Wait(wait)
    }
}

/// Accept one queued connection without waiting, if there is one.
#[cfg(unix)]
fn take_one(listener: &TcpListener) -> Option<std::net::TcpStream> {
    use rustix::net::{accept_with, SocketFlags};
    accept_with(listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC).ok().map(std::net::TcpStream::from)
}

#[cfg(not(unix))]
fn take_one(_listener: &TcpListener) -> Option<std::net::TcpStream> {
    None
}

/// `tcp-keepalive SECONDS` on an accepted socket, as Redis sets it: keepalive probes after
/// that long idle, every third of it, three unanswered ones close it (0: none). A dead peer's
/// connection (a machine gone without a FIN) is then closed instead of held forever.
pub fn set_keepalive(socket: &TcpStream, secs: i64) {
    let Ok(secs) = u64::try_from(secs) else { return };
    if secs == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        use rustix::net::sockopt;
        use std::time::Duration;
        let _ = sockopt::set_socket_keepalive(socket, true);
        let _ = sockopt::set_tcp_keepidle(socket, Duration::from_secs(secs));
        let _ = sockopt::set_tcp_keepintvl(socket, Duration::from_secs((secs / 3).max(1)));
        let _ = sockopt::set_tcp_keepcnt(socket, 3);
    }
}

/// Best effort, as Redis: one non-blocking write of `reply`, then the socket is closed by
/// the caller dropping it.
pub fn refuse(socket: &TcpStream, reply: &[u8]) {
    let _ = socket.try_write(reply);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn protected_mode_lets_only_loopback_in_without_a_password() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for local in ["127.0.0.1", "127.255.3.4", "::1"] {
            assert!(!protected_mode_denies(true, true, ip(local)), "{local}");
        }
        for remote in ["10.0.0.2", "192.168.1.5", "0.0.0.0", "128.0.0.1", "::2", "fe80::1", "::ffff:127.0.0.1", "::"] {
            assert!(protected_mode_denies(true, true, ip(remote)), "{remote}");
            // A password for the default user, or protected mode off, lets everyone in.
            assert!(!protected_mode_denies(true, false, ip(remote)), "{remote}");
            assert!(!protected_mode_denies(false, true, ip(remote)), "{remote}");
        }
    }

    #[test]
    fn denied_is_one_error_line() {
        assert!(DENIED.starts_with(b"-DENIED Redis is running in protected mode"));
        assert!(DENIED.ends_with(b"from the outside.\r\n"));
        assert_eq!(DENIED.iter().filter(|&&b| b == b'\n').count(), 1);
    }

    #[test]
    fn best_limit_walks_down_by_16_from_the_wanted_limit() {
        let hard = 4000;
        let cap = |l: u64| {
            if l <= hard {
                Ok(())
            } else {
                Err(io::Error::from(io::ErrorKind::PermissionDenied))
            }
        };
        // Enough room: the wanted limit itself.
        assert_eq!(best_limit(1024, 3032, cap).0, 3032);
        // 10032 - 16k ≤ 4000 first at k = 377: 3999.
        let (best, refusal) = best_limit(1024, 10032, cap);
        assert_eq!(best, 10032 - 16 * 377);
        assert!(refusal.is_some());
        // Nothing above the current limit is allowed: the current one stays.
        assert_eq!(best_limit(1024, 10032, |_| Err(io::Error::from(io::ErrorKind::PermissionDenied))).0, 1024);
        // Never below the current limit, and the search stops near zero.
        assert_eq!(best_limit(5, 40, |_| Err(io::Error::from(io::ErrorKind::PermissionDenied))).0, 5);
        assert_eq!(best_limit(1024, 1000, cap).0, 1024);
    }

    #[test]
    fn strerror_drops_the_os_error_suffix() {
        assert_eq!(strerror(&io::Error::from_raw_os_error(24)), "Too many open files");
    }
}
