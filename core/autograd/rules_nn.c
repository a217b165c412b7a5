/* rules_nn.c -- gradient rules (see grad.h). */
#include "grad.h"

void tc_grad_rules_nn(tc_grad_rule *t)
{
    (void)t;
}
