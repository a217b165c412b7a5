-- tests/lua/nn_pooling_spec.lua -- pooling modules (lua/nn/pooling.lua): PyTorch 1.13
-- goldens (max with indices and ceil mode, dilated, average with count_include_pad,
-- adaptive, Lp), unpooling, finite-difference gradients and the contract, bad input.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local L = dofile('tests/lua/nn_layers_helper.lua')
local U = dofile('tests/lua/spec_util.lua')
local G = L.golden

-- distinct values so that max pooling has no ties (finite differences)
local function distinct(...)
   local n = 1
   for _, s in ipairs({...}) do n = n * s end
   return torch.randperm(n):double():div(n):view(...)
end

describe('nn pooling modules', function()
   before_each(function() torch.manualSeed(4) end)

   it('max pooling matches PyTorch (output, 1-based indices, gradInput)', function()
      for _, key in ipairs({'maxpool_ceil', 'maxpool', 'maxpool_dilated'}) do
         local c = G[key]
         local m
         if c.dilW ~= 1 or c.dilH ~= 1 then
            m = nn.SpatialDilatedMaxPooling(c.kW, c.kH, c.dW, c.dH, c.padW, c.padH, c.dilW, c.dilH)
         else
            m = nn.SpatialMaxPooling(c.kW, c.kH, c.dW, c.dH, c.padW, c.padH)
         end
         if c.ceil then m:ceil() end
         L.checkGolden(m, c)
         L.near(m.indices:double(), L.T(c.indices), 0, key .. ' indices')
      end
   end)

   it('average pooling matches PyTorch (ceil mode, count_include_pad on and off)', function()
      for _, key in ipairs({'avgpool_ceil_incl', 'avgpool_ceil_excl', 'avgpool'}) do
         local c = G[key]
         local m = nn.SpatialAveragePooling(c.kW, c.kH, c.dW, c.dH, c.padW, c.padH)
         if c.ceil then m:ceil() end
         if not c.include then m:setCountExcludePad() end
         L.checkGolden(m, c)
      end
   end)

   it('adaptive and Lp pooling match PyTorch', function()
      local c = G.adaptive_avg
      L.checkGolden(nn.SpatialAdaptiveAveragePooling(c.W, c.H), c)
      c = G.adaptive_max
      local m = nn.SpatialAdaptiveMaxPooling(c.W, c.H)
      L.checkGolden(m, c)
      L.near(m.indices:double(), L.T(c.indices), 0, 'adaptive max indices')
      for _, key in ipairs({'lppool2', 'lppool3'}) do
         c = G[key]
         local nIn = c.input.size[#c.input.size - 2]
         L.checkGolden(nn.SpatialLPPooling(nIn, c.p, c.kW, c.kH, c.dW, c.dH), c)
      end
   end)

   it('gradients and contract, batch and non-batch', function()
      H.checkModule(nn.SpatialMaxPooling(2, 2), distinct(2, 2, 4, 4))
      H.checkModule(nn.SpatialMaxPooling(3, 2, 2, 1, 1, 1):ceil(), distinct(2, 5, 4))
      H.checkModule(nn.SpatialDilatedMaxPooling(2, 2, 1, 1, 0, 0, 2, 2), distinct(1, 5, 5))
      H.checkModule(nn.SpatialAveragePooling(2, 3, 1, 2, 1, 1):ceil(), torch.randn(2, 2, 5, 4))
      H.checkModule(nn.SpatialAveragePooling(3, 3, 2, 2, 1, 1):setCountExcludePad(), torch.randn(2, 5, 5))
      H.checkModule(nn.SpatialAdaptiveAveragePooling(2, 3), torch.randn(2, 2, 5, 4))
      H.checkModule(nn.SpatialAdaptiveMaxPooling(2, 2), distinct(2, 5, 4))
      H.checkModule(nn.SpatialLPPooling(2, 2, 2, 2), torch.randn(2, 2, 4, 4))
      H.checkModule(nn.SpatialAdaptiveAveragePooling(3, 2), torch.randn(2, 5, 4))
      H.checkModule(nn.SpatialLPPooling(2, 3, 2, 2, 1, 1), torch.rand(2, 3, 3):add(0.5))
   end)

   it('Torch7 defaults: max pooling stride = kernel, average stride 1', function()
      local mp = nn.SpatialMaxPooling(3, 2)
      assert.are.equal(3, mp.dW)
      assert.are.equal(2, mp.dH)
      local ap = nn.SpatialAveragePooling(3, 2)
      assert.are.equal(1, ap.dW)
      assert.is_true(ap.count_include_pad)
      assert.are.same({1, 2, 3, 4}, mp:forward(torch.randn(1, 2, 6, 12)):size():totable())
      assert.are.same({2, 5, 10}, ap:forward(torch.randn(2, 6, 12)):size():totable())
      -- ceil/floor switch the rounding of the output size
      assert.are.same({1, 3, 3}, nn.SpatialMaxPooling(2, 2):ceil():forward(torch.randn(1, 5, 5)):size():totable())
      assert.are.same({1, 2, 2}, nn.SpatialMaxPooling(2, 2):ceil():floor():forward(torch.randn(1, 5, 5)):size():totable())
      assert.are.equal('nn.SpatialMaxPooling(2x2, 2,2, 1,1)', tostring(nn.SpatialMaxPooling(2, 2, 2, 2, 1, 1)))
      assert.are.equal('nn.SpatialAveragePooling(3x2, 1,1)', tostring(ap))
   end)

   it('SpatialMaxUnpooling puts each maximum back where it came from', function()
      local pool = nn.SpatialMaxPooling(2, 2)
      local unpool = nn.SpatialMaxUnpooling(pool)
      local x = distinct(2, 3, 4, 6)
      local y = pool:forward(x)
      local z = unpool:forward(y)
      assert.are.same({2, 3, 4, 6}, z:size():totable())
      -- z keeps x where x is its window's maximum, zero elsewhere
      local keep = torch.eq(x, nn.SpatialUpSamplingNearest(2):forward(y)):double()
      L.near(z, torch.cmul(x, keep), 0, 'unpooled')
      assert.are.equal(2 * 3 * 2 * 3, keep:sum())
      H.checkModule(nn.Sequential():add(pool):add(unpool), x)
      -- non-batch
      local z3 = unpool:forward(pool:forward(x[1]))
      L.near(z3, z[1], 0, 'non-batch')
   end)

   it('bad input gives errors naming the module', function()
      U.expect_error('nn.SpatialMaxPooling: input of size 1x1x2x2 is too small for a 3x3 window',
                     function() nn.SpatialMaxPooling(3, 3):forward(torch.randn(1, 1, 2, 2)) end)
      U.expect_error('nn.SpatialMaxPooling: pad should be smaller than half of kernel size',
                     function() nn.SpatialMaxPooling(2, 2, 2, 2, 2, 2):forward(torch.randn(1, 4, 4)) end)
      U.expect_error('nn.SpatialAveragePooling: expected a 3D (C,H,W) or 4D (N,C,H,W) input, got size 4x4',
                     function() nn.SpatialAveragePooling(2, 2):forward(torch.randn(4, 4)) end)
      U.expect_error('nn.SpatialAdaptiveMaxPooling: expected positive output sizes',
                     function() nn.SpatialAdaptiveMaxPooling(0, 2) end)
      U.expect_error('nn.SpatialAdaptiveAveragePooling: expected a 3D',
                     function() nn.SpatialAdaptiveAveragePooling(2, 2):forward(torch.randn(5)) end)
      U.expect_error('nn.SpatialMaxUnpooling: argument must be a nn.SpatialMaxPooling module',
                     function() nn.SpatialMaxUnpooling(nn.ReLU()) end)
      local pool = nn.SpatialMaxPooling(2, 2)
      U.expect_error('nn.SpatialMaxUnpooling: input of size 1x2x2 does not match the indices',
                     function() nn.SpatialMaxUnpooling(pool):forward(torch.randn(1, 2, 2)) end)
      U.expect_error('nn.SpatialLPPooling: expected 3 input planes',
                     function() nn.SpatialLPPooling(3, 2, 2, 2):forward(torch.randn(2, 4, 4)) end)
      U.expect_error('nn.SpatialMaxPooling: expected the kernel size (kW, kH)',
                     function() nn.SpatialMaxPooling() end)
   end)
end)
