//! The CUDA driver API, reached through cudarc with libcuda loaded at run time.

use cudarc::driver::{result, sys};

/// What the CUDA driver says about one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDevice {
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Total device memory.
    pub memory_bytes: u64,
    /// Board UUID in NVML's form, `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub uuid: String,
    /// Compute capability, e.g. `9.0`.
    pub compute_capability: String,
    /// L2 cache size, bytes.
    pub l2_bytes: u64,
}

/// Why the CUDA driver cannot describe a device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CudaUnavailable {
    #[error("no CUDA driver (libcuda) on this host")]
    NoDriver,
    #[error("CUDA driver: {0}")]
    Driver(String),
}

impl From<result::DriverError> for CudaUnavailable {
    fn from(error: result::DriverError) -> Self {
        CudaUnavailable::Driver(error.to_string())
    }
}

/// The CUDA driver's description of device `ordinal`.
pub fn cuda_device(ordinal: u32) -> Result<CudaDevice, CudaUnavailable> {
    // SAFETY: only tries to load libcuda; no CUDA call is made.
    if !unsafe { sys::is_culib_present() } {
        return Err(CudaUnavailable::NoDriver);
    }
    result::init()?;
    let ordinal = i32::try_from(ordinal).map_err(|_| CudaUnavailable::Driver(format!("no device {ordinal}")))?;
    let device = result::device::get(ordinal)?;
    // SAFETY: `device` came from cuDeviceGet above.
    let memory_bytes = unsafe { result::device::total_mem(device) }?;
    let attribute = |which| {
        // SAFETY: `device` came from cuDeviceGet above.
        unsafe { result::device::get_attribute(device, which) }
    };
    let major = attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let l2_bytes = attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?.max(0) as u64;
    let uuid = result::device::get_uuid(device)?;
    Ok(CudaDevice {
        name: result::device::get_name(device)?,
        memory_bytes: memory_bytes as u64,
        uuid: format_uuid(&uuid.bytes.map(|b| b as u8)),
        compute_capability: format!("{major}.{minor}"),
        l2_bytes,
    })
}

/// NVML's spelling of a board UUID.
fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("GPU-{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_spelt_as_nvml_spells_them() {
        let bytes: [u8; 16] = core::array::from_fn(|i| (i * 17) as u8);
        assert_eq!(format_uuid(&bytes), "GPU-00112233-4455-6677-8899-aabbccddeeff");
    }

    #[test]
    fn a_host_without_a_driver_gets_an_error_not_a_panic() {
        // SAFETY: only tries to load libcuda.
        let present = unsafe { sys::is_culib_present() };
        match cuda_device(0) {
            Err(CudaUnavailable::NoDriver) => assert!(!present),
            Err(CudaUnavailable::Driver(message)) => assert!(present, "{message}"),
            Ok(device) => {
                assert!(present);
                assert!(device.memory_bytes > 0 && device.uuid.starts_with("GPU-"));
            }
        }
    }
}
