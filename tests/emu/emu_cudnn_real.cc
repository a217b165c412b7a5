/* emu_cudnn_real.cc -- the real cuDNN as a second opinion on every descriptor the emulator
 * is given (tests only; emu_cudnn_impl.h).
 *
 * The emulator's cuDNN checks what NVIDIA's API reference says, as we read it. cuDNN's
 * descriptor calls need no GPU (only a handle does), so each tensor, filter, convolution,
 * pooling, RNN and RNN data descriptor the emulator sets is also set, with the same
 * arguments, on a descriptor of the real library (libcudnn.so.9 beside the CUDA headers
 * the emulator was built with, or $TOCHA_CUDA_EMU_REAL_CUDNN; "0" turns the check off;
 * without the library there is no second opinion), and a convolution's output size is
 * asked of both. Where they disagree:
 *   - the real cuDNN refuses what the emulator took: a GPU would fail there, so the call
 *     fails here too, with the real status and the real library's message in the note;
 *   - the emulator refuses what the real cuDNN takes: a note (the emulator is stricter than
 *     cuDNN, or does not emulate that case), the emulator's status kept.
 * tc_cuda_emu_real_cudnn() gives the counts and the real library's version.
 */
#include "emu_cudnn_impl.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <atomic>
#include <mutex>

#ifndef EMU_REAL_CUDNN
#define EMU_REAL_CUDNN "libcudnn.so.9"
#endif

/* The real entry points (their descriptor arguments are the real library's objects: void *). */
struct emu_dnn::real_cudnn {
    size_t version;
    size_t (*GetVersion)(void);
    void (*GetLastErrorString)(char *, size_t);
    cudnnStatus_t (*CreateTensor)(void **), (*DestroyTensor)(void *);
    cudnnStatus_t (*SetTensorNd)(void *, cudnnDataType_t, int, const int *, const int *);
    cudnnStatus_t (*SetTensor4d)(void *, cudnnTensorFormat_t, cudnnDataType_t, int, int, int, int);
    cudnnStatus_t (*CreateFilter)(void **), (*DestroyFilter)(void *);
    cudnnStatus_t (*SetFilter4d)(void *, cudnnDataType_t, cudnnTensorFormat_t, int, int, int, int);
    cudnnStatus_t (*CreateConv)(void **), (*DestroyConv)(void *);
    cudnnStatus_t (*SetConv2d)(void *, int, int, int, int, int, int, cudnnConvolutionMode_t, cudnnDataType_t);
    cudnnStatus_t (*SetConvGroups)(void *, int);
    cudnnStatus_t (*SetConvMath)(void *, cudnnMathType_t);
    cudnnStatus_t (*ConvOutDim)(void *, void *, void *, int *, int *, int *, int *);
    cudnnStatus_t (*CreatePool)(void **), (*DestroyPool)(void *);
    cudnnStatus_t (*SetPool2d)(void *, cudnnPoolingMode_t, cudnnNanPropagation_t, int, int, int, int, int, int);
    cudnnStatus_t (*CreateRNN)(void **), (*DestroyRNN)(void *);
    cudnnStatus_t (*SetRNN)(void *, cudnnRNNAlgo_t, cudnnRNNMode_t, cudnnRNNBiasMode_t, cudnnDirectionMode_t,
                            cudnnRNNInputMode_t, cudnnDataType_t, cudnnDataType_t, cudnnMathType_t, int32_t, int32_t,
                            int32_t, int32_t, void *, uint32_t);
    cudnnStatus_t (*CreateRNNData)(void **), (*DestroyRNNData)(void *);
    cudnnStatus_t (*SetRNNData)(void *, cudnnDataType_t, cudnnRNNDataLayout_t, int, int, int, const int *, void *);
};

