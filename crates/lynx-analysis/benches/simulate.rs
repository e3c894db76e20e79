//! The latency-bounded throughput search: what one figure of a result costs to derive, and so
//! what a shortlist that re-derives figures for a buyer's own bounds pays per device.
//!
//! The step tables are synthetic (a fixed cost plus a per-token-of-context cost, in the shape of
//! the standard suite's grid: decode batch 1 to 1024 at five contexts, prefill batch 1 to 64 at
//! two prompt lengths); the simulation's cost depends on the grid and the request count, not on
//! the values. Each workload is timed three ways: steps at their median (`steady`), drawn from a
//! spread independently (`independent`), and drawn with a persistent level (`persistent`: the
//! warm-up's autocorrelation recorded, docs/SWEEPS.md "Persistence"), which draws groups of up to
//! 256 steps one step at a time. Then what the serving phase's prediction at one served rate
//! costs: the median over its draws of the steps' variation (docs/SWEEPS.md, "Draws").

use criterion::{criterion_group, criterion_main, Criterion};
use lynx_analysis::lengths::Lengths;
use lynx_analysis::serving::DRAWS;
use lynx_analysis::sim::{max_rate, replicated, Persistence, SimSetup, Spread, StepTable, TablePoint};
use lynx_schema::config::LatencyBound;

fn tables(spread: Option<Spread>, persistence: Option<Persistence>) -> (StepTable, StepTable) {
    let mut decode = Vec::new();
    for ctx in [1024u32, 2048, 4096, 8192, 9216] {
        for batch in (0..=10).map(|k| 1u32 << k) {
            let step_s = 0.006 + 2e-10 * f64::from(batch) * f64::from(ctx) + 1e-5 * f64::from(batch);
            decode.push(TablePoint { batch, len: ctx, step_s, power_w: Some(500.0 + f64::from(batch) / 4.0), spread });
        }
    }
    let mut prefill = Vec::new();
    for len in [1024u32, 8192] {
        for batch in (0..=6).map(|k| 1u32 << k) {
            let tokens = f64::from(batch) * f64::from(len);
            prefill.push(TablePoint { batch, len, step_s: 0.01 + 6e-8 * tokens, power_w: Some(650.0), spread });
        }
    }
    (StepTable::new(&prefill), StepTable::new(&decode).with_persistence(persistence))
}

/// Whole-prompt prefill of up to 64 prompts a step, batch cap `max_batch`, seed 1.
fn setup<'a>(
    (prefill, decode): (&'a StepTable, &'a StepTable),
    lengths: &'a [Lengths],
    max_batch: u32,
) -> SimSetup<'a> {
    SimSetup {
        prefill,
        decode,
        lengths,
        max_batch,
        max_prefill_batch: 64,
        chunk: None,
        graph_steps: false,
        seed: 1,
        draw: 0,
        stop: None,
    }
}

fn bench(c: &mut Criterion) {
    let spread = Spread::new(0.95, 1.03, 1.08, 1.2).expect("ordered");
    let variants = [
        ("steady", None, None),
        ("independent", Some(spread), None),
        // A GPU-like spread whose consecutive 20 ms steps are alike at 0.5.
        ("persistent", Some(spread), Persistence::fit(0.5, 0.3, 0.02)),
    ];
    // MLPerf's server bound for Llama 2 70B: 2 s to the first token, 200 ms a token after it.
    let bound = LatencyBound { name: "server".into(), ttft_p99_s: 2.0, tpot_p99_s: 0.2, source: None };
    let mut group = c.benchmark_group("latency_bounded");
    group.sample_size(10);
    for ((name, isl, osl), (variant, spread, persistence)) in
        [("chat 1k/1k", 1024, 1024), ("summarise 8k/1k", 8192, 1024), ("reason 1k/8k", 1024, 8192)]
            .into_iter()
            .flat_map(|workload| variants.map(|v| (workload, v)))
    {
        let (prefill, decode) = tables(spread, persistence);
        let name = format!("{name}, {variant}");
        let lengths = vec![Lengths { isl, osl }; 2000];
        let setup = setup((&prefill, &decode), &lengths, 1024);
        let found = max_rate(&setup, &bound).unwrap().unwrap();
        println!(
            "{name}: {:.1} req/s, {:.0} output tok/s under 2 s / 200 ms",
            found.rate_per_s, found.output_tok_per_s
        );
        group.bench_function(&name, |b| b.iter(|| max_rate(&setup, &bound).unwrap()));
    }
    group.finish();

    // What the serving phase pays for the simulation's prediction at one served rate: the
    // median over `DRAWS` draws of the steps, for the standard suite's 200 chat requests.
    let mut group = c.benchmark_group("served_rate_prediction");
    group.sample_size(10);
    let (prefill, decode) = tables(Some(spread), Persistence::fit(0.5, 0.3, 0.02));
    let lengths = vec![Lengths { isl: 1024, osl: 1024 }; 200];
    let setup = setup((&prefill, &decode), &lengths, 256);
    let rate = max_rate(&setup, &bound).unwrap().unwrap().rate_per_s;
    let name = format!("chat 1k/1k, 200 requests, {DRAWS} draws, persistent");
    group.bench_function(&name, |b| b.iter(|| replicated(&setup, rate, DRAWS).unwrap()));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
