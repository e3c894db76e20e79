/*
 * A stand-in libamdhip64 for lynx's tests: the HIP runtime as a process launched with
 * HIP_VISIBLE_DEVICES=2,0 on a node of three GPUs sees it. HIP ordinal 0 is the third GPU (PCI
 * bus 0x85), ordinal 1 the first (bus 0x83); ROCm SMI sees all three in bus order, so mapping
 * by index would pick the wrong board for both.
 */
#include <stdio.h>

enum { hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorInvalidDevice = 101 };

static const int visible_bus[] = {0x85, 0x83};

int hipGetDeviceCount(int *count) {
    *count = 2;
    return hipSuccess;
}

int hipDeviceGetPCIBusId(char *pci_bus_id, int len, int device) {
    if (device < 0 || device >= 2) return hipErrorInvalidDevice;
    if (pci_bus_id == NULL || len < 13) return hipErrorInvalidValue;
    snprintf(pci_bus_id, (size_t)len, "0000:%02x:00.0", visible_bus[device]);
    return hipSuccess;
}

/* HIP 6.2.41133, as hipRuntimeGetVersion encodes it: major * 10000000 + minor * 100000 + patch. */
int hipRuntimeGetVersion(int *version) {
    if (version == NULL) return hipErrorInvalidValue;
    *version = 6 * 10000000 + 2 * 100000 + 41133;
    return hipSuccess;
}
