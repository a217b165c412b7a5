/* test_graph_memplan.c -- the memory plan (core/graph/memplan.c) and the in-place and
 * layout choices (core/graph/inplace.c) on small hand-built graphs: buffer reuse, peak
 * bytes equal to the largest live set, views extending their root's life, fused-group
 * internals taking no memory, in-place chains, copies made views -- each also run and
 * compared with the same ops run eagerly. */
#include "ctest.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include <stdlib.h>

#define SUM_ALL P(.i = {-1, 0})

static int32_t op1(tc_graph *g, tc_op op, int32_t a, const tc_params *p)
{
    int32_t out[2] = {-1, -1};
    if (tc_graph_add_op(g, op, &a, 1, p, out)) printf("    add %s: %s\n", tc_op_info(op)->name, tc_last_error());
    return out[0];
}

static int32_t op2(tc_graph *g, tc_op op, int32_t a, int32_t b, const tc_params *p)
{
    int32_t in[2] = {a, b}, out[2] = {-1, -1};
    if (tc_graph_add_op(g, op, in, 2, p, out)) printf("    add %s: %s\n", tc_op_info(op)->name, tc_last_error());
    return out[0];
}

static tc_tensor *eager(tc_op op, const tc_tensor *a, const tc_tensor *b, const tc_params *p)
{
    tc_tensor *out = NULL;
    if (ct_run1(op, a, b, NULL, p, &out)) printf("    eager: %s\n", tc_last_error());
    return ct_keep(out);
}

static int same_tensor(const tc_tensor *a, const tc_tensor *b)
{
    if (!a || !b || tc_tensor_numel(a) != tc_tensor_numel(b) || a->dtype != b->dtype) return 0;
    for (int64_t i = 0; i < tc_tensor_numel(a); i++)
        if (ct_at(a, i) != ct_at(b, i)) {
            printf("    element %lld: %.9g vs %.9g\n", (long long)i, ct_at(a, i), ct_at(b, i));
            return 0;
        }
    return 1;
}

static tc_tensor *input_8x32(double phase)
{
    tc_tensor *t = ct_keep(ct_arange(TC_F32, 2, SZ(8, 32)));
    for (int64_t i = 0; i < 256; i++) ((float *)t->storage->data)[i] = (float)(sin(0.21 * (double)i + phase) * 0.8);
    return t;
}

/* x -> a = neg -> b = exp -> c = tanh -> d = sigmoid (output), all (8,32) float32 */
static tc_graph *chain(int32_t v[5])
{
    tc_graph *g = NULL;
    if (tc_graph_new(&g)) return NULL;
    if (tc_graph_add_input(g, TC_F32, 2, SZ(8, 32), &v[0])) return g;
    v[1] = op1(g, TC_OP_NEG, v[0], NULL);
    v[2] = op1(g, TC_OP_EXP, v[1], NULL);
    v[3] = op1(g, TC_OP_TANH, v[2], NULL);
    v[4] = op1(g, TC_OP_SIGMOID, v[3], NULL);
    tc_graph_mark_output(g, v[4]);
    return g;
}

static int chain_matches_eager(tc_graph *g)
{
    tc_tensor *x = input_8x32(0.3), *out[1] = {NULL};
    if (tc_graph_run(g, (const tc_tensor *[]){x}, 1, out, 1)) {
        printf("    run: %s\n", tc_last_error());
        return 0;
    }
    ct_keep(out[0]);
    tc_tensor *e = eager(TC_OP_SIGMOID, eager(TC_OP_TANH, eager(TC_OP_EXP, eager(TC_OP_NEG, x, NULL, NULL), NULL, NULL), NULL, NULL),
                         NULL, NULL);
    return same_tensor(out[0], e);
}

