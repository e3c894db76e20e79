// Memory-bandwidth probes for lynx's roofline (lynx-kernels, compiled at run time with NVRTC for
// the device's own architecture). Every kernel is a grid-stride loop over float4 (16-byte)
// elements; bytes are counted on the host (copy 2 x 16, triad 3 x 16, read 16 per element).

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
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        c[i] = a[i];
    }
}

// a = b + s * c
extern "C" __global__ void lynx_triad(float4 *__restrict__ a, const float4 *__restrict__ b,
                                      const float4 *__restrict__ c, float s, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        float4 x = b[i], y = c[i];
        a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
    }
}

// partial[block] = sum of the block's share of a (read-only: one read of 16 bytes per element).
// Launched with 256 threads per block.
extern "C" __global__ void lynx_read(const float4 *__restrict__ a, float *__restrict__ partial, unsigned long long n) {
    __shared__ float sums[256];
    float sum = 0.0f;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
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
