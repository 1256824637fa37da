//! `nova`: flags → the runtime → the front end they choose, which opens the session they
//! describe: the RPC loop (`--mode rpc`), the Agent Client Protocol for editors (`--mode acp`),
//! or the prompts on the command line run once (print mode, or `--mode json`); or a command
//! that needs no session: `nova auth …` (and `nova login|logout <provider>`), `nova update
//! --models` (refreshes the model catalog), `nova install|remove|list|update --extensions` (Pi
//! packages), `nova import pi` (copies a Pi user's agent dir), `--list-models`, `--export`; or
//! `nova serve`, many sessions over sockets, and `nova attach`, stdio bridged to one of them.
//! Exit codes: 0 success, 1 a failed run or startup, 2 a usage error.

use clap::error::ErrorKind;
use nova::agent::Runtime;
use nova::config::{AttachArgs, Cli, LogFormat, Mode, ServeArgs};
use nova::frontend::{fatal, usage_error};
use nova::{acp, print, rpc};
use std::io::Write;
use std::process::ExitCode;

/// The front end the command line asks for.
enum Interface {
    Rpc,
    Acp,
    /// `--list-models [search]`.
    ListModels,
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
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(command) = nova::auth_command::parse(&args) {
        return match command {
            Ok(command) => {
                with_runtime(nova::auth_command::run(command, &nova::config::agent_dir()))
            }
            Err(code) => code,
        };
    }
    if let Some(request) = nova::login::parse(&args) {
        return match request {
            Ok(request) => login(request),
            Err(code) => code,
        };
    }
    if let Some(request) = nova::package_command::parse(&args) {
        return match request {
            Ok(request) => nova::package_command::run(request, &nova::config::agent_dir()),
            Err(code) => code,
        };
    }
    if let Some(request) = nova::update::parse(&args) {
        return match request {
            Ok(request) => with_runtime(nova::update::run(request, &nova::config::agent_dir())),
            Err(code) => code,
        };
    }
    if let Some(request) = nova::import::parse(&args) {
        return match request {
            Ok(request) => with_runtime(nova::import::run(
                request,
                &nova::import::pi_agent_dir(),
                &nova::config::agent_dir(),
            )),
            Err(code) => code,
        };
    }
    if args.first().is_some_and(|a| a == "serve") {
        return serve(&args[1..]);
    }
    if args.first().is_some_and(|a| a == "attach") {
        return attach(&args[1..]);
    }
    let cli = match parsed(Cli::parse_args(&args)) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // Exporting and listing models load no extension, so no option of one can be meant.
    if let (true, Some(flag)) = (
        cli.export.is_some() || cli.list_models.is_some(),
        cli.extension_flags.first(),
    ) {
        return usage_error(&format!("unknown option --{}; see nova --help", flag.name));
    }
    if let Some(file) = cli.export.clone() {
        let output = cli.prompts.first().map(std::path::PathBuf::from);
        return with_runtime(nova::commands::export(file, output));
    }
    let interface = match interface(&cli) {
        Ok(i) => i,
        Err(code) => return code,
    };
    init_tracing();
    with_runtime(run(cli, interface))
}

/// Logs go to stderr, at `warn` unless NOVA_LOG says otherwise.
fn init_tracing() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(log_filter())
        .init();
}

fn log_filter() -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_env("NOVA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
}

/// `--log-format json`: every line on stderr is a JSON object, nova's notes included (they
/// are always let through, as they are always written as text).
fn init_json_logs() {
    let filter = match format!("{}=info", nova::frontend::NOTE_TARGET).parse() {
        Ok(notes) => log_filter().add_directive(notes),
        Err(_) => log_filter(),
    };
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
    nova::frontend::notes_as_logs();
}

