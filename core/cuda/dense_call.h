/* dense_call.h -- dense operands and results for the CUDA kernels that read and write
 * row-major memory only (attention.cu, layernorm.cu).
 *
 * make() gives every input as a dense view (a scratch copy when it is strided; NULL inputs
 * stay NULL) and every result as a dense view: the caller's own memory when it is dense and
 * overlaps no input, else scratch that finish() copies into the caller's result. So a kernel
 * may assume its results alias nothing it reads -- except, with make(c, true), a result that
 * is exactly one of its inputs (the same dense memory: an in-place optimizer step, optim.cu),
 * for kernels that read element i of every operand before writing element i of a result.
 * Scratch goes back to the caching allocator when the struct goes out of scope
 * (stream-ordered, after the kernels queued on it).
 */
#ifndef TC_CUDA_DENSE_CALL_H
#define TC_CUDA_DENSE_CALL_H

#include "kern.h"
#include "strided.h"

namespace tck {

struct dense_call {
    enum { MAXIN = 6, MAXOUT = 2 };
    int dev;
    tc_cuda_view in[MAXIN], out[MAXOUT];
    void *tmp[MAXIN + MAXOUT] = {nullptr};
    bool copy_back[MAXOUT] = {false, false};
    explicit dense_call(int d) : dev(d) {}
    dense_call(const dense_call &) = delete;
    dense_call &operator=(const dense_call &) = delete;
    ~dense_call()
    {
        for (void *p : tmp)
            if (p) (void)cu_scratch_free(dev, p);
    }
    static bool same_dense(const tc_cuda_view &a, const tc_cuda_view &b)
    {
        return a.data == b.data && a.dtype == b.dtype && a.numel == b.numel && cu_view_is_dense(&a) &&
               cu_view_is_dense(&b);
    }
    tc_status make(const tc_cuda_call *c, bool elementwise = false)
    {
        const char *what = cu_op_name(c->op);
        if (c->nin > MAXIN || c->nout > MAXOUT) return cu_fail(TC_ERR_ARG, "%s: too many operands", what);
        for (int i = 0; i < c->nin; i++) {
            in[i] = c->in[i];
            if (c->in[i].data)
                if (tc_status s = cu_dense_input(dev, &c->in[i], &in[i], &tmp[i], what)) return s;
        }
        for (int o = 0; o < c->nout; o++) {
            out[o] = c->out[o];
            bool clash = !cu_view_is_dense(&c->out[o]);
            for (int i = 0; i < c->nin; i++)
                clash = clash || (views_overlap(c->out[o], c->in[i]) && !(elementwise && same_dense(c->out[o], c->in[i])));
            if (!clash || c->out[o].numel == 0) continue;
            size_t bytes = (size_t)c->out[o].numel * cu_elsize(c->out[o].dtype);
            if (tc_status s = cu_scratch_alloc(dev, bytes, &tmp[MAXIN + o])) return s;
            out[o] = cu_view_dense(&c->out[o], tmp[MAXIN + o]);
            copy_back[o] = true;
        }
        return TC_OK;
    }
    tc_status finish(const tc_cuda_call *c)
    {
        for (int o = 0; o < c->nout; o++)
            if (copy_back[o])
                if (tc_status s = cu_strided_copy(&c->out[o], &out[o], cu_op_name(c->op))) return s;
        return TC_OK;
    }
};

} /* namespace tck */

#endif /* TC_CUDA_DENSE_CALL_H */
