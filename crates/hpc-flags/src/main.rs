//! The hpc-flags command: see the library for the work.

fn main() -> std::process::ExitCode {
    match hpc_core::cli::parse_args::<hpc_flags::Args>("hpc-flags") {
        Ok(args) => hpc_core::run_main("hpc-flags", hpc_flags::main_with(args)),
        Err(code) => code,
    }
}
