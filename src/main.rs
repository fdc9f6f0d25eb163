//! The `fanout` binary: everything lives in the library; see `fanout --help`.

fn main() -> std::process::ExitCode {
    fanout::cli::main()
}
