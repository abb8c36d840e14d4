//! The hpc-merge command: see the library for the work.

fn main() -> std::process::ExitCode {
    match hpc_core::cli::parse_args::<hpc_merge::Args>("hpc-merge") {
        Ok(args) => hpc_core::run_main("hpc-merge", hpc_merge::main_with(args)),
        Err(code) => code,
    }
}
