//! The `duplexbench-tui` binary: parse, run, map the outcome to an exit code.

fn main() {
    std::process::exit(duplexbench_tui::app::main());
}
