/*
 * A stand-in librocm_smi64 for lynx's tests: the rsmi_* entry points lynx-rocm calls, with the
 * types of rocm_smi.h, and fixed readings that the tests check lynx's units against. Built
 * twice: RSMI_MAJOR=5 (the 5.x rsmi_frequencies_t, no current socket power) and RSMI_MAJOR=6
 * (current socket power; a frequencies layout lynx does not read). See src/lib.rs.
 */
#define _POSIX_C_SOURCE 199309L /* nanosleep */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#ifndef RSMI_MAJOR
#error "build with -DRSMI_MAJOR=5 or 6"
#endif
/* Devices the library sees (-DDEVICES=3 for the bus-id mapping test); device d is on PCI bus
 * 0x83 + d. */
#ifndef DEVICES
#define DEVICES 1
#endif

typedef int rsmi_status_t;
enum {
    RSMI_STATUS_SUCCESS = 0,
    RSMI_STATUS_INVALID_ARGS = 1,
    RSMI_STATUS_NOT_SUPPORTED = 2,
    RSMI_STATUS_INIT_ERROR = 8,
    RSMI_STATUS_INSUFFICIENT_SIZE = 11,
};

typedef struct {
    uint32_t major, minor, patch;
    const char *build;
} rsmi_version_t;

#if RSMI_MAJOR == 5
typedef struct {
    uint32_t num_supported;
    uint32_t current;
    uint64_t frequency[32];
} rsmi_frequencies_t;
#else
typedef struct {
    _Bool has_deep_sleep;
    uint32_t num_supported;
    uint32_t current;
    uint64_t frequency[32];
} rsmi_frequencies_t;
#endif

static atomic_int initialised;
static atomic_ullong energy_reads;

#define CHECK(dv)                                          \
    if (!atomic_load(&initialised)) return RSMI_STATUS_INIT_ERROR; \
    if ((dv) >= DEVICES) return RSMI_STATUS_INVALID_ARGS;

rsmi_status_t rsmi_init(uint64_t flags) { (void)flags; atomic_fetch_add(&initialised, 1); return RSMI_STATUS_SUCCESS; }
rsmi_status_t rsmi_shut_down(void) { atomic_fetch_sub(&initialised, 1); return RSMI_STATUS_SUCCESS; }

