/* test_conformance.c -- the op conformance test, driven by the op table.
 *
 * 1. Golden: every case of tests/golden/ops.golden (computed by PyTorch, see
 *    gen_golden.py) runs through tc_op_run and must match.
 * 2. Coverage: every op in core/ops.def has a CPU kernel (views excepted) and at least one
 *    golden case (random ops excepted: test_random.c checks their statistics). A newly
 *    declared op therefore fails here until it is implemented and has golden values.
 * 3. Every elementwise op, for every dtype its flags allow: contiguous, transposed
 *    (strided), broadcast and f16/bf16 inputs agree with the contiguous f64/i64 result.
 * 4. Bad input for every op: wrong arity, missing result slots, a dtype the op refuses.
 */
#include "ctest.h"
#include "conformance.h"
#include "internal.h"
#include "layouts.h"
#include <stdlib.h>

/* ---- golden file parsing ------------------------------------------------------------------ */

typedef struct gtensor {
    int present;
    int dtype, ndim;
    int64_t size[TC_MAX_DIMS];
    double *values;
    int64_t n;
} gtensor;

typedef struct gcase {
    char op[64];
    tc_params p;
    int nin, nout;
    gtensor in[12], out[2], outshape; /* rnn_backward has 9 inputs */
} gcase;

static int dtype_by_name(const char *s)
{
    for (int d = 0; d < TC_DTYPE_COUNT; d++)
        if (strcmp(s, tc_dtype_name((tc_dtype)d)) == 0) return d;
    return -1;
}

static int read_tensor(FILE *f, gtensor *g, int with_values)
{
    char tok[64];
    memset(g, 0, sizeof *g);
    if (fscanf(f, "%63s", tok) != 1) return 0;
    if (strcmp(tok, "none") == 0) return 1;
    g->present = 1;
    g->dtype = dtype_by_name(tok);
    if (g->dtype < 0 || fscanf(f, "%d", &g->ndim) != 1 || g->ndim > TC_MAX_DIMS) return 0;
    g->n = 1;
    for (int d = 0; d < g->ndim; d++) {
        long long v;
        if (fscanf(f, "%lld", &v) != 1) return 0;
        g->size[d] = v;
        g->n *= v;
    }
    if (!with_values) return 1;
    if (fscanf(f, "%63s", tok) != 1 || strcmp(tok, ":") != 0) return 0;
    g->values = calloc((size_t)(g->n ? g->n : 1), sizeof(double));
    for (int64_t i = 0; i < g->n; i++) {
        if (fscanf(f, "%63s", tok) != 1) return 0;
        g->values[i] = strtod(tok, NULL);
    }
    return 1;
}

static void free_case(gcase *c)
{
    for (int i = 0; i < c->nin; i++) free(c->in[i].values);
    for (int i = 0; i < c->nout; i++) free(c->out[i].values);
}

/* Reads the next case; returns 0 at end of file, -1 on a format error. */
static int read_case(FILE *f, gcase *c)
{
    char tok[64];
    memset(c, 0, sizeof *c);
    int started = 0;
    while (fscanf(f, "%63s", tok) == 1) {
        if (tok[0] == '#') {
            int ch;
            while ((ch = fgetc(f)) != '\n' && ch != EOF) {
            }
            continue;
        }
        started = 1;
        if (strcmp(tok, "op") == 0) {
            if (fscanf(f, "%63s", c->op) != 1) return -1;
        } else if (strcmp(tok, "dtype") == 0) {
            if (fscanf(f, "%63s", tok) != 1) return -1;
        } else if (strcmp(tok, "params") == 0) {
            long long i0, i1, i2, i3;
            if (fscanf(f, "%lf %lf %lld %lld %lld %lld", &c->p.s[0], &c->p.s[1], &i0, &i1, &i2, &i3) != 6) return -1;
            c->p.i[0] = i0, c->p.i[1] = i1, c->p.i[2] = i2, c->p.i[3] = i3;
        } else if (strcmp(tok, "shape") == 0) {
            if (fscanf(f, "%d", &c->p.nshape) != 1 || c->p.nshape > 2 * TC_MAX_DIMS) return -1;
            for (int k = 0; k < c->p.nshape; k++) {
                long long v;
                if (fscanf(f, "%lld", &v) != 1) return -1;
                c->p.shape[k] = v;
            }
        } else if (strcmp(tok, "in") == 0) {
            if (c->nin >= 12 || !read_tensor(f, &c->in[c->nin++], 1)) return -1;
        } else if (strcmp(tok, "outshape") == 0) {
            if (!read_tensor(f, &c->outshape, 0)) return -1;
        } else if (strcmp(tok, "out") == 0) {
            if (c->nout >= 2 || !read_tensor(f, &c->out[c->nout++], 1)) return -1;
        } else if (strcmp(tok, "end") == 0) {
            return 1;
        } else {
            return -1;
        }
    }
    return started ? -1 : 0;
}

