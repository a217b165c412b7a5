/* read.c -- file readers for data sets: IDX (MNIST's format) and numeric CSV.
 *
 * Both read the whole file through zlib's gzread, which passes plain files through
 * unchanged, so "raw or gzip" needs no second code path. The content is parsed only after
 * it is all in memory: sizes claimed by a header are checked against the bytes actually
 * there before anything is allocated for them, so a truncated or hostile file is an error
 * and never a huge allocation.
 */
#include "internal.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

/* Reads all of path (decompressing gzip) into a malloc'ed buffer. */
static tc_status slurp(const char *what, const char *path, unsigned char **buf, size_t *len)
{
    if (!path) return tc_set_error(TC_ERR_ARG, "%s: NULL path", what);
    gzFile f = gzopen(path, "rb");
    if (!f) return tc_set_error(TC_ERR_IO, "%s: cannot open %s: %s", what, path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = tc_malloc(cap, what);
    if (!b) {
        gzclose(f);
        return TC_ERR_MEMORY;
    }
    for (;;) {
        if (n == cap) {
            unsigned char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                gzclose(f);
                return tc_set_error(TC_ERR_MEMORY, "%s: out of memory reading %s (%zu bytes so far)", what, path, n);
            }
            b = nb;
            cap *= 2;
        }
        unsigned want = (unsigned)((cap - n) > (1u << 30) ? (1u << 30) : (cap - n));
        int got = gzread(f, b + n, want);
        if (got < 0) {
            int zerr = 0;
            const char *msg = gzerror(f, &zerr);
            tc_status s = tc_set_error(TC_ERR_IO, "%s: %s: read error (%s) after %zu bytes", what, path, msg, n);
            free(b);
            gzclose(f);
            return s;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    gzclose(f);
    *buf = b;
    *len = n;
    return TC_OK;
}

/* ---- IDX ---------------------------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

tc_status tc_idx_read(const char *path, tc_tensor **out)
{
    if (!out) return tc_set_error(TC_ERR_ARG, "idx_read: NULL result pointer");
    unsigned char *b;
    size_t len;
    TRY(slurp("idx_read", path, &b, &len));
    tc_status s = TC_OK;
    tc_tensor *t = NULL;
    if (len < 4 || b[0] != 0 || b[1] != 0) {
        s = tc_set_error(TC_ERR_IO, "idx_read: %s is not an IDX file (bad magic number)", path);
        goto done;
    }
    int dt, esize;
    switch (b[2]) {
    case 0x08: dt = TC_U8, esize = 1; break;
    case 0x09: dt = TC_I8, esize = 1; break;
    case 0x0B: dt = TC_I16, esize = 2; break;
    case 0x0C: dt = TC_I32, esize = 4; break;
    case 0x0D: dt = TC_F32, esize = 4; break;
    case 0x0E: dt = TC_F64, esize = 8; break;
    default:
        s = tc_set_error(TC_ERR_IO, "idx_read: %s: unknown element type code 0x%02x", path, b[2]);
        goto done;
    }
    int ndim = b[3];
    if (ndim < 1 || ndim > TC_MAX_DIMS) {
        s = tc_set_error(TC_ERR_IO, "idx_read: %s: %d dimensions (1 to %d supported)", path, ndim, TC_MAX_DIMS);
        goto done;
    }
    if (len < 4 + 4 * (size_t)ndim) {
        s = tc_set_error(TC_ERR_IO, "idx_read: %s: truncated header", path);
        goto done;
    }
    int64_t sizes[TC_MAX_DIMS];
    uint64_t count = 1;
    for (int d = 0; d < ndim; d++) {
        sizes[d] = be32(b + 4 + 4 * d);
        count *= (uint64_t)sizes[d];
        if (count > (uint64_t)len) break; /* cannot fit: reported below, no overflow */
    }
    size_t header = 4 + 4 * (size_t)ndim;
    if (count > (uint64_t)len || header + count * (uint64_t)esize != len) {
        s = tc_set_error(TC_ERR_IO, "idx_read: %s: header promises %llu elements of %d bytes but the file has %zu data bytes",
                         path, (unsigned long long)count, esize, len - header);
        goto done;
    }
    s = tc_tensor_alloc((tc_dtype)dt, ndim, sizes, &t);
    if (s) {
        s = tc_set_error(s, "idx_read: %s: out of memory for %llu elements", path, (unsigned long long)count);
        goto done;
    }
    /* IDX stores multi-byte values big-endian */
    unsigned char *dst = tc_tensor_data(t), *src = b + header;
    for (uint64_t i = 0; i < count; i++)
        for (int k = 0; k < esize; k++) dst[i * esize + k] = src[i * esize + (esize - 1 - k)];
    *out = t;
done:
    free(b);
    return s;
}

