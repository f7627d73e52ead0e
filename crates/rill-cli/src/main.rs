//! `rill`: operator tools for Redis Streams consumer groups — pending entries, dead letters,
//! groups, a live tail — and two demos of the reliable consumer loop. Works against rill,
//! Redis or a Redis Cluster (`--cluster`), through the `rill-worker` crate.

mod commands;
mod dead_letters;
mod demo;
mod output;
mod policies;
mod top;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use rill_worker::{Connection, Target};

#[derive(Debug, Parser)]
#[command(name = "rill", version, about = "Inspect and repair Redis Streams consumer groups")]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct Global {
    /// Server URL (default: the RILL_URL environment variable, else REDIS_URL, else
    /// redis://127.0.0.1:6379). The demos start a rill-server of their own when none is given.
    #[arg(long, global = true)]
    url: Option<String>,
    /// Treat --url as a seed node of a Redis Cluster.
    #[arg(long, global = true)]
    cluster: bool,
    /// Machine-readable output (one JSON document; `tail` prints one per line; a demo prints
    /// its summary figures only).
    #[arg(long, global = true)]
    json: bool,
}

const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

impl Global {
    /// The server named by `--url`, else by `RILL_URL`, else by `REDIS_URL` (`None`: none).
    fn given_url(&self) -> Option<String> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        self.url.clone().or_else(|| env("RILL_URL")).or_else(|| env("REDIS_URL"))
    }

    fn url(&self) -> String {
        self.given_url().unwrap_or_else(|| DEFAULT_URL.to_owned())
    }

    fn target(&self) -> Target {
        let url = self.url();
        if self.cluster {
            Target::Cluster(vec![url])
        } else {
            Target::Single(url)
        }
    }

    /// A connection, or an error that names the address tried and how to give another.
    async fn connect(&self) -> Result<Connection, Box<dyn std::error::Error>> {
        self.target().connect(None).await.map_err(|e| {
            format!("could not connect to {} ({e}); name the server with --url or RILL_URL", self.url()).into()
        })
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pending entries of a group: summary, per consumer, and entries oldest first.
    Pending {
        stream: String,
        group: String,
        /// Entries to list.
        #[arg(long, default_value_t = 20)]
        count: usize,
    },
    /// Dead letters of a stream (kept in `<stream>:dlq`, or `{<stream>}:dlq` for untagged names).
    ///
    /// A dead-letter stream may also hold letters of other streams (`ticks` and `{ticks}` share
    /// `{ticks}:dlq`): list and show print each letter's source; replay and purge act only on
    /// the letters whose provenance names STREAM and refuse named IDs of other streams.
    Dlq {
        #[command(subcommand)]
        action: DlqAction,
    },
    /// Follow new entries of a stream; with --group, show where each stands in that group.
    Tail {
        stream: String,
        /// Show, for each entry, whether this group has delivered it, to whom, and how often.
        #[arg(long)]
        group: Option<String>,
        /// Also print the last N existing entries first.
        #[arg(long, default_value_t = 0)]
        history: usize,
        /// Stop after N entries (default: follow until interrupted).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Consumer groups of a stream: consumers, pending, lag.
    Groups { stream: String },
    /// A group's server-side policy (rill's RILL.GROUP: MAXDELIVER, DEADLETTER, ACKWAIT,
    /// BACKOFF). Redis has no policies: these commands say so and change nothing.
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
    },
    /// A live view of a rill server's streams and groups: length, input rate, lag (entries and
    /// age), pending, oldest pending, delivery rate, dead letters. Needs rill (RILL.METRICS).
    Top {
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 2.0)]
        interval: f64,
        /// Stop after N refreshes (default: until interrupted).
        #[arg(long)]
        count: Option<usize>,
    },
    /// Demos of the reliable consumer loop.
    Demo {
        #[command(subcommand)]
        which: DemoKind,
    },
}

