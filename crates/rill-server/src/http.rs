//! The HTTP port (`metrics-port`, off by default): `GET /metrics` in the Prometheus text
//! format (`metrics.rs`). HTTP/1.1 from hyper; this module only routes and guards.
//!
//! The same rules as the Redis port: it listens on `bind`'s addresses; with `protected-mode
//! yes` and no password, only loopback peers are served (others get 403); with `requirepass`
//! set, a request must carry it as HTTP Basic credentials (any user name; 401 otherwise,
//! counted in `acl_access_denied_auth`). Requests are small and bounded: headers must arrive
//! within 10 s and fit in 16 KiB (hyper answers 431 past it, 400 to a malformed request);
//! only GET and HEAD are served (405), on `/metrics` (404 elsewhere).

use crate::state::Shared;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The content type of the exposition `metrics::render` writes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The largest request head accepted.
const MAX_HEAD: usize = 16 * 1024;

/// Serve the HTTP port on `listener` until the process exits.
pub async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("Accepting an HTTP connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&shared, peer, req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(socket);
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .max_buf_size(MAX_HEAD);
            // A client that goes away or sends garbage ends its own connection only.
            let _ = builder.serve_connection(io, service).await;
        });
    }
}

fn response(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// Whether the request may be served: `None` if so, else the response refusing it.
fn guard(shared: &Shared, peer: SocketAddr, req: &Request<Incoming>) -> Option<Response<Full<Bytes>>> {
    let mut st = shared.lock();
    let secret = st.config.get("requirepass").to_string();
    if secret.is_empty() {
        let protected = st.config.get("protected-mode") == "yes";
        if crate::listen::protected_mode_denies(protected, true, peer.ip()) {
            return Some(response(
                StatusCode::FORBIDDEN,
                "rill is in protected mode and has no password: only loopback clients are served.\n",
            ));
        }
        return None;
    }
    let given = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64.trim()).ok())
        .and_then(|raw| raw.iter().position(|&b| b == b':').map(|i| raw.get(i + 1..).unwrap_or(&[]).to_vec()));
    match given {
        Some(pass) if crate::cmd::connection::password_matches(secret.as_bytes(), &pass) => None,
        _ => {
            if req.headers().contains_key(AUTHORIZATION) {
                st.stats.acl.denied_auth += 1;
            }
            let mut r =
                response(StatusCode::UNAUTHORIZED, "The server's password is needed (HTTP Basic, any user name).\n");
            r.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"rill\", charset=\"UTF-8\""));
            Some(r)
        }
    }
}

async fn handle(shared: &Arc<Shared>, peer: SocketAddr, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if let Some(refused) = guard(shared, peer, &req) {
        return refused;
    }
    if req.uri().path() != "/metrics" {
        return response(StatusCode::NOT_FOUND, "Not found: this port serves /metrics.\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = response(StatusCode::METHOD_NOT_ALLOWED, "Only GET and HEAD.\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let snap = Arc::new(crate::metrics::collect(shared).await);
    let text = render_in_background(snap).await;
    let mut r = response(StatusCode::OK, if req.method() == Method::HEAD { String::new() } else { text });
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
    r
}

/// Render on a thread of its own at the lowest CPU priority: the text of 10k streams takes a
/// few hundred ms of CPU, which must not be taken from the threads serving clients.
async fn render_in_background(snap: Arc<crate::metrics::Snapshot>) -> String {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("rill-metrics".into()).spawn(move || {
        lowest_priority();
        let _ = tx.send(crate::metrics::render(snap));
    });
    if spawned.is_err() {
        return String::new();
    }
    rx.await.unwrap_or_default()
}

/// Make the calling thread (only it) the least favoured by the scheduler (nice 19).
fn lowest_priority() {
    #[cfg(target_os = "linux")]
    {
        let tid = rustix::thread::gettid();
        let _ = rustix::process::setpriority_process(Some(tid), 19);
    }
}
