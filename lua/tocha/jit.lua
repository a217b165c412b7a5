-- tocha/jit.lua -- graph mode's Lua face (`require 'tocha'.jit`, docs/jit.md).
--
--   jit.trace(fn, args, opts)  runs fn once with a trace active (core/graph/trace.c records
--                              every op it runs) and returns the graph plus fn's results
--   jit.compile(fn, opts)      a callable that traces once per guard key (sizes, dtypes,
--                              devices, structure and the non-tensor arguments), compiles
--                              the graph and runs it from then on, with no Lua per op
--   Graph                      the wrapper of a tc_graph*: run, call, compile, dump, dot,
--                              report, stats
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
-- jit.compile turns a graph break into an eager fallback for that guard key (a one-time
-- note) or, with strict = true, into an error with advice.
--
-- Locations: while tracing, a line hook passes the current user line ("file:line", the
-- first frame outside lua/torch and lua/tocha) to tc_trace_set_location, so dumps and C
-- errors name the Lua line of each op. Hooks cost only at trace time; the LuaJIT traces are
-- flushed when a trace starts because compiled Lua code does not call hooks.
local ffi = require 'ffi'
local bit = require 'bit'
local torch = require 'torch'
local luajit = require 'jit'

local C = torch._C
local wrap, raise = torch._wrap, torch._raise
local isT = torch.isTensor
local fmt, concat, getinfo = string.format, table.concat, debug.getinfo
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
-- Flattening arguments and the guard key
---------------------------------------------------------------------------------------------

local short_dtype = {}
for dt, name in pairs(torch._type_names) do short_dtype[dt] = name:match('^torch%.(.*)Tensor$') end

local function describe(x)
   if isT(x) then return torch._type_names[x.p.dtype] end
   return torch.typename(x) or type(x)
end

local function key_of_name(k)
   if type(k) == 'string' then
      if k:match('^[%a_][%w_]*$') then return k end
      return fmt('[%q]', k)
   end
   return '[' .. fmt('%.17g', k) .. ']'
end

