//! The hpc-probe command: see the library for the work.

fn main() -> std::process::ExitCode {
    match hpc_core::cli::parse_args::<hpc_probe::Args>("hpc-probe") {
        // The status of the command it ran, when that failed.
        Ok(args) => match hpc_probe::main_with(args) {
            Ok(code) if code != 0 => std::process::ExitCode::from(code),
            other => hpc_core::run_main("hpc-probe", other),
        },
        Err(code) => code,
    }
}
