//! The HTTP port (`metrics-port`, off by default): `GET /metrics` in the Prometheus text
//! format (`metrics.rs`) and the operator console at `/` (`console/`). HTTP/1.1 from hyper;
//! this module only routes and guards.
//!
//! The same rules as the Redis port: it listens on `bind`'s addresses; with `protected-mode
//! yes` and no password, only loopback peers are served (others get 403); when the default
//! user needs a password, a request must carry an ACL user's credentials as HTTP Basic (a user
//! name no user has stands for the default user, so `requirepass` alone works with any name;
//! 401 otherwise, counted in `acl_access_denied_auth`). Requests are small and bounded: headers must arrive
//! within 10 s and fit in 16 KiB (hyper answers 431 past it, 400 to a malformed request);
//! GET and HEAD are served, and POST on `/action` only (405 otherwise), with a body of at
//! most 64 KiB (413). Pages forbid framing and anything not from the console itself (CSP).
//! Bodies go out in 64 KiB frames with a yield every 256 KiB ([`Paced`]): a 16 MB scrape does
//! not hold the worker that serves Redis clients for milliseconds at a time.

use crate::console::{Answer, Origin, Site};
use crate::state::Shared;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_TYPE, HOST, LOCATION, ORIGIN, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The content type of the exposition `metrics::render` writes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The largest request head accepted.
const MAX_HEAD: usize = 16 * 1024;
/// The largest request body accepted (an action's form).
const MAX_BODY: usize = 64 * 1024;
/// What pages may load: only the console's own stylesheet; forms post only to it; no frames.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

/// Serve the HTTP port on `listener` until the process exits.
pub async fn accept_loop(site: Arc<Site>, listener: Arc<TcpListener>) {
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("Accepting an HTTP connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let site = site.clone();
        // `metrics-tls yes`: HTTPS with the server's TLS configuration (a client that fails
        // the handshake is dropped; with none loaded, nobody is served).
        let tls = (site.shared.lock_async().await.config.get("metrics-tls") == "yes").then(|| site.shared.tls.server());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let site = site.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&site, peer, req).await) }
            });
            match tls {
                None => serve_http(hyper_util::rt::TokioIo::new(socket), service).await,
                Some(None) => {
                    tracing::warn!("metrics-tls is on but no TLS certificate is loaded: HTTPS client refused")
                }
                Some(Some(config)) => {
                    let handshake = tokio_rustls::TlsAcceptor::from(config).accept(socket);
                    match tokio::time::timeout(Duration::from_secs(10), handshake).await {
                        Ok(Ok(stream)) => serve_http(hyper_util::rt::TokioIo::new(stream), service).await,
                        Ok(Err(e)) => tracing::info!("HTTPS handshake from {peer}: {e}"),
                        Err(_) => tracing::info!("HTTPS handshake from {peer}: timed out"),
                    }
                }
            }
        });
    }
}

/// Serve one HTTP/1.1 connection (plain or TLS) with `service`.
async fn serve_http<I, S>(io: hyper_util::rt::TokioIo<I>, service: S)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming, ResBody = Paced> + Send,
    S::Future: Send,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .max_buf_size(MAX_HEAD);
    // A client that goes away or sends garbage ends its own connection only.
    let _ = builder.serve_connection(io, service).await;
}

