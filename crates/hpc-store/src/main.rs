//! The hpc-store command: see the library for the work.

fn main() -> std::process::ExitCode {
    match hpc_core::cli::parse_args::<hpc_store::Args>("hpc-store") {
        Ok(args) => hpc_core::run_main("hpc-store", hpc_store::main_with(args)),
        Err(code) => code,
    }
}
