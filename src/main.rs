//! The `jointplan` command line: a thin layer over the library's facade and layers.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cli;

/// The allocator of the command line (the `mimalloc` feature, on by default): the plan of a
/// large model allocates and frees millions of small values across threads, where
/// mimalloc spends markedly less time than the system allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::run()
}
