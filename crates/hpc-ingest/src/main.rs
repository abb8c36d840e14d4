//! The hpc-ingest command: see the library for the work.

// Jobs are built on the parsing thread and freed on the database thread;
// mimalloc handles that cross-thread traffic far better than glibc's malloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    match hpc_core::cli::parse_args::<hpc_ingest::Args>("hpc-ingest") {
        Ok(args) => hpc_core::run_main("hpc-ingest", hpc_ingest::main_with(args)),
        Err(code) => code,
    }
}
