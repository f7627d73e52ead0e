//! Running the server: bind the listeners, load the data while answering `-LOADING`, accept
//! clients, run the periodic work, and finish the log on shutdown.

use crate::config::Config;
use crate::state::{now_ms, Shared, State};
use crate::{cmd, conn, listen, poll};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// A new 40-hex-character run id.
pub fn run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    while out.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0),
        );
        h.write_u32(std::process::id());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

/// The ACL users at start-up, as Redis sets them: `acl-pubsub-default` and `acllog-max-len`,
/// `requirepass` as the default user's password, then the `user` directives (a `default` line
/// replaces that user) or the ACL file — not both.
fn load_users(shared: &Shared) -> Result<(), String> {
    let st = shared.lock();
    let acl = &shared.acl;
    acl.set_all_channels_default(st.config.get("acl-pubsub-default") == "allchannels");
    acl.log.lock().unwrap_or_else(|p| p.into_inner()).max_len =
        usize::try_from(st.config.get_i64("acllog-max-len")).unwrap_or(usize::MAX);
    acl.set_default_password(st.config.get("requirepass").as_bytes());
    let aclfile = st.config.get("aclfile").to_string();
    if !aclfile.is_empty() && !st.config.users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    if !st.config.users.is_empty() {
        let mut users = acl.snapshot();
        let all = acl.all_channels_default();
        for (line, text, words) in &st.config.users {
            let name = bytes::Bytes::copy_from_slice(words.first().map(String::as_bytes).unwrap_or_default());
            let fail = |why: String| {
                format!("\n*** FATAL CONFIG FILE ERROR ***\nReading the configuration file, at line {line}\n>>> '{text}'\n{why}")
            };
            if crate::acl::has_spaces(&name) {
                return Err(fail("Spaces not allowed in ACL usernames".into()));
            }
            let mut user = crate::acl::User::new(&name, all);
            let rules: Vec<bytes::Bytes> =
                words.iter().skip(1).map(|w| bytes::Bytes::copy_from_slice(w.as_bytes())).collect();
            user.set_all(&acl.commands, &rules, all).map_err(fail)?;
            users.by_name.insert(name, std::sync::Arc::new(user));
        }
        acl.replace(users);
    } else if !aclfile.is_empty() {
        let users = cmd::acl::load_file(acl, &aclfile)?;
        acl.replace(users);
    }
    Ok(())
}

