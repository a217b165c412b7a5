-- tests/lua/nn_helper.lua -- shared checks for every nn spec: finite-difference gradients
-- (float64) and the Torch7 module contract.
--
--   local H = dofile('tests/lua/nn_helper.lua')
--   H.checkModule(nn.Linear(3, 4), torch.randn(2, 3))
--   H.checkCriterion(nn.MSECriterion(), torch.randn(3, 4), torch.randn(3, 4))
--
-- Both raise an error listing every failed check (so busted shows the details) and return
-- a table of measured errors when all pass. The module is never changed: checks run on
-- clones converted to double.
--
-- checkModule(m, input, opts) checks:
--   gradInput and every parameter gradient against central differences of
--     sum(output .* gradOutput) (float64);
--   accGradParameters accumulates and honours scale (backward twice, second with 0.5);
--   updateGradInput + accGradParameters == backward;
--   zeroGradParameters zeroes every gradient;
--   getParameters: one flat storage holding every parameter/gradient, forward/backward
--     still right afterwards, gradients landing in the flat gradient tensor;
--   clone() is deep (same output, own storage), clone('weight', 'bias', ...) shares;
--   float()/double() on a pair of sharing modules keeps them sharing.
-- opts:
--   eps (1e-6), tol (1e-5: max |analytic - numeric| / max(1, |numeric|)),
--   gradOutput  a fixed gradOutput (default: random, same structure as the output),
--   noInputGrad true: skip the gradInput check (integer inputs, e.g. LookupTable),
--   checkInputs list of flattened input positions to check (default all float ones),
--   seed        number: torch.manualSeed(seed) before every forward (stochastic modules),
--   skip        set of check names to skip: {clone=true, type=true, getParameters=true,
--               scale=true, share=true}.
-- checkCriterion(c, input, target, opts) checks gradInput against central differences
-- of the loss, forward returning a number, crit(input, target) returning a one-element
-- tensor with the same value whose backward() gives the same gradient, and backward twice.
require 'nn'
local H = {}

local isTensor = torch.isTensor

