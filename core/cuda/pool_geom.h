/* pool_geom.h -- one element of each pooling op, written once for the CUDA kernels
 * (pool.cu) and a host test (tests/cuda_host/test_cuda_plan.cpp) that checks them against
 * the CPU kernels (core/cpu/pool.c, the spec: PyTorch 1.13's window rules).
 *
 * The includer defines POOL_FN (pool.cu: __device__ __forceinline__; the host test: static
 * inline) and supplies a loader: any object with C operator()(h, w) reading one element of
 * a plane widened to the computing type C (float for f16/bf16, as the CPU computes).
 * Forward ops compute one output element (i, j); the backward ops compute one input-gradient
 * element (h, w) by gathering, in (i, j) order, the very terms the CPU scatter-adds in that
 * order, so the sums are bit-identical and no atomics are needed.
 */
#ifndef TC_CUDA_POOL_GEOM_H
#define TC_CUDA_POOL_GEOM_H

#include <math.h>
#include <stdint.h>

struct pool_geom {
    int64_t H, W, Ho, Wo; /* input plane, output plane (the backward ops too) */
    int64_t kH, kW, sH, sW, pH, pW, dH, dW;
    bool include_pad;
};

POOL_FN int64_t pg_min(int64_t a, int64_t b) { return a < b ? a : b; }
POOL_FN int64_t pg_max(int64_t a, int64_t b) { return a > b ? a : b; }

/* The avg window of output (i, j): summed range [h0,h1)x[w0,w1) and its divisor; false
 * when the window lies wholly in the padding. */
POOL_FN bool pg_avg_window(const pool_geom &g, int64_t i, int64_t j, int64_t *h0, int64_t *h1, int64_t *w0,
                           int64_t *w1, int64_t *div)
{
    int64_t a = i * g.sH - g.pH, b = j * g.sW - g.pW;
    int64_t c = pg_min(a + g.kH, g.H + g.pH), d = pg_min(b + g.kW, g.W + g.pW);
    int64_t padded = (c - a) * (d - b);
    a = pg_max(a, 0), b = pg_max(b, 0), c = pg_min(c, g.H), d = pg_min(d, g.W);
    if (a >= c || b >= d) return false;
    *h0 = a, *h1 = c, *w0 = b, *w1 = d;
    *div = g.include_pad ? padded : (c - a) * (d - b);
    return true;
}

/* Adaptive window i of `out` over `in`: [floor(i*in/out), ceil((i+1)*in/out)). */
POOL_FN void pg_adaptive_range(int64_t i, int64_t out, int64_t in, int64_t *a, int64_t *b)
{
    *a = (i * in) / out;
    *b = ((i + 1) * in + out - 1) / out;
}

/* Max over rows [h0,h1) every dh, columns [w0,w1) every dw: a value wins when greater than
 * the best so far or NaN (so the last NaN, else the first maximum); *at (h*W + w) starts at
 * the first in-range position. */
template <class C, class L>
POOL_FN C pg_window_max(const L &ld, int64_t W, int64_t h0, int64_t h1, int64_t dh, int64_t w0, int64_t w1,
                        int64_t dw, int64_t *at)
{
    C best = (C)-INFINITY;
    int64_t a = h0 * W + w0;
    for (int64_t h = h0; h < h1; h += dh)
        for (int64_t w = w0; w < w1; w += dw) {
            C v = ld(h, w);
            if (v > best || v != v) best = v, a = h * W + w;
        }
    *at = a;
    return best;
}

/* Sum in double, as the CPU. */
template <class C, class L> POOL_FN double pg_window_sum(const L &ld, int64_t h0, int64_t h1, int64_t w0, int64_t w1)
{
    double sum = 0;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) sum += (double)ld(h, w);
    return sum;
}

/* The first row of a dilated window starting at s (< 0 in the padding) inside the plane. */
POOL_FN int64_t pg_first_in(int64_t s, int64_t d) { return s >= 0 ? s : s + (-s + d - 1) / d * d; }

/* ---- forward: output element (i, j) -------------------------------------------------------- */

