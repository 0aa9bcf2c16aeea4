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
    crate::sys::survive_file_size_limit();
    let cli = match Cli::parse_args() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() { EXIT_ERROR } else { 0 };
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        // A signal while the run was starting: it says so and exits as a cancelled run.
        Err(err) if err.is::<crate::conductor::CancelledAtStart>() => {
            let _ = writeln!(std::io::stderr(), "{err:#}");
            err.downcast_ref::<crate::conductor::CancelledAtStart>()
                .map_or(EXIT_ERROR, |c| 128 + c.signal)
        }
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
        Some(Command::Sweep(args)) => crate::sweep::run(&args, crate::secret::command_line()),
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
        Some(Command::Man(args)) => print_man_page(&args),
        Some(Command::Worker(args)) => worker::run(&args).map(|()| 0),
    }
}

fn run(args: &RunArgs) -> Result<i32> {
    let tui = !args.no_tui && crate::ui::dashboard_terminal();
    let plan = options::validate(args, crate::secret::command_line(), tui)?;
    // Before anything is started or written: a limit too low for the layout is a start-up error.
    sys::open_files::ensure(&sys::open_files::Layout::of(&plan.settings))?;
    conductor::run(plan, args.exit_on_finish)
}

/// `completions SHELL`: the completion script on stdout.
fn print_completions(shell: clap_complete::Shell) -> Result<i32> {
    let mut command = without_hidden_subcommands(<Cli as clap::CommandFactory>::command());
    let name = command.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, name.clone(), &mut script);
    if shell == clap_complete::Shell::Bash {
        script = mend_bash_labels(&script, &name);
    }
    write_stdout(&script)
}

/// The command as completions offer it: clap_complete offers hidden subcommands too (`worker`,
/// which only `run` starts), so the top level is rebuilt with its own arguments and only the
/// subcommands a user runs.
fn without_hidden_subcommands(full: clap::Command) -> clap::Command {
    let mut lean = clap::Command::new(env!("CARGO_PKG_NAME"))
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .groups(full.get_groups().cloned())
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    if let Some(about) = full.get_about() {
        lean = lean.about(about.clone());
    }
    lean
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

/// `man`: a man page (roff) on stdout — the top-level one (the default run's options are the
/// command's own, so it lists every option of `run` and names the subcommands), or the page of
/// the subcommand named — or, with `--dir`, every page written into that folder, each under the
/// name the top-level page refers to it by (`duplexbench-tui-sweep.1`).
fn print_man_page(args: &crate::cli::ManArgs) -> Result<i32> {
    let pages = man_pages();
    if let Some(dir) = &args.dir {
        let written = std::fs::create_dir_all(dir).and_then(|()| {
            pages
                .into_iter()
                .try_for_each(|page| page.generate_to(dir).map(drop))
        });
        written.map_err(|err| {
            anyhow::anyhow!("cannot write the man pages into {}: {err}", dir.display())
        })?;
        println!(
            "man pages written to {0} (read one with `man -l {0}/duplexbench-tui-sweep.1`, or all with `man` once {0} is a man1 folder on MANPATH)",
            dir.display()
        );
        return Ok(0);
    }
    let file_of = |name: &str| format!("duplexbench-tui-{name}.1");
    let index = match &args.subcommand {
        None => Some(0),
        Some(name) => pages.iter().position(|p| p.get_filename() == file_of(name)),
    };
    let Some(index) = index else {
        let names: Vec<String> = pages
            .iter()
            .skip(1)
            .filter_map(|p| {
                let file = p.get_filename();
                Some(
                    file.strip_prefix("duplexbench-tui-")?
                        .strip_suffix(".1")?
                        .to_string(),
                )
            })
            .collect();
        anyhow::bail!(
            "no subcommand `{}`: the pages are the top-level one (`man`) and {}",
            args.subcommand.as_deref().unwrap_or_default(),
            names.join(", ")
        );
    };
    let page = &pages[index];
    let mut roff = Vec::new();
    page.render(&mut roff)?;
    write_stdout(&roff)
}

/// The man pages: the top-level one first, then one for each subcommand a user runs, named as
/// the top-level page refers to it (`duplexbench-tui-sweep`), each with the program's name and version as its source.
fn man_pages() -> Vec<clap_mangen::Man> {
    let mut command = <Cli as clap::CommandFactory>::command().disable_help_subcommand(true);
    command.build();
    let source = format!("duplexbench-tui {}", env!("CARGO_PKG_VERSION"));
    let subs = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| clap_mangen::Man::new(c.clone()).source(source.clone()))
        .collect::<Vec<_>>();
    std::iter::once(clap_mangen::Man::new(command))
        .chain(subs)
        .collect()
}

/// Writes to stdout; a closed stdout (piped into `head`) is not an error.
fn write_stdout(bytes: &[u8]) -> Result<i32> {
    let _ = std::io::stdout().write_all(bytes);
    Ok(0)
}
