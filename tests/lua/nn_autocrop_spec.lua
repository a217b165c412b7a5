-- tests/lua/nn_autocrop_spec.lua -- nn.SpatialAutoCropMSECriterion (Torch7's 25th
-- criterion): MSE against the target centre-cropped to the input's height and width.
-- PyTorch has no counterpart, so values are checked against nn.MSECriterion (golden-tested
-- in nn_criterion_spec) on the crop Torch7 takes (offset floor((target - input) / 2));
-- gradients by finite differences (float64); bad input.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local U = dofile('tests/lua/spec_util.lua')

-- Torch7's crop of t (..., H, W) to h x w
local function crop(t, h, w)
   local d = t:dim()
   local r0 = math.floor((t:size(d - 1) - h) / 2)
   local c0 = math.floor((t:size(d) - w) / 2)
   return t:narrow(d - 1, r0 + 1, h):narrow(d, c0 + 1, w)
end

describe('nn.SpatialAutoCropMSECriterion', function()
   it('is MSE against the centre crop of the target (batch and single, odd margins)', function()
      torch.manualSeed(3)
      local cases = {{{2, 3, 2, 3}, {2, 3, 5, 4}}, {{3, 4, 4}, {3, 7, 4}}, {{1, 2, 3, 3}, {1, 2, 3, 3}}}
      for _, case in ipairs(cases) do
         local x, y = torch.randn(unpack(case[1])), torch.randn(unpack(case[2]))
         local d = x:dim()
         local yc = crop(y, x:size(d - 1), x:size(d))
         for _, sizeAverage in ipairs({true, false}) do
            local c = nn.SpatialAutoCropMSECriterion(sizeAverage)
            local m = nn.MSECriterion(sizeAverage)
            assert.is_true(math.abs(c:forward(x, y) - m:forward(x, yc)) < 1e-12)
            local g = c:backward(x, y)
            assert.is_true(g:isSameSizeAs(x))
            assert.is_true((g - m:backward(x, yc)):abs():max() < 1e-12)
         end
      end
   end)

   it('passes checkCriterion (finite differences, crit(x, y):backward())', function()
      torch.manualSeed(4)
      H.checkCriterion(nn.SpatialAutoCropMSECriterion(), torch.randn(2, 2, 3, 2), torch.randn(2, 2, 6, 5))
      H.checkCriterion(nn.SpatialAutoCropMSECriterion(false), torch.randn(2, 2, 2), torch.randn(2, 3, 3))
   end)

   it('is an MSECriterion and survives save/load', function()
      local c = nn.SpatialAutoCropMSECriterion(false)
      assert.is_true(torch.isTypeOf(c, 'nn.MSECriterion'))
      local r = torch.deserialize(torch.serialize(c))
      local x, y = torch.randn(1, 2, 2), torch.randn(1, 4, 4)
      assert.equals(c:forward(x, y), r:forward(x, y))
   end)

   it('rejects bad input with the sizes', function()
      local c = nn.SpatialAutoCropMSECriterion()
      U.expect_error('the input 2x5x5 is spatially larger than the target 2x4x6', function()
         c:forward(torch.randn(2, 5, 5), torch.randn(2, 4, 6))
      end)
      U.expect_error('input 2x3x3 and target 3x4x4 differ in dimension 1', function()
         c:forward(torch.randn(2, 3, 3), torch.randn(3, 4, 4))
      end)
      U.expect_error('expected input and target of 3 or 4 dimensions', function()
         c:forward(torch.randn(3, 3), torch.randn(4, 4))
      end)
      U.expect_error('expected input and target of 3 or 4 dimensions', function()
         c:forward(torch.randn(1, 3, 3), torch.randn(1, 1, 4, 4))
      end)
      U.expect_error('must be a float or double tensor', function()
         c:forward(torch.LongTensor(1, 2, 2), torch.randn(1, 2, 2))
      end)
      U.expect_error('expected input and target of 3 or 4 dimensions', function()
         c:forward(torch.randn(1, 2, 2), 3)
      end)
      U.expect_error('differ in dimension 2', function()
         c:backward(torch.randn(2, 3, 3, 3), torch.randn(2, 2, 4, 4))
      end)
   end)
end)
