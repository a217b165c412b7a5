-- training_spec.lua -- short end-to-end training runs that must converge, and the three
-- ways of training (Torch7's getParameters + optim, PyTorch-style loss:backward() +
-- optimizer:step(), functional autograd) giving the same numbers.
require 'torch'
require 'nn'
require 'optim'
local autograd = require 'autograd'

-- Two interleaved half-moons, 200 points: not linearly separable.
local function moons(n, seed)
   local g = torch.Generator()
   torch.manualSeed(g, seed)
   local x, y = torch.DoubleTensor(n, 2), torch.LongTensor(n)
   for i = 1, n do
      local c = i % 2
      local a = math.pi * torch.uniform(g)
      x[i][1] = c == 0 and math.cos(a) or 1 - math.cos(a)
      x[i][2] = c == 0 and math.sin(a) or 0.5 - math.sin(a)
      y[i] = c + 1
   end
   return x + torch.randn(g, n, 2) * 0.1, y
end

local function mlp(seed)
   torch.manualSeed(seed)
   return nn.Sequential():add(nn.Linear(2, 32)):add(nn.Tanh()):add(nn.Linear(32, 2)):add(nn.LogSoftMax())
end

local function accuracy(model, x, y)
   local _, pred = model:forward(x):max(2)
   return pred:view(-1):eq(y):sum() / y:size(1)
end

describe('training', function()
   local x, y = moons(200, 1)

   it('a Torch7-style loop (getParameters, feval, optim.sgd) converges', function()
      local model, crit = mlp(3), nn.ClassNLLCriterion()
      local params, grads = model:getParameters()
      local config = {learningRate = 0.5, momentum = 0.9}
      local first, last
      for i = 1, 300 do
         local _, fx = optim.sgd(function()
            grads:zero()
            local loss = crit:forward(model:forward(x), y)
            model:backward(x, crit:backward(model.output, y))
            return loss, grads
         end, params, config)
         first = first or fx[1]
         last = fx[1]
      end
      assert.is_true(last < 0.1 * first, 'loss went from ' .. first .. ' to ' .. last)
      assert.is_true(accuracy(model, x, y) > 0.97)
   end)

   it('Torch7-style, PyTorch-style and functional autograd steps give the same weights', function()
      local crit = nn.ClassNLLCriterion()
      -- 1. Torch7 style
      local m1 = mlp(5)
      local p1, g1 = m1:getParameters()
      local c1 = {learningRate = 0.1}
      -- 2. PyTorch style
      local m2 = mlp(5)
      local opt2 = optim.SGD(m2:parameters(), {lr = 0.1})
      -- 3. functional: the loss as a function of a params table
      local m3 = mlp(5)
      local w3 = m3:parameters()
      local df = autograd(function(ws, xb, yb)
         local h = torch.tanh(torch.addmm(ws[2]:view(1, -1):expand(xb:size(1), 32), xb, ws[1]:t()))
         local o = torch.log_softmax(torch.addmm(ws[4]:view(1, -1):expand(xb:size(1), 2), h, ws[3]:t()), 2)
         return -o:gather(2, yb:view(-1, 1)):mean()
      end)
      for _ = 1, 10 do
         optim.sgd(function()
            g1:zero()
            local l = crit:forward(m1:forward(x), y)
            m1:backward(x, crit:backward(m1.output, y))
            return l, g1
         end, p1, c1)
         local loss = crit(m2(x), y)
         opt2:zero_grad()
         loss:backward()
         opt2:step()
         local grads = df(w3, x, y)
         torch.no_grad(function()
            for i, w in ipairs(w3) do w:add(-0.1, grads[i]) end
         end)
      end
      local q2, q3 = m2:parameters(), w3
      local q1 = m1:parameters()
      for i = 1, #q1 do
         assert.is_true((q1[i] - q2[i]):abs():max() < 1e-12, 'Torch7 vs PyTorch style, parameter ' .. i)
         assert.is_true((q1[i] - q3[i]):abs():max() < 1e-12, 'Torch7 style vs functional, parameter ' .. i)
      end
   end)

   it('a checkpoint saved mid-training resumes to the same result', function()
      local crit = nn.ClassNLLCriterion()
      local function train(model, state, steps)
         local params, grads = model:getParameters()
         for _ = 1, steps do
            optim.adam(function()
               grads:zero()
               local l = crit:forward(model:forward(x), y)
               model:backward(x, crit:backward(model.output, y))
               return l, grads
            end, params, state)
         end
      end
      local a, sa = mlp(7), {learningRate = 0.01}
      train(a, sa, 20)
      local b, sb = mlp(7), {learningRate = 0.01}
      train(b, sb, 10)
      local path = os.tmpname()
      torch.save(path, {model = b, state = sb})
      local ck = torch.load(path)
      os.remove(path)
      train(ck.model, ck.state, 10)
      local pa, pb = a:getParameters(), ck.model:getParameters()
      assert.is_true((pa - pb):abs():max() < 1e-12)
   end)
end)