/// `n` random bytes from the OS as hex (passwords, tokens); the run ID's hash stretched if
/// the OS has none to give.
pub fn random_hex(n: usize) -> String {
    use std::io::Read as _;
    let mut buf = vec![0u8; n];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    if read.is_err() {
        let mut out = String::new();
        while out.len() < 2 * n {
            out.push_str(&run_id());
        }
        out.truncate(2 * n);
        return out;
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Run the server with `config` until it is told to stop; the process exit code.
pub async fn run(mut config: Config) -> i32 {
    let port = config.get_i64("port") as u16;
    // As Redis: fit the open-files limit to maxclients before listening, lowering maxclients
    // if the hard limit forbids the descriptors it needs.
    let maxclients = u64::try_from(config.get_i64("maxclients")).unwrap_or(1);
    match listen::adjust_open_files_limit(maxclients) {
        Some(fitted) if fitted != maxclients => {
            let _ = config.set_startup("maxclients", &fitted.to_string());
        }
        Some(_) => {}
        None => return 1,
    }
    let backlog = u32::try_from(config.get_i64("tcp-backlog")).unwrap_or(511);
    let listeners = match listen::bind_all(config.get("bind"), port, backlog).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    // The HTTP port (/metrics), if asked for: bound now, so a port in use stops start-up.
    let metrics_port = u16::try_from(config.get_i64("metrics-port")).unwrap_or(0);
    let http_listeners = if metrics_port == 0 {
        Vec::new()
    } else {
        match listen::bind_all(config.get("bind"), metrics_port, backlog).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("metrics-port: {e}");
                return 1;
            }
        }
    };
    // The TLS port, if asked for: its configuration must load, and the port bind, or start-up
    // stops (as Redis' "Failed to configure TLS").
    let tls_port = u16::try_from(config.get_i64("tls-port")).unwrap_or(0);
    let mut tls_listeners = Vec::new();
    let mut tls_config = None;
    if tls_port != 0 || !config.get("tls-cert-file").is_empty() {
        match crate::tls::server_config(&config) {
            Ok(c) => tls_config = Some(c),
            Err(e) if tls_port != 0 => {
                tracing::error!("Failed to configure TLS: {e}");
                return 1;
            }
            Err(_) => {}
        }
    }
    if tls_port != 0 {
        match listen::bind_all(config.get("bind"), tls_port, backlog).await {
            Ok(l) => tls_listeners = l,
            Err(e) => {
                tracing::error!("tls-port: {e}");
                return 1;
            }
        }
    }
    let mut table = cmd::table();
    // The log names commands as they are, whatever clients call them: it is replayed through
    // a table without the renames, so changing rename-command never strands a log.
    let log_table = cmd::table();
    for r in &config.renames {
        if let Err(reason) = table.rename(r.from.as_bytes(), r.to.as_bytes()) {
            eprintln!("\n*** FATAL CONFIG FILE ERROR (rill {}) ***", env!("CARGO_PKG_VERSION"));
            eprintln!("Reading the configuration file, at line {}", r.line);
            eprintln!(">>> '{}'", r.text);
            eprintln!("{reason}");
            return 1;
        }
    }
    let mut state = State::new(config);
    // Loading until the log is replayed (below).
    state.persist.loading = true;
    state.engine.set_loading(true);
    let shared = Shared::new(state, table, log_table, port, run_id()).into_arc();
    if let Err(e) = load_users(&shared) {
        eprintln!("{e}");
        return 1;
    }
    crate::alloc::mark_startup();
    tracing::info!("Server initialized");
    tracing::info!("rill-server {} ready to accept connections tcp on port {port}", env!("CARGO_PKG_VERSION"));

    // The ports, served now and rebound by CONFIG SET port|bind|metrics-port (`listen::Port`).
    let bind = shared.lock().config.get("bind").to_string();
    let weak = Arc::downgrade(&shared);
    let serve_redis: listen::Serve =
        Arc::new(move |l| weak.upgrade().map(|shared| tokio::spawn(accept_loop(shared, l, false)).abort_handle()));
    shared.ports.redis.install(port, &bind, listeners, serve_redis);
    if let Some(c) = tls_config {
        shared.tls.set(c);
    }
    let weak = Arc::downgrade(&shared);
    let serve_tls: listen::Serve =
        Arc::new(move |l| weak.upgrade().map(|shared| tokio::spawn(accept_loop(shared, l, true)).abort_handle()));
    shared.ports.tls.install(tls_port, &bind, tls_listeners, serve_tls);
    #[cfg(unix)]
    {
        let (path, perm) = {
            let st = shared.lock();
            (st.config.get("unixsocket").to_string(), st.config.get("unixsocketperm").to_string())
        };
        if !path.is_empty() {
            match listen_unix(&path, &perm) {
                Ok(l) => {
                    tracing::info!("The server is now ready to accept connections at {path}");
                    tokio::spawn(unix_accept_loop(shared.clone(), l, path));
                }
                Err(e) => {
                    tracing::warn!("Failed opening Unix socket: {e}");
                    return 1;
                }
            }
        }
    }
    if tls_port != 0 {
        tracing::info!("Serving TLS clients on port {tls_port}");
    }
    if metrics_port != 0 {
        tracing::info!("Serving /metrics over HTTP on port {metrics_port}");
    }
    // The console's site lives as long as this function runs (the server's life); its charts'
    // sampler starts with the first HTTP listener.
    let site = Arc::new(crate::console::Site::new(shared.clone()));
    let weak_site = Arc::downgrade(&site);
    let serve_http: listen::Serve = Arc::new(move |l| {
        let site = weak_site.upgrade()?;
        site.start_sampling();
        Some(tokio::spawn(crate::http::accept_loop(site, l)).abort_handle())
    });
    shared.ports.http.install(metrics_port, &bind, http_listeners, serve_http);
    // Load the data while already answering (-LOADING until done).
    let loader = shared.clone();
    let opened = tokio::task::spawn_blocking(move || crate::persist::load::open(&loader)).await;
    match opened {
        Ok(Ok(opened)) => {
            let mut st = shared.lock();
            st.engine.set_loading(false);
            // What was loaded is saved already: no change since the last save.
            st.persist.dirty_at_save = st.engine.dirty();
            st.persist.loading = false;
            if let Some(log) = &opened.log {
                let files = log.files.lock().unwrap_or_else(|p| p.into_inner());
                st.persist.base_file_size = files.base_size();
                st.persist.rewrite_base_size = log.total_size(&files);
            }
            st.journal.set_log(opened.log);
            if let Some(kept) = opened.kept {
                // Before any unit: a primary's backlog must see the deletions below.
                crate::identity::restore(&mut st, kept);
            }
            st.persist.last_load_keys_loaded = st.engine.dbs().iter().map(|d| d.len() as u64).sum();
            st.persist.last_load_keys_expired = opened.skipped_expired.len() as u64;
            // Keys the snapshot held that had expired are deleted now, as one unit.
            crate::unit::run(&mut st, now_ms(), |st| {
                for (db, key) in &opened.skipped_expired {
                    st.journal.push_del(*db, key);
                }
            });
            tracing::info!("DB loaded from disk, ready to accept connections");
            // Redis' line once the data is loaded (tools wait for "Ready to accept").
            tracing::info!("Ready to accept connections tcp");
        }
        Ok(Err(e)) => {
            tracing::error!("{e}");
            return 1;
        }
        Err(e) => {
            tracing::error!("loading failed: {e}");
            return 1;
        }
    }
    // `replicaof host port` in the config file: follow that primary from the start.
    {
        let mut st = shared.lock();
        let primary = st.config.get("replicaof").to_string();
        let mut words = primary.split_ascii_whitespace();
        if let (Some(host), Some(port)) = (words.next(), words.next().and_then(|p| p.parse::<u16>().ok())) {
            crate::replica::follow(&shared, &mut st, host.to_string(), port);
        }
    }
    tokio::spawn(cron(shared.clone()));
    tokio::spawn(policy_timer(shared.clone()));
    tokio::spawn(eviction_task(shared.clone()));
    poll::set_max_us(u64::try_from(shared.lock().config.get_i64("busy-poll-us")).unwrap_or(0));
    tokio::spawn(poll::run());

    shutdown_controller(&shared).await;
    tracing::warn!("rill is now ready to exit, bye bye...");
    0
}

