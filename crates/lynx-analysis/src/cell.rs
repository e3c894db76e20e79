//! A measured cell's figures (DESIGN.md vocabulary: tok/s/user, tok/s/device) from its step
//! times, and the full-depth extrapolation of a layer subset.

use lynx_schema::config::ModelShape;
use lynx_schema::result::{
    AllocatorOverSteps, CellRecord, CellShape, CellStatus, FullDepth, IssueOverSteps, ReadingOverlap, SlowSteps,
    ThreadOverSteps,
};
use lynx_schema::stats::StepTimeSummary;
use lynx_schema::value::{Finite, NotFinite};

/// The head-only model a layer subset is extrapolated with: `shape` with no layers (the
/// embedding, final norm and lm head alone).
pub fn head_only_shape(shape: &ModelShape) -> ModelShape {
    let mut head = shape.clone();
    head.num_layers = 0;
    if let Some(moe) = &mut head.moe {
        moe.first_dense_layers = 0;
    }
    head
}

/// A full-depth time from a `measured_layers`-layer one and the head-only time `fixed`:
/// T₀ + (L / k)·(T_k − T₀), the per-layer part never negative.
pub fn full_depth_s(fixed: f64, measured: f64, measured_layers: u32, model_layers: u32) -> f64 {
    fixed + f64::from(model_layers) / f64::from(measured_layers) * (measured - fixed).max(0.0)
}

/// T_full = T₀ + (L / k)·(T_k − T₀), with T₀ the head-only median, applied to each statistic
/// of the k-layer step time. The per-layer part is assumed to scale with depth and to vary as
/// the measured layers' does; the fixed part (embedding, lm head) is measured, not assumed.
pub fn extrapolate(
    measured: &StepTimeSummary,
    head_only: StepTimeSummary,
    measured_layers: u32,
    model_layers: u32,
) -> Result<FullDepth, String> {
    let fixed = head_only.median_s.get();
    if measured.median_s.get() <= fixed {
        return Err(format!(
            "cannot extrapolate to full depth: {measured_layers} layers measured no slower ({:.3e} s) than the \
             head alone ({fixed:.3e} s)",
            measured.median_s.get()
        ));
    }
    let scale = |t: Finite, what: &str| {
        Finite::new(full_depth_s(fixed, t.get(), measured_layers, model_layers), what).map_err(|e| e.to_string())
    };
    Ok(FullDepth {
        measured_layers,
        model_layers,
        median_s: scale(measured.median_s, "full-depth median")?,
        p90_s: scale(measured.p90_s, "full-depth p90")?,
        p99_s: scale(measured.p99_s, "full-depth p99")?,
        min_s: scale(measured.min_s, "full-depth min")?,
        max_s: scale(measured.max_s, "full-depth max")?,
        method: format!(
            "head-only median T0 + {model_layers}/{measured_layers} x (measured statistic - T0), from {} \
             {measured_layers}-layer steps and {} head-only steps",
            measured.n, head_only.n
        ),
        head_only,
    })
}

/// The share of a step that, spent issuing it on the host, makes a cell launch-bound.
pub const LAUNCH_BOUND_SHARE: f64 = 0.9;

/// Whether a step whose host issue time has median `issue_median_s` against a median step time
/// `step_median_s` is launch-bound: the device waits on the host for most of the step.
pub fn launch_bound(issue_median_s: f64, step_median_s: f64) -> bool {
    issue_median_s >= LAUNCH_BOUND_SHARE * step_median_s
}

/// A step is slow above this many times its cell's median step ([`slow_steps`]).
pub const SLOW_STEP_FACTOR: f64 = 1.2;

/// One telemetry source's readings over a cell: its name and each reading's (start, end) on the
/// run's clock, in the order it read them (one source reads one reading at a time); `over_s`,
/// where set, says these are only those of its readings that took longer than it.
#[derive(Debug, Clone, PartialEq)]
pub struct Readings {
    pub source: String,
    pub over_s: Option<f64>,
    pub reads: Vec<(f64, f64)>,
}

impl Readings {
    /// Every reading of `source` in `reads`.
    pub fn all(source: impl Into<String>, reads: Vec<(f64, f64)>) -> Readings {
        Readings { source: source.into(), over_s: None, reads }
    }
}

/// What the thread that ran one step did during it, as the kernel accounts for it: its CPU time,
/// its context switches, voluntary (it gave up its CPU to wait) and involuntary (it was switched
/// out while it could run), and how long it waited to run (runnable, not running; `None` where
/// the kernel does not say).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadStep {
    pub cpu_s: f64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub runnable_s: Option<f64>,
}

