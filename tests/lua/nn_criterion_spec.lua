-- tests/lua/nn_criterion_spec.lua -- all 25 Torch7 criterions (+ BCEWithLogits): golden
-- losses and gradients from PyTorch 1.13 (tests/golden/gen_criterions.py), finite
-- differences through nn_helper's checkCriterion (float64), Torch7 semantics (sizeAverage,
-- 1-based classes, ignoreIndex, number targets), bad input, save/load.
require 'nn'
local H = dofile('tests/lua/nn_helper.lua')
local U = dofile('tests/lua/spec_util.lua')
local golden = dofile('tests/golden/criterions.golden.lua')

local class_targets = {
   ClassNLLCriterion = true, SpatialClassNLLCriterion = true, CrossEntropyCriterion = true,
   MultiMarginCriterion = true, MultiLabelMarginCriterion = true, ClassSimplexCriterion = true,
}

local function from_golden(g, long)
   if type(g) ~= 'table' then return g end
   if g.size == nil then
      local r = {}
      for i = 1, #g do r[i] = from_golden(g[i], long) end
      return r
   end
   local t = torch.DoubleTensor(torch.DoubleStorage(g.data)):view(torch.LongStorage(g.size))
   return long and t:long() or t
end

local function max_rel(a, b)
   if type(a) == 'table' then
      local m = 0
      for i = 1, #a do m = math.max(m, max_rel(a[i], b[i])) end
      return m
   end
   assert.same(a:size():totable(), b:size():totable())
   local d = torch.add(a:double(), -1, b:double()):abs():max()
   return d / math.max(1, b:double():abs():max())
end

local function build(c)
   if c.name == 'MultiCriterion' then
      return nn.MultiCriterion():add(nn.MSECriterion(), 0.5):add(nn.AbsCriterion(), 2)
   elseif c.name == 'ParallelCriterion' then
      return nn.ParallelCriterion():add(nn.MSECriterion(), 0.5):add(nn.ClassNLLCriterion())
   end
   local args = {}
   for i = 1, table.maxn(c.args) do args[i] = from_golden(c.args[i]) end
   return nn[c.name](unpack(args, 1, table.maxn(c.args)))
end

local function target_of(c)
   if c.name == 'ParallelCriterion' then return {from_golden(c.target[1]), from_golden(c.target[2], true)} end
   return from_golden(c.target, class_targets[c.name])
end

describe('criterions: golden values from PyTorch', function()
   for _, c in ipairs(golden) do
      it(c.name .. ' ' .. c.tag, function()
         local crit = build(c)
         local x, y = from_golden(c.input), target_of(c)
         local loss = crit:forward(x, y)
         assert.equals('number', type(loss))
         assert.is_true(math.abs(loss - c.loss) <= 1e-10 * math.max(1, math.abs(c.loss)),
                        string.format('loss %.17g, PyTorch %.17g', loss, c.loss))
         local gi = crit:backward(x, y)
         local e = max_rel(gi, from_golden(c.grad))
         assert.is_true(e < 1e-9, 'gradInput differs from PyTorch by ' .. e)
      end)
   end

   it('covers every criterion of Torch7 and the extra one', function()
      local seen = {}
      for _, c in ipairs(golden) do seen[c.name] = true end
      for _, name in ipairs({'MSECriterion', 'SmoothL1Criterion', 'MarginCriterion', 'SoftMarginCriterion',
                             'AbsCriterion', 'ClassNLLCriterion', 'SpatialClassNLLCriterion', 'ClassSimplexCriterion',
                             'DistKLDivCriterion', 'MultiCriterion', 'L1HingeEmbeddingCriterion',
                             'HingeEmbeddingCriterion', 'CosineEmbeddingCriterion', 'MarginRankingCriterion',
                             'MultiMarginCriterion', 'MultiLabelMarginCriterion', 'MultiLabelSoftMarginCriterion',
                             'L1Cost', 'WeightedMSECriterion', 'BCECriterion', 'CrossEntropyCriterion',
                             'ParallelCriterion', 'DistanceRatioCriterion', 'BCEWithLogitsCriterion'}) do
         assert.is_true(seen[name] == true, name .. ' has no golden case')
         assert.is_true(torch.isTypeOf(nn[name](name == 'WeightedMSECriterion' and torch.ones(2) or
                                                (name == 'ClassSimplexCriterion' and 3 or nil)), 'nn.Criterion'))
      end
      -- ModuleCriterion has no PyTorch counterpart: checked against its composition below
   end)
end)

