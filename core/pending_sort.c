/* pending_sort.c -- TEMPORARY placeholder while the sort family is written: every
 * op reports TC_ERR_UNSUPPORTED. Delete this file when core/cpu/sort.c lands. */
#include "internal.h"
tc_status tc_prepare_sort(const tc_kcall *k, tc_outspec *spec)
{
    (void)spec;
    return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name);
}
tc_status tc_cpu_sort(const tc_kcall *k) { return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name); }
