//! Every source on genuine captures, linked as one test binary.

mod battery_health;
mod cpu_model_vs_rapl;
mod kasa_device;
mod linux_captures;
mod macos_captures;
mod nvidia_nvml;
mod ollama_heuristic;
mod plug_captures;
mod plug_device;
mod plug_properties;
mod price_captures;
mod server_metrics_captures;
mod stall;

/// A loopback port that refuses every connection and stays this test's: bound but not listening
/// (one closed again could be taken by another program while the test runs). `listen` on the
/// socket opens it later on the same port.
pub fn refusing_port() -> (socket2::Socket, u16) {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap_or_else(|e| panic!("{e}"));
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    socket
        .bind(&loopback.into())
        .unwrap_or_else(|e| panic!("{e}"));
    let port = socket
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map(|a| a.port())
        .unwrap_or_else(|| panic!("no bound address"));
    (socket, port)
}