/// What was recorded of each step besides its time, for [`slow_steps`]: each slice holds one
/// entry a step, and one that does not (empty where nothing was recorded, shorter where a step
/// went unrecorded) records nothing of the steps.
#[derive(Debug, Clone, Copy, Default)]
pub struct StepRecords<'a> {
    /// What the thread that ran it did ([`ThreadOverSteps`]).
    pub thread: &'a [ThreadStep],
    /// The calls libtorch's caching allocator made to the driver for memory during it (a
    /// GPU's; [`AllocatorOverSteps`]).
    pub allocator: &'a [u64],
    /// The host's issue time: until the model's call returned, before the step's tokens were
    /// copied to the host (a GPU's, where the two differ; [`IssueOverSteps`]).
    pub issue_s: &'a [f64],
}

/// Where a cell's slow steps fell against the telemetry readings: the steps (each starting at
/// `starts_s[i]` on the run's clock and lasting `step_s[i]`) over [`SLOW_STEP_FACTOR`] times their
/// median, and for each source how many of them overlapped one of its readings beside the share
/// of the other steps that did; and, from what `records` holds of every step, what the thread
/// that ran them did during the slow steps and during the others ([`ThreadOverSteps`]), in how
/// many of each libtorch's caching allocator called the driver ([`AllocatorOverSteps`]), and how
/// much of each's time the host spent issuing them ([`IssueOverSteps`]). `None` where the steps
/// and their starts disagree in number or there are fewer than two steps. Sources without
/// readings are left out.
pub fn slow_steps(starts_s: &[f64], step_s: &[f64], readings: &[Readings], records: StepRecords) -> Option<SlowSteps> {
    slow_steps_by_pace(starts_s, step_s, step_s, readings, records)
}

/// As [`slow_steps`], over steps of different shapes: a step is slow where its `pace` (its time
/// over what its shape is expected to take: the serving loop's measured / table time) is over
/// [`SLOW_STEP_FACTOR`] times the median pace. `None` also where `pace` has another length.
pub fn slow_steps_by_pace(
    starts_s: &[f64],
    step_s: &[f64],
    pace: &[f64],
    readings: &[Readings],
    records: StepRecords,
) -> Option<SlowSteps> {
    let StepRecords { thread, allocator, issue_s } = records;
    if starts_s.len() != step_s.len() || pace.len() != step_s.len() || step_s.len() < 2 {
        return None;
    }
    let threshold = SLOW_STEP_FACTOR * crate::stats::median(pace).ok()?;
    let slow: Vec<bool> = pace.iter().map(|&s| s > threshold).collect();
    let slow_count = slow.iter().filter(|&&s| s).count();
    let during_readings = readings
        .iter()
        .filter(|r| !r.reads.is_empty())
        .filter_map(|Readings { source, over_s, reads }| {
            let mut reads = reads.clone();
            reads.sort_by(|a, b| a.0.total_cmp(&b.0));
            // One source's readings follow one another, so the last to start before a step ends
            // is the last to end: the step overlaps a reading if and only if that one ends after
            // the step starts.
            let overlaps = |start: f64, end: f64| {
                let before_end = reads.partition_point(|r| r.0 < end);
                before_end > 0 && reads[before_end - 1].1 > start
            };
            let (mut slow_hit, mut other_hit) = (0u32, 0u32);
            for ((&start, &length), &is_slow) in starts_s.iter().zip(step_s).zip(&slow) {
                if overlaps(start, start + length) {
                    *(if is_slow { &mut slow_hit } else { &mut other_hit }) += 1;
                }
            }
            let others = step_s.len() - slow_count;
            let others_share = if others == 0 { 0.0 } else { f64::from(other_hit) / others as f64 };
            let durations: Vec<f64> = reads.iter().map(|(start, end)| end - start).collect();
            Some(ReadingOverlap {
                source: source.clone(),
                readings: u32::try_from(reads.len()).unwrap_or(u32::MAX),
                reading_median_s: Finite::new(crate::stats::median(&durations).ok()?, "reading time").ok()?,
                slow: slow_hit,
                others_share: Finite::new(others_share, "share of steps").ok()?,
                over_s: over_s.and_then(|over| Finite::new(over, "reading time").ok()),
            })
        })
        .collect();
    Some(SlowSteps {
        factor: Finite::new(SLOW_STEP_FACTOR, "slow-step factor").ok()?,
        steps: u32::try_from(step_s.len()).unwrap_or(u32::MAX),
        slow: u32::try_from(slow_count).unwrap_or(u32::MAX),
        during_readings,
        thread: (thread.len() == step_s.len()).then(|| thread_over_steps(step_s, &slow, thread)).flatten(),
        allocator: (allocator.len() == step_s.len()).then(|| allocator_over_steps(&slow, allocator)),
        issue: (issue_s.len() == step_s.len()).then(|| issue_over_steps(step_s, &slow, issue_s)).flatten(),
    })
}

