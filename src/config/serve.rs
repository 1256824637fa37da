//! `nova serve`'s flags.

use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "nova serve",
    about = "Serves many sessions from one process: nova's RPC (and its sessions) over \
             WebSocket, on a Unix socket and/or loopback TCP.",
    after_help = "Examples:\n  nova serve --socket /run/user/1000/nova.sock --root ~/src\n  \
                  NOVA_SERVE_TOKEN=… nova serve --listen 127.0.0.1:7878 --root ~/src"
)]
pub struct ServeArgs {
    /// Listen on a Unix socket, created with mode 0600: who can open the file may use the
    /// server, no token needed.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Listen on TCP, a loopback address unless --unsafe-listen-anywhere. Every request needs
    /// the bearer token (NOVA_SERVE_TOKEN, or a random one written to --token-file).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,
    /// Allow --listen on an address other than loopback. Unsafe without TLS in front: the
    /// token and every record would cross the network in clear.
    #[arg(long)]
    pub unsafe_listen_anywhere: bool,
    /// A directory sessions may be opened in, with everything below it (repeatable). Without
    /// one, the directory nova serve starts in.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// An Origin a WebSocket upgrade (or any request) may come from (repeatable). A request
    /// carrying any other Origin is refused, so a web page cannot drive a local agent;
    /// requests without one (programs, not browsers) are let through.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Where the generated token is written (mode 0600) when NOVA_SERVE_TOKEN is not set.
    /// Default: serve-token in the agent dir.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Close a session that has had no client attached for this many seconds (and no run in
    /// flight); its file is kept, to be resumed. Without it, sessions stay until closed.
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout: Option<u64>,
    /// On SIGTERM or SIGINT, how many seconds runs in flight may take to end before they are
    /// aborted.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub grace: u64,
    /// How stderr is written: `text` for people, or `json`, one JSON object a line (tracing's
    /// records at NOVA_LOG's level, and the server's own notes), for a log collector.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "nova attach",
    about = "Bridges stdin and stdout to a session inside `nova serve`, so a program that spawns \
             `pi --mode rpc` drives a served session by spawning this instead.",
    after_help = "Examples:\n  nova attach /run/user/1000/nova.sock --new --cwd ~/src/app\n  \
                  NOVA_SERVE_TOKEN=… nova attach http://127.0.0.1:7878 --session 0193…"
)]
pub struct AttachArgs {
    /// The server: a Unix socket's path, or http://HOST:PORT (then NOVA_SERVE_TOKEN is sent).
    pub target: String,
    /// A live session's id.
    #[arg(
        long,
        value_name = "ID",
        conflicts_with = "new",
        required_unless_present = "new"
    )]
    pub session: Option<String>,
    /// Open a new session (in --cwd) and attach to it.
    #[arg(long, requires = "cwd")]
    pub new: bool,
    /// The new session's directory (absolute; under one of the server's --root).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// The new session's model, provider/id.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
}
