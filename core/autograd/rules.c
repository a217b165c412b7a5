/* rules.c -- the gradient-rule table, assembled once from the rules_*.c files.
 *
 * Each rules file owns the entries of its op families (grad.h lists them); this file only
 * builds the table on first use. tests/c/test_grad_rules.c checks that every op flagged
 * DIFF in ops.def has a rule.
 */
#include "grad.h"
#include <pthread.h>

static tc_grad_rule table[TC_OP_COUNT];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    tc_grad_rules_ew(table);
    tc_grad_rules_reduce(table);
    tc_grad_rules_linalg(table);
    tc_grad_rules_shape(table);
    tc_grad_rules_nn(table);
    tc_grad_rules_rnn(table);
    tc_grad_rules_attn(table);
    tc_grad_rules_ln(table);
}

const tc_grad_rule *tc_grad_rule_of(tc_op op)
{
    if ((unsigned)op >= TC_OP_COUNT) return NULL;
    pthread_once(&table_once, build_table);
    return table[op].fn ? &table[op] : NULL;
}
