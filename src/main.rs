//! `nova`: flags → the runtime → the session they describe → a front end: the RPC loop (`--mode rpc`), or the prompts on
//! the command line run once (print mode, or `--mode json`). Exit codes: 0 success, 1 a failed
//! run or startup, 2 a usage error.

use clap::Parser;
use clap::error::ErrorKind;
use nova::agent::{Prepared, Runtime};
use nova::config::{Cli, Mode};
use nova::{print, rpc};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// How long shutdown waits for stdout to take the last lines.
const WRITER_GRACE: Duration = Duration::from_secs(5);

/// The front end the command line asks for.
enum Interface {
    Rpc,
    OneShot {
        format: print::Format,
        stdin: Option<String>,
    },
}

fn main() -> ExitCode {
    // Before anything else: the launcher must still be single-threaded.
    if let Some(code) = nova::sandbox::run_if_requested() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = write!(std::io::stdout(), "{e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => return usage_error(&first_line(&e.to_string())),
    };
    let interface = match interface(&cli) {
        Ok(i) => i,
        Err(code) => return code,
    };
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
    runtime.block_on(run(cli, interface))
}

/// Pi's rule: `--mode` chooses; without it, prompts (arguments, or text piped in) mean print
/// mode. Piped stdin is read here, before anything else, because it can be what decides.
fn interface(cli: &Cli) -> Result<Interface, ExitCode> {
    let format = match cli.mode {
        Some(Mode::Rpc) if cli.print || !cli.prompts.is_empty() => {
            return Err(usage_error(
                "--mode rpc takes its prompts as commands on stdin, not as arguments or -p",
            ));
        }
        Some(Mode::Rpc) => return Ok(Interface::Rpc),
        Some(Mode::Json) => print::Format::Json,
        None => print::Format::Text,
    };
    let stdin = print::piped_stdin();
    if cli.prompts.is_empty() && stdin.is_none() {
        if cli.mode.is_none() && !cli.print {
            let usage = <Cli as clap::CommandFactory>::command().render_usage();
            let _ = writeln!(
                std::io::stderr(),
                "nova: give a prompt (nova -p \"…\") or choose an interface with --mode rpc \
                 (see nova --help)\n\n{usage}"
            );
            return Err(ExitCode::from(2));
        }
        return Err(usage_error(
            "nothing to run: give a prompt, an @file, or pipe text into nova",
        ));
    }
    Ok(Interface::OneShot { format, stdin })
}

async fn run(mut cli: Cli, interface: Interface) -> ExitCode {
    let prompt_args = std::mem::take(&mut cli.prompts);
    let (approve_flagged, verbose) = (cli.approve_flagged, cli.verbose);
    let runtime = match Runtime::load(cli, nova::config::agent_dir()).await {
        Ok(r) => r,
        Err(e) => return usage_error(&e.to_string()),
    };
    let prepared = match runtime
        .cli_session()
        .and_then(|spec| runtime.prepare(&spec))
    {
        Ok(p) => p,
        Err(e) => return usage_error(&e.to_string()),
    };
    for warning in runtime.warnings().iter().chain(&prepared.warnings) {
        let _ = writeln!(std::io::stderr(), "nova: warning: {warning}");
    }
    match interface {
        Interface::Rpc => serve_rpc(prepared).await,
        Interface::OneShot { format, stdin } => {
            let prompts = match print::prompts(&prompt_args, stdin, prepared.cwd()) {
                Ok(p) => p,
                Err(e) => return usage_error(&e),
            };
            let output = Arc::new(print::Output::new(format, verbose));
            output.json_line(prepared.header());
            let agent = prepared.start(output.clone());
            match print::run(&agent, &output, prompts, approve_flagged).await {
                Ok(print::Outcome::Succeeded) => ExitCode::SUCCESS,
                Ok(print::Outcome::Failed) => ExitCode::FAILURE,
                Err(e) => fatal(&format!("cannot install signal handlers: {e}")),
            }
        }
    }
}

async fn serve_rpc(prepared: Prepared) -> ExitCode {
    let (out, writer) = rpc::writer::spawn(std::io::stdout());
    // Signals must also release producers waiting for a client that stopped reading (and a
    // writer that can no longer write): the flag makes them stop waiting.
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(signal, out.shutdown_flag()) {
            return fatal(&format!("cannot install signal handlers: {e}"));
        }
    }
    let agent = prepared.start(Arc::new(out.clone()));
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
