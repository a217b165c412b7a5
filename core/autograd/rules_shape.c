/* rules_shape.c -- gradient rules (see grad.h). */
#include "grad.h"

void tc_grad_rules_shape(tc_grad_rule *t)
{
    (void)t;
}