/// Receive SIGTERM and SIGINT, and carry out the shutdown SHUTDOWN or a signal started
/// (`shutdown.rs`): wait while it waits for the replicas, then finish it. Returns once the
/// server is to exit (a save that failed without FORCE cancels the shutdown: it goes on).
async fn shutdown_controller(shared: &Arc<Shared>) {
    let wake = shared.lock().shutdown.waker();
    let mut term = Signal::new(Signal::TERM);
    let mut int = Signal::new(Signal::INT);
    loop {
        let waiting = shared.lock().shutdown.in_progress();
        // While a shutdown waits, the replicas' ACKs are looked at often (Redis: every cron tick).
        let tick = async {
            if waiting {
                tokio::time::sleep(Duration::from_millis(10)).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let signal = tokio::select! {
            () = int.recv() => Some(Signal::INT),
            () = term.recv() => Some(Signal::TERM),
            () = wake.notified() => None,
            () = tick => None,
        };
        let mut st = shared.lock();
        let now = now_ms();
        match signal {
            Some(Signal::INT) if st.shutdown.by_signal() => {
                // A second Ctrl-C: the user will not wait.
                tracing::warn!("You insist... exiting now.");
                std::process::exit(1);
            }
            Some(sig) => {
                tracing::warn!("Received {sig} scheduling shutdown...");
                // `shutdown-on-sigint` / `-sigterm`: SHUTDOWN's flags for a signal.
                let directive = if sig == Signal::INT { "shutdown-on-sigint" } else { "shutdown-on-sigterm" };
                let words = st.config.get(directive).to_string();
                let has = |word: &str| words.split_whitespace().any(|w| w == word);
                let flags = crate::shutdown::Flags {
                    save: has("save"),
                    nosave: has("nosave"),
                    now: has("now"),
                    force: has("force"),
                };
                crate::shutdown::start(&mut st, flags, true, now);
            }
            None => {}
        }
        if crate::shutdown::due(&mut st, now) {
            drop(st);
            if crate::shutdown::finish(shared) {
                return;
            }
        }
    }
}

/// A shutdown signal's stream (SIGTERM, SIGINT); never fires where there are none.
struct Signal {
    #[cfg(unix)]
    inner: Option<tokio::signal::unix::Signal>,
}

impl Signal {
    const TERM: &'static str = "SIGTERM";
    const INT: &'static str = "SIGINT";

    fn new(name: &'static str) -> Signal {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let kind = if name == Self::TERM { SignalKind::terminate() } else { SignalKind::interrupt() };
            Signal { inner: signal(kind).ok() }
        }
        #[cfg(not(unix))]
        {
            let _ = name;
            Signal {}
        }
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = self.inner.as_mut() {
            if s.recv().await.is_some() {
                return;
            }
        }
        std::future::pending::<()>().await;
    }
}

/// The socket's descriptor (CLIENT LIST `fd`), or −1.
fn socket_fd(socket: &tokio::net::TcpStream) -> i64 {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        i64::from(socket.as_raw_fd())
    }
    #[cfg(not(unix))]
    {
        let _ = socket;
        -1
    }
}

