//! librocm_smi64, loaded at run time: the `rsmi_*` functions lynx calls, with the C types of
//! `rocm_smi/rocm_smi.h`, each resolved once when the library is loaded. The only module of this
//! crate with `unsafe` code.

use libloading::Library;
use std::ffi::{c_char, CStr};

type Status = u32;
const RSMI_STATUS_SUCCESS: Status = 0;

/// Why a ROCm SMI call gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmiError {
    /// The library could not be loaded (`from`: where it was looked for).
    #[error("librocm_smi64 cannot be loaded{from}: {reason}")]
    Load { from: String, reason: String },
    /// The library does not export this function.
    #[error("librocm_smi64 has no {0}")]
    Missing(&'static str),
    /// The call returned a status other than success, named as ROCm SMI's status string names it.
    #[error("{}", describe(*status, text.as_deref()))]
    Status { call: &'static str, status: Status, text: Option<String> },
    /// `rsmi_init` failed.
    #[error("rsmi_init failed: {}", describe(*status, text.as_deref()))]
    Init { status: Status, text: Option<String> },
    /// A value lynx cannot read from this library or device.
    #[error("{0}")]
    Unreadable(String),
}

fn describe(status: Status, text: Option<&str>) -> String {
    match text {
        Some(text) => format!("{text} (status {status})"),
        None => format!("status {status}"),
    }
}

/// `rsmi_frequencies_t` as ROCm SMI 5.x lays it out (RSMI_MAX_NUM_FREQUENCIES = 32). Later
/// versions put a `bool has_deep_sleep` first, so this layout is used only for major version 5.
#[repr(C)]
#[derive(Default)]
pub struct Frequencies5 {
    pub num_supported: u32,
    pub current: u32,
    pub frequency: [u64; 32],
}

/// `rsmi_process_info_t`: a process holding compute resources on some device (KFD).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct ProcessInfo {
    process_id: u32,
    pasid: u32,
    vram_usage: u64,
    sdma_usage: u64,
    cu_occupancy: u32,
}

/// `f(uint32_t dv_ind, T *out)`.
type Get<T> = unsafe extern "C" fn(u32, *mut T) -> Status;
/// `f(uint32_t dv_ind, uint32_t index, T *out)` (sensor index, memory type, clock type: enum
/// parameters are 32-bit in the C ABI).
type GetIndexed<T> = unsafe extern "C" fn(u32, u32, *mut T) -> Status;
/// `f(uint32_t dv_ind, char *buffer, uint32_t len)`.
type GetString = unsafe extern "C" fn(u32, *mut c_char, u32) -> Status;

/// Every function lynx calls, resolved once; `None` where the library lacks it.
struct Symbols {
    status_string: Option<unsafe extern "C" fn(Status, *mut *const c_char) -> Status>,
    num_monitor_devices: Option<unsafe extern "C" fn(*mut u32) -> Status>,
    name: Option<GetString>,
    serial_number: Option<GetString>,
    vbios_version: Option<GetString>,
    unique_id: Option<Get<u64>>,
    pci_id: Option<Get<u64>>,
    memory_total: Option<GetIndexed<u64>>,
    memory_usage: Option<GetIndexed<u64>>,
    power_cap: Option<GetIndexed<u64>>,
    power_cap_default: Option<Get<u64>>,
    current_socket_power: Option<Get<u64>>,
    power_ave: Option<GetIndexed<u64>>,
    energy_count: Option<unsafe extern "C" fn(u32, *mut u64, *mut f32, *mut u64) -> Status>,
    temp_metric: Option<unsafe extern "C" fn(u32, u32, u32, *mut i64) -> Status>,
    busy_percent: Option<Get<u32>>,
    gpu_clk_freq: Option<GetIndexed<Frequencies5>>,
    compute_processes: Option<unsafe extern "C" fn(*mut ProcessInfo, *mut u32) -> Status>,
    process_gpus: Option<unsafe extern "C" fn(u32, *mut u32, *mut u32) -> Status>,
}

/// The function `name` of `lib` as the pointer type `F`, or `None` when the library lacks it.
///
/// # Safety
/// `F` must be the function pointer type `rocm_smi.h` declares for `name`, and the pointer must
/// not be called after `lib` is unloaded.
unsafe fn symbol<F: Copy>(lib: &Library, name: &[u8]) -> Option<F> {
    // SAFETY: the caller names the symbol's declared type.
    unsafe { lib.get::<F>(name).ok().map(|symbol| *symbol) }
}