-- flatten / rebuild are the checker's own (not nn._flatten / nn._rebuild): the checker
-- enumerates the inputs to check, so it must not share the code it checks.
local function flatten(x, list)
   list = list or {}
   if isTensor(x) then
      list[#list + 1] = x
   elseif type(x) == 'table' then
      for i = 1, #x do flatten(x[i], list) end
   end
   return list
end
H.flatten = flatten

local function rebuild(template, list, pos)
   pos = pos or 1
   if isTensor(template) then return list[pos], pos + 1 end
   if type(template) == 'table' then
      local r = {}
      for i = 1, #template do r[i], pos = rebuild(template[i], list, pos) end
      return r, pos
   end
   return template, pos
end
H.rebuild = rebuild

local function is_float(t)
   local ty = t:type()
   return ty == 'torch.DoubleTensor' or ty == 'torch.FloatTensor'
end

-- Deep copy of a nested input; with `double`, float tensors converted to double.
local function deep_copy(x, double)
   if isTensor(x) then
      if double and is_float(x) then return x:double():clone() end
      return x:clone()
   elseif type(x) == 'table' then
      local r = {}
      for i = 1, #x do r[i] = deep_copy(x[i], double) end
      return r
   end
   return x
end
local function to_double(x) return deep_copy(x, true) end
local function copy(x) return deep_copy(x, false) end
H.toDouble = to_double

local no_grad = torch.no_grad

-- relative max error between two tensors
local function rel_err_(a, b)
   if a:nElement() ~= b:nElement() then return math.huge end
   if a:nElement() == 0 then return 0 end
   local d = (a:double():contiguous():view(-1) - b:double():contiguous():view(-1)):abs():max()
   local scale = math.max(1, torch.abs(b:double()):max())
   return d / scale
end
local function rel_err(a, b)
   local prev = torch.set_grad_enabled(false)
   local r = rel_err_(a, b)
   torch.set_grad_enabled(prev)
   return r
end
H.relErr = rel_err

local function dot_all(out, go)
   local os, gs = flatten(out), flatten(go)
   local s = 0
   for i = 1, #os do
      if is_float(os[i]) then
         s = s + os[i]:double():contiguous():view(-1):dot(gs[i]:double():contiguous():view(-1))
      end
   end
   return s
end

-- Numeric d/dt of f() for every element of tensor t (changed in place and restored).
local function numeric_grad(t, f, eps)
   local g = torch.DoubleTensor(t:nElement()):zero()
   local flat = t:view(-1)
   if not t:isContiguous() then error('numeric_grad: non-contiguous tensor') end
   for i = 1, t:nElement() do
      local orig = flat[i]
      no_grad(function() flat[i] = orig + eps end)
      local hi = f()
      no_grad(function() flat[i] = orig - eps end)
      local lo = f()
      no_grad(function() flat[i] = orig end)
      g[i] = (hi - lo) / (2 * eps)
   end
   return g:viewAs(t)
end
H.numericGrad = numeric_grad

local function storage_ptr(t)
   return nn.utils.storageKey(t)
end
H.storagePtr = storage_ptr

---------------------------------------------------------------------------------------------
-- checkModule
---------------------------------------------------------------------------------------------

function H.checkModule(module, input, opts)
   opts = opts or {}
   local eps, tol = opts.eps or 1e-6, opts.tol or 1e-5
   local skip = opts.skip or {}
   local fails, res = {}, {}
   local function fail(fmt, ...) fails[#fails + 1] = string.format(fmt, ...) end
   local function reseed() if opts.seed then torch.manualSeed(opts.seed) end end

   local m = module:clone():double()
   local x = to_double(input)
   local xs = flatten(x)

   reseed()
   local out = m:forward(x)
   local outs = flatten(out)
   local go = opts.gradOutput and to_double(opts.gradOutput)
   if go == nil then
      local gl = {}
      for i = 1, #outs do gl[i] = torch.randn(outs[i]:size()):double() end
      if #outs > 0 then
         go = rebuild(out, gl)
      end
   end

   -- analytic gradients (one backward from zeroed gradients)
   m:zeroGradParameters()
   reseed()
   m:forward(x)
   local gi = copy(m:backward(x, go))
   local ws, gws = m:parameters()
   ws, gws = ws or {}, gws or {}
   local g1 = {}
   for i = 1, #gws do g1[i] = gws[i]:clone() end

   local function f()
      reseed()
      return dot_all(no_grad(m.updateOutput, m, x), go)
   end

   -- gradInput
   if not opts.noInputGrad then
      local gis = flatten(gi)
      if #gis ~= #xs then
         fail('gradInput has %d tensors, input %d', #gis, #xs)
      else
         for k, xt in ipairs(xs) do
            local check = (opts.checkInputs == nil) or opts.checkInputs[k]
            if is_float(xt) and check then
               local num = numeric_grad(xt, f, eps)
               if not gis[k]:isSameSizeAs(xt) then
                  fail('gradInput[%d] has size %s, input %s', k, nn._describe(gis[k]), nn._describe(xt))
               else
                  local e = rel_err(gis[k], num)
                  res['gradInput' .. k] = e
                  if e > tol then fail('gradInput[%d]: error %.3g > %g', k, e, tol) end
               end
            end
         end
      end
   end

   -- parameter gradients
   for i = 1, #ws do
      local num = numeric_grad(ws[i], f, eps)
      local e = rel_err(g1[i], num)
      res['param' .. i] = e
      if e > tol then fail('gradient of parameter %d (%s): error %.3g > %g', i, nn._describe(ws[i]), e, tol) end
   end

   -- accumulation with scale: backward twice, the second scaled by 0.5
   if not skip.scale and #ws > 0 then
      m:zeroGradParameters()
      reseed()
      m:forward(x)
      m:backward(x, go, 1)
      m:backward(x, go, 0.5)
      for i = 1, #gws do
         local e = rel_err(gws[i], g1[i] * 1.5)
         if e > 1e-8 then fail('accGradParameters does not accumulate with scale (param %d: %.3g)', i, e) end
      end
      -- updateGradInput + accGradParameters == backward
      m:zeroGradParameters()
      reseed()
      m:forward(x)
      local gi2 = m:updateGradInput(x, go)
      m:accGradParameters(x, go, 2)
      for i = 1, #gws do
         if rel_err(gws[i], g1[i] * 2) > 1e-8 then fail('accGradParameters(scale=2) wrong for param %d', i) end
      end
      local a, b = flatten(gi2), flatten(gi)
      for k = 1, #a do
         if is_float(a[k]) and rel_err(a[k], b[k]) > 1e-8 then fail('updateGradInput differs from backward (%d)', k) end
      end
      m:zeroGradParameters()
      for i = 1, #gws do
         if gws[i]:nElement() > 0 and torch.abs(gws[i]):max() ~= 0 then fail('zeroGradParameters left param %d non-zero', i) end
      end
   end

   -- getParameters
   if not skip.getParameters and #ws > 0 then
      local c = m:clone()
      local p, gp = c:getParameters()
      local cw, cg = c:parameters()
      local pk, gk = storage_ptr(p), storage_ptr(gp)
      for i = 1, #cw do
         if storage_ptr(cw[i]) ~= pk then fail('getParameters: parameter %d not re-pointed into the flat storage', i) end
         if storage_ptr(cg[i]) ~= gk then fail('getParameters: gradient %d not re-pointed into the flat storage', i) end
         if rel_err(cw[i], ws[i]) > 0 then fail('getParameters changed the value of parameter %d', i) end
      end
      gp:zero()
      reseed()
      c:forward(x)
      c:backward(x, go)
      for i = 1, #cg do
         if rel_err(cg[i], g1[i]) > 1e-8 then fail('after getParameters, gradient %d is wrong', i) end
      end
      -- the flat vector moves the parameters
      no_grad(function() p:add(1) end)
      for i = 1, #cw do
         if rel_err(cw[i], ws[i] + 1) > 1e-12 then fail('getParameters: flat vector does not alias parameter %d', i) end
      end
      local p2 = c:getParameters()
      if storage_ptr(p2) ~= pk then fail('getParameters twice moved the parameters again') end
   end

   -- clone / share
   if not skip.clone then
      local c = m:clone()
      reseed()
      local o1 = copy(no_grad(m.updateOutput, m, x))
      reseed()
      local o2 = no_grad(c.updateOutput, c, x)
      local a, b = flatten(o1), flatten(o2)
      for k = 1, #a do
         if is_float(a[k]) and rel_err(b[k], a[k]) > 0 then fail('clone gives a different output') end
      end
      local cw = c:parameters() or {}
      for i = 1, #cw do
         if storage_ptr(cw[i]) == storage_ptr(ws[i]) then fail('clone() shares parameter %d', i) end
      end
      if not skip.share and m.weight ~= nil then
         local s = m:clone('weight', 'bias', 'gradWeight', 'gradBias')
         if storage_ptr(s.weight) ~= storage_ptr(m.weight) then fail("clone('weight', ...) does not share weight") end
      end
   end

   -- type conversion keeps sharing
   if not skip.type and #ws > 0 and m.weight ~= nil then
      local a = m:clone()
      local b = a:clone('weight', 'bias', 'gradWeight', 'gradBias')
      local seq = nn.Container()
      seq:add(a)
      seq:add(b)
      seq:float()
      if a.weight:type() ~= 'torch.FloatTensor' then fail('float() left weight as %s', a.weight:type()) end
      if storage_ptr(a.weight) ~= storage_ptr(b.weight) then fail('float() broke weight sharing') end
      seq:double()
      if storage_ptr(a.weight) ~= storage_ptr(b.weight) then fail('double() broke weight sharing') end
      if a.weight:type() ~= 'torch.DoubleTensor' then fail('double() left weight as %s', a.weight:type()) end
   end

   if #fails > 0 then
      error(torch.typename(module) .. ' (' .. tostring(module) .. '):\n  ' .. table.concat(fails, '\n  '), 2)
   end
   return res
end

---------------------------------------------------------------------------------------------
-- checkCriterion
---------------------------------------------------------------------------------------------

function H.checkCriterion(crit, input, target, opts)
   opts = opts or {}
   local eps, tol = opts.eps or 1e-6, opts.tol or 1e-5
   local fails, res = {}, {}
   local function fail(fmt, ...) fails[#fails + 1] = string.format(fmt, ...) end

   local c = crit:clone():double()
   local x = to_double(input)
   local y = to_double(target)
   local loss = c:forward(x, y)
   if type(loss) ~= 'number' then fail('forward returned %s, not a number', type(loss)) end
   local gi = copy(c:backward(x, y))
   local gi_again = copy(c:backward(x, y))
   local function f() return no_grad(function() c:updateOutput(x, y) return c.output end) end
   local xs, gis = flatten(x), flatten(gi)
   if not opts.noInputGrad then
      for k, xt in ipairs(xs) do
         if is_float(xt) then
            local num = numeric_grad(xt, f, eps)
            if gis[k] == nil or not gis[k]:isSameSizeAs(xt) then
               fail('gradInput[%d] has size %s, input %s', k, nn._describe(gis[k]), nn._describe(xt))
            else
               local e = rel_err(gis[k], num)
               res['gradInput' .. k] = e
               if e > tol then fail('gradInput[%d]: error %.3g > %g', k, e, tol) end
               if rel_err(flatten(gi_again)[k], gis[k]) > 0 then fail('backward twice differs') end
            end
         end
      end
   end
   -- PyTorch style: crit(input, target) -> loss tensor; loss:backward() fills .grad
   local xl = {}
   for k, xt in ipairs(xs) do
      xl[k] = is_float(xt) and xt:clone():requires_grad_(true) or xt
   end
   local xx = rebuild(x, xl)
   local lt = c(xx, y)
   if not isTensor(lt) or lt:nElement() ~= 1 then
      fail('crit(input, target) did not return a one-element tensor')
   else
      local v = lt:view(1)[1]
      if math.abs(v - loss) > 1e-10 * math.max(1, math.abs(loss)) then
         fail('crit(input, target) = %g but forward = %g', v, loss)
      end
      if not opts.noInputGrad then
         lt:backward()
         for k, xt in ipairs(xl) do
            if is_float(xt) then
               if xt.grad == nil then
                  fail('loss:backward() left input %d without .grad', k)
               elseif rel_err(xt.grad, gis[k]) > 1e-8 then
                  fail('loss:backward() gradient differs from crit:backward (%d)', k)
               end
            end
         end
      end
   end
   if #fails > 0 then
      error(torch.typename(crit) .. ':\n  ' .. table.concat(fails, '\n  '), 2)
   end
   return res
end

return H