namespace {

using emu_dnn::real_cudnn;

std::atomic<long long> g_checked{0}, g_gpu_differs{0}, g_emu_stricter{0};
std::mutex g_mu; /* the real library's last-error string is per thread, the counts atomic;
                  * one check at a time keeps the notes in order */

template <class F> bool bind(void *h, const char *name, F &f)
{
    void *p = dlsym(h, name);
    memcpy(&f, &p, sizeof p);
    return p != nullptr;
}

const real_cudnn *load_real()
{
    const char *env = getenv("TOCHA_CUDA_EMU_REAL_CUDNN");
    if (env && strcmp(env, "0") == 0) return nullptr;
    void *h = dlopen(env && *env ? env : EMU_REAL_CUDNN, RTLD_NOW | RTLD_LOCAL);
    if (!h && env && *env) /* a library named that is not there is a mistake worth a note; */
        emu::note("TOCHA_CUDA_EMU_REAL_CUDNN=%s: %s: no second opinion", env, dlerror());
    if (!h) return nullptr; /* the default missing is a machine without cuDNN */
    static real_cudnn r;
    bool ok = bind(h, "cudnnGetVersion", r.GetVersion) && bind(h, "cudnnGetLastErrorString", r.GetLastErrorString) &&
              bind(h, "cudnnCreateTensorDescriptor", r.CreateTensor) &&
              bind(h, "cudnnDestroyTensorDescriptor", r.DestroyTensor) &&
              bind(h, "cudnnSetTensorNdDescriptor", r.SetTensorNd) && bind(h, "cudnnSetTensor4dDescriptor", r.SetTensor4d) &&
              bind(h, "cudnnCreateFilterDescriptor", r.CreateFilter) &&
              bind(h, "cudnnDestroyFilterDescriptor", r.DestroyFilter) &&
              bind(h, "cudnnSetFilter4dDescriptor", r.SetFilter4d) &&
              bind(h, "cudnnCreateConvolutionDescriptor", r.CreateConv) &&
              bind(h, "cudnnDestroyConvolutionDescriptor", r.DestroyConv) &&
              bind(h, "cudnnSetConvolution2dDescriptor", r.SetConv2d) &&
              bind(h, "cudnnSetConvolutionGroupCount", r.SetConvGroups) &&
              bind(h, "cudnnSetConvolutionMathType", r.SetConvMath) &&
              bind(h, "cudnnGetConvolution2dForwardOutputDim", r.ConvOutDim) &&
              bind(h, "cudnnCreatePoolingDescriptor", r.CreatePool) &&
              bind(h, "cudnnDestroyPoolingDescriptor", r.DestroyPool) &&
              bind(h, "cudnnSetPooling2dDescriptor", r.SetPool2d) && bind(h, "cudnnCreateRNNDescriptor", r.CreateRNN) &&
              bind(h, "cudnnDestroyRNNDescriptor", r.DestroyRNN) && bind(h, "cudnnSetRNNDescriptor_v8", r.SetRNN) &&
              bind(h, "cudnnCreateRNNDataDescriptor", r.CreateRNNData) &&
              bind(h, "cudnnDestroyRNNDataDescriptor", r.DestroyRNNData) &&
              bind(h, "cudnnSetRNNDataDescriptor", r.SetRNNData);
    if (!ok) {
        emu::note("the real cuDNN at %s lacks a descriptor call: no second opinion", env && *env ? env : EMU_REAL_CUDNN);
        return nullptr;
    }
    r.version = r.GetVersion();
    return &r;
}

const real_cudnn *real()
{
    static const real_cudnn *r = load_real();
    return r;
}

/* A real descriptor of one kind, destroyed with its scope. */
struct real_desc {
    cudnnStatus_t (*destroy)(void *);
    void *d = nullptr;
    real_desc(cudnnStatus_t (*create)(void **), cudnnStatus_t (*destroy_fn)(void *)) : destroy(destroy_fn)
    {
        if (create(&d) != CUDNN_STATUS_SUCCESS) d = nullptr;
    }
    ~real_desc()
    {
        if (d) destroy(d);
    }
};

/* Sets a real tensor descriptor as the emulator's t is set (false: the real one refused). */
bool real_tensor(const real_cudnn &r, const cudnnTensorStruct &t, real_desc &d)
{
    return d.d && r.SetTensorNd(d.d, t.dt, t.nd, t.dim, t.stride) == CUDNN_STATUS_SUCCESS;
}

bool real_filter(const real_cudnn &r, const cudnnFilterStruct &f, real_desc &d)
{
    return d.d && r.SetFilter4d(d.d, f.dt, f.fmt, f.dim[0], f.dim[1], f.dim[2], f.dim[3]) == CUDNN_STATUS_SUCCESS;
}

} // namespace