fn response(status: StatusCode, body: impl Into<Bytes>) -> Response<Paced> {
    let mut r = Response::new(Paced::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// Whether the request may be served: `None` if so, else the response refusing it.
fn guard(shared: &Shared, peer: SocketAddr, req: &Request<Incoming>) -> Option<Response<Paced>> {
    if shared.acl.default_open() {
        let protected = shared.lock().config.get("protected-mode") == "yes";
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
        .and_then(|raw| {
            let i = raw.iter().position(|&b| b == b':')?;
            Some((raw.get(..i).unwrap_or(&[]).to_vec(), raw.get(i + 1..).unwrap_or(&[]).to_vec()))
        });
    // An ACL user by name; a name no user has (or none) means the default user, so that the
    // `requirepass` password works with any user name.
    let user = |name: &[u8]| shared.acl.user(name).unwrap_or_else(|| shared.acl.default_user());
    match given {
        Some((name, pass)) if user(&name).password_ok(&pass) => None,
        _ => {
            if req.headers().contains_key(AUTHORIZATION) {
                shared.acl.log.lock().unwrap_or_else(|p| p.into_inner()).stats.denied_auth += 1;
            }
            let mut r =
                response(StatusCode::UNAUTHORIZED, "The server's password is needed (HTTP Basic, any user name).\n");
            r.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"rill\", charset=\"UTF-8\""));
            Some(r)
        }
    }
}

async fn handle(site: &Arc<Site>, peer: SocketAddr, req: Request<Incoming>) -> Response<Paced> {
    if let Some(refused) = guard(&site.shared, peer, &req) {
        return refused;
    }
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    if method == Method::POST && path == "/action" {
        return action(site, req).await;
    }
    if path == "/action" || (method != Method::GET && method != Method::HEAD) {
        let mut r = response(StatusCode::METHOD_NOT_ALLOWED, "Only GET and HEAD (and POST to /action).\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static(if path == "/action" { "POST" } else { "GET, HEAD" }));
        return r;
    }
    let mut r = if path == "/metrics" {
        let snap = Arc::new(crate::metrics::collect(&site.shared).await);
        let text = render_in_background(snap).await;
        let mut r = response(StatusCode::OK, text);
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
        r
    } else {
        let query = req.uri().query().unwrap_or("").as_bytes().to_vec();
        answer(crate::console::get(site, &path, &query).await)
    };
    if method == Method::HEAD {
        *r.body_mut() = Paced::new(Bytes::new());
    }
    r
}

/// POST /action: read the form (bounded), check where it comes from, run it.
async fn action(site: &Arc<Site>, req: Request<Incoming>) -> Response<Paced> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let host = header(HOST.as_str());
    let origin = header(ORIGIN.as_str());
    let fetch_site = header("sec-fetch-site");
    let form = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| {
        t.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
    });
    if !form {
        return answer(Answer::Refused(
            415,
            "Refused: an action is a form (application/x-www-form-urlencoded).".to_owned(),
        ));
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return answer(Answer::Refused(413, format!("Refused: a form of more than {MAX_BODY} bytes."))),
    };
    let origin = Origin { host, origin, fetch_site };
    let site = site.clone();
    // Actions take the state lock (a replay-all, many times): off the async workers.
    let done = tokio::task::spawn_blocking(move || crate::console::post(&site, &origin, &body)).await;
    answer(done.unwrap_or_else(|_| Answer::Refused(500, "The action failed.".to_owned())))
}

/// The HTTP response of a console answer.
fn answer(a: Answer) -> Response<Paced> {
    let mut r = match a {
        Answer::Page(html) => {
            let mut r = response(StatusCode::OK, html);
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
            r
        }
        Answer::Css => {
            let mut r = response(StatusCode::OK, crate::console::html::CSS);
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/css; charset=utf-8"));
            r
        }
        Answer::Redirect(to) => {
            let mut r = response(StatusCode::SEE_OTHER, "");
            if let Ok(v) = HeaderValue::from_str(&to) {
                r.headers_mut().insert(LOCATION, v);
            }
            r
        }
        Answer::Refused(code, why) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
            let mut r = response(status, crate::console::html::page("Refused", false, Some(&why), ""));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
            r
        }
    };
    let h = r.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert("cache-control", HeaderValue::from_static("no-store"));
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

/// A response body handed to hyper in frames of [`Paced::FRAME`] bytes, yielding to the
/// scheduler after every [`Paced::BURST`] frames: a 16 MB exposition is then written a few
/// hundred KB at a time between the clients' requests on the same worker, rather than in
/// socket-buffer-sized copies that hold it for milliseconds.
#[derive(Debug)]
pub struct Paced {
    data: Bytes,
    since_yield: usize,
}

impl Paced {
    /// Bytes per frame.
    const FRAME: usize = 64 * 1024;
    /// Frames between yields.
    const BURST: usize = 4;

    /// A body of `data`.
    pub fn new(data: Bytes) -> Paced {
        Paced { data, since_yield: 0 }
    }
}

impl hyper::body::Body for Paced {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        if self.data.is_empty() {
            return Poll::Ready(None);
        }
        if self.since_yield == Self::BURST {
            self.since_yield = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.since_yield += 1;
        let n = self.data.len().min(Self::FRAME);
        let frame = self.data.split_to(n);
        Poll::Ready(Some(Ok(hyper::body::Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.data.len() as u64)
    }
}
