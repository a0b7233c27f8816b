//! What the engine serves over TCP shares one accept loop ([`server`]).

pub mod server;
