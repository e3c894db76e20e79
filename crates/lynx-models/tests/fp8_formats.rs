//! An e4m3 layer in each format lynx runs: e4m3fn under libtorch's CPU kernels as a CPU run
//! meets them, and e4m3fnuz (as MI300-class devices run it) under ATen's own CPU kernel. On a CPU
//! with AMX, ATen gives the CPU's scaled matmul to oneDNN, which refuses e4m3fnuz, so this test
//! turns oneDNN off before it runs that format: in a process of its own (this file's one test),
//! since the switch is libtorch's, for every thread.

use lynx_models::linear::{Fp8Format, Linear};
use lynx_models::runtime;
use tch::{Device, Kind, Tensor};

#[test]
fn an_fp8_layer_approximates_the_dense_one_in_each_format() {
    // Drawn holding the generator, as every draw in this crate's tests is.
    let (w, b, x) = lynx_models::with_generator(Some(4), || {
        (
            Tensor::randn([48, 64], (Kind::Float, Device::Cpu)) * 0.05,
            Tensor::randn([48], (Kind::Float, Device::Cpu)) * 0.05,
            Tensor::randn([2, 3, 64], (Kind::Float, Device::Cpu)),
        )
    });
    let dense = Linear::new(w.shallow_clone(), Some(b.shallow_clone()), None).unwrap().forward(&x).unwrap();
    assert!(runtime::onednn_enabled(), "libtorch lets its CPU kernels call oneDNN unless told not to");
    // Dynamic and statically calibrated scales, in each format.
    for format in [Fp8Format::E4m3fn, Fp8Format::E4m3fnuz] {
        if format == Fp8Format::E4m3fnuz {
            runtime::set_onednn(false);
            assert!(!runtime::onednn_enabled());
        }
        let fp8 = Linear::new(w.shallow_clone(), Some(b.shallow_clone()), Some(format)).unwrap();
        let Linear::Fp8 { weight, input, .. } = &fp8 else { panic!("not fp8") };
        assert_eq!((weight.kind(), input.format()), (format.kind(), format));
        for calibrated in [false, true] {
            if calibrated {
                input.begin_calibration();
                let _calibration = fp8.forward(&x.to_kind(Kind::BFloat16)).unwrap();
                assert!(input.end_calibration().unwrap());
            }
            let out = fp8.forward(&x.to_kind(Kind::BFloat16)).unwrap();
            assert_eq!(out.size(), [2, 3, 48]);
            assert_eq!(out.kind(), Kind::BFloat16);
            let error = (out.to_kind(Kind::Float) - &dense).norm().double_value(&[]) / dense.norm().double_value(&[]);
            // e4m3 keeps 3 mantissa bits: a few percent, not more.
            assert!(error > 1e-3 && error < 0.1, "{format:?} calibrated {calibrated}: relative error {error}");
        }
    }
}
