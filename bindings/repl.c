/* repl.c -- the libedit glue of the `tocha` REPL: line reading, the history list and tab
 * completion, offered to Lua as the module `tocha.readline`. Everything else (parsing,
 * auto-printing, the history file, what to complete) is Lua, in lua/tocha/repl.lua.
 *
 * Completion runs inside readline(), itself called from a Lua C function, so the callback
 * re-enters the same lua_State: allowed, as long as no Lua error unwinds through libedit's
 * frames. The callback therefore does all its Lua work under lua_cpcall.
 */
#include <editline/readline.h>
#include <lauxlib.h>
#include <lua.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tocha_repl_install(lua_State *L);

/* The state completion calls into (the REPL is single-threaded, one per process). */
static lua_State *repl_L;

/* Candidates of the current completion, handed to libedit one by one. */
static char **cands;
static size_t ncands, next_cand;

static void free_cands(void)
{
    for (size_t i = 0; i < ncands; i++) free(cands[i]);
    free(cands);
    cands = NULL;
    ncands = next_cand = 0;
}

/* Calls require('tocha.repl').complete(text) and copies the strings of the table it
 * returns into cands. Runs under lua_cpcall: a Lua error ends it without unwinding. */
static int complete_body(lua_State *L)
{
    const char *text = lua_touserdata(L, 1);
    lua_getglobal(L, "require");
    lua_pushstring(L, "tocha.repl");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "complete");
    lua_pushstring(L, text);
    lua_call(L, 1, 1);
    if (!lua_istable(L, -1)) return 0;
    size_t n = lua_objlen(L, -1);
    cands = calloc(n ? n : 1, sizeof *cands);
    if (cands == NULL) return 0;
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, (int)i);
        const char *s = lua_tostring(L, -1);
        if (s != NULL && (cands[ncands] = strdup(s)) != NULL) ncands++;
        lua_pop(L, 1);
    }
    return 0;
}

/* libedit asks for the matches one at a time; it frees each string it gets. */
static char *next_match(const char *text, int state)
{
    (void)text;
    if (state == 0) next_cand = 0;
    return next_cand < ncands ? strdup(cands[next_cand++]) : NULL;
}

static char **attempt_completion(const char *text, int start, int end)
{
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1; /* no file-name fallback */
    free_cands();
    if (repl_L == NULL) return NULL;
    int top = lua_gettop(repl_L);
    if (lua_cpcall(repl_L, complete_body, (void *)text) != 0) free_cands();
    lua_settop(repl_L, top);
    if (ncands == 0) return NULL;
    return rl_completion_matches(text, next_match);
}

/* ---- the Lua module --------------------------------------------------------------------- */

/* readline(prompt) -> the line without its newline, or nil at end of input (Ctrl-D). */
static int l_readline(lua_State *L)
{
    const char *prompt = luaL_optstring(L, 1, "> ");
    char *line = readline(prompt);
    if (line == NULL) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushstring(L, line);
    free(line);
    return 1;
}

static int l_add_history(lua_State *L)
{
    add_history(luaL_checkstring(L, 1));
    return 0;
}

static int l_clear_history(lua_State *L)
{
    (void)L;
    clear_history();
    return 0;
}

/* ---- Ctrl-C while a command runs --------------------------------------------------------
 * As in the lua command: SIGINT sets a hook that raises "interrupted!" at the next Lua
 * call, return or instruction count, and puts the default action back so that a second
 * Ctrl-C ends a loop the hook cannot reach (JIT-compiled code does not run hooks). */

static void interrupted(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static void on_sigint(int sig)
{
    signal(sig, SIG_DFL);
    if (repl_L != NULL) lua_sethook(repl_L, interrupted, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* catch_interrupt(on): Ctrl-C interrupts the running command (on) or has its default
 * action (off, while libedit reads a line). */
static int l_catch_interrupt(lua_State *L)
{
    int on = lua_toboolean(L, 1);
    if (!on) lua_sethook(L, NULL, 0, 0);
    signal(SIGINT, on ? on_sigint : SIG_DFL);
    return 0;
}

/* isatty(fd): whether the REPL talks to a terminal (else it reads plain lines). */
static int l_isatty(lua_State *L)
{
    lua_pushboolean(L, isatty((int)luaL_optinteger(L, 1, 0)));
    return 1;
}

static const luaL_Reg funcs[] = {
    {"readline", l_readline},
    {"add_history", l_add_history},
    {"clear_history", l_clear_history},
    {"isatty", l_isatty},
    {"catch_interrupt", l_catch_interrupt},
    {NULL, NULL},
};

/* Characters that end a completion word. Not '.', ':' or '_': `torch.Fl` and `x:si` are
 * completed as whole paths. */
static const char word_breaks[] = " \t\n\"\\'`@$><=;|&{([,+-*/%^~#)}]";
static char completer_breaks[sizeof word_breaks];

static int install_body(lua_State *L)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_newtable(L);
    luaL_register(L, NULL, funcs);
    lua_setfield(L, -2, "tocha.readline");
    return 0;
}

/* Sets libedit up and registers package.loaded['tocha.readline']. Returns 0, or a Lua
 * status with the message on the stack. */
int tocha_repl_install(lua_State *L)
{
    repl_L = L;
    rl_readline_name = "tocha"; /* ~/.editrc sections */
    rl_attempted_completion_function = attempt_completion;
    memcpy(completer_breaks, word_breaks, sizeof word_breaks);
    rl_basic_word_break_characters = word_breaks;
    rl_completer_word_break_characters = completer_breaks;
    rl_completion_append_character = '\0'; /* `torch.FloatTensor` is usually followed by ( */
    using_history();
    return lua_cpcall(L, install_body, NULL);
}
