//! A workload the serving phase was serving when the run was stopped: the rates it had served
//! are kept in the result ([`Served::stopped`]), and a resume goes on from them, serving only
//! the rates after, on the window they were served on.

use lynx_analysis::lengths::{draw, sample};
use lynx_analysis::serving::Plan;
use lynx_schema::serving::{Served, ServedRate};
use lynx_schema::value::Reported;

/// Why the entry of a workload a stop cut short lacks the rates after those it holds.
pub(super) const STOPPED: &str = "the run was stopped; a resume (lynx run --resume) serves them";

/// The plan that goes on with `entry`, which a stop cut short after the rates it holds, and
/// those rates: this process's `plan` for its workload and bound, with the window `entry`'s
/// rates were served on (a window grows with what is left of the serving budget, which a
/// resumed process has more of). Why not where `plan` would serve `entry` otherwise: another
/// decode mode (a capture of the loop's graph steps failed since), batch cap or planned rate
/// (the simulation over the same cells finds the same ones).
pub(super) fn going_on(plan: &Plan, entry: &Served) -> Result<(Plan, Vec<ServedRate>), String> {
    let Reported::Known(rates) = &entry.rates else {
        return Err("it holds no rate served".to_owned());
    };
    let Some(first) = rates.first() else { return Err("it holds no rate served".to_owned()) };
    if plan.mode != entry.mode {
        return Err(format!(
            "its rates were served with {} decode steps, and this process serves with {} ones",
            entry.mode, plan.mode
        ));
    }
    if plan.max_batch != entry.max_batch {
        return Err(format!(
            "its rates were served at batch cap {}, and this process plans batch cap {}",
            entry.max_batch, plan.max_batch
        ));
    }
    let planned = plan.rates.as_ref().map_err(|why| format!("this process plans no rate for it ({why})"))?;
    for rate in rates.iter().filter(|r| r.label != ServedRate::UNDER) {
        let served = rate.rate_per_s.get();
        match planned.iter().find(|(label, _)| label == &rate.label) {
            Some((_, now)) if (now - served).abs() <= 1e-9 * served.abs() => {}
            Some((_, now)) => {
                return Err(format!(
                    "its {} rate was {served:.4} requests/s, and this process plans {now:.4}",
                    rate.label
                ))
            }
            None => return Err(format!("this process plans no {} rate", rate.label)),
        }
    }
    let n = first.window_requests();
    let lengths = draw(&plan.workload, plan.seed, n);
    let drawn = |column: fn(&lynx_analysis::lengths::Lengths) -> u32| sample(lengths.iter().map(column));
    if drawn(|l| l.isl).as_ref() != Some(&entry.isl) || drawn(|l| l.osl).as_ref() != Some(&entry.osl) {
        return Err(format!("a window of {n} requests does not draw the lengths its rates were served with"));
    }
    let window = Plan { lengths, window: entry.window.clone(), ..plan.clone() };
    Ok((window, rates.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::config::{LatencyBound, Length, Workload};
    use lynx_schema::result::StepMode;

    fn plan(requests: usize) -> Plan {
        let workload =
            Workload { name: "mix".to_owned(), isl: Length::Uniform { uniform: [16, 48] }, osl: Length::Fixed(8) };
        Plan {
            lengths: draw(&workload, 7, requests),
            workload,
            bound: LatencyBound { name: "loose".to_owned(), ttft_p99_s: 4.0, tpot_p99_s: 0.5, source: None },
            seed: 7,
            max_batch: 8,
            max_prefill_batch: 4,
            chunk: None,
            mode: StepMode::Eager,
            rates: Ok(vec![(ServedRate::BOUNDED.to_owned(), 1.5), (ServedRate::OVER.to_owned(), 1.8)]),
            steady_lengths: Vec::new(),
            window: None,
            budget_s: Some(30.0),
        }
    }

    /// The entry a stop left for `plan` after its latency-bounded rate, `unfinished` of whose
    /// requests serve.max_s cut off.
    fn stopped(plan: &Plan, unfinished: u32) -> Served {
        let entry = lynx_schema::serving::served_fixture(&plan.workload, &plan.bound, &[ServedRate::BOUNDED], true);
        let Reported::Known(mut rates) = entry.rates else { unreachable!("the fixture served its rate") };
        rates[0].requests = plan.lengths.len() as u32 - unfinished;
        rates[0].unfinished = (unfinished > 0).then_some(unfinished);
        Served {
            isl: sample(plan.lengths.iter().map(|l| l.isl)).unwrap(),
            osl: sample(plan.lengths.iter().map(|l| l.osl)).unwrap(),
            max_batch: plan.max_batch,
            mode: plan.mode,
            rates: Reported::Known(rates),
            window: Some("grown to 48 requests".to_owned()),
            cut_short: Some(STOPPED.to_owned()),
            ..entry
        }
    }

    #[test]
    fn a_resume_goes_on_with_the_window_the_stopped_rates_were_served_on() {
        // Served on a window of 48 requests, 3 of them cut off; the resumed process, with more
        // of its budget left, would have grown a window of 96.
        let entry = stopped(&plan(48), 3);
        let (going_on, rates) = going_on(&plan(96), &entry).unwrap();
        assert_eq!(going_on.lengths, plan(48).lengths);
        assert_eq!(going_on.window.as_deref(), Some("grown to 48 requests"));
        assert_eq!(going_on.budget_s, Some(30.0));
        assert_eq!(rates, *entry.rates.known().unwrap());
    }

    #[test]
    fn a_resume_that_would_serve_the_workload_otherwise_says_how() {
        let entry = stopped(&plan(24), 0);
        type Change = fn(&mut Plan);
        let cases: [(Change, &str); 4] = [
            (|p| p.mode = StepMode::Graph, "served with eager decode steps, and this process serves with graph ones"),
            (|p| p.max_batch = 16, "served at batch cap 8, and this process plans batch cap 16"),
            (
                |p| p.rates = Ok(vec![(ServedRate::BOUNDED.to_owned(), 1.6)]),
                "its bounded rate was 1.5000 requests/s, and this process plans 1.6000",
            ),
            (|p| p.rates = Err("no rate held".to_owned()), "this process plans no rate for it (no rate held)"),
        ];
        for (change, said) in cases {
            let mut other = plan(24);
            change(&mut other);
            let why = going_on(&other, &entry).unwrap_err();
            assert!(why.contains(said), "{why}");
        }
        // Lengths that no window of its requests draws: another seed, say.
        let drawn_otherwise = Plan { seed: 8, ..plan(24) };
        let why = going_on(&drawn_otherwise, &entry).unwrap_err();
        assert_eq!(why, "a window of 24 requests does not draw the lengths its rates were served with");
    }
}
