//! A run's telemetry: the sampler over the device's and the host's sources, started once parity
//! has passed the inputs and stopped at the end of the run, and the summaries of its windows.

use crate::devices::Device;
use crate::RunError;
use lynx_analysis::telemetry::summarise;
use lynx_nvml::NvmlSource;
use lynx_rocm::RocmSource;
use lynx_schema::device::DeviceName;
use lynx_schema::result::{SourceRecord, TelemetryRecord};
use lynx_schema::telemetry::{Sample, SamplesLine, WindowSummary};
use lynx_schema::value::Finite;
use lynx_telemetry::{HostSource, Sampler, TelemetrySource};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A source that started, or why it could not.
type Started = Result<Box<dyn TelemetrySource>, String>;

/// The GPU's own telemetry source, by name: NVML found by the CUDA driver's UUID for NVIDIA,
/// ROCm SMI for AMD; `None` for the CPU.
fn gpu_source(device: &Device) -> Option<(&'static str, Started)> {
    match device.record.device {
        DeviceName::Cpu => None,
        DeviceName::Cuda(_) => Some((
            "nvml",
            device
                .record
                .uuid
                .known()
                .ok_or_else(|| "the CUDA driver gave no UUID to find it by".to_owned())
                .and_then(|uuid| NvmlSource::for_uuid(uuid).map_err(|e| e.to_string()))
                .map(|s| Box::new(s) as Box<dyn TelemetrySource>),
        )),
        DeviceName::Rocm(index) => {
            Some(("rocm-smi", RocmSource::for_index(index).map(|s| Box::new(s) as Box<dyn TelemetrySource>)))
        }
    }
}

/// The record of a source that could not start: all its readings unavailable, for `reason`.
fn failed_source(name: &str, reason: String) -> SourceRecord {
    SourceRecord { name: name.to_owned(), labels: Default::default(), unavailable: [("all".to_owned(), reason)].into() }
}

pub struct RunTelemetry {
    clock: Instant,
    sampler: Sampler,
    path: PathBuf,
    pub record: TelemetryRecord,
}

impl RunTelemetry {
    /// Start sampling `device` at `rate_hz`, appending to `path`: the host's source always, and
    /// the GPU's own beside it (NVML found by UUID for NVIDIA, ROCm SMI for AMD; a source that
    /// cannot start is recorded with the reason). Each process that works on a run is one
    /// segment of its samples file: a `{"kind":"segment",...}` line opens it, and the times of
    /// the samples after it count from that line.
    pub fn start(
        device: &Device,
        rate_hz: f64,
        path: &Path,
        segment: u32,
        started_at: &str,
    ) -> Result<RunTelemetry, RunError> {
        let io = |source| RunError::Io { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(io)?;
        let segment = SamplesLine::Segment { segment, started_at: started_at.into() };
        let mut header = serde_json::to_vec(&segment).map_err(|e| io(std::io::Error::other(e)))?;
        header.push(b'\n');
        file.write_all(&header).map_err(io)?;
        let sink = BufWriter::new(file);
        let mut sources: Vec<Box<dyn TelemetrySource>> = Vec::new();
        let mut records = Vec::new();
        let gpu = gpu_source(device);
        match gpu {
            Some((_, Ok(source))) => sources.push(source),
            Some((name, Err(reason))) => records.push(failed_source(name, reason)),
            None => {}
        }
        sources.push(Box::new(HostSource::new()));
        records.extend(sources.iter().map(|s| SourceRecord {
            name: s.name(),
            labels: s.labels().into_iter().collect(),
            unavailable: s.unavailable().into_iter().collect(),
        }));
        let clock = Instant::now();
        let sampler =
            Sampler::start(sources, rate_hz, clock, Box::new(sink)).map_err(|e| RunError::Telemetry(e.to_string()))?;
        let record = TelemetryRecord {
            rate_hz: Finite::new(rate_hz, "telemetry rate").map_err(|e| RunError::Config(e.to_string()))?,
            samples_file: path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            sources: records,
            device_source: sampler.names()[0].clone(),
        };
        Ok(RunTelemetry { clock, sampler, path: path.to_path_buf(), record })
    }

    /// Seconds on the run's telemetry clock.
    pub fn now_s(&self) -> f64 {
        self.clock.elapsed().as_secs_f64()
    }

    /// The device's samples (its own source where it has one, else the host's) from the
    /// `from`-th on.
    pub fn device_samples_from(&self, from: usize) -> Vec<Sample> {
        self.sampler.samples_from(0, from)
    }

    /// Every source over `[start_s, end_s]`.
    pub fn summaries(&self, start_s: f64, end_s: f64) -> Vec<WindowSummary> {
        (0..self.sampler.names().len())
            .filter_map(|i| {
                summarise(&self.sampler.names()[i], &self.sampler.samples(i), start_s, end_s, self.sampler.rate_hz())
                    .ok()
            })
            .collect()
    }

    /// Stop sampling and make the samples file durable.
    pub fn finish(self) -> Result<(), RunError> {
        self.sampler.stop().map_err(|e| RunError::Telemetry(e.to_string()))?;
        File::open(&self.path)
            .and_then(|file| file.sync_all())
            .map_err(|source| RunError::Io { path: self.path.clone(), source })
    }
}
