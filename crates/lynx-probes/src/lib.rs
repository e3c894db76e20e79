//! Every ceiling lynx measures, in one crate: the CUDA driver's view of a device (name, memory,
//! UUID, compute capability), native CUDA memory bandwidth (`kernels/stream.cu` through NVRTC)
//! and cuBLASLt matmul rates (`native`), the CPU's STREAM bandwidth (`cpu`), and libtorch's own
//! copy and matmul on any device, assembled into the roofline record a run keeps (`roofline`).
//!
//! The CUDA libraries are loaded at run time through cudarc, so this crate builds with no CUDA
//! toolkit and runs on hosts with no driver, where every call returns a typed "unavailable"
//! instead of panicking (cudarc panics on first use when a library is missing, so presence is
//! checked before anything else).

pub mod cpu;
mod cuda;
pub mod native;
pub mod roofline;

pub use cuda::{cuda_device, CudaDevice, CudaUnavailable};
