-- tocha/control.lua -- data-dependent control flow that graph mode can record:
--
--   tocha.cond(pred, f_then, f_else, ...)         f_then(...) if pred else f_else(...)
--   tocha.while_loop(cond_fn, body_fn, state)     while cond_fn(state): state = body_fn(state)
--
-- pred (and what cond_fn returns) is a boolean or a one-element tensor (nonzero: true).
-- state is a tensor or a (nested) plain table of tensors; body_fn returns the next state
-- with the same structure, sizes and dtypes.
--
-- Eager (no trace active): the predicate is read and the Lua function runs; autograd sees
-- the ops that ran, so gradients flow as through any code.
--
-- Traced (tocha.jit): a Lua `if` on a tensor would bake one trace-time branch into the
-- graph, so these record the choice instead. Both branches (or the condition and the body)
-- are traced as SUBGRAPHS with the operands (the state) as their inputs, and one COND /
-- WHILE node goes into the graph (core/graph/control.c): each run reads the predicate
-- tensor and runs only the branch it needs, or loops as many times as the data says. The
-- traced call itself returns the real results (the node is run once while tracing). A
-- tensor predicate is never read in Lua while tracing; a boolean one is a constant of the
-- trace (only the chosen branch is traced, as with any Lua value). Tensors of the traced
-- code that the functions use by closure become extra operands of the node (read at each
-- run, never frozen at their trace-time values); parameters stay captured by reference.
--
-- Gradients: under grad mode, when an operand (the state), or a tensor the functions use
-- by closure (a parameter), requires grad, the node's results get an autograd node
-- (core/graph/control_grad.c). Its backward is itself a control node recorded into the
-- trace: a cond over the branches' vector-Jacobian products on the same predicate, or a
-- while_grad that reruns the loop and applies the body's VJP from the last iteration to
-- the first. So `loss:backward()` in a traced step compiles into the same graph and takes
-- the branch (the number of iterations) each run's data says. Not supported (a graph
-- break with the reason): random ops inside the functions, second derivatives through a
-- while_loop.
local ffi = require 'ffi'
local torch = require 'torch'

local C = torch._C
local isT = torch.isTensor
local fmt = string.format
local unpack = unpack or table.unpack
local pack = function(...) return {n = select('#', ...), ...} end

local control = {}

---------------------------------------------------------------------------------------------
-- Errors at the user's line
---------------------------------------------------------------------------------------------

local function internal(src)
   return src:find('/lua/tocha/', 1, true) or src:find('/lua/torch/', 1, true) or src == '=[C]'
end

-- error(msg) at the first stack frame outside lua/tocha and lua/torch.
local function fail(msg)
   local level = 2
   while true do
      local info = debug.getinfo(level, 'S')
      if info == nil then level = 1 break end
      if not internal(info.source) then break end
      level = level + 1
   end
   error(msg, level)
end

local function c_error() return ffi.string(C.tc_last_error()) end

local function describe(x)
   if isT(x) then
      if x:dim() == 0 then return x:type() .. ' (0-dim)' end
      local s = {}
      for d = 1, x:dim() do s[d] = tostring(x:size(d)) end
      return x:type() .. ' of size ' .. table.concat(s, 'x')
   end
   if type(x) == 'table' then return 'a table' end
   return type(x) == 'nil' and 'nil' or ('a ' .. type(x))
end

---------------------------------------------------------------------------------------------
-- Structures: tensors in nested plain tables
---------------------------------------------------------------------------------------------

