//! Inference energy in the engine: what the proxy (in `wattbar-serve`) reports ([`events`], sent
//! by [`reporter`]), the requests the engine knows of ([`requests`]) and the book that turns them
//! into records ([`book`]).

pub mod book;
pub mod events;
pub mod reporter;
pub mod requests;

pub use book::{Book, InferenceView};
pub use events::{Finished, RecordIds, RequestEvent};
pub use reporter::{InFlight, Reporter};
pub use requests::Requests;
