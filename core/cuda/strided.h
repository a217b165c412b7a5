/* strided.h -- dense copies of strided views for the library-backed launchers (blas.cu,
 * dnn.cu): cuBLAS reads a matrix only with one unit stride and a leading dimension, cuDNN
 * filters only packed, so an operand they cannot read as it is goes through a contiguous
 * scratch copy made here (strided.cu). CUDA C++ only.
 */
#ifndef TC_CUDA_STRIDED_H
#define TC_CUDA_STRIDED_H

#include "cuda_internal.h"

/* Bytes of one element of dtype (0 for an unknown dtype). */
CU_HIDDEN size_t cu_elsize(int dtype);
/* A contiguous (row-major) view of v's dtype and sizes over data. */
CU_HIDDEN tc_cuda_view cu_view_dense(const tc_cuda_view *v, void *data);
/* Whether v is row-major contiguous (strides of size-1 dims ignored). */
CU_HIDDEN bool cu_view_is_dense(const tc_cuda_view *v);
/* dst = src, elementwise on dst's sizes; src (same dtype) broadcasts to dst by aligning
 * trailing dims (a missing or size-1 dim repeats). Bits are copied as they are. what names
 * the op in messages. Queued on the current stream (cu_stream). */
CU_HIDDEN tc_status cu_strided_copy(const tc_cuda_view *dst, const tc_cuda_view *src, const char *what);
/* v = w * v for a float dtype (f16/bf16 in float); w == 0 gives zeros whatever v held
 * (NaN included), as BLAS's beta == 0. */
CU_HIDDEN tc_status cu_strided_scale(const tc_cuda_view *v, double w, const char *what);
/* A contiguous scratch copy of v (*tmp: the block to free with cu_scratch_free, NULL when v
 * was already dense and *use is v itself). */
CU_HIDDEN tc_status cu_dense_input(int dev, const tc_cuda_view *v, tc_cuda_view *use, void **tmp, const char *what);
/* The same, but always a copy (*tmp NULL only for an empty or absent v): an input that
 * shares memory with a result is read from its private copy while the result is written. */
CU_HIDDEN tc_status cu_private_copy(int dev, const tc_cuda_view *v, tc_cuda_view *use, void **tmp, const char *what);

/* Launch geometry for a grid-stride loop over n items. */
static inline unsigned cu_blocks_for(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

#endif /* TC_CUDA_STRIDED_H */
