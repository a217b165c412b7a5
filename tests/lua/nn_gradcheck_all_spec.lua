-- tests/lua/nn_gradcheck_all_spec.lua -- finite-difference gradient checks (float64) for
-- EVERY registered nn module and criterion. The spec walks the nn table for torch
-- classes (as nn_serialize_spec does), builds each from tests/lua/nn_catalog.lua and runs
-- nn_helper's checkModule (gradInput and parameter gradients against central
-- differences, plus the Torch7 contract: accGradParameters scale, getParameters,
-- clone/share, type) in training and in evaluation mode, or checkCriterion. A class
-- without a catalog entry fails; a check that compared no gradient at all fails (so an
-- entry cannot pass vacuously). The few classes whose backward is deliberately not the
-- derivative of their forward, or that have nothing differentiable, are listed in
-- `special` with the reason, and their documented behaviour is checked instead. Every
-- module also gets updateGradInput == backward (checkModule only compares them for modules
-- with parameters) and a float32 run after :float(), and every module and criterion must
-- reject a non-tensor input with an error naming an nn class at the caller's line.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local C = dofile('tests/lua/nn_catalog.lua')
local U = dofile('tests/lua/spec_util.lua')

local function no_grad(f) return torch.no_grad(f) end

-- sum(a .* b) over two tensors of the same size
local function dot(a, b)
   return no_grad(function() return a:contiguous():view(-1):dot(b:contiguous():view(-1)) end)
end

local function near(a, b, tol, what)
   local e = H.relErr(a, b)
   if not (e <= tol) then error(string.format('%s: error %.3g > %g', what, e, tol), 2) end
end

-- Module:backward takes gradInput from the tape, so checkModule's finite differences do
-- not reach an updateGradInput override of a module without parameters (it compares
-- updateGradInput with backward only when there are parameters): compare them here, for
-- the same gradOutput, on every module.
local function checkUpdateGradInput(module, input, opts)
   local function reseed() if opts and opts.seed then torch.manualSeed(opts.seed) end end
   local m, x = module:clone():double(), H.toDouble(input)
   reseed()
   local out = m:forward(x)
   local outs, gl = H.flatten(out), {}
   if #outs == 0 then return end -- a number (CriterionTable): no gradOutput
   for i = 1, #outs do gl[i] = torch.randn(outs[i]:size()) end
   local go = H.rebuild(out, gl)
   local g1 = H.flatten(H.toDouble(m:backward(x, go)))
   reseed()
   m:forward(x)
   local g2 = H.flatten(m:updateGradInput(x, go))
   if #g1 ~= #g2 then error(string.format('updateGradInput gives %d tensors, backward %d', #g2, #g1), 2) end
   for k = 1, #g1 do
      if g1[k]:type() == 'torch.DoubleTensor' and H.relErr(g2[k], g1[k]) > 1e-10 then
         error(string.format('updateGradInput differs from backward (gradInput[%d]: %.3g)', k,
                             H.relErr(g2[k], g1[k])), 2)
      end
   end
end