/// `add` of each step `i` into one sum over the other steps and one over the slow steps
/// (`slow[i]`): `[others, slow]`.
fn split_by_slowness<S: Default>(slow: &[bool], mut add: impl FnMut(&mut S, usize)) -> [S; 2] {
    let mut sums = [S::default(), S::default()];
    for (i, &is_slow) in slow.iter().enumerate() {
        add(&mut sums[usize::from(is_slow)], i);
    }
    sums
}

/// The host's issue time and the wall time over the slow steps (`slow[i]`) and over the others.
fn issue_over_steps(step_s: &[f64], slow: &[bool], issue_s: &[f64]) -> Option<IssueOverSteps> {
    // (issue seconds, wall seconds)
    let [others, slow] = split_by_slowness(slow, |sum: &mut (f64, f64), i| {
        sum.0 += issue_s[i].clamp(0.0, step_s[i]);
        sum.1 += step_s[i];
    });
    let seconds = |s: f64| Finite::new(s, "issue seconds").ok();
    Some(IssueOverSteps {
        slow_issue_s: seconds(slow.0)?,
        slow_wall_s: seconds(slow.1)?,
        others_issue_s: seconds(others.0)?,
        others_wall_s: seconds(others.1)?,
    })
}

/// The steps, slow (`slow[i]`) and other, in which libtorch's caching allocator called the
/// driver, and its calls over them all.
fn allocator_over_steps(slow: &[bool], calls: &[u64]) -> AllocatorOverSteps {
    let [others, slow] = split_by_slowness(slow, |n: &mut u32, i| *n += u32::from(calls[i] > 0));
    AllocatorOverSteps { slow, others, calls: calls.iter().sum() }
}

/// The thread's context switches and CPU time over the slow steps (`slow[i]`) and the others.
fn thread_over_steps(step_s: &[f64], slow: &[bool], thread: &[ThreadStep]) -> Option<ThreadOverSteps> {
    // (steps preempted in, steps blocked in, CPU seconds, wall seconds, seconds waiting to run)
    let [others, slow] = split_by_slowness(slow, |sum: &mut (u32, u32, f64, f64, f64), i| {
        let step = &thread[i];
        sum.0 += u32::from(step.involuntary > 0);
        sum.1 += u32::from(step.voluntary > 0);
        sum.2 += step.cpu_s;
        sum.3 += step_s[i];
        sum.4 += step.runnable_s.unwrap_or(0.0);
    });
    let seconds = |s: f64| Finite::new(s, "thread seconds").ok();
    // Waiting to run is summed only where the kernel said it for every step.
    let runnable = |s: f64| thread.iter().all(|t| t.runnable_s.is_some()).then(|| seconds(s)).flatten();
    Some(ThreadOverSteps {
        slow_preempted: slow.0,
        others_preempted: others.0,
        slow_blocked: slow.1,
        others_blocked: others.1,
        slow_cpu_s: seconds(slow.2)?,
        slow_wall_s: seconds(slow.3)?,
        others_cpu_s: seconds(others.2)?,
        others_wall_s: seconds(others.3)?,
        slow_runnable_s: runnable(slow.4),
        others_runnable_s: runnable(others.4),
    })
}