static tc_tensor *make_tensor(const gtensor *g)
{
    return ct_from((tc_dtype)g->dtype, g->ndim, g->size, g->values);
}

static double tolerance(int dtype, double expected)
{
    double rel = dtype == TC_F32 ? 2e-5 : dtype == TC_F64 ? 1e-10 : tc_is_half(dtype) ? 8e-3 : 0;
    return rel * (fabs(expected) > 1 ? fabs(expected) : 1);
}

static int compare(const char *op, int which, const tc_tensor *got, const gtensor *want)
{
    if (!got) {
        printf("  %s: result %d missing\n", op, which);
        return 0;
    }
    if (got->dtype != want->dtype || got->ndim != want->ndim ||
        memcmp(got->size, want->size, sizeof(int64_t) * (size_t)want->ndim) != 0) {
        char b1[TC_SHAPE_BUF], b2[TC_SHAPE_BUF];
        printf("  %s: result %d is %s %s, expected %s %s\n", op, which, tc_dtype_name((tc_dtype)got->dtype),
               tc_shape_str(got, b1, sizeof b1), tc_dtype_name((tc_dtype)want->dtype),
               tc_sizes_str(want->ndim, want->size, b2, sizeof b2));
        return 0;
    }
    for (int64_t i = 0; i < want->n; i++) {
        double g = ct_at(got, i), w = want->values[i];
        if (isnan(w) && isnan(g)) continue;
        if (!(fabs(g - w) <= tolerance(want->dtype, w))) {
            printf("  %s: result %d element %lld = %.10g, expected %.10g\n", op, which, (long long)i, g, w);
            return 0;
        }
    }
    return 1;
}

static int cases_per_op[TC_OP_COUNT];

/* The same call traced into a graph (inputs declared as graph inputs), compiled with every
 * pass and run: the compiled op must give the golden values too. */
static tc_status run_compiled(int op, tc_tensor **ins, int nin, const tc_params *p, tc_tensor **out, int nout)
{
    tc_graph *g = NULL;
    const tc_tensor *args[12];
    int nargs = 0;
    TRY(tc_trace_begin(&g));
    tc_status s = TC_OK;
    for (int i = 0; i < nin && s == TC_OK; i++)
        if (ins[i]) s = tc_trace_input(g, ins[i]), args[nargs++] = ins[i];
    tc_tensor *traced[2] = {out[0], out[1]}; /* a given result moves here: out[] gets the graph's */
    out[0] = out[1] = NULL;
    if (s == TC_OK) s = tc_op_run((tc_op)op, (const tc_tensor *const *)ins, nin, p, traced, nout);
    int made = 0; /* max/min over all elements give no index result */
    for (int o = 0; o < nout && s == TC_OK && traced[o]; o++) s = tc_trace_output(g, traced[o]), made++;
    tc_status e = tc_trace_end(g);
    if (s == TC_OK) s = e;
    if (s == TC_OK) s = tc_graph_compile(g, TC_PASS_ALL);
    tc_tensor *res[2] = {NULL, NULL};
    if (s == TC_OK) s = tc_graph_run(g, args, nargs, res, made);
    for (int o = 0; o < nout; o++) {
        tc_tensor_release(traced[o]);
        out[o] = res[o];
    }
    tc_graph_free(g);
    return s;
}

/* device: TC_CPU, or a CUDA device code: inputs and the given result live there, and the
 * results are brought back to the host to be compared. layout (layouts.h): how the inputs
 * and the given result lie in their storages; past LAYOUT_CONTIGUOUS the inputs' storages
 * must come back unchanged, gaps included, and the gaps around the given result too. */
