-- optim/util.lua -- what every optim algorithm shares: argument checks that raise at the
-- user's line, the checked call of the user's `feval`, state buffers, and running the
-- update math with gradient recording off.
--
-- Every algorithm is written once as `update(x, dfdx, config, state)` working in place on
-- tensors with Torch7's config and state field names. The functional form
-- (`optim.sgd(feval, x, config, state)`) and the PyTorch-style class (`optim.SGD`) both call
-- that one function; the class only translates its hyper-parameter names.
local ffi = require 'ffi'
local PTR = torch._elem.PTR
local C = torch._C
local U = {}

-- Error at `level` (2 = the caller of the function calling U.fail) naming the algorithm.
function U.fail(name, msg, level)
   error('optim.' .. name .. ': ' .. msg, level + 1)
end

local function describe(v)
   if torch.isTensor(v) then
      local s = {}
      for i = 1, v:dim() do s[i] = tostring(v:size(i)) end
      return v:type() .. ' of size ' .. (#s > 0 and table.concat(s, 'x') or '0')
   end
   return type(v)
end
U.describe = describe

-- Checks the arguments of a functional form: opfunc must be callable, x a float tensor.
-- Returns config and state (state defaults to config, Torch7's rule).
function U.check_args(name, opfunc, x, config, state, level)
   level = level + 1
   local t = type(opfunc)
   if t ~= 'function' and not (t == 'table' and getmetatable(opfunc) and getmetatable(opfunc).__call) then
      U.fail(name, 'expected a function feval(x) as argument 1, got ' .. describe(opfunc), level)
   end
   if not torch.isTensor(x) then
      U.fail(name, 'expected a tensor x as argument 2, got ' .. describe(x), level)
   end
   local tn = x:type()
   if tn ~= 'torch.DoubleTensor' and tn ~= 'torch.FloatTensor' and tn ~= 'torch.HalfTensor'
      and not tn:find('Cuda') then
      U.fail(name, 'x must be a floating point tensor, got ' .. tn, level)
   end
   if config ~= nil and type(config) ~= 'table' then
      U.fail(name, 'config (argument 3) must be a table, got ' .. describe(config), level)
   end
   if state ~= nil and type(state) ~= 'table' then
      U.fail(name, 'state (argument 4) must be a table, got ' .. describe(state), level)
   end
   config = config or {}
   return config, state or config
end

-- Calls opfunc(x) and checks it returned f (a number or a one-element tensor) and df/dx (a
-- tensor with x's number of elements). Returns f as a number and dfdx.
function U.eval(name, opfunc, x, level, no_grad_needed)
   local f, g = opfunc(x)
   if torch.isTensor(f) then
      if f:nElement() ~= 1 then
         U.fail(name, 'feval must return f(x) as a number or a one-element tensor, got ' ..
                describe(f), level + 1)
      end
      f = f:view(1)[1]
   elseif type(f) ~= 'number' then
      U.fail(name, 'feval must return f(x) (a number) and df/dx (a tensor), got ' ..
             describe(f) .. ' as f(x)', level + 1)
   end
   if no_grad_needed then return f, g end
   if not torch.isTensor(g) then
      U.fail(name, 'feval must return df/dx as a tensor, got ' .. describe(g), level + 1)
   end
   if g:nElement() ~= x:nElement() then
      U.fail(name, 'df/dx has ' .. g:nElement() .. ' elements but x has ' .. x:nElement() ..
             ' (' .. describe(g) .. ' vs ' .. describe(x) .. ')', level + 1)
   end
   if not g:isSameSizeAs(x) then g = g:view(x:size()) end
   return f, g
end

-- Hyper-parameter read from config with a default, checked to be a number.
function U.num(name, config, key, default, level)
   local v = config[key]
   if v == nil then return default end
   if type(v) ~= 'number' then
      U.fail(name, 'config.' .. key .. ' must be a number, got ' .. describe(v), level + 1)
   end
   return v
end

-- A per-element hyper-parameter tensor (learningRates, weightDecays) must match x.
function U.vec(name, config, key, x, level)
   local v = config[key]
   if v == nil then return nil end
   if not torch.isTensor(v) or v:nElement() ~= x:nElement() then
      U.fail(name, 'config.' .. key .. ' must be a tensor with ' .. x:nElement() ..
             ' elements like x, got ' .. describe(v), level + 1)
   end
   return v
end

-- state[key], created as a tensor like x filled with `fill` (0 when nil) the first time.
function U.buf(state, key, x, fill)
   local b = state[key]
   if b == nil or b:nElement() ~= x:nElement() then
      b = x.new():resizeAs(x):fill(fill or 0)
      state[key] = b
   elseif not b:isSameSizeAs(x) then
      b = b:view(x:size())
      state[key] = b
   end
   return b
end

-- A scratch tensor of x's size kept in state (contents undefined). While a graph trace
-- records the step (tocha.jit.step), a fresh tensor instead, and the kept one is dropped:
-- kept in state, the scratch would be captured and written back by every graph run (one
-- more parameter-sized buffer each, live for good); fresh, it is a value inside the graph,
-- which fusion removes or the memory plan shares.
function U.tmp(state, key, x)
   if C.tc_trace_current() ~= nil then
      state[key] = nil
      return x.new():resizeAs(x)
   end
   local b = state[key]
   if b == nil or not b:isSameSizeAs(x) then
      b = x.new():resizeAs(x)
      state[key] = b
   end
   return b
end

-- The gradient with weight decay folded in, without touching the caller's dfdx:
-- dfdx + wd * x (+ wds .* x). Returns dfdx itself when there is no decay.
function U.decayed(state, x, dfdx, wd, wds)
   if (wd == nil or wd == 0) and wds == nil then return dfdx end
   local d = U.tmp(state, '_dfdx', x):copy(dfdx)
   if wd ~= nil and wd ~= 0 then d:add(wd, x) end
   if wds ~= nil then d:addcmul(1, wds:viewAs(x), x) end
   return d
end

-- Per-step scalars (the learning rate after decay and schedules, Adam's bias corrections)
-- do not reach the tensor ops as Lua numbers: an algorithm's `prep(x, h, state)` writes
-- them into a small tensor kept in state (raw element writes, no op) and its
-- `update(x, dfdx, h, state)` reads them through 0-dim views of it, broadcast by the ops
-- (x:addcmul(1, sv[1], d) for x:add(-clr, d)). The values are the numbers the op would have
-- converted to x's type, so eager results are unchanged; a compiled training step
-- (tocha.jit.step) captures the tensor and calls prep before each run, so nothing that
-- changes between steps is baked into the graph.
-- Returns a pointer to element 0 (write p[k-1]) and the list of views sv[1..n]. The values
-- have x's dtype, or `dtype` (a fused step's op reads the whole vector as float64).
function U.scalars(state, x, n, dtype)
   local s = state._scal
   dtype = dtype or x.p.dtype
   if s == nil or s.p.dtype ~= dtype or s:nElement() ~= n then
      -- on the host even for a CUDA x: written through its pointer here, and its 0-dim views
      -- (or the whole vector, for a fused step) join x's device ops as CPU scalars
      s = torch._typed_new[dtype](n)
      local sv = {}
      for k = 1, n do sv[k] = s:select(1, k) end
      state._scal, state._sv = s, sv
   end
   -- not s:data(): inside a graph trace that counts as reading a captured tensor's value
   return ffi.cast(PTR[s.p.dtype], torch._C.tc_tensor_data(s.p)), state._sv
end

-- State buffers as the rows of one (K, x:nElement()) tensor, which a fused step op updates
-- in one pass: state[key] holds it and state[names[r]] stays a view of row r in x's shape
-- (Torch7's field names). State that does not view it (a fresh state, a loaded
-- state_dict, other names) is copied into a new one; missing rows start at 0.
function U.packed(state, x, key, names)
   local K, n, buf = #names, x:nElement(), state[key]
   local views = state[key .. '_rows']
   local ok = buf ~= nil and buf:size(1) == K and buf:size(2) == n and buf:type() == x:type()
   for r = 1, K do ok = ok and rawequal(state[names[r]], views[r]) end
   if ok then return buf end
   buf = x.new(K, n):zero()
   views = {}
   for r = 1, K do
      local row = buf:select(1, r):viewAs(x)
      local old = state[names[r]]
      if old ~= nil then row:copy(old) end
      state[names[r]], views[r] = row, row
   end
   state[key], state[key .. '_rows'] = buf, views
   return buf
end

-- The gradient as the fused step ops want it: x's type and size.
function U.like_x(x, dfdx)
   if dfdx:type() ~= x:type() then dfdx = dfdx:typeAs(x) end
   if not dfdx:isSameSizeAs(x) then dfdx = dfdx:viewAs(x) end
   return dfdx
end

-- Runs fn(...) with gradient recording off when the autograd engine is loaded: optimizer
-- updates write parameters in place, which autograd forbids on leaves that require grad.
function U.no_grad(fn, ...)
   if torch.no_grad then return torch.no_grad(fn, ...) end
   return fn(...)
end

-- The functional form optim.<name>(opfunc, x[, config][, state]) of an algorithm
-- {hyper = , apply = }: checked arguments, one checked evaluation of opfunc, one in-place
-- update of x with recording off. Returns x, {f(x)} (and state[extra] when extra names a
-- state field, asgd's averaged x). An algorithm with `run` (cg, lbfgs: several
-- evaluations per call) returns run's x, {f_0, f_1, ...}, nEval instead.
function U.functional(name, algo, extra)
   return function(opfunc, x, config, state)
      config, state = U.check_args(name, opfunc, x, config, state, 2)
      local h = algo.hyper(config, x, 2)
      if algo.run then
         local rx, fx, n = algo.run(opfunc, x, h, state, 2) -- not a tail call: error levels
         return rx, fx, n
      end
      local fx, dfdx = U.eval(name, opfunc, x, 2)
      U.no_grad(algo.apply, x, dfdx, h, state)
      if extra then return x, {fx}, state[extra] end
      return x, {fx}
   end
end

return U