-- name -> {reason = why checkModule does not apply, check = function() ... end}
local special = {
   GradientReversal = {
      reason = 'backward is -lambda * gradOutput by design, not the derivative of the identity forward',
      check = function()
         torch.manualSeed(5)
         local m, x = C.modules.GradientReversal()
         assert.is_true(m.lambda ~= 0 and m.lambda ~= -1, 'the catalog instance must have a telling lambda')
         local out = m:forward(x)
         assert.is_true(out:equal(x), 'forward is not the identity')
         local go = torch.randn(x:size())
         local gi = m:backward(x, go)
         -- the derivative of forward, measured, times -lambda
         local num = H.numericGrad(x, function() return dot(m:updateOutput(x), go) end, 1e-6)
         near(gi, num * -m.lambda, 1e-6, 'gradInput vs -lambda * finite differences')
         -- PyTorch style through the tape: the same reversed gradient
         local xr = x:clone():requires_grad_(true)
         m(xr):backward(go)
         near(xr.grad, go * -m.lambda, 1e-12, 'loss:backward() through GradientReversal')
      end,
   },
   L1Penalty = {
      reason = 'the penalty is not in the output (forward is the identity); Torch7 adds its ' ..
               'gradient in backward',
      check = function()
         torch.manualSeed(5)
         for _, sizeAverage in ipairs({false, true}) do
            local m, x = C.modules.L1Penalty()
            m.sizeAverage = sizeAverage
            local go = torch.randn(x:size())
            assert.is_true(m:forward(x):equal(x), 'forward is not the identity')
            local gi = m:backward(x, go):clone()
            -- gradInput is the derivative of sum(output .* gradOutput) + the recorded loss
            local num = H.numericGrad(x, function()
               local out = m:updateOutput(x)
               return dot(out, go) + m.loss
            end, 1e-6)
            near(gi, num, 1e-6, 'gradInput vs finite differences of output.gradOutput + loss')
            m:forward(x) -- numericGrad's last forward saw a shifted x
            local n = sizeAverage and x:nElement() or 1
            assert.is_true(math.abs(m.loss - m.l1weight * x:norm(1) / n) < 1e-12,
                           'loss is not l1weight * |x|_1')
         end
      end,
   },
   CriterionTable = {
      reason = "gradInput is Torch7's {dloss/dinput} only (the target gets none), so it does " ..
               'not pair with the input',
      check = function()
         torch.manualSeed(5)
         local m, x = C.modules.CriterionTable()
         local loss = m:forward(x)
         assert.equals('number', type(loss))
         local gi = m:backward(x)
         assert.equals(1, #gi)
         local function loss_at() return no_grad(function() return m:updateOutput(x) end) end
         local num = H.numericGrad(x[1], loss_at, 1e-6)
         near(gi[1], num, 1e-6, 'gradInput[1] vs finite differences of the loss')
      end,
   },
   OneHot = {
      reason = 'integer input and no parameters: nothing is differentiable',
      check = function()
         torch.manualSeed(5)
         local m, x = C.modules.OneHot()
         local out = m:forward(x)
         assert.same({x:size(1), m.outputSize}, out:size():totable())
         for i = 1, x:size(1) do
            for j = 1, m.outputSize do
               assert.equals(j == x[i] and 1 or 0, out[i][j])
            end
         end
         local gi = m:backward(x, torch.randn(out:size()))
         assert.is_true(gi:isSameSizeAs(x) and gi:abs():sum() == 0, 'gradInput is not zeros like the input')
         assert.equals(0, #(m:parameters() or {}))
         local ok, err = pcall(m.forward, m, torch.LongTensor({1, m.outputSize + 1}))
         assert.is_false(ok)
         assert.is_truthy(tostring(err):find('out of range', 1, true))
      end,
   },
   ZeroGrad = {
      reason = 'backward is zero by design (Torch7), not the derivative of the identity forward',
      check = function()
         torch.manualSeed(5)
         local m, x = C.modules.ZeroGrad()
         assert.is_true(m:forward(x):equal(x), 'forward is not the identity')
         local gi = m:backward(x, torch.randn(x:size()))
         assert.is_true(gi:isSameSizeAs(x) and gi:abs():sum() == 0, 'gradInput is not zero')
      end,
   },
   Kmeans = {
      reason = 'the output is cluster indices; accGradParameters is the k-means update rule, ' ..
               'not a derivative',
      check = function()
         torch.manualSeed(5)
         local m, x = C.modules.Kmeans()
         local idx = m:forward(x)
         -- each row's index is its nearest centre; loss is the sum of squared distances
         local loss = 0
         for i = 1, x:size(1) do
            local best, arg = math.huge, 0
            for c = 1, m.k do
               local d = no_grad(function() return (x[i] - m.weight[c]):pow(2):sum() end)
               if d < best then best, arg = d, c end
            end
            assert.equals(arg, idx[i])
            loss = loss + best
         end
         assert.is_true(math.abs(loss - m.loss) < 1e-9)
         m:zeroGradParameters()
         assert.equals(0, m:backward(x, idx):abs():sum())
         -- gradWeight[c] = -(mean of c's rows - c) (zero for empty clusters)
         for c = 1, m.k do
            local sum, n = torch.zeros(x:size(2)), 0
            for i = 1, x:size(1) do
               if idx[i] == c then sum:add(x[i]); n = n + 1 end
            end
            local want = n > 0 and (m.weight[c] - sum / n) or torch.zeros(x:size(2))
            near(m.gradWeight[c], want, 1e-6, 'gradWeight of centre ' .. c)
         end
      end,
   },
   StochasticGradient = {
      reason = 'a trainer, not a module or criterion',
      check = function()
         torch.manualSeed(5)
         -- y = 2x + 1 on 8 points; the trainer's mean error must fall
         local dataset = {}
         function dataset:size() return 8 end
         for i = 1, 8 do
            local x = torch.Tensor({(i - 4.5) / 4})
            dataset[i] = {x, torch.Tensor({2 * x[1] + 1})}
         end
         local t = nn.StochasticGradient(nn.Linear(1, 1), nn.MSECriterion())
         t.verbose, t.learningRate, t.maxIteration = false, 0.1, 1
         local first = t:train(dataset)
         t.maxIteration = 40
         local last = t:train(dataset)
         assert.is_true(last < first / 20, string.format('error %g -> %g', first, last))
      end,
   },
}

-- registered names neither in the catalog nor in `special` (abstract classes excepted)
local function uncovered(names)
   local missing = {}
   for _, name in ipairs(names) do
      if not (C.abstract[name] or C.modules[name] or C.criterions[name] or special[name]) then
         missing[#missing + 1] = name
      end
   end
   return missing
end

local function count(t)
   local n = 0
   for _ in pairs(t) do n = n + 1 end
   return n
end

describe('every nn module and criterion passes a finite-difference gradient check', function()
   it('has a catalog entry (or a listed reason) for each registered class', function()
      assert.same({}, uncovered(C.classes()))
      -- and the check itself notices a class without one
      assert.same({'TestNotInCatalog'}, uncovered({'Linear', 'MSECriterion', 'Module', 'TestNotInCatalog'}))
   end)

   it('lists only registered classes as special, each with a reason', function()
      local registered = {}
      for _, name in ipairs(C.classes()) do registered[name] = true end
      for name, s in pairs(special) do
         assert.is_true(registered[name], name .. ' is listed in special but not registered in nn')
         assert.is_true(type(s.reason) == 'string' and #s.reason > 10, name .. ' has no reason')
         assert.is_true(C.modules[name] ~= nil or C.others[name] ~= nil, name .. ' is not in the catalog')
      end
   end)

   it('gradient-checks at least 120 modules and every criterion', function()
      local mods, crits, specials = 0, 0, {}
      for _, name in ipairs(C.classes()) do
         if special[name] then specials[#specials + 1] = name
         elseif C.modules[name] then mods = mods + 1
         elseif C.criterions[name] then crits = crits + 1 end
      end
      print(string.format('\nnn gradient checks: %d modules, %d criterions; checked otherwise: %s',
                          mods, crits, table.concat(specials, ' ')))
      assert.is_true(mods >= 120, 'only ' .. mods .. ' modules are gradient-checked')
      assert.equals(count(C.criterions), crits)
   end)

   for _, name in ipairs(C.classes()) do
      if special[name] then
         it('nn.' .. name .. ' (no finite differences: ' .. special[name].reason .. ')', special[name].check)
      elseif C.modules[name] then
         for _, mode in ipairs({'training', 'evaluate'}) do
            it('nn.' .. name .. ' (' .. mode .. ')', function()
               torch.manualSeed(5)
               local m, input, opts = C.modules[name]()
               assert.is_true(torch.typename(m) == 'nn.' .. name or #m:findModules('nn.' .. name) > 0,
                              'the catalog entry for ' .. name .. ' builds a ' .. torch.typename(m))
               m[mode](m)
               local res = H.checkModule(m, input, opts)
               assert.is_true(next(res) ~= nil, name .. ': no gradient was compared')
               checkUpdateGradInput(m, input, opts)
            end)
         end
      elseif C.criterions[name] then
         it('nn.' .. name, function()
            torch.manualSeed(5)
            local c, input, target, opts = C.criterions[name]()
            assert.equals('nn.' .. name, torch.typename(c))
            local res = H.checkCriterion(c, input, target, opts)
            assert.is_true(next(res) ~= nil, name .. ': no gradient was compared')
         end)
      end
   end
end)

describe('the gradient check can fail', function()
   -- forward 2x, updateGradInput claims 3 * gradOutput; backward: the tape's (right) one
   local Wrong = torch.class('nn.TestWrongGradInput', 'nn.Module')
   function Wrong:updateOutput(input)
      self.output = torch.mul(input, 2)
      return self.output
   end
   function Wrong:updateGradInput(input, gradOutput)
      self.gradInput = torch.mul(gradOutput, 3)
      return self.gradInput
   end
   -- the same with Torch7's backward = updateGradInput (+ accGradParameters)
   local Wrong2 = torch.class('nn.TestWrongBackward', 'nn.TestWrongGradInput')
   function Wrong2:backward(input, gradOutput) return self:updateGradInput(input, gradOutput) end

   it('rejects a module whose backward is not the derivative of its forward', function()
      local ok, err = pcall(H.checkModule, nn.TestWrongBackward(), torch.randn(3, 2))
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find('gradInput[1]: error', 1, true))
   end)

   it('rejects a parameterless module whose hand-written updateGradInput is wrong', function()
      -- backward runs the override (Torch7's contract), so the finite differences see it
      local ok, err = pcall(H.checkModule, nn.TestWrongGradInput(), torch.randn(3, 2))
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find('gradInput', 1, true))
   end)

   it('rejects a linear layer whose weight gradient is scaled wrongly', function()
      local m = nn.Linear(3, 2)
      local accGrad = m.accGradParameters
      function m:accGradParameters(input, gradOutput, scale)
         accGrad(self, input, gradOutput, scale)
         no_grad(function() self.gradWeight:mul(1.01) end)
      end
      local ok, err = pcall(H.checkModule, m, torch.randn(4, 3))
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find('gradient of parameter 1', 1, true))
   end)
end)

-- Torch7's type contract on every module: after m:float() the forward gives float outputs
-- (close to the double ones) and backward float gradients for the float inputs.
local function to_float(x)
   if torch.isTensor(x) then return x:type() == 'torch.DoubleTensor' and x:float() or x end
   if type(x) ~= 'table' then return x end
   local r = {}
   for i = 1, #x do r[i] = to_float(x[i]) end
   return r
end

describe('every nn module runs in float32 after :float()', function()
   for _, name in ipairs(C.classes()) do
      if C.modules[name] then
         it('nn.' .. name, function()
            torch.manualSeed(5)
            local m, input, opts = C.modules[name]()
            local seed = opts and opts.seed
            if seed then torch.manualSeed(seed) end
            local outs = H.flatten(H.toDouble((m:forward(input))))
            local f, xf = m:clone():float(), to_float(input)
            if seed then torch.manualSeed(seed) end
            local fouts = H.flatten((f:forward(xf)))
            assert.equals(#outs, #fouts)
            local go = {}
            for i = 1, #outs do
               if outs[i]:type() == 'torch.DoubleTensor' then
                  assert.equals('torch.FloatTensor', fouts[i]:type(), name .. ' output ' .. i)
                  assert.is_true(H.relErr(fouts[i], outs[i]) < 1e-4,
                                 name .. ' float output differs from double')
               end
               go[i] = fouts[i]:clone():fill(1)
            end
            if #fouts == 0 then return end
            local gis, xs = H.flatten(f:backward(xf, H.rebuild(f.output, go))), H.flatten(xf)
            for k = 1, #xs do
               if xs[k]:type() == 'torch.FloatTensor' then
                  assert.equals('torch.FloatTensor', gis[k]:type(), name .. ' gradInput ' .. k)
               end
            end
         end)
      end
   end
end)

-- modules that take any value by design (Torch7's)
local accepts_anything = {
   Identity = 'passes any value through',
   Constant = 'ignores its input',
}
-- criterions that ignore the target by design
local no_target = {L1Cost = 'a penalty on the input alone', DistanceRatioCriterion = 'the target is unused'}

describe('every nn module and criterion rejects a non-tensor input clearly', function()
   for _, name in ipairs(C.classes()) do
      if C.modules[name] and not accepts_anything[name] then
         it('nn.' .. name, function()
            torch.manualSeed(5)
            local m = C.modules[name]()
            U.expect_error('nn.', function() m:forward('abc') end)
            U.expect_error('nn.', function() m:forward(3) end)
         end)
      elseif C.criterions[name] then
         it('nn.' .. name, function()
            torch.manualSeed(5)
            local c, input, target = C.criterions[name]()
            -- combining criterions (MultiCriterion, ModuleCriterion) name the child that failed
            U.expect_error('nn.', function() c:forward('abc', target) end)
            U.expect_error('nn.', function() c:forward({}, target) end)
            if not no_target[name] then
               U.expect_error('nn.', function() c:forward(input, 'abc') end)
            end
         end)
      end
   end

   it('lists only registered classes as taking anything', function()
      for name in pairs(accepts_anything) do
         assert.is_not_nil(C.modules[name], name)
         local m = C.modules[name]()
         assert.is_true(pcall(m.forward, m, 'abc'),
                        name .. ' rejects a string now: drop it from accepts_anything')
      end
      for name in pairs(no_target) do assert.is_not_nil(C.criterions[name], name) end
   end)
end)