static int run_case_on(gcase *c, bool compiled, int device, int layout)
{
    int op = tc_op_lookup(c->op);
    if (op < 0) {
        printf("  golden: unknown op '%s'\n", c->op);
        return 0;
    }
    if (!compiled) cases_per_op[op]++;
    const tc_opinfo *info = tc_op_info((tc_op)op);
    tc_tensor *ins[12] = {0};
    tc_tensor *out[2] = {0};
    int ok = 1;
    for (int i = 0; i < c->nin; i++) ins[i] = c->in[i].present ? make_tensor(&c->in[i]) : NULL;
    /* compiled, a given result stays a fresh tensor: the trace takes one written before
     * (staging writes it) for captured state, and the graph returns its own results */
    bool stage_result = layout != LAYOUT_CONTIGUOUS && !compiled;
    if (c->outshape.present && !stage_result &&
        tc_tensor_new_on(device, (tc_dtype)c->outshape.dtype, c->outshape.ndim, c->outshape.size, &out[0]) != TC_OK) {
        printf("  %s: cannot allocate the result: %s\n", c->op, tc_last_error());
        ok = 0;
    }
    if (c->outshape.present && stage_result) {
        tc_tensor *zeros = NULL;
        if (tc_tensor_new((tc_dtype)c->outshape.dtype, c->outshape.ndim, c->outshape.size, &zeros) == TC_OK) {
            memset(tc_tensor_data(zeros), 0, (size_t)tc_tensor_numel(zeros) * tc_dtype_size((tc_dtype)zeros->dtype));
            out[0] = layout_staged(zeros, device, layout);
        }
        ok &= out[0] != NULL;
        tc_tensor_release(zeros);
    }
    const tc_tensor *given = out[0];
    unsigned char *before[12] = {0};
    int64_t nbytes[12] = {0};
    for (int i = 0; i < c->nin && (device != TC_CPU || layout != LAYOUT_CONTIGUOUS); i++) {
        tc_tensor *moved = ins[i] ? layout_staged(ins[i], device, layout) : NULL;
        if (ins[i] && !moved) {
            printf("  %s: cannot stage input %d: %s\n", c->op, i + 1, tc_last_error());
            ok = 0;
        }
        if (moved && layout != LAYOUT_CONTIGUOUS) before[i] = layout_snapshot(moved, &nbytes[i]);
        tc_tensor_release(ins[i]);
        ins[i] = moved;
    }
    tc_status s = compiled ? run_compiled(op, ins, c->nin, &c->p, out, info->nout)
                           : tc_op_run((tc_op)op, (const tc_tensor *const *)ins, c->nin, &c->p, out, info->nout);
    if (s != TC_OK) {
        printf("  %s%s: failed: %s\n", c->op, compiled ? " (compiled)" : "", tc_last_error());
        ok = 0;
    } else {
        for (int o = 0; o < c->nout; o++) {
            tc_tensor *host = NULL;
            if (out[o] && device != TC_CPU && out[o]->device != device) {
                printf("  %s: result %d is not on the device\n", c->op, o + 1);
                ok = 0;
            }
            if (out[o] && tc_tensor_to(out[o], TC_CPU, -1, &host) != TC_OK) {
                printf("  %s: cannot bring result %d back: %s\n", c->op, o + 1, tc_last_error());
                ok = 0;
            }
            ok &= compare(c->op, o + 1, host, &c->out[o]);
            tc_tensor_release(host);
        }
        if (given && !compiled && out[0] != given) {
            printf("  %s (%s): the result is not the tensor given for it\n", c->op, layout_name(layout));
            ok = 0;
        }
        if (given && stage_result) ok &= layout_gaps_intact(given, c->op);
    }
    for (int i = 0; i < c->nin; i++) {
        int64_t n = 0;
        unsigned char *after = before[i] ? layout_snapshot(ins[i], &n) : NULL;
        if (before[i] && (!after || n != nbytes[i] || memcmp(before[i], after, (size_t)n) != 0)) {
            printf("  %s (%s): input %d's storage changed\n", c->op, layout_name(layout), i + 1);
            ok = 0;
        }
        free(before[i]);
        free(after);
    }
    if (!ok && layout != LAYOUT_CONTIGUOUS) printf("  %s: failed with its tensors %s\n", c->op, layout_name(layout));
    for (int i = 0; i < c->nin; i++) tc_tensor_release(ins[i]);
    tc_tensor_release(out[0]);
    tc_tensor_release(out[1]);
    return ok;
}

static int run_case(gcase *c, bool compiled) { return run_case_on(c, compiled, TC_CPU, LAYOUT_CONTIGUOUS); }

static FILE *open_golden(void)
{
    char path[1024];
    const char *home = getenv("TOCHA_HOME");
    snprintf(path, sizeof path, "%s/tests/golden/ops.golden", home ? home : ".");
    return fopen(path, "r");
}

