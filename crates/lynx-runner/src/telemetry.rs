//! A run's telemetry: the sampler over the device's and the host's sources, started once parity
//! has passed the inputs and stopped at the end of the run, and the summaries of its windows.

use crate::RunError;
use lynx_core::result::{SourceRecord, TelemetryRecord};
use lynx_core::telemetry::{summarise, WindowSummary};
use lynx_core::value::Finite;
use lynx_telemetry::{HostSource, Sampler, TelemetrySource};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub struct RunTelemetry {
    clock: Instant,
    sampler: Sampler,
    path: PathBuf,
    pub record: TelemetryRecord,
}

impl RunTelemetry {
    /// Start sampling at `rate_hz` into `path`. Today the host's source serves every device;
    /// the NVML and ROCm SMI sources of the telemetry issue will join it for GPUs.
    pub fn start(rate_hz: f64, path: &Path) -> Result<RunTelemetry, RunError> {
        let io = |source| RunError::Io { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let sink = BufWriter::new(File::create(path).map_err(io)?);
        let sources: Vec<Box<dyn TelemetrySource>> = vec![Box::new(HostSource::new())];
        let records = sources
            .iter()
            .map(|s| SourceRecord { name: s.name(), unavailable: s.unavailable().into_iter().collect() })
            .collect();
        let clock = Instant::now();
        let sampler =
            Sampler::start(sources, rate_hz, clock, Box::new(sink)).map_err(|e| RunError::Telemetry(e.to_string()))?;
        let record = TelemetryRecord {
            rate_hz: Finite::new(rate_hz, "telemetry rate").map_err(|e| RunError::Config(e.to_string()))?,
            samples_file: path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            sources: records,
        };
        Ok(RunTelemetry { clock, sampler, path: path.to_path_buf(), record })
    }

    /// Seconds on the run's telemetry clock.
    pub fn now_s(&self) -> f64 {
        self.clock.elapsed().as_secs_f64()
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
        File::open(&self.path).and_then(|f| f.sync_all()).map_err(|source| RunError::Io { path: self.path, source })
    }
}
