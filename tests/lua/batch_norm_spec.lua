-- tests/lua/batch_norm_spec.lua -- torch.batch_norm (the batch_norm op, lua/torch/math_nn.lua)
-- and the nn batch normalization modules built on it: values against the elementwise
-- composition, the stats result, gradients (finite differences through the tape), the
-- running statistics (Torch7's unbiased rule), 2-D to 5-D inputs, bad arguments.
require 'nn'

local function maxdiff(a, b)
   local v = (a - b):abs():max()
   return type(v) == 'number' and v or v:item()
end

-- y and (mean, invstd) by elementwise ops: x (N, C, ...), statistics over all but dim 2
local function reference(x, w, b, eps)
   local C = x:size(2)
   local flat = x:transpose(1, 2):contiguous():view(C, -1)
   local mean = flat:mean(2)
   local var = torch.cmul(flat - mean, flat - mean):mean(2)
   local invstd = torch.pow(var + eps, -0.5)
   local shape = torch.LongStorage(x:dim()):fill(1)
   shape[2] = C
   local y = torch.cmul(x - mean:view(shape), invstd:view(shape))
   if w then y = torch.cmul(y, w:view(shape)) + b:view(shape) end
   return y, mean:view(C), invstd:view(C), var:view(C), flat:size(2)
end

describe('torch.batch_norm', function()
   before_each(function() torch.manualSeed(5) end)

   for _, sz in ipairs({{6, 3}, {4, 3, 5}, {2, 3, 4, 5}, {2, 3, 2, 3, 4}}) do
      it('matches the composition for a ' .. #sz .. '-D input, training and evaluation', function()
         local x = torch.randn(torch.LongStorage(sz)):double()
         local w, b = torch.rand(3):double() + 0.5, torch.randn(3):double()
         local y, stats = torch.batch_norm(x, w, b, nil, nil, true, 1e-5)
         local ry, rmean, rinv = reference(x, w, b, 1e-5)
         assert.is_true(maxdiff(y, ry) < 1e-12)
         assert.are.same({2, 3}, {stats:size(1), stats:size(2)})
         assert.is_true(maxdiff(stats[1], rmean) < 1e-12 and maxdiff(stats[2], rinv) < 1e-10)
         -- evaluation: running statistics, and stats echo them
         local rm, rv = torch.randn(3):double(), torch.rand(3):double() + 0.5
         local ye, se = torch.batch_norm(x, w, b, rm, rv, false, 1e-3)
         local shape = torch.LongStorage(#sz):fill(1)
         shape[2] = 3
         local want = torch.cmul(torch.cmul(x - rm:view(shape), torch.pow(rv + 1e-3, -0.5):view(shape)),
                                 w:view(shape)) + b:view(shape)
         assert.is_true(maxdiff(ye, want) < 1e-12)
         assert.is_true(maxdiff(se[1], rm) == 0 and maxdiff(se[2], torch.pow(rv + 1e-3, -0.5)) < 1e-12)
      end)
   end

   it('gives input, weight and bias gradients through the tape (finite differences)', function()
      local x = torch.randn(3, 2, 4):double()
      local w, b = torch.rand(2):double() + 0.5, torch.randn(2):double()
      local gy = torch.randn(3, 2, 4):double()
      local function loss()
         local y = torch.batch_norm(x, w, b, nil, nil, true, 1e-5)
         return torch.cmul(y, gy):sum()
      end
      x.requires_grad, w.requires_grad, b.requires_grad = true, true, true
      local L = loss()
      L:backward()
      local gx, gw, gb = x.grad:clone(), w.grad:clone(), b.grad:clone()
      x.requires_grad, w.requires_grad, b.requires_grad = false, false, false
      local function numeric(t, g)
         for i = 1, t:nElement() do
            local v = t:view(-1)[i]
            t:view(-1)[i] = v + 1e-6
            local lp = loss()
            t:view(-1)[i] = v - 1e-6
            local lm = loss()
            t:view(-1)[i] = v
            lp = type(lp) == 'number' and lp or lp:item()
            lm = type(lm) == 'number' and lm or lm:item()
            assert.is_true(math.abs((lp - lm) / 2e-6 - g:view(-1)[i]) < 1e-6)
         end
      end
      numeric(x, gx)
      numeric(w, gw)
      numeric(b, gb)
   end)

   it('raises clear errors', function()
      local x = torch.randn(2, 3, 4)
      assert.has_error(function() torch.batch_norm(x, torch.ones(4), nil, nil, nil, true) end,
                       'batch_norm: weight (4) must be 1-D of size 3 (the channels of input (2,3,4))')
      assert.has_error(function() torch.batch_norm(x, nil, nil, nil, nil, false) end,
                       'batch_norm: evaluation (i0 = 0) needs running_mean and running_var')
      assert.has_error(function() torch.batch_norm(torch.randn(5), nil, nil, nil, nil, true) end,
                       'batch_norm: input must be 2-D to 5-D (N,C,...), got (5)')
      assert.has_error(function() torch.batch_norm(x, 3) end,
                       'batch_norm: expected a tensor or nil for weight, got number')
   end)
end)

describe('nn batch normalization on the batch_norm op', function()
   it('updates running statistics with the unbiased variance and saves mean / invstd', function()
      torch.manualSeed(3)
      local m = nn.SpatialBatchNormalization(4, 1e-5, 0.3):double()
      local x = torch.randn(3, 4, 5, 2):double()
      m:forward(x)
      local _, mean, invstd, var, n = reference(x, nil, nil, 1e-5)
      assert.is_true(maxdiff(m.running_mean, mean * 0.3) < 1e-12)
      assert.is_true(maxdiff(m.running_var, var * (0.3 * n / (n - 1)) + 0.7) < 1e-10)
      assert.is_true(maxdiff(m.save_mean, mean) < 1e-12 and maxdiff(m.save_std, invstd) < 1e-10)
      -- evaluation of one sample without the batch dim
      m:evaluate()
      local y1 = m:forward(x[2])
      local yb = m:forward(x)[2]
      assert.are.same({4, 5, 2}, {y1:size(1), y1:size(2), y1:size(3)})
      assert.is_true(maxdiff(y1, yb) < 1e-12)
   end)

   it('refuses a training batch with one value per feature (Torch7)', function()
      local m = nn.BatchNormalization(3)
      assert.has_error(function() m:forward(torch.randn(1, 3)) end)
   end)
end)
