//! The `openbot` command.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    // Dropped last: traces still queued are exported before the process ends.
    let _telemetry = match openbot_server::telemetry::init(&args.telemetry()) {
        Ok(guard) => guard,
        Err(err) => {
            eprintln!("openbot: {err}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("openbot: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::dispatch(args)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("openbot: {err:#}");
            ExitCode::FAILURE
        }
    }
}