#[derive(Debug, Subcommand)]
enum DlqAction {
    /// List dead letters, oldest first.
    List {
        stream: String,
        #[arg(long, default_value_t = 50)]
        count: usize,
        /// Dead-letter stream name, if not the default.
        #[arg(long)]
        dlq: Option<String>,
    },
    /// One dead letter with all its fields and provenance.
    Show {
        stream: String,
        id: String,
        #[arg(long)]
        dlq: Option<String>,
    },
    /// Re-add dead letters of STREAM to STREAM, the source their provenance names; each is
    /// deleted only after its XADD succeeded.
    Replay {
        stream: String,
        /// IDs to replay (default: every dead letter of STREAM).
        ids: Vec<String>,
        #[arg(long)]
        dlq: Option<String>,
    },
    /// Delete dead letters of STREAM.
    Purge {
        stream: String,
        /// IDs to delete.
        ids: Vec<String>,
        /// Delete all dead letters of STREAM (letters of other streams and entries without
        /// provenance stay).
        #[arg(long, conflicts_with = "ids")]
        all: bool,
        #[arg(long)]
        dlq: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum PolicyAction {
    /// Every option of the group's policy, set or default.
    Get { stream: String, group: String },
    /// Sets options, all or none: `rill policy set s g MAXDELIVER 5 ACKWAIT 30000 BACKOFF 100,1000`.
    Set {
        stream: String,
        group: String,
        /// OPTION VALUE pairs.
        #[arg(required = true, num_args = 2.., value_names = ["OPTION", "VALUE"])]
        pairs: Vec<String>,
    },
    /// Puts options back to their defaults.
    Unset {
        stream: String,
        group: String,
        #[arg(required = true)]
        options: Vec<String>,
    },
    /// The options and the policy's counters (delivered, handed-back, dead-lettered, ...).
    Info { stream: String, group: String },
}

#[derive(Debug, Subcommand)]
enum DemoKind {
    /// The market-tick story: a crashed pod, a rescue, poison ticks in the dead-letter stream.
    /// Keys: rill-demo:{ticks}, rill-demo:{ticks}:dlq.
    Ticker {
        #[command(flatten)]
        args: DemoArgs,
        /// Tell the story with a rill server's group policy (RILL.GROUP MAXDELIVER 3 ACKWAIT
        /// 1000): the consumers only read `>`, XACK and RILL.NACK; no XAUTOCLAIM, no
        /// client-side dead letters. Needs rill (an embedded one without --url).
        #[arg(long)]
        server_policies: bool,
    },
    /// Order workers that crash and restart, a poison order, and safe trimming.
    /// Keys: rill-demo:{orders}, rill-demo:{orders}:dlq, rill-demo:{orders}:fulfilled.
    Orders {
        #[command(flatten)]
        args: DemoArgs,
    },
}

#[derive(Debug, Args)]
struct DemoArgs {
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Delete the demo's keys if they exist (a demo refuses to run over existing keys).
    #[arg(long)]
    force: bool,
}

impl DemoArgs {
    fn options(&self, json: bool) -> demo::DemoOptions {
        demo::DemoOptions { seed: self.seed, force: self.force, json }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rill: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rill: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    let g = &cli.global;
    match cli.command {
        Command::Pending { stream, group, count } => {
            commands::pending(&mut g.connect().await?, &stream, &group, count, g.json).await?
        }
        Command::Groups { stream } => commands::groups(&mut g.connect().await?, &stream, g.json).await?,
        Command::Top { interval, count } => {
            if !(interval.is_finite() && interval > 0.0) {
                return Err("--interval must be a positive number of seconds".into());
            }
            let interval = std::time::Duration::from_secs_f64(interval);
            top::run(&mut g.connect().await?, &g.url(), interval, count, g.json).await?
        }
        Command::Policy { action } => {
            let mut conn = g.connect().await?;
            match action {
                PolicyAction::Get { stream, group } => {
                    policies::show(&mut conn, &stream, &group, policies::View::Get, g.json).await?
                }
                PolicyAction::Info { stream, group } => {
                    policies::show(&mut conn, &stream, &group, policies::View::Info, g.json).await?
                }
                PolicyAction::Set { stream, group, pairs } => {
                    policies::set(&mut conn, &stream, &group, &pairs, g.json).await?
                }
                PolicyAction::Unset { stream, group, options } => {
                    policies::unset(&mut conn, &stream, &group, &options, g.json).await?
                }
            }
        }
        Command::Tail { stream, group, history, limit } => {
            commands::tail(&g.target(), &stream, group.as_deref(), history, limit, g.json).await?
        }
        Command::Dlq { action } => {
            let mut conn = g.connect().await?;
            match action {
                DlqAction::List { stream, count, dlq } => {
                    let dlq = dead_letters::dlq_name(&stream, dlq)?;
                    dead_letters::dlq_list(&mut conn, &stream, &dlq, count, g.json).await?
                }
                DlqAction::Show { stream, id, dlq } => {
                    let dlq = dead_letters::dlq_name(&stream, dlq)?;
                    dead_letters::dlq_show(&mut conn, &stream, &dlq, &id, g.json).await?
                }
                DlqAction::Replay { stream, ids, dlq } => {
                    let dlq = dead_letters::dlq_name(&stream, dlq)?;
                    dead_letters::dlq_replay(&mut conn, &stream, &dlq, &ids, g.json).await?
                }
                DlqAction::Purge { stream, ids, all, dlq } => {
                    let dlq = dead_letters::dlq_name(&stream, dlq)?;
                    dead_letters::dlq_purge(&mut conn, &stream, &dlq, &ids, all, g.json).await?
                }
            }
        }
        Command::Demo { which } => {
            let server = match &g.given_url() {
                Some(_) => None,
                None => Some(demo::EmbeddedServer::start()?),
            };
            let target = match &server {
                Some(s) => Target::Single(s.url()),
                None => g.target(),
            };
            let (DemoKind::Ticker { args, .. } | DemoKind::Orders { args }) = &which;
            let options = args.options(g.json);
            if let Some(s) = &server {
                options.story().say(s.started());
            }
            let summary = match which {
                DemoKind::Ticker { server_policies: true, .. } => demo::ticker_policies::run(&target, options).await?,
                DemoKind::Ticker { .. } => demo::ticker::run(&target, options).await?,
                DemoKind::Orders { .. } => demo::orders::run(&target, options).await?,
            };
            if g.json {
                println!("{}", summary.render());
            }
        }
    }
    Ok(())
}
