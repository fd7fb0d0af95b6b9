fn main() -> std::process::ExitCode {
    ipu_codegen::cli::main()
}
