//! The hpc-model command: see the library for the work.

fn main() -> std::process::ExitCode {
    match hpc_core::cli::parse_args::<hpc_model::Args>("hpc-model") {
        Ok(args) => hpc_core::run_main("hpc-model", hpc_model::main_with(args)),
        Err(code) => code,
    }
}