TEST(graph_memplan_chain_reuses_buffers)
{
    int32_t v[5];
    tc_graph *g = chain(v);
    CHECK_OK(tc_graph_compile(g, 0)); /* no passes: the plan alone */
    CHECK(g->vals[v[0]].offset == -1 && g->vals[v[4]].offset == -1); /* input; output (the caller's) */
    CHECK(g->vals[v[1]].offset == g->vals[v[3]].offset);           /* a is dead when c is made */
    CHECK(g->vals[v[2]].offset != g->vals[v[1]].offset);
    CHECK(g->vals[v[1]].offset % 64 == 0 && g->vals[v[2]].offset % 64 == 0);
    CHECK(tc_graph_planned_bytes(g) == 2048 && tc_graph_unplanned_bytes(g) == 3072);
    char rep[512];
    CHECK_OK(tc_graph_report(g, rep, sizeof rep, NULL));
    CHECK(strstr(rep, "memplan") && strstr(rep, "2048 bytes planned (3072 without reuse)"));
    CHECK(chain_matches_eager(g));
    CHECK(chain_matches_eager(g));
    tc_graph_free(g);
    ct_drop();
}

/* a = neg(x); s = sum(a, 1, keepdim); b = exp(x); c = a * b; d = c + s (output).
 * Live at c: a, s, b and c = 1024 + 64 + 1024 + 1024 bytes: the peak. */
TEST(graph_memplan_peak_is_the_largest_live_set)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, SZ(8, 32), &x));
    int32_t a = op1(g, TC_OP_NEG, x, NULL);
    int32_t s = op1(g, TC_OP_SUM, a, P(.i = {1, 1}));
    int32_t b = op1(g, TC_OP_EXP, x, NULL);
    int32_t c = op2(g, TC_OP_MUL, a, b, NULL);
    int32_t d = op2(g, TC_OP_ADD, c, s, P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, d));
    CHECK_OK(tc_graph_compile(g, 0));
    CHECK(tc_graph_planned_bytes(g) == 1024 + 64 + 1024 + 1024);
    CHECK(tc_graph_unplanned_bytes(g) == 1024 + 64 + 1024 + 1024);
    /* no two values live at once overlap */
    int32_t ids[4] = {a, s, b, c};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) {
            int64_t oi = g->vals[ids[i]].offset, oj = g->vals[ids[j]].offset;
            int64_t ni = tc_graph_val_bytes(g, ids[i]), nj = tc_graph_val_bytes(g, ids[j]);
            CHECK(oi + ni <= oj || oj + nj <= oi);
        }
    tc_tensor *xt = input_8x32(1.1), *out[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){xt}, 1, out, 1));
    ct_keep(out[0]);
    tc_tensor *ea = eager(TC_OP_NEG, xt, NULL, NULL);
    tc_tensor *e = eager(TC_OP_ADD, eager(TC_OP_MUL, ea, eager(TC_OP_EXP, xt, NULL, NULL), NULL),
                         eager(TC_OP_SUM, ea, NULL, P(.i = {1, 1})), P(.s = {1}));
    CHECK(same_tensor(out[0], e));
    tc_graph_free(g);
    ct_drop();
}

/* Buffers of mixed sizes dying out of order: the in-order free list leaves a hole too small
 * for the next big buffer (6 KB planned for 5 KB live); the biggest-first placement that
 * memplan.c also tries packs them into the largest live set. */
