/* main.c -- the `tocha` executable, Torch7's `th`: a script runner and a REPL on top of
 * the embedding API (tocha_embed.h). Options are handled here, in order, the way the lua
 * command does; the REPL itself is Lua (lua/tocha/repl.lua) with libedit glue (repl.c).
 *
 *   tocha                      REPL (plain line reading when stdin is not a terminal)
 *   tocha script.lua a b       runs the script; arg[0] = script, arg[1..] = a b
 *   tocha -e stmt -l lib -i    statements, require, REPL afterwards
 *
 * Exit status: 0, or 1 when a statement, module or script failed (message and traceback on
 * stderr). This is the executable, so returning from main is how it ends; nothing below
 * calls exit.
 */
#include "tocha_embed.h"

#include <luajit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

const char *openblas_get_corename(void);

int tocha_repl_install(struct lua_State *L); /* bindings/repl.c */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tocha [options] [script.lua [args]]\n"
            "  -e stmt   run the statement stmt\n"
            "  -l lib    require the module lib\n"
            "  -i        enter the REPL after running the script and statements\n"
            "  -v        print the version\n"
            "  -h        print this help\n"
            "  --        stop handling options\n"
            "  -         run standard input as a script\n"
            "With no script and no -e, tocha starts the REPL.\n"
            "Environment: TOCHA_HOME (where lua/ and build/ are), TOCHA_HISTORY (REPL history\n"
            "file, default ~/.tocha_history).\n");
}

static int report(const char *what)
{
    fprintf(stderr, "tocha: %s%s\n", what ? what : "", tocha_last_error());
    fflush(stderr);
    return 1;
}

/* The option's value: "-e stmt" or "-estmt"; NULL when missing. *i moves past it. */
static const char *option_value(int argc, char **argv, int *i)
{
    if (argv[*i][2] != '\0') return argv[*i] + 2;
    if (*i + 1 >= argc) return NULL;
    return argv[++*i];
}

/* OpenBLAS 0.3.21 (Debian 12) does not recognise recent Xeons and falls back to its
 * slowest kernels ("Prescott": sgemm 4-6x slower here). It picks its kernels when it loads,
 * from OPENBLAS_CORETYPE, so when it chose a fallback on a CPU that has AVX-512 or AVX2
 * (as the OS reports through __builtin_cpu_supports), we run ourselves again with the
 * right core type. If the exec fails we simply go on with the slow kernels. Set
 * OPENBLAS_CORETYPE yourself to choose; embedding hosts should do the same. */
static void fix_openblas_coretype(char **argv)
{
    static const char *fallbacks[] = {"prescott", "core2", "nehalem", "katmai", "coppermine", "northwood", "unknown"};
    if (getenv("OPENBLAS_CORETYPE")) return;
    const char *core = openblas_get_corename();
    int fallback = core == NULL;
    for (size_t k = 0; core && k < sizeof fallbacks / sizeof fallbacks[0]; k++)
        if (strcasecmp(core, fallbacks[k]) == 0) fallback = 1;
    if (!fallback) return;
    __builtin_cpu_init();
    const char *want = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        want = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        want = "Haswell";
    if (!want) return;
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
    fix_openblas_coretype(argv);
    int interactive = 0, has_e = 0, show_version = 0, script = 0;
    int i;
    /* pass 1: check the options and find the script (the first non-option) */
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            script = i;
            break;
        }
        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc) script = i + 1;
            break;
        }
        if (a[1] == 'e' || a[1] == 'l') {
            if (option_value(argc, argv, &i) == NULL) {
                fprintf(stderr, "tocha: '%s' needs an argument\n", a);
                usage(stderr);
                return 1;
            }
            has_e |= a[1] == 'e';
        } else if (strcmp(a, "-i") == 0) {
            interactive = 1;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
            show_version = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "tocha: unrecognized option '%s'\n", a);
            usage(stderr);
            return 1;
        }
    }
    int script_index = script ? script : argc;

    if (show_version) printf("tocha %s (%s)\n", tc_version(), LUAJIT_VERSION);

    tocha_interp *I;
    if (tocha_interp_new(&I) != TC_OK) return report("cannot start: ");
    int rc = 0;
    if (tocha_set_args(I, argc, (const char **)argv, script_index) != TC_OK) {
        rc = report(NULL);
        goto done;
    }
    /* pass 2: -e and -l in the order given */
    for (i = 1; i < script_index; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) break;
        if (a[1] != 'e' && a[1] != 'l') continue;
        const char *v = option_value(argc, argv, &i);
        tc_status s = a[1] == 'e' ? tocha_run_string(I, v) : tocha_require(I, v);
        if (s != TC_OK) {
            rc = report(NULL);
            goto done;
        }
    }
    if (script) {
        int nargs = argc - script - 1;
        if (tocha_run_file(I, argv[script], nargs, (const char **)argv + script + 1) != TC_OK) {
            rc = report(NULL);
            goto done;
        }
    }
    if (interactive || (!script && !has_e && !show_version)) {
        fflush(stdout);
        if (tocha_repl_install(tocha_interp_lua(I)) != 0) {
            fprintf(stderr, "tocha: cannot set up the REPL\n");
            rc = 1;
            goto done;
        }
        if (tocha_run_string(I, "require('tocha.repl').run()") != TC_OK) rc = report(NULL);
    }
done:
    fflush(stdout);
    tocha_interp_close(I);
    return rc;
}
