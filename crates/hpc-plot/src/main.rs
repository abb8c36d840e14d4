//! The hpc-plot command: see the library for the work.

fn main() -> std::process::ExitCode {
    match hpc_core::cli::parse_args::<hpc_plot::Args>("hpc-plot") {
        Ok(args) => hpc_core::run_main("hpc-plot", hpc_plot::main_with(args)),
        Err(code) => code,
    }
}
