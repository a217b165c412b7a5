-- nn_module_spec.lua -- the Torch7 module contract on the autograd tape: generic backward,
-- accumulation with scale, getParameters, clone/share, type conversion, __tostring,
-- PyTorch-style loss:backward(), errors.
require 'nn'
local U = dofile('tests/lua/spec_util.lua')
local H = dofile('tests/lua/nn_helper.lua')

local function ptr(t) return nn.utils.storageKey(t) end

-- a module written the documented way: forward only, extra parameter declared
local Scale, Scale_parent = torch.class('nn.TestScaleShift', 'nn.Module')
function Scale:__init(n)
   Scale_parent.__init(self)
   self.weight = torch.Tensor(n)
   self.gradWeight = torch.Tensor(n):zero()
   self.shift = torch.Tensor(n)
   self.gradShift = torch.Tensor(n):zero()
   self:reset()
end
function Scale:reset()
   self.weight:uniform(0.5, 1.5)
   self.shift:uniform(-1, 1)
   return self
end
function Scale:parameters()
   return {self.weight, self.shift}, {self.gradWeight, self.gradShift}
end
function Scale:updateOutput(input)
   self.output = torch.tanh(torch.add(torch.cmul(input, self.weight:view(1, -1):expandAs(input)),
                                      self.shift:view(1, -1):expandAs(input)))
   return self.output
end

-- a criterion written the documented way
local Crit = torch.class('nn.TestCrit', 'nn.Criterion')
function Crit:updateOutput(input, target)
   return self:_setLoss(torch.add(input, -1, target):pow(2):sum())
end

