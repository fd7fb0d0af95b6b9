//! The `ipu-codegen` command: flags, files, the environment and stdout, around the library's driver.

mod cli;

fn main() -> std::process::ExitCode {
    // Output piped into a reader that stops early (`| head`) ends the process quietly, as for any
    // Unix tool, instead of a panic on the failed write.
    #[cfg(unix)]
    // SAFETY: restoring the default action of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::main()
}
