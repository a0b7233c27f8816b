//! Inference energy in the engine: what the proxy reports ([`events`]), the requests the engine
//! knows of ([`requests`]), the book that turns them into records ([`book`]), and the proxy that
//! sees them pass ([`proxy`]).

pub mod book;
pub mod events;
pub mod proxy;
pub mod requests;

pub use book::{Book, InferenceView};
pub use events::{Finished, InFlight, RecordIds, Reporter, RequestEvent};
pub use requests::Requests;
