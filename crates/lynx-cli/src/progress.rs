//! A run's progress on stderr: on a terminal a live status line under the lines that stay;
//! elsewhere (logs, CI) only those lines.

use indicatif::{ProgressBar, ProgressStyle};
use lynx_report::text::{check_line, ms, roofline_table, telemetry_criteria, warmup_line};
use lynx_runner::{Observer, WarmupProgress};
use lynx_schema::device::DeviceName;
use lynx_schema::result::{CellRecord, CellShape, CellStatus, Check, HostLink, RunResult, WarmupRecord};
use lynx_schema::roofline::ProbePhase;
use lynx_schema::telemetry::Sample;
use lynx_schema::value::{Finite, Reported};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Seconds between warm-up progress lines.
const WARMUP_REPORT_S: f64 = 5.0;

/// Progress of a run, on stderr: on a terminal a live status line (elapsed time, the current
/// cell, the device's clock, temperature and power, whether equilibrium holds) under the lines
/// that stay; elsewhere (logs, CI) only those lines, and warm-up every few seconds.
pub struct Progress {
    /// Where the result is kept, once the run has written it.
    pub result_path: Option<PathBuf>,
    bar: Option<ProgressBar>,
    next_warmup_report_s: f64,
    /// Where the run's GPU sits and the fastest its link can run (from the start), which the
    /// link as trained at the end of warm-up is held against.
    host_link: Option<Reported<HostLink>>,
}

