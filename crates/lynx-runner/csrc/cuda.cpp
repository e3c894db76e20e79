// libtorch's CUDA graphs and caching allocator for lynx, which tch does not expose.
//
// Built as its own shared library (liblynx_cuda.so) against the headers of the libtorch lynx
// links, embedded in the lynx binary, and loaded only after libtorch_cuda (or libtorch_hip) has
// loaded: its libtorch symbols are left undefined here and resolve against those libraries, so
// a CPU host without CUDA libraries never loads it. On ROCm builds of libtorch the same classes
// are hipGraph and the HIP caching allocator.
//
// Every function catches what libtorch throws and returns it as one line in `error`.
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

// A graph being captured on a side stream (capture cannot use the default stream), or captured.
struct Graph {
  at::cuda::CUDAGraph graph;
  std::optional<c10::cuda::CUDAStreamGuard> capturing;
};

// The first line of what libtorch said, into `error` (at most `len` bytes with the NUL).
int fail(const char *what, char *error, size_t len) noexcept {
  if (error != nullptr && len > 0) {
    std::string line(what == nullptr ? "unknown error" : what);
    line = line.substr(0, line.find('\n'));
    std::strncpy(error, line.c_str(), len - 1);
    error[len - 1] = '\0';
  }
  return 1;
}

// The stream every capture on `device` runs on: one stream of the device's pool, taken at the
// first capture and kept, as torch.cuda.graph keeps one default capture stream. libtorch keys
// the cuBLAS and cuBLASLt workspaces by stream and makes a stream's at its first use; for a
// stream first used inside a capture, in that graph's private memory pool, where they can
// outlive the graph. One capture stream makes them once, rather than for each of the pool's 32
// streams the captures would otherwise cycle through. The graphs captured on it share them, so a
// graph is destroyed only when no live graph will be replayed again (run/graph.rs, `Captured`).
c10::cuda::CUDAStream capture_stream(c10::DeviceIndex device) {
  static std::mutex lock;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  std::lock_guard<std::mutex> held(lock);
  auto found = streams.find(device);
  if (found == streams.end()) {
    found = streams.emplace(device, c10::cuda::getStreamFromPool(false, device)).first;
  }
  return found->second;
}

template <typename F> int guarded(char *error, size_t len, F body) noexcept {
  try {
    body();
    return 0;
  } catch (const std::exception &e) {
    return fail(e.what(), error, len);
  } catch (...) {
    return fail(nullptr, error, len);
  }
}

} // namespace

extern "C" {

// A new graph, or NULL with the reason in `error`.
void *lynx_cuda_graph_new(char *error, size_t len) noexcept {
  Graph *graph = nullptr;
  guarded(error, len, [&] { graph = new Graph(); });
  return graph;
}

// Begin capturing on `device`'s capture stream: the work the caller issues until
// lynx_cuda_graph_end is recorded, not run. Where the capture cannot begin, the stream that was
// current stays current.
int lynx_cuda_graph_begin(void *handle, int device, char *error, size_t len) noexcept {
  auto *graph = static_cast<Graph *>(handle);
  int status = guarded(error, len, [&] {
    auto index = static_cast<c10::DeviceIndex>(device);
    c10::cuda::CUDAGuard on_device(index);
    c10::cuda::device_synchronize();
    graph->capturing.emplace(capture_stream(index));
    graph->graph.capture_begin();
  });
  if (status != 0) {
    graph->capturing.reset();
  }
  return status;
}

// End the capture and go back to the stream that was current before it, also where ending it
// failed (a capture that a step invalidated): the work after it must not be issued on the
// capture's stream.
int lynx_cuda_graph_end(void *handle, char *error, size_t len) noexcept {
  auto *graph = static_cast<Graph *>(handle);
  int status = guarded(error, len, [&] { graph->graph.capture_end(); });
  graph->capturing.reset();
  return status;
}

// Launch the captured work once, on the current stream.
int lynx_cuda_graph_replay(void *handle, char *error, size_t len) noexcept {
  auto *graph = static_cast<Graph *>(handle);
  return guarded(error, len, [&] { graph->graph.replay(); });
}

void lynx_cuda_graph_free(void *handle) noexcept {
  try {
    delete static_cast<Graph *>(handle);
  } catch (...) {
  }
}

// Release the blocks libtorch's caching allocator holds for reuse, then the driver's free and
// total memory of `device` (the cached blocks would otherwise count as used).
int lynx_cuda_free_memory(int device, uint64_t *free_bytes, uint64_t *total_bytes, char *error,
                          size_t len) noexcept {
  return guarded(error, len, [&] {
    c10::cuda::CUDAGuard on_device(static_cast<c10::DeviceIndex>(device));
    c10::cuda::device_synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
    size_t free = 0, total = 0;
    cudaError_t status = cudaMemGetInfo(&free, &total);
    if (status != cudaSuccess) {
      throw std::runtime_error(std::string("cudaMemGetInfo: ") + cudaGetErrorString(status));
    }
    *free_bytes = free;
    *total_bytes = total;
  });
}

// The calls libtorch's caching allocator has made to the driver for `device`'s memory so far
// (cudaMalloc and cudaFree, or the mapping calls of expandable segments; a failed allocation's
// retry frees cached blocks, each a call): none while every block a step asks for is one it
// holds, and each a wait on the driver where there is one. Read under the allocator's lock, with
// no synchronisation, so that it can bracket each timed step.
int lynx_cuda_allocator_calls(int device, uint64_t *calls, char *error, size_t len) noexcept {
  return guarded(error, len, [&] {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    *calls = static_cast<uint64_t>(stats.num_device_alloc + stats.num_device_free);
  });
}

} // extern "C"
