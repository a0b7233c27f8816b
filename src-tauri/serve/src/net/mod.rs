//! What the engine serves over TCP shares one accept loop ([`server`]).

pub mod server;

/// The innermost reason of an error chain: hyper's own error says only "client error
/// (Connect)", its source "Connection refused".
pub fn innermost_reason(e: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost = e;
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    innermost.to_string()
}
