//! librocm_smi64, loaded at run time: the `rsmi_*` functions lynx calls, with the C types of
//! `rocm_smi/rocm_smi.h`. The only module of this crate with `unsafe` code.

use libloading::{Library, Symbol};
use std::ffi::{c_char, CStr};

type Status = u32;
const RSMI_STATUS_SUCCESS: Status = 0;

/// `rsmi_frequencies_t` as ROCm SMI 5.x lays it out (RSMI_MAX_NUM_FREQUENCIES = 32). Later
/// versions put a `bool has_deep_sleep` first, so this layout is used only for major version 5.
#[repr(C)]
pub struct Frequencies5 {
    pub num_supported: u32,
    pub current: u32,
    pub frequency: [u64; 32],
}

/// The loaded library, initialised.
pub struct RocmSmiLib {
    lib: Library,
    pub version: (u32, u32, u32),
}

/// A call that returned a status other than success, as ROCm SMI's status string names it.
fn describe(lib: &Library, status: Status) -> String {
    // SAFETY: rsmi_status_string takes a status and writes a pointer to a static C string.
    unsafe {
        let Ok(status_string) =
            lib.get::<unsafe extern "C" fn(Status, *mut *const c_char) -> Status>(b"rsmi_status_string\0")
        else {
            return format!("status {status}");
        };
        let mut text: *const c_char = std::ptr::null();
        if status_string(status, &mut text) == RSMI_STATUS_SUCCESS && !text.is_null() {
            format!("{} (status {status})", CStr::from_ptr(text).to_string_lossy())
        } else {
            format!("status {status}")
        }
    }
}

impl RocmSmiLib {
    /// Load librocm_smi64 from the loader's search path and call `rsmi_init`, or say which step
    /// failed and why.
    pub fn load() -> Result<RocmSmiLib, String> {
        // SAFETY: loading the library runs its initialisers; ROCm SMI's have no preconditions.
        let lib = unsafe { Library::new("librocm_smi64.so.1").or_else(|_| Library::new("librocm_smi64.so")) }
            .map_err(|e| format!("librocm_smi64 cannot be loaded: {e}"))?;
        RocmSmiLib::init(lib)
    }

    /// Load the library at `path` and call `rsmi_init`, or say which step failed and why.
    pub fn load_from(path: &std::path::Path) -> Result<RocmSmiLib, String> {
        // SAFETY: as in `load`.
        let lib = unsafe { Library::new(path) }
            .map_err(|e| format!("librocm_smi64 cannot be loaded from {}: {e}", path.display()))?;
        RocmSmiLib::init(lib)
    }

    fn init(lib: Library) -> Result<RocmSmiLib, String> {
        // SAFETY: rsmi_init(uint64_t flags) with no flags; rsmi_version_get fills a struct of
        // three uint32 and a const char* build string, which we do not read beyond.
        unsafe {
            let init: Symbol<unsafe extern "C" fn(u64) -> Status> =
                lib.get(b"rsmi_init\0").map_err(|e| format!("librocm_smi64 has no rsmi_init: {e}"))?;
            let status = init(0);
            if status != RSMI_STATUS_SUCCESS {
                return Err(format!("rsmi_init failed: {}", describe(&lib, status)));
            }
            #[repr(C)]
            struct Version {
                major: u32,
                minor: u32,
                patch: u32,
                build: *const c_char,
            }
            let mut version = Version { major: 0, minor: 0, patch: 0, build: std::ptr::null() };
            if let Ok(get) = lib.get::<unsafe extern "C" fn(*mut Version) -> Status>(b"rsmi_version_get\0") {
                get(&mut version);
            }
            Ok(RocmSmiLib { version: (version.major, version.minor, version.patch), lib })
        }
    }

    fn status(&self, status: Status) -> Result<(), String> {
        if status == RSMI_STATUS_SUCCESS {
            Ok(())
        } else {
            Err(describe(&self.lib, status))
        }
    }

