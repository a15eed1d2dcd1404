// Thin wrappers over the PTX instructions the implicit-GEMM kernels are built from:
// cp.async (global → shared, 16 bytes, zero-fill for padding), ldmatrix (shared →
// registers in the tensor cores' fragment layout) and mma.sync (bf16 m16n8k16 and tf32
// m16n8k8, fp32 accumulation). sm_80 instructions, native on Hopper.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace ae::cuda::ptx {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes, or writes 16 zero bytes when !valid (src is then not read).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
// 16 bytes from registers into shared memory (an operand chunk computed, not copied).
__device__ __forceinline__ void st_shared16(uint32_t dst, const uint4& v) {
  asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// D = A·B + D on one 16×8 fp32 tile; INSTR names the mma.sync form (shape, operand type).
#define AE_PTX_MMA_16X8(INSTR, d, a, b)                                              \
  asm(INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                               \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
// A 16×16 bf16 (row), B 16×8 bf16 (col).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  AE_PTX_MMA_16X8("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", d, a, b);
}
// A 16×8 tf32 (row), B 8×8 tf32 (col).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  AE_PTX_MMA_16X8("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", d, a, b);
}
#undef AE_PTX_MMA_16X8
// fp32 bits → tf32 (round to nearest, ties away), as cuBLAS does for TF32 GEMMs.
__device__ __forceinline__ uint32_t to_tf32(uint32_t x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(x)));
  return r;
}

// The two element types the GEMMs run on: how a k-step multiplies, and scalar load/store.
template <typename T>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  static constexpr int kStep = 16;  // k per mma
  __device__ __forceinline__ static void fix(uint32_t&) {}
  __device__ __forceinline__ static uint32_t fix_ret(uint32_t x) { return x; }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_bf16(d, a, b);
  }
};
// fp32 operands are stored already rounded to tf32 (store_f below), so the tensor cores'
// truncation of the low 13 bits loses nothing and no conversion is needed here.
template <>
struct Mma<float> {
  static constexpr int kStep = 8;
  __device__ __forceinline__ static void fix(uint32_t&) {}
  __device__ __forceinline__ static uint32_t fix_ret(uint32_t x) { return x; }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_tf32(d, a, b);
  }
};

__device__ __forceinline__ float load_f(const float* p) { return *p; }
__device__ __forceinline__ float load_f(const __nv_bfloat16* p) { return __bfloat162float(*p); }
// 8 consecutive values (16-byte aligned) from global or shared memory into registers: one
// 16-byte access in bf16, two in fp32.
__device__ __forceinline__ void load8(const float* p, float (&v)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float (&v)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}
// Stores of GEMM operands (activations, gradients, packed weights): fp32 ones are rounded
// to tf32 (round to nearest), which the TF32 tensor-core path reads exactly.
__device__ __forceinline__ float round_tf32(float v) { return __uint_as_float(to_tf32(__float_as_uint(v))); }
__device__ __forceinline__ void store_f(float* p, float v) { *p = round_tf32(v); }
__device__ __forceinline__ void store_f(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

}  // namespace ae::cuda::ptx
