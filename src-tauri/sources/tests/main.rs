//! Every source on genuine captures, linked as one test binary.

mod cpu_model_vs_rapl;
mod kasa_device;
mod linux_captures;
mod macos_captures;
mod nvidia_nvml;
mod ollama_heuristic;
mod plug_captures;
mod plug_device;
