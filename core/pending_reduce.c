/* pending_reduce.c -- TEMPORARY placeholder while the reduce family is written: every
 * op reports TC_ERR_UNSUPPORTED. Delete this file when core/cpu/reduce.c lands. */
#include "internal.h"
tc_status tc_prepare_reduce(const tc_kcall *k, tc_outspec *spec)
{
    (void)spec;
    return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name);
}
tc_status tc_cpu_reduce(const tc_kcall *k) { return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name); }
tc_status tc_prepare_scan(const tc_kcall *k, tc_outspec *spec)
{
    (void)spec;
    return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name);
}
tc_status tc_cpu_scan(const tc_kcall *k) { return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name); }
