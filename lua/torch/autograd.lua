-- torch/autograd.lua -- PyTorch-style autograd on tensors, over the C engine
-- (core/tocha_autograd.h): the fields requires_grad / grad / grad_fn / is_leaf,
-- backward, detach, retain_grad, hooks, grad mode (torch.no_grad ...), torch.autograd.*.
--
-- Fields are served by the tensor metatype (init.lua) through torch._field_get /
-- torch._field_set; requires_grad and is_leaf read tc_tensor.flags directly (no C call).
--
-- LuaJIT: a C function that calls back into Lua (hooks run inside backward) must not be
-- called from a compiled trace ("bad callback"), so every function here that calls
-- tc_autograd_backward / tc_autograd_grad is excluded from the JIT (jit.off).
local torch = ...
local ffi = require 'ffi'
local bit = require 'bit'

local C = torch._C
local tensor_item = torch._item -- one element as a number, also from device memory
local wrap, raise = torch._wrap, torch._raise
local methods = torch._methods
local Handle = torch._Handle
local band = bit.band

local REQ = C.TC_TF_REQUIRES_GRAD

local function isT(x) return type(x) == 'cdata' and ffi.istype(Handle, x) end

local function describe(x)
   if isT(x) then return torch._tensor_type_name(x.p) end
   return type(x)
end

local field_get, field_set = torch._field_get, torch._field_set

---------------------------------------------------------------------------------------------
-- Fields
---------------------------------------------------------------------------------------------

field_get.requires_grad = function(t) return band(t.p.flags, REQ) ~= 0 end
field_set.requires_grad = function(t, v)
   if C.tc_tensor_set_requires_grad(t.p, v and 1 or 0) ~= 0 then raise(3) end
end

field_get.is_leaf = function(t) return C.tc_tensor_is_leaf(t.p) ~= 0 end

field_get.grad_fn = function(t)
   local s = C.tc_tensor_grad_fn_name(t.p)
   if s == nil then return nil end
   return ffi.string(s)
end

field_get.grad = function(t)
   local g = C.tc_tensor_grad(t.p)
   if g == nil then return nil end
   return wrap(g)
end
field_set.grad = function(t, g)
   if g ~= nil and not isT(g) then
      error('grad: expected a tensor or nil, got ' .. describe(g), 3)
   end
   if C.tc_tensor_set_grad(t.p, g ~= nil and g.p or nil) ~= 0 then raise(3) end
end

-- t:requires_grad_([b]) sets the flag (default true) and returns t.
function methods.requires_grad_(t, b)
   if b == nil then b = true end
   if C.tc_tensor_set_requires_grad(t.p, b and 1 or 0) ~= 0 then raise(2) end
   return t
end

local outp = ffi.new('tc_tensor*[1]')

-- t:detach(): a tensor sharing t's storage, without history.
function methods.detach(t)
   if C.tc_tensor_detach(t.p, outp) ~= 0 then raise(2) end
   return wrap(outp[0])
end

-- t:retain_grad(): a non-leaf keeps its gradient in .grad after backward.
function methods.retain_grad(t)
   if C.tc_tensor_retain_grad(t.p) ~= 0 then raise(2) end
   return t
end

-- Graph mode's value-read check (init.lua): false outside traces.
local check_read = false
torch._on_trace_check(function(f) check_read = f end)

-- t:item(): the value of a one-element tensor, as a number.
if methods.item == nil then
   function methods.item(t)
      local n = C.tc_tensor_numel(t.p)
      if n ~= 1 then
         error(string.format('item: only one-element tensors can be converted to a number (this one has %d)',
            tonumber(n)), 2)
      end
      if check_read then check_read(t.p, 'x:item()') end
      return tensor_item(t.p)
   end
end

-- A one-element tensor compares with a number (`if loss < 0.1`, `if x:mean() > 0.5` where
-- the mean is a 0-dim tensor because x requires grad); anything else is an error.
local function cmp_value(x, what)
   if type(x) == 'number' then return x end
   if isT(x) and C.tc_tensor_numel(x.p) == 1 then
      if check_read then check_read(x.p, 'a tensor compared with ' .. (what == '<' and '< or >' or '<= or >=')) end
      return tensor_item(x.p)
   end
   error(what .. ': only numbers and one-element tensors can be compared with < and <=; use lt/le/gt/ge for ' ..
      'elementwise comparisons (got ' .. (isT(x) and (tostring(tonumber(C.tc_tensor_numel(x.p))) ..
      '-element tensor') or type(x)) .. ')', 3)
end
local mt = torch._tensor_mt
if mt.__lt == nil then
   mt.__lt = function(a, b) return cmp_value(a, '<') < cmp_value(b, '<') end