/// `nova serve [flags]`: its own flags; the sessions' configuration is the agent dir's, as
/// for every session without command-line flags.
fn serve(rest: &[String]) -> ExitCode {
    let args = match sub_args::<ServeArgs>("nova serve", rest) {
        Ok(args) => args,
        Err(code) => return code,
    };
    let cli = match parsed(Cli::parse_args(&[])) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match args.log_format {
        LogFormat::Text => init_tracing(),
        LogFormat::Json => init_json_logs(),
    }
    with_runtime(async move {
        match Runtime::load(cli, nova::config::agent_dir()).await {
            Ok(runtime) => nova::serve::run(runtime, args).await,
            Err(e) => usage_error(&e.to_string()),
        }
    })
}

/// `nova attach …`: a bridge to a served session; no runtime of sessions of its own.
fn attach(rest: &[String]) -> ExitCode {
    let args = match sub_args::<AttachArgs>("nova attach", rest) {
        Ok(args) => args,
        Err(code) => return code,
    };
    init_tracing();
    with_runtime(nova::serve::bridge::run(args))
}

/// Pi's rule: `--mode` chooses; without it, prompts (arguments, or text piped in) mean print
/// mode. Piped stdin is read here, before anything else, because it can be what decides.
fn interface(cli: &Cli) -> Result<Interface, ExitCode> {
    if cli.list_models.is_some() {
        // Answered from the registry once it is loaded; no session, no prompt.
        return Ok(Interface::ListModels);
    }
    let format = match cli.mode {
        Some(Mode::Rpc) if cli.print || !cli.prompts.is_empty() => {
            return Err(usage_error(
                "--mode rpc takes its prompts as commands on stdin, not as arguments or -p",
            ));
        }
        Some(Mode::Rpc) => return Ok(Interface::Rpc),
        Some(Mode::Acp) if cli.print || !cli.prompts.is_empty() => {
            return Err(usage_error(
                "--mode acp takes its prompts from the editor, not as arguments or -p",
            ));
        }
        Some(Mode::Acp) => return Ok(Interface::Acp),
        Some(Mode::Json) => print::Format::Json,
        Some(Mode::Text) | None => print::Format::Text,
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
    let args = std::mem::take(&mut cli.prompts);
    let (approve_flagged, verbose) = (cli.approve_flagged, cli.verbose);
    let search = cli.list_models.take();
    let runtime = match Runtime::load(cli, nova::config::agent_dir()).await {
        Ok(r) => r,
        Err(e) => return usage_error(&e.to_string()),
    };
    match interface {
        Interface::Rpc => rpc::run(runtime).await,
        Interface::Acp => acp::run(runtime).await,
        Interface::ListModels => {
            nova::commands::list_models(&runtime, search.as_deref().unwrap_or_default())
        }
        Interface::OneShot { format, stdin } => {
            let options = print::Options {
                format,
                verbose,
                approve_flagged,
                args,
                stdin,
            };
            print::run(runtime, options).await
        }
    }
}

/// `nova login`/`nova logout`: no session, only auth.json.
fn login(request: nova::login::Request) -> ExitCode {
    with_runtime(nova::login::run(request, &nova::config::agent_dir()))
}

/// Runs a command that needs no session on a runtime of its own.
fn with_runtime(command: impl Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(command),
        Err(e) => fatal(&format!("cannot start the async runtime: {e}")),
    }
}

/// A subcommand's own flags, parsed as the whole command line is.
fn sub_args<T: clap::Parser>(name: &str, rest: &[String]) -> Result<T, ExitCode> {
    parsed(T::try_parse_from(
        std::iter::once(name).chain(rest.iter().map(String::as_str)),
    ))
}

/// `--help` and `--version` print and succeed; any other parse failure is a usage error
/// naming its first line (clap's further lines repeat the usage).
fn parsed<T>(result: Result<T, clap::Error>) -> Result<T, ExitCode> {
    result.map_err(|e| {
        if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
            let _ = write!(std::io::stdout(), "{e}");
            ExitCode::SUCCESS
        } else {
            usage_error(&first_line(&e.to_string()))
        }
    })
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("invalid arguments");
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}
