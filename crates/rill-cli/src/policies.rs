//! `rill policy get|set|unset|info`: a group's server-side policy (rill's `RILL.GROUP`).
//!
//! Every form prints the group's options afterwards (`info` with the counters too), so a `set`
//! shows what the server now enforces. On a server without `RILL.GROUP` (Redis, Valkey) each
//! form fails before sending anything, saying so.

use rill_worker::policy::{self, PolicyValue};
use rill_worker::{Connection, ServerFeatures};

use crate::output::{Json, Table};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Which reply to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// `RILL.GROUP GET`: the options.
    Get,
    /// `RILL.GROUP INFO`: the options and the counters.
    Info,
}

async fn require_policies(conn: &mut Connection) -> Result<()> {
    if ServerFeatures::detect(conn).await.policies {
        return Ok(());
    }
    Err("this server has no group policies (no RILL.GROUP command: Redis and Valkey have none); \
         rill-worker runs its client-side reclaim and dead-letter loop there"
        .into())
}

pub async fn show(conn: &mut Connection, stream: &str, group: &str, view: View, json: bool) -> Result<()> {
    require_policies(conn).await?;
    print_rows(conn, stream, group, view, json).await
}

pub async fn set(conn: &mut Connection, stream: &str, group: &str, pairs: &[String], json: bool) -> Result<()> {
    let pairs: Vec<(String, String)> = pairs
        .chunks(2)
        .map(|pair| match pair {
            [option, value] => Ok((option.clone(), value.clone())),
            _ => Err(format!("option {:?} has no value (give OPTION VALUE pairs)", pair.concat())),
        })
        .collect::<std::result::Result<_, _>>()?;
    require_policies(conn).await?;
    policy::set(conn, stream, group, &pairs).await?;
    print_rows(conn, stream, group, View::Get, json).await
}

pub async fn unset(conn: &mut Connection, stream: &str, group: &str, options: &[String], json: bool) -> Result<()> {
    require_policies(conn).await?;
    policy::unset(conn, stream, group, options).await?;
    print_rows(conn, stream, group, View::Get, json).await
}

async fn print_rows(conn: &mut Connection, stream: &str, group: &str, view: View, json: bool) -> Result<()> {
    let rows = match view {
        View::Get => policy::get_rows(conn, stream, group).await?,
        View::Info => policy::info_rows(conn, stream, group).await?,
    };
    if json {
        let doc = Json::obj([
            ("stream", Json::str(stream)),
            ("group", Json::str(group)),
            ("policy", Json::Object(rows.iter().map(|(k, v)| (k.clone(), value_json(v))).collect())),
        ]);
        println!("{}", doc.render());
    } else {
        print!("{}", policy_text(stream, group, &rows));
    }
    Ok(())
}

fn value_json(v: &PolicyValue) -> Json {
    match v {
        PolicyValue::Int(n) => Json::Int(*n),
        PolicyValue::Text(s) => Json::str(s),
        PolicyValue::List(items) => Json::Array(items.iter().map(|n| Json::Int(*n)).collect()),
    }
}

/// The human form: one row per option (or counter), `-` for an empty value.
pub fn policy_text(stream: &str, group: &str, rows: &[(String, PolicyValue)]) -> String {
    let mut out = format!("{stream} / {group}: policy\n\n");
    let mut t = Table::new(["option", "value"]);
    for (name, value) in rows {
        let text = value.to_string();
        t.row(vec![name.clone(), if text.is_empty() { "-".to_owned() } else { text }]);
    }
    out.push_str(&t.render());
    out
}
