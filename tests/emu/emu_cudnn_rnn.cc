/* emu_cudnn_rnn.cc -- the CUDA emulator's cuDNN 9 RNN API (tests only; emu.h): dropout and
 * RNN descriptors (cudnnSetRNNDescriptor_v8), RNN data descriptors, the weight space
 * (cudnnGetRNNWeightSpaceSize / cudnnGetRNNWeightParams), cudnnGetRNNTempSpaceSizes,
 * cudnnRNNForward, cudnnRNNBackwardData_v8 and cudnnRNNBackwardWeights_v8, as loops in
 * double over host memory following NVIDIA's cuDNN 9 API reference:
 *   cells   RNN_RELU / RNN_TANH  h' = act(W x + bW + R h + bR)
 *           LSTM  gates i f g o (linLayerID 0-3 on x, 4-7 on h): c' = f c + i g,
 *                 h' = o tanh(c')
 *           GRU   gates r z n (linLayerID 0-2 on x, 3-5 on h):
 *                 n = tanh(W_n x + bW_n + r (R_n h + bR_n)), h' = (1 - z) n + z h
 *   biases  NO_BIAS, SINGLE_INP_BIAS (bW only), SINGLE_REC_BIAS (bR only), DOUBLE_BIAS;
 *   any number of layers, unidirectional or bidirectional (pseudo-layer = layer * 2 +
 *   direction, a bidirectional layer's output the two directions' h concatenated),
 *   per-sequence lengths in the three data layouts (padded I/O must be enabled for the
 *   two unpacked ones, as cuDNN documents); hx / cx / dhy / dcy NULL read as zeros,
 *   hy / cy / dhx / dcx NULL not written; paddingFill written into y's padding.
 * Not emulated (CUDNN_STATUS_NOT_SUPPORTED with a note): the persistent algorithms,
 * SKIP_INPUT, LSTM projection (projSize < hiddenSize), cell clipping, dropout between
 * layers in training mode. cudnnRNNBackwardWeights_v8 takes CUDNN_WGRAD_MODE_ADD only,
 * as cuDNN documents ("only the CUDNN_WGRAD_MODE_ADD mode is supported").
 * The weight space is, per pseudo-layer: the G input matrices (H, Iin) row-major, the G
 * recurrent matrices (H, H), then the input biases and the recurrent biases (H each) the
 * bias mode has; callers find them through cudnnGetRNNWeightParams as on cuDNN. The
 * reserve space (training) holds, in double, each step's gate activations, the gate
 * gradients BackwardData computes for BackwardWeights, and every layer's output.
 */
#include "emu_cudnn_impl.h"
#include <stdio.h>
#include <vector>

using namespace emu_dnn;

struct cudnnRNNStruct {
    uint32_t magic;
    bool set;
    cudnnRNNAlgo_t algo;
    cudnnRNNMode_t cell;
    cudnnRNNBiasMode_t bias;
    cudnnDirectionMode_t dir;
    cudnnRNNInputMode_t in_mode;
    cudnnDataType_t dt, prec;
    cudnnMathType_t math;
    int I, H, P, L;
    float dropout;
    uint32_t aux;
};

struct cudnnRNNDataStruct {
    uint32_t magic;
    bool set;
    cudnnDataType_t dt;
    cudnnRNNDataLayout_t layout;
    int T, N, V;
    std::vector<int> lens;
    bool has_fill;
    double fill;
};

/* ---- dropout descriptor --------------------------------------------------------------------- */

