//! The adaptive sweep: which cell runs next, decided from the suite and the cells already
//! measured alone, so a resumed run makes exactly the decisions the first one would have.
//!
//! The sweep is a set of lines: prefill at each prompt length, then decode at each context, in
//! the suite's order. Each line climbs its batch ladder until a batch runs out of memory (or was
//! estimated not to fit and skipped), a batch's median step passes the suite's largest latency bound (TTFT for prefill, TPOT for
//! decode), or the ladder ends. A cell that failed for any other reason is recorded and the
//! climb goes on.

use lynx_schema::config::{LatencyBound, Suite};
use lynx_schema::result::{CellRecord, CellShape, CellStatus};
use lynx_schema::sweep::{LineEnd, StepKind, SweepLine};

/// The next cell to measure (`None` when the sweep is done) and every line's state.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPlan {
    pub next: Option<CellShape>,
    pub lines: Vec<SweepLine>,
}

/// Plan the sweep of `suite` held to `bounds`, given the cells measured so far.
pub fn plan(suite: &Suite, bounds: &[LatencyBound], done: &[CellRecord]) -> SweepPlan {
    let largest = |f: fn(&LatencyBound) -> f64| bounds.iter().map(f).fold(f64::NAN, f64::max);
    let prefill_bound = largest(|b| b.ttft_p99_s);
    let decode_bound = largest(|b| b.tpot_p99_s);
    let prefill = suite.prefill.prompt_lens.iter().map(|&len| (true, len, suite.prefill.ladder()));
    let decode = suite.decode.ctxs.iter().map(|&len| (false, len, suite.decode.ladder()));
    let mut next = None;
    let mut states = Vec::new();
    for (is_prefill, len, ladder) in prefill.chain(decode) {
        let (step, bound) =
            if is_prefill { (StepKind::Prefill, prefill_bound) } else { (StepKind::Decode, decode_bound) };
        let ladder = ladder.batches();
        let shape_of = |batch| {
            if is_prefill {
                CellShape::Prefill { batch, prompt_len: len }
            } else {
                CellShape::Decode { batch, ctx: len }
            }
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
        states.push(SweepLine { step, len, ladder, end });
    }
    SweepPlan { next, lines: states }
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
        while let Some(shape) = plan(&suite(), &bounds(), &done).next {
            order.push(shape);
            done.push(ok(shape, 0.01));
        }
        let decode_batches: Vec<u32> =
            order.iter().filter(|s| matches!(s, CellShape::Decode { ctx: 128, .. })).map(|s| s.batch()).collect();
        assert_eq!(decode_batches, [1, 2, 4, 8]);
        assert_eq!(order.len(), 2 + 4 + 4);
        assert_eq!(order[0], CellShape::Prefill { batch: 1, prompt_len: 64 });
        assert!(plan(&suite(), &bounds(), &done).lines.iter().all(|l| l.end == LineEnd::LadderEnd));
    }

    #[test]
    fn out_of_memory_and_the_bound_stop_a_line_but_an_error_does_not() {
        let d = |batch, ctx| CellShape::Decode { batch, ctx };
        let mut done = vec![
            ok(CellShape::Prefill { batch: 1, prompt_len: 64 }, 0.5),
            ok(CellShape::Prefill { batch: 2, prompt_len: 64 }, 0.9),
            ok(d(1, 128), 0.01),
            CellRecord::failed(d(2, 128), "CUDA out of memory. Tried to allocate 2.00 GiB".into()),
        ];
        assert_eq!(plan(&suite(), &bounds(), &done).next, Some(d(1, 256)));
        done.push(CellRecord::failed(d(1, 256), "some tch error".into()));
        assert_eq!(plan(&suite(), &bounds(), &done).next, Some(d(2, 256)), "an error does not stop the climb");
        done.push(ok(d(2, 256), 0.2));
        let finished = plan(&suite(), &bounds(), &done);
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
        let plan = plan(&suite(), &bounds(), &skipped);
        assert_eq!(plan.lines[1].end, LineEnd::DoesNotFit { batch: 2 });
        assert_eq!(plan.next, Some(d(1, 256)));
    }
}