/// A measured cell with its figures derived from the step times (DESIGN.md vocabulary).
pub fn measured(
    shape: CellShape,
    step_time: StepTimeSummary,
    measured_s: Finite,
    ctx_end: Option<u32>,
    full_depth: Option<FullDepth>,
) -> Result<CellRecord, NotFinite> {
    let median_s = full_depth.as_ref().map_or(step_time.median_s, |f| f.median_s).get();
    let per_user = match shape {
        CellShape::Decode { .. } => Some(Finite::new(1.0 / median_s, "tok/s/user")?),
        CellShape::Prefill { .. } => None,
    };
    let tokens_per_step = shape.tokens_per_step() as f64;
    Ok(CellRecord {
        status: CellStatus::Ok,
        tok_per_s_per_user: per_user,
        tok_per_s_per_device: Some(Finite::new(tokens_per_step / median_s, "tok/s/device")?),
        step_time: Some(step_time),
        measured_s: Some(measured_s),
        ctx_end,
        full_depth,
        // Everything else (telemetry, roofline, kernels...) is the runner's to add.
        ..CellRecord::failed(shape, String::new())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the thread's records of the steps.
    fn threads(thread: &[ThreadStep]) -> StepRecords<'_> {
        StepRecords { thread, ..StepRecords::default() }
    }

    /// Ten steps of 10 ms every 20 ms, the fourth and the eighth 30 ms: their starts and times.
    fn ten_steps_two_slow() -> (Vec<f64>, Vec<f64>) {
        let mut steps = vec![0.010; 10];
        steps[3] = 0.030;
        steps[7] = 0.030;
        ((0..10).map(|i| 0.020 * f64::from(i)).collect(), steps)
    }

    /// Over [`ten_steps_two_slow`], a source that read during both slow steps and during none of
    /// the others is named with both slow steps and a share of 0; a source reading across every
    /// step has both too, and a share of 1; a source with no readings is left out.
    #[test]
    fn slow_steps_are_set_against_each_sources_readings() {
        let (starts, steps) = ten_steps_two_slow();
        let readings = vec![
            // Inside step 3 (0.060..0.090) and step 7 (0.140..0.170), and in the gaps between
            // others (step 1 ends at 0.030, step 2 starts at 0.040).
            Readings::all("nvml:0", vec![(0.065, 0.068), (0.031, 0.039), (0.150, 0.152)]),
            Readings::all("host", vec![(0.0, 0.5)]),
            Readings::all("silent", vec![]),
            // Of nvml:0's, the one slow reading (3 ms), inside step 3.
            Readings { source: "nvml:0".to_owned(), over_s: Some(1e-3), reads: vec![(0.065, 0.068)] },
        ];
        let found = slow_steps(&starts, &steps, &readings, StepRecords::default()).unwrap();
        assert_eq!((found.steps, found.slow, found.factor.get()), (10, 2, SLOW_STEP_FACTOR));
        assert_eq!(found.during_readings.len(), 3, "{found:?}");
        let nvml = &found.during_readings[0];
        assert_eq!((nvml.source.as_str(), nvml.readings, nvml.slow), ("nvml:0", 3, 2));
        assert_eq!(nvml.others_share.get(), 0.0, "the gap reading overlaps no step");
        assert!((nvml.reading_median_s.get() - 0.003).abs() < 1e-12, "{nvml:?}");
        assert!(nvml.over_s.is_none());
        let host = &found.during_readings[1];
        assert_eq!((host.slow, host.others_share.get()), (2, 1.0));
        // The slow readings' own entry: one of the slow steps fell on one, no other step did.
        let slow_nvml = &found.during_readings[2];
        assert_eq!((slow_nvml.source.as_str(), slow_nvml.readings, slow_nvml.slow), ("nvml:0", 1, 1));
        assert_eq!((slow_nvml.others_share.get(), slow_nvml.over_s.map(|o| o.get())), (0.0, Some(1e-3)));
        assert_eq!(
            found.words("the median"),
            "2 of its 10 steps over 1.2× the median; of them, 2 overlapped nvml:0's readings (the others: 0%), 2 \
             host's (the others: 100%), 1 nvml:0's over 1 ms (the others: 0%)"
        );
        // A reading that ends exactly as a step starts does not overlap it.
        let touching =
            slow_steps(&starts, &steps, &[Readings::all("edge", vec![(0.050, 0.060)])], StepRecords::default())
                .unwrap();
        assert_eq!((touching.during_readings[0].slow, touching.during_readings[0].others_share.get()), (0, 0.0));
        assert!(
            slow_steps(&starts, &steps[..9], &readings, StepRecords::default()).is_none(),
            "steps and starts disagree"
        );
        assert!(
            slow_steps(&[0.0], &[0.01], &readings, StepRecords::default()).is_none(),
            "one step has no median to stand out from"
        );
        assert!(found.thread.is_none(), "no thread accounting, none recorded");
    }

    /// The same ten steps with the thread's accounting: the slow steps' preemptions, waits and
    /// CPU time are summed apart from the others'; accounting for some steps only records none.
    #[test]
    fn slow_steps_say_what_the_thread_did_during_them() {
        let (starts, steps) = ten_steps_two_slow();
        let ran = |cpu_s: f64| ThreadStep { cpu_s, voluntary: 0, involuntary: 0, runnable_s: Some(0.0) };
        let mut thread = vec![ran(0.010); 10];
        // Step 3 lost its CPU to another thread for 20 ms, waiting to run; step 7 waited 20 ms
        // off it; one fast step was preempted too, for a millisecond.
        thread[3] = ThreadStep { cpu_s: 0.010, voluntary: 0, involuntary: 2, runnable_s: Some(0.020) };
        thread[7] = ThreadStep { cpu_s: 0.010, voluntary: 1, involuntary: 0, runnable_s: Some(0.0) };
        thread[0] = ThreadStep { cpu_s: 0.009, voluntary: 0, involuntary: 1, runnable_s: Some(0.001) };
        let found = slow_steps(&starts, &steps, &[], threads(&thread)).unwrap().thread.unwrap();
        assert_eq!((found.slow_preempted, found.others_preempted), (1, 1));
        assert_eq!((found.slow_blocked, found.others_blocked), (1, 0));
        let close = |a: Finite, b: f64| (a.get() - b).abs() < 1e-12;
        assert!(close(found.slow_cpu_s, 0.020) && close(found.slow_wall_s, 0.060), "{found:?}");
        assert!(close(found.others_cpu_s, 0.079) && close(found.others_wall_s, 0.080), "{found:?}");
        assert!(close(found.slow_runnable_s.unwrap(), 0.020) && close(found.others_runnable_s.unwrap(), 0.001));
        assert!(slow_steps(&starts, &steps, &[], threads(&thread[..9])).unwrap().thread.is_none());
        // A step the kernel gave no run-queue delay for: the waits are not summed.
        thread[5].runnable_s = None;
        let found = slow_steps(&starts, &steps, &[], threads(&thread)).unwrap().thread.unwrap();
        assert_eq!((found.slow_runnable_s, found.others_runnable_s), (None, None));
        assert_eq!(found.slow_preempted, 1, "the rest is summed as before");
    }

    /// The same ten steps with libtorch's caching allocator's calls to the driver during each: the
    /// slow steps that made calls are counted apart from the others that did, with every call;
    /// calls for some steps only record none, and a CPU's (none asked) none either.
    #[test]
    fn slow_steps_say_where_the_allocator_called_the_driver() {
        let (starts, steps) = ten_steps_two_slow();
        let mut calls = vec![0u64; 10];
        // Step 3 allocated two blocks; a fast step freed one.
        calls[3] = 2;
        calls[8] = 1;
        let found =
            slow_steps(&starts, &steps, &[], StepRecords { allocator: &calls, ..StepRecords::default() }).unwrap();
        assert_eq!(found.allocator, Some(AllocatorOverSteps { slow: 1, others: 1, calls: 3 }));
        let words = found.words("the median");
        assert!(
            words.ends_with(
                "; libtorch's allocator called the driver for memory in 1 of them (the others: 12%; 3 calls over all \
                 the steps)"
            ),
            "{words}"
        );
        assert_eq!(
            slow_steps(&starts, &steps, &[], StepRecords { allocator: &calls[..9], ..StepRecords::default() })
                .unwrap()
                .allocator,
            None
        );
        let cpu = slow_steps(&starts, &steps, &[], StepRecords::default()).unwrap();
        assert!(cpu.allocator.is_none() && !cpu.words("the median").contains("allocator"));
    }

    /// The same ten steps with the host's issue time of each: the slow steps' issue and wall time
    /// are summed apart from the others', an issue time never counted past its step's end; issue
    /// times for some steps only record none.
    #[test]
    fn slow_steps_say_how_much_of_their_time_the_host_spent_issuing_them() {
        let (starts, steps) = ten_steps_two_slow();
        // Launch-bound steps: 9 ms of each 10 ms issued. Step 3 was issued as fast and waited
        // 20 ms more for the device; step 7 took 29 ms to issue; one fast step's issue time
        // reads past its end (clocks read apart) and counts as its whole step.
        let mut issue_s = vec![0.009; 10];
        issue_s[7] = 0.029;
        issue_s[0] = 0.011;
        let records = StepRecords { issue_s: &issue_s, ..StepRecords::default() };
        let found = slow_steps(&starts, &steps, &[], records).unwrap();
        let issue = found.issue.clone().unwrap();
        let close = |a: Finite, b: f64| (a.get() - b).abs() < 1e-12;
        assert!(close(issue.slow_issue_s, 0.038) && close(issue.slow_wall_s, 0.060), "{issue:?}");
        assert!(close(issue.others_issue_s, 0.073) && close(issue.others_wall_s, 0.080), "{issue:?}");
        let words = found.words("the median");
        assert!(
            words.ends_with("; the host issued them in 63% of their time, 19.00 ms a step (the others: 91%, 9.12 ms)"),
            "{words}"
        );
        let some = StepRecords { issue_s: &issue_s[..9], ..StepRecords::default() };
        assert_eq!(slow_steps(&starts, &steps, &[], some).unwrap().issue, None);
    }

    /// Steps of different shapes are slow by their pace, not their time: a long step at its
    /// table's pace is not slow, a short one at twice it is, and its wall time is what is summed.
    #[test]
    fn slow_steps_by_pace_judge_each_step_against_its_own_shape() {
        let starts = [0.0, 0.1, 0.2, 0.3, 0.4];
        let step_s = [0.010, 0.080, 0.010, 0.020, 0.010];
        let pace = [1.0, 1.0, 1.0, 2.0, 1.1];
        let ran = |cpu_s: f64| ThreadStep { cpu_s, voluntary: 0, involuntary: 0, runnable_s: Some(0.0) };
        let thread: Vec<ThreadStep> = step_s.iter().map(|&s| ran(s)).collect();
        let found = slow_steps_by_pace(&starts, &step_s, &pace, &[], threads(&thread)).unwrap();
        assert_eq!((found.steps, found.slow), (5, 1), "only the step at twice its pace: {found:?}");
        let thread = found.thread.unwrap();
        assert!((thread.slow_wall_s.get() - 0.020).abs() < 1e-12 && (thread.others_wall_s.get() - 0.110).abs() < 1e-12);
        // By time alone the long step would have been the slow one.
        assert_eq!(slow_steps(&starts, &step_s, &[], StepRecords::default()).unwrap().slow, 2);
        assert!(
            slow_steps_by_pace(&starts, &step_s, &pace[..4], &[], StepRecords::default()).is_none(),
            "a pace a step"
        );
    }

    #[test]
    fn a_step_is_launch_bound_from_nine_tenths_of_it_spent_issuing() {
        assert!(launch_bound(0.9, 1.0) && launch_bound(1.0, 1.0));
        assert!(!launch_bound(0.89, 1.0) && !launch_bound(0.1, 1.0));
    }

    fn summary(median_s: f64) -> StepTimeSummary {
        crate::stats::summarise(&[median_s; 3]).unwrap()
    }

    #[test]
    fn decode_figures_follow_the_vocabulary() {
        let shape = CellShape::decode(8, 128);
        let cell = measured(shape, summary(0.02), Finite::new(1.0, "t").unwrap(), Some(140), None).unwrap();
        assert!((cell.tok_per_s_per_user.unwrap().get() - 50.0).abs() < 1e-9);
        assert!((cell.tok_per_s_per_device.unwrap().get() - 400.0).abs() < 1e-9);
    }

    #[test]
    fn prefill_throughput_counts_every_prompt_token() {
        let shape = CellShape::Prefill { batch: 2, prompt_len: 512 };
        let cell = measured(shape, summary(0.5), Finite::new(1.0, "t").unwrap(), None, None).unwrap();
        assert_eq!(cell.tok_per_s_per_user, None);
        assert!((cell.tok_per_s_per_device.unwrap().get() - 2048.0).abs() < 1e-9);
    }

    #[test]
    fn full_depth_scales_the_layer_part_and_keeps_the_fixed_part() {
        // Head alone 2 ms; 4 of 32 layers measured at 10 ms: 8 ms for 4 layers, 64 ms for 32.
        let full = extrapolate(&summary(0.010), summary(0.002), 4, 32).unwrap();
        assert!((full.median_s.get() - 0.066).abs() < 1e-12);
        let shape = CellShape::decode(2, 64);
        let cell = measured(shape, summary(0.010), Finite::new(1.0, "t").unwrap(), None, Some(full)).unwrap();
        assert!((cell.tok_per_s_per_device.unwrap().get() - 2.0 / 0.066).abs() < 1e-9, "figures use the estimate");
        let error = extrapolate(&summary(0.001), summary(0.002), 4, 32).unwrap_err();
        assert!(error.contains("cannot extrapolate"), "{error}");
    }
}
