use std::process::ExitCode;

fn main() -> ExitCode {
    let args: hpc_probe::Args = match hpc_core::cli::parse_args("hpc-probe") {
        Ok(a) => a,
        Err(code) => return code,
    };
    let result = hpc_probe::Opts::from_args(args, |k| std::env::var(k).ok())
        .and_then(|o| hpc_probe::run(&o));
    match result {
        Ok(code) if code != 0 => ExitCode::from(code),
        other => hpc_core::run_main("hpc-probe", other),
    }
}