TEST(graph_memplan_biggest_first_packs_fragmented_lives)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, SZ(8, 32), &x));
    int32_t a = op1(g, TC_OP_NEG, x, NULL);              /* 1 KB, to the end */
    int32_t b = op2(g, TC_OP_CAT, x, x, P(.i = {1}));    /* 2 KB, dies at s */
    int32_t xx = op1(g, TC_OP_EXP, x, NULL);             /* 1 KB, to the end */
    int32_t s = op1(g, TC_OP_SUM, b, P(.i = {1, 1}));    /* (8,1) */
    int32_t c = op1(g, TC_OP_SIGMOID, x, NULL);          /* 1 KB: takes half of b's hole */
    int32_t d = op2(g, TC_OP_CAT, a, c, P(.i = {1}));    /* 2 KB: no hole fits */
    int32_t s1 = op1(g, TC_OP_SUM, d, SUM_ALL), s2 = op1(g, TC_OP_SUM, a, SUM_ALL);
    int32_t s3 = op1(g, TC_OP_SUM, xx, SUM_ALL), s4 = op1(g, TC_OP_SUM, c, SUM_ALL);
    int32_t s5 = op1(g, TC_OP_SUM, s, SUM_ALL);
    int32_t y = op2(g, TC_OP_ADD, op2(g, TC_OP_ADD, s1, s2, P(.s = {1})), op2(g, TC_OP_ADD, s3, s4, P(.s = {1})),
                    P(.s = {1}));
    y = op2(g, TC_OP_ADD, y, s5, P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, y));
    CHECK_OK(tc_graph_compile(g, 0));
    /* the largest live set, from the plan's own liveness; and no two values live at once overlap */
    tc_gplan_info an;
    CHECK_OK(tc_gplan_analyse(g, &an));
    int64_t peak = 0;
    for (int32_t p = 0; p < g->nnodes; p++) {
        int64_t live = 0;
        for (int32_t v = 0; v < g->nvals; v++) {
            if (an.bind[v] != TC_GB_ARENA) continue;
            int32_t start = an.pos[g->vals[v].producer];
            if (start <= p && p <= an.end[v]) live += (tc_graph_val_bytes(g, v) + 63) / 64 * 64;
        }
        if (live > peak) peak = live;
    }
    for (int32_t v = 0; v < g->nvals; v++)
        for (int32_t w = v + 1; w < g->nvals; w++) {
            if (an.bind[v] != TC_GB_ARENA || an.bind[w] != TC_GB_ARENA) continue;
            int32_t sv = an.pos[g->vals[v].producer], sw = an.pos[g->vals[w].producer];
            if (!(sv <= an.end[w] && sw <= an.end[v])) continue;
            int64_t ov = g->vals[v].offset, ow = g->vals[w].offset;
            CHECK(ov + tc_graph_val_bytes(g, v) <= ow || ow + tc_graph_val_bytes(g, w) <= ov);
        }
    tc_gplan_info_free(&an);
    CHECK(peak >= 5 * 1024 && tc_graph_planned_bytes(g) == peak);
    tc_tensor *xt = input_8x32(0.7), *out[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){xt}, 1, out, 1));
    ct_keep(out[0]);
    tc_tensor *ea = eager(TC_OP_NEG, xt, NULL, NULL), *ec = eager(TC_OP_SIGMOID, xt, NULL, NULL);
    tc_tensor *ed = eager(TC_OP_CAT, ea, ec, P(.i = {1}));
    tc_tensor *es = eager(TC_OP_SUM, eager(TC_OP_CAT, xt, xt, P(.i = {1})), NULL, P(.i = {1, 1}));
    tc_tensor *e = eager(TC_OP_ADD, eager(TC_OP_SUM, ed, NULL, SUM_ALL), eager(TC_OP_SUM, ea, NULL, SUM_ALL), P(.s = {1}));
    e = eager(TC_OP_ADD, e, eager(TC_OP_ADD, eager(TC_OP_SUM, eager(TC_OP_EXP, xt, NULL, NULL), NULL, SUM_ALL),
                                  eager(TC_OP_SUM, ec, NULL, SUM_ALL), P(.s = {1})), P(.s = {1}));
    e = eager(TC_OP_ADD, e, eager(TC_OP_SUM, es, NULL, SUM_ALL), P(.s = {1}));
    CHECK(same_tensor(out[0], e));
    tc_graph_free(g);
    ct_drop();
}

/* A cat along dim 0 gets its inputs placed inside its result (no copy, one buffer); along
 * dim 1 its slices are not contiguous runs, so it copies as before. */
