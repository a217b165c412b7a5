/* test_main.c -- runs every registered C test (or those named on the command line) and
 * prints the summary line that tests/run.sh adds up. */
#include "ctest.h"
#include <dlfcn.h>
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

/* Over the CUDA emulator (tests/emu), after the tests: the real cuDNN must have taken every
 * descriptor the backend set (emu_cudnn_real.cc). -1 when the emulator is not loaded or has
 * no real cuDNN to ask, else 1 when it refused one, 0 when not. */
static int real_cudnn_refusals(void)
{
    const char *lib = getenv("TOCHA_CUDA_LIB");
    void *h = lib && strstr(lib, "emu") ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void *f = h ? dlsym(h, "tc_cuda_emu_real_cudnn") : NULL;
    size_t (*counts)(long long *, long long *, long long *) = NULL;
    memcpy(&counts, &f, sizeof counts);
    long long checked = 0, refused = 0, stricter = 0;
    size_t version = counts ? counts(&checked, &refused, &stricter) : 0;
    if (h) dlclose(h);
    if (!version) return -1;
    printf("%sreal cuDNN %zu: %lld descriptors the backend set also set there, %lld refused by it, %lld by the "
           "emulator alone\n", refused ? "FAIL " : "", version, checked, refused, stricter);
    return refused > 0;
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
    int real = real_cudnn_refusals();
    if (real >= 0) real ? failed++ : passed++;
    printf("c: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
