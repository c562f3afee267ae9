//! The `weight-inspect` command: everything is in the library ([`weight_inspect::main`]).

fn main() -> std::process::ExitCode {
    weight_inspect::main()
}