template <class C, class L> POOL_FN C pg_max_at(const pool_geom &g, const L &ld, int64_t i, int64_t j, int64_t *at)
{
    int64_t h0 = i * g.sH - g.pH, w0 = j * g.sW - g.pW;
    int64_t h1 = pg_min(h0 + (g.kH - 1) * g.dH + 1, g.H), w1 = pg_min(w0 + (g.kW - 1) * g.dW + 1, g.W);
    return pg_window_max<C>(ld, g.W, pg_first_in(h0, g.dH), h1, g.dH, pg_first_in(w0, g.dW), w1, g.dW, at);
}

template <class C, class L> POOL_FN C pg_avg_at(const pool_geom &g, const L &ld, int64_t i, int64_t j)
{
    int64_t h0, h1, w0, w1, div;
    if (!pg_avg_window(g, i, j, &h0, &h1, &w0, &w1, &div)) return (C)0;
    return (C)(pg_window_sum<C>(ld, h0, h1, w0, w1) / (double)div);
}

/* adaptive avg (at == NULL) or max (index into *at) */
template <class C, class L>
POOL_FN C pg_adaptive_at(const pool_geom &g, const L &ld, int64_t i, int64_t j, int64_t *at)
{
    int64_t h0, h1, w0, w1;
    pg_adaptive_range(i, g.Ho, g.H, &h0, &h1);
    pg_adaptive_range(j, g.Wo, g.W, &w0, &w1);
    if (at) return pg_window_max<C>(ld, g.W, h0, h1, 1, w0, w1, 1, at);
    return (C)(pg_window_sum<C>(ld, h0, h1, w0, w1) / (double)((h1 - h0) * (w1 - w0)));
}

/* ---- backward: input-gradient element (h, w), gout read through ld ----------------------- */

/* avg_pool2d_backward: the outputs whose windows hold (h, w) are i in
 * [ceil((h+pH-kH+1)/sH), floor((h+pH)/sH)] (columns alike); each is checked against its
 * clipped window, so the range only needs to cover them. */
template <class C, class L> POOL_FN C pg_avg_back_at(const pool_geom &g, const L &gout, int64_t h, int64_t w)
{
    int64_t ilo = pg_max(h + g.pH - g.kH + 1, 0), jlo = pg_max(w + g.pW - g.kW + 1, 0);
    ilo = (ilo + g.sH - 1) / g.sH, jlo = (jlo + g.sW - 1) / g.sW;
    int64_t ihi = pg_min((h + g.pH) / g.sH, g.Ho - 1), jhi = pg_min((w + g.pW) / g.sW, g.Wo - 1);
    C acc = 0;
    for (int64_t i = ilo; i <= ihi; i++)
        for (int64_t j = jlo; j <= jhi; j++) {
            int64_t h0, h1, w0, w1, div;
            if (!pg_avg_window(g, i, j, &h0, &h1, &w0, &w1, &div)) continue;
            if (h < h0 || h >= h1 || w < w0 || w >= w1) continue;
            acc += (C)((double)gout(i, j) / (double)div);
        }
    return acc;
}

/* adaptive_avg_pool2d_backward: window i holds h when floor(i*H/oH) <= h < ceil((i+1)*H/oH),
 * i.e. i in [floor(h*oH/H), ceil((h+1)*oH/H) - 1]. */
template <class C, class L> POOL_FN C pg_adaptive_back_at(const pool_geom &g, const L &gout, int64_t h, int64_t w)
{
    int64_t ilo = h * g.Ho / g.H, ihi = pg_min(((h + 1) * g.Ho + g.H - 1) / g.H - 1, g.Ho - 1);
    int64_t jlo = w * g.Wo / g.W, jhi = pg_min(((w + 1) * g.Wo + g.W - 1) / g.W - 1, g.Wo - 1);
    C acc = 0;
    for (int64_t i = ilo; i <= ihi; i++) {
        int64_t h0, h1;
        pg_adaptive_range(i, g.Ho, g.H, &h0, &h1);
        if (h < h0 || h >= h1) continue;
        for (int64_t j = jlo; j <= jhi; j++) {
            int64_t w0, w1;
            pg_adaptive_range(j, g.Wo, g.W, &w0, &w1);
            if (w < w0 || w >= w1) continue;
            acc += (C)((double)gout(i, j) / (double)((h1 - h0) * (w1 - w0)));
        }
    }
    return acc;
}

#endif /* TC_CUDA_POOL_GEOM_H */