    /// Call `name` with the device index and one out-parameter of type `T`.
    fn get<T: Default>(&self, name: &[u8], device: u32) -> Result<T, String> {
        // SAFETY: every function called through here has the signature
        // rsmi_status_t f(uint32_t dv_ind, T *out), as rocm_smi.h declares it.
        unsafe {
            let f: Symbol<unsafe extern "C" fn(u32, *mut T) -> Status> =
                self.lib.get(name).map_err(|e| e.to_string())?;
            let mut out = T::default();
            self.status(f(device, &mut out))?;
            Ok(out)
        }
    }

    /// Call `name(dv_ind, index, T *out)` (sensor index, memory type, clock type).
    fn get_indexed<T: Default>(&self, name: &[u8], device: u32, index: u32) -> Result<T, String> {
        // SAFETY: as `get`, for functions declared rsmi_status_t f(uint32_t, uint32_t, T *out)
        // (enum parameters are 32-bit in the C ABI).
        unsafe {
            let f: Symbol<unsafe extern "C" fn(u32, u32, *mut T) -> Status> =
                self.lib.get(name).map_err(|e| e.to_string())?;
            let mut out = T::default();
            self.status(f(device, index, &mut out))?;
            Ok(out)
        }
    }

    /// Call `name(dv_ind, char *buffer, len)` and return the string.
    fn string(&self, name: &[u8], device: u32) -> Result<String, String> {
        let mut buffer = [0u8; 256];
        // SAFETY: rsmi_dev_{name,serial_number,vbios_version}_get(uint32_t, char *, len) write at
        // most len bytes, NUL-terminated; the buffer outlives the call.
        unsafe {
            let f: Symbol<unsafe extern "C" fn(u32, *mut c_char, u32) -> Status> =
                self.lib.get(name).map_err(|e| e.to_string())?;
            self.status(f(device, buffer.as_mut_ptr().cast(), buffer.len() as u32))?;
        }
        Ok(CStr::from_bytes_until_nul(&buffer).map_err(|e| e.to_string())?.to_string_lossy().into_owned())
    }

    pub fn device_count(&self) -> Result<u32, String> {
        // SAFETY: rsmi_num_monitor_devices(uint32_t *).
        unsafe {
            let f: Symbol<unsafe extern "C" fn(*mut u32) -> Status> =
                self.lib.get(b"rsmi_num_monitor_devices\0").map_err(|e| e.to_string())?;
            let mut count = 0;
            self.status(f(&mut count))?;
            Ok(count)
        }
    }

