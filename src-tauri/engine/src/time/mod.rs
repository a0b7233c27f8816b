//! The engine's time: [`clock`] says what time it is. The inbox ([`crate::inbox`]), the one timed
//! wait between samples, waits on whichever clock it is given; the clock knows nothing of it.

pub mod clock;

pub use clock::own_cpu_time;
