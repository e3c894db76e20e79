//! A run's telemetry: the sampler over the device's and the host's sources, started once parity
//! has passed the inputs and stopped at the end of the run, and the summaries of its windows.

use crate::devices::Device;
use crate::RunError;
use lynx_analysis::telemetry::summarise;
use lynx_nvml::NvmlSource;
use lynx_rocm::RocmSource;
use lynx_schema::device::DeviceName;
use lynx_schema::result::{SourceRecord, TelemetryRecord};
use lynx_schema::telemetry::{Sample, SamplesLine, WindowSummary, SLOW_READING_S};
use lynx_schema::value::Finite;
use lynx_telemetry::{HostSource, Sampler, TelemetrySource};
use std::fs::File;
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
/// Open the run's samples file to append a segment: created if absent, never through a symbolic
/// link, a regular file. A last line left torn by the segment before (a kill, a full disk) is
/// cut off first, as the journal's is, so that the new segment's header starts a line of its
/// own; the bytes cut are returned (and recorded in that header).
fn open_samples(path: &Path) -> std::io::Result<(File, u64)> {
    let mut file = crate::store::open_appending(path)?;
    let len = file.metadata()?.len();
    let whole = whole_lines_end(&mut file, len)?;
    if whole < len {
        file.set_len(whole)?;
        file.sync_all()?;
    }
    Ok((file, len - whole))
}

/// Where the last whole line of `file` (of `len` bytes) ends: one past its last newline, 0 if
/// it has none. Read backwards in 64 KiB blocks, so a long file is not read whole.
fn whole_lines_end(file: &mut File, len: u64) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut end = len;
    let mut block = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block[..n])?;
        if let Some(i) = block[..n].iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

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
        let (mut file, cut) = open_samples(path).map_err(io)?;
        let segment =
            SamplesLine::Segment { segment, started_at: started_at.into(), cut_bytes: Some(cut).filter(|&c| c > 0) };
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

    /// Each source's timed readings that overlap `[start_s, end_s]` ([`readings_of`]), for
    /// setting a cell's slow steps against them.
    pub fn readings(&self, start_s: f64, end_s: f64) -> Vec<lynx_analysis::cell::Readings> {
        (0..self.sampler.names().len())
            .flat_map(|i| {
                let name = &self.sampler.names()[i];
                self.sampler.with_samples(i, |samples| readings_of(name, samples, start_s, end_s))
            })
            .collect()
    }

    /// Every source over `[start_s, end_s]`.
    pub fn summaries(&self, start_s: f64, end_s: f64) -> Vec<WindowSummary> {
        (0..self.sampler.names().len())
            .filter_map(|i| {
                let name = &self.sampler.names()[i];
                self.sampler
                    .with_samples(i, |samples| summarise(name, samples, start_s, end_s, self.sampler.rate_hz()))
                    .ok()
            })
            .collect()
    }

    /// Stop sampling and make the samples file durable.
    pub fn finish(self) -> Result<(), RunError> {
        self.sampler.stop().map_err(|e| match e {
            lynx_telemetry::SamplerError::Io(source) => RunError::Io { path: self.path.clone(), source },
            e => RunError::Telemetry(e.to_string()),
        })?;
        File::open(&self.path)
            .and_then(|file| file.sync_all())
            .map_err(|source| RunError::Io { path: self.path.clone(), source })
    }
}

/// The timed readings (start, end) of the source `name` among `samples` that overlap `[start_s,
/// end_s]`; and, where any of them took longer than [`SLOW_READING_S`] (those that kept their
/// calls' times), those again as an entry of their own: whether a cell's slow steps fell on the
/// slow readings in particular.
pub fn readings_of(name: &str, samples: &[Sample], start_s: f64, end_s: f64) -> Vec<lynx_analysis::cell::Readings> {
    let overlapping: Vec<&Sample> =
        samples.iter().filter(|s| s.read_s.is_some_and(|r| s.t_s - r < end_s && s.t_s > start_s)).collect();
    let span = |s: &&Sample| s.read_s.map(|r| (s.t_s - r, s.t_s));
    let mut readings = vec![lynx_analysis::cell::Readings::all(name, overlapping.iter().filter_map(span).collect())];
    let slow: Vec<(f64, f64)> = overlapping.iter().filter(|s| !s.slow_calls.is_empty()).filter_map(span).collect();
    if !slow.is_empty() {
        readings.push(lynx_analysis::cell::Readings {
            source: name.to_owned(),
            over_s: Some(SLOW_READING_S),
            reads: slow,
        });
    }
    readings
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source's readings over a window, and its slow ones (those that kept their calls' times)
    /// again as their own entry; a window with none slow has no such entry.
    #[test]
    fn a_sources_slow_readings_are_an_entry_of_their_own() {
        use lynx_schema::telemetry::CallTime;
        let reading = |t_s: f64, read_s: f64, slow: bool| Sample {
            t_s,
            read_s: Some(read_s),
            slow_calls: if slow {
                vec![CallTime { call: "nvmlDeviceGetClockInfo(SM)".to_owned(), s: read_s }]
            } else {
                vec![]
            },
            ..Sample::default()
        };
        let samples = [
            reading(0.95, 0.0002, false),
            reading(1.0, 0.0003, false),
            reading(1.05, 0.004, true),
            reading(1.10, 0.0002, false),
            reading(2.0, 0.005, true),
        ];
        let found = readings_of("nvml:0", &samples, 1.0, 1.2);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].source.as_str(), found[0].over_s), ("nvml:0", None));
        // Those ending after the window starts and starting before it ends: not the one that
        // ends as it starts.
        assert_eq!(found[0].reads, [(1.05 - 0.004, 1.05), (1.10 - 0.0002, 1.10)]);
        assert_eq!(found[1].over_s, Some(SLOW_READING_S));
        assert_eq!(found[1].reads, [(1.05 - 0.004, 1.05)]);
        let quiet = readings_of("nvml:0", &samples, 1.06, 1.2);
        assert_eq!(quiet.len(), 1, "no slow reading there: {quiet:?}");
    }

    /// Issue 17: a samples file left with a torn last line (a full disk mid-write) has it cut
    /// off when the next segment opens it, so the new header starts a line of its own; a whole
    /// file is left as it is; a symbolic link in its place is refused.
    #[test]
    fn a_torn_last_line_is_cut_before_the_next_segment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.samples.jsonl");
        let whole = "{\"kind\":\"segment\",\"segment\":1,\"started_at\":\"x\"}\n".repeat(3000);
        std::fs::write(&path, format!("{whole}{{\"kind\":\"telemetry\",\"sou")).unwrap();
        let (mut file, cut) = open_samples(&path).unwrap();
        assert_eq!(cut, 24);
        file.write_all(b"next\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{whole}next\n"));
        drop(file);
        assert_eq!(open_samples(&path).unwrap().1, 0, "a whole file loses nothing");
        std::fs::write(&path, "no newline at all").unwrap();
        assert_eq!(open_samples(&path).unwrap().1, 17);
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(open_samples(&link).is_err());
    }
}
