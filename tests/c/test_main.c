/* test_main.c -- runs every registered C test (or those named on the command line) and
 * prints the summary line that tests/run.sh adds up. */
#include "ctest.h"
#include <stdlib.h>

#define MAX_TESTS 1024
static struct {
    const char *name;
    ctest_fn fn;
} tests[MAX_TESTS];
static int ntests;

void ctest_register(const char *name, ctest_fn fn)
{
    if (ntests < MAX_TESTS) tests[ntests].name = name, tests[ntests].fn = fn, ntests++;
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    for (int i = 0; i < ntests; i++) {
        if (argc > 1) {
            int want = 0;
            for (int a = 1; a < argc; a++)
                if (strstr(tests[i].name, argv[a])) want = 1;
            if (!want) continue;
        }
        int f = 0;
        tests[i].fn(&f);
        if (f) {
            printf("FAIL %s\n", tests[i].name);
            failed++;
        } else {
            passed++;
        }
    }
    tc_memstats ms;
    tc_memory_stats(&ms);
    if (ms.tensors_live != 0 || ms.storages_live != 0) {
        printf("FAIL leak check: %lld tensors and %lld storages still live after all tests\n",
               (long long)ms.tensors_live, (long long)ms.storages_live);
        failed++;
    } else {
        passed++;
    }
    printf("c: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
