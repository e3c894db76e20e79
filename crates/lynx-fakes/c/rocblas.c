/*
 * A stand-in librocblas for lynx's tests: the version calls of rocblas.h, answering
 * "4.2.1.b7c3d1e2", as a ROCm 6.2 rocBLAS words its version (major.minor.patch.commit).
 */
#include <stddef.h>
#include <string.h>

enum { rocblas_status_success = 0, rocblas_status_invalid_pointer = 3, rocblas_status_invalid_size = 4 };

static const char version[] = "4.2.1.b7c3d1e2";

int rocblas_get_version_string_size(size_t *len) {
    if (len == NULL) return rocblas_status_invalid_pointer;
    *len = sizeof version;
    return rocblas_status_success;
}

int rocblas_get_version_string(char *buf, size_t len) {
    if (buf == NULL) return rocblas_status_invalid_pointer;
    if (len < sizeof version) return rocblas_status_invalid_size;
    memcpy(buf, version, sizeof version);
    return rocblas_status_success;
}
