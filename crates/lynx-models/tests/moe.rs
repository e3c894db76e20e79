//! Mixture-of-experts routing and batched expert execution against a naive per-token reference.

use lynx_models::experts::ExpertKernel;
use lynx_models::linear::Fp8Format;
use lynx_models::moe::{MoeLayer, MoeLayout};
use lynx_models::weights::WeightSource;
use lynx_schema::config::{Activation, Moe, Router};
use tch::{Device, Kind, Tensor};

fn layer(router: Router, experts: u32, k: u32, shared: u32) -> MoeLayer {
    let config = Moe {
        num_experts: experts,
        experts_per_token: k,
        intermediate_size: 24,
        shared_experts: shared,
        first_dense_layers: 0,
        expert_bias: true,
        router,
    };
    let source = WeightSource::random(0.2, Kind::Float, Device::Cpu);
    lynx_models::with_generator(Some(11), || MoeLayer::new(&source, "mlp", MoeLayout::Standard, &config, 32, 24))
        .unwrap()
}

fn tokens(n: i64) -> Tensor {
    lynx_models::with_generator(Some(12), || Tensor::randn([n, 32], (Kind::Float, Device::Cpu)))
}

fn routers() -> [(Router, u32, u32); 3] {
    [
        (Router::Softmax { bias: false }, 8, 2),
        (Router::Softmax { bias: true }, 16, 4),
        (Router::SigmoidGrouped { groups: 4, topk_groups: 2, scaling: 2.5 }, 16, 4),
    ]
}

#[test]
fn each_token_goes_to_exactly_k_distinct_experts() {
    for (router, experts, k) in routers() {
        let moe = layer(router.clone(), experts, k, 0);
        let routing = moe.route(&tokens(64)).unwrap();
        assert_eq!(routing.experts.size(), [64, i64::from(k)], "{router:?}");
        let ids = Vec::<i64>::try_from(routing.experts.reshape([-1])).unwrap();
        for token in ids.chunks(k as usize) {
            let mut distinct = token.to_vec();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), k as usize, "{router:?}: {token:?}");
            assert!(token.iter().all(|&e| (0..i64::from(experts)).contains(&e)));
        }
        let weights = Vec::<f32>::try_from(routing.weights.reshape([-1])).unwrap();
        assert!(weights.iter().all(|&w| w > 0.0), "{router:?}");
        let scale = match router {
            Router::SigmoidGrouped { scaling, .. } => scaling as f32,
            Router::Softmax { .. } => 1.0,
        };
        for token in weights.chunks(k as usize) {
            let sum: f32 = token.iter().sum();
            assert!((sum - scale).abs() < 1e-5, "{router:?}: weights sum to {sum}");
        }
    }
}

#[test]
fn grouped_routing_chooses_within_the_best_groups_only() {
    let moe = layer(Router::SigmoidGrouped { groups: 4, topk_groups: 2, scaling: 1.0 }, 16, 4, 0);
    let routing = moe.route(&tokens(64)).unwrap();
    let ids = Vec::<i64>::try_from(routing.experts.reshape([-1])).unwrap();
    for token in ids.chunks(4) {
        let mut groups: Vec<i64> = token.iter().map(|e| e / 4).collect();
        groups.sort();
        groups.dedup();
        assert!(groups.len() <= 2, "experts {token:?} span groups {groups:?}");
    }
}

/// Each token's output by a loop over its experts, one at a time.
fn naive(moe: &MoeLayer, x: &Tensor, routing: &lynx_models::moe::Routing, activation: &Activation) -> Tensor {
    let k = routing.experts.size()[1] as usize;
    let ids = Vec::<i64>::try_from(routing.experts.reshape([-1])).unwrap();
    let weights = Vec::<f64>::try_from(routing.weights.reshape([-1]).to_kind(Kind::Double)).unwrap();
    let rows: Vec<Tensor> = (0..x.size()[0])
        .map(|token| {
            let row = x.narrow(0, token, 1);
            let mut sum = row.zeros_like();
            for slot in 0..k {
                let i = token as usize * k + slot;
                sum += moe.expert(ids[i]).unwrap().forward(&row, activation).unwrap() * weights[i];
            }
            sum
        })
        .collect();
    Tensor::cat(&rows, 0)
}