/// The `unixsocket` listener: a stale socket file is replaced, as Redis replaces it; `perm`
/// (octal, `unixsocketperm`) sets its mode unless 0.
#[cfg(unix)]
fn listen_unix(path: &str, perm: &str) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    let listener = tokio::net::UnixListener::bind(path)?;
    let mode = u32::from_str_radix(perm, 8).map_err(|_| std::io::Error::other("bad unixsocketperm"))?;
    if mode != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(listener)
}

/// Accept on the Unix socket and serve each client as a TCP one (its address `path:0`, as
/// Redis lists it). A local client: protected mode lets it in.
#[cfg(unix)]
async fn unix_accept_loop(shared: Arc<Shared>, listener: tokio::net::UnixListener, path: String) {
    loop {
        let socket = match listener.accept().await {
            Ok((socket, _)) => socket,
            Err(e) => {
                tracing::warn!("Accepting a client connection on the Unix socket: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let id = shared.next_client_id();
        let admitted = {
            let mut st = shared.lock_async().await;
            let max = st.config.get_i64("maxclients").max(1) as usize;
            if st.clients.len() >= max {
                st.stats.rejected_connections += 1;
                continue;
            }
            let default = shared.acl.default_user();
            st.stats.connections_received += 1;
            let fd = {
                use std::os::fd::AsRawFd;
                i64::from(socket.as_raw_fd())
            };
            let addr = format!("{path}:0");
            let peer = conn::Peer { addr: addr.clone(), laddr: addr, fd };
            conn::admit(&mut st, id, peer, default.nopass && default.enabled)
        };
        tokio::spawn(conn::serve(shared.clone(), conn::Stream::new(socket), admitted));
    }
}

/// Accept on `listener` and serve each client, over TLS when `tls` (the handshake runs in
/// the client's own task, never holding up the others).
async fn accept_loop(shared: Arc<Shared>, listener: Arc<TcpListener>, tls: bool) {
    let mut errors = listen::AcceptErrors::default();
    // The admission facts of the last client admitted under the lock (password needed,
    // protected mode, the limits), for clients that arrive while a script holds it.
    let mut last_admission: Option<(bool, bool, bool, crate::state::HotConfig)> = None;
    let mut keepalive = 300;
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(x) => {
                errors.succeeded();
                x
            }
            Err(e) => {
                let rejected = || shared.lock().stats.rejected_connections += 1;
                if let listen::AfterError::Wait(pause) = errors.failed(&e, &listener, rejected) {
                    tokio::time::sleep(pause).await;
                }
                continue;
            }
        };
        let id = shared.next_client_id();
        // A script holds the lock (the gate closed, or not yet): admit with the facts seen
        // last and register later, never waiting for a script that may not end (the accept
        // loop would stop admitting anyone).
        let locked = match last_admission {
            Some(_) => shared.lock_unless_script().await,
            None => Some(shared.lock_async().await),
        };
        if locked.is_none() {
            if let Some((nopass, open, protected, hot)) = last_admission {
                if listen::protected_mode_denies(protected, nopass, peer.ip()) {
                    listen::refuse(&socket, listen::DENIED);
                    continue;
                }
                let laddr = socket.local_addr().map(|a| a.to_string()).unwrap_or_default();
                let admitted = conn::admit_later(
                    id,
                    conn::Peer { addr: peer.to_string(), laddr, fd: socket_fd(&socket) },
                    open,
                    hot,
                );
                spawn_serve(&shared, socket, admitted, tls, keepalive);
                continue;
            }
        }
        // Not locked only with a last admission to admit by (above).
        let Some(mut st) = locked else { continue };
        keepalive = st.config.get_i64("tcp-keepalive");
        let admitted = {
            let max = st.config.get_i64("maxclients").max(1) as usize;
            if st.clients.len() >= max {
                st.stats.rejected_connections += 1;
                drop(st);
                listen::refuse(&socket, listen::MAX_CLIENTS_REACHED);
                continue;
            }
            // Protected mode asks whether the default user takes any password; a connection
            // starts authenticated when it does and is on (Redis' `clientSetDefaultAuth`).
            let default = shared.acl.default_user();
            let (nopass, open) = (default.nopass, default.nopass && default.enabled);
            let protected = st.config.get("protected-mode") == "yes";
            last_admission = Some((nopass, open, protected, st.hot));
            if listen::protected_mode_denies(protected, nopass, peer.ip()) {
                // Counted as Redis counts it: rejected, and not a connection received.
                st.stats.rejected_connections += 1;
                drop(st);
                listen::refuse(&socket, listen::DENIED);
                continue;
            }
            st.stats.connections_received += 1;
            let laddr = socket.local_addr().map(|a| a.to_string()).unwrap_or_default();
            conn::admit(&mut st, id, conn::Peer { addr: peer.to_string(), laddr, fd: socket_fd(&socket) }, open)
        };
        drop(st);
        spawn_serve(&shared, socket, admitted, tls, keepalive);
    }
}

/// Client eviction (`maxmemory-clients`, Redis 7): while all clients together hold more than
/// the limit, close the one holding the most (query buffer, replies, MULTI queue), then the
/// next. Never a replica, the primary's link, or a client with CLIENT NO-EVICT on; checked
/// each cron tick, and at once when one client alone grows past the limit (a connection's
/// batch, `conn/session`).
pub fn evict_clients(st: &mut crate::state::State) {
    let limit = st.hot.maxmemory_clients;
    if limit == 0 {
        return;
    }
    let mut held: Vec<(u64, u64)> = st
        .clients
        .values()
        .filter(|ci| !ci.killed && !ci.no_evict && ci.kind == crate::state::ClientKind::Normal)
        .map(|ci| (ci.mem.total() + ci.push.queued_bytes(), ci.id))
        .collect();
    let mut total: u64 = held.iter().map(|(m, _)| m).sum();
    if total <= limit {
        return;
    }
    held.sort_unstable_by(|a, b| b.cmp(a));
    for (mem, id) in held {
        if total <= limit {
            break;
        }
        evict_client(st, id);
        total = total.saturating_sub(mem);
    }
}

/// The memory past which client `id` alone is evicted: `maxmemory-clients` when it is set and
/// the client may be evicted (not a replica, not the primary's link, no CLIENT NO-EVICT);
/// 0 otherwise.
pub fn eviction_limit(st: &crate::state::State, id: u64) -> u64 {
    let limit = st.hot.maxmemory_clients;
    if limit == 0 {
        return 0;
    }
    match st.clients.get(&id) {
        Some(ci) if !ci.no_evict && ci.kind == crate::state::ClientKind::Normal => limit,
        _ => 0,
    }
}

/// Evict client `id` if it alone holds more than all clients may (`held` bytes, counted as
/// [`evict_clients`] counts them); whether it was. Redis evicts such a client as soon as the
/// write that grew it is done, without waiting for the cron: its own replies (`conn/session`),
/// frames pushed to it (`push.rs`), output its socket does not take.
pub fn evict_if_alone_over(st: &mut crate::state::State, id: u64, held: u64) -> bool {
    let limit = eviction_limit(st, id);
    if limit == 0 || held <= limit {
        return false;
    }
    evict_client(st, id);
    true
}

/// Close client `id` for client eviction: logged and counted (`evicted_clients`) as Redis.
fn evict_client(st: &mut crate::state::State, id: u64) {
    let line = st.clients.get(&id).map(|ci| cmd::connection::client_line(ci, now_ms(), 0)).unwrap_or_default();
    tracing::info!("Evicting client: {line}");
    cmd::connection::close_client(st, id);
    st.stats.evicted_clients += 1;
}

/// `tls-auth-clients-user CN`: a client whose certificate names an enabled ACL user starts
/// authenticated as that user, as Redis does; a name no enabled user has is logged
/// (`tls-cert`) and the client starts as the default user.
async fn certificate_user(shared: &Arc<Shared>, admitted: &mut conn::Admitted, name: &str) {
    match shared.acl.user(name.as_bytes()) {
        Some(user) if user.enabled => {
            tracing::debug!("TLS: Auto-authenticated client as {name}");
            if let Some(ci) = shared.lock_async().await.clients.get_mut(&admitted.id) {
                ci.user = user.name.clone();
            }
            if let Some(info) = admitted.unregistered.as_mut() {
                info.user = user.name.clone();
            }
            admitted.user = Some(user);
        }
        _ => shared.acl.log.lock().unwrap_or_else(|p| p.into_inner()).add(
            crate::acl::Reason::TlsCert,
            crate::acl::Context::Toplevel,
            bytes::Bytes::new(),
            bytes::Bytes::copy_from_slice(name.as_bytes()),
            format!("id={}", admitted.id),
            now_ms(),
        ),
    }
}

/// How long a TLS client has to finish its handshake.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serve an admitted client: over the socket, or over TLS once its handshake succeeds (a
/// failed one is logged and the client's record removed).
fn spawn_serve(
    shared: &Arc<Shared>,
    socket: tokio::net::TcpStream,
    admitted: conn::Admitted,
    tls: bool,
    keepalive: i64,
) {
    listen::set_keepalive(&socket, keepalive);
    if !tls {
        tokio::spawn(conn::serve(shared.clone(), conn::Tcp::new(socket), admitted));
        return;
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        let id = admitted.id;
        let Some(config) = shared.tls.server() else {
            shared.lock_async().await.remove_client(id);
            return;
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(socket)).await {
            Ok(Ok(stream)) => {
                let mut admitted = admitted;
                let by_cn = shared.lock_async().await.config.get("tls-auth-clients-user") == "CN";
                let name = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(|c| crate::tls::common_name(c));
                if let (true, Some(name)) = (by_cn, name) {
                    certificate_user(&shared, &mut admitted, &name).await;
                }
                conn::serve(shared, conn::Stream::new(stream), admitted).await
            }
            outcome => {
                let why = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".to_string(),
                };
                tracing::info!("Error accepting a client connection: TLS handshake {why} (id={id})");
                shared.lock_async().await.remove_client(id);
            }
        }
    });
}

