/* embed.c -- the embedding API (tocha_embed.h): a LuaJIT state with tocha loaded, driven
 * from C through status codes.
 *
 * This is library code: it must never abort, exit or let a Lua error longjmp out into the
 * host. Every Lua API call that can raise (even an allocation) therefore runs inside
 * lua_cpcall, and user code runs under lua_pcall with a traceback handler. A failure is
 * turned into a tc_status plus a message in this file's thread-local buffer (long enough
 * for a traceback) and, truncated, in libtocha's tc_last_error.
 *
 * Tensors cross the boundary as raw tc_tensor* passed to Lua as light userdata: a small
 * Lua helper table (kept in the registry) wraps them with torch._wrap_borrowed, or
 * retains a global's pointer and writes it into the host's slot. No tensor data is copied.
 */
#include "tocha_embed.h"

#include <dlfcn.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tocha_interp {
    lua_State *L;
    int helpers; /* registry reference of the helper table below */
};

/* ---- errors ---------------------------------------------------------------------------- */

/* A Lua traceback easily exceeds libtocha's message buffer, so the whole text lives here. */
static _Thread_local char error_buf[16384];

const char *tocha_last_error(void) { return error_buf; }

static tc_status fail(tc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_buf, sizeof error_buf, fmt, ap);
    va_end(ap);
    return tc_set_error(code, "%s", error_buf);
}

static tc_status code_of(int lua_status)
{
    switch (lua_status) {
    case LUA_ERRMEM: return TC_ERR_MEMORY;
    case LUA_ERRERR: return TC_ERR_INTERNAL;
    case LUA_ERRFILE: return TC_ERR_IO;
    default: return TC_ERR_ARG; /* LUA_ERRSYNTAX, LUA_ERRRUN */
    }
}

/* Message handler: the error text (or a description of a non-string error) followed by
 * the Lua stack traceback. */
static int traceback(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1);
        else
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    /* the last frames are C: this file's body that called the chunk, require: noise */
    const char *tb = lua_tostring(L, -1);
    size_t len = strlen(tb);
    for (;;) {
        const char *line = tb + len;
        while (line > tb && line[-1] != '\n') line--;
        if (line == tb || strncmp(line, "\t[C]: ", 6) != 0) break;
        len = (size_t)(line - 1 - tb);
    }
    static const char header[] = "\nstack traceback:";
    size_t hl = sizeof header - 1;
    if (len >= hl && memcmp(tb + len - hl, header, hl) == 0) len -= hl; /* no Lua frames */
    lua_pushlstring(L, tb, len);
    return 1;
}

/* Calls the function below its nargs arguments with the traceback handler. On an error
 * sets *status (and the message) and returns non-zero; the stack then holds nothing of the
 * call. On success nres results are left on the stack. */
static int docall(lua_State *L, int nargs, int nres, tc_status *status)
{
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    int st = lua_pcall(L, nargs, nres, base);
    lua_remove(L, base);
    if (st != 0) {
        const char *m = lua_tostring(L, -1);
        *status = fail(code_of(st), "%s", m ? m : "(error object is not a string)");
        lua_pop(L, 1);
    }
    return st;
}

/* Every protected body gets one of these (first member of its argument struct). */
typedef struct call_head {
    tocha_interp *I;
    tc_status status;
} call_head;

/* Runs body(ud) under lua_cpcall: an error that escapes the body (an allocation failure
 * in a push, a bad stack size) becomes a status too. */
static tc_status protect(tocha_interp *I, lua_CFunction body, call_head *ud, const char *what)
{
    lua_State *L = I->L;
    int top = lua_gettop(L);
    ud->I = I;
    ud->status = TC_OK;
    int st = lua_cpcall(L, body, ud);
    if (st != 0) {
        const char *m = lua_tostring(L, -1);
        ud->status = fail(code_of(st), "%s: %s", what, m ? m : "(error object is not a string)");
    }
    lua_settop(L, top);
    return ud->status;
}

/* ---- creation ------------------------------------------------------------------------ */

/* The Lua half of set/get tensor and of close: Lua owns the handle registry, so only Lua
 * can wrap a pointer or release everything. Functions return an error string or nothing,
 * so usage errors come back without a traceback. */
