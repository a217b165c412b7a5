-- tests/lua/nn_transfer_spec.lua -- transfer modules (lua/nn/transfer.lua): finite-difference
-- gradients and the Torch7 contract through checkModule, values against PyTorch 1.13
-- goldens and closed forms, bad input.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local L = dofile('tests/lua/nn_layers_helper.lua')
local U = dofile('tests/lua/spec_util.lua')
local G = L.golden

-- inputs away from the kinks at 0 and +-0.5 (finite differences step 1e-6)
local function away(t, points)
   t:apply(function(v)
      for _, p in ipairs(points or {0}) do
         if math.abs(v - p) < 1e-3 then return v + 3e-3 end
      end
      return v
   end)
   return t
end

local function pos(...) return torch.rand(...):add(0.2) end

describe('nn transfer modules', function()
   before_each(function() torch.manualSeed(1) end)

   -- name, constructor, input maker (batch), input maker (non-batch)
   local cases = {
      {'Exp', function() return nn.Exp() end},
      {'Log', function() return nn.Log() end, pos},
      {'Tanh', function() return nn.Tanh() end},
      {'Sigmoid', function() return nn.Sigmoid() end},
      {'Abs', function() return nn.Abs() end},
      {'Square', function() return nn.Square() end},
      {'Sqrt', function() return nn.Sqrt() end, pos},
      {'Sqrt(eps)', function() return nn.Sqrt(0.1) end, pos},
      {'Power', function() return nn.Power(2.5) end, pos},
      {'TanhShrink', function() return nn.TanhShrink() end},
      {'SoftSign', function() return nn.SoftSign() end},
      {'LogSigmoid', function() return nn.LogSigmoid() end},
      {'SoftPlus', function() return nn.SoftPlus() end},
      {'SoftPlus(2, 1)', function() return nn.SoftPlus(2, 1) end},
      {'HardTanh', function() return nn.HardTanh(-0.5, 0.7) end},
      {'Clamp', function() return nn.Clamp(-0.3, 0.4) end},
      {'ReLU6', function() return nn.ReLU6() end},
      {'HardShrink', function() return nn.HardShrink(0.5) end},
      {'SoftShrink', function() return nn.SoftShrink(0.5) end},
      {'Threshold', function() return nn.Threshold(0.1, -2) end},
      {'ReLU', function() return nn.ReLU() end},
      {'ReLU(true)', function() return nn.ReLU(true) end},
      {'LeakyReLU', function() return nn.LeakyReLU(0.2) end},
      {'ELU', function() return nn.ELU(0.7) end},
      {'SoftMax', function() return nn.SoftMax() end},
      {'LogSoftMax', function() return nn.LogSoftMax() end},
      {'SoftMin', function() return nn.SoftMin() end},
      {'PReLU shared', function() return nn.PReLU() end},
      {'RReLU eval', function() return nn.RReLU():evaluate() end},
      {'GatedLinearUnit', function() return nn.GatedLinearUnit() end},
   }
   for _, c in ipairs(cases) do
      local name, make, gen = c[1], c[2], c[3]
      it(name .. ': gradients and contract, batch and non-batch', function()
         local function input(...)
            if gen then return gen(...) end
            return away(torch.randn(...), {0, 0.5, -0.5, 0.1, -0.3, 0.4, 0.7})
         end
         H.checkModule(make(), input(3, 4))
         H.checkModule(make(), input(6))
      end)
   end

   it('SoftMax family on 3D and 4D inputs normalises the feature dim', function()
      local x3, x4 = torch.randn(3, 2, 2), torch.randn(2, 3, 2, 2)
      for _, m in ipairs({nn.SoftMax(), nn.SpatialSoftMax()}) do
         local y = m:forward(x3)
         L.near(y:sum(1), torch.ones(1, 2, 2), 1e-12, torch.type(m) .. ' sum')
         y = m:forward(x4)
         L.near(y:sum(2), torch.ones(2, 1, 2, 2), 1e-12, torch.type(m) .. ' sum')
      end
      H.checkModule(nn.SpatialSoftMax(), x4)
      H.checkModule(nn.SpatialLogSoftMax(), x3)
      H.checkModule(nn.LogSoftMax(), x4)
      L.near(nn.SpatialLogSoftMax():forward(x4), torch.log(nn.SpatialSoftMax():forward(x4)),
             1e-12, 'log softmax')
      L.near(nn.SoftMin():forward(x4), nn.SoftMax():forward(-x4), 1e-12, 'softmin')
   end)

   it('PReLU per plane: gradients, init 0.25, batch and non-batch', function()
      local m = nn.PReLU(3)
      assert.are.equal(0.25, m.weight[2])
      H.checkModule(m, away(torch.randn(2, 3, 2, 2)))
      H.checkModule(nn.PReLU(3), away(torch.randn(3, 2, 2)))
      H.checkModule(nn.PReLU(4), away(torch.randn(5, 4)))
      H.checkModule(nn.PReLU(4), away(torch.randn(4)))
   end)

   it('RReLU in training draws slopes in [l, u] and its gradient matches the noise', function()
      local m = nn.RReLU(0.1, 0.3)
      local x = away(torch.randn(4, 5))
      local y = m:forward(x)
      for i = 1, 4 do
         for j = 1, 5 do
            local v, s = x[i][j], m.noise[i][j]
            if v > 0 then
               assert.are.equal(1, s)
            else
               assert.is_true(s >= 0.1 and s <= 0.3)
            end
            assert.is_true(math.abs(y[i][j] - v * s) < 1e-12)
         end
      end
      local gi = m:backward(x, torch.ones(4, 5))
      L.near(gi, m.noise, 1e-12, 'gradInput')
      H.checkModule(nn.RReLU(0.1, 0.3), x, {seed = 5})
   end)

   it('CReLU concatenates relu(x) and relu(-x) along the feature dim', function()
      local x = away(torch.randn(2, 3, 2))
      local y = nn.CReLU(2):forward(x)
      assert.are.same({2, 6, 2}, y:size():totable())
      L.near(y:narrow(2, 1, 3), torch.cmax(x, 0), 0, 'first half')
      L.near(y:narrow(2, 4, 3), torch.cmax(-x, 0), 0, 'second half')
      y = nn.CReLU(3):forward(x)
      assert.are.same({4, 3, 2}, y:size():totable())
      H.checkModule(nn.CReLU(2), x)
      H.checkModule(nn.CReLU(1), away(torch.randn(4)))
   end)

   it('Threshold, ReLU, HardTanh and shrinks give the closed forms', function()
      local x = torch.Tensor({-2, -0.6, -0.2, 0.3, 0.8, 3})
      L.near(nn.Threshold(0.5, -1):forward(x), torch.Tensor({-1, -1, -1, -1, 0.8, 3}), 0, 'Threshold')
      L.near(nn.ReLU():forward(x), torch.Tensor({0, 0, 0, 0.3, 0.8, 3}), 0, 'ReLU')
      L.near(nn.HardTanh():forward(x), torch.Tensor({-1, -0.6, -0.2, 0.3, 0.8, 1}), 0, 'HardTanh')
      L.near(nn.ReLU6():forward(x * 3), torch.Tensor({0, 0, 0, 0.9, 2.4, 6}), 1e-15, 'ReLU6')
      L.near(nn.HardShrink(0.5):forward(x), torch.Tensor({-2, -0.6, 0, 0, 0.8, 3}), 0, 'HardShrink')
      L.near(nn.SoftShrink(0.5):forward(x), torch.Tensor({-1.5, -0.1, 0, 0, 0.3, 2.5}), 1e-15,
             'SoftShrink')
      L.near(nn.LeakyReLU(0.1):forward(x), torch.Tensor({-0.2, -0.06, -0.02, 0.3, 0.8, 3}), 1e-15,
             'LeakyReLU')
      -- SoftPlus: no overflow far on either side, exactly linear past the threshold
      local big = torch.Tensor({-800, 800})
      L.near(nn.SoftPlus():forward(big), torch.Tensor({0, 800}), 0, 'SoftPlus tails')
      L.near(nn.LogSigmoid():forward(big), torch.Tensor({-800, 0}), 0, 'LogSigmoid tails')
      local sp = nn.SoftPlus()
      sp:forward(big)
      local gi = sp:backward(big, torch.ones(2))
      L.near(gi, torch.Tensor({0, 1}), 0, 'SoftPlus gradient at the tails')
   end)

   it('matches PyTorch 1.13', function()
      L.checkGolden(nn.ELU(0.5), G.elu)
      L.checkGolden(nn.SoftPlus(2, 3), G.softplus)
      L.checkGolden(nn.LogSigmoid(), G.logsigmoid)
      L.checkGolden(nn.SoftShrink(0.7), G.softshrink)
      L.checkGolden(nn.LogSoftMax(), G.logsoftmax)
      L.checkGolden(nn.RReLU(0.1, 0.3):evaluate(), G.rrelu_eval)
      L.checkGolden(nn.SoftMax(), G.softmax4d)
      L.checkGolden(nn.GatedLinearUnit(), G.glu)
      L.checkGolden(nn.PReLU(3), G.prelu, {'weight'})
   end)

   it('Maxout is Linear + View + Max over the groups', function()
      if not nn.Maxout then pending('nn.Maxout needs Sequential/Linear/View/Max') return end
      local m = nn.Maxout(4, 3, 2)
      local x = torch.randn(5, 4)
      local y = m:forward(x)
      assert.are.same({5, 3}, y:size():totable())
      local lin = m.modules[1]:forward(x):view(5, 2, 3)
      L.near(y, torch.max(lin, 2):view(5, 3), 1e-12, 'Maxout')
      H.checkModule(nn.Maxout(4, 3, 2), x)
   end)

   it('prints Torch7 names', function()
      assert.are.equal('nn.ReLU', tostring(nn.ReLU()))
      assert.are.equal('nn.LeakyReLU(0.2)', tostring(nn.LeakyReLU(0.2)))
      assert.are.equal('nn.PReLU(3)', tostring(nn.PReLU(3)))
      assert.are.equal('nn.Tanh', tostring(nn.Tanh()))
   end)

   it('float tensors work too', function()
      local x = torch.randn(3, 4):float()
      for _, m in ipairs({nn.Tanh(), nn.SoftPlus(), nn.ELU(), nn.LogSoftMax(), nn.PReLU(4)}) do
         m:float()
         local y = m:forward(x)
         assert.are.equal('torch.FloatTensor', torch.type(y))
         local gi = m:backward(x, y:clone():fill(1))
         assert.are.equal('torch.FloatTensor', torch.type(gi))
      end
   end)

   it('bad input gives errors naming the module', function()
      U.expect_error('nn.Tanh: expected a tensor input', function() nn.Tanh():forward(3) end)
      U.expect_error('nn.ReLU: expected a floating-point tensor',
                     function() nn.ReLU():forward(torch.LongTensor(3)) end)
      U.expect_error('nn.SoftMax: expected a 1D, 2D, 3D or 4D input, got size 1x2x1x2x2',
                     function() nn.SoftMax():forward(torch.randn(1, 2, 1, 2, 2)) end)
      U.expect_error('nn.SpatialSoftMax: expected a 3D (C,H,W) or 4D',
                     function() nn.SpatialSoftMax():forward(torch.randn(2, 3)) end)
      U.expect_error('nn.PReLU: expected 3 feature planes in dim 2, got size 2x4',
                     function() nn.PReLU(3):forward(torch.randn(2, 4)) end)
      U.expect_error('nn.GatedLinearUnit: halving dimension 2 needs an even size',
                     function() nn.GatedLinearUnit():forward(torch.randn(2, 3)) end)
      U.expect_error('nn.CReLU: expected a 2D input or a batch of them, got size 4',
                     function() nn.CReLU(2):forward(torch.randn(4)) end)
      U.expect_error('nn.HardTanh: max_value (-1) must be larger than min_value (1)',
                     function() nn.HardTanh(1, -1) end)
      U.expect_error('nn.RReLU: expected 0 <= lower <= upper <= 1',
                     function() nn.RReLU(0.5, 0.1) end)
      U.expect_error('nn.Power: the power must be a number',
                     function() nn.Power('x') end)
      U.expect_error('nn.Clamp: expected Clamp(min, max) with two numbers',
                     function() nn.Clamp(1) end)
      -- inside a container the error still points at the caller's line
      local s = nn.Sequential():add(nn.Tanh()):add(nn.SoftMax())
      U.expect_error('nn.SoftMax: expected a 1D, 2D, 3D or 4D input',
                     function() s:forward(torch.randn(1, 1, 1, 1, 2)) end)
   end)
end)
