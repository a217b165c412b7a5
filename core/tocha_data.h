/* tocha_data.h -- the public C API of data loading (included by tocha.h; part of the
 * ffi.cdef): IDX and CSV readers, and a batch loader that assembles batches on a
 * background thread so a training loop never waits for them.
 */

/* Reads an IDX file (the MNIST format), raw or gzip-compressed (detected by content), into
 * a new tensor: u8/i8/i16/i32/f32/f64 by the file's type code, sizes from its header.
 * Truncated or malformed files are an error naming the file and what is wrong. */
tc_status tc_idx_read(const char *path, tc_tensor **out);

/* Reads a numeric CSV file (raw or gzip) into a new (rows, cols) tensor of dtype dt (f32 or
 * f64). delim: the field separator; skip_header: lines to skip first. Empty lines are
 * skipped; a row with a different number of fields or a field that is not a number is an
 * error naming the line and column. */
tc_status tc_csv_read(const char *path, char delim, int skip_header, tc_dtype dt, tc_tensor **out);

/* A batch loader over in-memory tensors that share their first size N (e.g. images and
 * labels). Each epoch visits the rows in order or in a fresh random permutation; each batch
 * holds, per source, the selected rows gathered into a new contiguous tensor, converted to
 * out_dtype[i] (< 0: the source's dtype) as value * scale[i] + shift[i] (for float outputs;
 * scale 1, shift 0 leave values alone). A background thread keeps up to `prefetch` batches
 * ready. The loader keeps its own references to the sources. */
typedef struct tc_loader tc_loader;
typedef struct tc_loader_config {
    int64_t batch_size;
    int32_t shuffle;   /* 1: a new permutation each epoch */
    int32_t drop_last; /* 1: drop the last batch when it is smaller than batch_size */
    int32_t prefetch;  /* batches kept ready (>= 1) */
    uint64_t seed;     /* permutation seed (epoch e uses seed + e) */
} tc_loader_config;
tc_status tc_loader_new(const tc_tensor *const *sources, int nsrc, const int32_t *out_dtype, const double *scale,
                        const double *shift, const tc_loader_config *cfg, tc_loader **out);
/* Batches per epoch. */
int64_t tc_loader_num_batches(const tc_loader *l);
/* The next batch of the current epoch: outs[0..nsrc) receive new references. *done = 1
 * (and outs untouched) when the epoch is over. */
tc_status tc_loader_next(tc_loader *l, tc_tensor **outs, int *done);
/* Starts the next epoch (a new permutation when shuffling), discarding unread batches. */
tc_status tc_loader_reset(tc_loader *l);
/* Stops the thread and releases everything. */
void tc_loader_free(tc_loader *l);
