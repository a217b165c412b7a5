/* exec_cuda.c -- compiled graphs on a CUDA device: which device a graph runs on, and its
 * fused groups there (exec.c builds and runs the rest of a device plan).
 *
 * A graph traced with device tensors runs on that device: exec.c puts the arena in device
 * memory, allocates fresh results there and runs every op step through the dispatcher with
 * its preallocated results (tc_op_exec: the CUDA backend, or its host fallback), never a
 * CPU kernel. tc_graph_check_device decides the device once per plan and refuses graphs
 * that mix devices.
 *
 * A fused group (fuse.c) on a device becomes one generated kernel (cuda_codegen.c, NVRTC
 * in nvrtc.c, launched by cuda_launch.c) when all of these hold: NVRTC loads, the CUDA
 * driver loads, the backend is not the mock (its "device" pointers are host memory), the
 * codegen accepts the group, every input it reads is on the device or a 0-dim CPU constant
 * (copied to the device once, at prepare), and TOCHA_CUDA_FUSED is not 0 ("force" skips the first three
 * checks: tests use it on machines without a driver, where the launch then fails and the
 * group falls back as below; never with the mock on a machine that has one). Otherwise -- and for a run
 * whose group inputs are laid out otherwise than the kernel was generated for -- the group
 * runs member by member through the dispatcher, with device temporaries for the values
 * internal to it. An output of the group that may share memory with one of its inputs (the
 * in-place plan lets an output take an input's buffer, and a write-back source may be
 * computed straight into the captured tensor the group reads) is computed into a temporary
 * and copied over after the last member when a later member reads that input (or its own
 * member reads it broadcast), since fused.c's guarantee (every member reads a block before
 * any output of it is written) does not hold member by member; an element read and written
 * by the same elementwise member is safe as it is. How groups ran
 * is counted per graph (tc_graph_device_info).
 *
 * NOTE: the generated-kernel branch has NOT RUN ON A GPU (there was none where it was
 * written); it has run over the CUDA emulator's NVRTC and driver (tests/emu/emu_driver.cc),
 * its refusals over the mock and without a driver. docs/cuda.md.
 */
#include "cuda_codegen.h"
#include "../cuda/cuda_api.h"
#include "exec.h"
#include "fuse.h"
#include <stdio.h>
#include <stdlib.h>

typedef struct dgroup {
    int32_t group;
    bool fused;             /* k is generated and launchable */
    bool ready;             /* member steps and temporaries prepared */
    tc_cuda_kernel k;
    int64_t (*in_stride)[TC_MAX_DIMS]; /* per input: the strides the kernel reads it with */
    bool *in_fixed;         /* per input: its header is fixed (checked once, at prepare) */
    tc_tensor **in_dev;     /* per input: the device copy of a 0-dim CPU constant, or NULL */
    int32_t nins;           /* the group's inputs (in_dev's length) */
    step *members;          /* unfused: one dispatcher step per member */
    int32_t nmembers;
    int32_t *redir, nredir; /* outputs computed into a temporary first */
    tc_tensor **redir_tmp;
    tc_tensor **redir_saved;
    int32_t *internal, ninternal; /* values internal to the group */
} dgroup;

/* ---- the graph's device ------------------------------------------------------------------ */

static const char *val_what(const tc_graph *g, int32_t v, char *buf, size_t cap)
{
    const tc_gval *x = &g->vals[v];
    if (x->kind == TC_GV_INPUT) snprintf(buf, cap, "input %d", x->arg + 1);
    else if (x->kind == TC_GV_EXTERNAL) snprintf(buf, cap, "a captured tensor");
    else if (x->kind == TC_GV_CONST) snprintf(buf, cap, "a constant");
    else {
        const tc_gnode *n = &g->nodes[x->producer];
        snprintf(buf, cap, "the result of node %d (%s)%s%s", x->producer, tc_graph_op_name(n->op),
                 n->where ? " traced at " : "", n->where ? n->where : "");
    }
    return buf;
}

static int node_kind(const tc_graph *g, int32_t n)
{
    int32_t op = g->nodes[n].op;
    return op >= 0 && op < TC_OP_COUNT ? tc_op_info((tc_op)op)->kind : -1;
}