-- Sorted keys of a plain table (numbers first, then strings), so a key is deterministic.
local function sorted_keys(t, what, path, level)
   local keys = {}
   for k in pairs(t) do
      local tk = type(k)
      if tk ~= 'number' and tk ~= 'string' then
         error(fmt('tocha.jit: %s %s has a %s key; tables may be keyed by numbers and strings only',
                   what, path, tk), level + 1)
      end
      keys[#keys + 1] = k
   end
   table.sort(keys, function(a, b)
      local ta, tb = type(a), type(b)
      if ta ~= tb then return ta == 'number' end
      return a < b
   end)
   return keys
end

local TF_REQ = C.TC_TF_REQUIRES_GRAD

-- Walks args[1..n]: the distinct tensor leaves in order (st.tensors), and the guard key
-- (st.parts). `what` is 'argument' or 'result' for messages. Same-tensor leaves alias the
-- first (one graph input); different views of one storage are refused (the graph would
-- not know they overlap).
local function walk(st, v, path, level)
   local tv = type(v)
   local parts = st.parts
   if tv == 'cdata' and isT(v) then
      local p = v.p
      local s = p.storage
      if s ~= nil then
         local sk = tonumber(ffi.cast('uintptr_t', s))
         local j = st.storages[sk]
         if j ~= nil then
            local q = st.tensors[j].p
            local same = q.dtype == p.dtype and q.offset == p.offset and q.ndim == p.ndim
            for d = 0, p.ndim - 1 do
               if not same then break end
               same = q.size[d] == p.size[d] and q.stride[d] == p.stride[d]
            end
            if not same then
               error(fmt('tocha.jit: %s %s and %s %s share storage (different views of one tensor); pass ' ..
                         'the tensor once and make the views inside the function', st.what, path, st.what,
                         st.paths[j]), level + 1)
            end
            parts[#parts + 1] = '=' .. j
            return
         end
         st.storages[sk] = #st.tensors + 1
      end
      local n = #st.tensors + 1
      st.tensors[n], st.paths[n] = v, path
      parts[#parts + 1] = short_dtype[p.dtype] or tostring(p.dtype)
      parts[#parts + 1] = '['
      for d = 0, p.ndim - 1 do
         if d > 0 then parts[#parts + 1] = 'x' end
         parts[#parts + 1] = tostring(tonumber(p.size[d]))
      end
      parts[#parts + 1] = ']'
      if s == nil then
         parts[#parts + 1] = 'empty'
      else
         if s.device ~= 0 then parts[#parts + 1] = '@' .. tonumber(s.device) end
         if C.tc_tensor_is_contiguous(p) == 0 then parts[#parts + 1] = '~' end
      end
      if p.flags % 2 == TF_REQ then parts[#parts + 1] = '^' end
   elseif tv == 'number' then
      parts[#parts + 1] = fmt('%.17g', v)
   elseif tv == 'string' then
      parts[#parts + 1] = fmt('%q', v)
   elseif tv == 'boolean' or tv == 'nil' then
      parts[#parts + 1] = tostring(v)
   elseif tv == 'table' and getmetatable(v) == nil then
      if st.seen[v] then
         error(fmt('tocha.jit: %s %s is a table that contains itself', st.what, path), level + 1)
      end
      st.seen[v] = true
      parts[#parts + 1] = '{'
      local n, count = #v, 0
      for _ in pairs(v) do count = count + 1 end
      -- the array part in order, then the other keys sorted (no sort for a plain array)
      for i = 1, n do
         if i > 1 then parts[#parts + 1] = ',' end
         walk(st, v[i], path .. '[' .. i .. ']', level + 1)
      end
      if count > n then
         local keys = sorted_keys(v, st.what, path, level + 1)
         local first = n == 0
         for _, k in ipairs(keys) do
            if not (type(k) == 'number' and k >= 1 and k <= n and k % 1 == 0) then
               if not first then parts[#parts + 1] = ',' end
               first = false
               local kn = key_of_name(k)
               parts[#parts + 1] = kn .. '='
               walk(st, v[k], path .. (kn:sub(1, 1) == '[' and kn or '.' .. kn), level + 1)
            end
         end
      end
      parts[#parts + 1] = '}'
      st.seen[v] = nil
   else
      error(fmt('tocha.jit: %s %s is a %s; pass tensors, (nested) tables of tensors, numbers, strings or ' ..
                'booleans (capture modules and functions as upvalues)', st.what, path, describe(v)), level + 1)
   end
end

-- Flattens args[1..n]: returns the distinct tensor leaves and the guard key.
local function flatten(args, n, level)
   local st = {tensors = {}, paths = {}, storages = {}, seen = {}, parts = {}, what = 'argument'}
   st.parts[1] = C.tc_grad_enabled() ~= 0 and 'grad(' or 'nograd('
   for i = 1, n do
      if i > 1 then st.parts[#st.parts + 1] = ', ' end
      walk(st, args[i], tostring(i), level + 1)
   end
   st.parts[#st.parts + 1] = ')'
   return st.tensors, concat(st.parts)
end

-- jit.flatten(args): the tensor leaves of args (graph input order) and the guard key.
function jit.flatten(args)
   if type(args) ~= 'table' then
      error('tocha.jit.flatten: expected a table of arguments, got ' .. describe(args), 2)
   end
   local tensors, key = flatten(args, type(args.n) == 'number' and args.n or #args, 2)
   return tensors, key
end

-- Results: tensors or nested plain tables of tensors. Returns the distinct tensors (the
-- graph outputs) and a template with output numbers in place of the tensors; or nil and
-- an error message.
local function result_template(res, n)
   local outs, index, seen = {}, {}, {}
   local function rec(v, path)
      if isT(v) then
         -- the same tensor returned twice is one graph output, and comes back as one tensor
         local addr = tonumber(ffi.cast('uintptr_t', v.p))
         local k = index[addr]
         if k == nil then
            k = #outs + 1
            outs[k], index[addr] = v, k
         end
         return k
      end
      if type(v) == 'table' and getmetatable(v) == nil then
         if seen[v] then error(fmt('tocha.jit: the traced function returned a table that contains itself at %s', path), 0) end
         seen[v] = true
         local t = {}
         for k, x in pairs(v) do
            local kn = type(k) == 'string' and (k:match('^[%a_][%w_]*$') and '.' .. k or fmt('[%q]', k)) or
                       '[' .. tostring(k) .. ']'
            t[k] = rec(x, path .. kn)
         end
         seen[v] = nil
         return t
      end
      error(fmt('tocha.jit: the traced function returned a %s at %s; return tensors (or nested tables of tensors)',
                describe(v), path), 0)
   end
   local tpl = {}
   for i = 1, n do tpl[i] = rec(res[i], 'result ' .. i) end
   return outs, tpl
end

local function build(tpl, outs)
   if type(tpl) == 'number' then return outs[tpl] end
   local r = {}
   for k, v in pairs(tpl) do r[k] = build(v, outs) end
   return r
end
jit._build = build -- for jit_train.lua

local function any_requires_grad(outs)
   for i = 1, #outs do
      if outs[i].p.flags % 2 == TF_REQ then return true end
   end
   return false
end

---------------------------------------------------------------------------------------------
-- The graph object
---------------------------------------------------------------------------------------------

local Graph = {}
Graph.__index = Graph
jit.Graph = Graph

local pass_bits = {
   dce = C.TC_PASS_DCE, cse = C.TC_PASS_CSE, fold = C.TC_PASS_FOLD, simplify = C.TC_PASS_SIMPLIFY,
   fuse = C.TC_PASS_FUSE, inplace = C.TC_PASS_INPLACE,
}
local pass_names = 'dce, cse, fold, simplify, fuse, inplace'

-- nil / 'all' -> every pass; a list of names -> their bits ({} runs none: memory planning only).
local function passes_of(passes, who, level)
   if passes == nil or passes == 'all' then return C.TC_PASS_ALL end
   if type(passes) ~= 'table' then
      error(fmt("%s: passes must be 'all' or a list of pass names (%s), got %s", who, pass_names,
                describe(passes)), level + 1)
   end
   local bits = 0
   for i, name in ipairs(passes) do
      local b = pass_bits[name]
      if b == nil then
         error(fmt('%s: unknown pass %s at %d (passes: %s)', who, tostring(name), i, pass_names), level + 1)
      end
      if bit.band(bits, b) == 0 then bits = bits + b end
   end
   return bits
end
jit._passes_of = passes_of

local function check_graph(g, name, level)
   if getmetatable(g) ~= Graph then
      error(fmt('graph:%s: expected a tocha.jit graph (call it with `:`), got %s', name, describe(g)), level + 1)
   end
   if g.ptr == nil then error(fmt('graph:%s: the graph was freed', name), level + 1) end
   return g.ptr
end

local function new_graph(ptr, key, tpl, nres, allow_mutation)
   local nin, nout = C.tc_graph_num_inputs(ptr), C.tc_graph_num_outputs(ptr)
   -- flat: the results are the outputs in order (no tables, no repeats): no rebuilding
   local flat = nres == nout
   for i = 1, nres do if tpl[i] ~= i then flat = false end end
   return setmetatable({
      ptr = ptr, key = key, ninputs = nin, noutputs = nout, tpl = tpl, nres = nres, flat = flat,
      allow_mutation = allow_mutation,
      _in = ffi.new('const tc_tensor*[?]', math.max(nin, 1)),
      _out = ffi.new('tc_tensor*[?]', math.max(nout, 1)),
   }, Graph)
end

-- Runs ptr on tensors[1..nin]; returns the outputs as a list of new tensors.
local function run_list(g, tensors, level)
   local IN, OUT, nout = g._in, g._out, g.noutputs
   for i = 1, g.ninputs do IN[i - 1] = tensors[i].p end
   if C.tc_graph_run(g.ptr, IN, g.ninputs, OUT, nout) ~= 0 then raise(level + 1) end
   local outs = {}
   for i = 1, nout do outs[i] = wrap(OUT[i - 1]) end
   for i = 0, g.ninputs - 1 do IN[i] = nil end
   return outs
end

-- g:run(inputs): inputs is the list of input tensors (jit.flatten(args) order); returns the
-- list of output tensors (the distinct result tensors in result order), new each run.
function Graph:run(inputs)
   check_graph(self, 'run', 2)
   if type(inputs) ~= 'table' then error('graph:run: expected a list of tensors, got ' .. describe(inputs), 2) end
   if #inputs ~= self.ninputs then
      error(fmt('graph:run: the graph takes %d input tensors, got %d', self.ninputs, #inputs), 2)
   end
   for i = 1, self.ninputs do
      if not isT(inputs[i]) then error(fmt('graph:run: input %d is a %s, expected a tensor', i, describe(inputs[i])), 2) end
   end
   local outs = run_list(self, inputs, 2) -- not a tail call: errors name the caller's line
   return outs
end

-- g:call(...): the arguments as the traced function took them (same guard key); returns
-- the results in the traced function's structure.
function Graph:call(...)
   check_graph(self, 'call', 2)
   local n = select('#', ...)
   local tensors, key = flatten({...}, n, 2)
   if key ~= self.key then
      error(fmt('graph:call: the arguments do not match the traced ones (sizes, dtypes, structure or constants): ' ..
                'traced %s, got %s', self.key, key), 2)
   end
   local outs = run_list(self, tensors, 2)
   if self.tpl == nil then return end
   return unpack(build(self.tpl, outs), 1, self.nres)
end

-- g:compile([passes]): runs the passes (all by default, or a list of names) and plans
-- memory. A graph compiles once: later calls do nothing. Returns g.
function Graph:compile(passes)
   local ptr = check_graph(self, 'compile', 2)
   local bits = passes_of(passes, 'graph:compile', 2)
   if C.tc_graph_compile(ptr, bits) ~= 0 then raise(2) end
   return self
end

local needed = ffi.new('size_t[1]')
local function text_of(fn, ptr, level)
   local cap = 4096
   while true do
      local buf = ffi.new('char[?]', cap)
      if fn(ptr, buf, cap, needed) ~= 0 then raise(level + 1) end
      if tonumber(needed[0]) <= cap then return ffi.string(buf) end
      cap = tonumber(needed[0])
   end
end

-- g:dump(): the IR as text (one value per line). print(g:dump()) shows it.
function Graph:dump()
   local s = text_of(C.tc_graph_dump, check_graph(self, 'dump', 2), 2)
   return s
end

-- g:report(): one line per pass run (nodes removed, groups fused, bytes planned).
function Graph:report()
   local s = text_of(C.tc_graph_report, check_graph(self, 'report', 2), 2)
   return s
end

-- g:dot(path): writes Graphviz text (fused groups as clusters); returns path.
function Graph:dot(path)
   local ptr = check_graph(self, 'dot', 2)
   if type(path) ~= 'string' or path == '' then
      error('graph:dot: expected a file name, got ' .. describe(path), 2)
   end
   if C.tc_graph_dot(ptr, path) ~= 0 then raise(2) end
   return path
end

-- g:stats(): {nodes, planned_bytes, unplanned_bytes, inputs, outputs}.
function Graph:stats()
   local ptr = check_graph(self, 'stats', 2)
   return {
      nodes = C.tc_graph_num_nodes(ptr),
      planned_bytes = tonumber(C.tc_graph_planned_bytes(ptr)),
      unplanned_bytes = tonumber(C.tc_graph_unplanned_bytes(ptr)),
      inputs = self.ninputs,
      outputs = self.noutputs,
   }
end

-- g:free(): releases the graph now (otherwise the GC does).
function Graph:free()
   if getmetatable(self) ~= Graph then error('graph:free: expected a tocha.jit graph, got ' .. describe(self), 2) end
   if self.ptr ~= nil then
      local ptr = self.ptr
      self.ptr = nil
      ffi.gc(ptr, nil)
      C.tc_graph_free(ptr)
   end
end

function Graph:__tostring()
   if self.ptr == nil then return 'tocha.jit graph (freed)' end
   return fmt('tocha.jit graph (%d nodes, %d inputs, %d outputs)', C.tc_graph_num_nodes(self.ptr), self.ninputs,
              self.noutputs)
end

function jit.isGraph(x) return getmetatable(x) == Graph end

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
local function trace_core(fn, args, n, tensors, key, allow_mutation, level)
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
   local okt, outs, tpl = pcall(result_template, res, res.n)
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

local function check_opts(who, opts, known, level)
   if opts == nil then return {} end
   if type(opts) ~= 'table' then error(fmt('%s: opts must be a table, got %s', who, describe(opts)), level + 1) end
   for k in pairs(opts) do
      if not known[k] then
         local names = {}
         for name in pairs(known) do names[#names + 1] = name end
         table.sort(names)
         error(fmt('%s: unknown option %s (options: %s)', who, tostring(k), concat(names, ', ')), level + 1)
      end
   end
   return opts
end

local function is_callable(f)
   if type(f) == 'function' then return true end
   local mt = getmetatable(f)
   return type(mt) == 'table' and mt.__call ~= nil
end

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
   local bits = passes_of(opts.passes, 'tocha.jit.compile', 2)
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
   elseif C.tc_grad_enabled() ~= 0 and any_requires_grad(outs) then
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
         jit._note(fmt('tocha.jit: graph break at %s (%s); %s runs eagerly for these inputs. %s', reason.where,
                       reason.reason, self.name, reason.advice))
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

-- The fast guard: when every argument is a tensor or a plain constant (no tables) and the
-- tensors have distinct storages, an entry keeps a signature that the next call is checked
-- against directly, with no key string built (the last entry used is tried first).
local NIL = {}
local function fast_signature(args, n, tensors)
   local sig = {n = n, grad = C.tc_grad_enabled(), tpos = {}}
   for i = 1, n do
      local a = args[i]
      if isT(a) then
         local p = a.p
         local s = {dtype = p.dtype, ndim = p.ndim, req = p.flags % 2, size = {}, empty = p.storage == nil}
         for d = 0, p.ndim - 1 do s.size[d] = tonumber(p.size[d]) end
         if not s.empty then
            s.dev = p.storage.device
            s.contig = C.tc_tensor_is_contiguous(p)
         end
         sig[i] = s
         sig.tpos[#sig.tpos + 1] = i
      elseif type(a) == 'table' then
         return nil
      elseif a == nil then
         sig[i] = NIL
      else
         sig[i] = a
      end
   end
   if #sig.tpos ~= #tensors then return nil end -- aliased tensors: the slow path handles them
   return sig
end

local function fast_match(sig, args, n)
   if n ~= sig.n or C.tc_grad_enabled() ~= sig.grad then return false end
   for i = 1, n do
      local a, s = args[i], sig[i]
      if type(s) == 'table' then
         if s == NIL then
            if a ~= nil then return false end
         else
            if not isT(a) then return false end
            local p = a.p
            if p.dtype ~= s.dtype or p.ndim ~= s.ndim or p.flags % 2 ~= s.req then return false end
            local sz = s.size
            for d = 0, s.ndim - 1 do
               if p.size[d] ~= sz[d] then return false end
            end
            local st = p.storage
            if st == nil then
               if not s.empty then return false end
            elseif s.empty or st.device ~= s.dev or C.tc_tensor_is_contiguous(p) ~= s.contig then
               return false
            end
         end
      elseif a ~= s or (a == 0 and 1 / a ~= 1 / s) then -- -0 and 0 are different constants
         return false
      end
   end
   local tpos = sig.tpos
   for j = 2, #tpos do -- distinct storages, as when the signature was made
      local sj = args[tpos[j]].p.storage
      if sj ~= nil then
         for k = 1, j - 1 do
            if args[tpos[k]].p.storage == sj then return false end
         end
      end
   end
   return true
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
   if e ~= nil and e.fast ~= nil and fast_match(e.fast, args, n) then
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
            e.fast = fast_signature(args, n, tensors)
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