impl Symbols {
    fn resolve(lib: &Library) -> Symbols {
        // SAFETY: each type below is the declaration in rocm_smi.h of the function it is resolved
        // from; the pointers live in `RocmSmiLib` beside the library, which is never unloaded
        // while they can be called.
        unsafe {
            Symbols {
                status_string: symbol(lib, b"rsmi_status_string\0"),
                num_monitor_devices: symbol(lib, b"rsmi_num_monitor_devices\0"),
                name: symbol(lib, b"rsmi_dev_name_get\0"),
                serial_number: symbol(lib, b"rsmi_dev_serial_number_get\0"),
                vbios_version: symbol(lib, b"rsmi_dev_vbios_version_get\0"),
                unique_id: symbol(lib, b"rsmi_dev_unique_id_get\0"),
                pci_id: symbol(lib, b"rsmi_dev_pci_id_get\0"),
                memory_total: symbol(lib, b"rsmi_dev_memory_total_get\0"),
                memory_usage: symbol(lib, b"rsmi_dev_memory_usage_get\0"),
                power_cap: symbol(lib, b"rsmi_dev_power_cap_get\0"),
                power_cap_default: symbol(lib, b"rsmi_dev_power_cap_default_get\0"),
                current_socket_power: symbol(lib, b"rsmi_dev_current_socket_power_get\0"),
                power_ave: symbol(lib, b"rsmi_dev_power_ave_get\0"),
                energy_count: symbol(lib, b"rsmi_dev_energy_count_get\0"),
                temp_metric: symbol(lib, b"rsmi_dev_temp_metric_get\0"),
                busy_percent: symbol(lib, b"rsmi_dev_busy_percent_get\0"),
                gpu_clk_freq: symbol(lib, b"rsmi_dev_gpu_clk_freq_get\0"),
                compute_processes: symbol(lib, b"rsmi_compute_process_info_get\0"),
                process_gpus: symbol(lib, b"rsmi_compute_process_gpus_get\0"),
            }
        }
    }
}

/// The loaded library, initialised, with its functions resolved.
pub struct RocmSmiLib {
    symbols: Symbols,
    pub version: (u32, u32, u32),
    /// Kept loaded for as long as the resolved pointers in `symbols` may be called.
    _lib: Library,
}

/// `f`, or the error naming the function the library lacks.
fn need<F>(f: Option<F>, name: &'static str) -> Result<F, SmiError> {
    f.ok_or(SmiError::Missing(name))
}

impl RocmSmiLib {
    /// Load librocm_smi64 from the loader's search path and call `rsmi_init`, or say which step
    /// failed and why.
    pub fn load() -> Result<RocmSmiLib, SmiError> {
        // SAFETY: loading the library runs its initialisers; ROCm SMI's have no preconditions.
        let lib = unsafe { Library::new("librocm_smi64.so.1").or_else(|_| Library::new("librocm_smi64.so")) }
            .map_err(|e| SmiError::Load { from: String::new(), reason: e.to_string() })?;
        RocmSmiLib::init(lib)
    }

    /// Load the library at `path` and call `rsmi_init`, or say which step failed and why.
    pub fn load_from(path: &std::path::Path) -> Result<RocmSmiLib, SmiError> {
        // SAFETY: as in `load`.
        let lib = unsafe { Library::new(path) }
            .map_err(|e| SmiError::Load { from: format!(" from {}", path.display()), reason: e.to_string() })?;
        RocmSmiLib::init(lib)
    }

    fn init(lib: Library) -> Result<RocmSmiLib, SmiError> {
        let symbols = Symbols::resolve(&lib);
        #[repr(C)]
        struct Version {
            major: u32,
            minor: u32,
            patch: u32,
            build: *const c_char,
        }
        let mut version = Version { major: 0, minor: 0, patch: 0, build: std::ptr::null() };
        // SAFETY: rsmi_init(uint64_t flags) with no flags; rsmi_version_get fills a struct of
        // three uint32 and a const char* build string, which we do not read beyond.
        unsafe {
            let init: unsafe extern "C" fn(u64) -> Status =
                symbol(&lib, b"rsmi_init\0").ok_or(SmiError::Missing("rsmi_init"))?;
            let status = init(0);
            if status != RSMI_STATUS_SUCCESS {
                return Err(SmiError::Init { status, text: status_text(symbols.status_string, status) });
            }
            let get: Option<unsafe extern "C" fn(*mut Version) -> Status> = symbol(&lib, b"rsmi_version_get\0");
            if let Some(get) = get {
                get(&mut version);
            }
        }
        Ok(RocmSmiLib { symbols, version: (version.major, version.minor, version.patch), _lib: lib })
    }