-- Keys of a plain table in a fixed order: the array part, then numbers, then strings.
local function keys_of(t)
   local ks, n = {}, #t
   for i = 1, n do ks[i] = i end
   local extra = {}
   for k in pairs(t) do
      if not (type(k) == 'number' and k >= 1 and k <= n and k % 1 == 0) then extra[#extra + 1] = k end
   end
   table.sort(extra, function(a, b)
      if type(a) ~= type(b) then return type(a) == 'number' end
      return a < b
   end)
   for _, k in ipairs(extra) do ks[#ks + 1] = k end
   return ks
end

local function path_of(path, k)
   if type(k) == 'string' and k:match('^[%a_][%w_]*$') then return path .. '.' .. k end
   return path .. '[' .. tostring(k) .. ']'
end

-- Flattens x: list receives its distinct tensors (by C header), the result is a template
-- (a number for a tensor, a table for a table, {value = v} for another leaf). `only` set:
-- any non-tensor leaf is an error naming `what` and the path.
local function flatten(x, list, index, what, path, only, seen)
   if isT(x) then
      local addr = tonumber(ffi.cast('uintptr_t', x.p))
      local k = index[addr]
      if k == nil then
         k = #list + 1
         list[k], index[addr] = x, k
      end
      return k
   end
   if type(x) == 'table' and getmetatable(x) == nil then
      if seen[x] then fail(fmt('%s%s contains itself', what, path)) end
      seen[x] = true
      local t = {}
      for _, k in ipairs(keys_of(x)) do t[k] = flatten(x[k], list, index, what, path_of(path, k), only, seen) end
      seen[x] = nil
      return {tbl = t}
   end
   if only then
      fail(fmt('%s%s is %s; expected tensors (or tables of tensors)', what, path, describe(x)))
   end
   return {value = x}
end

local function flat(x, what, only)
   local list = {}
   local tpl = flatten(x, list, {}, what, '', only, {})
   return list, tpl
end

-- The structure of template with tensors list[i].
local function rebuild(tpl, list)
   if type(tpl) == 'number' then return list[tpl] end
   if tpl.tbl then
      local r = {}
      for k, v in pairs(tpl.tbl) do r[k] = rebuild(v, list) end
      return r
   end
   return tpl.value
end

-- "tensor", "{tensor, {tensor}}": a template's shape, for messages; same_shape compares.
local function shape_text(tpl)
   if type(tpl) == 'number' then return 'tensor' end
   if tpl.tbl then
      local s = {}
      for _, k in ipairs(keys_of(tpl.tbl)) do
         s[#s + 1] = (type(k) == 'string' and (k .. '=') or '') .. shape_text(tpl.tbl[k])
      end
      return '{' .. table.concat(s, ', ') .. '}'
   end
   return type(tpl.value)
end
local function same_shape(a, b) return shape_text(a) == shape_text(b) end

-- Positions of tpl's leaves in order (the i-th result tensor of a function).
local function leaves(tpl, out)
   out = out or {}
   if type(tpl) == 'number' then
      out[#out + 1] = tpl
   elseif tpl.tbl then
      for _, k in ipairs(keys_of(tpl.tbl)) do leaves(tpl.tbl[k], out) end
   end
   return out
end

---------------------------------------------------------------------------------------------
-- Predicates
---------------------------------------------------------------------------------------------

local function check_pred(p, what)
   if type(p) == 'boolean' then return end
   if not isT(p) then
      fail(fmt('%s must be a boolean or a one-element tensor, got %s', what, describe(p)))
   end
   if p:nElement() ~= 1 then
      fail(fmt('%s must be a boolean or a one-element tensor, got %s', what, describe(p)))
   end
end

local function truth(p)
   if type(p) == 'boolean' then return p end
   return torch.no_grad(function() return p:view(1)[1] ~= 0 end)
end

local function tracing() return C.tc_trace_current() ~= nil end

local function check_fn(f, what)
   if type(f) ~= 'function' and not (type(f) == 'table' and getmetatable(f) and getmetatable(f).__call) then
      fail(fmt('%s must be a function, got %s', what, describe(f)))
   end
end

---------------------------------------------------------------------------------------------
-- Subgraphs
---------------------------------------------------------------------------------------------

-- Traces f(args) as a subgraph whose inputs are the tensors `inputs` (in order). Returns
-- the tc_graph* and the result template (tensor positions into the output list) and the
-- output count. Results must be tensors or tables of tensors.
local function trace_sub(f, args, nargs, inputs, what)
   local slot = ffi.new('tc_graph*[1]')
   if C.tc_control_sub_begin(slot) ~= 0 then fail(what .. ': ' .. c_error()) end
   local sub = slot[0]
   local ok, r = pcall(function()
      for i, t in ipairs(inputs) do
         if C.tc_trace_input(sub, t.p) ~= 0 then fail(fmt('%s: operand %d: %s', what, i, c_error())) end
      end
      local res = pack(f(unpack(args, 1, nargs)))
      local outs, tpl = flat(res.n == 1 and res[1] or {unpack(res, 1, res.n)}, what .. ' returned ', true)
      if res.n == 0 then fail(what .. ' returned nothing; it must return tensors') end
      for _, t in ipairs(outs) do
         if C.tc_trace_output(sub, t.p) ~= 0 then fail(what .. ': ' .. c_error()) end
      end
      return {tpl = tpl, nres = #outs, multi = res.n > 1, n = res.n}
   end)
   local st = C.tc_control_sub_end(sub)
   local msg = st ~= 0 and c_error() or nil
   if not ok or st ~= 0 then
      C.tc_control_sub_free(sub)
      if not ok then error(r, 0) end
      fail(what .. ': ' .. msg)
   end
   return ffi.gc(sub, C.tc_control_sub_free), r
end

-- Hands a subgraph over to C (which frees it on failure).
local function give(sub) return ffi.gc(sub, nil) end

-- A C failure of a node. What graph mode cannot differentiate (random ops inside the
-- functions) is a graph break inside tocha.jit (jit.compile then runs the function
-- eagerly, where autograd sees the ops), else an error.
local function node_failed(what)
   local msg = c_error()
   if msg:find('not supported yet', 1, true) then
      local ok, jit = pcall(require, 'tocha.jit')
      if ok and jit.is_tracing() then jit.graph_break(what .. ': ' .. msg) end
   end
   fail(what .. ': ' .. msg)
end

---------------------------------------------------------------------------------------------
-- tocha.cond
---------------------------------------------------------------------------------------------

local function traced_cond(pred, f_then, f_else, args, n)
   local ops = flat(args, 'tocha.cond: operand ', false)
   local s1, r1 = trace_sub(f_then, args, n, ops, 'tocha.cond: the then branch')
   local s2, r2 = trace_sub(f_else, args, n, ops, 'tocha.cond: the else branch')
   if r1.n ~= r2.n or not same_shape(r1.tpl, r2.tpl) then
      fail(fmt('tocha.cond: the branches return different structures: the then branch returns %s, ' ..
               'the else branch %s', shape_text(r1.tpl), shape_text(r2.tpl)))
   end
   -- the same structure may still place tensors differently (then returns x, x; else x, y)
   local l1, l2 = leaves(r1.tpl), leaves(r2.tpl)
   for i = 1, #l1 do
      if l1[i] ~= l2[i] then
         fail('tocha.cond: the branches return the same tensor in different places (one returns a ' ..
              'tensor twice); return distinct tensors, e.g. x:clone()')
      end
   end
   local nops = #ops
   local cops = ffi.new('const tc_tensor*[?]', math.max(nops, 1))
   for i = 1, nops do cops[i - 1] = ops[i].p end
   local nres = r1.nres
   local res = ffi.new('tc_tensor*[?]', math.max(nres, 1))
   if C.tc_control_cond(give(s1), give(s2), pred.p, cops, nops, res, nres) ~= 0 then
      node_failed('tocha.cond')
   end
   local list = {}
   for i = 1, nres do list[i] = torch._wrap(res[i - 1]) end
   local out = rebuild(r1.tpl, list)
   if r1.multi then return unpack(out, 1, r1.n) end
   return out
end

-- tocha.cond(pred, f_then, f_else, ...): f_then(...) when pred is true, else f_else(...).
function control.cond(pred, f_then, f_else, ...)
   check_pred(pred, 'tocha.cond: pred')
   check_fn(f_then, 'tocha.cond: f_then')
   check_fn(f_else, 'tocha.cond: f_else')
   if type(pred) == 'boolean' or not tracing() then
      if truth(pred) then return f_then(...) end
      return f_else(...)
   end
   return traced_cond(pred, f_then, f_else, pack(...), select('#', ...))
end

---------------------------------------------------------------------------------------------
-- tocha.while_loop
---------------------------------------------------------------------------------------------

-- The sizes and dtypes of a flattened state, compared in eager mode.
local function same_tensor_type(a, b)
   return a:type() == b:type() and a:isSameSizeAs(b)
end

local function check_next(state_list, state_tpl, nxt)
   local list, tpl = flat(nxt, 'tocha.while_loop: body_fn returned ', true)
   if not same_shape(tpl, state_tpl) then
      fail(fmt('tocha.while_loop: body_fn returned %s for a state %s (the state must keep its structure)',
               shape_text(tpl), shape_text(state_tpl)))
   end
   local l1, l2 = leaves(state_tpl), leaves(tpl)
   for i = 1, #l1 do
      local a, b = state_list[l1[i]], list[l2[i]]
      if not same_tensor_type(a, b) then
         fail(fmt('tocha.while_loop: body_fn changed state tensor %d from %s to %s (the state must keep ' ..
                  'its sizes and dtypes)', i, describe(a), describe(b)))
      end
   end
end

local function traced_while(cond_fn, body_fn, state)
   local list, tpl = flat(state, 'tocha.while_loop: state', true)
   -- one input per position: a tensor appearing twice is given a copy (the body may
   -- return two different tensors there)
   local pos = leaves(tpl)
   local inputs, seen = {}, {}
   for i, k in ipairs(pos) do
      local t = list[k]
      if seen[k] then t = t:clone() end
      seen[k] = true
      inputs[i] = t
   end
   local ptpl = {}
   do -- the template over positions
      local i = 0
      local function walk(t)
         if type(t) == 'number' then i = i + 1; return i end
         if t.tbl then
            local r = {}
            for _, k in ipairs(keys_of(t.tbl)) do r[k] = walk(t.tbl[k]) end
            return {tbl = r}
         end
         return t
      end
      ptpl = walk(tpl)
   end
   local st = rebuild(ptpl, inputs)
   local sc, rc = trace_sub(cond_fn, {st}, 1, inputs, 'tocha.while_loop: cond_fn')
   if rc.n ~= 1 or type(rc.tpl) ~= 'number' then
      fail('tocha.while_loop: cond_fn must return one one-element tensor computed from the state, got ' ..
           shape_text(rc.tpl))
   end
   local sb, rb = trace_sub(body_fn, {st}, 1, inputs, 'tocha.while_loop: body_fn')
   if rb.multi or not same_shape(rb.tpl, ptpl) then
      fail(fmt('tocha.while_loop: body_fn returned %s for a state %s (the state must keep its structure)',
               rb.multi and (rb.n .. ' values') or shape_text(rb.tpl), shape_text(ptpl)))
   end
   local lb = leaves(rb.tpl)
   for i = 1, #lb do
      if lb[i] ~= i then
         fail('tocha.while_loop: body_fn returns the same tensor for two state entries; return distinct ' ..
              'tensors, e.g. x:clone()')
      end
   end
   local n = #inputs
   local cst = ffi.new('const tc_tensor*[?]', n)
   for i = 1, n do cst[i - 1] = inputs[i].p end
   local res = ffi.new('tc_tensor*[?]', n)
   if C.tc_control_while(give(sc), give(sb), cst, n, res) ~= 0 then node_failed('tocha.while_loop') end
   local out = {}
   for i = 1, n do out[i] = torch._wrap(res[i - 1]) end
   return rebuild(ptpl, out)
end

-- tocha.while_loop(cond_fn, body_fn, state): the state after applying body_fn while
-- cond_fn(state) is true.
function control.while_loop(cond_fn, body_fn, state)
   check_fn(cond_fn, 'tocha.while_loop: cond_fn')
   check_fn(body_fn, 'tocha.while_loop: body_fn')
   local list, tpl = flat(state, 'tocha.while_loop: state', true)
   if #list == 0 then fail('tocha.while_loop: the state holds no tensor') end
   if tracing() then return traced_while(cond_fn, body_fn, state) end
   local cur, cur_list = state, list
   while true do
      local p = cond_fn(cur)
      check_pred(p, 'tocha.while_loop: cond_fn\'s result')
      if not truth(p) then break end
      local nxt = body_fn(cur)
      check_next(cur_list, tpl, nxt)
      cur = nxt
      cur_list = flat(nxt, '', true)
   end
   return cur
end

return control
