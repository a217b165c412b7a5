/* exec.h -- the compiled runtime of a graph (private to exec.c and exec_cuda.c): the plan
 * exec.c builds from the memory plan, and the hooks through which graphs on a CUDA device
 * run (exec_cuda.c: device steps, fused groups as generated kernels or member by member,
 * CUDA Graph capture of a run).
 */
#ifndef TC_GRAPH_EXEC_H
#define TC_GRAPH_EXEC_H

#include "plan.h"

/* Step modes. S_DCHECKED and S_DGROUP exist only in device plans: an index/random op whose
 * result sizes are checked before the dispatcher runs it, and a fused group (exec_cuda.c). */
enum { S_KERNEL, S_EW, S_CHECKED, S_EXEC, S_VIEW, S_GROUP, S_CONTROL, S_DCHECKED, S_DGROUP };
enum { O_RETAIN, O_FRESH, O_ALIAS, O_CLONE, O_CONTROL };

typedef struct step {
    uint8_t mode;
    int32_t node, nin, nout;
    const int32_t *vin, *vout; /* value ids of the inputs (-1: absent) and outputs */
    tc_kernel kern;
    tc_kcall k; /* .in -> in, .out -> out, .p -> p */
    const tc_tensor **in;
    tc_tensor **out; /* nout slots (at least 2), after in[] in one allocation */
    tc_params p;
    /* S_VIEW: the geometry last computed, valid while the base keeps these strides */
    bool vc_ok, vc_absolute;
    int32_t vc_ndim;
    int64_t vc_stride[TC_MAX_DIMS], vc_delta;
} step;

typedef struct wbstep {
    int32_t src, ext;
    bool direct;     /* computed in the captured tensor already (TC_GOFF_WRITEBACK) */
    tc_tensor *snap; /* the source copied here first when it may share memory with a target */
    tc_kcall k, ksnap;
    const tc_tensor *in[1], *snap_in[1];
    tc_tensor *out[1], *snap_out[1];
} wbstep;

typedef struct outstep {
    int32_t val;
    uint8_t mode;
} outstep;

typedef struct plan {
    tc_storage *arena;
    int32_t nvals;
    tc_tensor **rt;  /* per value: the header it is read through during a run */
    tc_tensor **own; /* per value: a header the plan owns (arena values, views), or NULL */
    uint8_t *bind;   /* per value: TC_GB_* */
    step *steps;
    int32_t nsteps;
    int32_t *fresh, nfresh; /* values allocated per run */
    tc_storage **recycle;   /* per fresh value: the storage it had last run, reused when the
                               caller has let go of it (no page faults for big results) */
    int32_t *dyn, ndyn;     /* view headers whose storage is borrowed per run */
    int32_t *ctl, nctl;     /* control results: released after the run */
    int32_t *ext, next;     /* captured tensors: checked per run */
    wbstep *wb;
    int32_t nwb;
    int32_t *direct_ext, ndirect; /* captured tensors written before the end */
    tc_storage **ext_stor;        /* per captured tensor: storage and offset when last checked */
    int64_t *ext_off;
    outstep *outs;
    int32_t nouts;
    const tc_gplan_info *info; /* only while preparing */
    int running;
    /* graphs on a CUDA device (exec_cuda.c) */
    int32_t device;          /* TC_CPU, or the CUDA device every step runs on */
    struct dgroup *dg;       /* per fused group of a device plan (S_DGROUP steps index it) */
    int32_t ndg;
    int64_t launches;        /* fused groups run as one generated kernel, since preparing */
    int64_t unfused_runs;    /* fused groups run member by member */
    char why_unfused[256];   /* the first reason a group ran unfused */
    int capturing;           /* a run being captured into a CUDA graph: nothing may allocate */
    int64_t nruns;           /* successful runs (a capture needs a warm-up run first) */
} plan;

/* ---- exec_cuda.c ----------------------------------------------------------------------- */

/* Prepares fused group `group` of a device plan: its generated kernel when one can run,
 * else device temporaries for its internal values and one dispatcher step per member.
 * *idx receives the index into pl->dg. */
tc_status tc_gexec_dgroup_prepare(const tc_graph *g, plan *pl, int32_t group, int32_t *idx);
tc_status tc_gexec_dgroup_run(const tc_graph *g, plan *pl, int32_t idx);
int32_t tc_gexec_dgroup_group(const plan *pl, int32_t idx); /* its group id */
/* An index or random step on the device: sizes checked, then the dispatcher. */
tc_status tc_gexec_dchecked_run(step *s);
void tc_gexec_cuda_free(plan *pl);
/* Prepares every device group's member-by-member fallback now (capture.c: nothing may
 * allocate once a capture runs). */
tc_status tc_gexec_dgroups_ready(const tc_graph *g, plan *pl);
/* Calls fn(ctx, t) for every device temporary of the fused groups (capture.c keeps them). */
tc_status tc_gexec_keep_temps(const plan *pl, void *ctx, tc_status (*fn)(void *ctx, tc_tensor *t));
/* exec.c: one run captured into a CUDA graph (fresh results allocated before the capture). */
tc_status tc_gexec_run_capture(tc_graph *g, const tc_tensor *const *inputs, int nin, tc_tensor **outputs, int nout,
                               tc_cuda_graph **cg);

#endif /* TC_GRAPH_EXEC_H */
