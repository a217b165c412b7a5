-- tests/lua/nn_conv_spec.lua -- convolution modules (lua/nn/convolution.lua): PyTorch 1.13
-- goldens (stride, padding, dilation, depthwise groups, transposed with adj), finite-
-- difference gradients and the Torch7 contract, Torch7 field shapes/init/printing, bad input.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local L = dofile('tests/lua/nn_layers_helper.lua')
local U = dofile('tests/lua/spec_util.lua')
local G = L.golden

describe('nn convolution modules', function()
   before_each(function() torch.manualSeed(3) end)

   it('match PyTorch 1.13 (output, gradInput, gradWeight, gradBias)', function()
      local c = G.conv
      L.checkGolden(nn.SpatialConvolution(c.nIn, c.nOut, c.kW, c.kH, c.dW, c.dH, c.padW, c.padH),
                    c, {'weight', 'bias'})
      c = G.convMM
      L.checkGolden(nn.SpatialConvolutionMM(c.nIn, c.nOut, c.kW, c.kH, c.dW, c.dH, c.padW,
                                            c.padH), c, {'weight', 'bias'})
      c = G.dilated
      L.checkGolden(nn.SpatialDilatedConvolution(c.nIn, c.nOut, c.kW, c.kH, c.dW, c.dH, c.padW,
                                                 c.padH, c.dilW, c.dilH), c, {'weight', 'bias'})
      c = G.depthwise
      L.checkGolden(nn.SpatialDepthWiseConvolution(c.nIn, c.mult, c.kW, c.kH, c.dW, c.dH, c.padW,
                                                   c.padH), c, {'weight', 'bias'})
      c = G.full
      L.checkGolden(nn.SpatialFullConvolution(c.nIn, c.nOut, c.kW, c.kH, c.dW, c.dH, c.padW,
                                              c.padH, c.adjW, c.adjH), c, {'weight', 'bias'})
   end)

   it('keep Torch7 field shapes', function()
      assert.are.same({4, 3, 2, 5}, nn.SpatialConvolution(3, 4, 5, 2).weight:size():totable())
      assert.are.same({4, 30}, nn.SpatialConvolutionMM(3, 4, 5, 2).weight:size():totable())
      assert.are.same({3, 4, 2, 5}, nn.SpatialFullConvolution(3, 4, 5, 2).weight:size():totable())
      local dw = nn.SpatialDepthWiseConvolution(3, 2, 5, 2)
      assert.are.same({2, 30}, dw.weight:size():totable())
      assert.are.same({2, 3}, dw.bias:size():totable())
      assert.are.equal(6, dw.nOutputPlane)
      assert.are.same({4, 30}, nn.SpatialConvolutionMM(3, 4, 5, 2).gradWeight:size():totable())
   end)

   it('gradients and contract, batch and non-batch', function()
      H.checkModule(nn.SpatialConvolution(2, 3, 3, 2, 2, 1, 1, 0), torch.randn(2, 2, 5, 4))
      H.checkModule(nn.SpatialConvolution(2, 3, 3, 3, 1, 1, 1, 1), torch.randn(2, 4, 4))
      H.checkModule(nn.SpatialConvolutionMM(2, 2, 2, 2), torch.randn(2, 2, 3, 3))
      H.checkModule(nn.SpatialDilatedConvolution(2, 2, 2, 2, 1, 1, 1, 1, 2, 2), torch.randn(2, 4, 5))
      H.checkModule(nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1, 1, 1), torch.randn(2, 2, 3, 3))
      H.checkModule(nn.SpatialFullConvolution(2, 1, 2, 3), torch.randn(2, 3, 2))
      H.checkModule(nn.SpatialDepthWiseConvolution(2, 3, 3, 3, 1, 1, 1, 1), torch.randn(2, 2, 4, 4))
      H.checkModule(nn.SpatialDepthWiseConvolution(2, 2, 2, 3, 2, 1), torch.randn(2, 5, 4))
      H.checkModule(nn.SpatialConvolution(2, 3, 3, 3):noBias(), torch.randn(2, 2, 4, 4))
      H.checkModule(nn.SpatialFullConvolution(2, 3, 3, 3):noBias(), torch.randn(2, 3, 3))
   end)

   it('noBias drops the bias and its gradient', function()
      local m = nn.SpatialConvolution(2, 3, 3, 3):noBias()
      assert.is_nil(m.bias)
      assert.is_nil(m.gradBias)
      local ws = m:parameters()
      assert.are.equal(1, #ws)
      local x = torch.randn(2, 4, 4)
      local y = m:forward(x)
      local ref = torch.conv2d(x, m.weight, nil, 1, 0, 1, 1)
      L.near(y, ref, 1e-12, 'output')
      assert.are.equal('nn.SpatialConvolution(2 -> 3, 3x3) without bias', tostring(m))
   end)

   it('reset uses Torch7 init: U(-1/sqrt(fan_in), +) or stdv * sqrt(3)', function()
      local m = nn.SpatialConvolution(4, 8, 3, 2)
      local bound = 1 / math.sqrt(4 * 3 * 2)
      assert.is_true(m.weight:abs():max() <= bound)
      assert.is_true(m.weight:abs():max() > 0.5 * bound)
      assert.is_true(m.bias:abs():max() <= bound)
      m:reset(0.01)
      assert.is_true(m.weight:abs():max() <= 0.01 * math.sqrt(3) + 1e-12)
      local f = nn.SpatialFullConvolution(4, 8, 3, 2)
      assert.is_true(f.weight:abs():max() <= 1 / math.sqrt(4 * 3 * 2))
   end)

   it('SpatialFullConvolution takes {input, target} to pick adj', function()
      local m = nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1)
      local x = torch.randn(1, 2, 3, 3)
      local t = torch.randn(1, 3, 6, 5)
      local y = m:forward({x, t})
      assert.are.same({1, 3, 6, 5}, y:size():totable())
      local gi = m:backward({x, t}, torch.ones(1, 3, 6, 5))
      assert.are.same({1, 2, 3, 3}, gi[1]:size():totable())
      assert.are.equal(0, gi[2]:abs():max())
      -- the same output as the module with adj given explicitly
      local m2 = nn.SpatialFullConvolution(2, 3, 3, 3, 2, 2, 1, 1, 0, 1)
      torch.no_grad(function() m2.weight:copy(m.weight); m2.bias:copy(m.bias) end)
      L.near(m2:forward(x), y, 1e-12, 'explicit adj')
      y = m:forward(x)
      assert.are.same({1, 3, 5, 5}, y:size():totable())
   end)

   it('clearState keeps the module usable; float() converts parameters and output', function()
      local m = nn.SpatialConvolution(2, 3, 3, 3, 1, 1, 1, 1)
      local x = torch.randn(2, 2, 4, 4)
      local y = m:forward(x):clone()
      m:clearState()
      assert.are.equal(0, m.output:nElement())
      L.near(m:forward(x), y, 0, 'after clearState')
      m:float()
      local yf = m:forward(x:float())
      assert.are.equal('torch.FloatTensor', torch.type(yf))
      L.near(yf:double(), y, 1e-5, 'float output')
      local gi = m:backward(x:float(), yf:clone():fill(1))
      assert.are.equal('torch.FloatTensor', torch.type(gi))
   end)

   it('prints as Torch7', function()
      assert.are.equal('nn.SpatialConvolution(3 -> 16, 5x5)', tostring(nn.SpatialConvolution(3, 16, 5, 5)))
      assert.are.equal('nn.SpatialConvolution(3 -> 16, 5x3, 2,1, 2,1)',
                       tostring(nn.SpatialConvolution(3, 16, 5, 3, 2, 1, 2, 1)))
      assert.are.equal('nn.SpatialConvolutionMM(3 -> 4, 3x3, 1,1, 1,1)',
                       tostring(nn.SpatialConvolutionMM(3, 4, 3, 3, 1, 1, 1)))
      assert.are.equal('nn.SpatialDilatedConvolution(3 -> 4, 3x3, 1,1, 2,2, 2,2)',
                       tostring(nn.SpatialDilatedConvolution(3, 4, 3, 3, 1, 1, 2, 2, 2, 2)))
      assert.are.equal('nn.SpatialFullConvolution(3 -> 4, 3x3, 2,2, 1,1, 1,1)',
                       tostring(nn.SpatialFullConvolution(3, 4, 3, 3, 2, 2, 1, 1, 1, 1)))
      assert.are.equal('nn.SpatialDepthWiseConvolution(3 -> 2, 3x3)',
                       tostring(nn.SpatialDepthWiseConvolution(3, 2, 3, 3)))
   end)

   it('inside a Sequential with PyTorch-style loss:backward() filling gradWeight', function()
      local net = nn.Sequential():add(nn.SpatialConvolution(1, 2, 3, 3)):add(nn.ReLU())
      local x = torch.randn(2, 1, 5, 5)
      net:zeroGradParameters()
      local loss = net(x):sum(1):sum(2):sum(3):sum(4)
      loss:backward()
      assert.is_true(net.modules[1].gradWeight:abs():max() > 0)
   end)

   it('bad input gives errors naming the module', function()
      U.expect_error('nn.SpatialConvolution: expected 3 input planes, got input of size 2x4x5x5',
                     function() nn.SpatialConvolution(3, 2, 3, 3):forward(torch.randn(2, 4, 5, 5)) end)
      U.expect_error('nn.SpatialConvolution: input of size 1x3x2x2 is too small',
                     function() nn.SpatialConvolution(3, 2, 3, 3):forward(torch.randn(1, 3, 2, 2)) end)
      U.expect_error('nn.SpatialConvolutionMM: expected a 3D (nInputPlane,H,W) or 4D',
                     function() nn.SpatialConvolutionMM(3, 2, 3, 3):forward(torch.randn(3, 5)) end)
      U.expect_error('nn.SpatialDilatedConvolution: input of size 1x5x5 is too small',
                     function()
                        nn.SpatialDilatedConvolution(1, 1, 3, 3, 1, 1, 0, 0, 3, 3):forward(torch.randn(1, 5, 5))
                     end)
      U.expect_error('nn.SpatialFullConvolution: expected 2 input planes',
                     function() nn.SpatialFullConvolution(2, 3, 3, 3):forward(torch.randn(3, 4, 4)) end)
      U.expect_error('nn.SpatialFullConvolution: adjW and adjH must be smaller',
                     function() nn.SpatialFullConvolution(2, 3, 3, 3, 1, 1, 0, 0, 1, 0) end)
      U.expect_error('nn.SpatialDepthWiseConvolution: expected 3 input planes',
                     function() nn.SpatialDepthWiseConvolution(3, 2, 3, 3):forward(torch.randn(2, 5, 5)) end)
      U.expect_error('nn.SpatialConvolution: argument #3 must be a positive integer',
                     function() nn.SpatialConvolution(3, 2, 0, 3) end)
      U.expect_error('nn.SpatialConvolution: expected a floating-point tensor',
                     function() nn.SpatialConvolution(1, 1, 1, 1):forward(torch.LongTensor(1, 2, 2)) end)
   end)
end)