    /// `Ok` for success, else the error of `call` with its status named.
    fn check(&self, call: &'static str, status: Status) -> Result<(), SmiError> {
        if status == RSMI_STATUS_SUCCESS {
            Ok(())
        } else {
            Err(SmiError::Status { call, status, text: status_text(self.symbols.status_string, status) })
        }
    }

    fn get<T: Default>(&self, f: Option<Get<T>>, call: &'static str, device: u32) -> Result<T, SmiError> {
        let f = need(f, call)?;
        let mut out = T::default();
        // SAFETY: `f` was resolved as rsmi_status_t f(uint32_t dv_ind, T *out), and `out` is a
        // valid T for the call.
        self.check(call, unsafe { f(device, &mut out) })?;
        Ok(out)
    }

    fn get_indexed<T: Default>(
        &self,
        f: Option<GetIndexed<T>>,
        call: &'static str,
        device: u32,
        index: u32,
    ) -> Result<T, SmiError> {
        let f = need(f, call)?;
        let mut out = T::default();
        // SAFETY: as `get`, for rsmi_status_t f(uint32_t, uint32_t, T *out).
        self.check(call, unsafe { f(device, index, &mut out) })?;
        Ok(out)
    }

    fn string(&self, f: Option<GetString>, call: &'static str, device: u32) -> Result<String, SmiError> {
        let f = need(f, call)?;
        let mut buffer = [0u8; 256];
        // SAFETY: rsmi_dev_{name,serial_number,vbios_version}_get(uint32_t, char *, len) write at
        // most len bytes, NUL-terminated; the buffer outlives the call.
        self.check(call, unsafe { f(device, buffer.as_mut_ptr().cast(), buffer.len() as u32) })?;
        let text = CStr::from_bytes_until_nul(&buffer).map_err(|e| SmiError::Unreadable(format!("{call}: {e}")))?;
        Ok(text.to_string_lossy().into_owned())
    }

    /// How many processes hold compute resources on device `d`: each process ROCm SMI lists,
    /// asked which devices it uses. One that ended between the two calls is not counted.
    pub fn processes_on(&self, d: u32) -> Result<u32, SmiError> {
        const CALL: &str = "rsmi_compute_process_info_get";
        let info = need(self.symbols.compute_processes, CALL)?;
        let gpus = need(self.symbols.process_gpus, "rsmi_compute_process_gpus_get")?;
        let mut count = 0u32;
        // SAFETY: a null list asks only for the number of processes, written to `count`.
        self.check(CALL, unsafe { info(std::ptr::null_mut(), &mut count) })?;
        // Room for processes that start between the two calls.
        let mut list = vec![ProcessInfo::default(); count as usize + 8];
        let mut filled = u32::try_from(list.len()).unwrap_or(u32::MAX);
        // SAFETY: `list` holds `filled` elements of the type rsmi_process_info_t lays out.
        self.check(CALL, unsafe { info(list.as_mut_ptr(), &mut filled) })?;
        list.truncate(filled as usize);
        let mut on = 0;
        for process in &list {
            let mut devices = [0u32; 64];
            let mut n = devices.len() as u32;
            // SAFETY: `devices` holds `n` uint32 device indices for the call to fill.
            let status = unsafe { gpus(process.process_id, devices.as_mut_ptr(), &mut n) };
            if status == RSMI_STATUS_SUCCESS && devices[..(n as usize).min(devices.len())].contains(&d) {
                on += 1;
            }
        }
        Ok(on)
    }

    pub fn device_count(&self) -> Result<u32, SmiError> {
        let f = need(self.symbols.num_monitor_devices, "rsmi_num_monitor_devices")?;
        let mut count = 0;
        // SAFETY: rsmi_num_monitor_devices(uint32_t *).
        self.check("rsmi_num_monitor_devices", unsafe { f(&mut count) })?;
        Ok(count)
    }