/* Host copies that only go back to the device: `target:long():view(n):cudaLong()` of a
 * device target (cutorch's rule makes :long() a host tensor) records copy -> host, views,
 * copy -> device. Such a host value -- made by a copy or a view, read only by copies and
 * views of the same kind, never returned or written back -- holds the same elements on the
 * device, so it lives there (the copies become device copies). Fixed point over the
 * readers: a value stays on the host when any reader needs it there. */
static void relocate_round_trips(tc_graph *g, int32_t home)
{
    int32_t nv = g->nvals;
    uint8_t *ok = calloc((size_t)nv + 1, 1);
    if (!ok) return; /* then the check below reports the host values */
    for (int32_t v = 0; v < nv; v++) {
        const tc_gval *x = &g->vals[v];
        if (x->kind != TC_GV_OP || x->device != TC_CPU || x->producer < 0) continue;
        int k = node_kind(g, x->producer);
        ok[v] = (k == TC_KIND_CONVERT || k == TC_KIND_VIEW) && !(g->nodes[x->producer].flags & TC_GN_DEAD);
    }
    for (int32_t i = 0; i < g->noutputs; i++) ok[g->outputs[i]] = 0;
    for (int32_t i = 0; i < g->nwb; i++) ok[g->wb_val[i]] = 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t n = 0; n < g->nnodes; n++) {
            const tc_gnode *nd = &g->nodes[n];
            if (nd->flags & TC_GN_DEAD) continue;
            int k = node_kind(g, n);
            for (int32_t i = 0; i < nd->nin; i++) {
                int32_t u = nd->in[i];
                if (u < 0 || !ok[u] || k == TC_KIND_CONVERT) continue;
                if (k == TC_KIND_VIEW && nd->out[0] >= 0 && ok[nd->out[0]]) continue;
                ok[u] = 0, changed = true;
            }
        }
    }
    for (int32_t v = 0; v < nv; v++)
        if (ok[v]) g->vals[v].device = home;
    free(ok);
    /* a view lives where its base does (passes may have moved a view onto another base:
     * simplify turns such a round trip into a view of the device value) */
    for (int32_t n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (!(nd->flags & TC_GN_DEAD) && node_kind(g, n) == TC_KIND_VIEW && nd->nin > 0 && nd->in[0] >= 0 &&
            nd->out[0] >= 0)
            g->vals[nd->out[0]].device = g->vals[nd->in[0]].device;
    }
}

