fn main() -> std::process::ExitCode {
    wattbar_tray::run()
}
