//! Stand-in vendor libraries, so the NVML and ROCm SMI code paths run in tests on a host with
//! no GPU. They are C shared libraries built by this crate's build script from `c/`: the entry
//! points lynx calls, with the types and numbering of `nvml.h` and `rocm_smi.h`, returning fixed
//! readings. A test loads one by path, exactly as lynx loads the real library, and checks
//! lynx's units, decoding and fallbacks against the readings below. They prove lynx reads what
//! the vendor's headers document; they cannot prove a real driver reports what they do.
//!
//! **NVML** ([`NVML`], driver "580.95.05", CUDA driver 13000):
//! - device 0, `GPU-f4ce0000-1111-2222-3333-444444444444` (an H200): every reading; power
//!   fields in mW (instantaneous 412345, average 398000, `nvmlDeviceGetPowerUsage` 397000);
//!   total energy 5000000 mJ plus 125 mJ at every read of it; GPU 55 °C, memory 61 °C; SM 1980
//!   and memory 3201 MHz; 87% busy; 80 GiB of 140.4 GiB used; throttle reasons 0x44 (SW power
//!   cap, HW thermal slowdown); power limits 700 W default, 650 W enforced; ECC on, MIG off,
//!   persistence on; serial 1650924000001, bus 00000000:19:00.0, VBIOS 96.00.AF.00.01;
//!   compute contexts of processes 4001, 4002 and 4003, a graphics one of 4003. Its SM clock
//!   query takes as long as `lynx_fake_nvml_slow_sm_clock(microseconds)`, exported by the
//!   library, last set (no time at all until then): a call that holds the driver, as real ones
//!   can.
//! - device 1, `GPU-f4ce0001-1111-2222-3333-444444444444` (an older board): no power or energy
//!   field, no memory temperature, no energy counter, no throttle reasons, no serial, ECC, MIG
//!   or process list (each `NVML_ERROR_NOT_SUPPORTED`); `nvmlDeviceGetPowerUsage` 250500 mW; GPU 48 °C.
//!
//! **ROCm SMI** ([`ROCM_SMI_5`] reports version 5.7, [`ROCM_SMI_6`] 6.2), one device: power cap
//! 290 W, default 300 W, average power 280.25 W, current socket power 287.5 W (6.x only);
//! energy accumulator 2^30 + 65536 per read at 15.2587890625 µJ (so 16384 J, plus 1 J per
//! read); edge 45, junction 71.5, memory 66 °C; 93% busy (the query taking as long as
//! `lynx_fake_rocm_slow_busy(microseconds)` last set, no time at all until then); system clock
//! 1700 MHz and memory clock 1600 MHz (the 5.x `rsmi_frequencies_t`); 12 GiB of 63.98 GiB VRAM
//! used; PCI 0000:83:00.0; serial 692231000131; VBIOS 113-D67301-063. [`ROCM_SMI_6_THREE`] sees
//! three such devices on buses 0x83, 0x84 and 0x85; [`HIP`] is the HIP runtime of a process
//! that sees two of them, renumbered (see there).
//!
//! **ROCm's math libraries** ([`ROCBLAS`], [`MIOPEN`]): their version calls only, as
//! `rocblas.h` and `miopen.h` declare them, for lynx's record of the libraries a run loaded.

/// The stand-in libnvidia-ml.
pub const NVML: &str = concat!(env!("OUT_DIR"), "/nvml/libnvidia-ml.so.1");
/// The stand-in librocm_smi64 reporting ROCm SMI 5.7.
pub const ROCM_SMI_5: &str = concat!(env!("OUT_DIR"), "/rocm5/librocm_smi64.so.1");
/// The stand-in librocm_smi64 reporting ROCm SMI 6.2.
pub const ROCM_SMI_6: &str = concat!(env!("OUT_DIR"), "/rocm6/librocm_smi64.so.1");
/// ROCm SMI 6.2 seeing three devices, device d on PCI bus 0x83 + d (each reading as device 0's).
pub const ROCM_SMI_6_THREE: &str = concat!(env!("OUT_DIR"), "/rocm6x3/librocm_smi64.so.1");
/// The stand-in libamdhip64: the HIP runtime of a process started with
/// `HIP_VISIBLE_DEVICES=2,0` on a node of three GPUs: ordinal 0 on PCI bus 0000:85:00.0,
/// ordinal 1 on 0000:83:00.0. Its runtime version is 6.2.41133 (`hipRuntimeGetVersion`).
pub const HIP: &str = concat!(env!("OUT_DIR"), "/hip/libamdhip64.so.6");
/// The stand-in librocblas, version "4.2.1.b7c3d1e2" (`rocblas_get_version_string`).
pub const ROCBLAS: &str = concat!(env!("OUT_DIR"), "/rocblas/librocblas.so.4");
/// The stand-in libMIOpen, version 3.2.0 (`miopenGetVersion`).
pub const MIOPEN: &str = concat!(env!("OUT_DIR"), "/miopen/libMIOpen.so.1");

/// NVML device 0's UUID (every reading present).
pub const NVML_FULL_UUID: &str = "GPU-f4ce0000-1111-2222-3333-444444444444";
/// NVML device 1's UUID (the older board).
pub const NVML_OLDER_UUID: &str = "GPU-f4ce0001-1111-2222-3333-444444444444";

/// Make a stand-in library's slowed call take `microseconds` (0: no time at all), through the
/// setter it exports (`lynx_fake_nvml_slow_sm_clock`, `lynx_fake_rocm_slow_busy`). `library` is
/// loaded again by its path, which gives the copy the process already loaded: the delay holds
/// for every caller in this process until it is set again.
pub fn slow_down(library: &str, setter: &str, microseconds: u32) {
    // SAFETY: the path is one of this crate's stand-ins, whose setters take one u32 and return
    // nothing; loading one runs no initialiser.
    unsafe {
        let library = libloading::Library::new(library).expect("the stand-in loads");
        let set: libloading::Symbol<unsafe extern "C" fn(u32)> =
            library.get(setter.as_bytes()).unwrap_or_else(|e| panic!("{setter}: {e}"));
        set(microseconds);
    }
}
