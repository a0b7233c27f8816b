//! Inference energy in the engine: the requests in flight ([`tracker`]), the book that turns
//! them into records ([`book`]), and the proxy that sees them pass ([`proxy`]).

pub mod book;
pub mod proxy;
pub mod tracker;

pub use book::{Book, InferenceView};
pub use tracker::{Finished, InFlight, Tracker};