TEST(conformance_golden_and_coverage)
{
    FILE *f = open_golden();
    CHECK(f != NULL);
    if (!f) return;
    memset(cases_per_op, 0, sizeof cases_per_op);
    int total = 0, bad = 0, r;
    gcase c;
    while ((r = read_case(f, &c)) == 1) {
        total++;
        if (!run_case(&c, false)) bad++;
        free_case(&c);
    }
    fclose(f);
    CHECK(r == 0); /* no format error */
    CHECK(total > 300);
    CHECK(bad == 0);
    if (bad) printf("  %d of %d golden cases failed\n", bad, total);
    for (int op = 0; op < TC_OP_COUNT; op++) {
        const tc_opinfo *info = tc_op_info((tc_op)op);
        if (info->kind != TC_KIND_VIEW && !tc_cpu_backend.kernels[op]) {
            printf("  op %s has no CPU kernel\n", info->name);
            CHECK(!"every op has a CPU kernel");
        }
        if (info->kind != TC_KIND_RANDOM && cases_per_op[op] == 0) {
            printf("  op %s has no golden case in tests/golden/ops.golden\n", info->name);
            CHECK(!"every op has golden values");
        }
    }
}

/* Every golden case again through the graph compiler: traced, all passes, run. */
TEST(conformance_golden_compiled)
{
    FILE *f = open_golden();
    CHECK(f != NULL);
    if (!f) return;
    int total = 0, bad = 0, r;
    gcase c;
    while ((r = read_case(f, &c)) == 1) {
        total++;
        if (!run_case(&c, true)) bad++;
        free_case(&c);
    }
    fclose(f);
    CHECK(r == 0);
    CHECK(total > 300);
    CHECK(bad == 0);
    if (bad) printf("  %d of %d golden cases failed when compiled\n", bad, total);
}

/* Every golden case on device (TC_CPU: the host) with its tensors staged in layout, run
 * eagerly or compiled (test_layouts.c, test_cuda_device.c): the count run and the count
 * failed. */
int conformance_golden_layout_on(int device, int layout, bool compiled, int *total)
{
    FILE *f = open_golden();
    *total = 0;
    if (!f) return -1;
    int bad = 0, r;
    gcase c;
    while ((r = read_case(f, &c)) == 1) {
        ++*total;
        if (layout != LAYOUT_CONTIGUOUS && layout_bound_op(c.op)) {
            --*total;
        } else if (!run_case_on(&c, compiled, device, layout)) {
            bad++;
        }
        free_case(&c);
    }
    fclose(f);
    return r == 0 ? bad : -1;
}

int conformance_golden_on(int device, int *total) { return conformance_golden_layout_on(device, LAYOUT_CONTIGUOUS, false, total); }

int conformance_golden_each(void (*visit)(void *ctx, const golden_call *call), void *ctx)
{
    FILE *f = open_golden();
    if (!f) return -1;
    int n = 0, r;
    gcase c;
    while ((r = read_case(f, &c)) == 1) {
        int op = tc_op_lookup(c.op);
        tc_tensor *ins[12] = {0}, *given = NULL;
        for (int i = 0; i < c.nin; i++) ins[i] = c.in[i].present ? make_tensor(&c.in[i]) : NULL;
        if (c.outshape.present &&
            tc_tensor_new((tc_dtype)c.outshape.dtype, c.outshape.ndim, c.outshape.size, &given) == TC_OK)
            memset(tc_tensor_data(given), 0, (size_t)tc_tensor_numel(given) * tc_dtype_size((tc_dtype)given->dtype));
        if (op >= 0) {
            golden_call call = {.op = op, .p = &c.p, .in = ins, .nin = c.nin, .nout = tc_op_info((tc_op)op)->nout, .given = given};
            visit(ctx, &call);
            n++;
        }
        for (int i = 0; i < c.nin; i++) tc_tensor_release(ins[i]);
        tc_tensor_release(given);
        free_case(&c);
    }
    fclose(f);
    return r == 0 ? n : -1;
}

/* ---- elementwise ops: every allowed dtype, every memory layout -------------------------- */

static bool dtype_allowed(const tc_opinfo *info, int dt)
{
    if (tc_dtype_is_float((tc_dtype)dt)) return info->flags & TC_OPF_FLT;
    if (dt == TC_BOOL) return info->flags & TC_OPF_BOOL;
    return info->flags & TC_OPF_INT;
}

/* Values valid for every formula: floats in [0.2, 0.9], integers in [1, 5], bools 0/1. */
static double sample(int dt, int arg, int64_t i)
{
    if (dt == TC_BOOL) return (double)((i + arg) % 2);
    if (tc_dtype_is_float((tc_dtype)dt)) return 0.2 + 0.7 * (double)((i * 7 + arg * 3) % 11) / 10.0;
    return (double)(1 + (i * 3 + arg) % 5);
}

