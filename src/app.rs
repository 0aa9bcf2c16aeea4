//! The program as a table of contents: parse the command line, validate it, run the chosen
//! command, map the outcome to an exit code (docs/exit-codes.md).

use crate::cli::{Cli, Command, RunArgs};
use crate::{conductor, conform, mock, options, worker};
use anyhow::Result;
use clap::Parser;
use std::io::{IsTerminal as _, Write as _};

/// Exit code for usage and start-up errors.
pub const EXIT_ERROR: i32 = 2;

/// Runs the program with the process's arguments and returns its exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
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
        Some(Command::Report(args)) => crate::report::command::run(&args),
        Some(Command::Worker(args)) => worker::run(&args).map(|()| 0),
    }
}

fn run(args: &RunArgs) -> Result<i32> {
    // The dashboard needs a terminal; anything else (a pipe, a file, CI) runs headless.
    let tui = !args.no_tui && std::io::stdout().is_terminal();
    let plan = options::validate(args, command_line(), tui)?;
    conductor::run(plan, args.exit_on_finish)
}

/// The command line as typed, quoted where a word needs it.
fn command_line() -> String {
    std::env::args()
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