TEST(graph_memplan_cat_built_in_place)
{
    for (int dim = 0; dim < 2; dim++) {
        tc_graph *g;
        CHECK_OK(tc_graph_new(&g));
        int32_t x;
        CHECK_OK(tc_graph_add_input(g, TC_F32, 2, SZ(8, 32), &x));
        int32_t a = op1(g, TC_OP_NEG, x, NULL), b = op1(g, TC_OP_EXP, x, NULL);
        int32_t c = op2(g, TC_OP_CAT, a, b, P(.i = {dim}));
        int32_t y = op2(g, TC_OP_ADD, op1(g, TC_OP_SUM, c, SUM_ALL), op1(g, TC_OP_SUM, a, SUM_ALL), P(.s = {1}));
        CHECK_OK(tc_graph_mark_output(g, y));
        CHECK_OK(tc_graph_compile(g, 0));
        int32_t cat = g->vals[c].producer;
        bool placed = (g->nodes[cat].flags & TC_GN_CAT_PLACED) != 0;
        CHECK(placed == (dim == 0));
        if (dim == 0) {
            CHECK(g->vals[a].offset == g->vals[c].offset && g->vals[b].offset == g->vals[c].offset + 1024);
            CHECK(tc_graph_planned_bytes(g) <= 2048 + 2 * 64); /* a and b are c's halves */
        } else {
            int64_t oa = g->vals[a].offset, oc = g->vals[c].offset;
            CHECK(oa + 1024 <= oc || oc + 2048 <= oa);
        }
        tc_tensor *xt = input_8x32(0.4 + dim), *out[1] = {NULL};
        CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){xt}, 1, out, 1));
        ct_keep(out[0]);
        tc_tensor *ea = eager(TC_OP_NEG, xt, NULL, NULL);
        tc_tensor *ec = eager(TC_OP_CAT, ea, eager(TC_OP_EXP, xt, NULL, NULL), P(.i = {dim}));
        tc_tensor *e = eager(TC_OP_ADD, eager(TC_OP_SUM, ec, NULL, SUM_ALL), eager(TC_OP_SUM, ea, NULL, SUM_ALL),
                             P(.s = {1}));
        CHECK(same_tensor(out[0], e));
        tc_graph_free(g);
    }
    ct_drop();
}

/* a view keeps its root's buffer alive until the view's last reader */
TEST(graph_memplan_views_extend_their_root)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, SZ(8, 32), &x));
    int32_t a = op1(g, TC_OP_NEG, x, NULL);
    int32_t t = op1(g, TC_OP_TRANSPOSE, a, P(.i = {0, 1}));
    int32_t b = op1(g, TC_OP_EXP, x, NULL);
    int32_t c = op1(g, TC_OP_TANH, b, NULL);
    int32_t d = op1(g, TC_OP_SQUARE, t, NULL); /* a is read here, through t */
    int32_t e = op2(g, TC_OP_ADD, c, op1(g, TC_OP_TRANSPOSE, d, P(.i = {0, 1})), P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, e));
    CHECK_OK(tc_graph_compile(g, 0));
    CHECK(g->vals[t].offset == -1);
    int64_t oa = g->vals[a].offset, ob = g->vals[b].offset, oc = g->vals[c].offset;
    CHECK(oa != ob && oa != oc && ob != oc); /* a, b, c all live when c is made */
    tc_tensor *xt = input_8x32(0.6), *out[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){xt}, 1, out, 1));
    ct_keep(out[0]);
    tc_tensor *ta = ct_keep(ct_transposed(eager(TC_OP_NEG, xt, NULL, NULL), 0, 1));
    tc_tensor *de = ct_keep(ct_transposed(eager(TC_OP_SQUARE, ta, NULL, NULL), 0, 1));
    CHECK(same_tensor(out[0], eager(TC_OP_ADD, eager(TC_OP_TANH, eager(TC_OP_EXP, xt, NULL, NULL), NULL, NULL), de,
                                    P(.s = {1}))));
    tc_graph_free(g);
    ct_drop();
}

