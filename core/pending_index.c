/* pending_index.c -- TEMPORARY placeholder while the index family is written: every
 * op reports TC_ERR_UNSUPPORTED. Delete this file when core/cpu/index.c lands. */
#include "internal.h"
tc_status tc_prepare_index(const tc_kcall *k, tc_outspec *spec)
{
    (void)spec;
    return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name);
}
tc_status tc_cpu_index(const tc_kcall *k) { return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name); }
tc_status tc_prepare_join(const tc_kcall *k, tc_outspec *spec)
{
    (void)spec;
    return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name);
}
tc_status tc_cpu_join(const tc_kcall *k) { return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name); }
