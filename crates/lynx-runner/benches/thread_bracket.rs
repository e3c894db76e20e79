//! What bracketing a timed step with the thread's figures costs (docs/SWEEPS.md, "Where the slow
//! steps fell"): before and after each step a cell or the serving loop times, lynx reads the
//! thread's CPU clock, its context switches and its run-queue delay, and the monotonic clock
//! outermost ([`lynx_runner::ThreadUsage`]). The readings lie outside the step's own timing, so
//! a step's figure does not pay for them, but the step's wall clock comes a bracket's cost after
//! the step before it.
//!
//! `cargo bench -p lynx-runner --bench thread_bracket` times each reading on its own (100,000
//! calls, the median of nine rounds) and a whole bracket around an empty step: the time it takes
//! in all, and the part of it outside the step's timing (the bracket's span less the step), which
//! is what `ThreadUsage::over_step` subtracts from the run-queue delay. One table; a release
//! build, as a run's binary is.

use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use lynx_runner::ThreadUsage;

const CALLS: usize = 100_000;
const ROUNDS: usize = 9;

/// The median over [`ROUNDS`] of `work` called [`CALLS`] times, per call, in seconds.
fn per_call(mut work: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..CALLS {
                work();
            }
            start.elapsed().as_secs_f64() / CALLS as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

fn main() {
    let Some(_) = ThreadUsage::before() else {
        println!("this kernel does not say the thread's figures (not Linux): nothing to time");
        return;
    };
    let schedstat = std::fs::File::open("/proc/thread-self/schedstat").expect("Linux has the file");
    let mut rows: Vec<(&str, f64)> = vec![
        (
            "Instant::now (the monotonic clock)",
            per_call(|| {
                black_box(Instant::now());
            }),
        ),
        (
            "clock_gettime(CLOCK_THREAD_CPUTIME_ID)",
            per_call(|| {
                // SAFETY: a zeroed timespec is a valid one; clock_gettime writes through the
                // pointer to it, alive for the call.
                let mut cpu: libc::timespec = unsafe { std::mem::zeroed() };
                black_box(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut cpu) });
            }),
        ),
        (
            "getrusage(RUSAGE_THREAD)",
            per_call(|| {
                // SAFETY: a zeroed rusage is a valid one; getrusage writes through the pointer
                // to it, alive for the call.
                let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
                black_box(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) });
            }),
        ),
        (
            "/proc/thread-self/schedstat, kept open, read again",
            per_call(|| {
                let mut line = [0u8; 128];
                black_box(schedstat.read_at(&mut line, 0).ok());
            }),
        ),
        (
            "/proc/thread-self/schedstat, opened, read and closed",
            per_call(|| {
                black_box(std::fs::read("/proc/thread-self/schedstat").ok());
            }),
        ),
    ];
    // A whole bracket around an empty step, as a cell's loop takes one; and of it, the time
    // outside the step's timing.
    // Held for every round's brackets, so that no round's timing grows it.
    let mut outside = Vec::with_capacity(ROUNDS * CALLS);
    rows.push((
        "a bracket around an empty step, in all",
        per_call(|| {
            let before = ThreadUsage::before();
            let step_start = Instant::now();
            let step_s = step_start.elapsed().as_secs_f64();
            let after = ThreadUsage::after();
            if let (Some(before), Some(after)) = (before, after) {
                outside.push(after.span_s(&before) - step_s);
            }
        }),
    ));
    outside.sort_by(f64::total_cmp);
    let at = |q: f64| outside[((q * outside.len() as f64) as usize).min(outside.len() - 1)];
    println!("{:<52} {:>10}", "READING", "PER CALL (us)");
    for (what, s) in &rows {
        println!("{what:<52} {:>10.3}", s * 1e6);
    }
    println!(
        "{:<52} {:>10.3}   (p90 {:.3}, p99 {:.3}, max {:.1}, over {} brackets)",
        "of it, outside the step's timing (median)",
        at(0.5) * 1e6,
        at(0.9) * 1e6,
        at(0.99) * 1e6,
        at(1.0) * 1e6,
        outside.len()
    );
}
