-- tests/lua/nn_temporal_spec.lua -- TemporalConvolution, TemporalMaxPooling,
-- TemporalSubSampling (lua/nn/temporal.lua): forward against loops written from Torch7's
-- definitions, gradients and the contract through checkModule (float64), batched input,
-- bad input.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local U = dofile('tests/lua/spec_util.lua')

torch.setdefaulttensortype('torch.DoubleTensor')

local function near(a, b, tol) return U.near(a, b, tol or 1e-12) end

describe('nn temporal layers', function()
   before_each(function() torch.manualSeed(11) end)

   it('TemporalConvolution matches its definition (Torch7 weight layout), batched too', function()
      local C, O, kW, dW, T = 3, 2, 3, 2, 8
      local m = nn.TemporalConvolution(C, O, kW, dW)
      assert.are.same({O, C * kW}, m.weight:size():totable())
      local x = torch.randn(T, C)
      local y = m:forward(x)
      local nOut = math.floor((T - kW) / dW) + 1
      local ref = torch.Tensor(nOut, O)
      for t = 1, nOut do
         local window = x:narrow(1, (t - 1) * dW + 1, kW):contiguous():view(kW * C)
         ref[t]:copy(m.bias + m.weight * window)
      end
      near(y, ref, 1e-12)
      local xb = torch.randn(2, T, C)
      xb[2]:copy(x)
      local yb = m:forward(xb)
      assert.are.same({2, nOut, O}, yb:size():totable())
      near(yb[2], ref, 1e-12)
      H.checkModule(nn.TemporalConvolution(3, 2, 3, 2), torch.randn(7, 3))
      H.checkModule(nn.TemporalConvolution(2, 3, 2), torch.randn(2, 5, 2))
      H.checkModule(nn.TemporalConvolution(2, 2, 1), torch.randn(2, 3, 2))
   end)

   it('TemporalMaxPooling takes the max over windows', function()
      local x = torch.randn(7, 3)
      local y = nn.TemporalMaxPooling(2):forward(x)
      assert.are.same({3, 3}, y:size():totable())
      near(y[2], torch.cmax(x[3], x[4]))
      local y2 = nn.TemporalMaxPooling(3, 1):forward(x)
      assert.are.same({5, 3}, y2:size():totable())
      near(y2[5], torch.cmax(torch.cmax(x[5], x[6]), x[7]))
      local yb = nn.TemporalMaxPooling(3, 2):forward(torch.randn(2, 7, 3))
      assert.are.same({2, 3, 3}, yb:size():totable())
      H.checkModule(nn.TemporalMaxPooling(2), torch.randn(6, 3))
      H.checkModule(nn.TemporalMaxPooling(3, 1), torch.randn(2, 5, 2))
   end)

   it('TemporalSubSampling sums windows, scales per feature and adds a bias', function()
      local m = nn.TemporalSubSampling(3, 3, 2)
      local x = torch.randn(7, 3)
      local y = m:forward(x)
      assert.are.same({3, 3}, y:size():totable())
      near(y[3], torch.cmul(x[5] + x[6] + x[7], m.weight) + m.bias, 1e-12)
      assert.are.same({2, 3, 3}, m:forward(torch.randn(2, 7, 3)):size():totable())
      H.checkModule(nn.TemporalSubSampling(3, 3, 2), torch.randn(7, 3))
      H.checkModule(nn.TemporalSubSampling(2, 2), torch.randn(2, 4, 2))
   end)

   it('reports bad input at the caller with sizes', function()
      U.expect_error('nn.TemporalConvolution: expected inputFrameSize 3, got an input of size 5x2',
                     function() nn.TemporalConvolution(3, 2, 2):forward(torch.randn(5, 2)) end)
      U.expect_error('nn.TemporalConvolution: input of size 2x3 has 2 frames, fewer than the kernel width 3',
                     function() nn.TemporalConvolution(3, 2, 3):forward(torch.randn(2, 3)) end)
      U.expect_error('nn.TemporalMaxPooling: expected a 2-D (nFrame x frameSize) or 3-D',
                     function() nn.TemporalMaxPooling(2):forward(torch.randn(4)) end)
      U.expect_error('nn.TemporalSubSampling: expected inputFrameSize 4, got an input of size 2x5x3',
                     function() nn.TemporalSubSampling(4, 2):forward(torch.randn(2, 5, 3)) end)
      U.expect_error('nn.TemporalConvolution: kW must be a positive integer, got 0',
                     function() nn.TemporalConvolution(3, 2, 0) end)
   end)
end)