/// The group policies' timer (docs/spec/policies.md §1.4): sleeps until the earliest time a
/// policy group needs a look (`Engine::next_policy_due`), or until a unit moves that time
/// earlier (`State::policy_wake`), then runs the due work as one unit — hand-backs, dead
/// letters and their wake-ups, like any write. A replica never acts (its primary's records
/// carry the policies' effects), nor does a server whose writes are paused; both look again
/// a little later.
async fn policy_timer(shared: Arc<Shared>) {
    /// How long a server that may not act waits before looking again.
    const HELD_MS: u64 = 100;
    let wake = shared.lock().policy_wake.clone();
    loop {
        let (next, may_act) = {
            let mut st = shared.lock_async().await;
            st.engine.take_policy_due_moved();
            let now = now_ms();
            let may_act = st.replication.master.is_none() && !st.pause.actions(now).any(crate::pause::Actions::WRITE);
            (st.engine.next_policy_due(), may_act)
        };
        let now = now_ms();
        let wait_ms = match next {
            Some(_) if !may_act => Some(HELD_MS),
            Some(at) if at <= now => None,
            Some(at) => Some(u64::try_from(at - now).unwrap_or(0)),
            None => {
                wake.notified().await;
                continue;
            }
        };
        if let Some(ms) = wait_ms {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                () = wake.notified() => {}
            }
            continue;
        }
        let mut st = shared.lock_async().await;
        let now = now_ms();
        crate::unit::run(&mut st, now, |st| {
            let recording = st.journal.recording();
            let blocked = &st.blocked;
            st.engine.clear_events();
            let mut effects = st.engine.run_policy_timers(now, recording, &|db, key, group, consumer| {
                blocked.reading(db, key, group, consumer)
            });
            st.collect_effects(&mut effects);
            crate::notify::publish_events(st, now);
        });
    }
}