tc_status tc_graph_check_device(tc_graph *g, int32_t *device)
{
    int32_t nv = g->nvals, home = TC_CPU;
    /* [v]: read by a node; [nv+1+v]: by a non-copy; [2(nv+1)+v]: by a non-copy where a CPU
     * tensor could not join (tc_host_scalars_join) */
    uint8_t *read = calloc((size_t)nv + 1, 3);
    if (!read) return tc_set_error(TC_ERR_MEMORY, "graph: out of memory checking devices");
    uint8_t *by_op = read + nv + 1, *not_scal = by_op + nv + 1;
    for (int32_t n = 0; n < g->nnodes; n++) {
        const tc_gnode *nd = &g->nodes[n];
        if (nd->flags & TC_GN_DEAD) continue;
        int kind = nd->op < TC_OP_COUNT ? tc_op_info((tc_op)nd->op)->kind : -1;
        bool copy = kind == TC_KIND_CONVERT;
        for (int32_t i = 0; i < nd->nin; i++)
            if (nd->in[i] >= 0) {
                read[nd->in[i]] = 1, by_op[nd->in[i]] |= !copy;
                const tc_gval *u = &g->vals[nd->in[i]];
                not_scal[nd->in[i]] |= !copy && !tc_host_scalars_join(kind, i, nd->nin, u->ndim, u->size);
            }
    }
    for (int32_t i = 0; i < g->noutputs; i++) read[g->outputs[i]] = by_op[g->outputs[i]] = not_scal[g->outputs[i]] = 1;
    for (int32_t i = 0; i < g->nwb; i++) read[g->wb_val[i]] = by_op[g->wb_val[i]] = not_scal[g->wb_val[i]] = 1;
    /* the device of the inputs and op results (a captured device tensor only downloaded by
     * a copy does not make a CPU graph a device one) */
    bool computed = false; /* any input or live op result */
    for (int32_t v = 0; v < nv && home == TC_CPU; v++) {
        const tc_gval *x = &g->vals[v];
        bool live = x->kind == TC_GV_INPUT ||
                    (x->kind == TC_GV_OP && x->producer >= 0 && !(g->nodes[x->producer].flags & TC_GN_DEAD));
        computed |= live;
        if (live && TC_DEVICE_IS_CUDA(x->device)) home = x->device;
    }
    /* A graph of constants and captured tensors alone (a fill into a given device tensor
     * folds to a device constant): a device tensor an op reads or the graph returns names
     * the device, as the eager calls ran there. */
    for (int32_t v = 0; v < nv && !computed && home == TC_CPU; v++)
        if (by_op[v] && TC_DEVICE_IS_CUDA(g->vals[v].device)) home = g->vals[v].device;
    if (home != TC_CPU) relocate_round_trips(g, home);
    tc_status s = TC_OK;
    for (int32_t v = 0; v < nv && s == TC_OK; v++) {
        const tc_gval *x = &g->vals[v];
        if (x->device == home) continue;
        bool live = x->kind == TC_GV_INPUT || read[v] ||
                    (x->kind == TC_GV_OP && x->producer >= 0 && !(g->nodes[x->producer].flags & TC_GN_DEAD));
        if (!live) continue;
        bool data = x->kind == TC_GV_EXTERNAL || x->kind == TC_GV_CONST;
        /* a 0-dim CPU tensor may join device ops, so may an optimizer step's scalar vector
         * (the dispatcher's rule); data on another device may be copied over */
        bool host_scalars = x->device == TC_CPU && home != TC_CPU && (x->ndim == 0 || !not_scal[v]);
        if (data && (host_scalars || !by_op[v])) continue;
        char w[256], d1[16], d2[16], b[TC_SHAPE_BUF];
        s = tc_set_error(TC_ERR_DEVICE,
                         "graph: mixed devices: %%%d (%s, %s %s) is on %s but the graph runs on %s; a compiled graph "
                         "runs on one device (move the tensors there before tracing)",
                         v, val_what(g, v, w, sizeof w), tc_dtype_name((tc_dtype)x->dtype),
                         tc_sizes_str(x->ndim, x->size, b, sizeof b), tc_device_str(x->device, d1, sizeof d1),
                         tc_device_str(home, d2, sizeof d2));
    }
    free(read);
    if (s == TC_OK) *device = home;
    return s;
}

/* ---- fused groups on the device ---------------------------------------------------------- */

/* Why generated kernels cannot run here ("" when they can). */
static void kernel_refusal(int device, char *why, size_t cap)
{
    char r[512];
    const char *env = getenv("TOCHA_CUDA_FUSED");
    const tc_cuda_api *api = NULL;
    why[0] = '\0';
    if (env && strcmp(env, "0") == 0) {
        snprintf(why, cap, "TOCHA_CUDA_FUSED=0");
        return;
    }
    if (env && strcmp(env, "force") == 0) return; /* tests: generate and try to launch regardless */
    if (tc_cuda_need("graph", TC_DEVICE_ORDINAL(device), &api) == TC_OK && api->device_name) {
        char name[256] = "";
        if (api->device_name(TC_DEVICE_ORDINAL(device), name, sizeof name) == TC_OK && strstr(name, "mock")) {
            snprintf(why, cap, "the CUDA backend is the mock (device memory is host memory)");
            return;
        }
    }
    tc_clear_error();
    if (!tc_nvrtc_available(r, sizeof r)) {
        snprintf(why, cap, "NVRTC unavailable: %.200s", r);
        return;
    }
    if (!tc_cuda_launch_available(r, sizeof r)) snprintf(why, cap, "%.250s", r);
}

static void note_unfused(plan *pl, const char *why)
{
    if (!pl->why_unfused[0]) snprintf(pl->why_unfused, sizeof pl->why_unfused, "%s", why);
}