static tc_tensor *filled(int dt, int ndim, const int64_t *sizes, int arg)
{
    int64_t n = tc_numel_of(ndim, sizes);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = sample(dt, arg, i);
    tc_tensor *t = ct_from((tc_dtype)dt, ndim, sizes, v);
    free(v);
    return t;
}

/* Runs op on the given inputs (arity 0: fills a (3,4) result); returns a new tensor or NULL. */
static tc_tensor *run_ew(int op, int dt, tc_tensor **ins, int nin, const tc_params *p)
{
    tc_tensor *out = NULL;
    if (nin == 0 && tc_tensor_new((tc_dtype)dt, 2, SZ(3, 4), &out)) return NULL;
    if (tc_op_run((tc_op)op, (const tc_tensor *const *)ins, nin, p, &out, 1)) {
        printf("  %s (%s): %s\n", tc_op_info((tc_op)op)->name, tc_dtype_name((tc_dtype)dt), tc_last_error());
        tc_tensor_release(out);
        return NULL;
    }
    return out;
}

static bool same_values(const tc_tensor *a, const tc_tensor *b, double rel)
{
    if (!a || !b || !tc_same_shape(a, b)) return false;
    int64_t n = tc_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = ct_at(a, i), y = ct_at(b, i);
        if (isnan(x) && isnan(y)) continue;
        if (!(fabs(x - y) <= rel * (fabs(y) > 1 ? fabs(y) : 1))) return false;
    }
    return true;
}

static void release_all(tc_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) tc_tensor_release(ts[i]);
}

/* One op in one dtype: contiguous reference, then transposed, broadcast, resized result
 * and in-place runs must match it exactly; returns false on mismatch. */
static bool ew_layouts(int op, int dt, tc_tensor **ref_out)
{
    const tc_opinfo *info = tc_op_info((tc_op)op);
    int nin = info->nin;
    tc_params p = {.s = {0.5, 0.8}};
    if (op == TC_OP_CLAMP) p.s[0] = 0.3, p.s[1] = 0.7;
    if (!tc_dtype_is_float((tc_dtype)dt) && op == TC_OP_CLAMP) p.s[0] = 2, p.s[1] = 4;
    tc_tensor *ins[3] = {0}, *tr[3] = {0}, *bc[3] = {0}, *tmp = NULL;
    bool ok = true;
    for (int a = 0; a < nin; a++) {
        ins[a] = filled(dt, 2, SZ(3, 4), a);
        /* the same logical values, stored transposed */
        tc_tensor *base = NULL;
        tc_params tp = {.i = {0, 1}};
        tmp = NULL;
        tc_op_run(TC_OP_TRANSPOSE, (const tc_tensor *const *)&ins[a], 1, &tp, &tmp, 1);
        tc_tensor *contig_t = NULL;
        tc_params cp = {.i = {-1}};
        tc_op_run(TC_OP_COPY, (const tc_tensor *const *)&tmp, 1, &cp, &contig_t, 1); /* (4,3) contiguous */
        tc_tensor_release(tmp);
        tmp = NULL;
        tc_op_run(TC_OP_TRANSPOSE, (const tc_tensor *const *)&contig_t, 1, &tp, &base, 1);
        tc_tensor_release(contig_t);
        tr[a] = base; /* (3,4) with strides (1,3) */
    }
    tc_tensor *ref = run_ew(op, dt, ins, nin, &p);
    tc_tensor *strided = run_ew(op, dt, tr, nin, &p);
    if (!ref || !same_values(strided, ref, 0)) ok = false, printf("  %s %s: strided differs\n", info->name, tc_dtype_name((tc_dtype)dt));
    if (nin >= 2) { /* last input as a broadcast row (4) */
        for (int a = 0; a < nin; a++) {
            bc[a] = ins[a];
            tc_tensor_retain(bc[a]);
        }
        tc_tensor_release(bc[nin - 1]);
        bc[nin - 1] = filled(dt, 1, SZ(4), nin - 1);
        tc_tensor *row_full = NULL;
        tc_params ep = {.nshape = 2, .shape = {3, 4}};
        tc_op_run(TC_OP_EXPAND, (const tc_tensor *const *)&bc[nin - 1], 1, &ep, &tmp, 1);
        tc_params cp = {.i = {-1}};
        tc_op_run(TC_OP_COPY, (const tc_tensor *const *)&tmp, 1, &cp, &row_full, 1);
        tc_tensor_release(tmp);
        tc_tensor *full_ins[3] = {ins[0], ins[1], ins[2]};
        full_ins[nin - 1] = row_full;
        tc_tensor *r1 = run_ew(op, dt, bc, nin, &p), *r2 = run_ew(op, dt, full_ins, nin, &p);
        if (!r1 || !same_values(r1, r2, 0)) ok = false, printf("  %s %s: broadcast differs\n", info->name, tc_dtype_name((tc_dtype)dt));
        tc_tensor_release(r1);
        tc_tensor_release(r2);
        tc_tensor_release(row_full);
        release_all(bc, nin);
    }
    if (nin >= 1 && ref) { /* a given result of the wrong size is resized; in place */
        tc_tensor *res = NULL;
        tc_tensor_new((tc_dtype)ref->dtype, 1, SZ(5), &res);
        if (tc_op_run((tc_op)op, (const tc_tensor *const *)ins, nin, &p, &res, 1) || !same_values(res, ref, 0))
            ok = false, printf("  %s %s: result argument differs\n", info->name, tc_dtype_name((tc_dtype)dt));
        tc_tensor_release(res);
        if (!(info->flags & TC_OPF_CMP)) {
            tc_tensor *inplace = ins[0];
            if (tc_op_run((tc_op)op, (const tc_tensor *const *)ins, nin, &p, &inplace, 1) ||
                !same_values(ins[0], ref, 0))
                ok = false, printf("  %s %s: in-place differs\n", info->name, tc_dtype_name((tc_dtype)dt));
        }
    }
    tc_tensor_release(strided);
    release_all(ins, nin);
    release_all(tr, nin);
    *ref_out = ref;
    return ok && ref;
}

