//! The `ipu-codegen` command: flags, files, the environment and stdout, around the library's driver.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
