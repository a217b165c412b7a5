/* ops.c -- the op metadata table, generated from ops.def: names, kinds, arities, flags and
 * the formula text of elementwise ops (the CUDA backend and the fusion code generator
 * compile the same text). */
#include "internal.h"

#define DIFF TC_OPF_DIFF
#define FLT TC_OPF_FLT
#define INT TC_OPF_INT
#define BOOL TC_OPF_BOOL
#define CMP TC_OPF_CMP
#define ZDIV TC_OPF_ZDIV

static const tc_opinfo op_table[TC_OP_COUNT] = {
#define TC_EW(ID, nm, arity, np, fl, ffmt, ifmt) \
    [TC_OP_##ID] = {nm, TC_KIND_EW, arity, 1, np, fl, #ffmt, #ifmt},
#define TC_OPK(ID, nm, kind, nin, nout, fl) [TC_OP_##ID] = {nm, TC_KIND_##kind, nin, nout, 0, fl, "", ""},
#include "ops.def"
#undef TC_EW
#undef TC_OPK
};

const tc_opinfo *tc_op_info(tc_op op) { return (unsigned)op < TC_OP_COUNT ? &op_table[op] : NULL; }

int tc_op_lookup(const char *name)
{
    for (int i = 0; i < TC_OP_COUNT; i++)
        if (strcmp(op_table[i].name, name) == 0) return i;
    return -1;
}
