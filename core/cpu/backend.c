/* backend.c -- the CPU backend: the kernel table, one entry per op, generated from
 * ops.def by kind (each family file provides one kernel per kind). */
#include "../internal.h"

#define CPU_KERNEL_EW tc_cpu_ew
#define CPU_KERNEL_CONVERT tc_cpu_convert
#define CPU_KERNEL_SELECT tc_cpu_select
#define CPU_KERNEL_REDUCE tc_cpu_reduce
#define CPU_KERNEL_SCAN tc_cpu_scan
#define CPU_KERNEL_MATMUL tc_cpu_matmul
#define CPU_KERNEL_INDEX tc_cpu_index
#define CPU_KERNEL_SORT tc_cpu_sort
#define CPU_KERNEL_JOIN tc_cpu_join
#define CPU_KERNEL_VIEW NULL /* views never reach a backend */
#define CPU_KERNEL_RANDOM tc_cpu_random
#define CPU_KERNEL_CONV tc_cpu_conv
#define CPU_KERNEL_POOL tc_cpu_pool
#define CPU_KERNEL_SOFTMAX tc_cpu_softmax
#define CPU_KERNEL_NORM tc_cpu_norm
#define CPU_KERNEL_RNN tc_cpu_rnn
#define CPU_KERNEL_ATTN tc_cpu_attn
#define CPU_KERNEL_OPTIM tc_cpu_optim

const tc_backend tc_cpu_backend = {
    .name = "cpu",
    .kernels =
        {
#define TC_EW(ID, nm, ar, np, fl, ffmt, ifmt) [TC_OP_##ID] = tc_cpu_ew,
#define TC_OPK(ID, nm, kind, nin, nout, fl) [TC_OP_##ID] = CPU_KERNEL_##kind,
#include "../ops.def"
#undef TC_EW
#undef TC_OPK
        },
};
