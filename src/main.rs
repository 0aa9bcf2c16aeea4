//! The `duplexbench-tui` binary: parse, run, map the outcome to an exit code.

/// The system's allocator, counting allocations per thread (a worker reports what its runtime
/// thread allocated while streaming).
#[global_allocator]
static ALLOCATOR: duplexbench_tui::procstat::CountingAlloc =
    duplexbench_tui::procstat::CountingAlloc;

fn main() {
    std::process::exit(duplexbench_tui::app::main());
}
