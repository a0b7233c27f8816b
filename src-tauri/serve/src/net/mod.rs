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

/// Raises the soft limit on open files to the hard limit (on macOS, to the most the kernel lets
/// one process open): with the soft limit at 1024, the proxy's connections both ways, the API's
/// streams and SQLite share about 1000 descriptors. Where it cannot be raised, that is said.
pub fn raise_open_files_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(soft) => tracing::debug!("up to {soft} open files"),
        Err(e) => tracing::warn!("the limit on open files could not be raised: {e}"),
    }
}