TEST(conformance_elementwise_layouts_and_dtypes)
{
    static const int dtypes[] = {TC_F32, TC_F64, TC_U8, TC_I8, TC_I16, TC_I32, TC_I64, TC_BOOL};
    for (int op = 0; op < TC_OP_COUNT; op++) {
        const tc_opinfo *info = tc_op_info((tc_op)op);
        if (info->kind != TC_KIND_EW) continue;
        tc_tensor *f32 = NULL, *f64 = NULL;
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
            if (!dtype_allowed(info, dtypes[d])) continue;
            tc_tensor *ref = NULL;
            CHECK(ew_layouts(op, dtypes[d], &ref));
            if (dtypes[d] == TC_F32) f32 = ref;
            else if (dtypes[d] == TC_F64) f64 = ref;
            else tc_tensor_release(ref);
        }
        if (f32 && f64 && !same_values(f32, f64, 1e-5)) {
            printf("  %s: float32 and float64 results differ\n", info->name);
            CHECK(!"f32 matches f64");
        }
        /* half types compute in f32 and round at the edges */
        if ((info->flags & TC_OPF_FLT) && f32) {
            for (int h = TC_F16; h <= TC_BF16; h++) {
                tc_tensor *ins[3] = {0}, *out = NULL;
                tc_params p = {.s = {0.5, 0.8}};
                if (op == TC_OP_CLAMP) p.s[0] = 0.3, p.s[1] = 0.7;
                for (int a = 0; a < info->nin; a++) ins[a] = filled(h, 2, SZ(3, 4), a);
                out = run_ew(op, h, ins, info->nin, &p);
                if (!out || !same_values(out, f32, h == TC_F16 ? 4e-3 : 3e-2)) {
                    printf("  %s: %s result differs from float32\n", info->name, tc_dtype_name((tc_dtype)h));
                    CHECK(!"half matches f32");
                }
                tc_tensor_release(out);
                release_all(ins, info->nin);
            }
        }
        tc_tensor_release(f32);
        tc_tensor_release(f64);
    }
}

/* ---- bad input for every op ----------------------------------------------------------------- */

TEST(conformance_bad_input_every_op)
{
    tc_tensor *f = filled(TC_F32, 2, SZ(2, 2), 0), *i32 = filled(TC_I32, 2, SZ(2, 2), 0);
    for (int op = 0; op < TC_OP_COUNT; op++) {
        const tc_opinfo *info = tc_op_info((tc_op)op);
        char name[80];
        snprintf(name, sizeof name, "%s:", info->name);
        const tc_tensor *ins[13] = {f, f, f, f, f, f, f, f, f, f, f, f, f};
        tc_tensor *out[2] = {0};
        if (info->nin >= 0) /* one input too many */
            CHECK_ERR(tc_op_run((tc_op)op, ins, info->nin + 1, NULL, out, info->nout), TC_ERR_ARG, name);
        CHECK_ERR(tc_op_run((tc_op)op, ins, info->nin < 0 ? 2 : info->nin, NULL, out, info->nout + 1), TC_ERR_ARG,
                  name);
        CHECK(out[0] == NULL && out[1] == NULL); /* a failed call returns nothing */
        /* a dtype the op refuses (for ops whose first input decides) */
        if (info->nin >= 1 && info->kind != TC_KIND_SELECT && info->kind != TC_KIND_RANDOM) {
            const tc_tensor *wrong = !(info->flags & TC_OPF_FLT) ? f : !(info->flags & TC_OPF_INT) ? i32 : NULL;
            if (wrong) {
                const tc_tensor *wins[9] = {wrong, wrong, wrong, wrong, wrong, wrong, wrong, wrong, wrong};
                CHECK_ERR(tc_op_run((tc_op)op, wins, info->nin, NULL, out, info->nout), TC_ERR_DTYPE, name);
            }
        }
    }
    CHECK_ERR(tc_op_run((tc_op)TC_OP_COUNT, NULL, 0, NULL, (tc_tensor *[2]){0}, 1), TC_ERR_ARG, "unknown op");
    tc_tensor_release(f);
    tc_tensor_release(i32);
}