end
if mt.__le == nil then
   mt.__le = function(a, b) return cmp_value(a, '<=') <= cmp_value(b, '<=') end
end
-- `==` with a number compares the value of a one-element tensor (`if x:max() == 0` keeps
-- working when the max is a 0-dim tensor); between tensors it stays identity (Torch7), and
-- anything else (nil, strings, tables) is simply not equal.
if mt.__eq == nil then
   mt.__eq = function(a, b)
      if type(b) == 'number' then a, b = b, a end
      if type(a) == 'number' then
         if not (isT(b) and C.tc_tensor_numel(b.p) == 1) then return false end
         if check_read then check_read(b.p, 'a tensor compared with ==') end
         return tensor_item(b.p) == a
      end
      return isT(a) and isT(b) and a.p == b.p
   end
end

---------------------------------------------------------------------------------------------
-- Grad mode
---------------------------------------------------------------------------------------------

function torch.is_grad_enabled() return C.tc_grad_enabled() ~= 0 end

function torch.set_grad_enabled(b)
   return C.tc_set_grad_enabled(b and 1 or 0) ~= 0
end

-- Runs fn(...) with grad mode set to `on`, restores the previous mode even when fn
-- raises (the error is re-raised unchanged), and returns fn's results.
local function callable(x)
   if type(x) == 'function' then return true end
   local mt = type(x) == 'table' and getmetatable(x)
   return mt and mt.__call ~= nil or false
end

local function with_mode(on, fn, ...)
   local prev = C.tc_set_grad_enabled(on)
   local r = {pcall(fn, ...)}
   C.tc_set_grad_enabled(prev)
   if not r[1] then error(r[2], 0) end
   return unpack(r, 2, table.maxn(r))
end

function torch.no_grad(fn, ...)
   if not callable(fn) then error('no_grad: expected a function, got ' .. type(fn), 2) end
   return with_mode(0, fn, ...)
end
function torch.enable_grad(fn, ...)
   if not callable(fn) then error('enable_grad: expected a function, got ' .. type(fn), 2) end
   return with_mode(1, fn, ...)
end

---------------------------------------------------------------------------------------------
-- Hooks: C keeps integer ids; this table maps them to the Lua functions
---------------------------------------------------------------------------------------------

local hooks = {}
local next_hook_id = 1

local runner = ffi.cast('tc_hook_runner', function(id, g, rep)
   local fn = hooks[tonumber(id)]
   if fn == nil then return 0 end
   local ok, r = pcall(function()
      local res = fn(torch._wrap_borrowed(g))
      if res ~= nil then
         if not isT(res) then error('a hook must return a tensor or nil, got ' .. type(res), 0) end
         C.tc_tensor_retain(res.p)
         rep[0] = res.p
      end
   end)
   if ok then return 0 end
   C.tc_set_error(C.TC_ERR_ARG, '%s', 'backward: a hook failed: ' .. tostring(r))
   return C.TC_ERR_ARG
end)
C.tc_autograd_set_hook_runner(runner)
torch._hook_runner = runner -- keep the callback alive

local HookHandle = {}
HookHandle.__index = HookHandle

-- handle:remove(): the hook no longer runs.
function HookHandle:remove()
   if self.id == nil then return end
   hooks[self.id] = nil
   C.tc_tensor_remove_hook(self.t.p, self.id)
   self.id = nil
   self.t = nil
end

-- t:register_hook(fn): fn(grad) runs when t's gradient is computed; it may return a
-- replacement gradient (same size). Returns a handle with :remove().
function methods.register_hook(t, fn)
   if type(fn) ~= 'function' then error('register_hook: expected a function, got ' .. type(fn), 2) end
   local id = next_hook_id
   if C.tc_tensor_add_hook(t.p, id) ~= 0 then raise(2) end
   next_hook_id = id + 1
   hooks[id] = fn
   return setmetatable({id = id, t = t}, HookHandle)
end

---------------------------------------------------------------------------------------------
-- backward and grad
---------------------------------------------------------------------------------------------

local autograd = {}
torch.autograd = autograd

-- A tensor or a list of tensors -> a C array, its length. nil entries allowed when
-- allow_nil (gradients: implicit 1).
local function tensor_list(name, what, x, allow_nil, level)
   local list
   if isT(x) then list = {x}
   elseif type(x) == 'table' then list = x
   else error(string.format('%s: %s must be a tensor or a list of tensors, got %s', name, what, describe(x)), level + 1) end
   local n = table.maxn(list)
   if n == 0 then error(string.format('%s: %s is empty', name, what), level + 1) end
   local arr = ffi.new('const tc_tensor*[?]', n)
   for i = 1, n do
      local t = list[i]
      if t == nil and allow_nil then
         arr[i - 1] = nil
      elseif isT(t) then
         arr[i - 1] = t.p
      else
         error(string.format('%s: %s[%d] must be a tensor, got %s', name, what, i, describe(t)), level + 1)
      end
   end
   return arr, n, list
