//! The CPU's memory bandwidth: STREAM's copy and triad (McCalpin), multi-threaded in Rust, on
//! arrays many times the last-level cache.
//!
//! Each thread owns one contiguous chunk of each array, so every thread streams its own pages
//! (first touched by that thread, so they sit on its NUMA node where the kernel places pages at
//! first touch). Bytes are counted as STREAM counts them: copy reads one array and writes one
//! (2 × 8 bytes per element), triad reads two and writes one (3 × 8); write-allocate traffic is
//! not counted, so the figure is, like STREAM's, a lower bound of the traffic.

use std::time::Instant;

/// STREAM's byte count per element of f64 arrays.
pub fn stream_bytes(kernel: StreamKernel, elements: usize) -> u64 {
    let arrays = match kernel {
        StreamKernel::Copy => 2,
        StreamKernel::Triad => 3,
    };
    arrays * 8 * elements as u64
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKernel {
    /// c[i] = a[i]
    Copy,
    /// a[i] = b[i] + s·c[i]
    Triad,
}

/// One kernel's result.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamFigure {
    pub kernel: StreamKernel,
    /// Bytes per second of the fastest repetition (STREAM reports the best).
    pub best_bytes_per_s: f64,
    /// Bytes per second of the median repetition.
    pub median_bytes_per_s: f64,
    pub elements: usize,
    pub threads: usize,
    pub repetitions: usize,
}

/// Elements per array: at least four times the largest cache this host reports (by default 64
/// MiB per array when it reports none), and at least 2²⁴.
pub fn default_elements() -> usize {
    let cache = largest_cache_bytes().unwrap_or(16 << 20);
    (4 * cache / 8).max(1 << 24) as usize
}

/// The largest cache sysfs describes for CPU 0, in bytes.
pub fn largest_cache_bytes() -> Option<u64> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(|entry| {
        let size = std::fs::read_to_string(entry.ok()?.path().join("size")).ok()?;
        let size = size.trim();
        let (number, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit()).unwrap_or(size.len()));
        let number: u64 = number.parse().ok()?;
        Some(match unit {
            "K" => number << 10,
            "M" => number << 20,
            "G" => number << 30,
            _ => number,
        })
    })
    .max()
}

/// Run `kernel` over arrays of `elements` f64 on `threads` threads, `repetitions` times after one
/// untimed pass. Arrays are filled with pseudo-random values (never zeros).
pub fn stream(kernel: StreamKernel, elements: usize, threads: usize, repetitions: usize) -> StreamFigure {
    let threads = threads.max(1);
    let repetitions = repetitions.max(1);
    let chunk = elements.div_ceil(threads);
    let mut a = vec![0f64; elements];
    let mut b = vec![0f64; elements];
    let mut c = vec![0f64; elements];
    // First touch and fill, each thread its own chunk.
    std::thread::scope(|scope| {
        for (t, ((a, b), c)) in a.chunks_mut(chunk).zip(b.chunks_mut(chunk)).zip(c.chunks_mut(chunk)).enumerate() {
            scope.spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64);
                for ((a, b), c) in a.iter_mut().zip(b.iter_mut()).zip(c.iter_mut()) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let r = 1.0 + (x >> 11) as f64 / (1u64 << 53) as f64;
                    (*a, *b, *c) = (r, 2.0 * r, 0.5 * r);
                }
            });
        }
    });
    let scalar = 3.0;
    let mut times = Vec::with_capacity(repetitions);
    for repetition in 0..=repetitions {
        let start = Instant::now();
        std::thread::scope(|scope| {
            for ((a, b), c) in a.chunks_mut(chunk).zip(b.chunks_mut(chunk)).zip(c.chunks_mut(chunk)) {
                scope.spawn(move || match kernel {
                    StreamKernel::Copy => c.copy_from_slice(a),
                    StreamKernel::Triad => {
                        for ((a, b), c) in a.iter_mut().zip(b.iter()).zip(c.iter()) {
                            *a = b + scalar * c;
                        }
                    }
                });
            }
        });
        let elapsed = start.elapsed().as_secs_f64();
        if repetition > 0 {
            times.push(elapsed);
        }
    }
    // Keep the arrays observable so the passes are not optimised away.
    std::hint::black_box((&a, &b, &c));
    let bytes = stream_bytes(kernel, elements) as f64;
    // At least one repetition of finite durations: NaN (reported as unavailable) never happens.
    let (fastest_s, median_s) =
        lynx_analysis::stats::Sorted::new(times).map_or((f64::NAN, f64::NAN), |times| (times.min(), times.median()));
    StreamFigure {
        kernel,
        best_bytes_per_s: bytes / fastest_s,
        median_bytes_per_s: bytes / median_s,
        elements,
        threads,
        repetitions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_counted_as_stream_counts_them() {
        assert_eq!(stream_bytes(StreamKernel::Copy, 1000), 16_000);
        assert_eq!(stream_bytes(StreamKernel::Triad, 1000), 24_000);
    }

    #[test]
    fn the_probes_give_finite_positive_figures() {
        for kernel in [StreamKernel::Copy, StreamKernel::Triad] {
            let figure = stream(kernel, 1 << 20, 2, 3);
            assert!(figure.best_bytes_per_s.is_finite() && figure.best_bytes_per_s > 0.0, "{figure:?}");
            assert!(figure.median_bytes_per_s <= figure.best_bytes_per_s, "{figure:?}");
        }
        assert!(default_elements() >= 1 << 24);
    }
}
