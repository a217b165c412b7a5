/* embed_host.c -- a C program that embeds tocha: it lends its own float array to Lua
 * without copying, runs Torch7-style Lua code that changes the array in place and builds
 * a result tensor, takes the result back, and shows that a Lua error comes back as a
 * status with a message instead of crashing the host.
 *
 *   make build/embed_host && build/embed_host
 *
 * Output lines are stable ("x after: ...", "y: ...", "error status ...", "tensors live
 * after close: 0"): tests/lua/embed_spec.lua checks them.
 */
#include "tocha_embed.h"

#include <stdio.h>

static void print_floats(const char *label, const float *v, int64_t n)
{
    printf("%s:", label);
    for (int64_t i = 0; i < n; i++) printf(" %g", v[i]);
    printf("\n");
}

static int die(const char *what)
{
    fprintf(stderr, "embed_host: %s: %s\n", what, tocha_last_error());
    return 1;
}

int main(void)
{
    /* the host's own memory: 4 floats tocha will work on in place */
    float data[4] = {1, 2, 3, 4};
    int64_t n = 4;

    tocha_interp *I;
    if (tocha_interp_new(&I) != TC_OK) return die("tocha_interp_new");

    tc_tensor *x = NULL, *y = NULL;
    /* no deleter: data outlives every tensor that views it (x and Lua's copy of it are
     * released before main returns) */
    if (tc_tensor_from_data(data, TC_F32, 1, &n, NULL, NULL, NULL, &x) != TC_OK)
        return die("tc_tensor_from_data");
    if (tocha_set_tensor(I, "x", x) != TC_OK) return die("tocha_set_tensor");
    print_floats("x before", data, n);

    /* x:add(x) doubles the host's array in place; y = x + x then + 1 is a new tensor */
    const char *code = "x:add(x)\n"
                       "y = x + x\n"
                       "y:add(1)\n"
                       "print('lua sees x:size(1) = ' .. x:size(1))\n";
    if (tocha_run_string(I, code) != TC_OK) return die("tocha_run_string");
    fflush(stdout);
    print_floats("x after", data, n);

    if (tocha_get_tensor(I, "y", &y) != TC_OK) return die("tocha_get_tensor");
    print_floats("y", (const float *)tc_tensor_data(y), tc_tensor_numel(y));

    /* errors are statuses: a runtime error (with its traceback), a syntax error, and
     * asking for a global that is not a tensor */
    tc_status s = tocha_run_string(I, "x:no_such_method()");
    printf("error status %d: %s\n", (int)s, tocha_last_error());
    s = tocha_run_string(I, "y = = 1");
    printf("error status %d: %s\n", (int)s, tocha_last_error());
    tc_tensor *z = NULL;
    s = tocha_get_tensor(I, "no_such_global", &z);
    printf("error status %d: %s\n", (int)s, tocha_last_error());

    /* the interpreter still works after the errors */
    if (tocha_run_string(I, "x:add(1)") != TC_OK) return die("tocha_run_string after errors");
    print_floats("x after errors", data, n);

    tocha_interp_close(I);
    tc_tensor_release(y);
    tc_tensor_release(x);

    tc_memstats st;
    tc_memory_stats(&st);
    printf("tensors live after close: %lld\n", (long long)st.tensors_live);
    printf("storages live after close: %lld\n", (long long)st.storages_live);
    return st.tensors_live == 0 && st.storages_live == 0 ? 0 : 1;
}
