//! The `jointplan` command line.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    jointplan::cli::run()
}
