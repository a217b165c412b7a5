-- tests/lua/nn_normalization_spec.lua -- batch normalization (train/eval, running statistics,
-- affine flag), SpatialCrossMapLRN and Normalize (lua/nn/normalization.lua): PyTorch 1.13
-- goldens, finite-difference gradients and the Torch7 contract, bad input.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local L = dofile('tests/lua/nn_layers_helper.lua')
local U = dofile('tests/lua/spec_util.lua')
local G = L.golden

local classes = {bn = 'BatchNormalization', sbn = 'SpatialBatchNormalization',
                 vbn = 'VolumetricBatchNormalization'}

describe('nn batch normalization', function()
   before_each(function() torch.manualSeed(2) end)

   for key, cls in pairs(classes) do
      it(cls .. ' matches PyTorch in training (output, gradients, running stats) and eval',
         function()
         local c = G[key]
         local C = c.weight.size[1]
         local m = nn[cls](C, c.eps, c.momentum)
         m:double()
         torch.no_grad(function()
            m.running_mean:copy(L.T(c.running_mean0))
            m.running_var:copy(L.T(c.running_var0))
         end)
         L.checkGolden(m, c, {'weight', 'bias'})
         L.near(m.running_mean, L.T(c.running_mean), 1e-9, 'running_mean')
         L.near(m.running_var, L.T(c.running_var), 1e-9, 'running_var')
         local rm, rv = m.running_mean:clone(), m.running_var:clone()
         m:evaluate()
         L.checkGolden(m, c.eval, {'weight', 'bias'})
         -- evaluation leaves the statistics alone
         L.near(m.running_mean, rm, 0, 'running_mean after eval')
         L.near(m.running_var, rv, 0, 'running_var after eval')
      end)
   end

   it('gradients and contract in training and evaluation, affine or not', function()
      H.checkModule(nn.BatchNormalization(3), torch.randn(5, 3))
      H.checkModule(nn.BatchNormalization(3, 1e-5, 0.1, false), torch.randn(5, 3))
      H.checkModule(nn.SpatialBatchNormalization(2), torch.randn(3, 2, 2, 3))
      H.checkModule(nn.VolumetricBatchNormalization(2), torch.randn(2, 2, 2, 2, 3))
      local m = nn.SpatialBatchNormalization(2)
      torch.no_grad(function()
         m.running_mean:copy(torch.randn(2))
         m.running_var:copy(torch.rand(2):add(0.5))
      end)
      m:evaluate()
      H.checkModule(m, torch.randn(3, 2, 2, 3))
      H.checkModule(m, torch.randn(2, 2, 3)) -- non-batch input in evaluation
   end)

   it('Torch7 defaults: weight ~ U(0,1), bias 0, running stats (0, 1)', function()
      local m = nn.BatchNormalization(50)
      assert.is_true(m.weight:min() >= 0 and m.weight:max() <= 1)
      assert.are.equal(0, m.bias:abs():max())
      assert.are.equal(0, m.running_mean:abs():max())
      assert.are.equal(1, m.running_var:min())
      assert.are.equal(1e-5, m.eps)
      assert.are.equal(0.1, m.momentum)
      assert.is_nil(nn.BatchNormalization(4, nil, nil, false).weight)
      local ws = nn.BatchNormalization(4, nil, nil, false):parameters()
      assert.is_nil(ws)
      assert.are.equal('nn.SpatialBatchNormalization (4D) (7)',
                       tostring(nn.SpatialBatchNormalization(7)))
   end)

   it('running statistics follow the momentum rule over steps', function()
      local m = nn.BatchNormalization(2, 1e-5, 0.5)
      local x1 = torch.Tensor({{1, 2}, {3, 6}})
      local x2 = torch.Tensor({{0, 0}, {2, 4}})
      m:forward(x1)
      m:forward(x2)
      -- step 1: mean (2, 4), unbiased var (2, 8); step 2: mean (1, 2), var (2, 8)
      L.near(m.running_mean, torch.Tensor({0.5 * (0.5 * 2) + 0.5 * 1, 0.5 * (0.5 * 4) + 0.5 * 2}),
             1e-12, 'running_mean')
      L.near(m.running_var, torch.Tensor({0.5 * (0.5 + 1) + 1, 0.5 * (0.5 + 4) + 4}), 1e-12,
             'running_var')
      L.near(m.save_mean, torch.Tensor({1, 2}), 1e-12, 'save_mean')
   end)

   it('serializes; a version-1 file (running_std) loads as running_var', function()
      local m = nn.SpatialBatchNormalization(3)
      m:forward(torch.randn(2, 3, 2, 2))
      local m2 = torch.deserialize(torch.serialize(m))
      assert.are.equal('nn.SpatialBatchNormalization', torch.type(m2))
      L.near(m2.running_var, m.running_var, 0, 'running_var')
      local x = torch.randn(2, 3, 2, 2)
      L.near(m2:evaluate():forward(x), m:evaluate():forward(x), 0, 'eval output')
      -- Torch7 before version 2 stored running_std = 1 / sqrt(var + eps)
      local old = nn.BatchNormalization(2)
      local var = torch.Tensor({0.5, 2})
      old.running_std = torch.pow(var + old.eps, -0.5)
      old.running_var = nil
      local cls = torch.getmetatable('nn.BatchNormalization')
      cls.__version = 1
      local ok, s = pcall(torch.serialize, old)
      cls.__version = 2
      assert.is_true(ok, s)
      local new = torch.deserialize(s)
      assert.is_nil(new.running_std)
      L.near(new.running_var, var, 1e-12, 'running_var from running_std')
   end)

   it('bad input gives errors naming the module', function()
      U.expect_error('nn.BatchNormalization: got 3-feature tensor, expected 4',
                     function() nn.BatchNormalization(4):forward(torch.randn(2, 3)) end)
      U.expect_error('nn.SpatialBatchNormalization: only mini-batch supported (4D tensor), got 3D',
                     function() nn.SpatialBatchNormalization(3):forward(torch.randn(3, 2, 2)) end)
      U.expect_error('nn.BatchNormalization: expected more than 1 value per feature in training',
                     function() nn.BatchNormalization(3):forward(torch.randn(1, 3)) end)
      U.expect_error('nn.BatchNormalization: missing argument #1',
                     function() nn.BatchNormalization() end)
      U.expect_error('nn.BatchNormalization: affine has to be true/false',
                     function() nn.BatchNormalization(3, 1e-5, 0.1, 1) end)
   end)
end)

