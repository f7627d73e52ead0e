//! HTML pieces of the console: escaping, links, the page frame, tables, forms and the SVG
//! charts. Everything is rendered in the server; no script is needed to read or to act.

use percent_encoding::{percent_encode, NON_ALPHANUMERIC};
use std::fmt::Write as _;

/// `s` escaped for HTML text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Bytes shown as text (invalid UTF-8 replaced), escaped.
pub fn esc_b(b: &[u8]) -> String {
    esc(&String::from_utf8_lossy(b))
}

/// Bytes for a URL's query.
pub fn enc(b: &[u8]) -> String {
    percent_encode(b, NON_ALPHANUMERIC).to_string()
}

/// A duration in ms as people read it: 850ms, 12.5s, 3m20s, 2h05m, 3d04h.
pub fn dur(ms: i64) -> String {
    let s = ms / 1000;
    if ms < 1000 {
        format!("{ms}ms")
    } else if s < 60 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d{:02}h", s / 86400, (s % 86400) / 3600)
    }
}

/// Bytes as people read them.
pub fn size(n: u64) -> String {
    let f = n as f64;
    if f >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} GiB", f / (1024.0 * 1024.0 * 1024.0))
    } else if f >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", f / (1024.0 * 1024.0))
    } else if f >= 1024.0 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// A rate: "-" when unknown.
pub fn rate(r: Option<f64>) -> String {
    match r {
        None => "-".to_owned(),
        Some(r) if r >= 100.0 => format!("{r:.0}/s"),
        Some(r) => format!("{r:.1}/s"),
    }
}

/// The whole page: title, navigation, an optional message (the result of an action), body.
pub fn page(title: &str, read_only: bool, msg: Option<&str>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · rill</title><link rel=\"stylesheet\" href=\"/console.css\"></head><body>\
         <header><a class=\"brand\" href=\"/\">rill</a><nav><a href=\"/\">Streams</a>\
         <a href=\"/replication\">Replication</a><a href=\"/metrics\">/metrics</a></nav>{}</header><main>",
        esc(title),
        if read_only { "<span class=\"ro\" title=\"console-read-only yes\">read-only</span>" } else { "" }
    );
    if let Some(m) = msg.filter(|m| !m.is_empty()) {
        let class = if m.starts_with("ERR") || m.starts_with("Refused") { "msg err" } else { "msg" };
        let _ = write!(out, "<p class=\"{class}\" role=\"status\">{}</p>", esc(m));
    }
    out.push_str(body);
    out.push_str("</main></body></html>\n");
    out
}

/// A table: the header cells, then rows of already-escaped cells.
pub fn table(id: &str, head: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("<table id=\"{id}\"><thead><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{c}</td>");
        }
        out.push_str("</tr>");
    }
    if rows.is_empty() {
        let _ = write!(out, "<tr><td colspan=\"{}\" class=\"none\">none</td></tr>", head.len());
    }
    out.push_str("</tbody></table>");
    out
}

/// The hidden fields every action form carries: the token, where to come back to, and the
/// stream it acts on.
pub fn form_head(token: &str, back: &str, db: usize, key: &[u8]) -> String {
    format!(
        "<form method=\"post\" action=\"/action\"><input type=\"hidden\" name=\"token\" value=\"{}\">\
         <input type=\"hidden\" name=\"back\" value=\"{}\"><input type=\"hidden\" name=\"db\" value=\"{db}\">\
         <input type=\"hidden\" name=\"key\" value=\"{}\">",
        esc(token),
        esc(back),
        esc(&enc(key))
    )
}

/// Line colours, in series order.
const COLOURS: [&str; 6] = ["#1f6feb", "#d9480f", "#2f9e44", "#9c36b5", "#e8590c", "#495057"];

/// A line chart of the hour before `now`, as inline SVG: one line per series (label, points
/// as (Unix seconds, value)), a dot on each point, a legend with each series' last value.
pub fn chart(title: &str, id: &str, series: &[(String, Vec<(f64, f64)>)], now: f64, unit: &str) -> String {
    const W: f64 = 360.0;
    const H: f64 = 90.0;
    let max = series.iter().flat_map(|s| s.1.iter().map(|p| p.1)).fold(0.0_f64, f64::max);
    let top = if max <= 0.0 { 1.0 } else { (max * 1.1).ceil() };
    // The hour, or less while the server has not kept an hour yet (at least a minute).
    let earliest = series.iter().filter_map(|s| s.1.first().map(|p| p.0)).fold(now, f64::min);
    let span = (now - earliest).clamp(60.0, super::history::SPAN_SECS);
    let since = if span >= super::history::SPAN_SECS {
        "1 h ago".to_owned()
    } else {
        format!("{} min ago", (span / 60.0).ceil())
    };
    let x = |t: f64| ((t - (now - span)) / span * W).clamp(0.0, W);
    let y = |v: f64| H - (v / top * H).clamp(0.0, H);
    let mut lines = String::new();
    let mut legend = String::new();
    for (i, (label, points)) in series.iter().enumerate() {
        let colour = COLOURS.get(i % COLOURS.len()).copied().unwrap_or("#000");
        let mut line = String::new();
        for (t, v) in points {
            let _ = write!(line, "{:.1},{:.1} ", x(*t), y(*v));
        }
        let _ = write!(lines, "<polyline points=\"{}\" class=\"line\" stroke=\"{colour}\"/>", line.trim_end());
        for (t, v) in points.iter().rev().take(1) {
            let _ = write!(lines, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{colour}\"/>", x(*t), y(*v));
        }
        let last = points.last().map_or_else(|| "no samples yet".to_owned(), |p| format!("{} {unit}", num(p.1)));
        let _ = write!(
            legend,
            "<li><svg class=\"key\" viewBox=\"0 0 10 10\" aria-hidden=\"true\"><rect width=\"10\" height=\"10\" rx=\"2\" fill=\"{colour}\"/></svg>{} <span class=\"muted\">{}</span></li>",
            esc(label),
            esc(&last)
        );
    }
    format!(
        "<figure class=\"chart\" id=\"{id}\"><figcaption>{}</figcaption>\
         <svg viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}, last hour\">\
         <line x1=\"0\" y1=\"{H}\" x2=\"{W}\" y2=\"{H}\" class=\"axis\"/>{lines}\
         <text x=\"2\" y=\"10\" class=\"lbl\">{} {}</text><text x=\"2\" y=\"{}\" class=\"lbl\">{since}</text>\
         <text x=\"{}\" y=\"{}\" class=\"lbl\" text-anchor=\"end\">now</text></svg>\
         <ul class=\"legend\">{legend}</ul></figure>",
        esc(title),
        esc(title),
        num(top),
        esc(unit),
        H - 2.0,
        W - 2.0,
        H - 2.0,
    )
}

fn num(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The stylesheet, served at `/console.css`.
pub const CSS: &str = include_str!("console.css");
