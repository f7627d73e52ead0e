//! `COMMAND DOCS` argument trees, built from each spec's [`CommandSpec::syntax`] string.
//!
//! redis-cli builds its interactive hints from this reply and asserts on its shape (names and
//! types are bulk strings, `flags` elements simple strings, `arguments` arrays), so the
//! renderer here is the only place that shape is produced.
//!
//! Grammar of a syntax string (see also the `command` module doc):
//!
//! ```text
//! seq   := item*
//! item  := [name@] atom ['...']
//! atom  := '[' alts ']'          optional
//!        | '(' alts ')'          block
//!        | TOKEN atom?           a token, attached to the atom that follows it if any
//!        | word[:type]           a plain argument
//! alts  := seq ('|' seq)*        two or more alternatives make a `oneof`
//! ```

use super::CommandSpec;
use bytes::Bytes;
use rill_resp::Reply;

/// One documented argument.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DocArg {
    /// Argument name.
    pub name: String,
    /// `string integer double key pattern unix-time pure-token oneof block`.
    pub kind: String,
    /// The token that introduces it, if any.
    pub token: Option<String>,
    /// Optional.
    pub optional: bool,
    /// May repeat.
    pub multiple: bool,
    /// For keys: which key spec describes it.
    pub key_spec_index: Option<i64>,
    /// Children of a `oneof` or `block`.
    pub args: Vec<DocArg>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open(char),
    Close(char),
    Bar,
    Ellipsis,
    Word(String),
}

