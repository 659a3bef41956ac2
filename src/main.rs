use clap::Parser;
use jointplan::cli::{Cli, Command};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Synth(args) => match jointplan::cli::synth::run(&args) {
            Ok(summary) => {
                println!("{summary}");
                std::process::ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("error: {err}");
                std::process::ExitCode::from(2)
            }
        },
    }
}
