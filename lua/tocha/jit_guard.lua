-- tocha/jit_guard.lua -- graph mode's guards and caches (lua/tocha/jit.lua, docs/jit.md):
--
--   flatten(args, n, level)        the distinct tensor leaves of a call's arguments (the graph
--                                  inputs) and its guard key: grad mode, every tensor's dtype,
--                                  sizes, device, contiguity and requires-grad, the table
--                                  structure, the non-tensor constants
--   fast_signature / fast_match    jit.compile's guard without a key string, for calls whose
--                                  arguments are tensors and plain constants
--   geom_of / geom_is              the same for one tensor (tocha.jit.step's input and target)
--   result_template / build        a traced function's results as graph outputs, and back
--   cache_*                        the LRU of graphs keyed by guard strings that model:compile
--                                  and tocha.jit.step keep (a note when it thrashes)
--   check_opts, describe, ...      small helpers the graph-mode files share
--
-- Nothing here traces or runs a graph; it decides which graph a call may use.
local ffi = require 'ffi'
local torch = require 'torch'

local C = torch._C
local isT = torch.isTensor
local fmt, concat = string.format, table.concat

local G = {}

local short_dtype = {}
for dt, name in pairs(torch._type_names) do short_dtype[dt] = name:match('^torch%.(.*)Tensor$') end

-- "torch.FloatTensor", "nn.Linear", "number": for messages.
local function describe(x)
   if isT(x) then return torch._type_names[x.p.dtype] end
   return torch.typename(x) or type(x)
end
G.describe = describe

-- jit._note is looked up at each call: tests and tools replace it to collect the notes.
function G.note(msg) require('tocha.jit')._note(msg) end

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
G.TF_REQ = TF_REQ

---------------------------------------------------------------------------------------------
-- Flattening arguments and the guard key
---------------------------------------------------------------------------------------------

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

-- The dispatcher modes a graph depends on, as one number: grad mode, and the autocast state
-- (a graph traced inside torch.autocast holds its casts; outside, it must not be reused).
function G.mode()
   local m = C.tc_grad_enabled()
   if C.tc_autocast_enabled() ~= 0 then m = m + 2 * (1 + C.tc_autocast_dtype()) end
   return m
end

-- Flattens args[1..n]: returns the distinct tensor leaves and the guard key.
function G.flatten(args, n, level)
   local st = {tensors = {}, paths = {}, storages = {}, seen = {}, parts = {}, what = 'argument'}
   local ac = C.tc_autocast_enabled() ~= 0 and ('autocast' .. C.tc_autocast_dtype() .. ' ') or ''
   st.parts[1] = ac .. (C.tc_grad_enabled() ~= 0 and 'grad(' or 'nograd(')
   for i = 1, n do
      if i > 1 then st.parts[#st.parts + 1] = ', ' end
      walk(st, args[i], tostring(i), level + 1)
   end
   st.parts[#st.parts + 1] = ')'
   return st.tensors, concat(st.parts)
end

---------------------------------------------------------------------------------------------
-- Results: graph outputs and the structure they are returned in
---------------------------------------------------------------------------------------------

-- Results: tensors or nested plain tables of tensors. Returns the distinct tensors (the
-- graph outputs) and a template with output numbers in place of the tensors; raises a
-- message (level 0) for anything else.
function G.result_template(res, n)
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

-- fn's results rebuilt from a graph's outputs (tpl: output numbers in fn's structure).
local function build(tpl, outs)
   if type(tpl) == 'number' then return outs[tpl] end
   local r = {}
   for k, v in pairs(tpl) do r[k] = build(v, outs) end
   return r
end
G.build = build

function G.any_requires_grad(outs)
   for i = 1, #outs do
      if outs[i].p.flags % 2 == TF_REQ then return true end
   end
   return false
end

---------------------------------------------------------------------------------------------
-- Fast guards: the last entry's signature checked directly, no key string built
---------------------------------------------------------------------------------------------

-- jit.compile: when every argument is a tensor or a plain constant (no tables) and the
-- tensors have distinct storages, an entry keeps a signature that the next call is checked
-- against directly (the last entry used is tried first).
local NIL = {}
function G.fast_signature(args, n, tensors)
   local sig = {n = n, grad = G.mode(), tpos = {}}
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

function G.fast_match(sig, args, n)
   if n ~= sig.n or G.mode() ~= sig.grad then return false end
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

-- tocha.jit.step: the geometry of one tensor argument (dtype, ndim, contiguity, requires
-- grad, sizes) and the check of a later argument against it.
function G.geom_of(t)
   local p = t.p
   local g = {p.dtype, p.ndim, C.tc_tensor_is_contiguous(p) ~= 0, p.flags % 2}
   for d = 0, p.ndim - 1 do g[#g + 1] = p.size[d] end
   return g
end

function G.geom_is(g, t)
   local p = t.p
   if p.dtype ~= g[1] or p.ndim ~= g[2] or p.storage == nil or p.flags % 2 ~= g[4] then return false end
   for d = 0, p.ndim - 1 do
      if p.size[d] ~= g[5 + d] then return false end
   end
   return (C.tc_tensor_is_contiguous(p) ~= 0) == g[3]
end

---------------------------------------------------------------------------------------------
-- LRU caches of entries {used = tick, ...} keyed by guard strings (model:compile, jit.step)
---------------------------------------------------------------------------------------------

function G.cache_new(max, name)
   return {entries = {}, n = 0, tick = 0, max = max, evicted = {}, retraces = 0, warned = false, name = name}
end

-- Adds e under key, evicting the least recently used entry (free(old)) when full; a note
-- when evicted keys keep coming back.
function G.cache_put(c, key, e, free)
   if c.evicted[key] then
      c.retraces = c.retraces + 1
      if c.retraces >= 2 and not c.warned then
         c.warned = true
         G.note(fmt('tocha.jit: %s retraced %d times: the guard keeps changing (input shapes, train/evaluate, ' ..
                    'optimizer options) and its cache of %d graphs keeps evicting them; keep shapes stable (pad ' ..
                    'batches) or raise max_cache', c.name, c.retraces, c.max))
      end
   end
   if c.n >= c.max then
      local old, oldk
      for k, x in pairs(c.entries) do
         if old == nil or x.used < old.used then old, oldk = x, k end
      end
      c.entries[oldk], c.n = nil, c.n - 1
      c.evicted[oldk] = true
      free(old)
   end
   c.tick = c.tick + 1
   e.used = c.tick
   c.entries[key], c.n = e, c.n + 1
end

function G.cache_get(c, key)
   local e = c.entries[key]
   if e then
      c.tick = c.tick + 1
      e.used = c.tick
   end
   return e
end

function G.cache_clear(c, free)
   for _, e in pairs(c.entries) do free(e) end
   c.entries, c.n, c.evicted = {}, 0, {}
end

function G.free_entry(e)
   if e.cap then e.cap:free() end -- a CUDA graph of it (jit_graph.lua's g:capture)
   if e.graph then e.graph:free() end
end

---------------------------------------------------------------------------------------------
-- Options
---------------------------------------------------------------------------------------------

-- opts checked against the known names (a table of name -> true); {} for nil.
function G.check_opts(who, opts, known, level)
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

function G.check_cache_size(who, v, level)
   if v == nil then return 8 end
   if type(v) ~= 'number' or v < 1 or v % 1 ~= 0 then
      error(fmt('%s: max_cache must be a positive integer, got %s', who, tostring(v)), level + 1)
   end
   return v
end

function G.is_callable(f)
   if type(f) == 'function' then return true end
   local mt = getmetatable(f)
   return type(mt) == 'table' and mt.__call ~= nil
end

return G
