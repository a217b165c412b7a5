/* attention.h -- what the two sets of attention kernels share: the problem's sizes and the
 * keys each query attends. attention.cu holds the op's entry (cu_op_attn) and the CUDA-core
 * kernels (float32, float64; the half types before compute capability 8.0); attention_tc.cu
 * the tensor-core kernels (float16, bfloat16; float32 in TF32).
 */
#ifndef TC_CUDA_ATTENTION_H
#define TC_CUDA_ATTENTION_H

#include "dense_call.h"

namespace tck {

/* N problems of L queries and S keys, E features in q and k, Ev in v; nqb: blocks of
 * queries per problem (the forward and dq grids): 64 queries a block for the tensor-core
 * kernels, cfg<D, C>::BR for the CUDA-core ones (attention.cu's launch sets it). */
struct aargs {
    int64_t N, L, S, E, Ev, nqb;
    double scale;
    int causal;
};

/* Keys query i attends (0 for a row past L). */
__device__ __forceinline__ int64_t live_keys(const aargs &a, int64_t i)
{
    if (i >= a.L) return 0;
    return a.causal && i + 1 < a.S ? i + 1 : a.S;
}

/* The keys a block of queries [i0, i0 + rows) attends at all. */
__device__ __forceinline__ int64_t block_keys(const aargs &a, int64_t i0, int rows)
{
    int64_t last = i0 + rows < a.L ? i0 + rows : a.L;
    return a.causal && last < a.S ? last : a.S;
}

/* The tensor-core forward or backward of call c on the dense operands of x (attention_tc.cu):
 * float16 / bfloat16 with feature bucket D = `wide` <= 64 ? 64 : 128, float32 (in TF32) with
 * `wide` <= 64; other calls are TC_ERR_ARG. */
tc_status attn_tensor_cores(int dev, const tc_cuda_call *c, dense_call &x, const aargs &a, int64_t wide);

} // namespace tck

#endif