/// Evictions a command's pass left over (`evict.rs`: out of `maxmemory-eviction-tenacity`'s
/// time) or a lower `maxmemory` asked for: a pass at a time, the lock released between
/// passes, until the memory is under the limit or nothing is left to evict.
async fn eviction_task(shared: Arc<Shared>) {
    let wake = shared.lock().eviction.wake.clone();
    loop {
        wake.notified().await;
        loop {
            let outcome = {
                let mut st = shared.lock_async().await;
                crate::evict::perform(&mut st, now_ms())
            };
            if outcome != crate::evict::Outcome::Running {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
}

/// Periodic work, `hz` times a second: active expiry in small budgets.
async fn cron(shared: Arc<Shared>) {
    /// Keys removed per database sweep per tick, so one tick never stalls clients for long.
    const EXPIRE_BUDGET_KEYS: usize = 2000;
    loop {
        let hz = shared.lock_async().await.config.get_i64("hz").clamp(1, 500);
        tokio::time::sleep(Duration::from_millis((1000 / hz) as u64)).await;
        let mut st = shared.lock_async().await;
        let now = now_ms();
        if st.active_expire {
            // One unit per sweep: expired keys are logged as deletions, one record, and
            // clients blocked on a key that expired re-check it (a group reader gets its
            // NOGROUP error now, as from Redis).
            let started = crate::clock::Tick::now();
            crate::unit::run(&mut st, now, |st| {
                if st.replication.master.is_some() {
                    // A replica's keys are its primary's to expire, but for those its own
                    // clients gave a time (a writable replica).
                    st.engine.expire_replica_written_keys(now, EXPIRE_BUDGET_KEYS);
                } else {
                    st.engine.active_expire(now, EXPIRE_BUDGET_KEYS);
                }
                crate::notify::publish_events(st, now);
            });
            // The latency monitor's `expire-cycle` event: the sweep held every client up.
            let us = crate::clock::Tick::now().micros_since(started);
            st.stats.expire_cycle_us += us;
            let ms = us / 1000;
            let threshold = st.hot.latency_threshold_ms;
            st.latency.sample_if_needed(threshold, "expire-cycle", ms, now.div_euclid(1000));
        }
        evict_clients(&mut st);
        // MIGRATE's connections unused for 10 s are closed.
        if !st.migrate.is_empty() {
            st.migrate.close_idle(now);
        }
        // The tracking table kept to `tracking-table-max-keys` while no command runs (a CONFIG
        // SET lowered it); not while DEBUG PAUSE-CRON holds the cron.
        if st.tracking.active() && !crate::client_limits::cron_paused() {
            crate::tracking::limit(&mut st, None, now);
        }
        // The latency monitor's `aof-fsync-always`: fsyncs that writes waited for under
        // `appendfsync always`, timed by the log's writer.
        let threshold = st.hot.latency_threshold_ms;
        let slow: Vec<(i64, u64)> = st
            .journal
            .log()
            .and_then(|l| l.fsync_times.lock().ok().map(|mut t| t.slow_always.drain(..).collect()))
            .unwrap_or_default();
        for (secs, ms) in slow {
            st.latency.sample_if_needed(threshold, "aof-fsync-always", ms, secs);
        }
        // INFO's instantaneous_* rates, one sample per tick; the replication stream's bytes
        // counted by how far the offset moved (received on a replica, sent to each replica).
        let offset = st.replication.offset();
        let moved = offset.saturating_sub(std::mem::replace(&mut st.stats.repl_offset_seen, offset));
        if st.replication.master.is_some() {
            st.stats.net_repl_input_bytes += moved;
        } else {
            st.stats.net_repl_output_bytes += moved * st.replication.replicas.len() as u64;
        }
        let s = &st.stats;
        let counters = [
            s.commands_processed,
            s.net_input_bytes,
            s.net_output_bytes,
            s.net_repl_input_bytes,
            s.net_repl_output_bytes,
        ];
        st.stats.instantaneous.sample(now, counters);
        crate::alloc::note_peak_time(u64::try_from(now / 1000).unwrap_or(0));
        // The primary's keep-alive: a PING in the stream every repl-ping-replica-period, so
        // an idle primary's replicas do not time out (it counts in the offsets, as in Redis).
        // Not while paused: the offset must stand still (a failover waits for a replica to
        // reach it).
        // The period counts from when the first replica attached (not from the server's
        // start: a replica attaching then is not sent a PING within the same second).
        let paused = st.pause.actions(now).any(crate::pause::Actions::REPLICA);
        if st.replication.replicas.is_empty() {
            st.replication.last_ping_ms = now;
        } else if st.replication.master.is_none() && !paused {
            let period = crate::replication::primary::seconds(&st.config, "repl-ping-replica-period", 10);
            if now - st.replication.last_ping_ms >= (period * 1000) as i64 {
                st.replication.last_ping_ms = now;
                st.journal.stream_only(&[bytes::Bytes::from_static(b"PING")]);
            }
        }
        crate::handover::tick(&shared, &mut st, now);
        // The function VM follows the engine's libraries when they changed other than by a
        // FUNCTION command here (a replay, a full sync, a rill primary's records).
        let st_ref = &mut *st;
        st_ref.scripts.functions.follow(st_ref.engine.libraries(), &shared.busy);
        // repl-backlog-ttl: a primary without replicas for that long frees its backlog.
        let ttl = st.config.get_i64("repl-backlog-ttl");
        let st_ref = &mut *st;
        if st_ref.replication.expire_backlog(&mut st_ref.journal, now, ttl, run_id) {
            tracing::info!("Replication backlog freed after {ttl} seconds without connected replicas.");
        }
        if crate::persist::rewrite::base_due(&st, now) {
            tracing::info!("Starting the rewrite that writes the new log's base");
            let _ = crate::persist::rewrite::start_base(&shared, &mut st);
        } else if crate::persist::rewrite::should_auto_rewrite(&st) {
            tracing::info!("Starting automatic rewriting of AOF on growth");
            let _ = crate::persist::rewrite::start(&shared, &mut st);
        } else if crate::persist::rewrite::save_due(&st, now / 1000) {
            tracing::info!("Background saving started (save point reached)");
            if st.journal.log().is_some() {
                let dest = std::path::PathBuf::from(st.config.get("dbfilename"));
                let _ = crate::persist::rewrite::start_with(&shared, &mut st, Some(dest));
            } else {
                let _ = crate::persist::rewrite::bgsave(&shared, &mut st);
            }
        }
        drop(st);
        // Memory freed in bulk (clients gone, keys deleted) goes back to the system, outside
        // the lock: the trim walks the allocator's arenas.
        crate::alloc::release_freed(RELEASE_FREED_MIN_BYTES);
    }
}

/// Freed bytes (since the most the cron saw allocated) that make the cron give memory back.
const RELEASE_FREED_MIN_BYTES: u64 = 8 << 20;
