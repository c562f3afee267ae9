fn main() -> std::process::ExitCode {
    weight_inspect::cli::main()
}
