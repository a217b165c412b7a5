/* cub/cub.cuh -- the CUDA emulator's cub (tests only; tests/emu/emu.h says what the emulator
 * is). The emulator's include path puts tests/emu ahead of the CUDA headers, so
 * `#include <cub/cub.cuh>` in core/cuda finds this file. It provides what the backend uses,
 * with cub's signatures and its two-phase temporary-storage protocol:
 *   cub::DeviceScan::ExclusiveSum                (core/cuda/index.cu)
 *   cub::DeviceRadixSort::SortPairs              (core/cuda/sort_pairs.h: one segment)
 *   cub::DeviceSegmentedSort::StableSortPairs    (core/cuda/sort_pairs.h: several)
 * d_temp_storage == nullptr: the size is written to temp_storage_bytes, nothing else done.
 * Otherwise the temporary storage (at least the size asked for, as cub's AliasTemporaries
 * demands) and every pointer range are checked against the live device allocations, then
 * the computation is queued on the stream (emu::enqueue: at once, or at graph replay).
 * Errors: cudaErrorInvalidValue, with a note naming the bad argument.
 *
 * Key order of the sort: cub's radix order (device_radix_sort.cuh, "Floating-Point Special
 * Cases"): unsigned keys as they are, signed ones by value, floats by their bits transformed
 * so that negatives come first, with -0.0 and +0.0 EQUIVALENT (stable: input order kept) and
 * NaNs by their transformed bits: sign-set NaNs before -inf, sign-clear NaNs after +inf.
 * NOTE: real DeviceSegmentedSort sorts small segments (a few hundred items) by comparison
 * (operator<) instead, where NaN has no defined place; core/cuda/sort.cu only sends rows of
 * more than 2048 items here (radix path), and its callers canonicalise NaN and -0.0 first.
 */
#ifndef TC_EMU_CUB_CUH
#define TC_EMU_CUB_CUH

#include "../emu.h"
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <iterator>
#include <type_traits>
#include <vector>

namespace cub {
namespace emu_detail {

/* The temporary storage this emulation asks for: grows with the problem, as cub's does, so
 * a caller that sizes it with one count and runs with another is caught. */
inline size_t temp_bytes(int64_t items, int64_t segments)
{
    return 256 + 8 * (size_t)((items + segments + 255) / 256);
}

/* Phase two's check of the temporary storage: live device memory, at least `need` bytes. */
inline bool temp_ok(const void *temp, size_t have, size_t need, const char *what)
{
    if (have < need) {
        emu::note("%s: temp_storage_bytes %zu < %zu (the size the sizing call returned)", what, have, need);
        return false;
    }
    char w[128];
    snprintf(w, sizeof w, "%s d_temp_storage", what);
    return emu::device_range(temp, have, w);
}

/* The range [p, p + n) of an argument, when it is a pointer (other iterators cannot be
 * checked); n == 0 touches nothing. */
template <class It> inline bool range_ok(It p, int64_t n, const char *what, const char *arg)
{
    if constexpr (std::is_pointer_v<It>) {
        if (n <= 0) return true;
        char w[128];
        snprintf(w, sizeof w, "%s %s", what, arg);
        return emu::device_range((const void *)p, (size_t)n * sizeof(*p), w);
    } else {
        (void)p, (void)n, (void)what, (void)arg;
        return true;
    }
}

/* Whether two pointer ranges of n elements share a byte (false for non-pointers). */
template <class P, class Q> inline bool overlaps(P a, Q b, int64_t n)
{
    if constexpr (std::is_pointer_v<P> && std::is_pointer_v<Q>) {
        if (n <= 0) return false;
        uintptr_t a0 = (uintptr_t)a, a1 = a0 + (uintptr_t)n * sizeof(*a);
        uintptr_t b0 = (uintptr_t)b, b1 = b0 + (uintptr_t)n * sizeof(*b);
        return a0 < b1 && b0 < a1;
    } else {
        (void)a, (void)b, (void)n;
        return false;
    }
}

/* A key's radix-ordered unsigned image (cub's Traits<K>::TwiddleIn, with ProcessFloatMinusZero:
 * -0.0 takes +0.0's image). Comparing images compares keys. */
template <class K> inline auto ordered_bits(K k)
{
    static_assert(std::is_arithmetic_v<K>, "emulated cub sorts arithmetic keys only");
    using U = std::conditional_t<sizeof(K) == 1, uint8_t,
                                 std::conditional_t<sizeof(K) == 2, uint16_t,
                                                    std::conditional_t<sizeof(K) == 4, uint32_t, uint64_t>>>;
    constexpr U top = (U)((U)1 << (8 * sizeof(U) - 1));
    U u;
    memcpy(&u, &k, sizeof u);
    if constexpr (std::is_floating_point_v<K>) {
        if (u == top) u = 0;                 /* -0.0 sorts as +0.0 */
        return (U)((u & top) ? (U)~u : (U)(u ^ top));
    } else if constexpr (std::is_signed_v<K>) {
        return (U)(u ^ top);
    } else {
        return u;
    }
}

} // namespace emu_detail

/* ---- DeviceScan ------------------------------------------------------------------------------ */

struct DeviceScan {
    /* d_out[i] = d_in[0] + ... + d_in[i-1] (d_out[0] = 0), accumulated in the type of
     * in + in (as cub's plus<> accumulator); in-place (d_in == d_out) allowed, as cub. */
    template <typename InputIteratorT, typename OutputIteratorT, typename NumItemsT>
    static cudaError_t ExclusiveSum(void *d_temp_storage, size_t &temp_storage_bytes, InputIteratorT d_in,
                                    OutputIteratorT d_out, NumItemsT num_items, cudaStream_t stream = 0)
    {
        const char *what = "cub::DeviceScan::ExclusiveSum";
        int64_t n = (int64_t)num_items;
        size_t need = emu_detail::temp_bytes(n, 0);
        if (!d_temp_storage) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (!emu_detail::temp_ok(d_temp_storage, temp_storage_bytes, need, what) ||
            !emu_detail::range_ok(d_in, n, what, "d_in") || !emu_detail::range_ok(d_out, n, what, "d_out"))
            return cudaErrorInvalidValue;
        if (n <= 0) return cudaSuccess;
        emu::enqueue(stream, what, [d_in, d_out, n] {
            using T = typename std::iterator_traits<InputIteratorT>::value_type;
            using Acc = decltype(T{} + T{});
            Acc acc{};
            for (int64_t i = 0; i < n; i++) {
                Acc v = d_in[i]; /* read before the write: in place */
                d_out[i] = acc;
                acc = acc + v;
            }
        });
        return cudaSuccess;
    }

