//! The hpc-web command: see the library for the work.

fn main() -> std::process::ExitCode {
    match hpc_core::cli::parse_args::<hpc_web::Args>("hpc-web") {
        Ok(args) => hpc_core::run_main("hpc-web", hpc_web::main_with(args)),
        Err(code) => code,
    }
}
