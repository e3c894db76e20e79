//! Latency bounds: MLPerf Inference's published p99 TTFT/TPOT bounds, and the defaults a suite
//! gets when it names none: the server and interactive bounds of the MLPerf model nearest to the
//! suite's model.

use lynx_schema::config::{LatencyBound, ModelShape};

/// One MLPerf Inference LLM benchmark's bounds (seconds, p99).
struct MlperfModel {
    name: &'static str,
    /// Total parameters, and whether it is a mixture of experts.
    parameters: f64,
    moe: bool,
    server: (f64, f64),
    interactive: Option<(f64, f64)>,
}

/// MLPerf Inference datacenter LLM bounds (TTFT, TPOT), as listed in shared/REFERENCES.md.
const MLPERF: [MlperfModel; 4] = [
    MlperfModel {
        name: "Llama 2 70B",
        parameters: 69.0e9,
        moe: false,
        server: (2.0, 0.200),
        interactive: Some((0.450, 0.040)),
    },
    MlperfModel { name: "Llama 3.1 405B", parameters: 405.9e9, moe: false, server: (6.0, 0.175), interactive: None },
    MlperfModel {
        name: "DeepSeek-R1",
        parameters: 671.0e9,
        moe: true,
        server: (2.0, 0.080),
        interactive: Some((1.5, 0.015)),
    },
    MlperfModel {
        name: "gpt-oss-120b",
        parameters: 116.8e9,
        moe: true,
        server: (3.0, 0.080),
        interactive: Some((2.0, 0.015)),
    },
];

/// The bounds of the MLPerf model nearest to `model`: of the same kind (dense or MoE) where there
/// is one, then closest in total parameters on a log scale.
pub fn default_bounds(model: &ModelShape) -> Vec<LatencyBound> {
    let parameters = model.parameters().total.max(1) as f64;
    let moe = model.moe.is_some();
    let distance = |m: &MlperfModel| (u8::from(m.moe != moe), (m.parameters.ln() - parameters.ln()).abs());
    let nearest = MLPERF
        .iter()
        .min_by(|a, b| distance(a).partial_cmp(&distance(b)).unwrap_or(std::cmp::Ordering::Equal))
        .expect("the table is not empty");
    let source = |scenario: &str| {
        format!(
            "MLPerf Inference {} {scenario} p99 bounds ({} is the nearest MLPerf model to {})",
            nearest.name, nearest.name, model.name
        )
    };
    let bound = |name: &str, (ttft, tpot): (f64, f64)| LatencyBound {
        name: name.to_owned(),
        ttft_p99_s: ttft,
        tpot_p99_s: tpot,
        source: Some(source(name)),
    };
    std::iter::once(bound("server", nearest.server))
        .chain(nearest.interactive.map(|b| bound("interactive", b)))
        .collect()
}

/// The bounds a suite is held to: its own, else [`default_bounds`].
pub fn bounds_for(own: &[LatencyBound], model: &ModelShape) -> Vec<LatencyBound> {
    if own.is_empty() {
        default_bounds(model)
    } else {
        own.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The catalogue's small dense reference model.
    fn reference() -> ModelShape {
        ModelShape::from_toml(include_str!("../../../models/lynx-ref-small.toml"), "lynx-ref-small").unwrap()
    }

    #[test]
    fn a_small_dense_model_gets_llama_2_70b_server_and_interactive() {
        let bounds = default_bounds(&reference());
        assert_eq!(bounds.len(), 2);
        assert_eq!((bounds[0].name.as_str(), bounds[0].ttft_p99_s, bounds[0].tpot_p99_s), ("server", 2.0, 0.2));
        assert_eq!((bounds[1].name.as_str(), bounds[1].ttft_p99_s, bounds[1].tpot_p99_s), ("interactive", 0.45, 0.04));
        assert!(bounds[0].source.as_deref().unwrap().contains("Llama 2 70B"));
    }

    #[test]
    fn a_suites_own_bounds_win() {
        let own = vec![LatencyBound { name: "mine".into(), ttft_p99_s: 1.0, tpot_p99_s: 0.1, source: None }];
        assert_eq!(bounds_for(&own, &reference()), own);
    }
}