/* ---- CSV ---------------------------------------------------------------------------- */

/* Moves p past the end of the current line. */
static const char *next_line(const char *p, const char *end)
{
    while (p < end && *p != '\n') p++;
    return p < end ? p + 1 : end;
}

static bool blank_line(const char *p, const char *end)
{
    for (; p < end && *p != '\n'; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r') return false;
    return true;
}

/* Parses one line of fields into vals (when non-NULL); returns the field count or -1 with
 * the error set. */
static int64_t parse_line(const char *path, int64_t lineno, const char *p, const char *end, char delim, double *vals)
{
    int64_t col = 0;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        char tmp[64];
        size_t k = 0;
        while (p < end && *p != delim && *p != '\n' && *p != '\r' && k < sizeof tmp - 1) tmp[k++] = *p++;
        tmp[k] = 0;
        while (k > 0 && (tmp[k - 1] == ' ' || tmp[k - 1] == '\t')) tmp[--k] = 0;
        char *stop;
        double v = strtod(tmp, &stop);
        if (k == 0 || *stop != 0) {
            tc_set_error(TC_ERR_IO, "csv_read: %s: line %lld, column %lld: '%s' is not a number", path,
                         (long long)lineno, (long long)col + 1, tmp);
            return -1;
        }
        if (vals) vals[col] = v;
        col++;
        while (p < end && *p == '\r') p++;
        if (p < end && *p == delim) {
            p++;
            continue;
        }
        if (p >= end || *p == '\n') return col;
        tc_set_error(TC_ERR_IO, "csv_read: %s: line %lld, column %lld: field too long", path, (long long)lineno,
                     (long long)col);
        return -1;
    }
}

tc_status tc_csv_read(const char *path, char delim, int skip_header, tc_dtype dt, tc_tensor **out)
{
    if (!out) return tc_set_error(TC_ERR_ARG, "csv_read: NULL result pointer");
    if (dt != TC_F32 && dt != TC_F64)
        return tc_set_error(TC_ERR_DTYPE, "csv_read: result must be float32 or float64, not %s", tc_dtype_name(dt));
    if (delim == '\n' || delim == 0) return tc_set_error(TC_ERR_ARG, "csv_read: bad delimiter");
    unsigned char *b;
    size_t len;
    TRY(slurp("csv_read", path, &b, &len));
    const char *start = (const char *)b, *end = start + len, *p = start;
    int64_t lineno = 1;
    for (int i = 0; i < skip_header && p < end; i++, lineno++) p = next_line(p, end);
    const char *data = p;
    int64_t data_line = lineno;
    /* pass 1: rows and columns */
    int64_t rows = 0, cols = -1;
    tc_status s = TC_OK;
    for (int64_t ln = lineno; p < end; p = next_line(p, end), ln++) {
        if (blank_line(p, end)) continue;
        int64_t c = parse_line(path, ln, p, end, delim, NULL);
        if (c < 0) {
            s = TC_ERR_IO;
            goto done;
        }
        if (cols >= 0 && c != cols) {
            s = tc_set_error(TC_ERR_IO, "csv_read: %s: line %lld has %lld fields, earlier lines have %lld", path,
                             (long long)ln, (long long)c, (long long)cols);
            goto done;
        }
        cols = c;
        rows++;
    }
    if (rows == 0) {
        s = tc_set_error(TC_ERR_IO, "csv_read: %s: no data rows", path);
        goto done;
    }
    int64_t sizes[2] = {rows, cols};
    tc_tensor *t;
    s = tc_tensor_alloc(dt, 2, sizes, &t);
    if (s) {
        s = tc_set_error(s, "csv_read: %s: out of memory for (%lld,%lld)", path, (long long)rows, (long long)cols);
        goto done;
    }
    double *row = malloc(sizeof(double) * (size_t)cols);
    if (!row) {
        tc_tensor_release(t);
        s = tc_set_error(TC_ERR_MEMORY, "csv_read: out of memory");
        goto done;
    }
    int64_t r = 0, ln = data_line;
    for (p = data; p < end; p = next_line(p, end), ln++) {
        if (blank_line(p, end)) continue;
        parse_line(path, ln, p, end, delim, row); /* cannot fail: pass 1 parsed it */
        for (int64_t c = 0; c < cols; c++) {
            if (dt == TC_F32) ((float *)tc_tensor_data(t))[r * cols + c] = (float)row[c];
            else ((double *)tc_tensor_data(t))[r * cols + c] = row[c];
        }
        r++;
    }
    free(row);
    *out = t;
done:
    free(b);
    return s;
}