/* ---- every elementwise op in every dtype on a device (test_cuda_device.c) ------------------ */

/* How far a device result may be from the CPU's: integers and bools exactly; floats a few
 * units in the last place (transcendentals are CUDA's on one side, the CPU's polynomials or
 * libm on the other); halves one unit. */
static double device_tolerance(int dt)
{
    switch (dt) {
    case TC_F64: return 1e-14;
    case TC_F32: return 2e-6;
    case TC_F16: return 1e-3;
    case TC_BF16: return 8e-3;
    default: return 0;
    }
}

/* t on device (a view op's result stays a view there), or NULL with the reason printed. */
static tc_tensor *moved(const tc_tensor *t, int device)
{
    tc_tensor *r = NULL;
    if (tc_tensor_to(t, device, -1, &r)) printf("  to device: %s\n", tc_last_error());
    return r;
}

/* op on ins (on device) against want (the CPU's result); prints and counts a mismatch. */
static int device_case(int op, int dt, tc_tensor **ins, int nin, const tc_params *p, const tc_tensor *want,
                       const char *layout)
{
    tc_tensor *out = run_ew(op, dt, ins, nin, p), *back = out ? moved(out, TC_CPU) : NULL;
    int bad = !back || !same_values(back, want, device_tolerance(dt));
    if (bad)
        printf("  %s %s (%s): the device's result differs from the CPU's\n", tc_op_info((tc_op)op)->name,
               tc_dtype_name((tc_dtype)dt), layout);
    tc_tensor_release(out);
    tc_tensor_release(back);
    return bad;
}

/* Every EW op of arity >= 1, in every dtype it takes, on device against the CPU: contiguous
 * inputs, every input stored transposed (strided), and the last input a broadcast row.
 * Returns the number of mismatches; *total counts the cases. */
int conformance_elementwise_on(int device, int *total)
{
    static const int dtypes[] = {TC_F32, TC_F64, TC_F16, TC_BF16, TC_U8, TC_I8, TC_I16, TC_I32, TC_I64, TC_BOOL};
    int bad = 0;
    *total = 0;
    for (int op = 0; op < TC_OP_COUNT; op++) {
        const tc_opinfo *info = tc_op_info((tc_op)op);
        int nin = info->nin;
        if (info->kind != TC_KIND_EW || nin < 1) continue;
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
            int dt = dtypes[d];
            if (!dtype_allowed(info, dt)) continue;
            tc_params p = {.s = {0.5, 0.8}};
            if (op == TC_OP_CLAMP) p.s[0] = 0.3, p.s[1] = 0.7;
            if (!tc_dtype_is_float((tc_dtype)dt) && op == TC_OP_CLAMP) p.s[0] = 2, p.s[1] = 4;
            tc_tensor *ins[3] = {0}, *dev[3] = {0}, *tr[3] = {0}, *row = NULL, *row_dev = NULL, *ref = NULL;
            tc_params tp = {.i = {0, 1}};
            for (int a = 0; a < nin; a++) {
                ins[a] = filled(dt, 2, SZ(3, 4), a);
                dev[a] = moved(ins[a], device);
                /* the same values stored transposed on the device: (4,3) contiguous, viewed (3,4) */
                tc_tensor *t = NULL, *tcont = NULL, *tdev = NULL;
                tc_op_run(TC_OP_TRANSPOSE, (const tc_tensor *const *)&ins[a], 1, &tp, &t, 1);
                tc_op_run(TC_OP_COPY, (const tc_tensor *const *)&t, 1, P(.i = {-1}), &tcont, 1);
                tdev = tcont ? moved(tcont, device) : NULL;
                if (tdev) tc_op_run(TC_OP_TRANSPOSE, (const tc_tensor *const *)&tdev, 1, &tp, &tr[a], 1);
                tc_tensor_release(t);
                tc_tensor_release(tcont);
                tc_tensor_release(tdev);
            }
            ref = run_ew(op, dt, ins, nin, &p);
            if (!ref) {
                bad++;
            } else {
                *total += 3;
                bad += device_case(op, dt, dev, nin, &p, ref, "contiguous");
                bad += device_case(op, dt, tr, nin, &p, ref, "transposed");
                /* the last input as a row (4) broadcast over the 3 rows */
                row = filled(dt, 1, SZ(4), nin - 1);
                row_dev = moved(row, device);
                tc_tensor *cpu_in[3] = {ins[0], ins[1], ins[2]}, *dev_in[3] = {dev[0], dev[1], dev[2]};
                cpu_in[nin - 1] = row, dev_in[nin - 1] = row_dev;
                tc_tensor *ref_b = run_ew(op, dt, cpu_in, nin, &p);
                bad += ref_b ? device_case(op, dt, dev_in, nin, &p, ref_b, "broadcast") : 1;
                tc_tensor_release(ref_b);
            }
            tc_tensor_release(ref);
            tc_tensor_release(row);
            tc_tensor_release(row_dev);
            release_all(ins, nin);
            release_all(dev, nin);
            release_all(tr, nin);
        }
    }
    return bad;
}