describe('nn.Module generic backward', function()
   it('derives gradInput and parameter gradients from the tape (finite differences)', function()
      H.checkModule(nn.TestScaleShift(4), torch.randn(3, 4))
   end)

   it('checks a nested Sequential with the generic and explicit backward mixed', function()
      local m = nn.Sequential():add(nn.Linear(4, 5)):add(nn.TestScaleShift(5)):add(nn.Linear(5, 2))
      H.checkModule(m, torch.randn(3, 4))
   end)

   it('accGradParameters accumulates and honours scale', function()
      local m = nn.TestScaleShift(3)
      local x, go = torch.randn(2, 3), torch.randn(2, 3)
      m:zeroGradParameters()
      m:forward(x)
      m:backward(x, go)
      local g1 = m.gradWeight:clone()
      m:accGradParameters(x, go, 0.25)
      assert.is_true((m.gradWeight - g1 * 1.25):abs():max() < 1e-12)
      -- updateGradInput alone does not touch the gradients
      m:updateGradInput(x, go)
      assert.is_true((m.gradWeight - g1 * 1.25):abs():max() < 1e-12)
   end)

   it('forward then backward twice works (the graph is retained)', function()
      local m = nn.Sequential():add(nn.TestScaleShift(3)):add(nn.TestScaleShift(3))
      local x, go = torch.randn(2, 3), torch.randn(2, 3)
      m:forward(x)
      m:zeroGradParameters()
      local a = m:backward(x, go):clone()
      local b = m:backward(x, go)
      assert.is_true((a - b):abs():max() < 1e-12)
      local _, gws = m:parameters()
      local m2 = m:clone()
      m2:zeroGradParameters()
      m2:forward(x)
      m2:backward(x, go)
      local _, g2 = m2:parameters()
      assert.is_true((gws[1] - g2[1] * 2):abs():max() < 1e-12)
   end)

   it('gives gradInput for an input that does not require grad, and leaves it alone', function()
      local m = nn.TestScaleShift(3)
      local x = torch.randn(2, 3)
      m:forward(x)
      local gi = m:backward(x, torch.ones(2, 3))
      assert.are.same({2, 3}, gi:size():totable())
      assert.is_false(x.requires_grad)
   end)

   it('handles nested tables of inputs and outputs', function()
      local m = nn.ConcatTable():add(nn.Linear(3, 2)):add(nn.TestScaleShift(3))
      local x = torch.randn(4, 3)
      local out = m:forward(x)
      assert.are.equal(2, #out)
      local gi = m:backward(x, {torch.randn(4, 2), torch.randn(4, 3)})
      assert.are.same({4, 3}, gi:size():totable())
      H.checkModule(nn.ParallelTable():add(nn.Linear(3, 2)):add(nn.TestScaleShift(2)),
                    {torch.randn(2, 3), torch.randn(2, 2)})
   end)

   it('backward after a forward under no_grad is a clear error', function()
      local m = nn.TestScaleShift(3)
      local x = torch.randn(2, 3)
      torch.no_grad(function() m:forward(x) end)
      U.expect_error('nn.TestScaleShift: backward: the output has no autograd graph', function()
         m:backward(x, torch.ones(2, 3))
      end)
   end)

   it('a gradOutput of the wrong size is an error naming the module', function()
      local m = nn.TestScaleShift(3)
      local x = torch.randn(2, 3)
      m:forward(x)
      U.expect_error('nn.TestScaleShift: backward: gradOutput has size 2x4 but the output has size 2x3',
                     function() m:backward(x, torch.ones(2, 4)) end)
   end)
end)

describe('nn.Module parameters and autograd', function()
   it('PyTorch-style loss:backward() fills gradWeight', function()
      local m = nn.Sequential():add(nn.Linear(3, 4)):add(nn.TestScaleShift(4))
      local x = torch.randn(5, 3)
      m:zeroGradParameters()
      local loss = torch.pow(m(x), 2):sum()
      loss:backward()
      local lin = m:get(1)
      assert.is_true(lin.weight.requires_grad)
      assert.is_true(torch.abs(lin.gradWeight):max() > 0)
      assert.is_true((lin.weight.grad - lin.gradWeight):abs():max() <= 0)
      -- the same gradients as Torch7's backward
      local ref = lin.gradWeight:clone()
      m:zeroGradParameters()
      local out = m:forward(x)
      m:backward(x, out * 2)
      assert.is_true((lin.gradWeight - ref):abs():max() < 1e-10)
   end)

   it('re-links .grad after it was cleared, after getParameters and after type()', function()
      local m = nn.Linear(3, 2)
      local x = torch.randn(4, 3)
      m(x):sum():backward()
      m.weight.grad = nil
      m:zeroGradParameters()
      m(x):sum():backward()
      assert.is_true(torch.abs(m.gradWeight):max() > 0)
      local p, gp = m:getParameters()
      gp:zero()
      m(x):sum():backward()
      assert.is_true(torch.abs(gp):max() > 0)
      m:float()
      m:zeroGradParameters()
      m(x:float()):sum():backward()
      assert.is_true(torch.abs(m.gradWeight):max() > 0)
      assert.are.equal('torch.FloatTensor', m.gradWeight:type())
   end)

   it('w.grad = nil means what it means in PyTorch: the next backward starts from zero', function()
      local m = nn.Linear(3, 2)
      local x = torch.randn(4, 3)
      m:zeroGradParameters()
      m(x):sum():backward()
      local once = m.gradWeight:clone()
      assert.is_true(torch.abs(once):max() > 0)
      m(x):sum():backward() -- accumulates, as in PyTorch
      assert.is_true((m.gradWeight - once * 2):abs():max() < 1e-12)
      m.weight.grad, m.bias.grad = nil, nil -- set_to_none, no zeroGradParameters
      m(x):sum():backward()
      assert.is_true((m.gradWeight - once):abs():max() < 1e-12)
      assert.are.equal(m.gradWeight, m.weight.grad)
      -- cleared between forward and backward: autograd makes a new gradient, which the
      -- next forward's link carries into gradWeight, and accumulation goes on from it
      local out = m(x)
      m.weight.grad = nil
      out:sum():backward()
      assert.are_not.equal(m.gradWeight, m.weight.grad)
      assert.is_true((m.weight.grad - once):abs():max() < 1e-12)
      m(x):sum():backward()
      assert.are.equal(m.gradWeight, m.weight.grad)
      assert.is_true((m.gradWeight - once * 2):abs():max() < 1e-12)
   end)

   it('a gradWeight shared by clones keeps what one clone accumulated when the next links', function()
      -- Torch7 recurrent code: clones share gradWeight and run forward/backward one by one
      local a = nn.Linear(3, 2)
      local b = a:clone('weight', 'bias', 'gradWeight', 'gradBias')
      a:zeroGradParameters()
      local x = torch.randn(4, 3)
      a:backward(x, a:forward(x):clone():fill(1))
      local one = a.gradWeight:clone()
      b:backward(x, b:forward(x):clone():fill(1)) -- b's first link must not zero the shared storage
      assert.is_true((a.gradWeight - one * 2):abs():max() < 1e-12)
   end)

   it('requiresGrad(false) freezes the parameters', function()
      local m = nn.Sequential():add(nn.Linear(3, 2))
      m:requiresGrad(false)
      local x = torch.randn(2, 3)
      local out = m(x)
      assert.is_false(m:get(1).weight.requires_grad)
      assert.is_false(out.requires_grad)
      m:requiresGrad(true)
      m:zeroGradParameters()
      m(x):sum():backward()
      assert.is_true(torch.abs(m:get(1).gradWeight):max() > 0)
   end)

   it('reset() works after the parameters require grad', function()
      local m = nn.TestScaleShift(3)
      m:forward(torch.randn(2, 3))
      assert.is_true(m.weight.requires_grad)
      m:reset()
      assert.is_true(m.weight:min() >= 0.5)
   end)

   it('updateParameters and zeroGradParameters', function()
      local m = nn.Linear(3, 2)
      local w = m.weight:clone()
      m:forward(torch.randn(2, 3))
      m:backward(torch.randn(2, 3), torch.ones(2, 2))
      local g = m.gradWeight:clone()
      m:updateParameters(0.1)
      assert.is_true((m.weight - (w - g * 0.1)):abs():max() < 1e-12)
      m:zeroGradParameters()
      assert.are.equal(0, torch.abs(m.gradWeight):max())
   end)

   it('accUpdateGradParameters moves weights without changing the gradients', function()
      local m = nn.TestScaleShift(3)
      local x, go = torch.randn(2, 3), torch.randn(2, 3)
      local ref = m:clone()
      ref:zeroGradParameters()
      ref:forward(x)
      ref:backward(x, go)
      m:zeroGradParameters()
      m:forward(x)
      m:accUpdateGradParameters(x, go, 0.5)
      assert.is_true((m.weight - (ref.weight - ref.gradWeight * 0.5)):abs():max() < 1e-12)
      assert.are.equal(0, torch.abs(m.gradWeight):max())
   end)
end)

describe('nn.Module getParameters', function()
   it('re-points every parameter and gradient into one flat storage', function()
      local m = nn.Sequential():add(nn.Linear(3, 4)):add(nn.Linear(4, 2))
      local w1 = m:get(1).weight:clone()
      local p, gp = m:getParameters()
      assert.are.equal(3 * 4 + 4 + 4 * 2 + 2, p:nElement())
      assert.are.equal(p:nElement(), gp:nElement())
      local ws, gws = m:parameters()
      for i = 1, #ws do
         assert.are.equal(ptr(p), ptr(ws[i]))
         assert.are.equal(ptr(gp), ptr(gws[i]))
      end
      assert.is_true((m:get(1).weight - w1):abs():max() <= 0)
      -- the flat vector aliases the parameters
      p:zero()
      assert.are.equal(0, torch.abs(m:get(2).bias):max())
      -- gradients land in gp
      gp:zero()
      local x = torch.randn(2, 3)
      m:forward(x)
      m:backward(x, torch.ones(2, 2))
      assert.is_true(torch.abs(gp:narrow(1, 25, 2) - 2):max() < 1e-12)
   end)

   it('keeps shared parameters shared (counted once)', function()
      local a = nn.Linear(3, 3)
      local b = a:clone('weight', 'bias', 'gradWeight', 'gradBias')
      local m = nn.Sequential():add(a):add(b)
      local p, gp = m:getParameters()
      assert.are.equal(12, p:nElement())
      assert.are.equal(ptr(a.weight), ptr(b.weight))
      assert.is_true(a.weight:isSetTo(b.weight))
      a.weight:fill(0)
      assert.are.equal(0, torch.abs(b.weight):max())
   end)

   it('is a no-copy no-op when called twice', function()
      local m = nn.Linear(3, 2)
      local p1 = m:getParameters()
      local p2 = m:getParameters()
      assert.are.equal(ptr(p1), ptr(p2))
   end)

   it('refuses parameters shared without their gradients', function()
      local a = nn.Linear(3, 3)
      local b = a:clone('weight', 'bias')
      local m = nn.Sequential():add(a):add(b)
      U.expect_error('parameters shared without their gradients', function() m:getParameters() end)
   end)
end)

describe('nn.Module clone, share, type', function()
   it('clone is deep and keeps internal sharing', function()
      local a = nn.Linear(2, 2)
      local m = nn.Sequential():add(a):add(a:clone('weight', 'bias', 'gradWeight', 'gradBias'))
      local c = m:clone()
      assert.are_not.equal(ptr(c:get(1).weight), ptr(a.weight))
      assert.are.equal(ptr(c:get(1).weight), ptr(c:get(2).weight))
      local x = torch.randn(3, 2)
      assert.is_true((c:forward(x) - m:forward(x)):abs():max() <= 0)
   end)

   it('share makes the named fields view the other module', function()
      local a, b = nn.Linear(2, 3), nn.Linear(2, 3)
      b:share(a, 'weight')
      assert.are.equal(ptr(a.weight), ptr(b.weight))
      assert.are_not.equal(ptr(a.bias), ptr(b.bias))
   end)

   it('float() and double() keep sharing and convert every tensor', function()
      local a = nn.Linear(3, 3)
      local m = nn.Sequential():add(nn.Linear(2, 3)):add(a):add(a:clone('weight', 'bias'))
      m:float()
      assert.are.equal('torch.FloatTensor', a.weight:type())
      assert.are.equal('torch.FloatTensor', m:get(1).gradBias:type())
      assert.are.equal(ptr(a.weight), ptr(m:get(3).weight))
      local out = m:forward(torch.randn(4, 2):float())
      assert.are.equal('torch.FloatTensor', out:type())
      m:double()
      assert.are.equal(ptr(a.weight), ptr(m:get(3).weight))
      assert.are.equal('torch.DoubleTensor', m:type())
      U.expect_error("type: unknown tensor type 'torch.Nope'", function() m:type('torch.Nope') end)
      if not torch.cuda.isAvailable() then -- with CUDA, cuda_tensor_spec.lua covers model:cuda()
         U.expect_error('cuda: CUDA unavailable: ', function() m:cuda() end)
         assert.are.equal('torch.DoubleTensor', m:type())
      end
   end)

   it('clearState empties the buffers and keeps the parameters', function()
      local m = nn.Sequential():add(nn.Linear(2, 3))
      m:forward(torch.randn(4, 2))
      m:clearState()
      assert.are.equal(0, m:get(1).output:nElement())
      assert.are.equal(6, m:get(1).weight:nElement())
   end)
end)

describe('nn.Module traversal and printing', function()
   local function net()
      return nn.Sequential():add(nn.Linear(10, 20)):add(nn.TestScaleShift(20))
         :add(nn.Sequential():add(nn.Linear(20, 5)))
   end

   it('__tostring follows Torch7 layout', function()
      local expected = 'nn.Sequential {\n' ..
         '  [input -> (1) -> (2) -> (3) -> output]\n' ..
         '  (1): nn.Linear(10 -> 20)\n' ..
         '  (2): nn.TestScaleShift\n' ..
         '  (3): nn.Sequential {\n' ..
         '    [input -> (1) -> output]\n' ..
         '    (1): nn.Linear(20 -> 5)\n' ..
         '  }\n' ..
         '}'
      assert.are.equal(expected, tostring(net()))
      local ct = nn.ConcatTable():add(nn.Linear(2, 3)):add(nn.Linear(2, 3))
      assert.are.equal('nn.ConcatTable {\n  input\n    |`-> (1): nn.Linear(2 -> 3)\n' ..
                       '     `-> (2): nn.Linear(2 -> 3)\n     ... -> output\n}', tostring(ct))
   end)

   it('apply, listModules, findModules, replace, training/evaluate', function()
      local m = net()
      assert.are.equal(5, #m:listModules())
      local lin, cont = m:findModules('nn.Linear')
      assert.are.equal(2, #lin)
      assert.are.equal(m:get(3), cont[2])
      local n = 0
      m:apply(function() n = n + 1 end)
      assert.are.equal(5, n)
      m:evaluate()
      assert.is_false(m:get(3):get(1).train)
      m:training()
      assert.is_true(m:get(2).train)
      m:replace(function(x)
         if torch.typename(x) == 'nn.TestScaleShift' then return nn.Tanh and nn.Tanh() or nn.Identity() end
         return x
      end)
      assert.are_not.equal('nn.TestScaleShift', torch.typename(m:get(2)))
   end)
end)

describe('nn.Module bad input', function()
   it('mismatched shapes between modules name the failing module', function()
      local m = nn.Sequential():add(nn.Linear(4, 3)):add(nn.Linear(5, 2))
      local e = U.expect_error('In 2 module of nn.Sequential', function() m:forward(torch.randn(2, 4)) end)
      assert.is_truthy(e:find('nn.Linear(5 -> 2): expected an input of size 5 or (batch x 5), got 2x3', 1, true))
   end)

   it('a module without updateOutput, a container add of a non-module', function()
      local Bare = torch.class('nn.TestBare', 'nn.Module')
      U.expect_error('nn.TestBare: updateOutput is not implemented', function() Bare():forward(torch.randn(2)) end)
      U.expect_error('nn.Sequential:add: expected an nn.Module, got number', function() nn.Sequential():add(3) end)
      U.expect_error('nn.Sequential:get: no module 3', function() nn.Sequential():get(3) end)
   end)

   it('nn.Linear constructor and Criterion misuse', function()
      U.expect_error('nn.Linear(inputSize, outputSize [, bias]): expected two numbers', function() nn.Linear('a') end)
      local c = nn.TestCrit()
      U.expect_error('nn.TestCrit: backward called before forward', function() c:backward(torch.randn(2), torch.randn(2)) end)
   end)
end)

describe('nn.Criterion contract', function()
   it('forward returns a number, crit() a one-element tensor, backward from the tape', function()
      local c = nn.TestCrit()
      H.checkCriterion(c, torch.randn(3, 2), torch.randn(3, 2))
      local x, y = torch.randn(3), torch.randn(3)
      local l = c:forward(x, y)
      assert.are.equal('number', type(l))
      assert.is_true(math.abs(l - (x - y):pow(2):sum()) < 1e-12)
      local gi = c:backward(x, y)
      assert.is_true((gi - (x - y) * 2):abs():max() < 1e-12)
   end)

   it('chains with a module, Torch7 style', function()
      local m = nn.Linear(3, 2)
      local c = nn.TestCrit()
      local x, y = torch.randn(4, 3), torch.randn(4, 2)
      m:zeroGradParameters()
      local out = m:forward(x)
      c:forward(out, y)
      m:backward(x, c:backward(out, y))
      local g = m.gradWeight:clone()
      m:zeroGradParameters()
      c(m(x), y):backward()
      assert.is_true((m.gradWeight - g):abs():max() < 1e-10)
   end)

   it('backward after forward under no_grad is a clear error', function()
      local c = nn.TestCrit()
      local x, y = torch.randn(3), torch.randn(3)
      torch.no_grad(function() c:forward(x, y) end)
      U.expect_error('nn.TestCrit: backward: the input is not part of an autograd graph', function() c:backward(x, y) end)
   end)
end)

describe('nn.StochasticGradient', function()
   it('trains a linear model to convergence', function()
      torch.manualSeed(3)
      local w = torch.Tensor{{2, -1}}
      local data = {}
      for i = 1, 40 do
         local x = torch.randn(2)
         data[i] = {x, torch.mv(w, x) + 0.5}
      end
      function data:size() return 40 end
      local m = nn.Linear(2, 1)
      local t = nn.StochasticGradient(m, nn.TestCrit())
      t.verbose = false
      t.maxIteration = 60
      t.learningRate = 0.05
      local err = t:train(data)
      assert.is_true(err < 1e-6)
      assert.is_true(torch.abs(m.weight - w):max() < 1e-3)
      assert.is_true(math.abs(m.bias[1] - 0.5) < 1e-3)
      U.expect_error('nn.StochasticGradient:train: expected a dataset', function() t:train(3) end)
   end)
end)

describe('backward with a rebuilt input table', function()
   it('finds the forward input when the table is a fresh literal with the same tensors', function()
      local m = nn.CMulTable()
      local a, b = torch.randn(4), torch.randn(4)
      m:forward({a, b})
      local g = m:backward({a, b}, torch.ones(4)) -- a new table, as Torch7 scripts often pass
      assert.is_true((g[1] - b):abs():max() < 1e-12)
      assert.is_true((g[2] - a):abs():max() < 1e-12)
   end)

   it('takes another tensor of the same sizes for the forward input (a view, a copy)', function()
      local big = torch.randn(5, 3)
      local Sq = torch.class('nn.TestSquareTape', 'nn.Module') -- generic backward: the tape
      function Sq:updateOutput(input) self.output = torch.cmul(input, input) return self.output end
      for _, m in ipairs{nn.Tanh(), nn.TestSquareTape(), nn.Sequential():add(nn.Sigmoid())} do
         local x = big:narrow(1, 2, 2)
         local g = torch.randn(2, 3)
         m:forward(x)
         local want = m:backward(x, g):clone()
         assert.is_true(torch.abs(want):max() > 0.01) -- (x:abs() is in place)
         m:forward(x)
         local views = m:backward(big:narrow(1, 2, 2), g):clone() -- a second narrow
         m:forward(x)
         local copy = m:backward(x:clone(), g):clone()
         assert.is_true((views - want):abs():max() == 0, torch.typename(m))
         assert.is_true((copy - want):abs():max() == 0, torch.typename(m))
      end
      local m = nn.CMulTable()
      local a, b = torch.randn(4), torch.randn(4)
      m:forward({a, b})
      local g = m:backward({a:clone(), b:clone()}, torch.ones(4))
      assert.is_true((g[1] - b):abs():max() == 0 and (g[2] - a):abs():max() == 0)
   end)

   it('refuses an input of other sizes than forward saw, naming both', function()
      local m = nn.Tanh()
      m:forward(torch.randn(2, 3))
      U.expect_error("nn.Tanh: backward: the input (3x2) is not the size of the last forward's input (2x3)",
                     function() m:backward(torch.randn(3, 2), torch.ones(2, 3)) end)
      local t = nn.CMulTable()
      t:forward({torch.randn(4), torch.randn(4)})
      U.expect_error("nn.CMulTable: backward: the input ({4}) is not the size of the last forward's input ({4, 4})",
                     function() t:backward({torch.randn(4)}, torch.ones(4)) end)
   end)
end)

describe('a Torch7-style module with hand-written backward methods', function()
   it('runs its own updateGradInput and accGradParameters from backward', function()
      local Twice, parent = torch.class('nn.TestTwiceHandWritten', 'nn.Module')
      function Twice:__init()
         parent.__init(self)
         self.weight = torch.Tensor(1):fill(3)
         self.gradWeight = torch.Tensor(1):zero()
      end
      function Twice:updateOutput(input)
         -- a forward the tape does not see (Torch7 modules write outputs in place)
         self.output = torch.no_grad(function() return input * self.weight[1] end)
         return self.output
      end
      function Twice:updateGradInput(input, gradOutput)
         self.gradInput = gradOutput * self.weight[1]
         return self.gradInput
      end
      function Twice:accGradParameters(input, gradOutput, scale)
         self.gradWeight[1] = self.gradWeight[1] + (scale or 1) * torch.dot(input, gradOutput)
      end
      local m = nn.TestTwiceHandWritten()
      local x = torch.Tensor({1, 2})
      m:forward(x)
      local gi = m:backward(x, torch.Tensor({1, 1}), 0.5)
      assert.are.same({3, 3}, gi:totable())
      assert.are.equal(1.5, m.gradWeight[1])
      -- inside a container too
      local seq = nn.Sequential():add(nn.TestTwiceHandWritten()):add(nn.Linear(2, 1))
      seq:forward(x)
      assert.are.equal(2, seq:backward(x, torch.ones(1)):nElement())
   end)
end)