static const char helpers_src[] =
    "local ffi, torch = require 'ffi', require 'torch'\n"
    "local h = {}\n"
    "function h.set(name, p) rawset(_G, name, torch._wrap_borrowed(p)) end\n"
    "function h.get(name, slot)\n"
    "  local v = rawget(_G, name)\n"
    "  if not torch.isTensor(v) then\n"
    "    return ('global \\'%s\\' is not a tensor (it is a %s)'):format(name, type(v))\n"
    "  end\n"
    "  if v.p == nil then return ('global \\'%s\\' is a freed tensor'):format(name) end\n"
    "  torch._C.tc_tensor_retain(v.p)\n"
    "  ffi.cast('tc_tensor**', slot)[0] = v.p\n"
    "end\n"
    "function h.release_all() if torch._release_all then torch._release_all() end end\n"
    "return h\n";

/* Where tocha's Lua library is: $TOCHA_HOME/lua, else the first of ../lua, ../../lua and
 * ../share/tocha/lua beside this shared object (a build folder of the source tree, a
 * nested one, an install prefix) that holds torch/init.lua, else ./lua. */
static void find_lua_dir(char *buf, size_t cap)
{
    const char *home = getenv("TOCHA_HOME");
    if (home != NULL && home[0] != '\0') {
        snprintf(buf, cap, "%s/lua", home);
        return;
    }
    static const char *const rel[] = {"/../lua", "/../../lua", "/../share/tocha/lua"};
    Dl_info info;
    char real[PATH_MAX], probe[PATH_MAX + 64];
    if (dladdr((void *)&tocha_interp_new, &info) && info.dli_fname != NULL &&
        realpath(info.dli_fname, real) != NULL) {
        char *slash = strrchr(real, '/'); /* strip the file name */
        if (slash != NULL) *slash = '\0';
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(probe, sizeof probe, "%s%s/torch/init.lua", real, rel[i]);
            char dir[PATH_MAX];
            if (access(probe, R_OK) == 0 && snprintf(dir, sizeof dir, "%s%s", real, rel[i]) > 0 &&
                realpath(dir, buf) != NULL && strlen(buf) < cap)
                return;
        }
    }
    snprintf(buf, cap, "lua");
}

typedef struct new_call {
    call_head h;
    const char *lua_dir;
    int helpers;
} new_call;

static int new_body(lua_State *L)
{
    new_call *c = lua_touserdata(L, 1);
    luaL_openlibs(L);
    /* tocha's directory first, then whatever LUA_PATH or the default gave */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", c->lua_dir, c->lua_dir, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);

    lua_getglobal(L, "require");
    lua_pushstring(L, "torch");
    if (docall(L, 1, 0, &c->h.status)) return 0;
    if (luaL_loadbuffer(L, helpers_src, sizeof helpers_src - 1, "=tocha_embed")) {
        c->h.status = fail(TC_ERR_INTERNAL, "%s", lua_tostring(L, -1));
        return 0;
    }
    if (docall(L, 0, 1, &c->h.status)) return 0;
    c->helpers = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

tc_status tocha_interp_new(tocha_interp **out)
{
    if (out == NULL) return fail(TC_ERR_ARG, "tocha_interp_new: out is NULL");
    *out = NULL;
    tocha_interp *I = calloc(1, sizeof *I);
    if (I == NULL) return fail(TC_ERR_MEMORY, "tocha_interp_new: out of memory");
    I->L = luaL_newstate();
    if (I->L == NULL) {
        free(I);
        return fail(TC_ERR_MEMORY, "tocha_interp_new: cannot create a Lua state");
    }
    char lua_dir[PATH_MAX + 8];
    find_lua_dir(lua_dir, sizeof lua_dir);
    new_call c = {.lua_dir = lua_dir, .helpers = LUA_NOREF};
    tc_status s = protect(I, new_body, &c.h, "tocha_interp_new");
    if (s != TC_OK) {
        /* keep the message: closing runs finalizers that could overwrite it */
        tocha_interp_close(I);
        return s;
    }
    I->helpers = c.helpers;
    *out = I;
    return TC_OK;
}

lua_State *tocha_interp_lua(tocha_interp *I) { return I ? I->L : NULL; }

/* ---- close ------------------------------------------------------------------------------ */

/* Pushes helpers[name] (a function). */
static void push_helper(lua_State *L, tocha_interp *I, const char *name)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, I->helpers);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
}