/* Whether input u of the group may share memory with group output v. */
static bool may_share(const tc_graph *g, const plan *pl, int32_t v, int32_t u)
{
    const tc_gplan_info *a = pl->info;
    uint8_t b = pl->bind[v], rb = pl->bind[a->root[u]];
    int32_t r = a->root[u];
    if (b == TC_GB_FRESH) return false; /* new memory every run */
    if (b == TC_GB_ARENA) {
        if (rb != TC_GB_ARENA) return false;
        int64_t lo = g->vals[v].offset, hi = lo + tc_graph_val_bytes(g, v);
        int64_t l2 = g->vals[r].offset, h2 = l2 + tc_graph_val_bytes(g, r);
        return l2 < hi && lo < h2;
    }
    if (rb == TC_GB_ARENA || rb == TC_GB_CONST || g->vals[r].device != pl->device) return false;
    if (b == TC_GB_WRITEBACK && rb == TC_GB_EXTERNAL) { /* two captured tensors (run checks them) */
        const tc_tensor *x = g->vals[r].t, *y = a->wb_of[v] >= 0 ? g->vals[a->wb_of[v]].t : NULL;
        return !y || x->storage == y->storage;
    }
    return true; /* per-run memory: assume it may */
}

/* Whether group output v must be computed into a temporary when the members run one by
 * one: an input sharing its memory is read after v's member wrote it (by a later member),
 * or by v's member itself other than element by element (a broadcast read). */
static bool output_needs_temp(const tc_graph *g, const plan *pl, const tc_ggroup *grp, int32_t v)
{
    int32_t mv = -1;
    for (int32_t m = 0; m < grp->nnodes && mv < 0; m++)
        if (g->nodes[grp->nodes[m]].out[0] == v) mv = m;
    int64_t nv = tc_numel_of(g->vals[v].ndim, g->vals[v].size);
    for (int32_t m = mv < 0 ? 0 : mv; m < grp->nnodes; m++) {
        const tc_gnode *nd = &g->nodes[grp->nodes[m]];
        for (int32_t i = 0; i < nd->nin; i++) {
            int32_t u = nd->in[i];
            bool outside = false;
            for (int32_t k = 0; k < grp->nins && !outside; k++) outside = grp->ins[k] == u;
            if (!outside || !may_share(g, pl, v, u)) continue;
            if (m > mv || tc_numel_of(g->vals[u].ndim, g->vals[u].size) != nv || mv < 0) return true;
        }
    }
    return false;
}

/* The member steps and temporaries for running the group unfused. Allocates device memory:
 * never while a run is being captured. */
static tc_status prepare_unfused(const tc_graph *g, plan *pl, dgroup *d)
{
    if (d->ready) return TC_OK;
    if (pl->capturing)
        return tc_set_error(TC_ERR_ARG, "fused group %d: its inputs' layout changed and running it member by member "
                            "needs device memory, which cannot be allocated while a CUDA graph is captured", d->group);
    const tc_ggroup *grp = &g->groups[d->group];
    for (int32_t i = 0; i < d->ninternal; i++) {
        int32_t v = d->internal[i];
        const tc_gval *x = &g->vals[v];
        if (pl->own[v]) continue;
        TRY(tc_tensor_alloc_on(pl->device, (tc_dtype)x->dtype, x->ndim, x->size, &pl->own[v]));
        pl->rt[v] = pl->own[v];
    }
    for (int32_t i = 0; i < d->nredir; i++) {
        const tc_gval *x = &g->vals[d->redir[i]];
        if (!d->redir_tmp[i])
            TRY(tc_tensor_alloc_on(pl->device, (tc_dtype)x->dtype, x->ndim, x->size, &d->redir_tmp[i]));
    }
    for (int32_t m = 0; m < grp->nnodes; m++) {
        const tc_gnode *nd = &g->nodes[grp->nodes[m]];
        step *s = &d->members[m];
        if (s->in) continue;
        s->in = calloc((size_t)nd->nin + 2, sizeof(void *));
        if (!s->in) return tc_set_error(TC_ERR_MEMORY, "graph: out of memory preparing fused group %d", d->group);
        s->out = (tc_tensor **)(s->in + nd->nin);
        s->mode = S_EXEC, s->node = grp->nodes[m], s->nin = nd->nin, s->nout = nd->nout;
        s->vin = nd->in, s->vout = nd->out, s->p = nd->p;
        s->k = (tc_kcall){.op = (tc_op)nd->op, .info = tc_op_info((tc_op)nd->op), .in = s->in, .nin = nd->nin,
                          .p = &s->p, .out = s->out, .nout = nd->nout};
    }
    d->nmembers = grp->nnodes;
    d->ready = true;
    return TC_OK;
}

