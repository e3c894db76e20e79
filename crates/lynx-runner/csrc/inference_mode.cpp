// libtorch's InferenceMode for lynx: tch exposes only NoGradGuard. Under InferenceMode the
// dispatcher skips the autograd and view/version-counter keys for every operation, as Python's
// torch.inference_mode() does.
#include <c10/core/InferenceMode.h>

extern "C" void *lynx_inference_mode_enter() noexcept { return new c10::InferenceMode(true); }

extern "C" void lynx_inference_mode_exit(void *guard) noexcept {
  delete static_cast<c10::InferenceMode *>(guard);
}