static int close_body(lua_State *L)
{
    call_head *c = lua_touserdata(L, 1);
    if (c->I->helpers == LUA_NOREF) return 0;
    push_helper(L, c->I, "release_all");
    docall(L, 0, 0, &c->status);
    return 0;
}

void tocha_interp_close(tocha_interp *I)
{
    if (I == NULL) return;
    if (I->L != NULL) {
        /* Tensors are released explicitly: the registry holds C references that no Lua
         * finalizer would drop. A failure here cannot be reported (close returns void), and
         * closing the state is still right. */
        char saved[sizeof error_buf];
        memcpy(saved, error_buf, sizeof saved);
        call_head c;
        protect(I, close_body, &c, "tocha_interp_close");
        lua_close(I->L);
        memcpy(error_buf, saved, sizeof saved);
    }
    free(I);
}

/* ---- running code ----------------------------------------------------------------------- */

typedef struct string_call {
    call_head h;
    const char *code;
} string_call;

static int string_body(lua_State *L)
{
    string_call *c = lua_touserdata(L, 1);
    int st = luaL_loadbuffer(L, c->code, strlen(c->code), c->code);
    if (st != 0) {
        c->h.status = fail(code_of(st), "%s", lua_tostring(L, -1));
        return 0;
    }
    docall(L, 0, 0, &c->h.status);
    return 0;
}

tc_status tocha_run_string(tocha_interp *I, const char *code)
{
    if (I == NULL || code == NULL)
        return fail(TC_ERR_ARG, "tocha_run_string: %s is NULL", I ? "code" : "interp");
    string_call c = {.code = code};
    return protect(I, string_body, &c.h, "tocha_run_string");
}

typedef struct file_call {
    call_head h;
    const char *path;
    int argc;
    const char **argv;
} file_call;