describe('nn.SpatialCrossMapLRN', function()
   it('matches PyTorch local_response_norm (batch and non-batch)', function()
      local c = G.lrn5
      L.checkGolden(nn.SpatialCrossMapLRN(c.size, c.alpha, c.beta, c.k), c)
      c = G.lrn3
      L.checkGolden(nn.SpatialCrossMapLRN(c.size, c.alpha, c.beta, c.k), c)
   end)
   it('gradients and contract', function()
      H.checkModule(nn.SpatialCrossMapLRN(3, 0.5, 0.75, 1), torch.randn(2, 4, 2, 2))
      H.checkModule(nn.SpatialCrossMapLRN(5, 0.1, 0.6, 2), torch.randn(3, 2, 3))
   end)
   it('bad input', function()
      U.expect_error('nn.SpatialCrossMapLRN: expected 3D (C,H,W) or 4D (N,C,H,W) input, got size 3x4',
                     function() nn.SpatialCrossMapLRN(3):forward(torch.randn(3, 4)) end)
      U.expect_error('nn.SpatialCrossMapLRN: size must be a positive integer',
                     function() nn.SpatialCrossMapLRN(0) end)
   end)
end)

describe('nn.Normalize', function()
   it('divides each row by its p-norm (Torch7 eps inside the root)', function()
      local x = torch.Tensor({{3, -4}, {1, 1}})
      local y = nn.Normalize(2):forward(x)
      L.near(y, torch.Tensor({{0.6, -0.8}, {1 / math.sqrt(2), 1 / math.sqrt(2)}}), 1e-9, 'p=2')
      y = nn.Normalize(1):forward(torch.Tensor({3, -1}))
      L.near(y, torch.Tensor({0.75, -0.25}), 1e-9, 'p=1')
      y = nn.Normalize(math.huge):forward(x)
      L.near(y, torch.Tensor({{0.75, -1}, {1, 1}}), 1e-9, 'p=inf')
   end)
   it('gradients and contract', function()
      H.checkModule(nn.Normalize(2), torch.randn(3, 4))
      H.checkModule(nn.Normalize(1.5), torch.randn(5))
      H.checkModule(nn.Normalize(3), torch.randn(2, 3))
      H.checkModule(nn.Normalize(math.huge), torch.randn(2, 3))
   end)
   it('bad input', function()
      U.expect_error('nn.Normalize: expected a 1D or 2D input, got size 2x2x2',
                     function() nn.Normalize(2):forward(torch.randn(2, 2, 2)) end)
      U.expect_error('nn.Normalize: p must be a positive number', function() nn.Normalize(0) end)
   end)
end)