describe('criterions: finite differences (float64)', function()
   torch.manualSeed(42)
   local x, y = torch.randn(3, 4), torch.randn(3, 4)
   local s = torch.Tensor(3, 4):bernoulli(0.5):mul(2):add(-1)
   local cls = torch.LongTensor({2, 4, 1})
   local prob = torch.rand(3, 4):mul(0.8):add(0.1)
   local bin = torch.Tensor(3, 4):bernoulli(0.5)
   local cases = {
      {nn.MSECriterion(), x, y}, {nn.MSECriterion(false), x, y}, {nn.AbsCriterion(), x, y},
      {nn.SmoothL1Criterion(), torch.mul(x, 3), y}, {nn.MarginCriterion(), x, s}, {nn.SoftMarginCriterion(), x, s},
      {nn.WeightedMSECriterion(torch.rand(4)), x, y}, {nn.L1Cost(), x, nil},
      {nn.DistKLDivCriterion(), torch.log_softmax(x, 2), torch.softmax(y, 2)},
      {nn.BCECriterion(torch.rand(4):add(0.5)), prob, bin}, {nn.BCEWithLogitsCriterion(nil, true, torch.rand(4)), x, bin},
      {nn.MultiLabelSoftMarginCriterion(), x, bin},
      {nn.ClassNLLCriterion(torch.rand(4):add(0.5)), torch.log_softmax(x, 2), cls},
      {nn.ClassNLLCriterion(nil, true, 4), torch.log_softmax(x, 2), cls},
      {nn.CrossEntropyCriterion(), x, cls}, {nn.CrossEntropyCriterion(), x[1], 3},
      {nn.CrossEntropyCriterion(torch.rand(4):add(0.5), true, 4), x, cls},
      {nn.CrossEntropyCriterion(nil, false), torch.randn(2, 3, 2, 2), torch.LongTensor(2, 2, 2):random(1, 3)},
      {nn.SpatialClassNLLCriterion(torch.rand(3), true, 2), torch.log_softmax(torch.randn(2, 3, 2, 2), 2),
       torch.LongTensor(2, 2, 2):random(1, 3)},
      {nn.SpatialClassNLLCriterion(), torch.log_softmax(torch.randn(2, 3, 2, 2), 2), torch.LongTensor(2, 2, 2):random(1, 3)},
      {nn.MultiMarginCriterion(), torch.mul(x, 0.3), cls}, {nn.MultiMarginCriterion(2, torch.rand(4), 0.5), torch.mul(x, 0.3), cls},
      {nn.MultiLabelMarginCriterion(), torch.mul(x, 0.3), torch.LongTensor({{2, 1, 0, 0}, {4, 0, 0, 0}, {1, 2, 3, 0}})},
      {nn.ClassSimplexCriterion(4), x, cls},
      {nn.HingeEmbeddingCriterion(2), torch.rand(6), torch.Tensor({1, -1, -1, 1, -1, 1})},
      {nn.L1HingeEmbeddingCriterion(10), {torch.randn(5), torch.randn(5)}, -1},
      {nn.L1HingeEmbeddingCriterion(), {torch.randn(5), torch.randn(5)}, 1},
      {nn.CosineEmbeddingCriterion(0.1), {x, y}, torch.Tensor({1, -1, -1})},
      {nn.MarginRankingCriterion(0.5), {x[1], y[1]}, torch.Tensor({1, -1, 1, -1})},
      {nn.DistanceRatioCriterion(), {torch.rand(5), torch.rand(5)}, nil},
      {nn.MultiCriterion():add(nn.MSECriterion()):add(nn.AbsCriterion(), 0.5), x, y},
      {nn.ParallelCriterion():add(nn.MSECriterion(), 2):add(nn.CrossEntropyCriterion()), {x, y}, {y, cls}},
      {nn.ParallelCriterion(true):add(nn.MSECriterion()):add(nn.AbsCriterion(), 3), {x, y}, y},
      {nn.ModuleCriterion(nn.MSECriterion(), nn.Tanh and nn.Tanh() or nil, nil), x, y},
   }
   for i, c in ipairs(cases) do
      it(string.format('%d %s', i, torch.typename(c[1])), function()
         H.checkCriterion(c[1], c[2], c[3])
      end)
   end
end)

