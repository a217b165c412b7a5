/* sort_pairs.h -- the stable (key, position) pair sort that sort.cu's long rows and
 * random_seq.cu's multinomial without replacement share: `rows` segments of `n` pairs each,
 * laid end to end, sorted ascending by key in cub's radix order, equal keys keeping their
 * input order.
 *
 * One segment goes to cub::DeviceRadixSort, which spreads a sort over the whole GPU; several
 * go to cub::DeviceSegmentedSort, which gives a large segment one block, so a single long
 * row through it would run on one SM while the others idle. Both are stable and take 64-bit
 * item counts (CCCL 3). Neither waits on the host for one segment, so a one-row sort can be
 * captured in a CUDA graph; the segmented sort copies group sizes to the host when it has
 * many segments, which is why sort.cu refuses several long rows inside a capture.
 * Callers canonicalise float keys first (one NaN, +0.0 for -0.0): cub's radix order puts
 * NaNs by their bits and counts -0.0 equal to +0.0.
 * NOTE: compiled with nvcc 13 for sm_90 but never run on a GPU (docs/cuda.md); the emulator's
 * cub (tests/emu/cub/cub.cuh) runs both paths.
 */
#ifndef TC_CUDA_SORT_PAIRS_H
#define TC_CUDA_SORT_PAIRS_H

#include "kern.h"
#include <cub/cub.cuh>

namespace tck {

/* Sorts kin / vin (rows * n pairs) into kout / vout, which must not overlap the inputs.
 * offsets: rows + 1 segment starts (0, n, 2n, ...) on the device, read only when rows > 1
 * (may be null otherwise). tmp receives cub's temporary storage. name: the op, for errors. */
template <class K>
tc_status sort_pairs(scratch &tmp, const K *kin, K *kout, const int64_t *vin, int64_t *vout, int64_t rows, int64_t n,
                     const int64_t *offsets, const char *name)
{
    const int64_t total = rows * n;
    size_t bytes = 0;
    for (int pass = 0; pass < 2; pass++) {
        void *t = pass ? tmp.p : nullptr;
        cudaError_t e = rows == 1
                            ? cub::DeviceRadixSort::SortPairs(t, bytes, kin, kout, vin, vout, total, 0,
                                                              (int)(sizeof(K) * 8), cu_stream())
                            : cub::DeviceSegmentedSort::StableSortPairs(t, bytes, kin, kout, vin, vout, total, rows,
                                                                        offsets, offsets + 1, cu_stream());
        if (tc_status s = cu_check(e, name)) return s;
        if (pass == 0)
            if (tc_status s = tmp.get(bytes ? bytes : 1, name)) return s;
    }
    return TC_OK;
}

} /* namespace tck */

#endif /* TC_CUDA_SORT_PAIRS_H */
