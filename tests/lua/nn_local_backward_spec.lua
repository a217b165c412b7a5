-- nn_local_backward_spec.lua -- Torch7's backward is each module's OWN Jacobian. The tape
-- gives total derivatives, so when one input of a module depends on another (residual and
-- gating patterns) or the same tensor arrives twice, the generic backward must not count a
-- path twice. Checked against finite differences of the whole container.
require 'nn'

local function fd_grad(m, x)
   local eps, g = 1e-6, x:clone():zero()
   for i = 1, x:nElement() do
      local xp, xm = x:clone(), x:clone()
      xp:view(-1)[i] = xp:view(-1)[i] + eps
      xm:view(-1)[i] = xm:view(-1)[i] - eps
      g:view(-1)[i] = (m:forward(xp):sum() - m:forward(xm):sum()) / (2 * eps)
   end
   return g
end

local function check(m, x)
   local fd = fd_grad(m, x)
   m:forward(x)
   local gi = m:backward(x, m.output:clone():fill(1))
   assert.is_true((gi - fd):abs():max() < 1e-7, 'gradInput differs from finite differences')
end

describe('nn generic backward with dependent inputs', function()
   local prev
   before_each(function()
      prev = torch.getdefaulttensortype()
      torch.setdefaulttensortype('torch.DoubleTensor')
      torch.manualSeed(1)
   end)
   after_each(function() torch.setdefaulttensortype(prev) end)

   it('gating: x * tanh(x) through ConcatTable + CMulTable', function()
      check(nn.Sequential():add(nn.ConcatTable():add(nn.Identity()):add(nn.Tanh())):add(nn.CMulTable()),
            torch.randn(4))
   end)

   it('residual: x + Linear(x) through ConcatTable + CAddTable', function()
      check(nn.Sequential():add(nn.ConcatTable():add(nn.Identity()):add(nn.Linear(3, 3))):add(nn.CAddTable()),
            torch.randn(2, 3))
   end)

   it('the same tensor twice: {x, x} into CAddTable and CMulTable', function()
      check(nn.Sequential():add(nn.ConcatTable():add(nn.Identity()):add(nn.Identity())):add(nn.CAddTable()),
            torch.randn(3))
      check(nn.Sequential():add(nn.ConcatTable():add(nn.Identity()):add(nn.Identity())):add(nn.CMulTable()),
            torch.randn(3))
   end)

   it('weight gradients of a gated layer match finite differences', function()
      local lin = nn.Linear(3, 3)
      local m = nn.Sequential():add(lin):add(nn.ConcatTable():add(nn.Identity()):add(nn.Sigmoid()))
         :add(nn.CMulTable())
      local x = torch.randn(2, 3)
      m:zeroGradParameters()
      m:forward(x)
      m:backward(x, m.output:clone():fill(1))
      local eps = 1e-6
      for i = 1, lin.weight:nElement() do
         local w = lin.weight:view(-1)
         local old = w[i]
         local function set(v) torch.no_grad(function() w[i] = v end) end
         set(old + eps)
         local up = m:forward(x):sum():item()
         set(old - eps)
         local down = m:forward(x):sum():item()
         set(old)
         assert.is_true(math.abs(lin.gradWeight:view(-1)[i] - (up - down) / (2 * eps)) < 1e-7)
      end
   end)
end)