describe('criterions: Torch7 semantics', function()
   it('sizeAverage can be switched after construction', function()
      local c = nn.MSECriterion()
      local x, y = torch.Tensor({1, 2, 3, 4}), torch.zeros(4)
      assert.equals(7.5, c:forward(x, y))
      c.sizeAverage = false
      assert.equals(30, c:forward(x, y))
   end)

   it('ClassNLL: number targets, ignoreIndex, all ignored gives 0 (Torch7)', function()
      local lp = torch.Tensor({{-1, -2, -3}, {-0.5, -1.5, -2.5}})
      assert.equals(2, nn.ClassNLLCriterion():forward(lp[1], 2))
      assert.equals(2, nn.ClassNLLCriterion():forward(lp[1], torch.LongTensor({2})))
      assert.equals(1.75, nn.ClassNLLCriterion():forward(lp, torch.LongTensor({2, 2})))
      assert.equals(2, nn.ClassNLLCriterion(nil, true, 3):forward(lp, torch.LongTensor({2, 3})))
      assert.equals(0, nn.ClassNLLCriterion(nil, true, 3):forward(lp, torch.LongTensor({3, 3})))
      assert.equals(1.75, nn.ClassNLLCriterion():forward(lp, torch.Tensor({2, 2}))) -- float targets
   end)

   it('float inputs work and give float gradients', function()
      local c = nn.CrossEntropyCriterion()
      local x = torch.FloatTensor(2, 3):fill(0.5)
      local l = c:forward(x, torch.LongTensor({1, 3}))
      assert.is_true(math.abs(l - math.log(3)) < 1e-6)
      assert.equals('torch.FloatTensor', c:backward(x, torch.LongTensor({1, 3})):type())
      local m = nn.MSECriterion():float()
      assert.equals(0.25, m:forward(torch.FloatTensor({0.5}), torch.DoubleTensor({0})))
   end)

   it('PyTorch style: crit(x, y) returns the loss tensor; backward() fills x.grad', function()
      local x = torch.Tensor({{1, 2}, {3, 4}}):requires_grad_(true)
      local loss = nn.MSECriterion()(x, torch.zeros(2, 2))
      assert.is_true(torch.isTensor(loss))
      loss:backward()
      assert.same({{0.5, 1}, {1.5, 2}}, x.grad:totable())
   end)

   it('ModuleCriterion equals its composition', function()
      if not nn.Tanh then return pending('nn.Tanh not loaded') end
      local x, y = torch.randn(3, 2), torch.randn(3, 2)
      local mc = nn.ModuleCriterion(nn.MSECriterion(), nn.Tanh(), nn.Tanh())
      local want = nn.MSECriterion():forward(torch.tanh(x), torch.tanh(y))
      assert.is_true(math.abs(mc:forward(x, y) - want) < 1e-12)
   end)

   it('the simplex has unit vertices with dot products -1/(n-1)', function()
      local s = nn.ClassSimplexCriterion(5).simplex
      local g = torch.mm(s, s:t())
      for i = 1, 5 do
         for j = 1, 5 do
            assert.is_true(math.abs(g[i][j] - (i == j and 1 or -0.25)) < 1e-12)
         end
      end
   end)

   it('survives save and load', function()
      local c = nn.ClassNLLCriterion(torch.Tensor({1, 2, 3}), false, 2)
      local m = nn.MultiCriterion():add(c, 0.5):add(nn.CrossEntropyCriterion())
      local x, t = torch.log_softmax(torch.randn(4, 3), 2), torch.LongTensor({1, 2, 3, 3})
      local before = m:forward(x, t)
      local name = os.tmpname()
      torch.save(name, m)
      local r = torch.load(name)
      os.remove(name)
      assert.equals('nn.MultiCriterion', torch.typename(r))
      assert.equals(before, r:forward(x, t))
      assert.equals(2, r.criterions[1].ignoreIndex)
      local again = torch.deserialize(torch.serialize(c, 'ascii'), 'ascii')
      assert.equals(c:forward(x, t), again:forward(x, t))
   end)
end)