end

local function opts_of(name, opts, level)
   if opts == nil then return {} end
   if type(opts) ~= 'table' or isT(opts) then
      error(name .. ': options must be a table, got ' .. describe(opts), level + 1)
   end
   return opts
end

-- t:backward([gradient], [opts]): opts {retain_graph=, create_graph=}; retain_graph
-- defaults to create_graph (PyTorch).
function methods.backward(t, gradient, opts)
   if opts == nil and type(gradient) == 'table' and not isT(gradient) then gradient, opts = nil, gradient end
   if gradient ~= nil and not isT(gradient) then
      error('backward: gradient must be a tensor, got ' .. describe(gradient), 2)
   end
   opts = opts_of('backward', opts, 2)
   local create = opts.create_graph and 1 or 0
   local retain = opts.retain_graph
   if retain == nil then retain = create == 1 end
   local roots = ffi.new('const tc_tensor*[1]', t.p)
   local grads = ffi.new('const tc_tensor*[1]', gradient ~= nil and gradient.p or nil)
   if C.tc_autograd_backward(roots, grads, 1, retain and 1 or 0, create) ~= 0 then raise(2) end
end
jit.off(methods.backward)

-- The output gradients as a C array of n slots (nil: none given; missing ones NULL), for
-- backward and grad; errors are raised at the caller's caller (level 3).
local function seed_list(who, what, list, n)
   if list == nil then return nil end
   local g, ng = tensor_list(who, what, list, true, 3)
   if ng > n then error(who .. ': ' .. ng .. ' ' .. what .. ' for ' .. n .. ' tensors', 3) end
   local arr = ffi.new('const tc_tensor*[?]', n)
   for i = 0, ng - 1 do arr[i] = g[i] end
   return arr
end

-- create_graph as 0/1, and retain_graph (defaults to create_graph, as in PyTorch)
local function modes_of(opts)
   local create = opts.create_graph and 1 or 0
   local retain = opts.retain_graph
   if retain == nil then retain = create == 1 end
   return create, retain
end

-- torch.autograd.backward(tensors, grad_tensors, opts)
function autograd.backward(tensors, grad_tensors, opts)
   local roots, n = tensor_list('autograd.backward', 'tensors', tensors, false, 2)
   local grads = seed_list('autograd.backward', 'grad_tensors', grad_tensors, n)
   opts = opts_of('autograd.backward', opts, 2)
   local create, retain = modes_of(opts)
   if C.tc_autograd_backward(roots, grads, n, retain and 1 or 0, create) ~= 0 then raise(2) end
end
jit.off(autograd.backward)

-- torch.autograd.grad(outputs, inputs, grad_outputs, opts): the gradients of outputs with
-- respect to inputs (a tensor when inputs is a tensor, else a list); opts {retain_graph=,
-- create_graph=, allow_unused=, stop_at_inputs=} (unused inputs give nil only with
-- allow_unused; stop_at_inputs gives partial derivatives: when one input depends on another,
-- the path through the first is not counted in the second).
function autograd.grad(outputs, inputs, grad_outputs, opts)
   local outs, nout = tensor_list('autograd.grad', 'outputs', outputs, false, 2)
   local ins, nin = tensor_list('autograd.grad', 'inputs', inputs, false, 2)
   local gouts = seed_list('autograd.grad', 'grad_outputs', grad_outputs, nout)
   opts = opts_of('autograd.grad', opts, 2)
   local create, retain = modes_of(opts)
   local res = ffi.new('tc_tensor*[?]', nin)
   if C.tc_autograd_grad(outs, gouts, nout, ins, nin, retain and 1 or 0, create,
         (opts.allow_unused and 1 or 0) + (opts.stop_at_inputs and 2 or 0), res) ~= 0 then
      raise(2)
   end
   local r = {}
   for i = 0, nin - 1 do
      if res[i] ~= nil then r[i + 1] = wrap(res[i]) end
   end
   if isT(inputs) then return r[1] end
   return r
end
jit.off(autograd.grad)

-- torch.autograd.set_detect_anomaly(b): NaN produced by an op or a gradient rule is an
-- error naming it. Returns the previous setting.
function autograd.set_detect_anomaly(b)
   return C.tc_autograd_set_anomaly(b and 1 or 0) ~= 0
end
function autograd.is_anomaly_enabled() return C.tc_autograd_anomaly() ~= 0 end

return autograd