static int file_body(lua_State *L)
{
    file_call *c = lua_touserdata(L, 1);
    luaL_checkstack(L, c->argc + 8, "too many script arguments");
    /* arg = {[0] = path, ...}, keeping an existing arg's negative entries */
    lua_getglobal(L, "arg");
    int old = lua_gettop(L);
    lua_createtable(L, c->argc, 1);
    if (lua_istable(L, old)) {
        for (int i = -1;; i--) {
            lua_rawgeti(L, old, i);
            if (lua_isnil(L, -1)) {
                lua_pop(L, 1);
                break;
            }
            lua_rawseti(L, -2, i);
        }
    }
    lua_pushstring(L, c->path);
    lua_rawseti(L, -2, 0);
    for (int i = 0; i < c->argc; i++) {
        lua_pushstring(L, c->argv[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setglobal(L, "arg");
    lua_pop(L, 1);

    int is_stdin = strcmp(c->path, "-") == 0;
    int st = luaL_loadfile(L, is_stdin ? NULL : c->path);
    if (st != 0) {
        c->h.status = fail(code_of(st), "%s", lua_tostring(L, -1));
        return 0;
    }
    for (int i = 0; i < c->argc; i++) lua_pushstring(L, c->argv[i]);
    docall(L, c->argc, 0, &c->h.status);
    return 0;
}

tc_status tocha_run_file(tocha_interp *I, const char *path, int argc, const char **argv)
{
    if (I == NULL || path == NULL)
        return fail(TC_ERR_ARG, "tocha_run_file: %s is NULL", I ? "path" : "interp");
    if (argc < 0 || (argc > 0 && argv == NULL))
        return fail(TC_ERR_ARG, "tocha_run_file: bad argument list (argc %d)", argc);
    for (int i = 0; i < argc; i++)
        if (argv[i] == NULL) return fail(TC_ERR_ARG, "tocha_run_file: argv[%d] is NULL", i);
    file_call c = {.path = path, .argc = argc, .argv = argv};
    return protect(I, file_body, &c.h, "tocha_run_file");
}

typedef struct args_call {
    call_head h;
    int argc, script_index;
    const char **argv;
} args_call;

static int args_body(lua_State *L)
{
    args_call *c = lua_touserdata(L, 1);
    lua_createtable(L, c->argc, c->script_index + 1);
    for (int i = 0; i < c->argc; i++) {
        lua_pushstring(L, c->argv[i]);
        lua_rawseti(L, -2, i - c->script_index);
    }
    lua_setglobal(L, "arg");
    return 0;
}

tc_status tocha_set_args(tocha_interp *I, int argc, const char **argv, int script_index)
{
    if (I == NULL) return fail(TC_ERR_ARG, "tocha_set_args: interp is NULL");
    if (argc < 0 || (argc > 0 && argv == NULL) || script_index < 0 || script_index > argc)
        return fail(TC_ERR_ARG, "tocha_set_args: bad arguments (argc %d, script_index %d)", argc,
                    script_index);
    for (int i = 0; i < argc; i++)
        if (argv[i] == NULL) return fail(TC_ERR_ARG, "tocha_set_args: argv[%d] is NULL", i);
    args_call c = {.argc = argc, .argv = argv, .script_index = script_index};
    return protect(I, args_body, &c.h, "tocha_set_args");
}

typedef struct require_call {
    call_head h;
    const char *module;
} require_call;

static int require_body(lua_State *L)
{
    require_call *c = lua_touserdata(L, 1);
    lua_getglobal(L, "require");
    lua_pushstring(L, c->module);
    docall(L, 1, 0, &c->h.status);
    return 0;
}

tc_status tocha_require(tocha_interp *I, const char *module)
{
    if (I == NULL || module == NULL)
        return fail(TC_ERR_ARG, "tocha_require: %s is NULL", I ? "module" : "interp");
    require_call c = {.module = module};
    return protect(I, require_body, &c.h, "tocha_require");
}

/* ---- tensors in and out ----------------------------------------------------------------- */

typedef struct tensor_call {
    call_head h;
    const char *name, *what;
    const char *helper;
    void *ptr; /* the tensor (set) or the out slot (get) */
} tensor_call;

static int tensor_body(lua_State *L)
{
    tensor_call *c = lua_touserdata(L, 1);
    push_helper(L, c->h.I, c->helper);
    lua_pushstring(L, c->name);
    lua_pushlightuserdata(L, c->ptr);
    if (docall(L, 2, 1, &c->h.status)) return 0;
    if (lua_type(L, -1) == LUA_TSTRING)
        c->h.status = fail(TC_ERR_ARG, "%s: %s", c->what, lua_tostring(L, -1));
    return 0;
}

tc_status tocha_set_tensor(tocha_interp *I, const char *name, tc_tensor *t)
{
    if (I == NULL || name == NULL || t == NULL)
        return fail(TC_ERR_ARG, "tocha_set_tensor: %s is NULL",
                    I == NULL ? "interp" : name == NULL ? "name" : "tensor");
    tensor_call c = {.name = name, .what = "tocha_set_tensor", .helper = "set", .ptr = t};
    return protect(I, tensor_body, &c.h, "tocha_set_tensor");
}

tc_status tocha_get_tensor(tocha_interp *I, const char *name, tc_tensor **out)
{
    if (I == NULL || name == NULL || out == NULL)
        return fail(TC_ERR_ARG, "tocha_get_tensor: %s is NULL",
                    I == NULL ? "interp" : name == NULL ? "name" : "out");
    tc_tensor *slot = NULL;
    tensor_call c = {.name = name, .what = "tocha_get_tensor", .helper = "get", .ptr = &slot};
    tc_status s = protect(I, tensor_body, &c.h, "tocha_get_tensor");
    if (s != TC_OK) {
        /* the helper writes the slot last, after its retain; a failure after that point
         * cannot happen, but never hand back (or leak) a half-done reference */
        if (slot != NULL) tc_tensor_release(slot);
        return s;
    }
    *out = slot;
    return TC_OK;
}