    template <typename IteratorT, typename NumItemsT>
    static cudaError_t ExclusiveSum(void *d_temp_storage, size_t &temp_storage_bytes, IteratorT d_data,
                                    NumItemsT num_items, cudaStream_t stream = 0)
    {
        return ExclusiveSum(d_temp_storage, temp_storage_bytes, d_data, d_data, num_items, stream);
    }
};

/* ---- pair sorts ------------------------------------------------------------------------------- */

namespace emu_detail {

/* Phase two's argument checks shared by the pair sorts: every pointer range live device
 * memory, outputs disjoint from the inputs (cub's precondition). False: noted. */
template <typename KeyT, typename ValueT>
inline bool pairs_ok(const KeyT *kin, KeyT *kout, const ValueT *vin, ValueT *vout, int64_t n, const char *what)
{
    if (!range_ok(kin, n, what, "d_keys_in") || !range_ok(kout, n, what, "d_keys_out") ||
        !range_ok(vin, n, what, "d_values_in") || !range_ok(vout, n, what, "d_values_out"))
        return false;
    const char *bad = overlaps(kout, kin, n)     ? "d_keys_out overlaps d_keys_in"
                      : overlaps(kout, vin, n)   ? "d_keys_out overlaps d_values_in"
                      : overlaps(vout, kin, n)   ? "d_values_out overlaps d_keys_in"
                      : overlaps(vout, vin, n)   ? "d_values_out overlaps d_values_in"
                      : overlaps(kout, vout, n)  ? "d_keys_out overlaps d_values_out"
                                                 : nullptr;
    if (bad) emu::note("%s: %s (cub requires outputs disjoint from its inputs)", what, bad);
    return !bad;
}

/* Items [b, e) sorted stably by their keys' radix images, bits [lo, hi) (ix: reused room). */
template <typename KeyT, typename ValueT>
inline void sort_range(const KeyT *kin, KeyT *kout, const ValueT *vin, ValueT *vout, int64_t b, int64_t e, int lo,
                       int hi, std::vector<int64_t> &ix)
{
    auto digits = [lo, hi](KeyT k) {
        uint64_t u = (uint64_t)ordered_bits(k) >> lo;
        return hi - lo >= 64 ? u : u & (((uint64_t)1 << (hi - lo)) - 1);
    };
    ix.resize((size_t)(e - b));
    for (int64_t i = b; i < e; i++) ix[(size_t)(i - b)] = i;
    std::stable_sort(ix.begin(), ix.end(), [&](int64_t x, int64_t y) { return digits(kin[x]) < digits(kin[y]); });
    for (int64_t i = b; i < e; i++) {
        kout[i] = kin[ix[(size_t)(i - b)]];
        vout[i] = vin[ix[(size_t)(i - b)]];
    }
}

} // namespace emu_detail

/* ---- DeviceRadixSort ------------------------------------------------------------------------- */

struct DeviceRadixSort {
    /* The num_items pairs sorted ascending in the radix key order above, considering the key
     * image's bits [begin_bit, end_bit), equal keys in input order (stable); the values
     * follow their keys. Outputs must not overlap inputs (the non-DoubleBuffer form). */
    template <typename KeyT, typename ValueT, typename NumItemsT>
    static cudaError_t SortPairs(void *d_temp_storage, size_t &temp_storage_bytes, const KeyT *d_keys_in,
                                 KeyT *d_keys_out, const ValueT *d_values_in, ValueT *d_values_out,
                                 NumItemsT num_items, int begin_bit = 0, int end_bit = sizeof(KeyT) * 8,
                                 cudaStream_t stream = 0)
    {
        const char *what = "cub::DeviceRadixSort::SortPairs";
        int64_t n = (int64_t)num_items;
        if (n < 0 || begin_bit < 0 || end_bit > (int)sizeof(KeyT) * 8 || begin_bit > end_bit) {
            emu::note("%s: num_items %lld, bits [%d, %d) of a %d-bit key", what, (long long)n, begin_bit, end_bit,
                      (int)sizeof(KeyT) * 8);
            return cudaErrorInvalidValue;
        }
        size_t need = emu_detail::temp_bytes(n, 1);
        if (!d_temp_storage) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (!emu_detail::temp_ok(d_temp_storage, temp_storage_bytes, need, what)) return cudaErrorInvalidValue;
        if (n == 0) return cudaSuccess;
        if (!emu_detail::pairs_ok(d_keys_in, d_keys_out, d_values_in, d_values_out, n, what))
            return cudaErrorInvalidValue;
        emu::enqueue(stream, what, [=] {
            std::vector<int64_t> ix;
            emu_detail::sort_range(d_keys_in, d_keys_out, d_values_in, d_values_out, 0, n, begin_bit, end_bit, ix);
        });
        return cudaSuccess;
    }
};

/* ---- DeviceSegmentedSort ------------------------------------------------------------------- */

struct DeviceSegmentedSort {
    /* Segment i = [d_begin_offsets[i], d_end_offsets[i]) of the items (empty when end <=
     * begin) sorted ascending in the radix key order above, equal keys in input order; the
     * values follow their keys. Items outside every segment are neither read nor written.
     * Outputs must not overlap inputs or offsets (cub's precondition, checked here). */
    template <typename KeyT, typename ValueT, typename BeginOffsetIteratorT, typename EndOffsetIteratorT>
    static cudaError_t StableSortPairs(void *d_temp_storage, size_t &temp_storage_bytes, const KeyT *d_keys_in,
                                       KeyT *d_keys_out, const ValueT *d_values_in, ValueT *d_values_out,
                                       int64_t num_items, int64_t num_segments, BeginOffsetIteratorT d_begin_offsets,
                                       EndOffsetIteratorT d_end_offsets, cudaStream_t stream = 0)
    {
        const char *what = "cub::DeviceSegmentedSort::StableSortPairs";
        if (num_items < 0 || num_segments < 0) {
            emu::note("%s: num_items %lld / num_segments %lld is negative", what, (long long)num_items,
                      (long long)num_segments);
            return cudaErrorInvalidValue;
        }
        size_t need = emu_detail::temp_bytes(num_items, num_segments);
        if (!d_temp_storage) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (!emu_detail::temp_ok(d_temp_storage, temp_storage_bytes, need, what)) return cudaErrorInvalidValue;
        if (num_items == 0 || num_segments == 0) return cudaSuccess;
        using namespace emu_detail;
        if (!pairs_ok(d_keys_in, d_keys_out, d_values_in, d_values_out, num_items, what) ||
            !range_ok(d_begin_offsets, num_segments, what, "d_begin_offsets") ||
            !range_ok(d_end_offsets, num_segments, what, "d_end_offsets"))
            return cudaErrorInvalidValue;
        /* outputs against the offset arrays (different lengths, so byte ranges) */
        auto hit = [&](const void *o, size_t ob, auto off) {
            if constexpr (std::is_pointer_v<decltype(off)>) {
                uintptr_t a0 = (uintptr_t)o, a1 = a0 + ob, b0 = (uintptr_t)off,
                          b1 = b0 + (uintptr_t)num_segments * sizeof(*off);
                return a0 < b1 && b0 < a1;
            } else {
                (void)o, (void)ob, (void)off;
                return false;
            }
        };
        size_t kb = (size_t)num_items * sizeof(KeyT), vb = (size_t)num_items * sizeof(ValueT);
        if (hit(d_keys_out, kb, d_begin_offsets) || hit(d_keys_out, kb, d_end_offsets) ||
            hit(d_values_out, vb, d_begin_offsets) || hit(d_values_out, vb, d_end_offsets)) {
            emu::note("%s: an output overlaps the segment offsets (cub requires outputs disjoint from its inputs)",
                      what);
            return cudaErrorInvalidValue;
        }
        emu::enqueue(stream, what,
                     [=] {
                         std::vector<int64_t> ix;
                         for (int64_t s = 0; s < num_segments; s++) {
                             int64_t b = (int64_t)d_begin_offsets[s], e = (int64_t)d_end_offsets[s];
                             if (e <= b) continue;
                             if (b < 0 || e > num_items) {
                                 /* a GPU would read and write out of bounds: reported, skipped */
                                 emu::note("%s: segment %lld [%lld, %lld) lies outside the %lld items", what,
                                           (long long)s, (long long)b, (long long)e, (long long)num_items);
                                 continue;
                             }
                             sort_range(d_keys_in, d_keys_out, d_values_in, d_values_out, b, e, 0,
                                        (int)sizeof(KeyT) * 8, ix);
                         }
                     });
        return cudaSuccess;
    }
};

} // namespace cub

#endif /* TC_EMU_CUB_CUH */