describe('criterions: bad input', function()
   local x = torch.randn(2, 3)
   local cases = {
      {nn.MSECriterion(), x, torch.randn(4), 'nn.MSECriterion: input 2x3 and target 4 have different numbers of elements'},
      {nn.MSECriterion(), x, 5, 'nn.MSECriterion: expected the target to be a tensor of 6 elements (like the input 2x3), got number'},
      {nn.AbsCriterion(), torch.LongTensor(2), torch.LongTensor(2), 'nn.AbsCriterion: the input must be a float or double tensor, got a torch.LongTensor'},
      {nn.SmoothL1Criterion(), 'x', x, 'nn.SmoothL1Criterion: expected the input to be a tensor, got string'},
      {nn.ClassNLLCriterion(), x, torch.LongTensor({1, 4}), 'nn.ClassNLLCriterion: target 4 is out of range: class indices go from 1 to 3 (or ignoreIndex -100)'},
      {nn.ClassNLLCriterion(), x, torch.LongTensor({1, 2, 3}), 'nn.ClassNLLCriterion: target 3 has 3 elements, expected 2'},
      {nn.ClassNLLCriterion(), x, 1, 'nn.ClassNLLCriterion: a number target fits one sample, got input 2x3'},
      {nn.ClassNLLCriterion(), x, torch.Tensor({1.5, 2}), 'nn.ClassNLLCriterion: class indices must be integers'},
      {nn.ClassNLLCriterion(), x, {1, 2}, 'nn.ClassNLLCriterion: the target must be a class index (number) or a tensor of class indices, got {number'},
      {nn.ClassNLLCriterion(), torch.randn(2, 3, 4), torch.LongTensor({1, 2}), 'nn.ClassNLLCriterion: input must be 1D (nClasses) or 2D (batch x nClasses), got 2x3x4'},
      {nn.ClassNLLCriterion(torch.ones(4)), x, torch.LongTensor({1, 2}), 'nn.ClassNLLCriterion: weights have 4 elements, the input 2x3 has 3 classes'},
      {nn.SpatialClassNLLCriterion(), x, torch.LongTensor({1, 2}), 'nn.SpatialClassNLLCriterion: input must be 3D'},
      {nn.CrossEntropyCriterion(), torch.randn(2, 3, 4), torch.LongTensor({1}), 'nn.CrossEntropyCriterion: input must be 1D, 2D'},
      {nn.BCECriterion(), torch.Tensor({0.5, 1.5}), torch.Tensor({0, 1}), 'nn.BCECriterion: input values must be probabilities in [0, 1], got values from 0.5 to 1.5'},
      {nn.BCECriterion(torch.ones(5)), torch.Tensor({0.5, 0.5}), torch.Tensor({0, 1}), 'nn.BCECriterion: weights 5 fit neither the input 2'},
      {nn.BCEWithLogitsCriterion(nil, true, torch.ones(2)), x, torch.zeros(2, 3), 'nn.BCEWithLogitsCriterion: posWeight has 2 elements, the input 2x3 has 3 classes'},
      {nn.MarginCriterion(), x, torch.randn(3), 'nn.MarginCriterion: input 2x3 and target 3'},
      {nn.SoftMarginCriterion(), x, nil, 'nn.SoftMarginCriterion: expected the target to be a tensor'},
      {nn.MultiLabelSoftMarginCriterion(), x, torch.zeros(7), 'nn.MultiLabelSoftMarginCriterion: input 2x3 and target 7'},
      {nn.DistKLDivCriterion(), x, torch.zeros(2), 'nn.DistKLDivCriterion: input 2x3 and target 2'},
      {nn.WeightedMSECriterion(torch.ones(5)), x, torch.zeros(2, 3), 'nn.WeightedMSECriterion: weight 5 fits neither the input 2x3'},
      {nn.L1Cost(), {x}, nil, 'nn.L1Cost: expected the input to be a tensor, got {2x3}'},
      {nn.MultiMarginCriterion(), x, torch.LongTensor({0, 1}), 'nn.MultiMarginCriterion: target 0 is out of range: class indices go from 1 to 3'},
      {nn.MultiLabelMarginCriterion(), x, torch.LongTensor({{1, 5, 0}, {1, 0, 0}}), 'nn.MultiLabelMarginCriterion: target 5 is out of range'},
      {nn.MultiLabelMarginCriterion(), x, torch.LongTensor({1}), 'nn.MultiLabelMarginCriterion: target must be a tensor of class indices shaped like the input 2x3, got 1'},
      {nn.ClassSimplexCriterion(4), x, torch.LongTensor({1, 2}), 'nn.ClassSimplexCriterion: input must be (4) or (batch x 4), got 2x3'},
      {nn.HingeEmbeddingCriterion(), torch.rand(3), torch.Tensor({1, 0, -1}), 'nn.HingeEmbeddingCriterion: target values must be 1 or -1'},
      {nn.L1HingeEmbeddingCriterion(), {torch.randn(3), torch.randn(3)}, 2, 'nn.L1HingeEmbeddingCriterion: target must be 1 or -1, got 2'},
      {nn.L1HingeEmbeddingCriterion(), torch.randn(3), 1, 'nn.L1HingeEmbeddingCriterion: expected the input to be a table of two tensors {x1, x2}, got 3'},
      {nn.CosineEmbeddingCriterion(), {torch.randn(2, 3), torch.randn(2, 4)}, torch.ones(2), 'nn.CosineEmbeddingCriterion: input[1] 2x3 and input[2] 2x4 differ in size'},
      {nn.CosineEmbeddingCriterion(), {torch.randn(2, 3), torch.randn(2, 3)}, torch.ones(3), 'nn.CosineEmbeddingCriterion: input 2x1 and target 3 have different numbers of elements'},
      {nn.MarginRankingCriterion(), {torch.randn(2), torch.randn(2)}, 1, 'nn.MarginRankingCriterion: a number target fits a one-element input, got input 2'},
      {nn.DistanceRatioCriterion(), {torch.randn(2)}, nil, 'nn.DistanceRatioCriterion: expected the input to be a table of two tensors'},
      {nn.MultiCriterion(), x, x, 'nn.MultiCriterion: no criterion added'},
      {nn.ParallelCriterion():add(nn.MSECriterion()), x, x, 'nn.ParallelCriterion: expected a table of 1 inputs, got 2x3'},
      {nn.ParallelCriterion():add(nn.MSECriterion()), {x}, x, 'nn.ParallelCriterion: expected a table of 1 targets (or repeatTarget = true), got 2x3'},
   }
   for i, c in ipairs(cases) do
      it(string.format('%d %s', i, torch.typename(c[1])), function()
         U.expect_error(c[4], function() c[1]:forward(c[2], c[3]) end)
      end)
   end

   it('constructors check their arguments', function()
      U.expect_error('nn.ClassSimplexCriterion: expected a number of classes >= 2, got 1', function() nn.ClassSimplexCriterion(1) end)
      U.expect_error('nn.MultiMarginCriterion: p must be 1 or 2, got 3', function() nn.MultiMarginCriterion(3) end)
      U.expect_error('nn.BCECriterion: weights must be a tensor, got number', function() nn.BCECriterion(2) end)
      U.expect_error('nn.WeightedMSECriterion: expected a weight tensor, got nil', function() nn.WeightedMSECriterion() end)
      U.expect_error('nn.ClassNLLCriterion: weights must be a tensor, got {number, number}', function() nn.ClassNLLCriterion({1, 2}) end)
      U.expect_error('nn.MultiCriterion.add: expected a criterion, got {}', function() nn.MultiCriterion():add({}) end)
      U.expect_error('nn.ParallelCriterion.add: the weight must be a number, got string',
                     function() nn.ParallelCriterion():add(nn.MSECriterion(), 'x') end)
      U.expect_error('nn.ModuleCriterion: inputModule must be a module, got number',
                     function() nn.ModuleCriterion(nn.MSECriterion(), 5) end)
   end)
end)
