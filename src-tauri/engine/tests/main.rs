//! The engine's crate from outside: real captures through the chain, the lock, the vendored UI files. `dst.rs` stays a binary of its own: it sets the process's time zone.

mod celeron;
mod lock;
mod ui_format;
mod vendor;