fn lex(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut word = String::new();
    let flush = |w: &mut String, out: &mut Vec<Tok>| {
        if !w.is_empty() {
            if w == "..." {
                out.push(Tok::Ellipsis);
            } else if let Some((label, rest)) = w.split_once('@').filter(|(_, r)| !r.is_empty()) {
                // `label@TOKEN` / `label@word`: the label names what follows.
                out.push(Tok::Word(format!("{label}@")));
                out.push(Tok::Word(rest.to_string()));
            } else {
                out.push(Tok::Word(std::mem::take(w)));
            }
            w.clear();
        }
    };
    for c in s.chars() {
        match c {
            '[' | '(' => {
                if word.ends_with('@') {
                    // `name@[` — keep the label attached as its own word.
                    flush(&mut word, &mut out);
                } else {
                    flush(&mut word, &mut out);
                }
                out.push(Tok::Open(c));
            }
            ']' | ')' => {
                flush(&mut word, &mut out);
                out.push(Tok::Close(c));
            }
            '|' => {
                flush(&mut word, &mut out);
                out.push(Tok::Bar);
            }
            c if c.is_whitespace() => flush(&mut word, &mut out),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut out);
    out
}

fn is_token(w: &str) -> bool {
    w.chars().any(|c| c.is_ascii_uppercase())
        && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    keys_seen: i64,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn seq(&mut self) -> Vec<DocArg> {
        let mut items = Vec::new();
        while let Some(t) = self.peek() {
            if matches!(t, Tok::Close(_) | Tok::Bar) {
                break;
            }
            match self.item() {
                Some(a) => items.push(a),
                None => break,
            }
        }
        items
    }

    fn alts(&mut self, label: Option<String>) -> DocArg {
        let mut alts = vec![self.seq()];
        while matches!(self.peek(), Some(Tok::Bar)) {
            self.pos += 1;
            alts.push(self.seq());
        }
        if alts.len() == 1 {
            let seq = alts.pop().unwrap_or_default();
            return collapse(seq, label);
        }
        let args: Vec<DocArg> = alts.into_iter().map(|s| collapse(s, None)).collect();
        let name = label.unwrap_or_else(|| args.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join("-"));
        DocArg { name, kind: "oneof".into(), args, ..DocArg::default() }
    }

    fn item(&mut self) -> Option<DocArg> {
        let mut label = None;
        if let Some(Tok::Word(w)) = self.peek() {
            if let Some(l) = w.strip_suffix('@') {
                label = Some(l.to_string());
                self.pos += 1;
            }
        }
        let mut arg = self.atom(label)?;
        if matches!(self.peek(), Some(Tok::Ellipsis)) {
            self.pos += 1;
            arg.multiple = true;
        }
        Some(arg)
    }

    fn atom(&mut self, label: Option<String>) -> Option<DocArg> {
        match self.next()? {
            Tok::Open(c) => {
                let mut inner = self.alts(label);
                let _close = self.next();
                if c == '[' {
                    inner.optional = true;
                }
                Some(inner)
            }
            Tok::Word(w) if is_token(&w) => {
                // A token attaches to a following plain word or parenthesised block.
                let attach = match self.peek() {
                    Some(Tok::Word(next)) => !is_token(next) && !next.ends_with('@'),
                    Some(Tok::Open('(')) => true,
                    _ => false,
                };
                if attach {
                    let mut a = self.atom(label)?;
                    a.token = Some(w);
                    Some(a)
                } else {
                    Some(DocArg {
                        name: label.unwrap_or_else(|| w.to_ascii_lowercase()),
                        kind: "pure-token".into(),
                        token: Some(w),
                        ..DocArg::default()
                    })
                }
            }
            Tok::Word(w) => {
                let (name, kind) = match w.split_once(':') {
                    Some((n, k)) => (n.to_string(), k.to_string()),
                    None => (w.clone(), "string".to_string()),
                };
                let key_spec_index = if kind == "key" {
                    let i = self.keys_seen;
                    self.keys_seen += 1;
                    Some(i)
                } else {
                    None
                };
                Some(DocArg { name: label.unwrap_or(name), kind, key_spec_index, ..DocArg::default() })
            }
            Tok::Ellipsis | Tok::Bar | Tok::Close(_) => None,
        }
    }
}

fn collapse(mut seq: Vec<DocArg>, label: Option<String>) -> DocArg {
    if seq.len() == 1 {
        let mut a = seq.pop().unwrap_or_default();
        if let Some(l) = label {
            a.name = l;
        }
        return a;
    }
    let name = label.unwrap_or_else(|| seq.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join("-"));
    DocArg { name, kind: "block".into(), args: seq, ..DocArg::default() }
}

/// Parse a syntax string into its top-level arguments.
pub fn parse_syntax(syntax: &str) -> Vec<DocArg> {
    let mut p = Parser { toks: lex(syntax), pos: 0, keys_seen: 0 };
    let mut out = Vec::new();
    while p.peek().is_some() {
        let before = p.pos;
        out.extend(p.seq());
        if p.pos == before {
            p.pos += 1; // skip a stray `]`, `)` or `|`
        }
    }
    out
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

fn render_arg(a: &DocArg) -> Reply {
    let mut m = vec![(bulk("name"), bulk(&a.name)), (bulk("type"), bulk(&a.kind))];
    if a.kind != "oneof" && a.kind != "block" {
        m.push((bulk("display_text"), bulk(&a.name)));
    }
    if let Some(i) = a.key_spec_index {
        m.push((bulk("key_spec_index"), Reply::Integer(i)));
    }
    if let Some(t) = &a.token {
        m.push((bulk("token"), bulk(t)));
    }
    let mut flags = Vec::new();
    if a.optional {
        flags.push(Reply::Simple(Bytes::from_static(b"optional")));
    }
    if a.multiple {
        flags.push(Reply::Simple(Bytes::from_static(b"multiple")));
    }
    if !flags.is_empty() {
        m.push((bulk("flags"), Reply::Set(flags)));
    }
    if !a.args.is_empty() {
        m.push((bulk("arguments"), Reply::Array(a.args.iter().map(render_arg).collect())));
    }
    Reply::Map(m)
}

/// Key arguments beyond the last key spec belong to it: one spec may describe several key
/// arguments (LCS's `key1 key2`, a single range), and Redis then gives them all its index.
fn clamp_key_spec_index(args: &mut [DocArg], last: i64) {
    for a in args {
        if let Some(i) = a.key_spec_index.as_mut() {
            *i = (*i).min(last);
        }
        clamp_key_spec_index(&mut a.args, last);
    }
}

/// The doc map of one command (`COMMAND DOCS` value for `spec`).
pub fn render_docs(spec: &CommandSpec) -> Reply {
    let mut m = vec![
        (bulk("summary"), bulk(spec.summary)),
        (bulk("since"), bulk(spec.since)),
        (bulk("group"), bulk(spec.group)),
        (bulk("complexity"), bulk(spec.complexity)),
    ];
    let mut args = parse_syntax(spec.syntax);
    if let Some(last) = spec.key_specs.len().checked_sub(1) {
        clamp_key_spec_index(&mut args, i64::try_from(last).unwrap_or(i64::MAX));
    }
    if !args.is_empty() {
        m.push((bulk("arguments"), Reply::Array(args.iter().map(render_arg).collect())));
    }
    if spec.is_container() {
        let subs = spec.subcommands.iter().map(|s| (bulk(s.name), render_docs(s))).collect();
        m.push((bulk("subcommands"), Reply::Map(subs)));
    }
    Reply::Map(m)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn set_syntax() {
        let args =
            parse_syntax("key:key value [NX | XX] [GET] [EX seconds:integer | PX milliseconds:integer | KEEPTTL]");
        assert_eq!(args.len(), 5);
        assert_eq!(args[0].kind, "key");
        assert_eq!(args[0].key_spec_index, Some(0));
        assert_eq!(args[2].kind, "oneof");
        assert!(args[2].optional);
        assert_eq!(args[2].args[0].kind, "pure-token");
        assert_eq!(args[3].token.as_deref(), Some("GET"));
        let ex = &args[4].args[0];
        assert_eq!((ex.name.as_str(), ex.kind.as_str(), ex.token.as_deref()), ("seconds", "integer", Some("EX")));
    }

    #[test]
    fn blocks_tokens_and_repeats() {
        let args = parse_syntax("[COUNT count:integer] [BLOCK milliseconds:integer] STREAMS (key:key ... id ...)");
        assert_eq!(args.len(), 3);
        let streams = &args[2];
        assert_eq!(streams.kind, "block");
        assert_eq!(streams.token.as_deref(), Some("STREAMS"));
        assert!(streams.args[0].multiple && streams.args[1].multiple);
        let labelled = parse_syntax("condition@[NX | XX]");
        assert_eq!(labelled[0].name, "condition");
        let ids = parse_syntax("ids@IDS (numids:integer id ...)");
        assert_eq!(
            (ids[0].name.as_str(), ids[0].kind.as_str(), ids[0].token.as_deref()),
            ("ids", "block", Some("IDS"))
        );
    }

    #[test]
    fn key_arguments_share_a_last_spec() {
        let mut args = parse_syntax("key1:key key2:key [LEN]");
        assert_eq!((args[0].key_spec_index, args[1].key_spec_index), (Some(0), Some(1)));
        clamp_key_spec_index(&mut args, 0);
        assert_eq!((args[0].key_spec_index, args[1].key_spec_index), (Some(0), Some(0)));
        let mut nested = parse_syntax("a:key [b:key | c:key]");
        assert_eq!(nested[1].args[1].key_spec_index, Some(2));
        clamp_key_spec_index(&mut nested, 1);
        assert_eq!(nested[1].args[1].key_spec_index, Some(1));
    }
}
