// Memory-bandwidth probes for lynx's roofline (lynx-probes, compiled at run time with NVRTC for
// the device's own architecture). Every kernel is a grid-stride loop over float4 (16-byte)
// elements; bytes are counted on the host (copy 2 x 16, triad 3 x 16, read 16 per element).
//
// Each thread issues UNROLL independent 16-byte loads (a grid stride apart, so each warp's
// accesses stay coalesced) before it uses any of them: one load in flight per thread leaves
// HBM3e idle between requests, and the best published STREAM-like kernels on Hopper keep
// several in flight. The tail that does not fill an unrolled round runs one element at a time.
#define UNROLL 4

// Fill with pseudo-random floats in [1, 2): the probes never stream zeros, which some memory
// systems compress.
extern "C" __global__ void lynx_fill_random(float4 *__restrict__ a, unsigned long long n, unsigned long long seed) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float4 v;
        v.x = 1.0f + (float)((z >> 0) & 0xFFFF) / 65536.0f;
        v.y = 1.0f + (float)((z >> 16) & 0xFFFF) / 65536.0f;
        v.z = 1.0f + (float)((z >> 32) & 0xFFFF) / 65536.0f;
        v.w = 1.0f + (float)((z >> 48) & 0xFFFF) / 65536.0f;
        a[i] = v;
    }
}

// c = a
extern "C" __global__ void lynx_copy(const float4 *__restrict__ a, float4 *__restrict__ c, unsigned long long n) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = a[i + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) c[i + u * stride] = v[u];
    }
    for (; i < n; i += stride) {
        c[i] = a[i];
    }
}

// a = b + s * c
extern "C" __global__ void lynx_triad(float4 *__restrict__ a, const float4 *__restrict__ b,
                                      const float4 *__restrict__ c, float s, unsigned long long n) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        float4 x[UNROLL], y[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            x[u] = b[i + u * stride];
            y[u] = c[i + u * stride];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            a[i + u * stride] = make_float4(x[u].x + s * y[u].x, x[u].y + s * y[u].y, x[u].z + s * y[u].z,
                                            x[u].w + s * y[u].w);
        }
    }
    for (; i < n; i += stride) {
        float4 x = b[i], y = c[i];
        a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
    }
}

// partial[block] = sum of the block's share of a (read-only: one read of 16 bytes per element).
// Launched with 256 threads per block.
extern "C" __global__ void lynx_read(const float4 *__restrict__ a, float *__restrict__ partial, unsigned long long n) {
    __shared__ float sums[256];
    float sum = 0.0f;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = a[i + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) sum += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (; i < n; i += stride) {
        float4 v = a[i];
        sum += (v.x + v.y) + (v.z + v.w);
    }
    sums[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            sums[threadIdx.x] += sums[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = sums[0];
    }
}
