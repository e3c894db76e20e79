/*
 * A stand-in libMIOpen for lynx's tests: miopenGetVersion of miopen.h, answering 3.2.0.
 */
#include <stddef.h>

enum { miopenStatusSuccess = 0, miopenStatusBadParm = 3 };

int miopenGetVersion(size_t *major, size_t *minor, size_t *patch) {
    if (major == NULL || minor == NULL || patch == NULL) return miopenStatusBadParm;
    *major = 3;
    *minor = 2;
    *patch = 0;
    return miopenStatusSuccess;
}
