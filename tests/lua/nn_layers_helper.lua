-- tests/lua/nn_layers_helper.lua -- golden-value checks shared by the nn layer specs
-- (transfer, normalization, conv, pooling, padding, upsampling).
--
--   local L = dofile('tests/lua/nn_layers_helper.lua')
--   local case = L.golden.conv                 -- from tests/golden/nn_layers.golden.lua
--   L.checkGolden(module, case, {'weight', 'bias'})
--
-- checkGolden copies the case's parameters into the module (double), runs forward and
-- backward(input, gout) and compares output, gradInput and every parameter gradient with
-- PyTorch's (max abs difference <= tol * max(1, max |expected|)).
require 'nn'
local L = {}

L.golden = dofile('tests/golden/nn_layers.golden.lua')

-- {size=, data=} -> DoubleTensor
function L.T(g)
   local t = torch.DoubleTensor(torch.LongStorage(g.size))
   local flat = t:view(-1)
   for i = 1, #g.data do flat[i] = g.data[i] end
   return t
end

-- max |a - b| / max(1, max |b|); errors when the sizes differ
function L.diff(a, b)
   if not a:isSameSizeAs(b) then
      error(string.format('size mismatch: %s vs %s', nn._describe(a), nn._describe(b)), 2)
   end
   return torch.no_grad(function()
      a, b = a:double(), b:double()
      local d = (a - b):abs():max()
      local m = math.max(1, b:clone():abs():max())
      return d / m
   end)
end

-- Raises (at the spec line) when a and b differ by more than tol.
function L.near(a, b, tol, what)
   tol = tol or 1e-9
   local d = L.diff(a, b)
   if not (d <= tol) then
      error(string.format('%s: differs from the expected value by %g (tol %g)', what or 'tensor',
                          d, tol), 2)
   end
end

-- Copies case[name] into module[name] for each parameter name, forward/backward, compare.
function L.checkGolden(m, case, params, tol)
   tol = tol or 1e-9
   m:double()
   params = params or {}
   torch.no_grad(function()
      for _, name in ipairs(params) do m[name]:copy(L.T(case[name])) end
   end)
   m:zeroGradParameters()
   local x = L.T(case.input)
   local y = m:forward(x)
   L.near(y, L.T(case.output), tol, 'output')
   local gi = m:backward(x, L.T(case.gout))
   L.near(gi, L.T(case.gradInput), tol, 'gradInput')
   for _, name in ipairs(params) do
      local gname = 'grad' .. name:sub(1, 1):upper() .. name:sub(2)
      L.near(m[gname], L.T(case['grad_' .. name]), tol, gname)
   end
   return y, gi
end

return L
