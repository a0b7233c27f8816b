//! The engine's time: [`clock`] says what time it is, [`inbox`] is the one timed wait between
//! samples. The clock knows nothing of the inbox; the inbox waits on whichever clock it is given.

pub mod clock;
pub mod inbox;

pub use clock::own_cpu_time;
