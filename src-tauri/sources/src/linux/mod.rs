//! Linux sources: each reader takes `root: &Path` (tests point it at a fake sysfs tree).

pub mod hwmon;
pub mod power_supply;
pub mod proc_stat;
pub mod rapl;
