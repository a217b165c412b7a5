/* rules_ew.c -- gradient rules (see grad.h). */
#include "grad.h"

void tc_grad_rules_ew(tc_grad_rule *t)
{
    (void)t;
}
