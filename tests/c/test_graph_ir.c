/* test_graph_ir.c -- the graph IR's own machinery (core/graph/graph.c): building with shape
 * inference, rewriting uses, compaction and renumbering, the dump / report / Graphviz
 * forms, and bad arguments. Passes, tracing and execution have their own test files. */
#include "ctest.h"
#include "graph/graph.h"
#include <stdio.h>
#include <stdlib.h>

/* x (2,3) input, w (3,4) external: y = tanh(x @ w), s = sum(y) */
static tc_status small_graph(tc_graph **gp, tc_tensor **wp, int32_t ids[6])
{
    int64_t xs[2] = {2, 3}, ws[2] = {3, 4};
    tc_graph *g;
    TRY(tc_graph_new(&g));
    *gp = g;
    *wp = ct_arange(TC_F32, 2, ws);
    TRY(tc_graph_add_input(g, TC_F32, 2, xs, &ids[0]));
    TRY(tc_graph_add_external(g, *wp, &ids[1]));
    int32_t in[2] = {ids[0], ids[1]};
    TRY(tc_graph_add_op(g, TC_OP_MM, in, 2, NULL, &ids[2]));
    TRY(tc_graph_add_op(g, TC_OP_TANH, &ids[2], 1, NULL, &ids[3]));
    TRY(tc_graph_add_op(g, TC_OP_NEG, &ids[3], 1, NULL, &ids[4]));
    TRY(tc_graph_mark_output(g, ids[4]));
    return TC_OK;
}

TEST(graph_ir_build_infers_shapes)
{
    tc_graph *g = NULL;
    tc_tensor *w = NULL;
    int32_t id[6];
    CHECK_OK(small_graph(&g, &w, id));
    CHECK(g->nnodes == 3 && g->ninputs == 1 && g->noutputs == 1);
    CHECK(g->vals[id[2]].ndim == 2 && g->vals[id[2]].size[0] == 2 && g->vals[id[2]].size[1] == 4);
    CHECK(g->vals[id[2]].kind == TC_GV_OP && g->vals[id[2]].producer == 0);
    CHECK(g->vals[id[1]].kind == TC_GV_EXTERNAL && g->vals[id[1]].t == w);
    CHECK(tc_graph_num_nodes(g) == 3 && tc_graph_num_inputs(g) == 1 && tc_graph_num_outputs(g) == 1);
    char buf[2048];
    size_t need = 0;
    CHECK_OK(tc_graph_dump(g, buf, sizeof buf, &need));
    CHECK(strstr(buf, "mm(%0, %1)") != NULL);
    CHECK(strstr(buf, "float32(2,4)") != NULL || strstr(buf, "(2,4)") != NULL);
    CHECK(strstr(buf, "return %4") != NULL);
    CHECK(need == strlen(buf) + 1);
    /* a short buffer is truncated but NUL-terminated, and needed says the full length */
    char small[8];
    size_t need2 = 0;
    CHECK_OK(tc_graph_dump(g, small, sizeof small, &need2));
    CHECK(need2 == need && strlen(small) == 7);
    tc_graph_free(g);
    tc_tensor_release(w);
}

TEST(graph_ir_shape_errors_name_the_op)
{
    tc_graph *g;
    CHECK_OK(tc_graph_new(&g));
    int64_t a[2] = {2, 3}, b[2] = {4, 5};
    int32_t x, y, z;
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, a, &x));
    CHECK_OK(tc_graph_add_input(g, TC_F32, 2, b, &y));
    int32_t in[2] = {x, y};
    CHECK_ERR(tc_graph_add_op(g, TC_OP_MM, in, 2, NULL, &z), TC_ERR_SHAPE, "mm");
    CHECK(g->nnodes == 0); /* a failed add adds nothing */
    int32_t bad[1] = {99};
    CHECK_ERR(tc_graph_add_op(g, TC_OP_TANH, bad, 1, NULL, &z), TC_ERR_ARG, "no value");
    CHECK_ERR(tc_graph_mark_output(g, 42), TC_ERR_ARG, "no value");
    CHECK_ERR(tc_graph_add_writeback(g, x, y), TC_ERR_ARG, "write-back");
    tc_graph_free(g);
}

TEST(graph_ir_replace_and_compact_renumber)
{
    tc_graph *g = NULL;
    tc_tensor *w = NULL;
    int32_t id[6];
    CHECK_OK(small_graph(&g, &w, id));
    /* bypass tanh: neg reads mm directly, tanh becomes dead */
    g->nodes[2].in[0] = id[2];
    g->nodes[1].flags |= TC_GN_DEAD;
    CHECK_OK(tc_graph_compact(g));
    CHECK(g->nnodes == 2);
    CHECK(g->nodes[1].op == TC_OP_NEG && g->nodes[1].in[0] == g->nodes[0].out[0]);
    CHECK(g->vals[g->nodes[1].out[0]].producer == 1);
    CHECK(g->outputs[0] == g->nodes[1].out[0]);
    CHECK(g->nvals == 4); /* x, w, mm, neg: tanh's value is gone */
    CHECK(g->vals[g->nodes[0].out[0]].nuses == 1);
    /* replace_uses redirects outputs too */
    tc_graph_replace_uses(g, g->nodes[1].out[0], g->nodes[0].out[0]);
    CHECK(g->outputs[0] == g->nodes[0].out[0]);
    tc_graph_free(g);
    tc_tensor_release(w);
}

