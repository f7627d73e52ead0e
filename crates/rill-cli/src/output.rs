//! Terminal tables and `--json` output, without a serialisation framework.

use std::fmt::Write as _;

/// A JSON value, enough for the CLI's reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Array(Vec<Json>),
    /// Keys in insertion order.
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn obj<const N: usize>(pairs: [(&str, Json); N]) -> Json {
        Json::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    pub fn uint(n: u64) -> Json {
        Json::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }

    pub fn opt_int(n: Option<i64>) -> Json {
        n.map_or(Json::Null, Json::Int)
    }

    /// Field/value pairs as an object (bytes shown lossily as UTF-8).
    pub fn fields(fields: &[(Vec<u8>, Vec<u8>)]) -> Json {
        Json::Object(fields.iter().map(|(f, v)| (lossy(f), Json::Str(lossy(v)))).collect())
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Json::Str(s) => write_str(out, s),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Object(pairs) => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(out, k);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

pub fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Field/value pairs on one line: `f1=v1 f2=v2`.
pub fn fields_inline(fields: &[(Vec<u8>, Vec<u8>)]) -> String {
    fields.iter().map(|(f, v)| format!("{}={}", lossy(f), lossy(v))).collect::<Vec<_>>().join(" ")
}

/// A table printed with columns padded to their widest cell.
#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<const N: usize>(headers: [&str; N]) -> Table {
        Table { headers: headers.iter().map(|h| (*h).to_owned()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, cells: &[String]| {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate() {
                let width = widths.get(i).copied().unwrap_or(0);
                let _ = write!(text, "{cell:<width$}  ");
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&mut out, &self.headers);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&mut out, &rule);
        for row in &self.rows {
            line(&mut out, row);
        }
        out
    }
}

/// Milliseconds as a short human duration: `850ms`, `12.3s`, `4m05s`, `2h10m`.
pub fn human_ms(ms: i64) -> String {
    if ms < 0 {
        return "-".to_owned();
    }
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes() {
        let j = Json::obj([
            ("a", Json::str("x\"y\n")),
            ("b", Json::Array(vec![Json::Int(1), Json::Null, Json::Bool(true)])),
        ]);
        assert_eq!(j.render(), r#"{"a":"x\"y\n","b":[1,null,true]}"#);
    }

    #[test]
    fn tables_align() {
        let mut t = Table::new(["name", "n"]);
        t.row(vec!["long-name".into(), "1".into()]);
        assert_eq!(t.render(), "name       n\n---------  -\nlong-name  1\n");
    }

    #[test]
    fn durations() {
        assert_eq!(human_ms(850), "850ms");
        assert_eq!(human_ms(12_345), "12.3s");
        assert_eq!(human_ms(245_000), "4m05s");
        assert_eq!(human_ms(-1), "-");
    }
}