    pub fn name(&self, d: u32) -> Result<String, SmiError> {
        self.string(self.symbols.name, "rsmi_dev_name_get", d)
    }
    pub fn serial(&self, d: u32) -> Result<String, SmiError> {
        self.string(self.symbols.serial_number, "rsmi_dev_serial_number_get", d)
    }
    pub fn vbios(&self, d: u32) -> Result<String, SmiError> {
        self.string(self.symbols.vbios_version, "rsmi_dev_vbios_version_get", d)
    }
    pub fn unique_id(&self, d: u32) -> Result<u64, SmiError> {
        self.get(self.symbols.unique_id, "rsmi_dev_unique_id_get", d)
    }
    pub fn pci_id(&self, d: u32) -> Result<u64, SmiError> {
        self.get(self.symbols.pci_id, "rsmi_dev_pci_id_get", d)
    }
    /// VRAM (RSMI_MEM_TYPE_VRAM = 0) total and used, bytes.
    pub fn memory_total(&self, d: u32) -> Result<u64, SmiError> {
        self.get_indexed(self.symbols.memory_total, "rsmi_dev_memory_total_get", d, 0)
    }
    pub fn memory_used(&self, d: u32) -> Result<u64, SmiError> {
        self.get_indexed(self.symbols.memory_usage, "rsmi_dev_memory_usage_get", d, 0)
    }
    /// Power cap and its default, µW (sensor 0).
    pub fn power_cap_uw(&self, d: u32) -> Result<u64, SmiError> {
        self.get_indexed(self.symbols.power_cap, "rsmi_dev_power_cap_get", d, 0)
    }
    pub fn power_cap_default_uw(&self, d: u32) -> Result<u64, SmiError> {
        self.get(self.symbols.power_cap_default, "rsmi_dev_power_cap_default_get", d)
    }
    /// Current socket power, µW (MI300 and newer; ROCm SMI 6).
    pub fn current_socket_power_uw(&self, d: u32) -> Result<u64, SmiError> {
        self.get(self.symbols.current_socket_power, "rsmi_dev_current_socket_power_get", d)
    }
    /// Average socket power, µW (sensor 0).
    pub fn average_power_uw(&self, d: u32) -> Result<u64, SmiError> {
        self.get_indexed(self.symbols.power_ave, "rsmi_dev_power_ave_get", d, 0)
    }
    /// Energy accumulator times its resolution, in µJ.
    pub fn energy_uj(&self, d: u32) -> Result<f64, SmiError> {
        let call = "rsmi_dev_energy_count_get";
        let f = need(self.symbols.energy_count, call)?;
        let (mut count, mut resolution, mut timestamp) = (0u64, 0f32, 0u64);
        // SAFETY: rsmi_dev_energy_count_get(uint32_t, uint64_t *power, float *resolution,
        // uint64_t *timestamp).
        self.check(call, unsafe { f(d, &mut count, &mut resolution, &mut timestamp) })?;
        Ok(count as f64 * f64::from(resolution))
    }
    /// Current temperature of sensor `sensor` (0 edge, 1 junction, 2 memory), °C.
    pub fn temperature_c(&self, d: u32, sensor: u32) -> Result<f64, SmiError> {
        let call = "rsmi_dev_temp_metric_get";
        let f = need(self.symbols.temp_metric, call)?;
        let mut milli = 0i64;
        // SAFETY: rsmi_dev_temp_metric_get(uint32_t, uint32_t sensor, rsmi_temperature_metric_t
        // metric (RSMI_TEMP_CURRENT = 0), int64_t *).
        self.check(call, unsafe { f(d, sensor, 0, &mut milli) })?;
        Ok(milli as f64 / 1000.0)
    }
    pub fn busy_percent(&self, d: u32) -> Result<u32, SmiError> {
        self.get(self.symbols.busy_percent, "rsmi_dev_busy_percent_get", d)
    }
    /// Current frequency of clock `kind` (RSMI_CLK_TYPE_SYS = 0, RSMI_CLK_TYPE_MEM = 4), MHz,
    /// with ROCm SMI 5's `rsmi_frequencies_t`.
    pub fn clock_mhz(&self, d: u32, kind: u32) -> Result<f64, SmiError> {
        if self.version.0 != 5 {
            return Err(SmiError::Unreadable(format!(
                "rsmi_frequencies_t of ROCm SMI {}.{} is not a layout lynx knows (5.x only)",
                self.version.0, self.version.1
            )));
        }
        // The 5.x layout, checked above.
        let frequencies = self.get_indexed(self.symbols.gpu_clk_freq, "rsmi_dev_gpu_clk_freq_get", d, kind)?;
        let current = frequencies.current as usize;
        if current >= frequencies.num_supported as usize || current >= frequencies.frequency.len() {
            return Err(SmiError::Unreadable(format!(
                "current level {current} of {} levels",
                frequencies.num_supported
            )));
        }
        Ok(frequencies.frequency[current] as f64 / 1e6)
    }
}

