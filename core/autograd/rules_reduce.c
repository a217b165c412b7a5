/* rules_reduce.c -- gradient rules (see grad.h). */
#include "grad.h"

void tc_grad_rules_reduce(tc_grad_rule *t)
{
    (void)t;
}
