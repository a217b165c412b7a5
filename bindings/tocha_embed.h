/* tocha_embed.h -- the embedding API: a host program runs tocha's Lua (Torch7 API) inside
 * itself, hands its own tensors in without copying and takes results back.
 *
 *   tocha_interp *I;
 *   if (tocha_interp_new(&I)) { fprintf(stderr, "%s\n", tocha_last_error()); ... }
 *   tc_tensor *x;                                      // host memory, no copy
 *   tc_tensor_from_data(buf, TC_F32, 1, sizes, NULL, NULL, NULL, &x);
 *   tocha_set_tensor(I, "x", x);                       // Lua global x views buf
 *   if (tocha_run_string(I, "y = x + x")) puts(tocha_last_error());
 *   tc_tensor *y;
 *   tocha_get_tensor(I, "y", &y);                      // a new reference
 *   ...
 *   tc_tensor_release(y); tc_tensor_release(x);
 *   tocha_interp_close(I);
 *
 * Contract: every call returns a tc_status (TC_OK = 0); on failure tocha_last_error() has
 * the message, with the Lua traceback for errors raised by Lua code. A Lua error never
 * escapes as a longjmp and nothing here aborts or exits. Tensor pointers passed in are
 * borrowed; pointers returned through out-parameters are new references.
 *
 * Status codes for Lua failures (tc_status has no Lua-specific code):
 *   TC_ERR_ARG       bad arguments, a syntax error, or an error raised while running Lua
 *   TC_ERR_IO        a script file that cannot be read
 *   TC_ERR_MEMORY    Lua ran out of memory
 *   TC_ERR_INTERNAL  the error handler itself failed
 *
 * An interp is used by one thread at a time; separate interps are independent. Link with
 * -ltocha_embed -ltocha.
 */
#ifndef TOCHA_EMBED_H
#define TOCHA_EMBED_H

#include "tocha.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tocha_interp tocha_interp;
struct lua_State;

/* A new interpreter: LuaJIT with the standard libraries, package.path finding tocha's lua/
 * (from $TOCHA_HOME, else ../lua next to libtocha_embed.so), and `require 'torch'` done.
 * *out is owned by the caller (tocha_interp_close). */
tc_status tocha_interp_new(tocha_interp **out);

/* Releases every tensor the interpreter holds, then closes it. NULL is allowed. */
void tocha_interp_close(tocha_interp *I);

/* Runs a chunk of Lua code. */
tc_status tocha_run_string(tocha_interp *I, const char *code);

/* Runs a script file ("-" reads standard input) with argv[0..argc-1] as its `...` and as
 * the global `arg` = {[0] = path, argv[0], ..., argv[argc-1]}. Negative indices of an
 * existing `arg` (the interpreter and its options, from tocha_set_args) are kept. */
tc_status tocha_run_file(tocha_interp *I, const char *path, int argc, const char **argv);

/* Sets the global `arg` the way the lua command does: arg[i - script_index] = argv[i], so
 * the script is arg[0], its arguments arg[1..], the interpreter and options arg[-n..-1]. */
tc_status tocha_set_args(tocha_interp *I, int argc, const char **argv, int script_index);

/* require(module), leaving the module's value where require puts it (package.loaded). */
tc_status tocha_require(tocha_interp *I, const char *module);

/* Sets the global `name` to a Lua tensor viewing t (borrowed: Lua takes its own
 * reference, so the host may release t at once). With tc_tensor_from_data, Lua code works
 * on the host's memory in place. */
tc_status tocha_set_tensor(tocha_interp *I, const char *name, tc_tensor *t);

/* *out = the tensor held by the global `name`; a new reference (tc_tensor_release it).
 * TC_ERR_ARG when the global is not a tensor. */
tc_status tocha_get_tensor(tocha_interp *I, const char *name, tc_tensor **out);

/* The message of the last failed tocha_* call on this thread (never NULL). Unlike
 * tc_last_error, whose buffer is short, it keeps a whole Lua traceback; tc_last_error gets
 * the same text, truncated. */
const char *tocha_last_error(void);

/* The interpreter's lua_State, for hosts that use the Lua C API (the `tocha` executable
 * installs its REPL through it). Do not lua_close it. */
struct lua_State *tocha_interp_lua(tocha_interp *I);

#ifdef __cplusplus
}
#endif

#endif /* TOCHA_EMBED_H */