impl Progress {
    pub fn new() -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}").expect("a valid template"));
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            bar
        });
        Progress { result_path: None, bar, next_warmup_report_s: WARMUP_REPORT_S, host_link: None }
    }

    /// A line that stays (above the status line on a terminal).
    fn say(&self, line: String) {
        match &self.bar {
            Some(bar) => bar.println(format!("lynx: {line}")),
            None => esayln!("lynx: {line}"),
        }
    }

    /// Replace the live status line (a terminal only).
    fn status(&self, message: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The device's clock, temperature and power from a sample, as far as it has them.
fn device_state(sample: Option<&Sample>) -> String {
    let Some(s) = sample else { return String::new() };
    let mut parts = Vec::new();
    if let Some(mhz) = s.sm_clock_mhz {
        parts.push(format!("{mhz:.0} MHz"));
    }
    if let Some(c) = s.temperature_c {
        parts.push(format!("{c:.0} °C"));
    }
    if let Some(w) = s.power_w {
        parts.push(format!("{w:.0} W"));
    }
    parts.iter().map(|p| format!(" · {p}")).collect()
}

impl Observer for Progress {
    fn started(&mut self, result_path: &Path, result: &RunResult) {
        self.result_path = Some(result_path.to_path_buf());
        self.host_link = result.device.host_link.clone();
        let config = &result.config;
        self.say(format!(
            "{} on {} ({}): model {} ({:.1} M parameters, {}){}",
            config.suite.name,
            result.device.device,
            result.device.name,
            config.model.name,
            config.model_parameters as f64 / 1e6,
            config.suite.precision,
            if result.cells.is_empty() {
                String::new()
            } else {
                format!(", resuming with {} in the journal", result.cells.len())
            }
        ));
        let dir = result_path.parent().unwrap_or(Path::new("."));
        self.say(format!("result file {} (resume with `lynx run --resume {}`)", result_path.display(), dir.display()));
        // What the host lets the run use of its CPUs: a container's CPU limit throttles lynx, which
        // makes every cell it throttles unstable.
        if result.host.cpu_allowance.is_some() {
            self.say(format!("host: {}", result.host.cpu_allowance_words()));
        }
        // The CPUs lynx bound the run to, where it was asked to (`--cpus`).
        if let Some(binding) = result.harness.cpu_binding.as_ref().filter(|b| b.cpus.is_some()) {
            self.say(format!("bound to {}", binding.words()));
        }
        // Where a GPU sits against those CPUs: a GPU's eager steps are as fast as its host's issue.
        for line in crate::output::host_link_lines(&result.device).lines() {
            self.say(line.to_owned());
        }
        // Recorded in the result either way; said now where it changes what a GPU's steps measure.
        let blocking =
            result.harness.environment.iter().flatten().find_map(|v| v.strip_prefix("CUDA_LAUNCH_BLOCKING="));
        if blocking.is_some_and(|v| v != "0") && result.device.device != DeviceName::Cpu {
            self.say(
                "warning: CUDA_LAUNCH_BLOCKING is set: every kernel launch waits for its kernel, so eager steps time \
                 their launches and kernels one after another, not the device as it serves"
                    .to_owned(),
            );
        }
        // Once the inputs are accepted (bad input gets its one line, and no estimate), the time
        // the cells still to run are expected to take.
        match lynx_runner::estimate(result) {
            Ok(line) => self.say(line),
            Err(why) => self.say(format!("no wall-time estimate: {why}")),
        }
        // Said now, not only after every cell was measured twice: another process on the device
        // makes each cell measured while it is there unstable.
        if let Some(others) = lynx_runner::devices::other_processes(&result.device).filter(|&n| n > 0) {
            self.say(format!(
                "warning: {others} other process(es) hold a context on {}: each cell measured while one does is \
                 unstable, measured again, then failed by the stability check",
                result.device.device
            ));
        }
        for gap in lynx_analysis::sweep::uncovered(&config.suite) {
            self.say(format!("warning: {gap}"));
        }
        if let Some(differences) = lynx_runner::suite::checkpoint_config_warning(config) {
            self.say(format!("warning: {differences}"));
        }
    }

    fn warned(&mut self, warning: &str) {
        self.say(format!("warning: {}", lynx_report::escape::terminal_text(warning, 400)));
    }

    fn warming(&mut self, progress: &WarmupProgress) {
        let (elapsed_s, max_s) = (progress.elapsed_s, progress.max_s);
        let state = match progress.window {
            Some(w) => format!(
                ": step {}, drift {:+.1}%, spread {:.1}%{}",
                ms(w.median_step_s),
                w.drift * 100.0,
                w.spread * 100.0,
                telemetry_criteria(w)
            ),
            None => String::new(),
        };
        let holds = if progress.holds { " · criteria met, waiting for min_s" } else { " · settling" };
        self.status(format!("warm-up {elapsed_s:.0}/{max_s:.0} s{state}{}{holds}", device_state(progress.latest)));
        if self.bar.is_none() && elapsed_s >= self.next_warmup_report_s {
            self.next_warmup_report_s = elapsed_s + WARMUP_REPORT_S;
            self.say(format!("warm-up {elapsed_s:.0}/{max_s:.0} s{state}"));
        }
    }

    fn warmed(&mut self, warmup: &WarmupRecord) {
        self.say(warmup_line(warmup));
        if let Some(short) = warmup.link_short(self.host_link.as_ref()) {
            self.warned(&short);
        }
    }

    fn rechecked(&mut self, warmup: &WarmupRecord) {
        if let Some(words) = warmup.after_sweep_words() {
            self.say(format!("warm-up: {words}"));
        }
    }

    fn checked(&mut self, check: &Check) {
        self.say(check_line(check));
    }

    fn prepared(&mut self, phases: &[(&'static str, f64)]) {
        if !phases.is_empty() {
            let each: Vec<String> = phases.iter().map(|(name, s)| format!("{name} {s:.1} s")).collect();
            self.say(format!("before warm-up: {}", each.join(", ")));
        }
    }

    fn probed(&mut self, result: &RunResult) {
        let Some(roofline) = &result.roofline else { return };
        for line in roofline_table(roofline).lines() {
            self.say(format!("roofline: {line}"));
        }
        // After the burst probes (the sustained one comes after warm-up), the estimate again
        // from what they measured: the datasheet's, or a CPU's assumed rates, replaced by the
        // device's own.
        if roofline.probes.iter().all(|p| p.phase != ProbePhase::Sustained) {
            match lynx_runner::estimate_from_ceilings(result) {
                Ok(line) => self.say(format!("after the probes, {line}")),
                Err(why) => self.say(format!("no wall-time estimate from the measured ceilings: {why}")),
            }
        }
    }

    fn serving(&mut self, what: &str) {
        self.say(format!("serving {what}"));
    }

    fn served(&mut self, served: &lynx_schema::serving::Served) {
        let name = format!("served {} under {}", served.workload, served.bound.name);
        if let Some(window) = &served.window {
            self.say(format!("{name}: the window: {window}"));
        }
        if let Some(step_down) = &served.step_down {
            self.say(format!("{name}: {step_down}"));
        }
        if let Some(cut_short) = &served.cut_short {
            self.say(format!("{name}: the rates after these were not served: {cut_short}"));
        }
        match &served.rates {
            lynx_schema::value::Reported::Known(rates) => {
                for r in rates {
                    let m = &r.measured;
                    self.say(format!(
                        "{name} at {:.3} req/s ({}): measured p99 TTFT {:.0} ms, p99 TPOT {:.1} ms, {:.1} tok/s; {}",
                        r.rate_per_s.get(),
                        r.label,
                        1e3 * m.ttft_p99_s.get(),
                        1e3 * m.tpot_p99_s.get(),
                        m.output_tok_per_s_per_device.get(),
                        match &r.simulated {
                            lynx_schema::value::Reported::Known(s) => format!(
                                "simulated {:.0} ms, {:.1} ms, {:.1} tok/s{}",
                                1e3 * s.ttft_p99_s.get(),
                                1e3 * s.tpot_p99_s.get(),
                                s.output_tok_per_s_per_device.get(),
                                r.simulated_draws.as_ref().map_or(String::new(), |d| format!(
                                    " (medians of {} draws of the steps; their p99s' 10th–90th percentiles {:.0}–{:.0} \
                                     ms and {:.1}–{:.1} ms)",
                                    d.draws,
                                    1e3 * d.ttft_p99_s[0].get(),
                                    1e3 * d.ttft_p99_s[1].get(),
                                    1e3 * d.tpot_p99_s[0].get(),
                                    1e3 * d.tpot_p99_s[1].get()
                                ))
                            ),
                            other => format!("not simulated: {}", other.reason().unwrap_or_default()),
                        }
                    ));
                    let ratio =
                        |r: Option<lynx_schema::value::Finite>| r.map_or("-".to_owned(), |r| format!("{:.2}", r.get()));
                    self.say(format!(
                        "{name} at {:.3} req/s: steps against the tables (median measured/table): decode {}, prefill \
                         {} (the first after an idle gap: {} and {}); the loop's own time p50/p90/p99 \
                         {:.2}/{:.2}/{:.2} ms over {} iterations; other processes' load {} host CPU cores (stolen \
                         by the hypervisor: {}{}){}{}{}{}{}{}{}",
                        r.rate_per_s.get(),
                        ratio(r.decode_step_ratio),
                        ratio(r.prefill_step_ratio),
                        ratio(r.decode_step_ratio_after_idle),
                        ratio(r.prefill_step_ratio_after_idle),
                        1e3 * r.overhead_s[0].get(),
                        1e3 * r.overhead_s[1].get(),
                        1e3 * r.overhead_s[2].get(),
                        r.iterations,
                        ratio(r.other_cpu_cores),
                        ratio(r.stolen_cpu_cores),
                        r.other_cpu_cores_elsewhere.map_or(String::new(), |c| format!(
                            "; at least {:.2} on CPUs lynx could not run on",
                            c.get()
                        )),
                        r.cpu_throttled_s
                            .map(Finite::get)
                            .filter(|&s| s > 0.0)
                            .map_or(String::new(), |s| format!("; {}", lynx_analysis::checks::Throttled(s))),
                        r.step_spread_words().map_or(String::new(), |words| format!(
                            "; the steps' 90th percentile over the tables' median: {words}"
                        )),
                        r.slow_steps_words().map_or(String::new(), |words| format!("; the slow steps: {words}")),
                        r.loop_paced().map_or(String::new(), |(how, p)| loop_words(how, p)),
                        r.at_loop_replay
                            .as_ref()
                            .map_or(String::new(), |p| loop_words("replaying them in the order they ran", p)),
                        r.batches_off_line_words().map_or(String::new(), |words| format!(
                            "; batches no cell measured, off the table's line: {words}"
                        )),
                        [r.prefill_order_words(), r.pace_after_words(), r.prefill_after_words()]
                            .into_iter()
                            .flatten()
                            .map(|words| format!("; {words}"))
                            .collect::<String>()
                    ));
                    if let Some(words) = lynx_report::text::steady_words(r) {
                        self.say(format!("{name} at {:.3} req/s: {words}", r.rate_per_s.get()));
                    }
                }
            }
            other => self.say(format!("{name}: not served: {}", other.reason().unwrap_or_default())),
        }
    }

    fn cell_started(&mut self, shape: &CellShape, index: usize, total: usize) {
        self.status(format!("cell {index}/{total}: {shape}"));
        if self.bar.is_none() {
            self.say(format!("measuring {shape}"));
        }
    }

    fn cell_done(&mut self, cell: &CellRecord) {
        if let Some(why) = &cell.remeasured {
            self.say(format!("{} was measured once more: {why}", cell.shape));
        }
        match (&cell.status, &cell.step_time) {
            (CellStatus::Error { message }, _) => self.say(format!("{} failed: {message}", cell.shape)),
            (status @ (CellStatus::Oom { .. } | CellStatus::Skipped { .. }), _) => self.say(format!(
                "{} {}: {}",
                cell.shape,
                status.failure().unwrap_or_default(),
                status.message().unwrap_or_default()
            )),
            (CellStatus::Ok, Some(t)) if self.bar.is_some() => {
                let telemetry = cell.telemetry.first().map_or(String::new(), |w| {
                    let mut parts = Vec::new();
                    if let Some(clock) = &w.sm_clock_mhz {
                        parts.push(format!("{:.0} MHz", clock.median.get()));
                    }
                    if let Some(c) = w.temperature_max_c {
                        parts.push(format!("max {:.0} °C", c.get()));
                    }
                    if let Some(p) = w.power_mean_w {
                        parts.push(format!("{:.0} W", p.get()));
                    }
                    parts.iter().map(|p| format!(" · {p}")).collect()
                });
                let cv = t.cv.map_or("-".to_owned(), |cv| format!("{:.1}%", cv.get() * 100.0));
                self.say(format!("{}: median {}, CV {cv}{telemetry}", cell.shape, ms(t.median_s.get())));
            }
            _ => {}
        }
    }
}

/// The simulation at the serving loop's own steps, `how` they were put in, against what the
/// loop measured, for a progress line.
fn loop_words(how: &str, p: &lynx_schema::serving::AtLoopPace) -> String {
    format!(
        "; {how}, the simulation gives p99 TTFT {:.0} ms ({:+.0}%), p99 TPOT {:.1} ms ({:+.0}%)",
        1e3 * p.simulated.ttft_p99_s.get(),
        100.0 * p.relative_error.ttft_p99.get(),
        1e3 * p.simulated.tpot_p99_s.get(),
        100.0 * p.relative_error.tpot_p99.get()
    )
}
