/* fuse.h -- limits shared by the fusion pass (fuse.c) and the fused-group evaluator
 * (fused.c): the pass never forms a group the evaluator cannot plan on its stack.
 */
#ifndef TC_GRAPH_FUSE_H
#define TC_GRAPH_FUSE_H

/* Members of one group (elementwise nodes plus at most one trailing reduction). Past this a
 * group is closed and the next node starts another: scratch per member shrinks the block. */
#define TC_FUSE_MAX_MEMBERS 32
/* Distinct values a group reads from outside. */
#define TC_FUSE_MAX_INS 32

#endif
