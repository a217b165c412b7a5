/* test_emu_cudnn.h -- what the fake cuDNN's unit test files share (tests only; see
 * test_emu_cudnn.cc): the check macros and counters, "device" memory of the stub runtime,
 * random values and T, a strided device tensor with its descriptor.
 */
#ifndef TC_TEST_EMU_CUDNN_H
#define TC_TEST_EMU_CUDNN_H

#include "emu_cudnn_impl.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <map>
#include <vector>

extern int passed, failed;
void *dmalloc(size_t n); /* a block the stub emu::device_range accepts */
void dfree(void *p);
double rnd();            /* deterministic values in [-1, 1) */
void test_rnn_all();     /* test_emu_cudnn_rnn.cc */

/* ---- checks ---------------------------------------------------------------------------------- */

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) passed++;                                                                        \
        else {                                                                                     \
            failed++;                                                                              \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)
#define OK(call) CHECK((call) == CUDNN_STATUS_SUCCESS, "%s", #call)

struct T {
    cudnnTensorDescriptor_t d = NULL;
    cudnnDataType_t t;
    std::vector<int> dim, st;
    void *p = NULL;
    size_t bytes = 0;
    T(cudnnDataType_t ty, std::vector<int> dims, int pad = 0) : t(ty), dim(dims), st(dims.size())
    {
        int64_t s = 1;
        for (int i = (int)dims.size() - 1; i >= 0; i--) st[i] = (int)s, s *= dims[i] + (i == (int)dims.size() - 1 ? pad : 0);
        bytes = (size_t)s * emu_dnn::elsize(ty);
        p = dmalloc(bytes);
        cudnnCreateTensorDescriptor(&d);
        if (cudnnSetTensorNdDescriptor(d, ty, (int)dims.size(), dims.data(), st.data()) != CUDNN_STATUS_SUCCESS)
            printf("FAIL: tensor descriptor\n"), failed++;
    }
    ~T()
    {
        cudnnDestroyTensorDescriptor(d);
        dfree(p);
    }
    int64_t n() const
    {
        int64_t k = 1;
        for (int v : dim) k *= v;
        return k;
    }
    int64_t off(int64_t i) const
    {
        int64_t o = 0;
        for (int k = (int)dim.size() - 1; k >= 0; k--) o += (i % dim[k]) * st[k], i /= dim[k];
        return o;
    }
    double get(int64_t i) const { return emu_dnn::load(t, p, off(i)); }
    void set(int64_t i, double v) { emu_dnn::store(t, p, off(i), v); }
    void fill() { for (int64_t i = 0; i < n(); i++) set(i, rnd()); }
    std::vector<double> vals() const
    {
        std::vector<double> v((size_t)n());
        for (int64_t i = 0; i < n(); i++) v[(size_t)i] = get(i);
        return v;
    }
    double at4(int a, int b, int c, int e) const { return get(((int64_t)(a * dim[1] + b) * dim[2] + c) * dim[3] + e); }
};

static inline double maxdiff(const std::vector<double> &a, const std::vector<double> &b)
{
    double m = a.size() == b.size() ? 0 : 1e30;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) m = std::max(m, fabs(a[i] - b[i]) / (1 + fabs(b[i])));
    return m;
}

static inline double dot(const std::vector<double> &a, const std::vector<double> &b)
{
    double s = 0;
    for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
    return s;
}


#endif
