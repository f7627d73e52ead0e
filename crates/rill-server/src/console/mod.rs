//! The operator console: HTML pages at `/` on the HTTP port (`metrics-port`, next to
//! `/metrics`), rendered in the server from the metrics snapshot and from commands run as a
//! client would run them (`client.rs`). Nothing is fetched from elsewhere (no CDN, no
//! script): every view and every action works with JavaScript disabled.
//!
//! ```text
//! GET  /                          streams and their groups: length, rate, memory, lag (entries,
//!                                 age), pending, oldest pending, consumers, dead letters
//! GET  /stream?db=&key=           one stream: charts of the last hour, groups with their
//!                                 policies, dead-letter streams, the newest entries
//! GET  /group?db=&key=&group=     the PEL (optionally one consumer's), 100 at a time, with
//!      [&consumer=][&after=]      ack / claim / hand back
//! GET  /dlq?db=&key=[&after=]     a dead-letter stream: letters with provenance; replay or
//!                                 purge one, some, or all
//! GET  /replication               role, offsets, replicas, the link to a primary
//! POST /action                    an action (form fields; see `actions.rs`)
//! ```
//!
//! Access: the HTTP port's rules (`http.rs`: bind, protected mode, the password as HTTP
//! Basic, which a browser asks for). Writes: only by POST to `/action`, with the console's
//! token (a random value of this process, in every form) and, when the browser says where
//! the request comes from (`Origin`, `Sec-Fetch-Site`), only from the console's own origin;
//! never with `console-read-only yes`, which also hides the forms.

pub mod actions;
pub mod client;
pub mod dlq;
pub mod history;
pub mod html;
pub mod pages;

use crate::state::Shared;
use percent_encoding::percent_decode;
use std::sync::{Arc, Mutex};

/// What the HTTP side serves with: the server, the console's token and its history.
pub struct Site {
    /// The server.
    pub shared: Arc<Shared>,
    /// The value every action must carry (32 hex digits from the OS's random source).
    pub token: String,
    /// The charts' samples.
    pub history: Mutex<history::History>,
    /// Whether the sampler runs (it starts with the first HTTP listener).
    sampling: std::sync::Once,
}

impl std::fmt::Debug for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Site").finish_non_exhaustive()
    }
}

impl Site {
    /// A site for `shared` with a fresh token.
    pub fn new(shared: Arc<Shared>) -> Site {
        Site {
            shared,
            token: random_token(),
            history: Mutex::new(history::History::default()),
            sampling: std::sync::Once::new(),
        }
    }

    /// Start sampling the charts' figures, once (from the runtime's context).
    pub fn start_sampling(self: &Arc<Site>) {
        let site = self.clone();
        self.sampling.call_once(|| {
            tokio::spawn(history::sample_loop(site));
        });
    }

    /// Whether actions are refused (`console-read-only yes`).
    pub fn read_only(&self) -> bool {
        self.shared.lock().config.get("console-read-only") == "yes"
    }
}

/// 128 random bits as hex, from the OS.
fn random_token() -> String {
    crate::run::random_hex(16)
}

/// `a=1&b=x%20y` as (name, value bytes) pairs, `+` read as a space.
pub fn parse_form(s: &[u8]) -> Vec<(String, Vec<u8>)> {
    s.split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = match p.iter().position(|&b| b == b'=') {
                Some(i) => (p.get(..i).unwrap_or_default(), p.get(i + 1..).unwrap_or_default()),
                None => (p, &[][..]),
            };
            let dec = |x: &[u8]| {
                let spaced: Vec<u8> = x.iter().map(|&b| if b == b'+' { b' ' } else { b }).collect();
                percent_decode(&spaced).collect::<Vec<u8>>()
            };
            (String::from_utf8_lossy(&dec(k)).into_owned(), dec(v))
        })
        .collect()
}

/// A request's parameters.
#[derive(Debug)]
pub struct Params(pub Vec<(String, Vec<u8>)>);

impl Params {
    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_slice())
    }

    /// Every value of `name`.
    pub fn all(&self, name: &str) -> Vec<&[u8]> {
        self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_slice()).collect()
    }

    /// The value of `name` as text ("" when absent).
    pub fn text(&self, name: &str) -> String {
        self.get(name).map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default()
    }

    /// The database number (0 when absent or bad).
    pub fn db(&self) -> usize {
        self.text("db").parse().unwrap_or(0)
    }
}