TEST(graph_memplan_inplace_chain)
{
    int32_t v[5];
    tc_graph *g = chain(v);
    CHECK_OK(tc_graph_compile(g, TC_PASS_INPLACE));
    /* neg reads the caller's input: not in place; exp and tanh overwrite their input */
    CHECK(!(g->nodes[0].flags & TC_GN_INPLACE));
    CHECK((g->nodes[1].flags & TC_GN_INPLACE) && g->nodes[1].inplace == 0);
    CHECK((g->nodes[2].flags & TC_GN_INPLACE) && g->nodes[2].inplace == 0);
    CHECK(!(g->nodes[3].flags & TC_GN_INPLACE)); /* its result is the caller's */
    CHECK(g->vals[v[1]].offset == 0 && g->vals[v[2]].offset == 0 && g->vals[v[3]].offset == 0);
    CHECK(tc_graph_planned_bytes(g) == 1024 && tc_graph_unplanned_bytes(g) == 3072);
    char rep[512];
    CHECK_OK(tc_graph_report(g, rep, sizeof rep, NULL));
    CHECK(strstr(rep, "inplace") && strstr(rep, "2 nodes in place"));
    CHECK_OK(tc_graph_dump(g, rep, sizeof rep, NULL));
    CHECK(strstr(rep, "[in place of %1]") != NULL);
    CHECK(chain_matches_eager(g));
    CHECK(chain_matches_eager(g));
    tc_graph_free(g);
    ct_drop();
}

/* b = exp(a) cannot overwrite a (c reads a later); c = a * b takes a's buffer */
TEST(graph_memplan_inplace_needs_the_last_reader)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, SZ(8, 32), &x));
    int32_t a = op1(g, TC_OP_NEG, x, NULL);
    int32_t b = op1(g, TC_OP_EXP, a, NULL);
    int32_t c = op2(g, TC_OP_MUL, a, b, NULL);
    int32_t tr = op1(g, TC_OP_TRANSPOSE, c, P(.i = {0, 1}));
    int32_t d = op2(g, TC_OP_ADD, c, op1(g, TC_OP_TRANSPOSE, tr, P(.i = {0, 1})), P(.s = {1})); /* reads c twice, once through a view */
    int32_t e = op1(g, TC_OP_SQUARE, d, NULL);
    CHECK_OK(tc_graph_mark_output(g, e));
    CHECK_OK(tc_graph_compile(g, TC_PASS_INPLACE));
    CHECK(!(g->nodes[1].flags & TC_GN_INPLACE));
    CHECK((g->nodes[2].flags & TC_GN_INPLACE) && g->nodes[2].inplace == 0 && g->vals[c].offset == g->vals[a].offset);
    CHECK(!(g->nodes[g->vals[d].producer].flags & TC_GN_INPLACE)); /* c is also read through a view there */
    tc_tensor *xt = input_8x32(0.9), *out[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){xt}, 1, out, 1));
    ct_keep(out[0]);
    tc_tensor *ea = eager(TC_OP_NEG, xt, NULL, NULL), *ec = eager(TC_OP_MUL, ea, eager(TC_OP_EXP, ea, NULL, NULL), NULL);
    CHECK(same_tensor(out[0], eager(TC_OP_SQUARE, eager(TC_OP_ADD, ec, ec, P(.s = {1})), NULL, NULL)));
    tc_graph_free(g);
    ct_drop();
}

/* a copy of a value on another device (a download, as tracing x:float() of a device tensor
 * records it) is a transfer: it stays a copy (the emulator's guard found a CPU graph reading
 * the device tensor through such a view) */
TEST(graph_memplan_copy_across_devices_stays)
{
    tc_tensor *W = ct_keep(ct_arange(TC_F32, 1, SZ(32)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x, w;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 1, SZ(32), &x));
    CHECK_OK(tc_graph_add_external(g, W, &w));
    g->vals[w].device = TC_DEVICE_CUDA(0); /* as if W were a device tensor */
    int32_t c = op1(g, TC_OP_COPY, w, P(.i = {-1}));
    g->vals[c].device = TC_CPU;
    int32_t y = op2(g, TC_OP_ADD, x, c, P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, y));
    CHECK_OK(tc_pass_inplace(g));
    CHECK(g->nodes[g->vals[c].producer].op == TC_OP_COPY && g->vals[c].view_of < 0);
    /* the same copy of a CPU value becomes a view */
    g->vals[w].device = TC_CPU;
    CHECK_OK(tc_pass_inplace(g));
    CHECK(g->nodes[g->vals[c].producer].op == TC_OP_EXPAND && g->vals[c].view_of == w);
    tc_graph_free(g);
    ct_drop();
}