/* Every reduction in every dtype it takes, over all elements and each dim (keepdim 0 and
 * 1), from contiguous and transposed inputs, on device against the CPU (values and, for
 * max/min, the indices). Calls the CPU refuses (all/any of wide integers) are skipped.
 * Returns the number of mismatches; *total counts the cases. */
int conformance_reduce_on(int device, int *total)
{
    static const int dtypes[] = {TC_F32, TC_F64, TC_F16, TC_BF16, TC_U8, TC_I8, TC_I16, TC_I32, TC_I64, TC_BOOL};
    int bad = 0;
    *total = 0;
    for (int op = 0; op < TC_OP_COUNT; op++) {
        const tc_opinfo *info = tc_op_info((tc_op)op);
        if (info->kind != TC_KIND_REDUCE) continue;
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
            int dt = dtypes[d];
            if (!dtype_allowed(info, dt)) continue;
            tc_tensor *x = filled(dt, 2, SZ(3, 4), 0), *xd = moved(x, device), *t = NULL, *tc = NULL, *td = NULL,
                      *xt = NULL;
            tc_params tp = {.i = {0, 1}};
            tc_op_run(TC_OP_TRANSPOSE, (const tc_tensor *const *)&x, 1, &tp, &t, 1);
            tc_op_run(TC_OP_COPY, (const tc_tensor *const *)&t, 1, P(.i = {-1}), &tc, 1);
            td = tc ? moved(tc, device) : NULL;
            if (td) tc_op_run(TC_OP_TRANSPOSE, (const tc_tensor *const *)&td, 1, &tp, &xt, 1);
            for (int dim = -1; dim < 2; dim++)
                for (int keep = 0; keep < 2; keep++) {
                    tc_params p = {.i = {dim, keep, 1}, .s = {2}};
                    int nout = info->nout == 2 && dim >= 0 ? 2 : 1;
                    tc_tensor *want[2] = {0}, *got[2] = {0};
                    if (tc_op_run((tc_op)op, (const tc_tensor *const *)&x, 1, &p, want, nout)) continue;
                    for (int v = 0; v < 2; v++) {
                        const tc_tensor *in = v ? xt : xd;
                        (*total)++;
                        int ok = in && !tc_op_run((tc_op)op, &in, 1, &p, got, nout);
                        for (int o = 0; ok && o < nout; o++) {
                            tc_tensor *back = moved(got[o], TC_CPU);
                            ok = back && same_values(back, want[o], o ? 0 : device_tolerance(want[o]->dtype));
                            tc_tensor_release(back);
                        }
                        if (!ok) {
                            bad++;
                            printf("  %s %s dim %d keepdim %d (%s): the device's result differs from the CPU's%s%s\n",
                                   info->name, tc_dtype_name((tc_dtype)dt), dim, keep, v ? "transposed" : "contiguous",
                                   got[0] ? "" : ": ", got[0] ? "" : tc_last_error());
                        }
                        release_all(got, 2);
                        got[0] = got[1] = NULL;
                    }
                    release_all(want, 2);
                }
            tc_tensor *all[6] = {x, xd, t, tc, td, xt};
            release_all(all, 6);
        }
    }
    return bad;
}
