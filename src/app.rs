//! The program as a table of contents: parse the command line, validate it, run the chosen
//! command, map the outcome to an exit code (docs/exit-codes.md).

use crate::cli::{Cli, Command, RunArgs};
use crate::{conductor, conform, mock, options, sys, worker};
use anyhow::Result;
use std::io::Write as _;

/// Exit code for usage and start-up errors.
pub const EXIT_ERROR: i32 = 2;

/// Runs the program with the process's arguments and returns its exit code.
pub fn main() -> i32 {
    let cli = match Cli::parse_args() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() { EXIT_ERROR } else { 0 };
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            // A closed stderr is not worth a panic: the exit code still says it.
            let _ = writeln!(std::io::stderr(), "Error: {err:#}");
            EXIT_ERROR
        }
    }
}

fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        None => run(&cli.run),
        Some(Command::Run(args)) => run(&args),
        Some(Command::Mock(args)) => mock::run(&args).map(|()| 0),
        Some(Command::Conform(args)) => conform::run(&args),
        Some(Command::Sweep(args)) => crate::sweep::run(&args, command_line()),
        // A sweep's folder renders as a sweep; any other as a run.
        Some(Command::Report(args))
            if crate::sweep::is_sweep(&args.run)
                || args.vs.as_deref().is_some_and(crate::sweep::is_sweep) =>
        {
            crate::sweep::report(&args)
        }
        Some(Command::Report(args)) => crate::report::command::run(&args),
        Some(Command::Merge(args)) => crate::merge::run(&args),
        Some(Command::Completions(args)) => print_completions(args.shell),
        Some(Command::Man) => print_man_page(),
        Some(Command::Worker(args)) => worker::run(&args).map(|()| 0),
    }
}

fn run(args: &RunArgs) -> Result<i32> {
    let tui = !args.no_tui && crate::ui::dashboard_terminal();
    let plan = options::validate(args, command_line(), tui)?;
    // Before anything is started or written: a limit too low for the layout is a start-up error.
    sys::open_files::ensure(&sys::open_files::Layout::of(&plan.settings))?;
    conductor::run(plan, args.exit_on_finish)
}

/// `completions SHELL`: the completion script on stdout.
fn print_completions(shell: clap_complete::Shell) -> Result<i32> {
    let mut command = <Cli as clap::CommandFactory>::command();
    let name = command.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, name.clone(), &mut script);
    if shell == clap_complete::Shell::Bash {
        script = mend_bash_labels(&script, &name);
    }
    write_stdout(&script)
}

/// clap_complete's bash script spells a subcommand's state two ways when the program's name
/// has a hyphen (clap issue #6421): its loop sets `duplexbench__tui__subcmd__run`, its `case`
/// arms read `duplexbench__subcmd__tui__subcmd__run`, so no option after a subcommand ever
/// completed. The arms are given the loop's spelling.
fn mend_bash_labels(script: &[u8], name: &str) -> Vec<u8> {
    let sep = "__subcmd__";
    let as_loop = format!("{}{sep}", name.replace('-', "__"));
    let as_arms = format!("{}{sep}", name.replace('-', sep));
    String::from_utf8_lossy(script)
        .replace(&as_arms, &as_loop)
        .into_bytes()
}

/// `man`: the man page (roff) on stdout. The default run's options are the command's own, so
/// the one page lists every option of `run` and names the subcommands.
fn print_man_page() -> Result<i32> {
    let mut page = Vec::new();
    clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut page)?;
    write_stdout(&page)
}

/// Writes to stdout; a closed stdout (piped into `head`) is not an error.
fn write_stdout(bytes: &[u8]) -> Result<i32> {
    let _ = std::io::stdout().write_all(bytes);
    Ok(0)
}

/// The command line as typed, quoted where a word needs it, its secrets redacted.
fn command_line() -> String {
    let args: Vec<String> = std::env::args().collect();
    crate::secret::redact_args(&args)
        .into_iter()
        .map(|arg| {
            if !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
            {
                arg
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
