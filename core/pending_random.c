/* pending_random.c -- TEMPORARY placeholder while the random family is written: every
 * op reports TC_ERR_UNSUPPORTED. Delete this file when core/cpu/random.c lands. */
#include "internal.h"
tc_status tc_prepare_random(const tc_kcall *k, tc_outspec *spec)
{
    (void)spec;
    return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name);
}
tc_status tc_cpu_random(const tc_kcall *k) { return tc_set_error(TC_ERR_UNSUPPORTED, "%s: not implemented yet", k->info->name); }
