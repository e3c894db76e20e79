//! The adaptive sweep: which cell runs next, decided from the suite and the cells already
//! measured alone, so a resumed run makes exactly the decisions the first one would have.
//!
//! The sweep is a set of lines: prefill at each prompt length, then decode at each context, in
//! the suite's order. Each line climbs its batch ladder until a batch runs out of memory (or was
//! estimated not to fit and skipped), a batch's median step passes the suite's largest latency bound (TTFT for prefill, TPOT for
//! decode), or the ladder ends. A cell that failed for any other reason is recorded and the
//! climb goes on.
//!
//! A run whose graph parity check passed (on a GPU, before any graph cell) climbs each decode
//! context twice: eager, then graph, as two lines with their own ends.

use lynx_schema::config::{LatencyBound, Suite};
use lynx_schema::result::{CellRecord, CellShape, CellStatus, Check, CheckName, StepMode};
use lynx_schema::sweep::{LineEnd, StepKind, SweepLine};

/// The next cell to measure (`None` when the sweep is done) and every line's state.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPlan {
    pub next: Option<CellShape>,
    pub lines: Vec<SweepLine>,
}

/// The decode modes a run measures, from its checks: eager always; graph too once the run's
/// graph parity check passed (the check is made only where graphs can be captured).
pub fn decode_modes(checks: &[Check]) -> Vec<StepMode> {
    let graphs = checks.iter().any(|c| c.name == CheckName::GraphParity && c.passed);
    StepMode::ALL.into_iter().filter(|&mode| mode == StepMode::Eager || graphs).collect()
}

/// Plan the sweep of `suite` held to `bounds`, given the cells measured so far, with a decode
/// line for each context in each of `modes`.
pub fn plan(suite: &Suite, bounds: &[LatencyBound], done: &[CellRecord], modes: &[StepMode]) -> SweepPlan {
    let largest = |f: fn(&LatencyBound) -> f64| bounds.iter().map(f).fold(f64::NAN, f64::max);
    let prefill_bound = largest(|b| b.ttft_p99_s);
    let decode_bound = largest(|b| b.tpot_p99_s);
    let prefill = suite.prefill.prompt_lens.iter().map(|&len| (None, len, suite.prefill.ladder()));
    let decode = suite
        .decode
        .ctxs
        .iter()
        .flat_map(|&len| modes.iter().map(move |&mode| (Some(mode), len, suite.decode.ladder())));
    let mut next = None;
    let mut states = Vec::new();
    for (decode_mode, len, ladder) in prefill.chain(decode) {
        let (step, bound) =
            if decode_mode.is_none() { (StepKind::Prefill, prefill_bound) } else { (StepKind::Decode, decode_bound) };
        let ladder = ladder.batches();
        let shape_of = |batch| match decode_mode {
            None => CellShape::Prefill { batch, prompt_len: len },
            Some(mode) => CellShape::Decode { batch, ctx: len, mode },
        };
        let mut end = LineEnd::LadderEnd;
        for &batch in &ladder {
            let shape = shape_of(batch);
            let Some(cell) = done.iter().find(|c| c.shape == shape) else {
                end = LineEnd::NotFinished;
                next = next.or(Some(shape));
                break;
            };
            match (&cell.status, cell.median_s()) {
                (CellStatus::Oom { .. }, _) => {
                    end = LineEnd::OutOfMemory { batch };
                    break;
                }
                (CellStatus::Skipped { .. }, _) => {
                    end = LineEnd::DoesNotFit { batch };
                    break;
                }
                (CellStatus::Ok, Some(median)) if median > bound => {
                    end = LineEnd::PassesBound { batch, median_s: median, step, bound_s: bound };
                    break;
                }
                _ => {}
            }
        }
        states.push(SweepLine { step, mode: decode_mode.unwrap_or_default(), len, ladder, end });
    }
    SweepPlan { next, lines: states }
}