#[test]
fn every_expert_kernel_matches_a_naive_per_token_reference() {
    for (router, experts, k) in routers() {
        let activation = Activation::SwigluClamped { alpha: 1.702, limit: 7.0 };
        let moe = layer(router.clone(), experts, k, 0);
        for tokens_n in [1, 40] {
            let x = tokens(tokens_n);
            let routing = moe.route(&x).unwrap();
            let reference = naive(&moe, &x, &routing, &activation);
            assert!(reference.abs().max().double_value(&[]) > 1e-3, "the reference must carry signal");
            for kernel in [ExpertKernel::Grouped, ExpertKernel::Gathered, ExpertKernel::Every] {
                let batched = moe.run_experts_with(&x, &routing, &activation, kernel).unwrap();
                let diff = (&batched - &reference).abs().max().double_value(&[]);
                assert!(diff < 1e-5, "{router:?} {kernel:?} {tokens_n} tokens: max |Δ| = {diff}");
            }
        }
        // The CPU runs fp32 grouped; a float64 layer (the parity reference) cannot, and gathers
        // while there are fewer pairs than experts.
        let x = tokens(1);
        assert_eq!(moe.run_experts(&x, &moe.route(&x).unwrap(), &activation).unwrap().size(), [1, 32]);
    }
}

#[test]
fn fp8_experts_stay_near_the_dense_ones_by_every_kernel() {
    let activation = Activation::Swiglu;
    let (router, experts, k) = routers()[1].clone();
    let config = Moe {
        num_experts: experts,
        experts_per_token: k,
        intermediate_size: 24,
        shared_experts: 0,
        first_dense_layers: 0,
        expert_bias: true,
        router,
    };
    let build = |fp8: Option<Fp8Format>| {
        let source = WeightSource::random(0.2, Kind::BFloat16, Device::Cpu).with_fp8(fp8);
        lynx_models::with_generator(Some(11), || MoeLayer::new(&source, "mlp", MoeLayout::Standard, &config, 32, 24))
            .unwrap()
    };
    let dense = build(None);
    let x = tokens(8).to_kind(Kind::BFloat16);
    let routing = dense.route(&x).unwrap();
    let reference =
        dense.run_experts_with(&x, &routing, &activation, ExpertKernel::Every).unwrap().to_kind(Kind::Float);
    // e4m3fn, and e4m3fnuz as MI300-class devices run it.
    for format in [Fp8Format::E4m3fn, Fp8Format::E4m3fnuz] {
        let fp8 = build(Some(format));
        for kernel in [ExpertKernel::Gathered, ExpertKernel::Every] {
            let out = fp8.run_experts_with(&x, &routing, &activation, kernel).unwrap().to_kind(Kind::Float);
            let error = (&out - &reference).norm().double_value(&[]) / reference.norm().double_value(&[]);
            // e4m3 keeps 3 mantissa bits: a few percent, not more, and not nothing.
            assert!(error > 1e-3 && error < 0.1, "{format:?} {kernel:?}: relative error {error}");
        }
    }
}

#[test]
fn shared_experts_add_to_every_token() {
    let activation = Activation::Swiglu;
    let with_shared = layer(Router::Softmax { bias: false }, 8, 2, 1);
    let x = tokens(10).view([2, 5, 32]);
    let full = with_shared.forward(&x, &activation).unwrap();
    let flat = x.reshape([10, 32]);
    let routed = with_shared.run_experts(&flat, &with_shared.route(&flat).unwrap(), &activation).unwrap();
    let shared_part = (full.reshape([10, 32]) - routed).abs().max().double_value(&[]);
    assert!(shared_part > 1e-3, "the shared expert contributed nothing");
}