/* copies of contiguous values, and copies only a matmul reads, become views */
TEST(graph_memplan_copies_become_views)
{
    tc_tensor *W = ct_keep(ct_arange(TC_F32, 2, SZ(16, 32)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x, w;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, SZ(8, 32), &x));
    CHECK_OK(tc_graph_add_external(g, W, &w));
    int32_t a = op1(g, TC_OP_NEG, x, NULL);
    int32_t ca = op1(g, TC_OP_COPY, a, P(.i = {-1})); /* a clone of a contiguous value */
    int32_t wt = op1(g, TC_OP_TRANSPOSE, w, P(.i = {0, 1}));
    int32_t cw = op1(g, TC_OP_COPY, wt, P(.i = {-1})); /* contiguous() before a matmul */
    int32_t cw2 = op1(g, TC_OP_COPY, wt, P(.i = {-1})); /* ... and before an elementwise op: kept */
    int32_t m = op2(g, TC_OP_MM, ca, cw, NULL);        /* (8,16) */
    int32_t s = op1(g, TC_OP_SUM, op1(g, TC_OP_EXP, cw2, NULL), P(.i = {0, 1})); /* (1,16) */
    int32_t y = op2(g, TC_OP_ADD, m, s, P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, y));
    CHECK_OK(tc_graph_compile(g, TC_PASS_INPLACE));
    CHECK(g->nodes[g->vals[ca].producer].op == TC_OP_EXPAND && g->vals[ca].view_of == a);
    CHECK(g->nodes[g->vals[cw].producer].op == TC_OP_EXPAND && g->vals[cw].view_of == w);
    CHECK(g->nodes[g->vals[cw2].producer].op == TC_OP_COPY);
    char rep[512];
    CHECK_OK(tc_graph_report(g, rep, sizeof rep, NULL));
    CHECK(strstr(rep, "2 copies made views"));
    tc_tensor *xt = input_8x32(0.2), *out[1] = {NULL};
    CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){xt}, 1, out, 1));
    ct_keep(out[0]);
    tc_tensor *wte = ct_keep(ct_transposed(W, 0, 1));
    tc_tensor *wtc = eager(TC_OP_COPY, wte, NULL, P(.i = {-1}));
    tc_tensor *e = eager(TC_OP_ADD, eager(TC_OP_MM, eager(TC_OP_NEG, xt, NULL, NULL), wtc, NULL),
                         eager(TC_OP_SUM, eager(TC_OP_EXP, wtc, NULL, NULL), NULL, P(.i = {0, 1})), P(.s = {1}));
    CHECK(same_tensor(out[0], e));
    tc_graph_free(g);
    ct_drop();
}

/* Members of a fused group run at its last member: their inputs live until then, and a
 * value used only inside the group takes no memory. The groups are made by hand here
 * (the plan alone; running needs fused.c). */
static void group_of(tc_graph *g, const int32_t *nodes, int nn, const int32_t *ins, int ni, const int32_t *outs, int no)
{
    g->groups = malloc(sizeof *g->groups);
    g->ngroups = g->capgroups = 1;
    tc_ggroup *gr = &g->groups[0];
    gr->nodes = tc_graph_alloc(g, sizeof(int32_t) * (size_t)nn), gr->nnodes = nn;
    gr->ins = tc_graph_alloc(g, sizeof(int32_t) * (size_t)ni), gr->nins = ni;
    gr->outs = tc_graph_alloc(g, sizeof(int32_t) * (size_t)no), gr->nouts = no;
    memcpy(gr->nodes, nodes, sizeof(int32_t) * (size_t)nn);
    memcpy(gr->ins, ins, sizeof(int32_t) * (size_t)ni);
    memcpy(gr->outs, outs, sizeof(int32_t) * (size_t)no);
    for (int i = 0; i < nn; i++) g->nodes[nodes[i]].group = 0;
}

