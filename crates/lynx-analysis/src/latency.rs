//! Latency bounds: MLPerf Inference's published p99 TTFT/TPOT bounds, and the defaults a suite
//! gets when it names none: the server and interactive bounds of the MLPerf model nearest to the
//! suite's model.

use lynx_schema::config::{LatencyBound, ModelShape};

/// One MLPerf Inference LLM benchmark's bounds (seconds, p99).
struct MlperfModel {
    name: &'static str,
    /// The catalogue's name for the same model (its shape file's `name`): it gets these bounds
    /// as its own.
    catalogue: &'static str,
    /// Total parameters, and whether it is a mixture of experts, for the nearest model.
    parameters: f64,
    moe: bool,
    server: (f64, f64),
    interactive: Option<(f64, f64)>,
}

/// Where the bounds come from.
const SOURCE: &str = "mlcommons/inference_policies inference_rules.adoc (2026-07), loadgen mlperf.conf";

/// MLPerf Inference datacenter LLM bounds (TTFT, TPOT), as ../shared/REFERENCES.md lists them.
const MLPERF: [MlperfModel; 6] = [
    MlperfModel {
        name: "Llama 3.1 8B",
        catalogue: "llama-3.1-8b",
        parameters: 8.03e9,
        moe: false,
        server: (2.0, 0.100),
        interactive: Some((0.500, 0.030)),
    },
    MlperfModel {
        name: "Llama 2 70B",
        catalogue: "llama-2-70b",
        parameters: 69.0e9,
        moe: false,
        server: (2.0, 0.200),
        interactive: Some((0.450, 0.040)),
    },
    MlperfModel {
        name: "Llama 3.1 405B",
        catalogue: "llama-3.1-405b",
        parameters: 405.9e9,
        moe: false,
        server: (6.0, 0.175),
        interactive: Some((4.5, 0.080)),
    },
    MlperfModel {
        name: "Mixtral 8x7B",
        catalogue: "mixtral-8x7b",
        parameters: 46.7e9,
        moe: true,
        server: (2.0, 0.200),
        interactive: None,
    },
    MlperfModel {
        name: "DeepSeek-R1",
        catalogue: "deepseek-r1",
        parameters: 671.0e9,
        moe: true,
        server: (2.0, 0.080),
        interactive: Some((1.5, 0.015)),
    },
    MlperfModel {
        name: "gpt-oss-120b",
        catalogue: "gpt-oss-120b",
        parameters: 116.8e9,
        moe: true,
        server: (3.0, 0.080),
        interactive: Some((2.0, 0.020)),
    },
];

/// MLPerf's own bounds for a model it benchmarks (matched by the catalogue's name); for any
/// other model, those of the nearest MLPerf model: of the same kind (dense or MoE) where there
/// is one, then closest in total parameters on a log scale.
pub fn default_bounds(model: &ModelShape) -> Vec<LatencyBound> {
    let parameters = model.parameters().total.max(1) as f64;
    let moe = model.moe.is_some();
    let distance = |m: &MlperfModel| (u8::from(m.moe != moe), (m.parameters.ln() - parameters.ln()).abs());
    let own = MLPERF.iter().find(|m| m.catalogue == model.name);
    let nearest = own.unwrap_or_else(|| {
        MLPERF
            .iter()
            .min_by(|a, b| distance(a).partial_cmp(&distance(b)).unwrap_or(std::cmp::Ordering::Equal))
            .expect("the table is not empty")
    });
    let source = |scenario: &str| match own {
        Some(_) => format!("MLPerf Inference {} {scenario} p99 bounds ({SOURCE})", nearest.name),
        None => format!(
            "MLPerf Inference {} {scenario} p99 bounds ({} is the nearest MLPerf model to {}; {SOURCE})",
            nearest.name, nearest.name, model.name
        ),
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

    /// Issue 16: every catalogue model's default bounds, and where they come from: MLPerf's own
    /// for the models MLPerf benchmarks, the nearest MLPerf model's for the rest.
    #[test]
    fn every_catalogue_model_gets_its_pinned_bounds() {
        let own = |model: &str| format!("MLPerf Inference {model} {{}} p99 bounds ({SOURCE})");
        let nearest = |model: &str, ours: &str| {
            format!(
                "MLPerf Inference {model} {{}} p99 bounds ({model} is the nearest MLPerf model to {ours}; {SOURCE})"
            )
        };
        type Pinned<'a> = (&'a str, &'a [(f64, f64)], String);
        let expected: [Pinned; 9] = [
            ("llama-3.1-8b", &[(2.0, 0.100), (0.5, 0.030)], own("Llama 3.1 8B")),
            ("llama-3.1-405b", &[(6.0, 0.175), (4.5, 0.080)], own("Llama 3.1 405B")),
            ("mixtral-8x7b", &[(2.0, 0.200)], own("Mixtral 8x7B")),
            ("deepseek-r1", &[(2.0, 0.080), (1.5, 0.015)], own("DeepSeek-R1")),
            ("gpt-oss-120b", &[(3.0, 0.080), (2.0, 0.020)], own("gpt-oss-120b")),
            ("llama-3.3-70b", &[(2.0, 0.200), (0.45, 0.040)], nearest("Llama 2 70B", "llama-3.3-70b")),
            ("qwen3-32b", &[(2.0, 0.200), (0.45, 0.040)], nearest("Llama 2 70B", "qwen3-32b")),
            ("qwen3-30b-a3b", &[(2.0, 0.200)], nearest("Mixtral 8x7B", "qwen3-30b-a3b")),
            ("lynx-ref-small", &[(2.0, 0.100), (0.5, 0.030)], nearest("Llama 3.1 8B", "lynx-ref-small")),
        ];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models");
        let mut pinned = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let model = ModelShape::from_toml(&std::fs::read_to_string(&path).unwrap(), "catalogue").unwrap();
            let (_, figures, source) = expected
                .iter()
                .find(|(name, _, _)| *name == model.name)
                .unwrap_or_else(|| panic!("{} has no pinned bounds here", model.name));
            let bounds = default_bounds(&model);
            let got: Vec<(f64, f64)> = bounds.iter().map(|b| (b.ttft_p99_s, b.tpot_p99_s)).collect();
            assert_eq!(&got, figures, "{}", model.name);
            for (bound, scenario) in bounds.iter().zip(["server", "interactive"]) {
                assert_eq!(bound.name, scenario);
                assert_eq!(bound.source.as_deref(), Some(source.replace("{}", scenario).as_str()), "{}", model.name);
            }
            pinned += 1;
        }
        assert_eq!(pinned, expected.len(), "every pinned model is in the catalogue");
    }

    #[test]
    fn a_suites_own_bounds_win() {
        let own = vec![LatencyBound { name: "mine".into(), ttft_p99_s: 1.0, tpot_p99_s: 0.1, source: None }];
        assert_eq!(bounds_for(&own, &reference()), own);
    }
}
