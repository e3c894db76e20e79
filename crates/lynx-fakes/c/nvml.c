/*
 * A stand-in libnvidia-ml for lynx's tests: the NVML entry points lynx-nvml calls (through
 * nvml-wrapper), with the types and numbering of nvml.h, and fixed readings that the tests
 * check lynx's units and decoding against. See crates/lynx-fakes/src/lib.rs for the devices.
 */
#define _POSIX_C_SOURCE 199309L /* nanosleep */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
};
enum { VALUE_DOUBLE = 0, VALUE_UINT = 1, VALUE_ULONG = 2, VALUE_ULONGLONG = 3, VALUE_SLONGLONG = 4 };
enum { FI_MEMORY_TEMP = 82, FI_TOTAL_ENERGY = 83, FI_POWER_AVERAGE = 185, FI_POWER_INSTANT = 186 };
enum { CLOCK_SM = 1, CLOCK_MEM = 2 };

typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

/* One board. A reading of 0 (or a NULL string) is one the board does not support. */
struct device {
    const char *name, *uuid, *serial, *bus_id, *vbios;
    unsigned int domain, bus, dev, pci_device_id;
    unsigned int power_limit_default_mw, power_limit_enforced_mw;
    int ecc, mig, persistence; /* 1 enabled, 0 disabled, -1 not supported */
    unsigned int power_instant_mw, power_average_mw, power_usage_mw;
    unsigned long long energy_start_mj, energy_step_mj;
    unsigned int gpu_temp_c, memory_temp_c, sm_mhz, mem_mhz, utilisation_pct;
    unsigned long long memory_total, memory_used;
    int throttle_supported;
    unsigned long long throttle_bits;
    /* Processes with a context on the device; processes_supported 0: not supported. */
    int processes_supported;
    unsigned int compute_pids[4], compute_count, graphics_pids[4], graphics_count;
    atomic_ullong energy_reads;
};

static struct device devices[] = {
    {
        .name = "NVIDIA H200 (lynx fake)", .uuid = "GPU-f4ce0000-1111-2222-3333-444444444444",
        .serial = "1650924000001", .bus_id = "00000000:19:00.0", .vbios = "96.00.AF.00.01",
        .domain = 0, .bus = 0x19, .dev = 0, .pci_device_id = 0x233510de,
        .power_limit_default_mw = 700000, .power_limit_enforced_mw = 650000,
        .ecc = 1, .mig = 0, .persistence = 1,
        .power_instant_mw = 412345, .power_average_mw = 398000, .power_usage_mw = 397000,
        .energy_start_mj = 5000000, .energy_step_mj = 125,
        .gpu_temp_c = 55, .memory_temp_c = 61, .sm_mhz = 1980, .mem_mhz = 3201, .utilisation_pct = 87,
        .memory_total = 150754820096ULL, .memory_used = 85899345920ULL,
        .throttle_supported = 1, .throttle_bits = 0x4 | 0x40,
        .processes_supported = 1,
        .compute_pids = {4001, 4002, 4003}, .compute_count = 3, .graphics_pids = {4003}, .graphics_count = 1,
    },
    {
        .name = "NVIDIA A100 (lynx fake, older driver features)", .uuid = "GPU-f4ce0001-1111-2222-3333-444444444444",
        .serial = NULL, .bus_id = "00000000:3B:00.0", .vbios = "92.00.25.00.08",
        .domain = 0, .bus = 0x3b, .dev = 0, .pci_device_id = 0x20b010de,
        .power_limit_default_mw = 400000, .power_limit_enforced_mw = 400000,
        .ecc = -1, .mig = -1, .persistence = 0,
        .power_instant_mw = 0, .power_average_mw = 0, .power_usage_mw = 250500,
        .energy_start_mj = 0, .energy_step_mj = 0,
        .gpu_temp_c = 48, .memory_temp_c = 0, .sm_mhz = 1410, .mem_mhz = 1215, .utilisation_pct = 0,
        .memory_total = 42949672960ULL, .memory_used = 1073741824ULL,
        .throttle_supported = 0, .throttle_bits = 0,
        .processes_supported = 0,
    },
};
#define DEVICE_COUNT (sizeof devices / sizeof devices[0])