/* Generates the kernel for the layouts the group's inputs have now (per-run inputs are
 * taken as contiguous and checked at every run). */
static void try_kernel(const tc_graph *g, plan *pl, dgroup *d, const char *refusal)
{
    if (refusal[0]) {
        note_unfused(pl, refusal);
        return;
    }
    const tc_ggroup *grp = &g->groups[d->group];
    const int64_t *strides[TC_FUSE_MAX_INS];
    for (int32_t k = 0; k < grp->nins && k < TC_FUSE_MAX_INS; k++) {
        int32_t v = grp->ins[k];
        const tc_tensor *t = pl->rt[v];
        const tc_gval *x = &g->vals[v];
        int64_t cs[TC_MAX_DIMS];
        tc_contiguous_strides(x->ndim, x->size, cs);
        uint8_t rb = pl->bind[pl->info->root[v]];
        d->in_fixed[k] = t && t->storage && (rb == TC_GB_ARENA || rb == TC_GB_CONST); /* never rebound */
        memcpy(d->in_stride[k], d->in_fixed[k] ? t->stride : cs, sizeof(int64_t) * TC_MAX_DIMS);
        bool contig = !d->in_fixed[k] || memcmp(t->stride, cs, sizeof(int64_t) * (size_t)x->ndim) == 0;
        strides[k] = contig ? NULL : d->in_stride[k];
    }
    for (int32_t k = 0; k < grp->nins; k++) {
        int32_t v = grp->ins[k];
        if (g->vals[v].device == pl->device) continue;
        /* a 0-dim CPU tensor (host memory; a Lua number in `x * 2` is one): a constant is
         * copied to the device once and the kernel reads the copy; one that may change
         * between runs keeps the group unfused */
        const tc_tensor *t = pl->rt[v];
        if (pl->bind[pl->info->root[v]] != TC_GB_CONST || !t ||
            tc_tensor_to(t, pl->device, -1, &d->in_dev[k]) != TC_OK) {
            tc_clear_error();
            note_unfused(pl, "the group reads a CPU scalar tensor that is not a constant");
            return;
        }
    }
    bool fits = grp->nins <= TC_FUSE_MAX_INS && grp->nouts <= TC_FUSE_MAX_MEMBERS;
    if (!fits || tc_cuda_codegen(g, d->group, strides, &d->k) != TC_OK) {
        char why[256];
        snprintf(why, sizeof why, "%.250s", !fits ? "too many inputs or outputs" : tc_last_error());
        tc_clear_error();
        note_unfused(pl, why);
        return;
    }
    d->fused = true;
}