TEST(graph_memplan_fused_groups)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, SZ(8, 32), &x));
    int32_t a = op1(g, TC_OP_NEG, x, NULL);   /* node 0 */
    int32_t b = op1(g, TC_OP_EXP, a, NULL);   /* node 1, group */
    int32_t c = op1(g, TC_OP_SQUARE, a, NULL); /* node 2, outside: a must live here */
    int32_t d = op2(g, TC_OP_MUL, b, b, NULL); /* node 3, group */
    int32_t e = op2(g, TC_OP_ADD, d, c, P(.s = {1}));
    CHECK_OK(tc_graph_mark_output(g, e));
    group_of(g, (const int32_t[]){1, 3}, 2, (const int32_t[]){a}, 1, (const int32_t[]){d}, 1);
    CHECK_OK(tc_pass_memplan(g));
    CHECK(g->vals[b].offset == -1); /* internal to the group */
    int64_t oa = g->vals[a].offset, oc = g->vals[c].offset, od = g->vals[d].offset;
    CHECK(oa >= 0 && oc >= 0 && od >= 0 && oa != oc && od != oc && od != oa); /* a is read at node 3 */
    CHECK(g->planned_bytes == 3072 && g->unplanned_bytes == 3072);
    /* a group value read outside that the group does not list is a bug the plan reports */
    g->nodes[4].in[1] = b;
    CHECK_ERR(tc_pass_memplan(g), TC_ERR_INTERNAL, "internal to fused group 0");
    g->nodes[4].in[1] = c;
    /* ... and so is a group whose value is read before the group runs */
    g->nodes[2].in[0] = d;
    CHECK_ERR(tc_pass_memplan(g), TC_ERR_INTERNAL, "before it is computed");
    tc_graph_free(g);
}

/* A pass that redirects a view's input can leave vals[].view_of stale (here: the view of a
 * product now reads a captured 0-d tensor directly, as simplify makes mul(fill(1), w) into
 * w). The plan must still treat the view as a view of the captured tensor: no arena
 * buffer for it, and nothing written in place of it. */
TEST(graph_memplan_stale_view_of_is_rederived)
{
    tc_tensor *w = ct_keep(ct_from(TC_F64, 0, NULL, VALS(3)));
    tc_tensor *one = ct_keep(ct_from(TC_F64, 0, NULL, VALS(1)));
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int32_t x, vw, v1;
    CHECK_OK(tc_graph_add_input(g, TC_F64, 2, SZ(8, 1), &x));
    CHECK_OK(tc_graph_add_external(g, w, &vw));
    CHECK_OK(tc_graph_add_const(g, one, &v1));
    int32_t m = op2(g, TC_OP_MUL, v1, vw, NULL);
    int32_t v = op1(g, TC_OP_VIEW, m, P(.nshape = 2, .shape = {1, 1}));
    int32_t e = op1(g, TC_OP_EXPAND, v, P(.nshape = 2, .shape = {8, 1}));
    int32_t y = op2(g, TC_OP_MUL, e, x, NULL);
    int32_t z = op1(g, TC_OP_NEG, y, NULL);
    CHECK_OK(tc_graph_mark_output(g, z));
    g->nodes[g->vals[v].producer].in[0] = vw; /* what simplify does; view_of still says m */
    g->nodes[g->vals[m].producer].flags |= TC_GN_DEAD;
    CHECK_OK(tc_graph_compile(g, TC_PASS_INPLACE));
    CHECK(g->vals[v].offset == -1 && g->vals[e].offset == -1 && g->vals[v].view_of == vw && g->vals[e].view_of == vw);
    CHECK(!(g->nodes[g->vals[y].producer].flags & TC_GN_INPLACE));
    CHECK((g->nodes[g->vals[z].producer].flags & TC_GN_INPLACE) == 0); /* z is the output */
    tc_tensor *xt = ct_keep(ct_arange(TC_F64, 2, SZ(8, 1))), *out[1] = {NULL};
    for (int run = 0; run < 2; run++) {
        CHECK_OK(tc_graph_run(g, (const tc_tensor *[]){xt}, 1, out, 1));
        ct_keep(out[0]);
        CHECK(SAME(out[0], 0, -3, -6, -9, -12, -15, -18, -21));
        CHECK(SAME(w, 3));
    }
    tc_graph_free(g);
    ct_drop();
}
