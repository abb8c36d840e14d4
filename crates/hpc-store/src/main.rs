use std::process::ExitCode;

fn main() -> ExitCode {
    hpc_core::run_main("hpc-store", hpc_store::cli::main(argh::from_env()))
}
