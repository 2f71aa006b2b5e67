// The CuPy backend's fused kernels (cuda_kernels.py compiles them with NVRTC through
// cupy.RawModule and launches them). Every sum is float32, over the window offsets in the
// order of the xp step a kernel replaces; every result is rounded once to the storage type
// K: 0 float32, 1 float16, 2 bfloat16 held in float32.

typedef long long i64;

template <int K> struct Storage { typedef float type; };
template <> struct Storage<1> { typedef unsigned short type; };

__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// Round to nearest, ties to even, clearing the low DROPPED bits; a NaN stays a quiet NaN.
template <int DROPPED> __device__ __forceinline__ float round_bits(float v) {
    unsigned int b = __float_as_uint(v);
    const unsigned int keep = 0xffffffffu << DROPPED;
    if ((b & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((b | 0x400000u) & keep);
    b += ((1u << (DROPPED - 1)) - 1u) + ((b >> DROPPED) & 1u);
    return __uint_as_float(b & keep);
}

template <int K> __device__ __forceinline__ typename Storage<K>::type st(float v);
template <> __device__ __forceinline__ float st<0>(float v) { return v; }
template <> __device__ __forceinline__ unsigned short st<1>(float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
template <> __device__ __forceinline__ float st<2>(float v) { return round_bits<16>(v); }

struct Geometry {  // one layer: input X x Y x L, output XO x YO, window RX x RY
    int X, Y, L, XO, YO, RX, RY, S, PX, PY;
};
// The kernels take the geometry as ten ints (after the element count) and rebuild it.
#define GEOMETRY int X, int Y, int L, int XO, int YO, int RX_, int RY_, int S, int PX, int PY
#define GEOMETRY_STRUCT const Geometry g = {X, Y, L, XO, YO, RX_, RY_, S, PX, PY}

#define GRID_STRIDE(i, total) \
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (total); \
         i += (i64)gridDim.x * blockDim.x)

// cols[b][ox][oy][rx][ry][l] = IN[b][ox*S+rx-PX][oy*S+ry-PY][l], 0 on padding.
template <typename T>
__global__ void im2col(const T* in, T* cols, i64 total, GEOMETRY) {
    GEOMETRY_STRUCT;
    const int per_image = g.XO * g.YO * g.RX * g.RY * g.L;
    GRID_STRIDE(i, total) {
        const i64 b = i / per_image;
        int r = (int)(i - b * per_image);
        const int l = r % g.L; r /= g.L;
        const int ry = r % g.RY; r /= g.RY;
        const int rx = r % g.RX; r /= g.RX;
        const int oy = r % g.YO;
        const int ox = r / g.YO;
        const int x = ox * g.S + rx - g.PX, y = oy * g.S + ry - g.PY;
        T v = 0;
        if (x >= 0 && x < g.X && y >= 0 && y < g.Y) v = in[((b * g.X + x) * g.Y + y) * g.L + l];
        cols[i] = v;
    }
}

// Visit the outputs (ox, oy) whose window reads input (x, y), in window-offset order.
#define FOR_WINDOWS_READING(x, y, BODY) \
    for (int rx = 0; rx < g.RX; ++rx) { \
        const int px = (x) + g.PX - rx; \
        if (px < 0 || px % g.S) continue; \
        const int ox = px / g.S; \
        if (ox >= g.XO) continue; \
        for (int ry = 0; ry < g.RY; ++ry) { \
            const int py = (y) + g.PY - ry; \
            if (py < 0 || py % g.S) continue; \
            const int oy = py / g.S; \
            if (oy >= g.YO) continue; \
            BODY \
        } \
    }

// IN_D[b][x][y][l] = sum of cols[b][ox][oy][rx][ry][l] over the windows reading (x, y).
template <int K>
__global__ void col2im(const float* cols, typename Storage<K>::type* in_d, i64 total, GEOMETRY) {
    GEOMETRY_STRUCT;
    const int per_image = g.X * g.Y * g.L;
    GRID_STRIDE(i, total) {
        const i64 b = i / per_image;
        int r = (int)(i - b * per_image);
        const int l = r % g.L; r /= g.L;
        const int y = r % g.Y;
        const int x = r / g.Y;
        float sum = 0.0f;
        FOR_WINDOWS_READING(x, y, {
            sum += cols[((((b * g.XO + ox) * g.YO + oy) * g.RX + rx) * g.RY + ry) * g.L + l];
        })
        in_d[i] = st<K>(sum);
    }
}

// OUT = BIASES + sum over the window of IN * FILTERS[rx][ry], per channel.
template <int K>
__global__ void depthwise_forward(const typename Storage<K>::type* in,
                                  const typename Storage<K>::type* filters,
                                  const typename Storage<K>::type* biases,
                                  typename Storage<K>::type* out, i64 total, GEOMETRY) {
    GEOMETRY_STRUCT;
    const int per_image = g.XO * g.YO * g.L;
    GRID_STRIDE(i, total) {
        const i64 b = i / per_image;
        int r = (int)(i - b * per_image);
        const int l = r % g.L; r /= g.L;
        const int oy = r % g.YO;
        const int ox = r / g.YO;
        float acc = ld(biases[l]);
        for (int rx = 0; rx < g.RX; ++rx) {
            const int x = ox * g.S + rx - g.PX;
            if (x < 0 || x >= g.X) continue;
            for (int ry = 0; ry < g.RY; ++ry) {
                const int y = oy * g.S + ry - g.PY;
                if (y < 0 || y >= g.Y) continue;
                acc += ld(in[((b * g.X + x) * g.Y + y) * g.L + l]) *
                       ld(filters[(rx * g.RY + ry) * g.L + l]);
            }
        }
        out[i] = st<K>(acc);
    }
}

// IN_D = sum over the windows reading (x, y) of OUT_D * FILTERS[rx][ry].
template <int K>
__global__ void depthwise_backward(const typename Storage<K>::type* out_d,
                                   const typename Storage<K>::type* filters,
                                   typename Storage<K>::type* in_d, i64 total, GEOMETRY) {
    GEOMETRY_STRUCT;
    const int per_image = g.X * g.Y * g.L;
    GRID_STRIDE(i, total) {
        const i64 b = i / per_image;
        int r = (int)(i - b * per_image);
        const int l = r % g.L; r /= g.L;
        const int y = r % g.Y;
        const int x = r / g.Y;
        float acc = 0.0f;
        FOR_WINDOWS_READING(x, y, {
            acc += ld(out_d[((b * g.XO + ox) * g.YO + oy) * g.L + l]) *
                   ld(filters[(rx * g.RY + ry) * g.L + l]);
        })
        in_d[i] = st<K>(acc);
    }
}

// partial[block][rx][ry][l] = sum over this block's output positions of IN * OUT_D.
// Threads: x over channels, y over positions; the host sums the blocks' partials.
template <typename T, int RX, int RY>
__global__ void depthwise_gradient(const T* in, const T* out_d, float* partial,
                                   i64 positions, GEOMETRY) {
    GEOMETRY_STRUCT;
    const int l = blockIdx.y * blockDim.x + threadIdx.x;
    float acc[RX * RY];
#pragma unroll
    for (int k = 0; k < RX * RY; ++k) acc[k] = 0.0f;
    if (l < g.L) {
        for (i64 p = blockIdx.x * (i64)blockDim.y + threadIdx.y; p < positions;
             p += (i64)gridDim.x * blockDim.y) {
            const int oy = (int)(p % g.YO);
            const i64 t = p / g.YO;
            const int ox = (int)(t % g.XO);
            const i64 b = t / g.XO;
            const float residual = ld(out_d[p * g.L + l]);
#pragma unroll
            for (int rx = 0; rx < RX; ++rx) {
                const int x = ox * g.S + rx - g.PX;
                if (x < 0 || x >= g.X) continue;
#pragma unroll
                for (int ry = 0; ry < RY; ++ry) {
                    const int y = oy * g.S + ry - g.PY;
                    if (y < 0 || y >= g.Y) continue;
                    acc[rx * RY + ry] += ld(in[((b * g.X + x) * g.Y + y) * g.L + l]) * residual;
                }
            }
        }
    }
    // Reduce over threadIdx.y in shared memory: one row of partials per block.
    __shared__ float rows[8][32];
#pragma unroll
    for (int k = 0; k < RX * RY; ++k) {
        rows[threadIdx.y][threadIdx.x] = acc[k];
        __syncthreads();
        if (threadIdx.y == 0 && l < g.L) {
            float sum = 0.0f;
            for (int j = 0; j < blockDim.y; ++j) sum += rows[j][threadIdx.x];
            partial[((i64)blockIdx.x * RX * RY + k) * g.L + l] = sum;
        }
        __syncthreads();
    }
}

// OUT = the window's maximum; a window position on padding is the value 0 (docs/standard.md §4).
template <typename T>
__global__ void maxpool_forward(const T* in, T* out, i64 total, GEOMETRY) {
    GEOMETRY_STRUCT;
    const int per_image = g.XO * g.YO * g.L;
    GRID_STRIDE(i, total) {
        const i64 b = i / per_image;
        int r = (int)(i - b * per_image);
        const int l = r % g.L; r /= g.L;
        const int oy = r % g.YO;
        const int ox = r / g.YO;
        T best = 0;
        bool first = true;
        float best_value = 0.0f;
        for (int rx = 0; rx < g.RX; ++rx) {
            const int x = ox * g.S + rx - g.PX;
            for (int ry = 0; ry < g.RY; ++ry) {
                const int y = oy * g.S + ry - g.PY;
                T raw = 0;
                if (x >= 0 && x < g.X && y >= 0 && y < g.Y)
                    raw = in[((b * g.X + x) * g.Y + y) * g.L + l];
                const float v = ld(raw);
                // the first value, a larger one, or a NaN (which then stays)
                if (first || v > best_value || (v != v && best_value == best_value)) {
                    best = raw;
                    best_value = v;
                }
                first = false;
            }
        }
        out[i] = best;
    }
}

// IN_D = sum of OUT_D over the windows reading (x, y) whose maximum equals IN (all ties).
template <int K>
__global__ void maxpool_backward(const typename Storage<K>::type* in,
                                 const typename Storage<K>::type* out,
                                 const typename Storage<K>::type* out_d,
                                 typename Storage<K>::type* in_d, i64 total, GEOMETRY) {
    GEOMETRY_STRUCT;
    const int per_image = g.X * g.Y * g.L;
    GRID_STRIDE(i, total) {
        const i64 b = i / per_image;
        int r = (int)(i - b * per_image);
        const int l = r % g.L; r /= g.L;
        const int y = r % g.Y;
        const int x = r / g.Y;
        const float v = ld(in[i]);
        float acc = 0.0f;
        FOR_WINDOWS_READING(x, y, {
            const i64 o = ((b * g.XO + ox) * g.YO + oy) * g.L + l;
            if (ld(out[o]) == v) acc += ld(out_d[o]);
        })
        in_d[i] = st<K>(acc);
    }
}
