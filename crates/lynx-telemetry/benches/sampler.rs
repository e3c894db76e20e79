//! What telemetry costs: the latency of one reading of each available source, and the CPU share
//! of the sampling thread at 100 Hz (goal: under 1% of one core). Prints a table.
//!
//!     cargo bench -p lynx-telemetry --bench sampler

use lynx_telemetry::{HostSource, Sampler, TelemetrySource};
use std::time::{Duration, Instant};

/// CPU seconds this process has used (user + system), from getrusage.
fn cpu_s() -> f64 {
    // SAFETY: getrusage fills the zeroed struct it is given; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn main() {
    // One full reading of the host source (every file due: readings a second apart), median of 10.
    let mut host = HostSource::new();
    host.sample();
    let mut times: Vec<f64> = (0..10)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(1010));
            let start = Instant::now();
            std::hint::black_box(host.sample());
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let reading_us = times[5] * 1e6;

    // Baseline: a thread that only wakes at 100 Hz, as the sampler's ticks do.
    let before = cpu_s();
    let idle = std::thread::spawn(|| {
        let period = Duration::from_millis(10);
        let mut next = Instant::now();
        for _ in 0..1000 {
            next += period;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    });
    idle.join().expect("the idle thread finishes");
    let wake_share = (cpu_s() - before) / 10.0;

    // The sampler at 100 Hz for 10 s while this thread sleeps: all CPU time is the sampler's.
    let wall_s = 10.0;
    let sink = Box::new(std::io::BufWriter::new(tempfile::tempfile().expect("a temporary file")));
    let before = cpu_s();
    let sampler =
        Sampler::start(vec![Box::new(HostSource::new())], 100.0, Instant::now(), sink).expect("sampler starts");
    std::thread::sleep(Duration::from_secs_f64(wall_s));
    let samples = sampler.stop().expect("sampler stops").remove(0).len();
    let share = (cpu_s() - before) / wall_s;

    println!("{:<44} {:>12} {:>10}", "MEASURE", "VALUE", "GOAL");
    println!("{:<44} {:>10.1}µs {:>10}", "host reading with every file re-read, median", reading_us, "-");
    println!("{:<44} {:>11.2}% {:>10}", "a thread only waking at 100 Hz: CPU share", wake_share * 100.0, "-");
    println!("{:<44} {:>12} {:>10}", "sampler at 100 Hz for 10 s: samples", samples, "~1000");
    println!(
        "{:<44} {:>11.2}% {:>10}  {}",
        "sampler at 100 Hz: CPU share of one core",
        share * 100.0,
        "< 1%",
        if share < 0.01 { "met" } else { "NOT met" }
    );
}
