use std::process::ExitCode;

fn main() -> ExitCode {
    match hpc_core::cli::parse_args("hpc-store") {
        Ok(args) => hpc_core::run_main("hpc-store", hpc_store::main_with(args)),
        Err(code) => code,
    }
}