tc_status tc_gexec_dgroup_prepare(const tc_graph *g, plan *pl, int32_t group, int32_t *idx)
{
    const tc_ggroup *grp = &g->groups[group];
    if (!pl->dg) {
        pl->dg = calloc((size_t)g->ngroups + 1, sizeof *pl->dg);
        if (!pl->dg) return tc_set_error(TC_ERR_MEMORY, "graph: out of memory preparing fused groups");
    }
    dgroup *d = &pl->dg[pl->ndg++];
    d->group = group;
    size_t n = (size_t)grp->nnodes + 1, ni = (size_t)grp->nins + 1, no = (size_t)grp->nouts + 1;
    d->members = calloc(n, sizeof *d->members);
    d->internal = malloc(sizeof(int32_t) * n);
    d->redir = malloc(sizeof(int32_t) * no);
    d->redir_tmp = calloc(no, sizeof *d->redir_tmp);
    d->redir_saved = calloc(no, sizeof *d->redir_saved);
    d->in_stride = calloc(ni, sizeof *d->in_stride);
    d->in_fixed = calloc(ni, sizeof *d->in_fixed);
    d->in_dev = calloc(ni, sizeof *d->in_dev);
    d->nins = grp->nins;
    if (!d->members || !d->internal || !d->redir || !d->redir_tmp || !d->redir_saved || !d->in_stride || !d->in_fixed ||
        !d->in_dev)
        return tc_set_error(TC_ERR_MEMORY, "graph: out of memory preparing fused group %d", group);
    for (int32_t m = 0; m < grp->nnodes; m++) {
        int32_t v = g->nodes[grp->nodes[m]].out[0];
        if (v >= 0 && pl->bind[v] == TC_GB_INTERNAL) d->internal[d->ninternal++] = v;
    }
    for (int32_t o = 0; o < grp->nouts; o++)
        if (output_needs_temp(g, pl, grp, grp->outs[o])) d->redir[d->nredir++] = grp->outs[o];
    char refusal[512];
    kernel_refusal(pl->device, refusal, sizeof refusal);
    try_kernel(g, pl, d, refusal);
    *idx = pl->ndg - 1;
    return d->fused ? TC_OK : prepare_unfused(g, pl, d);
}

int32_t tc_gexec_dgroup_group(const plan *pl, int32_t idx) { return pl->dg[idx].group; }

tc_status tc_gexec_dgroups_ready(const tc_graph *g, plan *pl)
{
    for (int32_t i = 0; i < pl->ndg; i++) TRY(prepare_unfused(g, pl, &pl->dg[i]));
    return TC_OK;
}

static tc_status run_unfused(const tc_graph *g, plan *pl, dgroup *d)
{
    TRY(prepare_unfused(g, pl, d));
    tc_tensor **rt = pl->rt;
    static const tc_params cp = {.i = {-1, 0, 0, 0}};
    for (int32_t i = 0; i < d->nredir; i++) d->redir_saved[i] = rt[d->redir[i]], rt[d->redir[i]] = d->redir_tmp[i];
    tc_status st = TC_OK;
    for (int32_t m = 0; m < d->nmembers && st == TC_OK; m++) {
        step *s = &d->members[m];
        for (int32_t i = 0; i < s->nin; i++) s->in[i] = s->vin[i] >= 0 ? rt[s->vin[i]] : NULL;
        for (int32_t o = 0; o < s->nout; o++) s->out[o] = s->vout[o] >= 0 ? rt[s->vout[o]] : NULL;
        st = tc_op_exec(s->k.op, s->in, s->nin, &s->p, s->out, s->k.info->nout);
        if (st) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", tc_last_error());
            const tc_gnode *nd = &g->nodes[s->node];
            st = tc_set_error(st, "%s [member node %d%s%s, run unfused on the device]", msg, s->node,
                              nd->where ? " traced at " : "", nd->where ? nd->where : "");
        }
    }
    for (int32_t i = 0; i < d->nredir; i++) {
        rt[d->redir[i]] = d->redir_saved[i];
        if (st == TC_OK) {
            const tc_tensor *src[1] = {d->redir_tmp[i]};
            tc_tensor *dst[1] = {d->redir_saved[i]};
            st = tc_op_exec(TC_OP_COPY, src, 1, &cp, dst, 1);
        }
    }
    if (st == TC_OK) pl->unfused_runs++;
    return st;
}

