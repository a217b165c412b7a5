/* rules_linalg.c -- gradient rules (see grad.h). */
#include "grad.h"

void tc_grad_rules_linalg(tc_grad_rule *t)
{
    (void)t;
}
