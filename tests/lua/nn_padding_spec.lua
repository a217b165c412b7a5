-- tests/lua/nn_padding_spec.lua -- spatial padding (lua/nn/padding.lua) and up-sampling
-- (lua/nn/upsampling.lua): closed forms, PyTorch 1.13 goldens, finite-difference gradients
-- and the contract, bad input.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local L = dofile('tests/lua/nn_layers_helper.lua')
local U = dofile('tests/lua/spec_util.lua')
local G = L.golden

describe('nn spatial padding', function()
   before_each(function() torch.manualSeed(5) end)

   it('SpatialZeroPadding pads with zeros and crops with negative pads', function()
      local x = U.seq(1, 2, 3)
      local y = nn.SpatialZeroPadding(1, 2, 0, 1):forward(x)
      L.near(y, torch.Tensor({{{0, 1, 2, 3, 0, 0}, {0, 4, 5, 6, 0, 0}, {0, 0, 0, 0, 0, 0}}}), 0,
             'padded')
      y = nn.SpatialZeroPadding(-1, 0, 1, -1):forward(x)
      L.near(y, torch.Tensor({{{0, 0}, {2, 3}}}), 0, 'cropped')
      local x4 = torch.randn(2, 3, 4, 5)
      y = nn.SpatialZeroPadding(2):forward(x4)
      assert.are.same({2, 3, 8, 9}, y:size():totable())
      L.near(y:narrow(3, 3, 4):narrow(4, 3, 5), x4, 0, 'interior')
      assert.are.equal('nn.SpatialZeroPadding(l=1, r=2, t=0, b=1)',
                       tostring(nn.SpatialZeroPadding(1, 2, 0, 1)))
   end)

   it('reflection and replication match PyTorch', function()
      local c = G.reflect
      L.checkGolden(nn.SpatialReflectionPadding(c.l, c.r, c.t, c.b), c)
      c = G.replicate
      L.checkGolden(nn.SpatialReplicationPadding(c.l, c.r, c.t, c.b), c)
   end)

   it('closed forms for reflection and replication', function()
      local x = U.seq(1, 1, 4)
      L.near(nn.SpatialReflectionPadding(2, 1, 0, 0):forward(x),
             torch.Tensor({{{3, 2, 1, 2, 3, 4, 3}}}), 0, 'reflect')
      L.near(nn.SpatialReplicationPadding(2, 1, 0, 0):forward(x),
             torch.Tensor({{{1, 1, 1, 2, 3, 4, 4}}}), 0, 'replicate')
   end)

   it('gradients and contract, batch and non-batch', function()
      H.checkModule(nn.SpatialZeroPadding(1, 2, -1, 1), torch.randn(2, 2, 3, 4))
      H.checkModule(nn.SpatialZeroPadding(-1, 1, 2, 0), torch.randn(2, 3, 4))
      H.checkModule(nn.SpatialReflectionPadding(2, 1, 1, 2), torch.randn(2, 2, 3, 4))
      H.checkModule(nn.SpatialReflectionPadding(1, 1, 0, 2), torch.randn(2, 3, 4))
      H.checkModule(nn.SpatialReplicationPadding(3, 1, 2, 2), torch.randn(2, 2, 3, 4))
      H.checkModule(nn.SpatialReplicationPadding(1, 0, 0, 1), torch.randn(2, 3, 2))
   end)

   it('bad input gives errors naming the module', function()
      U.expect_error('nn.SpatialZeroPadding: input of size 1x2x2 is too small for padding',
                     function() nn.SpatialZeroPadding(-1, -1, 0, 0):forward(torch.randn(1, 2, 2)) end)
      U.expect_error('nn.SpatialReflectionPadding: padding l=3, r=3, t=3, b=3 must be smaller',
                     function() nn.SpatialReflectionPadding(3):forward(torch.randn(1, 3, 3)) end)
      U.expect_error('nn.SpatialReplicationPadding: expected a 3D (C,H,W) or 4D (N,C,H,W) input, got size 3',
                     function() nn.SpatialReplicationPadding(1):forward(torch.randn(3)) end)
      U.expect_error('nn.SpatialZeroPadding: expected padding sizes',
                     function() nn.SpatialZeroPadding() end)
   end)
end)

describe('nn spatial up-sampling', function()
   before_each(function() torch.manualSeed(6) end)

   it('SpatialUpSamplingNearest repeats each pixel scale x scale times', function()
      local x = U.seq(1, 2, 2)
      local up = nn.SpatialUpSamplingNearest(2)
      local y = up:forward(x)
      L.near(y, torch.Tensor({{{1, 1, 2, 2}, {1, 1, 2, 2}, {3, 3, 4, 4}, {3, 3, 4, 4}}}), 0, 'nearest')
      H.checkModule(nn.SpatialUpSamplingNearest(3), torch.randn(2, 2, 2, 3))
      H.checkModule(nn.SpatialUpSamplingNearest(2), torch.randn(2, 3, 2))
      -- the gradient sums each block
      local gi = up:backward(x, torch.ones(1, 4, 4))
      L.near(gi, torch.Tensor(1, 2, 2):fill(4), 0, 'gradInput')
   end)

   it('SpatialUpSamplingBilinear matches PyTorch align_corners=True', function()
      local c = G.bilinear
      L.checkGolden(nn.SpatialUpSamplingBilinear(c.scale), c)
      c = G.bilinear_size
      L.checkGolden(nn.SpatialUpSamplingBilinear({oheight = c.oheight, owidth = c.owidth}), c)
      H.checkModule(nn.SpatialUpSamplingBilinear(2), torch.randn(2, 2, 3, 2))
      H.checkModule(nn.SpatialUpSamplingBilinear({oheight = 4, owidth = 1}), torch.randn(2, 3, 2))
   end)

   it('PixelShuffle matches PyTorch and works without a batch dim', function()
      local c = G.pixelshuffle
      L.checkGolden(nn.PixelShuffle(c.r), c)
      local x = L.T(c.input)
      L.near(nn.PixelShuffle(2):forward(x[2]), L.T(c.output)[2], 0, 'non-batch')
      H.checkModule(nn.PixelShuffle(2), torch.randn(2, 8, 2, 3))
      H.checkModule(nn.PixelShuffle(3), torch.randn(9, 1, 2))
   end)

   it('bad input gives errors naming the module', function()
      U.expect_error('nn.SpatialUpSamplingNearest: scale_factor must be an integer >= 1',
                     function() nn.SpatialUpSamplingNearest(1.5) end)
      U.expect_error('nn.SpatialUpSamplingBilinear: expected a scale factor or {oheight=, owidth=}',
                     function() nn.SpatialUpSamplingBilinear({oheight = 3}) end)
      U.expect_error('nn.SpatialUpSamplingBilinear: expected a 3D (C,H,W) or 4D',
                     function() nn.SpatialUpSamplingBilinear(2):forward(torch.randn(2, 2)) end)
      U.expect_error('nn.PixelShuffle: the number of input planes (6) must be divisible by upscaleFactor^2 = 4',
                     function() nn.PixelShuffle(2):forward(torch.randn(1, 6, 2, 2)) end)
   end)
end)