rsmi_status_t rsmi_version_get(rsmi_version_t *v) {
    v->major = RSMI_MAJOR;
    v->minor = RSMI_MAJOR == 5 ? 7 : 2;
    v->patch = 0;
    v->build = "lynx-fake";
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_status_string(rsmi_status_t status, const char **text) {
    switch (status) {
    case RSMI_STATUS_SUCCESS: *text = "RSMI_STATUS_SUCCESS: fake"; break;
    case RSMI_STATUS_INVALID_ARGS: *text = "RSMI_STATUS_INVALID_ARGS: fake, no such device"; break;
    case RSMI_STATUS_NOT_SUPPORTED: *text = "RSMI_STATUS_NOT_SUPPORTED: fake, not on this device"; break;
    default: *text = "RSMI_STATUS_UNKNOWN_ERROR: fake"; break;
    }
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_num_monitor_devices(uint32_t *count) {
    if (!atomic_load(&initialised)) return RSMI_STATUS_INIT_ERROR;
    *count = DEVICES;
    return RSMI_STATUS_SUCCESS;
}

static rsmi_status_t copy_string(const char *value, char *out, uint32_t length) {
    if (strlen(value) + 1 > length) return RSMI_STATUS_INSUFFICIENT_SIZE;
    strcpy(out, value);
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_name_get(uint32_t dv, char *out, uint32_t n) { CHECK(dv) return copy_string("AMD Instinct MI210 (lynx fake)", out, n); }
rsmi_status_t rsmi_dev_serial_number_get(uint32_t dv, char *out, uint32_t n) { CHECK(dv) return copy_string("692231000131", out, n); }
rsmi_status_t rsmi_dev_vbios_version_get(uint32_t dv, char *out, uint32_t n) { CHECK(dv) return copy_string("113-D67301-063", out, n); }

rsmi_status_t rsmi_dev_unique_id_get(uint32_t dv, uint64_t *id) { CHECK(dv) *id = 0x5a1b2c3d4e5f6071ULL; return RSMI_STATUS_SUCCESS; }
/* Domain 0, bus 0x83 + dv, device 0, function 0. */
rsmi_status_t rsmi_dev_pci_id_get(uint32_t dv, uint64_t *bdfid) { CHECK(dv) *bdfid = (0x83ULL + dv) << 8; return RSMI_STATUS_SUCCESS; }

rsmi_status_t rsmi_dev_memory_total_get(uint32_t dv, int type, uint64_t *bytes) {
    CHECK(dv)
    if (type != 0) return RSMI_STATUS_NOT_SUPPORTED;
    *bytes = 68702699520ULL;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_memory_usage_get(uint32_t dv, int type, uint64_t *bytes) {
    CHECK(dv)
    if (type != 0) return RSMI_STATUS_NOT_SUPPORTED;
    *bytes = 12884901888ULL;
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_dev_power_cap_get(uint32_t dv, uint32_t sensor, uint64_t *uw) {
    CHECK(dv)
    if (sensor != 0) return RSMI_STATUS_INVALID_ARGS;
    *uw = 290000000ULL;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_power_cap_default_get(uint32_t dv, uint64_t *uw) { CHECK(dv) *uw = 300000000ULL; return RSMI_STATUS_SUCCESS; }
rsmi_status_t rsmi_dev_power_ave_get(uint32_t dv, uint32_t sensor, uint64_t *uw) {
    CHECK(dv)
    if (sensor != 0) return RSMI_STATUS_INVALID_ARGS;
    *uw = 280250000ULL;
    return RSMI_STATUS_SUCCESS;
}
#if RSMI_MAJOR >= 6
rsmi_status_t rsmi_dev_current_socket_power_get(uint32_t dv, uint64_t *uw) { CHECK(dv) *uw = 287500000ULL; return RSMI_STATUS_SUCCESS; }
#endif

/* The accumulator counts in units of 2^-16 J (15.2587890625 uJ) and gains 65536 (1 J) per read. */
rsmi_status_t rsmi_dev_energy_count_get(uint32_t dv, uint64_t *count, float *resolution, uint64_t *timestamp) {
    CHECK(dv)
    uint64_t reads = atomic_fetch_add(&energy_reads, 1);
    *count = (1ULL << 30) + 65536ULL * reads;
    *resolution = 15.2587890625f;
    *timestamp = 1000000ULL * reads;
    return RSMI_STATUS_SUCCESS;
}

/* Sensors: 0 edge, 1 junction, 2 memory; metric 0 is the current temperature, in millidegrees. */
rsmi_status_t rsmi_dev_temp_metric_get(uint32_t dv, uint32_t sensor, int metric, int64_t *milli) {
    CHECK(dv)
    static const int64_t current[] = {45000, 71500, 66000};
    if (sensor > 2 || metric != 0) return RSMI_STATUS_NOT_SUPPORTED;
    *milli = current[sensor];
    return RSMI_STATUS_SUCCESS;
}
/* How long each busy-percent query takes, in microseconds (0: no time at all), set by a test
 * through lynx_fake_rocm_slow_busy: a call that holds the driver for milliseconds. */
static _Atomic uint32_t busy_us = 0;
void lynx_fake_rocm_slow_busy(uint32_t microseconds) { atomic_store(&busy_us, microseconds); }

rsmi_status_t rsmi_dev_busy_percent_get(uint32_t dv, uint32_t *percent) {
    CHECK(dv)
    uint32_t us = atomic_load(&busy_us);
    if (us > 0) {
        struct timespec pause = { us / 1000000, (long)(us % 1000000) * 1000 };
        nanosleep(&pause, NULL);
    }
    *percent = 93;
    return RSMI_STATUS_SUCCESS;
}

/* System clock: 8 levels 500..1900 MHz, current level 6 (1700 MHz); memory: 3 levels, current
 * 2 (1600 MHz). Frequencies in Hz. */
rsmi_status_t rsmi_dev_gpu_clk_freq_get(uint32_t dv, int type, rsmi_frequencies_t *f) {
    CHECK(dv)
    memset(f, 0, sizeof *f);
    if (type == 0) {
        f->num_supported = 8;
        f->current = 6;
        for (int i = 0; i < 8; i++) f->frequency[i] = (500ULL + 200ULL * i) * 1000000ULL;
    } else if (type == 4) {
        f->num_supported = 3;
        f->current = 2;
        f->frequency[0] = 400000000ULL;
        f->frequency[1] = 1000000000ULL;
        f->frequency[2] = 1600000000ULL;
    } else {
        return RSMI_STATUS_NOT_SUPPORTED;
    }
    return RSMI_STATUS_SUCCESS;
}

/* Processes with compute resources (KFD): 5001 on device 0, 5002 on devices 0 and 1, 5003 on
 * device 1 (of the devices this build sees). */
typedef struct {
    uint32_t process_id, pasid;
    uint64_t vram_usage, sdma_usage;
    uint32_t cu_occupancy;
} rsmi_process_info_t;

static const uint32_t pids[] = {5001, 5002, 5003};
#define PROCESSES (sizeof pids / sizeof pids[0])

rsmi_status_t rsmi_compute_process_info_get(rsmi_process_info_t *procs, uint32_t *num_items) {
    if (!atomic_load(&initialised)) return RSMI_STATUS_INIT_ERROR;
    if (num_items == NULL) return RSMI_STATUS_INVALID_ARGS;
    if (procs == NULL) { *num_items = PROCESSES; return RSMI_STATUS_SUCCESS; }
    uint32_t n = *num_items < PROCESSES ? *num_items : PROCESSES;
    for (uint32_t i = 0; i < n; i++) {
        memset(&procs[i], 0, sizeof procs[i]);
        procs[i].process_id = pids[i];
        procs[i].vram_usage = 1ULL << 30;
    }
    *num_items = n;
    return n < PROCESSES ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_compute_process_gpus_get(uint32_t pid, uint32_t *dv_indices, uint32_t *num_devices) {
    if (!atomic_load(&initialised)) return RSMI_STATUS_INIT_ERROR;
    if (num_devices == NULL) return RSMI_STATUS_INVALID_ARGS;
    uint32_t on[2], n = 0;
    if (pid == 5001 || pid == 5002) on[n++] = 0;
    if ((pid == 5002 || pid == 5003) && DEVICES > 1) on[n++] = 1;
    if (pid < 5001 || pid > 5003) return RSMI_STATUS_NOT_SUPPORTED;
    if (dv_indices != NULL)
        for (uint32_t i = 0; i < n && i < *num_devices; i++) dv_indices[i] = on[i];
    *num_devices = n;
    return RSMI_STATUS_SUCCESS;
}
