/* test_data.c -- the data readers (IDX raw and gzip, CSV) and the background batch loader. */
#include "ctest.h"
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

static void tmp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "/tmp/tocha_test_data_%d_%s", (int)getpid(), name);
}

static void write_bytes(const char *path, const void *b, size_t n, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, b, (unsigned)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

/* An IDX file of int16 (2, 3) holding -1, 2, 300, 4, 5, -600 (big-endian). */
static size_t idx_i16(unsigned char *b)
{
    unsigned char hdr[] = {0, 0, 0x0B, 2, 0, 0, 0, 2, 0, 0, 0, 3};
    memcpy(b, hdr, sizeof hdr);
    int16_t v[] = {-1, 2, 300, 4, 5, -600};
    for (int i = 0; i < 6; i++) b[12 + 2 * i] = (unsigned char)((uint16_t)v[i] >> 8), b[13 + 2 * i] = (unsigned char)(v[i] & 0xff);
    return 24;
}

TEST(data_idx_raw_and_gzip)
{
    unsigned char b[64];
    size_t n = idx_i16(b);
    char path[256];
    for (int gz = 0; gz < 2; gz++) {
        tmp_path(path, sizeof path, gz ? "a.idx.gz" : "a.idx");
        write_bytes(path, b, n, gz);
        tc_tensor *t = NULL;
        CHECK_OK(tc_idx_read(path, &t));
        CHECK(t->dtype == TC_I16 && t->ndim == 2 && t->size[0] == 2 && t->size[1] == 3);
        double want[] = {-1, 2, 300, 4, 5, -600};
        CHECK(ct_same_vals(t, want, 6));
        tc_tensor_release(t);
        unlink(path);
    }
}

TEST(data_idx_bad_files)
{
    unsigned char b[64];
    size_t n = idx_i16(b);
    char path[256];
    tmp_path(path, sizeof path, "bad.idx");
    tc_tensor *t = NULL;
    write_bytes(path, b, n - 1, 0); /* truncated data */
    CHECK_ERR(tc_idx_read(path, &t), TC_ERR_IO, "header promises 6 elements");
    write_bytes(path, b, 9, 0); /* truncated header */
    CHECK_ERR(tc_idx_read(path, &t), TC_ERR_IO, "truncated header");
    unsigned char png[] = {0x89, 'P', 'N', 'G', 13, 10, 26, 10};
    write_bytes(path, png, sizeof png, 0);
    CHECK_ERR(tc_idx_read(path, &t), TC_ERR_IO, "not an IDX file");
    unsigned char huge[] = {0, 0, 0x08, 3, 0x7f, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 1, 2};
    write_bytes(path, huge, sizeof huge, 0); /* claims 2^93 bytes: an error, not an allocation */
    CHECK_ERR(tc_idx_read(path, &t), TC_ERR_IO, "header promises");
    b[2] = 0x0A;
    write_bytes(path, b, n, 0);
    CHECK_ERR(tc_idx_read(path, &t), TC_ERR_IO, "unknown element type");
    CHECK(t == NULL);
    unlink(path);
    CHECK_ERR(tc_idx_read("/nonexistent/dir/file", &t), TC_ERR_IO, "cannot open");
}

TEST(data_csv)
{
    char path[256];
    tmp_path(path, sizeof path, "a.csv.gz");
    const char *text = "a,b,c\n1, 2.5,3\n\n-4,5e2,6\r\n";
    write_bytes(path, text, strlen(text), 1);
    tc_tensor *t = NULL;
    CHECK_OK(tc_csv_read(path, ',', 1, TC_F64, &t));
    CHECK(t->ndim == 2 && t->size[0] == 2 && t->size[1] == 3);
    double want[] = {1, 2.5, 3, -4, 500, 6};
    CHECK(ct_same_vals(t, want, 6));
    tc_tensor_release(t);
    t = NULL;
    CHECK_ERR(tc_csv_read(path, ',', 0, TC_F32, &t), TC_ERR_IO, "line 1, column 1: 'a' is not a number");
    const char *ragged = "1,2\n3\n";
    write_bytes(path, ragged, strlen(ragged), 0);
    CHECK_ERR(tc_csv_read(path, ',', 0, TC_F32, &t), TC_ERR_IO, "line 2 has 1 fields");
    CHECK_ERR(tc_csv_read(path, ',', 0, TC_I32, &t), TC_ERR_DTYPE, "float32 or float64");
    CHECK(t == NULL);
    unlink(path);
}

static tc_loader *make_loader(tc_tensor *x, tc_tensor *y, int64_t bs, int shuffle, int drop_last)
{
    const tc_tensor *src[2] = {x, y};
    int32_t dts[2] = {TC_F32, TC_I64};
    double scale[2] = {0.5, 1}, shift[2] = {0, 1};
    tc_loader_config cfg = {.batch_size = bs, .shuffle = shuffle, .drop_last = drop_last, .prefetch = 2, .seed = 7};
    tc_loader *l = NULL;
    tc_loader_new(src, 2, dts, scale, shift, &cfg, &l);
    return l;
}

TEST(data_loader_order_conversion_and_epochs)
{
    int64_t xs[2] = {10, 3}, ys[1] = {10};
    tc_tensor *x = ct_arange(TC_U8, 2, xs), *y = ct_arange(TC_U8, 1, ys);
    tc_loader *l = make_loader(x, y, 4, 0, 0);
    CHECK(l && tc_loader_num_batches(l) == 3);
    tc_tensor *out[2];
    int done = 0, batches = 0;
    int64_t rows = 0;
    for (;;) {
        CHECK_OK(tc_loader_next(l, out, &done));
        if (done) break;
        CHECK(out[0]->dtype == TC_F32 && out[1]->dtype == TC_I64 && out[0]->size[1] == 3);
        for (int64_t r = 0; r < out[0]->size[0]; r++) {
            CHECK(ct_at(out[1], r) == rows + 1);           /* labels shifted by 1 */
            CHECK(ct_at(out[0], r * 3 + 2) == (rows * 3 + 2) * 0.5); /* pixels scaled */
            rows++;
        }
        tc_tensor_release(out[0]);
        tc_tensor_release(out[1]);
        batches++;
    }
    CHECK(batches == 3 && rows == 10);
    /* a second epoch after reset, left half-read, then freed: nothing leaks */
    CHECK_OK(tc_loader_reset(l));
    CHECK_OK(tc_loader_next(l, out, &done));
    CHECK(!done && out[0]->size[0] == 4);
    tc_tensor_release(out[0]);
    tc_tensor_release(out[1]);
    tc_loader_free(l);
    tc_tensor_release(x);
    tc_tensor_release(y);
}

TEST(data_loader_shuffle_is_a_permutation)
{
    int64_t xs[2] = {100, 2}, ys[1] = {100};
    tc_tensor *x = ct_arange(TC_U8, 2, xs), *y = ct_arange(TC_U8, 1, ys);
    tc_loader *l = make_loader(x, y, 32, 1, 1);
    CHECK(l && tc_loader_num_batches(l) == 3);
    for (int epoch = 0; epoch < 2; epoch++) {
        int seen[100] = {0}, total = 0, in_order = 1, done = 0;
        tc_tensor *out[2];
        while (tc_loader_next(l, out, &done) == TC_OK && !done) {
            for (int64_t r = 0; r < out[1]->size[0]; r++) {
                int label = (int)ct_at(out[1], r) - 1;
                CHECK(label >= 0 && label < 100);
                if (label >= 0 && label < 100) seen[label]++;
                if (label != total) in_order = 0;
                CHECK(ct_at(out[0], r * 2) == label * 2 * 0.5); /* rows stay paired */
                total++;
            }
            tc_tensor_release(out[0]);
            tc_tensor_release(out[1]);
        }
        CHECK(total == 96 && !in_order); /* drop_last: 3 full batches */
        int dup = 0;
        for (int i = 0; i < 100; i++) dup |= seen[i] > 1;
        CHECK(!dup);
        CHECK_OK(tc_loader_reset(l));
    }
    tc_loader_free(l);
    tc_tensor_release(x);
    tc_tensor_release(y);
}

TEST(data_loader_bad_input)
{
    int64_t xs[1] = {5}, ys[1] = {6};
    tc_tensor *x = ct_arange(TC_F32, 1, xs), *y = ct_arange(TC_F32, 1, ys);
    const tc_tensor *src[2] = {x, y};
    tc_loader_config cfg = {.batch_size = 2, .prefetch = 1};
    tc_loader *l = NULL;
    CHECK_ERR(tc_loader_new(src, 2, NULL, NULL, NULL, &cfg, &l), TC_ERR_SHAPE, "first size");
    cfg.batch_size = 0;
    CHECK_ERR(tc_loader_new(src, 1, NULL, NULL, NULL, &cfg, &l), TC_ERR_ARG, "batch size");
    CHECK(l == NULL);
    tc_tensor_release(x);
    tc_tensor_release(y);
}