TEST(graph_ir_report_and_dot)
{
    tc_graph *g = NULL;
    tc_tensor *w = NULL;
    int32_t id[6];
    CHECK_OK(small_graph(&g, &w, id));
    tc_gpass_stat st = {.pass = "dce", .nodes_before = 5, .nodes_after = 3};
    CHECK_OK(tc_graph_add_stat(g, &st));
    char buf[512];
    CHECK_OK(tc_graph_report(g, buf, sizeof buf, NULL));
    CHECK(strstr(buf, "dce") && strstr(buf, "5 -> 3") && strstr(buf, "2 removed"));
    g->ngroups = 0;
    const char *path = "/tmp/tocha_test_graph_ir.dot";
    CHECK_OK(tc_graph_dot(g, path));
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        char text[4096] = {0};
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        CHECK(n > 0 && strstr(text, "digraph") && strstr(text, "mm") && strstr(text, "n0 -> n1"));
    }
    remove(path);
    CHECK_ERR(tc_graph_dot(g, "/nonexistent-dir/x.dot"), TC_ERR_IO, "cannot write");
    tc_graph_free(g);
    tc_tensor_release(w);
}

/* The public graph functions refuse a NULL graph with a message naming the function. */
TEST(graph_ir_null_graph_is_an_error)
{
    char buf[16];
    CHECK_ERR(tc_graph_dump(NULL, buf, sizeof buf, NULL), TC_ERR_ARG, "graph dump");
    CHECK_ERR(tc_graph_report(NULL, buf, sizeof buf, NULL), TC_ERR_ARG, "graph report");
    CHECK_ERR(tc_graph_dot(NULL, "/tmp/x.dot"), TC_ERR_ARG, "graph dot");
    CHECK_ERR(tc_graph_compile(NULL, TC_PASS_ALL), TC_ERR_ARG, "graph compile");
    CHECK_ERR(tc_graph_run(NULL, NULL, 0, NULL, 0), TC_ERR_ARG, "graph run");
    CHECK(tc_graph_num_nodes(NULL) == 0 && tc_graph_planned_bytes(NULL) == 0);
    tc_graph_free(NULL);
}

/* ---- execution order after a pass appended nodes ------------------------------------------ */

/* Whether every live node reads only values produced before it. */
static int in_order(const tc_graph *g)
{
    for (int n = 0; n < g->nnodes; n++)
        for (int i = 0; i < g->nodes[n].nin; i++) {
            int32_t v = g->nodes[n].in[i];
            if (v >= 0 && g->vals[v].kind == TC_GV_OP && g->vals[v].producer >= n) return 0;
        }
    return 1;
}

/* A node appended after the last one (TC_GN_PLACE) that an earlier node now reads moves up
 * to just after its inputs' last producer; the other nodes keep their order. */
TEST(graph_ir_compact_places_appended_nodes)
{
    tc_graph *g = NULL;
    tc_tensor *w = NULL;
    int32_t id[6], e = -1, r = -1, d = -1;
    CHECK_OK(small_graph(&g, &w, id)); /* mm, tanh, neg */
    int32_t x = id[0];
    CHECK_OK(tc_graph_add_op(g, TC_OP_EXP, &x, 1, NULL, &d));   /* an unrelated last node */
    CHECK_OK(tc_graph_mark_output(g, d));
    CHECK_OK(tc_graph_add_op(g, TC_OP_ABS, &id[2], 1, NULL, &r)); /* relu(mm), appended */
    g->nodes[g->nnodes - 1].flags |= TC_GN_PLACE;
    CHECK_OK(tc_graph_add_op(g, TC_OP_SIGMOID, &r, 1, NULL, &e));  /* sigmoid(relu), appended */
    g->nodes[g->nnodes - 1].flags |= TC_GN_PLACE;
    tc_graph_replace_uses(g, id[3], e); /* neg reads sigmoid(relu(mm)) instead of tanh */
    g->nodes[1].flags |= TC_GN_DEAD;
    CHECK(!in_order(g));
    CHECK_OK(tc_graph_compact(g));
    CHECK(in_order(g) && g->nnodes == 5);
    const int32_t want[5] = {TC_OP_MM, TC_OP_ABS, TC_OP_SIGMOID, TC_OP_NEG, TC_OP_EXP};
    for (int n = 0; n < 5; n++) CHECK(g->nodes[n].op == want[n] && !(g->nodes[n].flags & TC_GN_PLACE));
    for (int n = 0; n < 5; n++) CHECK(g->vals[g->nodes[n].out[0]].producer == n);
    CHECK(g->nodes[3].in[0] == g->nodes[2].out[0] && g->outputs[0] == g->nodes[3].out[0]);
    tc_graph_free(g);
    tc_tensor_release(w);
}

/* Without the flag a node that reads a later result is still ordered after it (a valid
 * order), the nodes with no such dependency keeping theirs; and a cycle is an error. */
TEST(graph_ir_compact_sorts_and_finds_cycles)
{
    tc_graph *g = NULL;
    tc_tensor *w = NULL;
    int32_t id[6], e = -1;
    CHECK_OK(small_graph(&g, &w, id)); /* mm, tanh, neg */
    CHECK_OK(tc_graph_add_op(g, TC_OP_EXP, &id[2], 1, NULL, &e)); /* exp(mm), last */
    g->nodes[1].in[0] = e;                                         /* tanh(exp(mm)) */
    CHECK_OK(tc_graph_compact(g));
    CHECK(in_order(g) && g->nnodes == 4);
    CHECK(g->nodes[0].op == TC_OP_MM && g->nodes[1].op == TC_OP_EXP && g->nodes[2].op == TC_OP_TANH &&
          g->nodes[3].op == TC_OP_NEG);
    /* mm reads neg's result: mm -> tanh -> neg -> mm */
    g->nodes[0].in[0] = g->nodes[3].out[0];
    CHECK_ERR(tc_graph_compact(g), TC_ERR_INTERNAL, "cycle");
    tc_graph_free(g);
    tc_tensor_release(w);
}
