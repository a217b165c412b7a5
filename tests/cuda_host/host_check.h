/* host_check.h -- what the host checks of the CUDA backend (tests/cuda_host) share: the
 * EXPECT counter whose "N passed, N failed" line tests/run.sh reads, a small xorshift
 * generator, and, for the programs that #include a .cu file to run its element code on the
 * host, stand-ins for the backend functions that live in runtime.cu/ops.cu (not linked).
 */
#ifndef TC_HOST_CHECK_H
#define TC_HOST_CHECK_H
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int g_pass, g_fail;
#define EXPECT(cond, ...)                                                                   \
    do {                                                                                    \
        if (cond) g_pass++;                                                                 \
        else {                                                                              \
            g_fail++;                                                                       \
            if (g_fail < 40) printf("FAIL %s:%d: ", __FILE__, __LINE__), printf(__VA_ARGS__), printf("\n"); \
        }                                                                                   \
    } while (0)

static uint64_t g_rng = 88172645463325252ull;
static uint64_t rnd() { return g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17; }
static int64_t rint_(int64_t n) { return n <= 0 ? 0 : (int64_t)(rnd() % (uint64_t)n); }

#ifdef __CUDACC__
tc_status cu_fail(tc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}
tc_status cu_check(cudaError_t e, const char *what) { return e == cudaSuccess ? TC_OK : cu_fail(TC_ERR_DEVICE, "%s", what); }
const char *cu_op_name(int op) { return op == TC_OP_SUM ? "sum" : "op"; }
tc_status cu_unsupported(const tc_cuda_call *) { return TC_ERR_UNSUPPORTED; }
tc_status cu_scratch_alloc(int, size_t, void **) { return TC_ERR_MEMORY; }
tc_status cu_scratch_free(int, void *) { return TC_OK; }
tc_status cu_private_copy(int, const tc_cuda_view *, tc_cuda_view *, void **tmp, const char *) /* strided.cu */
{
    *tmp = nullptr;
    return TC_ERR_MEMORY;
}
cudaStream_t cu_stream(void) { return nullptr; } /* stream.cu: the legacy default stream */
bool cu_capturing(int) { return false; }
tc_cuda_devcheck *cu_devcheck_word(int) { return nullptr; } /* stream.cu: no error word here */
#endif
#endif /* TC_HOST_CHECK_H */