static atomic_int initialised;

static nvmlReturn_t copy_string(const char *value, char *out, unsigned int length) {
    if (value == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(value) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, value);
    return NVML_SUCCESS;
}

static struct device *checked(void *handle) {
    if (!atomic_load(&initialised)) return NULL;
    for (size_t i = 0; i < DEVICE_COUNT; i++)
        if (handle == &devices[i]) return &devices[i];
    return NULL;
}

#define DEVICE(handle)                                  \
    struct device *d = checked(handle);                  \
    if (d == NULL) return NVML_ERROR_INVALID_ARGUMENT;

static unsigned long long energy_mj(struct device *d) {
    return d->energy_start_mj + d->energy_step_mj * atomic_fetch_add(&d->energy_reads, 1);
}

nvmlReturn_t nvmlInit_v2(void) { atomic_fetch_add(&initialised, 1); return NVML_SUCCESS; }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) { atomic_fetch_sub(&initialised, 1); return NVML_SUCCESS; }
const char *nvmlErrorString(nvmlReturn_t result) { (void)result; return "lynx fake NVML error"; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *out, unsigned int length) {
    return copy_string("580.95.05", out, length);
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) { *version = 13000; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) { *count = DEVICE_COUNT; return NVML_SUCCESS; }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **handle) {
    if (index >= DEVICE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    *handle = &devices[index];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, void **handle) {
    for (size_t i = 0; i < DEVICE_COUNT; i++)
        if (strcmp(uuid, devices[i].uuid) == 0) { *handle = &devices[i]; return NVML_SUCCESS; }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetName(void *h, char *out, unsigned int n) { DEVICE(h) return copy_string(d->name, out, n); }
nvmlReturn_t nvmlDeviceGetUUID(void *h, char *out, unsigned int n) { DEVICE(h) return copy_string(d->uuid, out, n); }
nvmlReturn_t nvmlDeviceGetSerial(void *h, char *out, unsigned int n) { DEVICE(h) return copy_string(d->serial, out, n); }
nvmlReturn_t nvmlDeviceGetVbiosVersion(void *h, char *out, unsigned int n) { DEVICE(h) return copy_string(d->vbios, out, n); }

nvmlReturn_t nvmlDeviceGetPciInfo_v3(void *h, nvmlPciInfo_t *pci) {
    DEVICE(h)
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.0", d->domain, d->bus, d->dev);
    snprintf(pci->busId, sizeof pci->busId, "%s", d->bus_id);
    pci->domain = d->domain;
    pci->bus = d->bus;
    pci->device = d->dev;
    pci->pciDeviceId = d->pci_device_id;
    return NVML_SUCCESS;
}

static nvmlReturn_t milliwatts(unsigned int value, unsigned int *out) {
    if (value == 0) return NVML_ERROR_NOT_SUPPORTED;
    *out = value;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(void *h, unsigned int *mw) { DEVICE(h) return milliwatts(d->power_limit_default_mw, mw); }
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(void *h, unsigned int *mw) { DEVICE(h) return milliwatts(d->power_limit_enforced_mw, mw); }
nvmlReturn_t nvmlDeviceGetPowerUsage(void *h, unsigned int *mw) { DEVICE(h) return milliwatts(d->power_usage_mw, mw); }

static nvmlReturn_t mode(int value, int *current, int *pending) {
    if (value < 0) return NVML_ERROR_NOT_SUPPORTED;
    *current = value;
    if (pending) *pending = value;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetEccMode(void *h, int *current, int *pending) { DEVICE(h) return mode(d->ecc, current, pending); }
nvmlReturn_t nvmlDeviceGetMigMode(void *h, unsigned int *current, unsigned int *pending) {
    DEVICE(h) return mode(d->mig, (int *)current, (int *)pending);
}
nvmlReturn_t nvmlDeviceGetPersistenceMode(void *h, int *state) { DEVICE(h) return mode(d->persistence, state, NULL); }

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(void *h, unsigned long long *mj) {
    DEVICE(h)
    if (d->energy_step_mj == 0) return NVML_ERROR_NOT_SUPPORTED;
    *mj = energy_mj(d);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(void *h, int count, nvmlFieldValue_t *values) {
    DEVICE(h)
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->timestamp = 1000000LL * (i + 1);
        v->latencyUsec = 0;
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        switch (v->fieldId) {
        case FI_POWER_INSTANT:
        case FI_POWER_AVERAGE: {
            unsigned int mw = v->fieldId == FI_POWER_INSTANT ? d->power_instant_mw : d->power_average_mw;
            if (mw) { v->valueType = VALUE_UINT; v->value.uiVal = mw; v->nvmlReturn = NVML_SUCCESS; }
            break;
        }
        case FI_TOTAL_ENERGY:
            if (d->energy_step_mj) { v->valueType = VALUE_ULONGLONG; v->value.ullVal = energy_mj(d); v->nvmlReturn = NVML_SUCCESS; }
            break;
        case FI_MEMORY_TEMP:
            if (d->memory_temp_c) { v->valueType = VALUE_UINT; v->value.uiVal = d->memory_temp_c; v->nvmlReturn = NVML_SUCCESS; }
            break;
        }
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *c) {
    DEVICE(h)
    if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    *c = d->gpu_temp_c;
    return NVML_SUCCESS;
}
/* How long each SM clock query takes, in microseconds (0: no time at all), set by a test through
 * lynx_fake_nvml_slow_sm_clock: a call that holds the driver for milliseconds, as a real one can. */
static _Atomic unsigned int sm_clock_us = 0;
void lynx_fake_nvml_slow_sm_clock(unsigned int microseconds) { atomic_store(&sm_clock_us, microseconds); }

nvmlReturn_t nvmlDeviceGetClockInfo(void *h, int type, unsigned int *mhz) {
    DEVICE(h)
    unsigned int us = atomic_load(&sm_clock_us);
    if (type == CLOCK_SM && us > 0) {
        struct timespec pause = { us / 1000000, (long)(us % 1000000) * 1000 };
        nanosleep(&pause, NULL);
    }
    if (type == CLOCK_SM) *mhz = d->sm_mhz;
    else if (type == CLOCK_MEM) *mhz = d->mem_mhz;
    else return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(void *h, nvmlUtilization_t *u) {
    DEVICE(h)
    u->gpu = d->utilisation_pct;
    u->memory = d->utilisation_pct / 2;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *h, nvmlMemory_v2_t *m) {
    DEVICE(h)
    if (m->version != (sizeof *m | (2u << 24))) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = d->memory_total;
    m->reserved = 0;
    m->used = d->memory_used;
    m->free = d->memory_total - d->memory_used;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(void *h, unsigned long long *bits) {
    DEVICE(h)
    if (!d->throttle_supported) return NVML_ERROR_NOT_SUPPORTED;
    *bits = d->throttle_bits;
    return NVML_SUCCESS;
}

/* nvmlProcessInfo_t (v2 and v3 share it). */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

/* As NVML answers: too small a buffer gets the count and NVML_ERROR_INSUFFICIENT_SIZE. */
static nvmlReturn_t processes(struct device *d, const unsigned int *pids, unsigned int n, unsigned int *count,
                              nvmlProcessInfo_t *infos) {
    if (!d->processes_supported) return NVML_ERROR_NOT_SUPPORTED;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < n || (n > 0 && infos == NULL)) {
        *count = n;
        return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < n; i++) {
        infos[i].pid = pids[i];
        infos[i].usedGpuMemory = 1ULL << 30;
        infos[i].gpuInstanceId = 0xFFFFFFFFu;
        infos[i].computeInstanceId = 0xFFFFFFFFu;
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *count, nvmlProcessInfo_t *infos) {
    DEVICE(h) return processes(d, d->compute_pids, d->compute_count, count, infos);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(void *h, unsigned int *count, nvmlProcessInfo_t *infos) {
    DEVICE(h) return processes(d, d->graphics_pids, d->graphics_count, count, infos);
}
