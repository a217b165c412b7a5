-- tocha/jit.lua -- graph mode's Lua face (`require 'tocha'.jit`, docs/jit.md).
--
--   jit.trace(fn, args, opts)  runs fn once with a trace active (core/graph/trace.c records
--                              every op it runs) and returns the graph plus fn's results
--   jit.compile(fn, opts)      a callable that traces once per guard key (sizes, dtypes,
--                              devices, structure and the non-tensor arguments), compiles
--                              the graph and runs it from then on, with no Lua per op
--   graph breaks               what a graph cannot replay, detected while tracing (below)
--
-- The guard keys and caches are lua/tocha/jit_guard.lua, the graph object (run, call,
-- compile, dump, dot, report, stats) lua/tocha/jit_graph.lua; model:compile and
-- tocha.jit.step are lua/tocha/jit_module.lua and jit_train.lua, loaded on first use.
--
-- Tracing runs the real ops, so Lua sees real tensors while fn runs. What a graph cannot
-- replay is refused rather than baked in silently:
--   - reading a traced tensor's value from Lua (item, t[i], comparisons, reductions to Lua
--     numbers, data, storage, totable, printing): the read paths in lua/torch call the check
--     installed here (torch._set_trace_check), which raises a graph break;
--   - calling Lua library functions whose effect or result a graph run would not repeat
--     (print, io.*, os.*, math.random, torch.manualSeed, number draws like torch.uniform()):
--     a call hook, active only while tracing, raises a graph break;
--   - non-tensor results, writes into captured tensors (trace.c's error) and the like: errors.
-- jit.compile's unit is the whole function: a graph break makes it run eagerly for that
-- guard key (a one-time note naming the line) or, with strict = true, is an error with
-- advice. model:compile and tocha.jit.step narrow the eager part to the smallest nn module
-- containing the break (lua/tocha/jit_parts.lua).
--
-- Locations: while tracing, a line hook passes the current user line ("file:line", the
-- first frame outside lua/torch and lua/tocha) to tc_trace_set_location, so dumps and C
-- errors name the Lua line of each op. Hooks cost only at trace time; the LuaJIT traces are
-- flushed when a trace starts because compiled Lua code does not call hooks.
local ffi = require 'ffi'
local torch = require 'torch'
local luajit = require 'jit'
local guard = require 'tocha.jit_guard'
local graphs = require 'tocha.jit_graph'

local C = torch._C
local raise = torch._raise
local isT = torch.isTensor
local fmt, getinfo = string.format, debug.getinfo
local unpack = unpack or table.unpack

local jit = {}

---------------------------------------------------------------------------------------------
-- Where the user's code is: the first stack frame outside lua/torch and lua/tocha
---------------------------------------------------------------------------------------------

local function dir_of(source)
   return source:match('^(@.*)/[^/]*$') or source
end
local torch_dir = dir_of(getinfo(torch.isTensor, 'S').source) .. '/'
local tocha_dir = dir_of(getinfo(1, 'S').source) .. '/'

local internal_cache = {}
local function is_internal(source)
   local r = internal_cache[source]
   if r == nil then
      r = source:sub(1, #torch_dir) == torch_dir or source:sub(1, #tocha_dir) == tocha_dir
      internal_cache[source] = r
   end
   return r
end

local active = nil -- the trace being recorded: {loc = last user line, broke = {where, reason}}
local run_traced -- the function that calls fn under xpcall (the walk stops there)

-- "file:line" of the innermost user frame above the caller, within the traced call; the last
-- user line the line hook saw when that frame is gone (tail calls) or unknown.
local function user_where(level)
   for lv = (level or 2) + 1, 200 do
      local info = getinfo(lv, 'Slf')
      if info == nil or info.func == run_traced then break end
      if info.what ~= 'C' and not is_internal(info.source) then
         return info.short_src .. ':' .. (info.currentline or 0)
      end
   end
   return active and active.loc or '?'
end

-- The caller's location outside traces, for errors raised on behalf of a public function.
local function caller_where(level)
   for lv = level + 1, 200 do
      local info = getinfo(lv, 'Sl')
      if info == nil then break end
      if info.what ~= 'C' and not is_internal(info.source) then
         return info.short_src .. ':' .. (info.currentline or 0)
      end
   end
   return '?'
end

-- Advice by kind of break.
local ADVICE = 'Use tocha.cond/tocha.while_loop for data-dependent control flow, and keep values that ' ..
               'change between runs in tensors'
local ADVICE_CALL = 'Call it outside the traced function: it would run only while tracing, never when the ' ..
                    'graph runs'
local ADVICE_DRAW = 'Draw random numbers into tensors (torch.rand, x:uniform()) inside the function, or pass ' ..
                    'them in as arguments'

---------------------------------------------------------------------------------------------
-- Graph breaks
---------------------------------------------------------------------------------------------

-- Raises a graph break at the user's line. The break is remembered on the trace, so a
-- break that user code swallows with pcall still fails the trace.
local function graph_break(reason, advice)
   local where = user_where(2)
   advice = advice or ADVICE
   if active then
      if not active.broke then active.broke = {where = where, reason = reason, advice = advice} end
   end
   error(fmt('%s: tocha.jit: graph break (%s): a graph cannot replay this, so the trace stops. %s',
             where, reason, advice), 0)
end

-- The check the lua/torch value paths call while a trace runs. Reads refuse traced values
-- (and unseen tensors: they may be parameters that change between runs); element writes
-- refuse buffers the trace knows (they bypass the ops the graph records), while writes into
-- fresh tensors (`t = torch.Tensor(2); t[1] = 3`) are fine: the graph captures the result.
local function check_read(p, what, is_write)
   if is_write then
      if C.tc_trace_knows(p) ~= 0 then graph_break('writing a tensor element from Lua: ' .. what) end
   elseif C.tc_trace_is_dynamic(p) ~= 0 then
      graph_break('reading a tensor value: ' .. what)
   end
end

-- Public: library code that cannot be traced calls it; a no-op outside traces.
function jit.graph_break(reason)
   if reason ~= nil and type(reason) ~= 'string' then
      error('tocha.jit.graph_break: expected a string reason, got ' .. type(reason), 2)
   end
   if active then graph_break(reason or 'tocha.jit.graph_break()') end
end

function jit.is_tracing() return active ~= nil end

-- Lua library functions a graph run would not repeat (side effects) or whose result would
-- be baked in (clocks, random numbers). Called from user code while tracing: a graph break.
local forbidden = {}
local function forbid(tbl, prefix, names)
   for _, k in ipairs(names) do
      local f = tbl and tbl[k]
      if type(f) == 'function' then forbidden[f] = prefix .. k end
   end
end
forbidden[print] = 'print'
do
   local io_names, os_names = {}, {}
   for k, v in pairs(io) do if type(v) == 'function' then io_names[#io_names + 1] = k end end
   -- os.getenv is left alone: the environment does not change between runs
   for k, v in pairs(os) do if type(v) == 'function' and k ~= 'getenv' then os_names[#os_names + 1] = k end end
   forbid(io, 'io.', io_names)
   forbid(os, 'os.', os_names)
   local fmeta = getmetatable(io.stderr)
   local fm = fmeta and (type(fmeta.__index) == 'table' and fmeta.__index or fmeta)
   forbid(fm, 'file:', {'write', 'read', 'lines', 'seek', 'flush', 'close', 'setvbuf'})
   forbid(math, 'math.', {'random', 'randomseed'})
   forbid(torch, 'torch.', {'manualSeed', 'seed', 'setRNGState', 'getRNGState', 'save', 'load'})
end
-- Number draws: a tensor first argument fills the tensor (a random op, recorded); anything
-- else returns a Lua number that tracing would bake in.
local number_draws = {}
for _, k in ipairs({'random', 'uniform', 'normal', 'exponential', 'cauchy', 'logNormal', 'geometric',
                    'bernoulli'}) do
   if type(torch[k]) == 'function' then number_draws[torch[k]] = 'torch.' .. k end
end

local function hook(ev, line)
   local st = active
   if st == nil then return end
   if ev == 'line' then
      local info = getinfo(2, 'S')
      if not is_internal(info.source) then
         local loc = info.short_src .. ':' .. line
         if loc ~= st.loc then
            st.loc = loc
            C.tc_trace_set_location(loc)
         end
      end
      return
   end
   local f = getinfo(2, 'f').func
   local name, advice = forbidden[f], ADVICE_CALL
   if name == nil then
      name = number_draws[f]
      if name == nil then return end
      local _, a = debug.getlocal(2, 1)
      if isT(a) then return end
      name, advice = name .. '() drawing a Lua number', ADVICE_DRAW
   end
   -- calls made by the library itself (torch.save opening its file) are its own business
   local caller = getinfo(3, 'S')
   if caller ~= nil and caller.what ~= 'C' and is_internal(caller.source) then return end
   graph_break('calling ' .. name .. ', which a graph run would not repeat', advice)
end

---------------------------------------------------------------------------------------------
-- Guards and graphs (jit_guard.lua, jit_graph.lua)
---------------------------------------------------------------------------------------------

local flatten, build, describe = guard.flatten, guard.build, guard.describe
local check_opts, is_callable = guard.check_opts, guard.is_callable
local new_graph, run_list = graphs.new_graph, graphs.run_list

-- jit.flatten(args): the tensor leaves of args (graph input order) and the guard key.
function jit.flatten(args)
   if type(args) ~= 'table' then
      error('tocha.jit.flatten: expected a table of arguments, got ' .. describe(args), 2)
   end
   local tensors, key = flatten(args, type(args.n) == 'number' and args.n or #args, 2)
   return tensors, key
end

jit.Graph = graphs.Graph
jit._build = build -- for jit_module.lua
jit._passes_of = graphs.passes_of
function jit.isGraph(x) return getmetatable(x) == graphs.Graph end

---------------------------------------------------------------------------------------------
-- Tracing
---------------------------------------------------------------------------------------------

-- Rewrites an error raised inside library code so it names the user's line too.
local function on_error(e)
   if type(e) ~= 'string' then return e end
   local src = e:match('^(.-):%d+: ')
   if src == nil or src == '[C]' or src:find('lua/torch/', 1, true) or src:find('lua/tocha/', 1, true) then
      local where = user_where(1)
      if where ~= '?' and e:sub(1, #where + 1) ~= where .. ':' then return where .. ': ' .. e end
   end
   return e
end

local pack = function(...) return {n = select('#', ...), ...} end

run_traced = function(fn, args, n)
   return pack(xpcall(fn, on_error, unpack(args, 1, n)))
end

local gp = ffi.new('tc_graph*[1]')

-- The core of trace and compile. Never raises: returns ok, graph or error message, the
-- results (packed), the break ({where, reason}) if one happened.
local function trace_core(fn, args, n, tensors, key, allow_mutation, level, shape_only)
   if C.tc_trace_current() ~= nil or active ~= nil then
      return false, caller_where(level) .. ': tocha.jit: a trace is already running (traces do not nest; ' ..
                    'call the function directly inside a traced function)'
   end
   if C.tc_trace_begin(gp) ~= 0 then return false, caller_where(level) .. ': ' .. ffi.string(C.tc_last_error()) end
   local ptr = ffi.gc(gp[0], C.tc_graph_free)
   local function fail(msg)
      C.tc_trace_end(ptr)
      return false, caller_where(level + 1) .. ': ' .. msg
   end
   if C.tc_trace_allow_mutation(ptr, allow_mutation and 1 or 0) ~= 0 then return fail(ffi.string(C.tc_last_error())) end
   if shape_only and C.tc_trace_shape_only(ptr, 1) ~= 0 then return fail(ffi.string(C.tc_last_error())) end
   for i = 1, #tensors do
      if C.tc_trace_input(ptr, tensors[i].p) ~= 0 then return fail(ffi.string(C.tc_last_error())) end
   end
   local st = {loc = nil, broke = nil}
   active = st
   torch._set_trace_check(check_read)
   local old_hook, old_mask, old_count = debug.gethook()
   -- Compiled Lua does not call hooks: flush it, so that the hooks see every line. The GC
   -- keeps running (the step's temporaries are freed as in eager mode); the registry sweep
   -- after each cycle lifts the hook while it walks every registered tensor (torch/init.lua).
   luajit.flush()
   debug.sethook(hook, 'cl')
   local r = run_traced(fn, args, n)
   if old_hook then debug.sethook(old_hook, old_mask, old_count) else debug.sethook() end
   torch._set_trace_check(false)
   active = nil
   if not r[1] then
      C.tc_trace_end(ptr)
      return false, r[2], nil, st.broke
   end
   local res = {n = r.n - 1}
   for i = 1, res.n do res[i] = r[i + 1] end
   local okt, outs, tpl = pcall(guard.result_template, res, res.n)
   if not okt then return fail(outs) end
   for i = 1, #outs do
      if C.tc_trace_output(ptr, outs[i].p) ~= 0 then return fail(ffi.string(C.tc_last_error())) end
   end
   if C.tc_trace_end(ptr) ~= 0 then
      return false, caller_where(level) .. ': ' .. ffi.string(C.tc_last_error()), nil, st.broke
   end
   if st.broke then -- a break the function caught itself: the graph is not to be trusted
      return false, fmt('%s: tocha.jit: graph break (%s) was caught inside the traced function. %s', st.broke.where,
                        st.broke.reason, st.broke.advice), nil, st.broke
   end
   return true, new_graph(ptr, key, tpl, res.n, allow_mutation), res, nil, outs
end

local trace_opts = {allow_mutation = true}

-- jit.trace(fn, args [, opts]) -> graph, results...: runs fn(unpack(args)) once while a
-- trace records it. args: a list (args.n for trailing nils) of tensors, nested tables of
-- tensors, numbers, strings, booleans. opts.allow_mutation: writes into captured tensors
-- become write-backs (default: an error).
function jit.trace(fn, args, opts)
   if not is_callable(fn) then error('tocha.jit.trace: expected a function to trace, got ' .. describe(fn), 2) end
   if args == nil then args = {} end
   if type(args) ~= 'table' or getmetatable(args) ~= nil then
      error('tocha.jit.trace: expected a list of arguments for the function, got ' .. describe(args), 2)
   end
   opts = check_opts('tocha.jit.trace', opts, trace_opts, 2)
   if args.n ~= nil and (type(args.n) ~= 'number' or args.n < 0 or args.n % 1 ~= 0) then
      error('tocha.jit.trace: args.n must be the argument count (a non-negative integer), got ' .. describe(args.n), 2)
   end
   local n = args.n or #args
   local tensors, key = flatten(args, n, 2)
   local ok, g, res = trace_core(fn, args, n, tensors, key, opts.allow_mutation and true or false, 2)
   if not ok then error(g, 0) end
   return g, unpack(res, 1, res.n)
end

-- For model:compile and tocha.jit.step (jit_module.lua, jit_train.lua): jit.trace that
-- never raises for what happens inside fn. Returns true, graph, results (packed), or false,
-- the message and the graph break ({where, reason, advice}; nil for other errors).
-- opts.shape_only: record without computing what depends on the arguments or captured
-- tensors (tc_trace_shape_only); the results' values are then undefined.
function jit._try_trace(fn, args, opts)
   local n = args.n or #args
   local tensors, key = flatten(args, n, 2)
   local ok, g, res, broke = trace_core(fn, args, n, tensors, key, opts ~= nil and opts.allow_mutation or false, 2,
                                        opts ~= nil and opts.shape_only)
   if not ok then return false, g, broke end
   return true, g, res
end

---------------------------------------------------------------------------------------------
-- Compiled functions
---------------------------------------------------------------------------------------------

local Compiled = {}
Compiled.__index = Compiled
jit.Compiled = Compiled

local compile_opts = {passes = true, strict = true, max_cache = true, allow_mutation = true, name = true}

local function fn_name(fn)
   local info = type(fn) == 'function' and getinfo(fn, 'S')
   if info and info.what ~= 'C' then return fmt('<function at %s:%d>', info.short_src, info.linedefined) end
   return tostring(fn)
end

-- jit.compile(fn [, opts]) -> callable. opts: passes ('all' or a list of names), strict
-- (graph breaks are errors), max_cache (graphs kept, LRU, default 8), allow_mutation, name.
function jit.compile(fn, opts)
   if not is_callable(fn) then error('tocha.jit.compile: expected a function to compile, got ' .. describe(fn), 2) end
   opts = check_opts('tocha.jit.compile', opts, compile_opts, 2)
   local bits = graphs.passes_of(opts.passes, 'tocha.jit.compile', 2)
   local max_cache = opts.max_cache or 8
   if type(max_cache) ~= 'number' or max_cache < 1 or max_cache % 1 ~= 0 then
      error('tocha.jit.compile: max_cache must be a positive integer, got ' .. tostring(max_cache), 2)
   end
   if opts.name ~= nil and type(opts.name) ~= 'string' then
      error('tocha.jit.compile: name must be a string, got ' .. describe(opts.name), 2)
   end
   return setmetatable({
      fn = fn, passes = bits, strict = opts.strict and true or false, max_cache = max_cache,
      allow_mutation = opts.allow_mutation and true or false, name = opts.name or fn_name(fn),
      entries = {}, nentries = 0, tick = 0, evicted = {}, noted = {}, warned = false,
      counts = {traces = 0, hits = 0, evictions = 0, retraces = 0, eager_calls = 0},
   }, Compiled)
end

local function note(msg)
   local f = io.stderr
   f:write(msg, '\n')
end
jit._note = note

local function evict_lru(self)
   local old, oldk = nil, nil
   for k, e in pairs(self.entries) do
      if old == nil or e.used < old.used then old, oldk = e, k end
   end
   self.entries[oldk] = nil
   self.nentries = self.nentries - 1
   if self.last == old then self.last = nil end
   self.evicted[oldk] = true
   self.counts.evictions = self.counts.evictions + 1
   if old.graph then old.graph:free() end
end

-- The unit of jit.compile is the function, so the note says how to make the eager part smaller.
local WHOLE_FUNCTION = "jit.compile's unit is the whole function: all of it runs eagerly for this guard (these " ..
                       'sizes, dtypes and constants), not only the code after the break; move the branch out of ' ..
                       'the compiled function (compile the code around it), or pass strict = true to make this ' ..
                       'an error'

-- First call for a key: trace, compile, cache; the traced run's results are returned.
local function trace_entry(self, key, tensors, args, n)
   local c = self.counts
   if self.evicted[key] then
      c.retraces = c.retraces + 1
      if c.retraces >= 2 and not self.warned then
         self.warned = true
         jit._note(fmt('tocha.jit: %s retraced %d times (input shapes keep changing): its cache holds %d graphs ' ..
                       '(max_cache) and keeps evicting them; keep shapes stable (pad batches) or raise max_cache',
                       self.name, c.traces + 1, self.max_cache))
      end
   end
   if self.nentries >= self.max_cache then evict_lru(self) end
   c.traces = c.traces + 1
   local rng = torch.getRNGState()
   local ok, g, res, broke, outs = trace_core(self.fn, args, n, tensors, key, self.allow_mutation, 3)
   local reason
   if not ok then
      if not broke then error(g, 0) end
      reason = broke
   elseif C.tc_grad_enabled() ~= 0 and guard.any_requires_grad(outs) then
      reason = {where = caller_where(3), reason = 'the results require grad, and a graph run returns tensors ' ..
                'without autograd history', advice = 'Call it under torch.no_grad(), or compile the whole ' ..
                'training step (forward, backward and update) as one function'}
   end
   self.tick = self.tick + 1
   if reason then
      if self.strict then
         error(fmt('%s: tocha.jit: graph break at %s (%s) in %s, compiled with strict = true. %s', reason.where,
                   reason.where, reason.reason, self.name, reason.advice), 0)
      end
      if not ok and self.allow_mutation then
         error(fmt('%s: tocha.jit: graph break at %s (%s) in %s, which may already have updated captured tensors ' ..
                   '(allow_mutation), so it cannot fall back to eager. %s', reason.where, reason.where,
                   reason.reason, self.name, reason.advice), 0)
      end
      if not self.noted[reason.where] then
         self.noted[reason.where] = true
         jit._note(fmt('tocha.jit: graph break at %s (%s); %s runs eagerly for these inputs. %s. %s',
                       reason.where, reason.reason, self.name, reason.advice, WHOLE_FUNCTION))
      end
      self.entries[key] = {eager = true, used = self.tick}
      self.nentries = self.nentries + 1
      if ok then return res end
      -- the trace stopped at the break: run the function eagerly, from the same random state
      torch.setRNGState(rng)
      c.eager_calls = c.eager_calls + 1
      return pack(self.fn(unpack(args, 1, n)))
   end
   if C.tc_graph_compile(g.ptr, self.passes) ~= 0 then raise(3) end
   self.entries[key] = {graph = g, used = self.tick}
   self.nentries = self.nentries + 1
   return res
end

-- Runs entry e's graph on the call's arguments; returns the results packed or unpacked.
local function run_entry(g, tensors, level)
   local outs = run_list(g, tensors, level + 1)
   if g.flat then return outs end
   return build(g.tpl, outs)
end

function Compiled:__call(...)
   -- inside another trace: the calls are recorded into that graph
   if active ~= nil or C.tc_trace_current() ~= nil then return self.fn(...) end
   local n = select('#', ...)
   local args = {...}
   local c = self.counts
   local e = self.last
   local tensors
   if e ~= nil and e.fast ~= nil and guard.fast_match(e.fast, args, n) then
      local tpos = e.fast.tpos
      tensors = {}
      for k = 1, #tpos do tensors[k] = args[tpos[k]] end
   else
      local key
      tensors, key = flatten(args, n, 2)
      e = self.entries[key]
      if e == nil then
         local r = trace_entry(self, key, tensors, args, n)
         e = self.entries[key]
         if e ~= nil then
            e.fast = guard.fast_signature(args, n, tensors)
            self.last = e
         end
         return unpack(r, 1, r.n)
      end
      self.last = e
   end
   self.tick = self.tick + 1
   e.used = self.tick
   if e.eager then
      c.eager_calls = c.eager_calls + 1
      return self.fn(...)
   end
   c.hits = c.hits + 1
   local g = e.graph
   local r = run_entry(g, tensors, 2)
   return unpack(r, 1, g.nres)
end

-- compiled:stats(): {traces, hits, evictions, retraces, eager_calls, entries}.
function Compiled:stats()
   if getmetatable(self) ~= Compiled then error('compiled:stats: call it with `:`', 2) end
   local c = self.counts
   return {traces = c.traces, hits = c.hits, evictions = c.evictions, retraces = c.retraces,
           eager_calls = c.eager_calls, entries = self.nentries}
end

-- compiled:graph(...): the cached graph for these arguments (nil when not traced yet or
-- running eagerly).
function Compiled:graph(...)
   if getmetatable(self) ~= Compiled then error('compiled:graph: call it with `:`', 2) end
   local _, key = flatten({...}, select('#', ...), 2)
   local e = self.entries[key]
   return e and e.graph or nil
end

-- compiled:reset(): drops every cached graph (the next call traces again).
function Compiled:reset()
   if getmetatable(self) ~= Compiled then error('compiled:reset: call it with `:`', 2) end
   for _, e in pairs(self.entries) do if e.graph then e.graph:free() end end
   self.entries, self.nentries, self.evicted, self.last = {}, 0, {}, nil
end

function Compiled:__tostring()
   return fmt('tocha.jit compiled %s (%d cached)', self.name, self.nentries)
end

---------------------------------------------------------------------------------------------
-- Extensions: tocha.jit.<name> loads lua/tocha/jit_<name>.lua on first use (e.g. the
-- training-step compiler), as tocha's own namespace does, so they need no edit here.
---------------------------------------------------------------------------------------------

setmetatable(jit, {
   __index = function(t, k)
      if type(k) ~= 'string' or not k:match('^[%a_][%w_]*$') then return nil end
      local name = 'tocha.jit_' .. k
      if package.loaded[name] == nil and not package.searchpath(name, package.path) then return nil end
      local m = require(name)
      rawset(t, k, m)
      return m
   end,
})

return jit