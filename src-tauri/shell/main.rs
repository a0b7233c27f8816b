fn main() {
    wattbar_app::run()
}