    pub fn name(&self, d: u32) -> Result<String, String> {
        self.string(b"rsmi_dev_name_get\0", d)
    }
    pub fn serial(&self, d: u32) -> Result<String, String> {
        self.string(b"rsmi_dev_serial_number_get\0", d)
    }
    pub fn vbios(&self, d: u32) -> Result<String, String> {
        self.string(b"rsmi_dev_vbios_version_get\0", d)
    }
    pub fn unique_id(&self, d: u32) -> Result<u64, String> {
        self.get(b"rsmi_dev_unique_id_get\0", d)
    }
    pub fn pci_id(&self, d: u32) -> Result<u64, String> {
        self.get(b"rsmi_dev_pci_id_get\0", d)
    }
    /// VRAM (RSMI_MEM_TYPE_VRAM = 0) total and used, bytes.
    pub fn memory_total(&self, d: u32) -> Result<u64, String> {
        self.get_indexed(b"rsmi_dev_memory_total_get\0", d, 0)
    }
    pub fn memory_used(&self, d: u32) -> Result<u64, String> {
        self.get_indexed(b"rsmi_dev_memory_usage_get\0", d, 0)
    }
    /// Power cap and its default, µW (sensor 0).
    pub fn power_cap_uw(&self, d: u32) -> Result<u64, String> {
        self.get_indexed(b"rsmi_dev_power_cap_get\0", d, 0)
    }
    pub fn power_cap_default_uw(&self, d: u32) -> Result<u64, String> {
        self.get(b"rsmi_dev_power_cap_default_get\0", d)
    }
    /// Current socket power, µW (MI300 and newer; ROCm SMI 6).
    pub fn current_socket_power_uw(&self, d: u32) -> Result<u64, String> {
        self.get(b"rsmi_dev_current_socket_power_get\0", d)
    }
    /// Average socket power, µW (sensor 0).
    pub fn average_power_uw(&self, d: u32) -> Result<u64, String> {
        self.get_indexed(b"rsmi_dev_power_ave_get\0", d, 0)
    }
    /// Energy accumulator times its resolution, in µJ.
    pub fn energy_uj(&self, d: u32) -> Result<f64, String> {
        let (mut count, mut resolution, mut timestamp) = (0u64, 0f32, 0u64);
        // SAFETY: rsmi_dev_energy_count_get(uint32_t, uint64_t *power, float *resolution,
        // uint64_t *timestamp).
        unsafe {
            let f: Symbol<unsafe extern "C" fn(u32, *mut u64, *mut f32, *mut u64) -> Status> =
                self.lib.get(b"rsmi_dev_energy_count_get\0").map_err(|e| e.to_string())?;
            self.status(f(d, &mut count, &mut resolution, &mut timestamp))?;
        }
        Ok(count as f64 * f64::from(resolution))
    }
    /// Current temperature of sensor `sensor` (0 edge, 1 junction, 2 memory), °C.
    pub fn temperature_c(&self, d: u32, sensor: u32) -> Result<f64, String> {
        let mut milli = 0i64;
        // SAFETY: rsmi_dev_temp_metric_get(uint32_t, uint32_t sensor, rsmi_temperature_metric_t
        // metric (RSMI_TEMP_CURRENT = 0), int64_t *).
        unsafe {
            let f: Symbol<unsafe extern "C" fn(u32, u32, u32, *mut i64) -> Status> =
                self.lib.get(b"rsmi_dev_temp_metric_get\0").map_err(|e| e.to_string())?;
            self.status(f(d, sensor, 0, &mut milli))?;
        }
        Ok(milli as f64 / 1000.0)
    }
    pub fn busy_percent(&self, d: u32) -> Result<u32, String> {
        self.get(b"rsmi_dev_busy_percent_get\0", d)
    }
    /// Current frequency of clock `kind` (RSMI_CLK_TYPE_SYS = 0, RSMI_CLK_TYPE_MEM = 4), MHz,
    /// with ROCm SMI 5's `rsmi_frequencies_t`.
    pub fn clock_mhz(&self, d: u32, kind: u32) -> Result<f64, String> {
        if self.version.0 != 5 {
            return Err(format!(
                "rsmi_frequencies_t of ROCm SMI {}.{} is not a layout lynx knows (5.x only)",
                self.version.0, self.version.1
            ));
        }
        let mut frequencies = Frequencies5 { num_supported: 0, current: 0, frequency: [0; 32] };
        // SAFETY: rsmi_dev_gpu_clk_freq_get(uint32_t, rsmi_clk_type_t, rsmi_frequencies_t *) with
        // the 5.x layout, checked above.
        unsafe {
            let f: Symbol<unsafe extern "C" fn(u32, u32, *mut Frequencies5) -> Status> =
                self.lib.get(b"rsmi_dev_gpu_clk_freq_get\0").map_err(|e| e.to_string())?;
            self.status(f(d, kind, &mut frequencies))?;
        }
        let current = frequencies.current as usize;
        if current >= frequencies.num_supported as usize || current >= frequencies.frequency.len() {
            return Err(format!("current level {current} of {} levels", frequencies.num_supported));
        }
        Ok(frequencies.frequency[current] as f64 / 1e6)
    }
}
