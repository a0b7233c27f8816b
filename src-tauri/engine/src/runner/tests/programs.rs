//! Energy per program through the runner: a GPU's energy goes to the processes its source says
//! used it, beside the CPU domain's split.

use super::*;
use wattbar_core::programs::DeviceUse;
use wattbar_core::{Domain, Reading};

/// A GPU drawing 50 W that says `pid` used all of it, or that it cannot tell.
struct Gpu {
    pid: Option<u32>,
}

impl Source for Gpu {
    fn id(&self) -> &str {
        "nvml"
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let mut r = Reading::power(Domain::Gpu, Watts(50.0), "nvml", Quality::Measured, at);
        r.device = Some("0".into());
        Ok(vec![r])
    }
    fn process_use(&mut self) -> Vec<DeviceUse> {
        vec![DeviceUse {
            source: "nvml".into(),
            device: "0".into(),
            by_pid: self.pid.map(|p| (p, 100.0)).into_iter().collect(),
            none_because: self.pid.is_none().then(|| "GPU 0 cannot tell".to_string()),
        }]
    }
}

fn engine_with(gpu: Gpu) -> EngineHandle {
    let trace = parse_trace("t,watts,domain\n0,60,cpu\n").unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace)), Box::new(gpu)];
    start(Chain::new(sources), config(Preferences::default()))
}

#[tokio::test(start_paused = true)]
async fn a_gpus_energy_goes_to_the_process_its_source_says_used_it() {
    let engine = engine_with(Gpu {
        pid: Some(std::process::id()),
    });
    // This test's own process is the one on the GPU.
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_else(|e| panic!("{e}"));
    let me = comm.trim();
    let mut rx = engine.subscribe();
    let p = wait_for(&mut rx, |p| {
        p.programs
            .programs
            .iter()
            .any(|f| f.program == me && f.gpu_watts.is_some_and(|w| w > 0.0))
    })
    .await;
    let v = &p.programs;
    let mine = v.programs.iter().find(|f| f.program == me);
    let gpu_watts = mine.and_then(|f| f.gpu_watts).unwrap_or(f64::NAN);
    assert!((gpu_watts - 50.0).abs() < 1e-9, "{v:?}");
    assert_eq!(v.gpu_note, None);
    assert_eq!(mine.and_then(|f| f.quality), Some(Quality::Measured));
    // The parts still close on the headline: 60 W CPU + 50 W GPU.
    let sum: f64 = v.programs.iter().filter_map(|f| f.watts).sum::<f64>()
        + v.idle_watts.unwrap_or(f64::NAN)
        + v.unattributed_watts.unwrap_or(f64::NAN);
    assert!((sum - 110.0).abs() < 1e-9, "{sum} W: {v:?}");
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_gpu_that_cannot_tell_its_processes_is_unattributed_with_the_reason() {
    let engine = engine_with(Gpu { pid: None });
    let mut rx = engine.subscribe();
    let p = wait_for(&mut rx, |p| p.programs.at.is_some()).await;
    let v = &p.programs;
    assert!(v.programs.iter().all(|f| f.gpu_watts == Some(0.0)), "{v:?}");
    assert!(
        v.unattributed_watts.is_some_and(|w| w >= 50.0 - 1e-9),
        "{v:?}"
    );
    let note = v.gpu_note.clone().unwrap_or_default();
    assert!(note.contains("GPU 0 cannot tell"), "{note}");
    engine.stop();
}
