//! The `jointplan` command line: a thin layer over the library's facade and layers.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