describe('nn local normalization (subtractive, divisive, contrastive)', function()
   -- reference E(z) and coef by explicit loops over the kernel window (zero padded), with
   -- the kernel normalised to sum 1/C
   local function estimate(x, k, square)
      local C, Hh, W = x:size(1), x:size(2), x:size(3)
      local kH, kW = k:size(1), k:size(2)
      local ksum = k:sum()
      local e, coef = torch.zeros(Hh, W), torch.zeros(Hh, W)
      for i = 1, Hh do
         for j = 1, W do
            local s, c = 0, 0
            for a = 1, kH do
               for b = 1, kW do
                  local y, xx = i + a - 1 - math.floor(kH / 2), j + b - 1 - math.floor(kW / 2)
                  if y >= 1 and y <= Hh and xx >= 1 and xx <= W then
                     for p = 1, C do
                        local v = x[p][y][xx]
                        s = s + k[a][b] * (square and v * v or v)
                     end
                     c = c + k[a][b] * C
                  end
               end
            end
            e[i][j], coef[i][j] = s / (ksum * C), c / (ksum * C)
         end
      end
      return e, coef
   end

   it('SpatialSubtractiveNormalization and SpatialDivisiveNormalization match the definition', function()
      torch.manualSeed(9)
      local x = torch.randn(2, 4, 5)
      local k = torch.rand(3, 3):add(0.1)
      local e, coef = estimate(x, k)
      local mean = torch.cdiv(e, coef)
      local y = nn.SpatialSubtractiveNormalization(2, k):forward(x)
      L.near(y, x - mean:view(1, 4, 5):expandAs(x), 1e-12, 'subtractive')
      local e2 = estimate(x, k, true)
      local std = torch.cdiv(torch.sqrt(e2), coef)
      y = nn.SpatialDivisiveNormalization(2, k):forward(x)
      L.near(y, torch.cdiv(x, std:view(1, 4, 5):expandAs(x)), 1e-12, 'divisive')
      -- a 1-D kernel is the separable outer product
      local k1 = torch.Tensor({1, 2, 1})
      L.near(nn.SpatialContrastiveNormalization(2, k1):forward(x),
             nn.SpatialContrastiveNormalization(2, torch.ger(k1, k1)):forward(x), 1e-12, '1-D kernel')
      -- batch input gives the per-sample result
      local xb = torch.randn(2, 2, 4, 5)
      local m = nn.SpatialContrastiveNormalization(2, k)
      local yb = m:forward(xb):clone()
      L.near(yb[2], m:forward(xb[2]), 1e-12, 'batch')
   end)

   it('gradients and contract', function()
      torch.manualSeed(10)
      local k = torch.rand(3, 3):add(0.1)
      H.checkModule(nn.SpatialSubtractiveNormalization(2, k), torch.randn(2, 2, 4, 4))
      H.checkModule(nn.SpatialDivisiveNormalization(2, k), torch.randn(2, 4, 4))
      H.checkModule(nn.SpatialContrastiveNormalization(2, torch.Tensor({1, 2, 1})), torch.randn(2, 2, 4, 3))
   end)

   it('bad input', function()
      U.expect_error('nn.SpatialContrastiveNormalization: averaging kernel must have ODD dimensions',
                     function() nn.SpatialContrastiveNormalization(1, torch.ones(4, 4)) end)
      U.expect_error('nn.SpatialDivisiveNormalization: expected 3 input planes, got input of size 2x4x4',
                     function() nn.SpatialDivisiveNormalization(3):forward(torch.randn(2, 4, 4)) end)
   end)
end)
