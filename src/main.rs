//! `nova --mode rpc`: flags → configuration → the RPC loop. Usage errors exit with code 2.

use clap::Parser;
use clap::error::ErrorKind;
use nova::agent::{self, Agent};
use nova::config::{self, Cli};
use nova::{context, provider, rpc};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// How long the zero-configuration start waits for a local Ollama to list its models.
const OLLAMA_DISCOVERY_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long shutdown waits for stdout to take the last lines.
const WRITER_GRACE: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = write!(std::io::stdout(), "{e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => return usage_error(&first_line(&e.to_string())),
    };
    if cli.mode.is_none() {
        let usage = <Cli as clap::CommandFactory>::command().render_usage();
        let _ = writeln!(
            std::io::stderr(),
            "nova: choose an interface with --mode rpc (see nova --help)\n\n{usage}"
        );
        return ExitCode::from(2);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NOVA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fatal(&format!("cannot start the async runtime: {e}")),
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    let client = match provider::http::client() {
        Ok(c) => c,
        Err(e) => return fatal(&format!("cannot set up HTTP: {e}")),
    };
    let discover = async |base: &str| {
        provider::http::list_ollama_models(&client, base, OLLAMA_DISCOVERY_TIMEOUT)
            .await
            .unwrap_or_default()
    };
    let config = match config::load(cli, discover).await {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let (session, session_warnings) = match agent::startup_session(&config) {
        Ok(s) => s,
        Err(e) => return usage_error(&e.to_string()),
    };
    for warning in config.warnings.iter().chain(&session_warnings) {
        let _ = writeln!(std::io::stderr(), "nova: warning: {warning}");
    }
    let date = humantime::format_rfc3339(std::time::SystemTime::now()).to_string();
    let prompt_source = context::PromptSource::load(
        &config.agent_dir,
        &config.cwd,
        config.system_prompt.as_deref(),
        config.append_system_prompt.as_deref(),
        date.get(..10).unwrap_or(&date),
    );
    let (out, writer) = rpc::writer::spawn(std::io::stdout());
    // Signals must reach a producer blocked on a client that stopped reading; tokio's own
    // handlers run on the runtime thread that such a producer holds.
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(signal, out.shutdown_flag()) {
            return fatal(&format!("cannot install signal handlers: {e}"));
        }
    }
    let agent = Agent::new(
        config,
        session,
        prompt_source,
        client,
        Arc::new(out.clone()),
    );
    let served = rpc::serve(agent.clone(), out.clone()).await;
    agent.shutdown().await;
    out.close();
    // A client that never reads leaves the writer blocked on stdout: exit without it.
    let _ = tokio::time::timeout(
        WRITER_GRACE,
        tokio::task::spawn_blocking(move || writer.join()),
    )
    .await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fatal(&format!("cannot install signal handlers: {e}")),
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("invalid arguments");
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

fn usage_error(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "nova: {message}");
    ExitCode::from(2)
}

fn fatal(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "nova: {message}");
    ExitCode::FAILURE
}