/// What a console route answers.
#[derive(Debug)]
pub enum Answer {
    /// 200 with an HTML page.
    Page(String),
    /// 303 to this path.
    Redirect(String),
    /// An error status with a page saying why.
    Refused(u16, String),
    /// The stylesheet.
    Css,
}

/// A GET of `path` with `query`.
pub async fn get(site: &Site, path: &str, query: &[u8]) -> Answer {
    let p = Params(parse_form(query));
    let msg = p.get("msg").map(|m| String::from_utf8_lossy(m).into_owned());
    let ro = site.read_only();
    let body = match path {
        "/" => {
            let snap = crate::metrics::collect(&site.shared).await;
            pages::overview(site, &p, &snap)
        }
        "/stream" => pages::stream(site, &p),
        "/group" => pages::group(site, &p, ro),
        "/dlq" => pages::dlq(site, &p, ro),
        "/replication" => pages::replication(site),
        "/console.css" => return Answer::Css,
        _ => return Answer::Refused(404, "Not found.".to_owned()),
    };
    match body {
        Ok((title, body)) => Answer::Page(html::page(&title, ro, msg.as_deref(), &body)),
        Err(e) => Answer::Refused(404, e),
    }
}

/// Where a request says it comes from, for the cross-origin check.
#[derive(Debug)]
pub struct Origin {
    /// The `Host` header.
    pub host: Option<String>,
    /// The `Origin` header.
    pub origin: Option<String>,
    /// The `Sec-Fetch-Site` header.
    pub fetch_site: Option<String>,
}

/// A POST of an action form.
pub fn post(site: &Site, origin: &Origin, body: &[u8]) -> Answer {
    if origin.fetch_site.as_deref().is_some_and(|s| s != "same-origin" && s != "none") {
        return Answer::Refused(403, "Refused: a cross-origin request (Sec-Fetch-Site).".to_owned());
    }
    if let Some(o) = &origin.origin {
        let same = origin.host.as_ref().is_some_and(|h| *o == format!("http://{h}") || *o == format!("https://{h}"));
        if !same {
            return Answer::Refused(403, "Refused: a cross-origin request (Origin).".to_owned());
        }
    }
    let p = Params(parse_form(body));
    let given = p.get("token").unwrap_or(b"");
    if !crate::cmd::connection::password_matches(site.token.as_bytes(), given) {
        return Answer::Refused(403, "Refused: the form's token is missing or stale; reload the page.".to_owned());
    }
    if site.read_only() {
        return Answer::Refused(403, "Refused: the console is read-only (console-read-only yes).".to_owned());
    }
    let msg = actions::run(site, &p);
    let back = p.text("back");
    // Only back to a page of this console.
    let back =
        if back.starts_with('/') && !back.starts_with("//") && !back.contains('\\') { back } else { "/".to_owned() };
    let back = strip_param(&back, "msg");
    let sep = if back.contains('?') { '&' } else { '?' };
    Answer::Redirect(format!("{back}{sep}msg={}", html::enc(msg.as_bytes())))
}

/// `url` without its `name=` parameter.
fn strip_param(url: &str, name: &str) -> String {
    let Some((path, query)) = url.split_once('?') else { return url.to_owned() };
    let kept: Vec<&str> = query.split('&').filter(|kv| kv.split('=').next() != Some(name)).collect();
    if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_to_bytes() {
        let p = Params(parse_form(b"key=%7Bs%7D%3Adlq&id=1-0&id=2-0&c=a+b&bin=%FF%00&flag"));
        assert_eq!(p.get("key"), Some(&b"{s}:dlq"[..]));
        assert_eq!(p.all("id"), vec![&b"1-0"[..], b"2-0"]);
        assert_eq!(p.text("c"), "a b");
        assert_eq!(p.get("bin"), Some(&[0xff, 0][..]));
        assert_eq!(p.get("flag"), Some(&b""[..]));
        assert_eq!(html::enc(b"{s}:dlq \xff"), "%7Bs%7D%3Adlq%20%FF");
    }

    #[test]
    fn back_links_lose_their_old_message() {
        assert_eq!(strip_param("/group?db=0&msg=old&key=s", "msg"), "/group?db=0&key=s");
        assert_eq!(strip_param("/?msg=x", "msg"), "/");
    }
}
