// Whether libtorch's CPU kernels may call oneDNN (Python's torch.backends.mkldnn.enabled), which
// tch does not expose. On a CPU with AMX (Intel's from Sapphire Rapids on), ATen runs the CPU's
// e4m3 scaled matmul in oneDNN, which refuses e4m3fnuz; with oneDNN off it runs ATen's own
// kernel, which takes both e4m3 formats.
#include <ATen/Context.h>

extern "C" void lynx_set_onednn(bool enabled) noexcept { at::globalContext().setUserEnabledMkldnn(enabled); }

extern "C" bool lynx_onednn_enabled() noexcept { return at::globalContext().userEnabledMkldnn(); }
