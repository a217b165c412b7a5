/* error.c -- the thread-local error message behind every tc_status, and shape formatting
 * for messages. No function in libtocha aborts: failures come back here. */
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[512];

const char *tc_last_error(void) { return last_error; }

void tc_clear_error(void) { last_error[0] = '\0'; }

tc_status tc_set_error(tc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *tc_sizes_str(int ndim, const int64_t *sizes, char *buf, size_t cap)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "(");
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ",%lld" : "%lld", (long long)sizes[d]);
    if (n < cap) snprintf(buf + n, cap - n, ")");
    return buf;
}

const char *tc_shape_str(const tc_tensor *t, char *buf, size_t cap)
{
    if (!t) {
        snprintf(buf, cap, "(none)");
        return buf;
    }
    return tc_sizes_str(t->ndim, t->size, buf, cap);
}

const char *tc_version(void) { return "0.1.0"; }