/// A workload whose requests reach outside the lengths its suite measures, for the run to warn
/// of before it starts. The simulation charges a prompt shorter than the shortest prefill length
/// (or a decode context shorter than the shortest decode context) that length's step time,
/// longer than its own, so the simulated latencies there come out long; beyond the longest it
/// extrapolates (`sim::StepTable::lookup`).
#[derive(Debug, Clone, PartialEq)]
pub struct LengthGap {
    pub workload: String,
    /// Prompts (prefill) or decode contexts (decode).
    pub step: StepKind,
    /// Whether the requests reach below the shortest length measured, or beyond the longest.
    pub below: bool,
    /// The requests' shortest (below) or longest (beyond) length, in tokens.
    pub reach_tokens: u32,
    /// The shortest (below) or longest (beyond) length the suite measures, in tokens.
    pub measured_tokens: u32,
}

impl std::fmt::Display for LengthGap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, length, key) = match self.step {
            StepKind::Prefill => ("prompts", "prompt length", "[prefill] prompt_lens"),
            StepKind::Decode => ("decode contexts", "decode context", "[decode] ctxs"),
        };
        let (workload, reach, measured) = (&self.workload, self.reach_tokens, self.measured_tokens);
        if self.below {
            write!(
                f,
                "workload {workload}: its {what} from {reach} tokens are shorter than the shortest {length} measured \
                 ({measured}): the simulation charges them that step time, longer than theirs; add {reach} to {key}"
            )
        } else {
            write!(
                f,
                "workload {workload}: its {what} up to {reach} tokens are longer than the longest {length} measured \
                 ({measured}): the simulation extrapolates their step times; add {reach} to {key}"
            )
        }
    }
}

