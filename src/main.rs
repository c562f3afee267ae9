fn main() -> std::process::ExitCode {
    weight_inspect::main()
}
