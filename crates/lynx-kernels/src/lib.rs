//! Native access to GPUs, beside libtorch: today the CUDA driver's view of a device (name,
//! memory, UUID, compute capability); the roofline probes of the roofline issue join it.
//!
//! The CUDA driver is loaded at run time through cudarc, so this crate builds with no CUDA
//! toolkit and runs on hosts with no driver, where every call returns
//! [`CudaUnavailable::NoDriver`] instead of panicking (cudarc panics on first use when libcuda is
//! missing, so presence is checked before anything else).

mod cuda;

pub use cuda::{cuda_device, CudaDevice, CudaUnavailable};