/// Where `suite`'s workloads reach outside the lengths it measures ([`LengthGap`]). A request's
/// decode steps are looked up from its prompt's length up to its prompt and output (a graph
/// step's, at the pool's capacity: the longest request's).
pub fn uncovered(suite: &Suite) -> Vec<LengthGap> {
    let mut gaps = Vec::new();
    for workload in &suite.workloads {
        let ((min_isl, _), (max_isl, max_osl)) = (workload.min_lengths(), workload.max_lengths());
        let reaches = [
            (StepKind::Prefill, min_isl, max_isl, &suite.prefill.prompt_lens),
            (StepKind::Decode, min_isl, max_isl + max_osl, &suite.decode.ctxs),
        ];
        for (step, from, to, lens) in reaches {
            let (Some(&shortest), Some(&longest)) = (lens.iter().min(), lens.iter().max()) else { continue };
            let gap = |below, reach_tokens, measured_tokens| LengthGap {
                workload: workload.name.clone(),
                step,
                below,
                reach_tokens,
                measured_tokens,
            };
            if from < shortest {
                gaps.push(gap(true, from, shortest));
            }
            if to > longest {
                gaps.push(gap(false, to, longest));
            }
        }
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::value::Finite;

    fn suite() -> Suite {
        Suite::from_toml(
            r#"
name = "t"
model = "m"
precision = "fp32"
seed = 1
[prefill]
batches = [1, 2]
prompt_lens = [64]
[decode]
max_batch = 8
ctxs = [128, 256]
"#,
            "t",
        )
        .unwrap()
    }

    fn bounds() -> Vec<LatencyBound> {
        vec![LatencyBound { name: "b".into(), ttft_p99_s: 1.0, tpot_p99_s: 0.1, source: None }]
    }

    fn ok(shape: CellShape, median_s: f64) -> CellRecord {
        let summary = crate::stats::summarise(&[median_s; 3]).unwrap();
        crate::cell::measured(shape, summary, Finite::new(1.0, "t").unwrap(), None, None).unwrap()
    }

    #[test]
    fn lines_run_in_order_and_climb_their_ladders() {
        let mut done = Vec::new();
        let mut order = Vec::new();
        while let Some(shape) = plan(&suite(), &bounds(), &done, &[StepMode::Eager]).next {
            order.push(shape);
            done.push(ok(shape, 0.01));
        }
        let decode_batches: Vec<u32> =
            order.iter().filter(|s| matches!(s, CellShape::Decode { ctx: 128, .. })).map(|s| s.batch()).collect();
        assert_eq!(decode_batches, [1, 2, 4, 8]);
        assert_eq!(order.len(), 2 + 4 + 4);
        assert_eq!(order[0], CellShape::Prefill { batch: 1, prompt_len: 64 });
        assert!(plan(&suite(), &bounds(), &done, &[StepMode::Eager]).lines.iter().all(|l| l.end == LineEnd::LadderEnd));
    }

    #[test]
    fn out_of_memory_and_the_bound_stop_a_line_but_an_error_does_not() {
        let d = CellShape::decode;
        let mut done = vec![
            ok(CellShape::Prefill { batch: 1, prompt_len: 64 }, 0.5),
            ok(CellShape::Prefill { batch: 2, prompt_len: 64 }, 0.9),
            ok(d(1, 128), 0.01),
            CellRecord::failed(d(2, 128), "CUDA out of memory. Tried to allocate 2.00 GiB".into()),
        ];
        assert_eq!(plan(&suite(), &bounds(), &done, &[StepMode::Eager]).next, Some(d(1, 256)));
        done.push(CellRecord::failed(d(1, 256), "some tch error".into()));
        assert_eq!(
            plan(&suite(), &bounds(), &done, &[StepMode::Eager]).next,
            Some(d(2, 256)),
            "an error does not stop the climb"
        );
        done.push(ok(d(2, 256), 0.2));
        let finished = plan(&suite(), &bounds(), &done, &[StepMode::Eager]);
        assert_eq!(finished.next, None);
        assert_eq!(finished.lines[1].end, LineEnd::OutOfMemory { batch: 2 });
        assert!(
            finished.lines[2].end.to_string().contains("passes the largest TPOT bound 0.1 s"),
            "{:?}",
            finished.lines[2]
        );

        // A cell the memory planner skipped ends its line as out of memory would.
        let mut skipped = done[..3].to_vec();
        let mut cell = CellRecord::failed(d(2, 128), String::new());
        cell.status = CellStatus::Skipped { message: "needs 9 GiB".into(), needed_bytes: 9 << 30, free_bytes: 1 << 30 };
        skipped.push(cell);
        let plan = plan(&suite(), &bounds(), &skipped, &[StepMode::Eager]);
        assert_eq!(plan.lines[1].end, LineEnd::DoesNotFit { batch: 2 });
        assert_eq!(plan.next, Some(d(1, 256)));
    }

    /// A run whose graph parity passed climbs each decode context eager, then as a graph, each
    /// line ending on its own; one that has no such check, or failed it, measures eager alone.
    #[test]
    fn graph_lines_follow_each_eager_line_once_graph_parity_passed() {
        let check =
            |passed| Check { name: CheckName::GraphParity, passed, detail: String::new(), measured: None, limit: None };
        assert_eq!(decode_modes(&[]), [StepMode::Eager]);
        assert_eq!(decode_modes(&[check(false)]), [StepMode::Eager]);
        let modes = decode_modes(&[check(true)]);
        assert_eq!(modes, [StepMode::Eager, StepMode::Graph]);
        let mut done = Vec::new();
        let mut order = Vec::new();
        while let Some(shape) = plan(&suite(), &bounds(), &done, &modes).next {
            order.push(shape);
            // Graph steps at batch 4 and above pass the bound; eager ones never do.
            let slow = shape.mode() == StepMode::Graph && shape.batch() >= 4;
            done.push(ok(shape, if slow { 0.5 } else { 0.01 }));
        }
        let at_128: Vec<String> =
            order.iter().filter(|s| s.length() == 128 && s.is_decode()).map(|s| s.to_string()).collect();
        assert_eq!(
            at_128,
            [
                "decode batch 1 ctx 128",
                "decode batch 2 ctx 128",
                "decode batch 4 ctx 128",
                "decode batch 8 ctx 128",
                "decode batch 1 ctx 128 graph",
                "decode batch 2 ctx 128 graph",
                "decode batch 4 ctx 128 graph",
            ]
        );
        let lines = plan(&suite(), &bounds(), &done, &modes).lines;
        assert_eq!(lines.len(), 1 + 2 * 2);
        let graph_lines: Vec<&SweepLine> = lines.iter().filter(|l| l.mode == StepMode::Graph).collect();
        assert_eq!(graph_lines.len(), 2);
        assert!(graph_lines.iter().all(|l| matches!(l.end, LineEnd::PassesBound { batch: 4, .. })), "{graph_lines:?}");
        // The eager lines are unaffected by the graph ones.
        assert!(lines
            .iter()
            .filter(|l| l.step == StepKind::Decode && l.mode == StepMode::Eager)
            .all(|l| l.end == LineEnd::LadderEnd));
    }

    /// A workload's prompts and decode contexts outside the measured lengths are named, each
    /// side on its own, with the length that would cover them; a workload within them is not.
    #[test]
    fn workloads_outside_the_measured_lengths_are_named() {
        let mut suite = suite();
        suite.decode.ctxs = vec![64, 256];
        suite.workloads = vec![lynx_schema::config::Workload::fixed("inside", 64, 128)];
        assert_eq!(uncovered(&suite), []);
        suite.workloads.push(lynx_schema::config::Workload {
            name: "mix".into(),
            isl: lynx_schema::config::Length::Uniform { uniform: [16, 64] },
            osl: 300.into(),
        });
        let gap = |step, below, reach_tokens, measured_tokens| LengthGap {
            workload: "mix".into(),
            step,
            below,
            reach_tokens,
            measured_tokens,
        };
        let gaps = uncovered(&suite);
        assert_eq!(
            gaps,
            [
                gap(StepKind::Prefill, true, 16, 64),
                gap(StepKind::Decode, true, 16, 64),
                gap(StepKind::Decode, false, 364, 256)
            ]
        );
        assert_eq!(
            gaps[0].to_string(),
            "workload mix: its prompts from 16 tokens are shorter than the shortest prompt length measured (64): \
             the simulation charges them that step time, longer than theirs; add 16 to [prefill] prompt_lens"
        );
        assert_eq!(
            gaps[2].to_string(),
            "workload mix: its decode contexts up to 364 tokens are longer than the longest decode context measured \
             (256): the simulation extrapolates their step times; add 364 to [decode] ctxs"
        );
    }

    /// The shipped `cpu` and `standard` suites measure every length their workloads reach, and
    /// every shipped suite measures the prompts its serving phase serves (the serving check
    /// compares the loop with a simulation over those lengths).
    #[test]
    fn the_shipped_suites_measure_the_lengths_their_workloads_reach() {
        let mut names: Vec<String> = std::fs::read_dir(crate::catalogue_dir().join("suites"))
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".toml").map(str::to_owned))
            .collect();
        names.sort();
        assert!(names.iter().any(|n| n == "cpu") && names.iter().any(|n| n == "gpu-check-llama-bf16"), "{names:?}");
        for name in &names {
            let suite = Suite::from_toml(&crate::catalogue(&format!("suites/{name}.toml")), name).unwrap();
            let gaps = uncovered(&suite);
            for gap in &gaps {
                println!("{name}: {gap}");
            }
            if name == "cpu" || name == "standard" {
                assert_eq!(gaps, [], "{name}");
            }
            let served = |workload: &str| suite.serve.as_ref().is_some_and(|s| s.serves(workload, "server"));
            assert!(!gaps.iter().any(|g| g.step == StepKind::Prefill && served(&g.workload)), "{name}: {gaps:?}");
        }
    }
}
