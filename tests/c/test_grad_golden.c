/* test_grad_golden.c -- gradient rules at the points where a convention decides (kinks, ties,
 * zeros, NaN) against PyTorch 1.13: tests/golden/grad_rules.golden, made by
 * tests/golden/gen_grad_rules.py. Each case runs one rule on a hand-built context
 * (gc_run_rule) with PyTorch's output gradient and compares every input gradient; a NULL
 * (zero) gradient matches PyTorch's None or zeros. */
#include "ctest.h"
#include "gradcheck.h"
#include <stdlib.h>

static int read_tensor(FILE *f, tc_tensor **out)
{
    char kind[16];
    int nd;
    if (fscanf(f, "%15s %d", kind, &nd) != 2 || nd < 0 || nd > TC_MAX_DIMS) return 0;
    int64_t sz[TC_MAX_DIMS], n = 1;
    for (int d = 0; d < nd; d++) {
        long long v;
        if (fscanf(f, "%lld", &v) != 1) return 0;
        sz[d] = v, n *= v;
    }
    double *vals = malloc(sizeof(double) * (size_t)(n ? n : 1));
    char tok[64];
    for (int64_t i = 0; i < n; i++) {
        if (fscanf(f, "%63s", tok) != 1) {
            free(vals);
            return 0;
        }
        vals[i] = strtod(tok, NULL); /* also reads nan, inf, -inf */
    }
    tc_dtype dt = !strcmp(kind, "f64") ? TC_F64 : !strcmp(kind, "i64") ? TC_I64 : TC_U8;
    *out = ct_from(dt, nd, sz, vals);
    free(vals);
    return *out != NULL;
}

TEST(grad_rules_golden_pytorch_conventions)
{
    const char *home = getenv("TOCHA_HOME");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/grad_rules.golden", home ? home : ".");
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[256], tok[64];
    int cases = 0;
    if (!fgets(line, sizeof line, f)) line[0] = 0; /* the header comment */
    while (fscanf(f, "%63s", tok) == 1) {
        if (strcmp(tok, "case")) break;
        char name[64], opname[32];
        tc_params p = {{0}};
        long long iv[4];
        if (fscanf(f, "%63s %31s s %lf %lf i %lld %lld %lld %lld", name, opname, &p.s[0], &p.s[1], &iv[0], &iv[1],
                   &iv[2], &iv[3]) != 8) {
            CHECK(!"golden: bad case line");
            break;
        }
        for (int k = 0; k < 4; k++) p.i[k] = iv[k];
        int op = tc_op_lookup(opname);
        tc_tensor *in[4] = {0}, *gout[2] = {0}, *gin[4] = {0};
        int nin = 0, ok = op >= 0, tested = 0;
        while (ok && fscanf(f, "%63s", tok) == 1 && strcmp(tok, "end")) {
            if (!strcmp(tok, "in")) {
                ok = nin < 4 && read_tensor(f, &in[nin]);
                nin++;
            } else if (!strcmp(tok, "gout")) {
                ok = read_tensor(f, &gout[0]);
                if (ok) ok = gc_run_rule((tc_op)op, (const tc_tensor *const *)in, nin, &p,
                                         (const tc_tensor *const *)gout, NULL, gin) == TC_OK;
                if (!ok) printf("  golden %s: %s\n", name, tc_last_error());
            } else if (!strcmp(tok, "want")) {
                int k;
                ok = fscanf(f, "%d", &k) == 1 && k >= 0 && k < nin;
                int64_t n = ok ? tc_tensor_numel(in[k]) : 0;
                long pos = ftell(f);
                if (ok && fscanf(f, "%63s", tok) == 1 && !strcmp(tok, "none")) n = 0;
                else fseek(f, pos, SEEK_SET);
                for (int64_t e = 0; ok && e < n; e++) {
                    ok = fscanf(f, "%63s", tok) == 1;
                    double want = strtod(tok, NULL), got = gin[k] ? ct_at(gin[k], e) : 0;
                    if (ok && !ct_near(got, want, 1e-12)) {
                        printf("  golden %s: input %d element %lld: got %.17g, PyTorch %.17g\n", name, k + 1,
                               (long long)e, got, want);
                        ok = 0;
                    }
                }
                if (ok && n == 0 && gin[k])
                    for (int64_t e = 0; e < tc_tensor_numel(gin[k]); e++)
                        if (ct_at(gin[k], e) != 0) {
                            printf("  golden %s: input %d should get no gradient\n", name, k + 1);
                            ok = 0;
                        }
                tested++;
            } else {
                ok = 0;
            }
        }
        if (!ok || !tested) {
            printf("  FAIL golden case %s (%s)\n", name, opname);
            *ctest_failed = 1;
            while (strcmp(tok, "end") && fscanf(f, "%63s", tok) == 1) {} /* skip to the next case */
        }
        for (int k = 0; k < 4; k++) {
            if (in[k]) tc_tensor_release(in[k]);
            if (gin[k]) tc_tensor_release(gin[k]);
        }
        if (gout[0]) tc_tensor_release(gout[0]);
        cases++;
    }
    fclose(f);
    CHECK(cases >= 50);
}