/// ROCm SMI's own name for `status`, where the library can give it.
fn status_text(
    status_string: Option<unsafe extern "C" fn(Status, *mut *const c_char) -> Status>,
    status: Status,
) -> Option<String> {
    let f = status_string?;
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: rsmi_status_string takes a status and writes a pointer to a static C string, read
    // here only when the call succeeded and the pointer is set.
    unsafe {
        if f(status, &mut text) == RSMI_STATUS_SUCCESS && !text.is_null() {
            Some(CStr::from_ptr(text).to_string_lossy().into_owned())
        } else {
            None
        }
    }
}

/// The HIP runtime, for the PCI bus id of a HIP ordinal: HIP numbers only the devices
/// `HIP_VISIBLE_DEVICES` / `ROCR_VISIBLE_DEVICES` let it see, while ROCm SMI numbers all of
/// them, so the two are matched by bus, never by index.
pub struct Hip {
    get_pci_bus_id: unsafe extern "C" fn(*mut std::ffi::c_char, i32, i32) -> i32,
    /// Kept loaded for as long as `get_pci_bus_id` may be called.
    _lib: libloading::Library,
}

impl Hip {
    /// The libamdhip64 libtorch's HIP backend loaded (the loader finds it by its soname).
    pub fn loaded() -> Result<Hip, String> {
        let mut reason = String::new();
        for name in ["libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so"] {
            match Hip::open(std::path::Path::new(name)) {
                Ok(hip) => return Ok(hip),
                Err(e) => reason = e,
            }
        }
        Err(reason)
    }

    /// The HIP runtime at `path`.
    pub fn open(path: &std::path::Path) -> Result<Hip, String> {
        // SAFETY: loading the HIP runtime runs its initialisers, which have no preconditions
        // (libtorch's HIP backend loads the same library).
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("the HIP runtime ({}) to match devices by PCI bus: {e}", path.display()))?;
        // SAFETY: hip_runtime_api.h declares `hipError_t hipDeviceGetPCIBusId(char *pciBusId, int
        // len, int device)`, hipError_t an int enum; the pointer is kept beside the library.
        let get_pci_bus_id = unsafe {
            *lib.get::<unsafe extern "C" fn(*mut std::ffi::c_char, i32, i32) -> i32>(b"hipDeviceGetPCIBusId\0")
                .map_err(|e| format!("{}: {e}", path.display()))?
        };
        Ok(Hip { get_pci_bus_id, _lib: lib })
    }

    /// The PCI bus id (`dddd:bb:dd.f`, lower case) of HIP ordinal `index`.
    pub fn pci_bus_id(&self, index: u32) -> Result<String, String> {
        let mut text = [0 as std::ffi::c_char; 64];
        let ordinal = i32::try_from(index).map_err(|e| e.to_string())?;
        // SAFETY: the buffer is 64 bytes and its length is passed; HIP writes a NUL-terminated
        // id within it or returns an error.
        let status = unsafe { (self.get_pci_bus_id)(text.as_mut_ptr(), text.len() as i32, ordinal) };
        if status != 0 {
            return Err(format!("hipDeviceGetPCIBusId for HIP ordinal {index} returned hipError {status}"));
        }
        text[text.len() - 1] = 0;
        // SAFETY: NUL-terminated above at the latest.
        let id = unsafe { std::ffi::CStr::from_ptr(text.as_ptr()) };
        Ok(id.to_string_lossy().to_ascii_lowercase())
    }
}
