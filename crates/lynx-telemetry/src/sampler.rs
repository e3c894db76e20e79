//! The sampling thread: reads every source at a fixed rate on the run's monotonic clock, writes
//! each reading to the run's raw-samples file as it goes, and keeps them for window summaries.

use lynx_schema::telemetry::{Sample, SamplesLine};
use std::borrow::Cow;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A device's (or the host's) telemetry.
pub trait TelemetrySource: Send {
    /// The source's name in samples and results (`host`, `nvml:0`, …).
    fn name(&self) -> String;
    /// The readings it cannot provide, each with the reason.
    fn unavailable(&self) -> Vec<(String, String)>;
    /// How it measures readings where that matters (e.g. instantaneous or averaged power).
    fn labels(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// One reading; the sampler sets its time.
    fn sample(&mut self) -> Sample;
}

/// The sampler could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error("telemetry rate {0} Hz: use 1 to 100 Hz")]
    Rate(f64),
    #[error("writing samples: {0}")]
    Io(#[from] std::io::Error),
    #[error("the sampling thread panicked")]
    Panicked,
}

/// Write `sample` of `source` as one line of the samples file.
fn write_line(sink: &mut dyn Write, source: &str, sample: &Sample, buffer: &mut Vec<u8>) -> std::io::Result<()> {
    buffer.clear();
    let line = SamplesLine::Telemetry { source: Cow::Borrowed(source), sample: Cow::Borrowed(sample) };
    serde_json::to_writer(&mut *buffer, &line)?;
    buffer.push(b'\n');
    sink.write_all(buffer)
}

/// The running sampler; stop it to join the thread and flush the file.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Vec<Sample>>>>,
    names: Vec<String>,
    thread: Option<JoinHandle<Result<(), std::io::Error>>>,
    rate_hz: f64,
}

/// How often buffered lines reach the file.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

impl Sampler {
    /// Sample `sources` at `rate_hz` (1 to 100), timestamps in seconds since `clock`, each line
    /// written to `sink`.
    pub fn start(
        mut sources: Vec<Box<dyn TelemetrySource>>,
        rate_hz: f64,
        clock: Instant,
        mut sink: Box<dyn Write + Send>,
    ) -> Result<Sampler, SamplerError> {
        if !(1.0..=100.0).contains(&rate_hz) {
            return Err(SamplerError::Rate(rate_hz));
        }
        let names: Vec<String> = sources.iter().map(|s| s.name()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(vec![Vec::new(); sources.len()]));
        let period = Duration::from_secs_f64(1.0 / rate_hz);
        let thread_names = names.clone();
        let (thread_stop, thread_samples) = (stop.clone(), samples.clone());
        let thread = std::thread::Builder::new().name("lynx-telemetry".to_owned()).spawn(move || {
            let mut next = Instant::now();
            let mut last_flush = Instant::now();
            let mut buffer = Vec::with_capacity(512);
            while !thread_stop.load(Ordering::Relaxed) {
                for (index, source) in sources.iter_mut().enumerate() {
                    let began = clock.elapsed().as_secs_f64();
                    let mut sample = source.sample().sanitised();
                    sample.t_s = clock.elapsed().as_secs_f64();
                    sample.read_s = Some(sample.t_s - began);
                    write_line(&mut sink, &thread_names[index], &sample, &mut buffer)?;
                    thread_samples.lock().unwrap_or_else(|p| p.into_inner())[index].push(sample);
                }
                if last_flush.elapsed() >= FLUSH_EVERY {
                    sink.flush()?;
                    last_flush = Instant::now();
                }
                // Fixed ticks: a slow reading skips ticks (a gap) rather than shifting the rest.
                next += period;
                let now = Instant::now();
                while next < now {
                    next += period;
                }
                std::thread::sleep(next - now);
            }
            sink.flush()
        })?;
        Ok(Sampler { stop, samples, names, thread: Some(thread), rate_hz })
    }

    pub fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// `read` of the samples of source `index` so far, in place: nothing is copied, and the
    /// sampling thread waits to add its next reading until `read` returns, so keep it short.
    pub fn with_samples<T>(&self, index: usize, read: impl FnOnce(&[Sample]) -> T) -> T {
        read(&self.samples.lock().unwrap_or_else(|p| p.into_inner())[index])
    }

    /// The samples of source `index` from the `from`-th on.
    pub fn samples_from(&self, index: usize, from: usize) -> Vec<Sample> {
        self.with_samples(index, |samples| samples.get(from..).map_or_else(Vec::new, <[Sample]>::to_vec))
    }

    /// Stop sampling, flush the file, and return every source's samples.
    pub fn stop(mut self) -> Result<Vec<Vec<Sample>>, SamplerError> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("a running sampler has its thread");
        thread.join().map_err(|_| SamplerError::Panicked)??;
        let samples = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|p| p.into_inner()));
        Ok(samples)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_analysis::telemetry::summarise;

    /// A source whose readings follow a script: power 100 W + 10 W per reading.
    struct Scripted {
        readings: u64,
    }

    impl TelemetrySource for Scripted {
        fn name(&self) -> String {
            "scripted".to_owned()
        }
        fn unavailable(&self) -> Vec<(String, String)> {
            vec![("temperature_c".to_owned(), "the script has no sensor".to_owned())]
        }
        fn sample(&mut self) -> Sample {
            self.readings += 1;
            Sample { power_w: Some(100.0 + 10.0 * self.readings as f64), ..Sample::default() }
        }
    }

    /// A `Write` that keeps what it is given.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn samples_at_the_rate_and_writes_every_sample() {
        let clock = Instant::now();
        let file = Captured::default();
        let sampler =
            Sampler::start(vec![Box::new(Scripted { readings: 0 })], 50.0, clock, Box::new(file.clone())).unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        let samples = sampler.stop().unwrap().remove(0);
        // Read once sampling has stopped: a tick may land between any earlier reading and stop.
        let end = clock.elapsed().as_secs_f64();
        // About 50 samples in a second (a loaded machine may drop a few ticks, never add any).
        assert!((35..=52).contains(&samples.len()), "{} samples", samples.len());
        assert!(samples.windows(2).all(|w| w[1].t_s > w[0].t_s), "timestamps increase");
        // Each reading is timed, and starts after the one before it ended.
        assert!(samples.iter().all(|s| s.read_s.is_some_and(|r| r >= 0.0)), "{samples:?}");
        let began = |s: &Sample| s.t_s - s.read_s.unwrap();
        assert!(samples.windows(2).all(|w| began(&w[1]) >= w[0].t_s - 1e-9), "readings follow one another");
        assert_eq!(samples[0].power_w, Some(110.0));
        let summary = summarise("scripted", &samples, 0.0, end, 50.0).unwrap();
        assert_eq!(summary.samples as usize, samples.len());
        assert!(summary.coverage.get() > 0.8, "{summary:?}");

        let text = String::from_utf8(file.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), samples.len());
        assert_eq!(lines[0]["kind"], "telemetry");
        assert_eq!(lines[0]["source"], "scripted");
        assert_eq!(lines[3]["power_w"], 140.0);
    }

    #[test]
    fn rates_outside_one_to_a_hundred_hertz_are_refused() {
        for rate in [0.5, 101.0, f64::NAN] {
            let error = Sampler::start(vec![], rate, Instant::now(), Box::new(std::io::sink())).err().unwrap();
            assert!(error.to_string().contains("use 1 to 100 Hz"), "{error}");
        }
    }
}
