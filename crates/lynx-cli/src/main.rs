//! `lynx`: benchmark how a device runs the public PyTorch stack.
//!
//! The only crate that prints. Exit codes: 0 success, 1 a run that failed, 2 bad input (unknown
//! device, missing or malformed suite or model file, bad arguments), 128 + N for a run stopped by
//! signal N.

/// `println!`, `print!` and `eprintln!` that never panic where nobody reads any more (a closed
/// pipe: `lynx run … | head`). What lynx prints is for its reader; a run, a collection or a site
/// goes on to its end and its own exit code whoever stopped listening, its files the record.
macro_rules! sayln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}
macro_rules! esayln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
mod commands;
mod output;
mod progress;

use clap::Parser;
use lynx_runner::{libtorch, RunError};
use std::process::ExitCode;

/// An error in what the user gave: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadInput(String);

/// Exit with this code, having said why already.
#[derive(Debug, thiserror::Error)]
#[error("exit {0}")]
struct Exit(u8);

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if error.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            return ExitCode::from(2);
        }
        Err(error) if error.use_stderr() => {
            // One line naming the argument and what is wrong with it, as for every bad input:
            // clap's first paragraph (what was wrong, and the values it takes where it lists them).
            let rendered = error.render().to_string();
            let first: Vec<&str> = rendered.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
            esayln!("lynx: {}", lynx_report::escape::inert(&first.join(" ")));
            return ExitCode::from(2);
        }
        Err(help_or_version) => {
            let _ = help_or_version.print();
            return ExitCode::SUCCESS;
        }
    };
    // Before any device query, so libtorch sees the GPUs its backends drive.
    libtorch::load_gpu_backends();
    match commands::dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.downcast_ref::<Exit>().is_some() => {
            ExitCode::from(error.downcast_ref::<Exit>().map_or(1, |exit| exit.0))
        }
        Err(error) => {
            // One line, whatever the input it names held (control characters, bidi overrides).
            esayln!("lynx: error: {}", lynx_report::escape::inert(&format!("{error:#}")));
            let bad_input = error.downcast_ref::<BadInput>().is_some()
                || error.downcast_ref::<RunError>().is_some_and(RunError::is_bad_input);
            ExitCode::from(if bad_input { 2 } else { 1 })
        }
    }
}