extern "C" cudnnStatus_t cudnnCreateDropoutDescriptor(cudnnDropoutDescriptor_t *d)
{
    return create_desc(d, "cudnnCreateDropoutDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyDropoutDescriptor(cudnnDropoutDescriptor_t d)
{
    return destroy_desc(d, "cudnnDestroyDropoutDescriptor");
}

extern "C" cudnnStatus_t cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t h, float p, void *states,
                                                   size_t bytes, unsigned long long seed)
{
    const char *fn = "cudnnSetDropoutDescriptor";
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    if (!d || d->magic != EMU_DNN_MAGIC) return BAD("%s: %p is not a live dropout descriptor", fn, (void *)d);
    if (!(p >= 0.0f && p <= 1.0f)) return BAD("%s: dropout %g is not in [0, 1]", fn, (double)p);
    if (p > 0 && (!states || !bytes)) return BAD("%s: dropout %g needs a states buffer", fn, (double)p);
    if (states && bytes && !emu::device_range(states, bytes, fn)) return CUDNN_STATUS_BAD_PARAM;
    d->set = true, d->p = p, d->states = states, d->state_bytes = bytes, d->seed = seed;
    return CUDNN_STATUS_SUCCESS;
}

/* ---- RNN descriptor ------------------------------------------------------------------------- */

extern "C" cudnnStatus_t cudnnCreateRNNDescriptor(cudnnRNNDescriptor_t *d)
{
    return create_desc(d, "cudnnCreateRNNDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyRNNDescriptor(cudnnRNNDescriptor_t d)
{
    return destroy_desc(d, "cudnnDestroyRNNDescriptor");
}

static cudnnStatus_t emu_cudnnSetRNNDescriptor_v8(cudnnRNNDescriptor_t d, cudnnRNNAlgo_t algo, cudnnRNNMode_t cell,
                                                  cudnnRNNBiasMode_t bias, cudnnDirectionMode_t dir,
                                                  cudnnRNNInputMode_t in_mode, cudnnDataType_t dt,
                                                  cudnnDataType_t prec, cudnnMathType_t math, int32_t I, int32_t H,
                                                  int32_t P, int32_t L, cudnnDropoutDescriptor_t drop, uint32_t aux)
{
    const char *fn = "cudnnSetRNNDescriptor_v8";
    if (!d || d->magic != EMU_DNN_MAGIC) return BAD("%s: %p is not a live RNN descriptor", fn, (void *)d);
    if (cell != CUDNN_RNN_RELU && cell != CUDNN_RNN_TANH && cell != CUDNN_LSTM && cell != CUDNN_GRU)
        return BAD("%s: cell mode %d", fn, (int)cell);
    if (bias < CUDNN_RNN_NO_BIAS || bias > CUDNN_RNN_SINGLE_REC_BIAS) return BAD("%s: bias mode %d", fn, (int)bias);
    if (dir != CUDNN_UNIDIRECTIONAL && dir != CUDNN_BIDIRECTIONAL) return BAD("%s: direction %d", fn, (int)dir);
    if (in_mode != CUDNN_LINEAR_INPUT && in_mode != CUDNN_SKIP_INPUT) return BAD("%s: input mode %d", fn, (int)in_mode);
    if (algo < CUDNN_RNN_ALGO_STANDARD || algo >= CUDNN_RNN_ALGO_COUNT) return BAD("%s: algorithm %d", fn, (int)algo);
    if (I <= 0 || H <= 0 || P <= 0 || L <= 0)
        return BAD("%s: inputSize %d hiddenSize %d projSize %d numLayers %d must be > 0", fn, I, H, P, L);
    if (P > H || (P != H && cell != CUDNN_LSTM))
        return BAD("%s: projSize %d with hiddenSize %d (only LSTM may project, to a smaller size)", fn, P, H);
    if (aux & ~CUDNN_RNN_PADDED_IO_ENABLED) return BAD("%s: auxFlags 0x%x", fn, aux);
    if (dt != CUDNN_DATA_FLOAT && dt != CUDNN_DATA_DOUBLE && dt != CUDNN_DATA_HALF)
        return UNSUP("%s: data type %s", fn, type_name(dt));
    bool prec_ok = dt == CUDNN_DATA_DOUBLE ? prec == CUDNN_DATA_DOUBLE
                   : dt == CUDNN_DATA_FLOAT ? prec == CUDNN_DATA_FLOAT
                                            : (prec == CUDNN_DATA_HALF || prec == CUDNN_DATA_FLOAT);
    if (!prec_ok) return BAD("%s: %s data with %s math precision", fn, type_name(dt), type_name(prec));
    if (math != CUDNN_DEFAULT_MATH && math != CUDNN_TENSOR_OP_MATH && math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
        math != CUDNN_FMA_MATH)
        return BAD("%s: math type %d", fn, (int)math);
    if (drop && (drop->magic != EMU_DNN_MAGIC || !drop->set)) return BAD("%s: dropout descriptor not set", fn);
    /* valid for cuDNN, beyond the emulator */
    if (algo != CUDNN_RNN_ALGO_STANDARD) return UNSUP("%s: algorithm %d (the emulator has ALGO_STANDARD)", fn, (int)algo);
    if (in_mode == CUDNN_SKIP_INPUT) return UNSUP("%s: CUDNN_SKIP_INPUT is not emulated", fn);
    if (P != H) return UNSUP("%s: LSTM projection (projSize %d < hiddenSize %d) is not emulated", fn, P, H);
    d->set = true, d->algo = algo, d->cell = cell, d->bias = bias, d->dir = dir, d->in_mode = in_mode;
    d->dt = dt, d->prec = prec, d->math = math, d->I = I, d->H = H, d->P = P, d->L = L;
    d->dropout = drop ? drop->p : 0.0f, d->aux = aux;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetRNNDescriptor_v8(cudnnRNNDescriptor_t d, cudnnRNNAlgo_t algo, cudnnRNNMode_t cell,
                                                  cudnnRNNBiasMode_t bias, cudnnDirectionMode_t dir,
                                                  cudnnRNNInputMode_t in_mode, cudnnDataType_t dt,
                                                  cudnnDataType_t prec, cudnnMathType_t math, int32_t I, int32_t H,
                                                  int32_t P, int32_t L, cudnnDropoutDescriptor_t drop, uint32_t aux)
{
    cudnnStatus_t mine = emu_cudnnSetRNNDescriptor_v8(d, algo, cell, bias, dir, in_mode, dt, prec, math, I, H, P, L, drop, aux);
    return second_opinion("cudnnSetRNNDescriptor_v8", mine, [&](const real_cudnn &r) {
        return real_set_rnn(r, algo, cell, bias, dir, in_mode, dt, prec, math, I, H, P, L, aux);
    });
}

/* ---- RNN data descriptor ---------------------------------------------------------------------- */

extern "C" cudnnStatus_t cudnnCreateRNNDataDescriptor(cudnnRNNDataDescriptor_t *d)
{
    return create_desc(d, "cudnnCreateRNNDataDescriptor");
}
extern "C" cudnnStatus_t cudnnDestroyRNNDataDescriptor(cudnnRNNDataDescriptor_t d)
{
    return destroy_desc(d, "cudnnDestroyRNNDataDescriptor");
}

static cudnnStatus_t emu_cudnnSetRNNDataDescriptor(cudnnRNNDataDescriptor_t d, cudnnDataType_t dt,
                                                   cudnnRNNDataLayout_t layout, int T, int N, int V,
                                                   const int lens[], void *fill)
{
    const char *fn = "cudnnSetRNNDataDescriptor";
    if (!d || d->magic != EMU_DNN_MAGIC) return BAD("%s: %p is not a live RNN data descriptor", fn, (void *)d);
    if (layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED && layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED &&
        layout != CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED)
        return BAD("%s: layout %d", fn, (int)layout);
    if (!elsize(dt)) return UNSUP("%s: data type %d", fn, (int)dt);
    if (T <= 0 || N <= 0 || V <= 0 || !lens)
        return BAD("%s: maxSeqLength %d batchSize %d vectorSize %d must be > 0 (and seqLengthArray given)", fn, T, N, V);
    for (int n = 0; n < N; n++) {
        if (lens[n] < 0 || lens[n] > T) return BAD("%s: seqLengthArray[%d] = %d is not in [0, %d]", fn, n, lens[n], T);
        if (layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED && n > 0 && lens[n] > lens[n - 1])
            return BAD("%s: the packed layout needs non-increasing lengths (seqLengthArray[%d] = %d > %d)", fn, n,
                       lens[n], lens[n - 1]);
    }
    d->set = true, d->dt = dt, d->layout = layout, d->T = T, d->N = N, d->V = V;
    d->lens.assign(lens, lens + N);
    d->has_fill = fill != NULL;
    d->fill = fill ? load(dt, fill, 0) : 0.0;
    return CUDNN_STATUS_SUCCESS;
}
extern "C" cudnnStatus_t cudnnSetRNNDataDescriptor(cudnnRNNDataDescriptor_t d, cudnnDataType_t dt,
                                                   cudnnRNNDataLayout_t layout, int T, int N, int V,
                                                   const int lens[], void *fill)
{
    return second_opinion("cudnnSetRNNDataDescriptor", emu_cudnnSetRNNDataDescriptor(d, dt, layout, T, N, V, lens, fill),
                          [&](const real_cudnn &r) { return real_set_rnn_data(r, dt, layout, T, N, V, lens, fill); });
}

/* Element offset of vector (t, n) in d's layout, -1 past the sequence's length. */
static int64_t rd_pos(const cudnnRNNDataStruct &d, int t, int n)
{
    if (t >= d.lens[(size_t)n]) return -1;
    if (d.layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED) return ((int64_t)t * d.N + n) * d.V;
    if (d.layout == CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED) return ((int64_t)n * d.T + t) * d.V;
    int64_t before = 0; /* packed: the batch at step t' is the sequences longer than t' */
    for (int u = 0; u < t; u++)
        for (int m = 0; m < d.N; m++) before += d.lens[(size_t)m] > u;
    return (before + n) * d.V;
}

static size_t rd_bytes(const cudnnRNNDataStruct &d)
{
    int64_t n = (int64_t)d.T * d.N;
    if (d.layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED) {
        n = 0;
        for (int l : d.lens) n += l;
    }
    return (size_t)(n * d.V) * elsize(d.dt);
}

/* ---- geometry -------------------------------------------------------------------------------- */

struct rnn_geom {
    cudnnRNNStruct r;
    int G, D, S; /* gates, directions, values kept per step and unit in the reserve */
    int64_t nbW, nbR;
    std::vector<int64_t> woff; /* per pseudo-layer, and the total at the end (elements) */

    int in_size(int l) const { return l == 0 ? r.I : D * r.H; }
    int64_t mat(int pl, int id) const
    {
        int64_t Iin = in_size(pl / D), H = r.H;
        return id < G ? woff[(size_t)pl] + id * H * Iin : woff[(size_t)pl] + G * H * Iin + (id - G) * H * H;
    }
    int64_t bias(int pl, int id) const
    {
        int64_t Iin = in_size(pl / D), H = r.H, base = woff[(size_t)pl] + G * H * (Iin + H);
        if (id < G) return nbW ? base + id * H : -1;
        return nbR ? base + nbW + (id - G) * H : -1;
    }
    size_t weight_bytes() const { return (size_t)woff.back() * elsize(r.dt); }
    /* reserve (doubles): per pseudo-layer T*N steps of S*H activations and 2*G*H gate
     * gradients, then per layer T*N*D*H outputs */
    size_t step_vals() const { return (size_t)(S + 2 * G) * r.H; }
    size_t reserve_doubles(int T, int N) const
    {
        return (size_t)r.L * D * T * N * step_vals() + (size_t)r.L * T * N * D * r.H;
    }
    size_t work_bytes(int N) const { return (size_t)N * (G * r.H + r.I + D * r.H) * elsize(r.dt); }
};

static cudnnStatus_t geom_of(const char *fn, cudnnHandle_t h, const cudnnRNNStruct *r, rnn_geom *g)
{
    if (!handle_ok(h, fn)) return CUDNN_STATUS_BAD_PARAM;
    if (!r || r->magic != EMU_DNN_MAGIC || !r->set) return BAD("%s: RNN descriptor not set", fn);
    g->r = *r;
    g->G = r->cell == CUDNN_LSTM ? 4 : r->cell == CUDNN_GRU ? 3 : 1;
    g->S = r->cell == CUDNN_LSTM ? 5 : r->cell == CUDNN_GRU ? 4 : 1;
    g->D = r->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
    bool bw = r->bias == CUDNN_RNN_DOUBLE_BIAS || r->bias == CUDNN_RNN_SINGLE_INP_BIAS;
    bool br = r->bias == CUDNN_RNN_DOUBLE_BIAS || r->bias == CUDNN_RNN_SINGLE_REC_BIAS;
    g->nbW = bw ? (int64_t)g->G * r->H : 0, g->nbR = br ? (int64_t)g->G * r->H : 0;
    g->woff.assign(1, 0);
    for (int pl = 0; pl < r->L * g->D; pl++) {
        int64_t Iin = g->in_size(pl / g->D);
        g->woff.push_back(g->woff.back() + (int64_t)g->G * r->H * (Iin + r->H) + g->nbW + g->nbR);
    }
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnGetRNNWeightSpaceSize(cudnnHandle_t h, cudnnRNNDescriptor_t r, size_t *bytes)
{
    rnn_geom g;
    cudnnStatus_t st = geom_of("cudnnGetRNNWeightSpaceSize", h, r, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!bytes) return BAD("cudnnGetRNNWeightSpaceSize: weightSpaceSize is NULL");
    *bytes = g.weight_bytes();
    return CUDNN_STATUS_SUCCESS;
}

/* A tensor descriptor set to nd dims (all strides packed), or to "absent" (0 dims). */
static void set_param_desc(cudnnTensorStruct *t, cudnnDataType_t dt, int nd, const int *dims)
{
    if (!t) return;
    t->set = nd > 0, t->dt = dt, t->nd = nd;
    int s = 1;
    for (int i = nd - 1; i >= 0; i--) t->dim[i] = dims[i], t->stride[i] = s, s *= dims[i];
}

extern "C" cudnnStatus_t cudnnGetRNNWeightParams(cudnnHandle_t h, cudnnRNNDescriptor_t r, int32_t pl, size_t wbytes,
                                                 const void *wspace, int32_t id, cudnnTensorDescriptor_t md,
                                                 void **maddr, cudnnTensorDescriptor_t bd, void **baddr)
{
    const char *fn = "cudnnGetRNNWeightParams";
    rnn_geom g;
    cudnnStatus_t st = geom_of(fn, h, r, &g);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (pl < 0 || pl >= r->L * g.D) return BAD("%s: pseudoLayer %d of %d", fn, pl, r->L * g.D);
    if (id < 0 || id >= 2 * g.G) return BAD("%s: linLayerID %d (this cell has %d)", fn, id, 2 * g.G);
    if (wbytes < g.weight_bytes()) return BAD("%s: weightSpaceSize %zu < %zu", fn, wbytes, g.weight_bytes());
    if ((md && md->magic != EMU_DNN_MAGIC) || (bd && bd->magic != EMU_DNN_MAGIC))
        return BAD("%s: mDesc / bDesc is not a live tensor descriptor", fn);
    if ((md && !maddr) || (bd && !baddr)) return BAD("%s: a descriptor without its address pointer", fn);
    if (wspace && !emu::device_range(wspace, g.weight_bytes(), fn)) return CUDNN_STATUS_BAD_PARAM;
    size_t es = elsize(r->dt);
    int rows = r->H, cols = id < g.G ? g.in_size(pl / g.D) : r->H;
    if (maddr) *maddr = (char *)wspace + (size_t)g.mat(pl, id) * es;
    int mdims[3] = {1, rows, cols}, bdims[3] = {1, rows, 1};
    set_param_desc(md, r->dt, 3, mdims);
    int64_t bo = g.bias(pl, id);
    if (baddr) *baddr = bo >= 0 ? (char *)wspace + (size_t)bo * es : NULL;
    set_param_desc(bd, r->dt, bo >= 0 ? 3 : 0, bdims);
    return CUDNN_STATUS_SUCCESS;
}

/* ---- checks shared by the compute calls ------------------------------------------------------------ */

/* x / y data descriptors against the RNN, and the padded-IO rule. */
static cudnnStatus_t data_check(const char *fn, const rnn_geom &g, const cudnnRNNDataStruct *x,
                                const cudnnRNNDataStruct *y)
{
    if (!x || x->magic != EMU_DNN_MAGIC || !x->set) return BAD("%s: xDesc not set", fn);
    if (x->dt != g.r.dt) return BAD("%s: xDesc %s, RNN %s", fn, type_name(x->dt), type_name(g.r.dt));
    if (x->V != g.r.I) return BAD("%s: xDesc vectorSize %d, RNN inputSize %d", fn, x->V, g.r.I);
    if (!(g.r.aux & CUDNN_RNN_PADDED_IO_ENABLED) && x->layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
        return BAD("%s: layout %d is an unpacked one, which needs CUDNN_RNN_PADDED_IO_ENABLED in the RNN "
                   "descriptor's auxFlags", fn, (int)x->layout);
    if (!y) return CUDNN_STATUS_SUCCESS;
    if (y->magic != EMU_DNN_MAGIC || !y->set) return BAD("%s: yDesc not set", fn);
    if (y->dt != x->dt || y->layout != x->layout || y->T != x->T || y->N != x->N || y->lens != x->lens)
        return BAD("%s: xDesc and yDesc differ in type, layout, lengths or batch", fn);
    if (y->V != g.D * g.r.P) return BAD("%s: yDesc vectorSize %d, the RNN outputs %d", fn, y->V, g.D * g.r.P);
    return CUDNN_STATUS_SUCCESS;
}

/* hDesc / cDesc: (numLayers * directions, N, H) of the RNN's type. */
static cudnnStatus_t state_check(const char *fn, const rnn_geom &g, const cudnnTensorStruct *s, int N, int H,
                                 const char *which)
{
    if (!tensor_ok(s, fn, which)) return CUDNN_STATUS_BAD_PARAM;
    char a[64];
    if (s->nd != 3 || s->dim[0] != g.r.L * g.D || s->dim[1] != N || s->dim[2] != H || s->dt != g.r.dt)
        return BAD("%s: %s %s %s, the RNN wants (%d,%d,%d) %s", fn, which, dims_str(*s, a, sizeof a),
                   type_name(s->dt), g.r.L * g.D, N, H, type_name(g.r.dt));
    return CUDNN_STATUS_SUCCESS;
}

static bool mem_opt(const void *p, size_t n, const char *fn, const char *which)
{
    if (!p || !n) return true;
    char what[160];
    snprintf(what, sizeof what, "%s: %s", fn, which);
    return emu::device_range(p, n, what);
}

extern "C" cudnnStatus_t cudnnGetRNNTempSpaceSizes(cudnnHandle_t h, cudnnRNNDescriptor_t r, cudnnForwardMode_t mode,
                                                   cudnnRNNDataDescriptor_t xd, size_t *ws, size_t *rs)
{
    const char *fn = "cudnnGetRNNTempSpaceSizes";
    rnn_geom g;
    cudnnStatus_t st = geom_of(fn, h, r, &g);
    if (st == CUDNN_STATUS_SUCCESS) st = data_check(fn, g, xd, NULL);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (mode != CUDNN_FWD_MODE_INFERENCE && mode != CUDNN_FWD_MODE_TRAINING) return BAD("%s: fwdMode %d", fn, (int)mode);
    if (ws) *ws = g.work_bytes(xd->N);
    if (rs) *rs = mode == CUDNN_FWD_MODE_TRAINING ? g.reserve_doubles(xd->T, xd->N) * sizeof(double) : 0;
    return CUDNN_STATUS_SUCCESS;
}

/* Everything a compute call captures. */
struct rnn_call {
    rnn_geom g;
    cudnnRNNDataStruct x, y;
    cudnnTensorStruct hd, cd;
    bool lstm;
    int T, N;
};

static double sigm(double v) { return 1.0 / (1.0 + exp(-v)); }

/* Reserve addressing (doubles). */
static double *res_step(const rnn_call &c, double *res, int pl, int t, int n)
{
    return res + (((size_t)pl * c.T + t) * c.N + n) * c.g.step_vals();
}
static double *res_out(const rnn_call &c, double *res, int l)
{
    size_t base = (size_t)c.g.r.L * c.g.D * c.T * c.N * c.g.step_vals();
    return res + base + (size_t)l * c.T * c.N * c.g.D * c.g.r.H;
}

/* State vector (pseudo-layer pl, batch n) of hx-like tensors, or zeros when p is NULL. */
static void state_load(const cudnnTensorStruct &d, const void *p, int pl, int n, double *v, int H)
{
    for (int j = 0; j < H; j++)
        v[j] = p ? load(d.dt, p, (int64_t)pl * d.stride[0] + (int64_t)n * d.stride[1] + (int64_t)j * d.stride[2]) : 0;
}
static void state_store(const cudnnTensorStruct &d, void *p, int pl, int n, const double *v, int H)
{
    if (!p) return;
    for (int j = 0; j < H; j++)
        store(d.dt, p, (int64_t)pl * d.stride[0] + (int64_t)n * d.stride[1] + (int64_t)j * d.stride[2], v[j]);
}

/* Sequence data as dense (T, N, V) doubles (zeros in the padding). */
static std::vector<double> data_load(const cudnnRNNDataStruct &d, const void *p)
{
    std::vector<double> v((size_t)d.T * d.N * d.V, 0.0);
    for (int t = 0; t < d.T; t++)
        for (int n = 0; n < d.N; n++) {
            int64_t o = rd_pos(d, t, n);
            if (o >= 0)
                for (int i = 0; i < d.V; i++) v[((size_t)t * d.N + n) * d.V + i] = load(d.dt, p, o + i);
        }
    return v;
}

static void data_store(const cudnnRNNDataStruct &d, void *p, const std::vector<double> &v, bool fill)
{
    for (int t = 0; t < d.T; t++)
        for (int n = 0; n < d.N; n++) {
            int64_t o = rd_pos(d, t, n);
            if (o >= 0)
                for (int i = 0; i < d.V; i++) store(d.dt, p, o + i, v[((size_t)t * d.N + n) * d.V + i]);
            else if (fill && d.layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED) {
                int64_t q = d.layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED ? ((int64_t)t * d.N + n) * d.V
                                                                                 : ((int64_t)n * d.T + t) * d.V;
                for (int i = 0; i < d.V; i++) store(d.dt, p, q + i, d.fill);
            }
        }
}

static std::vector<double> weights_load(const rnn_geom &g, const void *w)
{
    std::vector<double> v((size_t)g.woff.back());
    for (size_t i = 0; i < v.size(); i++) v[i] = load(g.r.dt, w, (int64_t)i);
    return v;
}

/* devSeqLengths (device memory, read when the work runs) must repeat xDesc's lengths. */
static void lens_check(const char *fn, const rnn_call &c, const int32_t *dev)
{
    for (int n = 0; n < c.N; n++)
        if (dev[n] != c.x.lens[(size_t)n]) {
            emu::note("%s: devSeqLengths[%d] = %d but xDesc says %d (the descriptor's is used)", fn, n, dev[n],
                      c.x.lens[(size_t)n]);
            return;
        }
}

/* Whether (t, n) is the first step pseudo-layer direction d processes for sequence n, and
 * the step before it otherwise. */
static int prev_step(int d, int t, int len, bool *first)
{
    *first = d == 0 ? t == 0 : t == len - 1;
    return d == 0 ? t - 1 : t + 1;
}

/* ---- the recurrence --------------------------------------------------------------------------- */

/* pre = bW + W x, rec = bR + R h for every gate of pseudo-layer pl. */
static void gates(const rnn_geom &g, const std::vector<double> &W, int pl, const double *x, int Iin, const double *h,
                  double *pre, double *rec)
{
    int H = g.r.H;
    for (int k = 0; k < g.G; k++) {
        int64_t mw = g.mat(pl, k), mr = g.mat(pl, g.G + k), bw = g.bias(pl, k), br = g.bias(pl, g.G + k);
        for (int j = 0; j < H; j++) {
            double a = bw >= 0 ? W[(size_t)(bw + j)] : 0, b = br >= 0 ? W[(size_t)(br + j)] : 0;
            const double *wr = &W[(size_t)(mw + (int64_t)j * Iin)], *rr = &W[(size_t)(mr + (int64_t)j * H)];
            for (int i = 0; i < Iin; i++) a += wr[i] * x[i];
            for (int i = 0; i < H; i++) b += rr[i] * h[i];
            pre[k * H + j] = a, rec[k * H + j] = b;
        }
    }
}

/* One step: h (and c) become the new state; keep (S*H values) records the activations. */
static void cell_forward(const rnn_geom &g, const double *pre, const double *rec, double *h, double *c, double *keep)
{
    int H = g.r.H;
    for (int j = 0; j < H; j++) {
        if (g.r.cell == CUDNN_LSTM) {
            double i = sigm(pre[j] + rec[j]), f = sigm(pre[H + j] + rec[H + j]);
            double gg = tanh(pre[2 * H + j] + rec[2 * H + j]), o = sigm(pre[3 * H + j] + rec[3 * H + j]);
            c[j] = f * c[j] + i * gg;
            h[j] = o * tanh(c[j]);
            double v[5] = {i, f, gg, o, c[j]};
            for (int k = 0; k < 5; k++) keep[k * H + j] = v[k];
        } else if (g.r.cell == CUDNN_GRU) {
            double r = sigm(pre[j] + rec[j]), z = sigm(pre[H + j] + rec[H + j]);
            double n = tanh(pre[2 * H + j] + r * rec[2 * H + j]);
            h[j] = (1 - z) * n + z * h[j];
            double v[4] = {r, z, n, rec[2 * H + j]};
            for (int k = 0; k < 4; k++) keep[k * H + j] = v[k];
        } else {
            double a = pre[j] + rec[j];
            h[j] = g.r.cell == CUDNN_RNN_RELU ? (a > 0 ? a : 0) : tanh(a);
            keep[j] = h[j];
        }
    }
}

static void rnn_forward(const rnn_call &c, const int32_t *devlens, const void *xp, void *yp, const void *hx, void *hy,
                        const void *cx, void *cy, const void *wp, double *res)
{
    const rnn_geom &g = c.g;
    int H = g.r.H, N = c.N, DH = g.D * H;
    lens_check("cudnnRNNForward", c, devlens);
    std::vector<double> W = weights_load(g, wp), in = data_load(c.x, xp), out;
    std::vector<double> h((size_t)H), cs((size_t)H), pre((size_t)g.G * H), rec((size_t)g.G * H),
        keep(g.step_vals());
    for (int l = 0; l < g.r.L; l++) {
        int Iin = g.in_size(l);
        out.assign((size_t)c.T * N * DH, 0.0);
        for (int d = 0; d < g.D; d++) {
            int pl = l * g.D + d;
            for (int n = 0; n < N; n++) {
                int len = c.x.lens[(size_t)n];
                state_load(c.hd, hx, pl, n, h.data(), H);
                if (c.lstm) state_load(c.cd, cx, pl, n, cs.data(), H);
                for (int s = 0; s < len; s++) {
                    int t = d == 0 ? s : len - 1 - s;
                    gates(g, W, pl, &in[((size_t)t * N + n) * Iin], Iin, h.data(), pre.data(), rec.data());
                    double *k = res ? res_step(c, res, pl, t, n) : keep.data();
                    cell_forward(g, pre.data(), rec.data(), h.data(), cs.data(), k);
                    for (int j = 0; j < H; j++) out[((size_t)t * N + n) * DH + d * H + j] = h[(size_t)j];
                }
                state_store(c.hd, hy, pl, n, h.data(), H);
                if (c.lstm) state_store(c.cd, cy, pl, n, cs.data(), H);
            }
        }
        if (res) memcpy(res_out(c, res, l), out.data(), out.size() * sizeof(double));
        in.swap(out);
    }
    data_store(c.y, yp, in, c.y.has_fill);
}

/* BPTT through the reserve: dx, dhx, dcx; the gate gradients go back into the reserve. */
static void rnn_backward_data(const rnn_call &c, const int32_t *devlens, const void *dyp, void *dxp, const void *hx,
                              const void *dhy, void *dhx, const void *cx, const void *dcy, void *dcx, const void *wp,
                              double *res)
{
    const rnn_geom &g = c.g;
    int H = g.r.H, N = c.N, DH = g.D * H, G = g.G;
    lens_check("cudnnRNNBackwardData_v8", c, devlens);
    std::vector<double> W = weights_load(g, wp), dY = data_load(c.y, dyp), dIn;
    std::vector<double> dh((size_t)H), dc((size_t)H), hp((size_t)H), cp((size_t)H), dn((size_t)H), dht((size_t)H);
    for (int l = g.r.L - 1; l >= 0; l--) {
        int Iin = g.in_size(l);
        dIn.assign((size_t)c.T * N * Iin, 0.0);
        const double *Y = res_out(c, res, l);
        for (int d = 0; d < g.D; d++) {
            int pl = l * g.D + d;
            for (int n = 0; n < N; n++) {
                int len = c.x.lens[(size_t)n];
                state_load(c.hd, dhy, pl, n, dh.data(), H);
                if (c.lstm) state_load(c.cd, dcy, pl, n, dc.data(), H);
                for (int s = len - 1; s >= 0; s--) {
                    int t = d == 0 ? s : len - 1 - s;
                    bool first;
                    int pt = prev_step(d, t, len, &first);
                    if (first) state_load(c.hd, hx, pl, n, hp.data(), H);
                    else
                        for (int j = 0; j < H; j++) hp[(size_t)j] = Y[((size_t)pt * N + n) * DH + d * H + j];
                    if (c.lstm) {
                        if (first) state_load(c.cd, cx, pl, n, cp.data(), H);
                        else
                            for (int j = 0; j < H; j++) cp[(size_t)j] = res_step(c, res, pl, pt, n)[4 * H + j];
                    }
                    double *k = res_step(c, res, pl, t, n), *dPin = k + g.S * H, *dPrec = dPin + G * H;
                    for (int j = 0; j < H; j++) {
                        double gh = dY[((size_t)t * N + n) * DH + d * H + j] + dh[(size_t)j];
                        dht[(size_t)j] = gh;
                        if (g.r.cell == CUDNN_LSTM) {
                            double i = k[j], f = k[H + j], gg = k[2 * H + j], o = k[3 * H + j], tc = tanh(k[4 * H + j]);
                            double dct = dc[(size_t)j] + gh * o * (1 - tc * tc);
                            dPin[j] = dct * gg * i * (1 - i);
                            dPin[H + j] = dct * cp[(size_t)j] * f * (1 - f);
                            dPin[2 * H + j] = dct * i * (1 - gg * gg);
                            dPin[3 * H + j] = gh * tc * o * (1 - o);
                            dc[(size_t)j] = dct * f;
                            for (int q = 0; q < 4; q++) dPrec[q * H + j] = dPin[q * H + j];
                        } else if (g.r.cell == CUDNN_GRU) {
                            double r = k[j], z = k[H + j], nn = k[2 * H + j], rc = k[3 * H + j];
                            double dpn = gh * (1 - z) * (1 - nn * nn);
                            dPin[j] = dPrec[j] = dpn * rc * r * (1 - r);
                            dPin[H + j] = dPrec[H + j] = gh * (hp[(size_t)j] - nn) * z * (1 - z);
                            dPin[2 * H + j] = dpn, dPrec[2 * H + j] = dpn * r;
                        } else {
                            double hv = k[j];
                            double der = g.r.cell == CUDNN_RNN_RELU ? (hv > 0 ? 1.0 : 0.0) : 1 - hv * hv;
                            dPin[j] = dPrec[j] = gh * der;
                        }
                    }
                    /* the direct path to h_{t-1} (GRU: z h_{t-1}), then through R */
                    for (int j = 0; j < H; j++)
                        dn[(size_t)j] = g.r.cell == CUDNN_GRU ? dht[(size_t)j] * k[H + j] : 0.0;
                    double *dx_t = &dIn[((size_t)t * N + n) * Iin];
                    for (int q = 0; q < G; q++) {
                        const double *Wq = &W[(size_t)g.mat(pl, q)], *Rq = &W[(size_t)g.mat(pl, G + q)];
                        for (int j = 0; j < H; j++) {
                            double a = dPin[q * H + j], b = dPrec[q * H + j];
                            for (int i = 0; i < Iin; i++) dx_t[i] += a * Wq[(size_t)j * Iin + i];
                            for (int i = 0; i < H; i++) dn[(size_t)i] += b * Rq[(size_t)j * H + i];
                        }
                    }
                    dh.swap(dn);
                }
                state_store(c.hd, dhx, pl, n, dh.data(), H);
                if (c.lstm) state_store(c.cd, dcx, pl, n, dc.data(), H);
            }
        }
        dY.swap(dIn);
    }
    data_store(c.x, dxp, dY, false);
}

/* dW += sum over steps of the reserve's gate gradients times the step's inputs. */
static void rnn_backward_weights(const rnn_call &c, const int32_t *devlens, const void *xp, const void *hx, void *dwp,
                                 double *res)
{
    const rnn_geom &g = c.g;
    int H = g.r.H, N = c.N, DH = g.D * H, G = g.G;
    lens_check("cudnnRNNBackwardWeights_v8", c, devlens);
    std::vector<double> X = data_load(c.x, xp), dW((size_t)g.woff.back(), 0.0), hp((size_t)H);
    for (int l = 0; l < g.r.L; l++) {
        int Iin = g.in_size(l);
        const double *Y = res_out(c, res, l), *In = l == 0 ? X.data() : res_out(c, res, l - 1);
        for (int d = 0; d < g.D; d++) {
            int pl = l * g.D + d;
            for (int n = 0; n < N; n++) {
                int len = c.x.lens[(size_t)n];
                for (int t = 0; t < len; t++) {
                    bool first;
                    int pt = prev_step(d, t, len, &first);
                    if (first) state_load(c.hd, hx, pl, n, hp.data(), H);
                    else
                        for (int j = 0; j < H; j++) hp[(size_t)j] = Y[((size_t)pt * N + n) * DH + d * H + j];
                    const double *k = res_step(c, res, pl, t, n), *dPin = k + g.S * H, *dPrec = dPin + G * H;
                    const double *in = &In[((size_t)t * N + n) * Iin];
                    for (int q = 0; q < G; q++) {
                        double *dWq = &dW[(size_t)g.mat(pl, q)], *dRq = &dW[(size_t)g.mat(pl, G + q)];
                        int64_t bw = g.bias(pl, q), br = g.bias(pl, G + q);
                        for (int j = 0; j < H; j++) {
                            double a = dPin[q * H + j], b = dPrec[q * H + j];
                            for (int i = 0; i < Iin; i++) dWq[(size_t)j * Iin + i] += a * in[i];
                            for (int i = 0; i < H; i++) dRq[(size_t)j * H + i] += b * hp[(size_t)i];
                            if (bw >= 0) dW[(size_t)(bw + j)] += a;
                            if (br >= 0) dW[(size_t)(br + j)] += b;
                        }
                    }
                }
            }
        }
    }
    for (size_t i = 0; i < dW.size(); i++) store(g.r.dt, dwp, (int64_t)i, load(g.r.dt, dwp, (int64_t)i) + dW[i]);
}

/* ---- the entry points -------------------------------------------------------------------------- */

/* The checks every compute call makes, filling c. */
static cudnnStatus_t call_check(const char *fn, cudnnHandle_t h, const cudnnRNNStruct *r, const int32_t *devlens,
                                const cudnnRNNDataStruct *xd, const cudnnRNNDataStruct *yd,
                                const cudnnTensorStruct *hd, bool want_c, const cudnnTensorStruct *cd, size_t wbytes,
                                size_t wsbytes, void *ws, bool training, size_t rsbytes, void *rs, rnn_call *c)
{
    cudnnStatus_t st = geom_of(fn, h, r, &c->g);
    if (st == CUDNN_STATUS_SUCCESS) st = data_check(fn, c->g, xd, yd);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    c->T = xd->T, c->N = xd->N, c->lstm = r->cell == CUDNN_LSTM;
    c->x = *xd;
    if (yd) c->y = *yd;
    if ((st = state_check(fn, c->g, hd, c->N, r->P, "hDesc")) != CUDNN_STATUS_SUCCESS) return st;
    c->hd = *hd;
    if (c->lstm && want_c) {
        if ((st = state_check(fn, c->g, cd, c->N, r->H, "cDesc")) != CUDNN_STATUS_SUCCESS) return st;
        c->cd = *cd;
    }
    if (training && r->dropout > 0 && r->L > 1)
        return UNSUP("%s: dropout %g between layers in training is not emulated", fn, (double)r->dropout);
    if (wbytes < c->g.weight_bytes()) return BAD("%s: weightSpaceSize %zu < %zu", fn, wbytes, c->g.weight_bytes());
    if (wsbytes < c->g.work_bytes(c->N))
        return BAD("%s: workSpaceSize %zu < %zu (cudnnGetRNNTempSpaceSizes)", fn, wsbytes, c->g.work_bytes(c->N));
    if (!ws) return BAD("%s: workSpace is NULL", fn);
    if (!emu::device_range(ws, wsbytes, fn)) return CUDNN_STATUS_BAD_PARAM;
    if (training) {
        size_t need = c->g.reserve_doubles(c->T, c->N) * sizeof(double);
        if (rsbytes < need || !rs) return BAD("%s: reserveSpaceSize %zu < %zu (or NULL)", fn, rsbytes, need);
        if (!emu::device_range(rs, rsbytes, fn)) return CUDNN_STATUS_BAD_PARAM;
    }
    if (!devlens) return BAD("%s: devSeqLengths is NULL", fn);
    if (!emu::device_range(devlens, sizeof(int32_t) * (size_t)c->N, fn)) return CUDNN_STATUS_BAD_PARAM;
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnRNNForward(cudnnHandle_t h, cudnnRNNDescriptor_t r, cudnnForwardMode_t mode,
                                         const int32_t devlens[], cudnnRNNDataDescriptor_t xd, const void *x,
                                         cudnnRNNDataDescriptor_t yd, void *y, cudnnTensorDescriptor_t hd,
                                         const void *hx, void *hy, cudnnTensorDescriptor_t cd, const void *cx, void *cy,
                                         size_t wbytes, const void *w, size_t wsbytes, void *ws, size_t rsbytes,
                                         void *rs)
{
    const char *fn = "cudnnRNNForward";
    if (mode != CUDNN_FWD_MODE_INFERENCE && mode != CUDNN_FWD_MODE_TRAINING) return BAD("%s: fwdMode %d", fn, (int)mode);
    bool training = mode == CUDNN_FWD_MODE_TRAINING;
    rnn_call c = rnn_call();
    cudnnStatus_t st = call_check(fn, h, r, devlens, xd, yd, hd, true, cd, wbytes, wsbytes, ws, training, rsbytes, rs, &c);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    size_t sb = extent_bytes(c.hd), cb = c.lstm ? extent_bytes(c.cd) : 0;
    if (!x || !y || !w) return BAD("%s: x, y or weightSpace is NULL", fn);
    if (!mem_opt(x, rd_bytes(c.x), fn, "x") || !mem_opt(y, rd_bytes(c.y), fn, "y") ||
        !mem_opt(w, c.g.weight_bytes(), fn, "weightSpace") || !mem_opt(hx, sb, fn, "hx") ||
        !mem_opt(hy, sb, fn, "hy") || (c.lstm && (!mem_opt(cx, cb, fn, "cx") || !mem_opt(cy, cb, fn, "cy"))))
        return CUDNN_STATUS_BAD_PARAM;
    double *res = training ? (double *)rs : NULL;
    run(h, fn, [=]() {
        rnn_forward(c, devlens, x, y, hx, hy, c.lstm ? cx : NULL, c.lstm ? cy : NULL, w, res);
        memset(ws, 0xa5, wsbytes); /* nobody may rely on the workspace */
    });
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnRNNBackwardData_v8(cudnnHandle_t h, cudnnRNNDescriptor_t r, const int32_t devlens[],
                                                 cudnnRNNDataDescriptor_t yd, const void *y, const void *dy,
                                                 cudnnRNNDataDescriptor_t xd, void *dx, cudnnTensorDescriptor_t hd,
                                                 const void *hx, const void *dhy, void *dhx,
                                                 cudnnTensorDescriptor_t cd, const void *cx, const void *dcy,
                                                 void *dcx, size_t wbytes, const void *w, size_t wsbytes, void *ws,
                                                 size_t rsbytes, void *rs)
{
    const char *fn = "cudnnRNNBackwardData_v8";
    rnn_call c = rnn_call();
    cudnnStatus_t st = call_check(fn, h, r, devlens, xd, yd, hd, true, cd, wbytes, wsbytes, ws, true, rsbytes, rs, &c);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    size_t sb = extent_bytes(c.hd), cb = c.lstm ? extent_bytes(c.cd) : 0;
    if (!y || !dy || !dx || !w) return BAD("%s: y, dy, dx or weightSpace is NULL", fn);
    if (!mem_opt(y, rd_bytes(c.y), fn, "y") || !mem_opt(dy, rd_bytes(c.y), fn, "dy") ||
        !mem_opt(dx, rd_bytes(c.x), fn, "dx") || !mem_opt(w, c.g.weight_bytes(), fn, "weightSpace") ||
        !mem_opt(hx, sb, fn, "hx") || !mem_opt(dhy, sb, fn, "dhy") || !mem_opt(dhx, sb, fn, "dhx") ||
        (c.lstm && (!mem_opt(cx, cb, fn, "cx") || !mem_opt(dcy, cb, fn, "dcy") || !mem_opt(dcx, cb, fn, "dcx"))))
        return CUDNN_STATUS_BAD_PARAM;
    bool l = c.lstm;
    run(h, fn, [=]() {
        rnn_backward_data(c, devlens, dy, dx, hx, dhy, dhx, l ? cx : NULL, l ? dcy : NULL, l ? dcx : NULL, w,
                          (double *)rs);
        memset(ws, 0xa5, wsbytes);
    });
    return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnRNNBackwardWeights_v8(cudnnHandle_t h, cudnnRNNDescriptor_t r, cudnnWgradMode_t add,
                                                    const int32_t devlens[], cudnnRNNDataDescriptor_t xd,
                                                    const void *x, cudnnTensorDescriptor_t hd, const void *hx,
                                                    cudnnRNNDataDescriptor_t yd, const void *y, size_t wbytes,
                                                    void *dw, size_t wsbytes, void *ws, size_t rsbytes, void *rs)
{
    const char *fn = "cudnnRNNBackwardWeights_v8";
    if (add != CUDNN_WGRAD_MODE_ADD && add != CUDNN_WGRAD_MODE_SET) return BAD("%s: addGrad %d", fn, (int)add);
    if (add != CUDNN_WGRAD_MODE_ADD)
        return UNSUP("%s: addGrad CUDNN_WGRAD_MODE_SET; cuDNN documents that only CUDNN_WGRAD_MODE_ADD is supported "
                     "(zero the gradient buffer and add)", fn);
    rnn_call c = rnn_call();
    cudnnStatus_t st = call_check(fn, h, r, devlens, xd, yd, hd, false, NULL, wbytes, wsbytes, ws, true, rsbytes, rs,
                                  &c); /* BackwardWeights has no cDesc */
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!x || !y || !dw) return BAD("%s: x, y or dweightSpace is NULL", fn);
    if (!mem_opt(x, rd_bytes(c.x), fn, "x") || !mem_opt(y, rd_bytes(c.y), fn, "y") ||
        !mem_opt(dw, c.g.weight_bytes(), fn, "dweightSpace") || !mem_opt(hx, extent_bytes(c.hd), fn, "hx"))
        return CUDNN_STATUS_BAD_PARAM;
    run(h, fn, [=]() {
        rnn_backward_weights(c, devlens, x, hx, dw, (double *)rs);
        memset(ws, 0xa5, wsbytes);
    });
    return CUDNN_STATUS_SUCCESS;
}
