// libtorch settings lynx needs that tch does not expose.
//
// InferenceMode: tch exposes only NoGradGuard. Under InferenceMode the dispatcher skips the
// autograd and view/version-counter keys for every operation, as Python's
// torch.inference_mode() does.
//
// cuDNN attention off: on sm90/sm100 with a recent cuDNN, ATen's SDPA tries cuDNN first, and
// cuDNN builds one execution graph per problem shape (the key length among its keys), which
// costs tens of milliseconds of host time on every miss. A decode step attends one key more
// than the last, so every eager step paid a build (about 50 ms a step, measured on an H200).
// A CUDA graph's step has one shape for all its replays, so a capture lets cuDNN back in: the
// graph step's masked attention over a padded cache has no flash kernel, and without cuDNN it
// falls to the math kernel (106 ms a step at batch 64 on an H200, against 8.49 ms on cuDNN).
#include <ATen/Context.h>
#include <c10/core/InferenceMode.h>

extern "C" void *lynx_inference_mode_enter() noexcept { return new c10::InferenceMode(true); }

extern "C" void lynx_inference_mode_exit(void *guard) noexcept {
  delete static_cast<c10::InferenceMode *>(guard);
}

extern "C" void lynx_sdpa_set_cudnn(bool enabled) noexcept { at::globalContext().setSDPUseCuDNN(enabled); }

extern "C" bool lynx_sdpa_cudnn_enabled() noexcept { return at::globalContext().userEnabledCuDNNSDP(); }