namespace emu_dnn {

cudnnStatus_t second_opinion(const char *fn, cudnnStatus_t mine, const std::function<cudnnStatus_t(const real_cudnn &)> &ask)
{
    const real_cudnn *r = real();
    if (!r) return mine;
    std::lock_guard<std::mutex> l(g_mu);
    char msg[512] = "";
    cudnnStatus_t theirs = ask(*r);
    if (theirs != CUDNN_STATUS_SUCCESS) r->GetLastErrorString(msg, sizeof msg);
    g_checked++;
    bool ok_mine = mine == CUDNN_STATUS_SUCCESS, ok_theirs = theirs == CUDNN_STATUS_SUCCESS;
    if (ok_mine && !ok_theirs) {
        g_gpu_differs++;
        emu::note("%s: the real cuDNN %zu refuses it (%d: %s), which the emulator took", fn, r->version, (int)theirs, msg);
        return theirs;
    }
    if (!ok_mine && ok_theirs) {
        g_emu_stricter++;
        emu::note("%s: the emulator refuses (%d) what the real cuDNN %zu takes", fn, (int)mine, r->version);
    }
    return mine;
}

/* The calls second_opinion's callers put to the real library, on fresh real descriptors. */
cudnnStatus_t real_set_tensor_nd(const real_cudnn &r, cudnnDataType_t t, int nb, const int *dims, const int *st)
{
    real_desc d(r.CreateTensor, r.DestroyTensor);
    return d.d ? r.SetTensorNd(d.d, t, nb, dims, st) : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t real_set_tensor_4d(const real_cudnn &r, cudnnTensorFormat_t f, cudnnDataType_t t, int n, int c,
                                 int h, int w)
{
    real_desc d(r.CreateTensor, r.DestroyTensor);
    return d.d ? r.SetTensor4d(d.d, f, t, n, c, h, w) : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t real_set_filter_4d(const real_cudnn &r, cudnnDataType_t t, cudnnTensorFormat_t f, int k, int c,
                                 int h, int w)
{
    real_desc d(r.CreateFilter, r.DestroyFilter);
    return d.d ? r.SetFilter4d(d.d, t, f, k, c, h, w) : CUDNN_STATUS_ALLOC_FAILED;
}

/* A real convolution descriptor set as cv is; then fn(desc). */
static cudnnStatus_t with_real_conv(const real_cudnn &r, const cudnnConvolutionStruct &cv, bool set,
                                    const std::function<cudnnStatus_t(void *)> &fn)
{
    real_desc d(r.CreateConv, r.DestroyConv);
    if (!d.d) return CUDNN_STATUS_ALLOC_FAILED;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    if (set)
        st = r.SetConv2d(d.d, cv.pad[0], cv.pad[1], cv.str[0], cv.str[1], cv.dil[0], cv.dil[1], cv.mode, cv.compute);
    return st != CUDNN_STATUS_SUCCESS ? st : fn(d.d);
}

cudnnStatus_t real_set_conv_2d(const real_cudnn &r, const cudnnConvolutionStruct &cv)
{
    return with_real_conv(r, cv, true, [](void *) { return CUDNN_STATUS_SUCCESS; });
}

cudnnStatus_t real_set_conv_groups(const real_cudnn &r, int g)
{
    cudnnConvolutionStruct none{};
    return with_real_conv(r, none, false, [&](void *d) { return r.SetConvGroups(d, g); });
}

cudnnStatus_t real_set_conv_math(const real_cudnn &r, cudnnMathType_t m)
{
    cudnnConvolutionStruct none{};
    return with_real_conv(r, none, false, [&](void *d) { return r.SetConvMath(d, m); });
}

/* The output size both libraries give for a convolution of x by f (dims: the emulator's
 * n, c, h, w; the real library's when they differ, as a GPU would answer). */
cudnnStatus_t second_opinion_conv_dims(const char *fn, cudnnStatus_t mine, const cudnnConvolutionStruct &cv,
                                       const cudnnTensorStruct &x, const cudnnFilterStruct &f, int *dims)
{
    int theirs[4] = {0, 0, 0, 0};
    cudnnStatus_t st = second_opinion(fn, mine, [&](const real_cudnn &r) {
        real_desc xd(r.CreateTensor, r.DestroyTensor), fd(r.CreateFilter, r.DestroyFilter);
        if (!real_tensor(r, x, xd) || !real_filter(r, f, fd)) return CUDNN_STATUS_BAD_PARAM;
        return with_real_conv(r, cv, true, [&](void *d) {
            cudnnStatus_t s = r.SetConvGroups(d, cv.groups);
            if (s == CUDNN_STATUS_SUCCESS) s = r.SetConvMath(d, cv.math);
            return s == CUDNN_STATUS_SUCCESS ? r.ConvOutDim(d, xd.d, fd.d, &theirs[0], &theirs[1], &theirs[2], &theirs[3])
                                             : s;
        });
    });
    if (st != CUDNN_STATUS_SUCCESS || mine != CUDNN_STATUS_SUCCESS || !real() || !memcmp(theirs, dims, sizeof theirs))
        return st;
    g_gpu_differs++;
    emu::note("%s: the real cuDNN gives (%d,%d,%d,%d), the emulator (%d,%d,%d,%d)", fn, theirs[0], theirs[1], theirs[2],
              theirs[3], dims[0], dims[1], dims[2], dims[3]);
    memcpy(dims, theirs, sizeof theirs);
    return st;
}

cudnnStatus_t real_set_pool_2d(const real_cudnn &r, cudnnPoolingMode_t mode, cudnnNanPropagation_t nan, int wh,
                               int ww, int ph, int pw, int sh, int sw)
{
    real_desc d(r.CreatePool, r.DestroyPool);
    return d.d ? r.SetPool2d(d.d, mode, nan, wh, ww, ph, pw, sh, sw) : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t real_set_rnn(const real_cudnn &r, cudnnRNNAlgo_t algo, cudnnRNNMode_t cell, cudnnRNNBiasMode_t bias,
                           cudnnDirectionMode_t dir, cudnnRNNInputMode_t in_mode, cudnnDataType_t dt,
                           cudnnDataType_t prec, cudnnMathType_t math, int32_t I, int32_t H, int32_t P, int32_t L,
                           uint32_t aux)
{
    real_desc d(r.CreateRNN, r.DestroyRNN);
    /* no dropout descriptor: setting one needs a handle (a GPU); cuDNN takes NULL */
    return d.d ? r.SetRNN(d.d, algo, cell, bias, dir, in_mode, dt, prec, math, I, H, P, L, nullptr, aux)
               : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t real_set_rnn_data(const real_cudnn &r, cudnnDataType_t dt, cudnnRNNDataLayout_t layout, int T,
                                int N, int V, const int *lens, void *fill)
{
    real_desc d(r.CreateRNNData, r.DestroyRNNData);
    return d.d ? r.SetRNNData(d.d, dt, layout, T, N, V, lens, fill) : CUDNN_STATUS_ALLOC_FAILED;
}

} // namespace emu_dnn

/* checked: descriptor calls put to the real cuDNN too; gpu_differs: of those, the ones it
 * refused (or answered otherwise) where the emulator did not; emu_stricter: the ones the
 * emulator refused and it took. Returns the real library's version, 0 when there is none
 * (or TOCHA_CUDA_EMU_REAL_CUDNN=0). */
extern "C" __attribute__((visibility("default"))) size_t tc_cuda_emu_real_cudnn(long long *checked, long long *gpu_differs, long long *emu_stricter)
{
    if (checked) *checked = g_checked;
    if (gpu_differs) *gpu_differs = g_gpu_differs;
    if (emu_stricter) *emu_stricter = g_emu_stricter;
    const real_cudnn *r = real();
    return r ? r->version : 0;
}