tc_status tc_gexec_dgroup_run(const tc_graph *g, plan *pl, int32_t idx)
{
    dgroup *d = &pl->dg[idx];
    if (!d->fused) return run_unfused(g, pl, d);
    const tc_ggroup *grp = &g->groups[d->group];
    void *ins[TC_FUSE_MAX_INS], *outs[TC_FUSE_MAX_MEMBERS];
    bool same = true; /* (try_kernel checked the counts) */
    for (int32_t k = 0; k < grp->nins && same; k++) {
        const tc_tensor *t = d->in_dev[k] ? d->in_dev[k] : pl->rt[grp->ins[k]];
        if (t->device != pl->device ||
            (!d->in_fixed[k] && memcmp(t->stride, d->in_stride[k], sizeof(int64_t) * (size_t)t->ndim) != 0))
            same = false; /* a per-run input laid out otherwise than the kernel reads it */
        ins[k] = tc_base(t);
    }
    for (int32_t o = 0; o < grp->nouts && same; o++) outs[o] = tc_base(pl->rt[grp->outs[o]]);
    if (!same) {
        note_unfused(pl, "a group input's layout differs from the one the kernel was generated for");
        return run_unfused(g, pl, d);
    }
    tc_status st = tc_cuda_fused_launch(TC_DEVICE_ORDINAL(pl->device), &d->k, ins, outs);
    if (st == TC_OK) {
        pl->launches++;
        return TC_OK;
    }
    /* compiling or loading failed (launches report errors later, at a synchronisation):
     * this group runs unfused from now on */
    char why[256];
    snprintf(why, sizeof why, "%.250s", tc_last_error());
    tc_clear_error();
    note_unfused(pl, why);
    d->fused = false;
    return run_unfused(g, pl, d);
}

tc_status tc_gexec_dchecked_run(step *s)
{
    tc_outspec spec;
    TRY(tc_op_prepare(s->k.op, s->in, s->nin, s->k.p, s->out, s->k.info->nout, &spec));
    for (int32_t o = 0; o < spec.nout && o < s->nout; o++) {
        const tc_tensor *t = s->out[o];
        if (spec.ndim[o] != t->ndim || memcmp(spec.size[o], t->size, sizeof(int64_t) * (size_t)t->ndim) != 0) {
            char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
            return tc_set_error(TC_ERR_SHAPE,
                                "%s: gives %s on this run but %s when traced (its result size depends on the data, "
                                "which a compiled graph cannot follow)", tc_graph_op_name(s->k.op),
                                tc_sizes_str(spec.ndim[o], spec.size[o], b1, sizeof b1), tc_shape_str(t, b2, sizeof b2));
        }
    }
    return tc_op_exec(s->k.op, s->in, s->nin, &s->p, s->out, s->k.info->nout);
}

tc_status tc_gexec_keep_temps(const plan *pl, void *ctx, tc_status (*fn)(void *ctx, tc_tensor *t))
{
    for (int32_t i = 0; i < pl->ndg; i++)
        for (int32_t r = 0; r < pl->dg[i].nredir; r++) TRY(fn(ctx, pl->dg[i].redir_tmp[r]));
    return TC_OK;
}

void tc_gexec_cuda_free(plan *pl)
{
    for (int32_t i = 0; i < pl->ndg; i++) {
        dgroup *d = &pl->dg[i];
        tc_cuda_kernel_free(&d->k);
        for (int32_t m = 0; d->members && m < d->nmembers; m++) free(d->members[m].in);
        for (int32_t r = 0; d->redir_tmp && r < d->nredir; r++) tc_tensor_release(d->redir_tmp[r]);
        free(d->members), free(d->internal), free(d->redir), free(d->redir_tmp), free(d->redir_saved);
        for (int32_t k = 0; d->in_dev && k < d->nins; k++) tc_tensor_release(d->in_dev[k]);
        free(d->in_stride), free(d->in_fixed), free(d->in_dev);
    }
    free(pl->dg);
    pl->dg = NULL, pl->ndg = 0;
}

/* ---- what ran how ----------------------------------------------------------------------- */

tc_status tc_graph_device_info(const tc_graph *g, tc_graph_devinfo *out)
{
    if (!g || !out) return tc_set_error(TC_ERR_ARG, "graph device_info: NULL argument");
    memset(out, 0, sizeof *out);
    const plan *pl = g->plan;
    out->device = pl ? pl->device : g->device;
    if (!pl) return TC_OK;
    out->groups = pl->device == TC_CPU ? g->ngroups : pl->ndg;
    for (int32_t i = 0; i < pl->ndg; i++) out->groups_kernel += pl->dg[i].fused;
    out->groups_unfused = pl->device == TC_CPU ? 0 : out->groups - out->groups_kernel;
    out->kernel_launches = pl->launches, out->unfused_runs = pl->unfused_runs;
    snprintf(out->why_unfused, sizeof out->why_unfused, "%s", pl->why_unfused);
    return TC_OK;
}
