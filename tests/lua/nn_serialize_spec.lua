-- tests/lua/nn_serialize_spec.lua -- save/load round trip of EVERY module and criterion
-- class registered in nn: the spec walks the nn table for torch classes, builds each one
-- from the table below (small arguments and an input), saves and loads it, and checks
-- parameters, forward output, backward gradients (the .grad links are remade after
-- loading) and that sharing between modules survives. A class missing from the table
-- fails the test, so new modules get covered; abstract classes are listed in `abstract`.
require 'nn'

local R = torch.randn
local function pair(a, b) return {R(a, b), R(a, b)} end
local function pos(...) return torch.rand(...):add(0.1) end
local function seq(...) return nn.Sequential():add(...) end
local function conv(nin, nout) return nn.SpatialConvolution(nin, nout, 3, 3) end

local abstract = {Module = true, Container = true, Criterion = true, RNNBase = true}

-- name -> function returning (module, input)
local modules = {
   Abs = function() return nn.Abs(), R(3, 4) end,
   Add = function() return nn.Add(4), R(3, 4) end,
   AddConstant = function() return nn.AddConstant(2), R(3, 4) end,
   BatchNormalization = function() return nn.BatchNormalization(4), R(5, 4) end,
   Bilinear = function() return nn.Bilinear(3, 4, 2), {R(5, 3), R(5, 4)} end,
   Bottle = function() return nn.Bottle(nn.Linear(4, 2)), R(2, 3, 4) end,
   CAdd = function() return nn.CAdd(3, 4), R(3, 4) end,
   CAddTable = function() return nn.CAddTable(), pair(3, 4) end,
   CDivTable = function() return nn.CDivTable(), {R(3, 4), pos(3, 4)} end,
   CMaxTable = function() return nn.CMaxTable(), pair(3, 4) end,
   CMinTable = function() return nn.CMinTable(), pair(3, 4) end,
   CMul = function() return nn.CMul(3, 4), R(3, 4) end,
   CMulTable = function() return nn.CMulTable(), pair(3, 4) end,
   CReLU = function() return nn.CReLU(1), R(3, 4) end,
   CSubTable = function() return nn.CSubTable(), pair(3, 4) end,
   Clamp = function() return nn.Clamp(-0.5, 0.5), R(3, 4) end,
   Concat = function() return nn.Concat(2):add(nn.Linear(4, 2)):add(nn.Linear(4, 3)), R(3, 4) end,
   ConcatTable = function() return nn.ConcatTable():add(nn.Linear(4, 2)):add(nn.Identity()), R(3, 4) end,
   Constant = function() return nn.Constant(R(2), 1), R(3, 4) end,
   Contiguous = function() return nn.Contiguous(), R(4, 3):t() end,
   Copy = function() return nn.Copy('torch.DoubleTensor', 'torch.DoubleTensor'), R(3, 4) end,
   Cosine = function() return nn.Cosine(4, 2), R(3, 4) end,
   CosineDistance = function() return nn.CosineDistance(), pair(3, 4) end,
   CriterionTable = function() return nn.CriterionTable(nn.MSECriterion()), pair(3, 4) end,
   DepthConcat = function()
      return nn.DepthConcat(2):add(nn.SpatialConvolution(2, 3, 1, 1)):add(conv(2, 2)), R(1, 2, 5, 5)
   end,
   DotProduct = function() return nn.DotProduct(), pair(3, 4) end,
   Dropout = function() return nn.Dropout(0.5), R(3, 4) end,
   ELU = function() return nn.ELU(), R(3, 4) end,
   Embedding = function() return nn.Embedding(10, 3), torch.LongTensor({1, 5, 2}) end,
   Euclidean = function() return nn.Euclidean(4, 2), R(3, 4) end,
   Exp = function() return nn.Exp(), R(3, 4) end,
   FlattenTable = function() return nn.FlattenTable(), {R(2), {R(3), R(1)}} end,
   GELU = function() return nn.GELU(), R(3, 4) end,
   GRU = function() return nn.GRU(4, 3), R(5, 2, 4) end,
   GatedLinearUnit = function() return nn.GatedLinearUnit(2), R(3, 4) end,
   GradientReversal = function() return nn.GradientReversal(0.5), R(3, 4) end,
   HardShrink = function() return nn.HardShrink(), R(3, 4) end,
   HardTanh = function() return nn.HardTanh(), R(3, 4) end,
   Identity = function() return nn.Identity(), R(3, 4) end,
   Index = function() return nn.Index(1), {R(5, 3), torch.LongTensor({1, 3})} end,
   JoinTable = function() return nn.JoinTable(2), {R(3, 2), R(3, 4)} end,
   L1Penalty = function() return nn.L1Penalty(0.1), R(3, 4) end,
   LSTM = function() return nn.LSTM(4, 3), R(5, 2, 4) end,
   LayerNorm = function() return nn.LayerNorm(4), R(3, 4) end,
   LayerNormalization = function() return nn.LayerNormalization(4), R(3, 4) end,
   LeakyReLU = function() return nn.LeakyReLU(0.1), R(3, 4) end,
   Linear = function() return nn.Linear(4, 2), R(3, 4) end,
   Log = function() return nn.Log(), pos(3, 4) end,
   LogSigmoid = function() return nn.LogSigmoid(), R(3, 4) end,
   LogSoftMax = function() return nn.LogSoftMax(), R(3, 4) end,
   LookupTable = function() return nn.LookupTable(10, 3), torch.LongTensor({{1, 2}, {3, 10}}) end,
   MM = function() return nn.MM(), {R(3, 4), R(4, 2)} end,
   MV = function() return nn.MV(), {R(3, 4), R(4)} end,
   MapTable = function() return nn.MapTable(nn.Linear(4, 2)), pair(3, 4) end,
   MaskedSelect = function() return nn.MaskedSelect(), {R(3, 4), torch.ByteTensor(3, 4):bernoulli(0.5)} end,
   Max = function() return nn.Max(2), R(3, 4) end,
   Maxout = function() return nn.Maxout(4, 3, 2), R(3, 4) end,
   Mean = function() return nn.Mean(2), R(3, 4) end,
   Min = function() return nn.Min(2), R(3, 4) end,
   MixtureTable = function() return nn.MixtureTable(), {torch.softmax(R(3, 2), 2), pair(3, 4)} end,
   Mul = function() return nn.Mul(), R(3, 4) end,
   MulConstant = function() return nn.MulConstant(3), R(3, 4) end,
   MultiheadAttention = function() return nn.MultiheadAttention(4, 2), R(3, 2, 4) end,
   Narrow = function() return nn.Narrow(2, 2, 2), R(3, 4) end,
   NarrowTable = function() return nn.NarrowTable(1, 2), {R(2), R(3), R(4)} end,
   Normalize = function() return nn.Normalize(2), R(3, 4) end,
   OneHot = function() return nn.OneHot(5), torch.LongTensor({1, 3, 5}) end,
   PReLU = function() return nn.PReLU(4), R(3, 4) end,
   Padding = function() return nn.Padding(2, 2), R(3, 4) end,
   PairwiseDistance = function() return nn.PairwiseDistance(2), pair(3, 4) end,
   Parallel = function() return nn.Parallel(1, 1):add(nn.Linear(4, 2)):add(nn.Linear(4, 3)), R(2, 4) end,
   ParallelTable = function()
      return nn.ParallelTable():add(nn.Linear(4, 2)):add(nn.Linear(3, 2)), {R(2, 4), R(2, 3)}
   end,
   PixelShuffle = function() return nn.PixelShuffle(2), R(1, 8, 2, 2) end,
   Power = function() return nn.Power(2), R(3, 4) end,
   RNN = function() return nn.RNN(4, 3), R(5, 2, 4) end,
   RReLU = function() return nn.RReLU(), R(3, 4) end,
   ReLU = function() return nn.ReLU(), R(3, 4) end,
   ReLU6 = function() return nn.ReLU6(), R(3, 4) end,
   Replicate = function() return nn.Replicate(3), R(4) end,
   Reshape = function() return nn.Reshape(4, 3), R(2, 12) end,
   Select = function() return nn.Select(2, 3), R(3, 4) end,
   SelectTable = function() return nn.SelectTable(2), {R(2), R(3)} end,
   Sequential = function() return seq(nn.Linear(4, 3)):add(nn.Tanh()):add(nn.Linear(3, 2)), R(3, 4) end,
   SiLU = function() return nn.SiLU(), R(3, 4) end,
   Sigmoid = function() return nn.Sigmoid(), R(3, 4) end,
   SoftMax = function() return nn.SoftMax(), R(3, 4) end,
   SoftMin = function() return nn.SoftMin(), R(3, 4) end,
   SoftPlus = function() return nn.SoftPlus(), R(3, 4) end,
   SoftShrink = function() return nn.SoftShrink(), R(3, 4) end,
   SoftSign = function() return nn.SoftSign(), R(3, 4) end,
   SpatialAdaptiveAveragePooling = function() return nn.SpatialAdaptiveAveragePooling(2, 2), R(1, 2, 5, 5) end,
   SpatialAdaptiveMaxPooling = function() return nn.SpatialAdaptiveMaxPooling(2, 2), R(1, 2, 5, 5) end,
   SpatialAveragePooling = function() return nn.SpatialAveragePooling(2, 2, 2, 2), R(1, 2, 4, 4) end,
   SpatialBatchNormalization = function() return nn.SpatialBatchNormalization(2), R(2, 2, 3, 3) end,
   SpatialContrastiveNormalization = function() return nn.SpatialContrastiveNormalization(2), R(1, 2, 9, 9) end,
   SpatialConvolution = function() return conv(2, 3), R(1, 2, 5, 5) end,
   SpatialConvolutionMM = function() return nn.SpatialConvolutionMM(2, 3, 3, 3), R(1, 2, 5, 5) end,
   SpatialCrossMapLRN = function() return nn.SpatialCrossMapLRN(3), R(1, 4, 3, 3) end,
   SpatialDepthWiseConvolution = function() return nn.SpatialDepthWiseConvolution(2, 2, 3, 3), R(1, 2, 5, 5) end,
   SpatialDilatedConvolution = function()
      return nn.SpatialDilatedConvolution(2, 3, 3, 3, 1, 1, 2, 2, 2, 2), R(1, 2, 5, 5)
   end,
   SpatialDilatedMaxPooling = function() return nn.SpatialDilatedMaxPooling(2, 2, 1, 1, 0, 0, 2, 2), R(1, 2, 5, 5) end,
   SpatialDivisiveNormalization = function() return nn.SpatialDivisiveNormalization(2), R(1, 2, 9, 9) end,
   SpatialDropout = function() return nn.SpatialDropout(0.5), R(1, 2, 3, 3) end,
   SpatialFullConvolution = function() return nn.SpatialFullConvolution(2, 3, 3, 3), R(1, 2, 4, 4) end,
   SpatialLPPooling = function() return nn.SpatialLPPooling(2, 2, 2, 2), pos(1, 2, 4, 4) end,
   SpatialLogSoftMax = function() return nn.SpatialLogSoftMax(), R(1, 3, 2, 2) end,
   SpatialMaxPooling = function() return nn.SpatialMaxPooling(2, 2), R(1, 2, 4, 4) end,
   SpatialMaxUnpooling = function()
      local pool = nn.SpatialMaxPooling(2, 2)
      return seq(pool):add(nn.SpatialMaxUnpooling(pool)), R(1, 2, 4, 4)
   end,
   SpatialReflectionPadding = function() return nn.SpatialReflectionPadding(1, 1, 1, 1), R(1, 2, 3, 3) end,
   SpatialReplicationPadding = function() return nn.SpatialReplicationPadding(1, 1, 1, 1), R(1, 2, 3, 3) end,
   SpatialSoftMax = function() return nn.SpatialSoftMax(), R(1, 3, 2, 2) end,
   SpatialSubtractiveNormalization = function() return nn.SpatialSubtractiveNormalization(2), R(1, 2, 9, 9) end,
   SpatialUpSamplingBilinear = function() return nn.SpatialUpSamplingBilinear(2), R(1, 2, 3, 3) end,
   SpatialUpSamplingNearest = function() return nn.SpatialUpSamplingNearest(2), R(1, 2, 3, 3) end,
   SpatialZeroPadding = function() return nn.SpatialZeroPadding(1, 1, 1, 1), R(1, 2, 3, 3) end,
   SplitTable = function() return nn.SplitTable(2), R(3, 4) end,
   Sqrt = function() return nn.Sqrt(), pos(3, 4) end,
   Square = function() return nn.Square(), R(3, 4) end,
   Squeeze = function() return nn.Squeeze(), R(3, 1, 4) end,
   Sum = function() return nn.Sum(2), R(3, 4) end,
   Tanh = function() return nn.Tanh(), R(3, 4) end,
   TanhShrink = function() return nn.TanhShrink(), R(3, 4) end,
   TemporalConvolution = function() return nn.TemporalConvolution(4, 3, 2), R(5, 4) end,
   TemporalMaxPooling = function() return nn.TemporalMaxPooling(2), R(6, 4) end,
   TemporalSubSampling = function() return nn.TemporalSubSampling(4, 2), R(6, 4) end,
   Threshold = function() return nn.Threshold(0.1, 0), R(3, 4) end,
   Transpose = function() return nn.Transpose({1, 2}), R(3, 4) end,
   Unsqueeze = function() return nn.Unsqueeze(2), R(3, 4) end,
   View = function() return nn.View(2, 6), R(3, 4) end,
   VolumetricBatchNormalization = function() return nn.VolumetricBatchNormalization(2), R(2, 2, 2, 3, 3) end,
   WeightNorm = function() return nn.WeightNorm(nn.Linear(4, 2)), R(3, 4) end,
   WeightedEuclidean = function() return nn.WeightedEuclidean(4, 2), R(3, 4) end,
   WhiteNoise = function() return nn.WhiteNoise(0, 0.1), R(3, 4) end,
}

-- name -> function returning (criterion, input, target)
local criterions = {
   AbsCriterion = function() return nn.AbsCriterion(), R(3, 4), R(3, 4) end,
   BCECriterion = function() return nn.BCECriterion(torch.rand(4)), torch.rand(3, 4), torch.rand(3, 4):gt(0.5):double() end,
   BCEWithLogitsCriterion = function() return nn.BCEWithLogitsCriterion(nil, true, torch.rand(4)), R(3, 4), torch.rand(3, 4) end,
   ClassNLLCriterion = function() return nn.ClassNLLCriterion(torch.rand(4), true, 3), R(3, 4), torch.LongTensor({1, 3, 4}) end,
   ClassSimplexCriterion = function() return nn.ClassSimplexCriterion(4), R(3, 4), torch.LongTensor({1, 3, 4}) end,
   CosineEmbeddingCriterion = function() return nn.CosineEmbeddingCriterion(0.1), pair(3, 4), torch.Tensor({1, -1, 1}) end,
   CrossEntropyCriterion = function() return nn.CrossEntropyCriterion(torch.rand(4)), R(3, 4), torch.LongTensor({1, 3, 4}) end,
   DistKLDivCriterion = function() return nn.DistKLDivCriterion(), R(3, 4), torch.rand(3, 4) end,
   DistanceRatioCriterion = function() return nn.DistanceRatioCriterion(), {torch.rand(4), torch.rand(4)}, nil end,
   HingeEmbeddingCriterion = function() return nn.HingeEmbeddingCriterion(0.5), torch.rand(4), torch.Tensor({1, -1, 1, -1}) end,
   L1Cost = function() return nn.L1Cost(), R(3, 4), nil end,
   L1HingeEmbeddingCriterion = function() return nn.L1HingeEmbeddingCriterion(2), pair(4), -1 end,
   MSECriterion = function() return nn.MSECriterion(false), R(3, 4), R(3, 4) end,
   MarginCriterion = function() return nn.MarginCriterion(0.5), R(3, 4), torch.Tensor(3, 4):fill(-1) end,
   MarginRankingCriterion = function() return nn.MarginRankingCriterion(0.2), pair(4), torch.Tensor({1, -1, 1, 1}) end,
   ModuleCriterion = function() return nn.ModuleCriterion(nn.MSECriterion(), nn.Tanh()), R(3, 4), R(3, 4) end,
   MultiCriterion = function() return nn.MultiCriterion():add(nn.MSECriterion()):add(nn.AbsCriterion(), 2), R(3, 4), R(3, 4) end,
   MultiLabelMarginCriterion = function() return nn.MultiLabelMarginCriterion(), R(2, 3), torch.LongTensor({{1, 0, 0}, {3, 2, 0}}) end,
   MultiLabelSoftMarginCriterion = function() return nn.MultiLabelSoftMarginCriterion(torch.rand(4)), R(3, 4), torch.rand(3, 4):gt(0.5):double() end,
   MultiMarginCriterion = function() return nn.MultiMarginCriterion(2, torch.rand(4), 0.5), R(3, 4), torch.LongTensor({1, 3, 4}) end,
   ParallelCriterion = function()
      return nn.ParallelCriterion():add(nn.MSECriterion(), 0.5):add(nn.AbsCriterion()), pair(3, 4), pair(3, 4)
   end,
   SmoothL1Criterion = function() return nn.SmoothL1Criterion(), R(3, 4), R(3, 4) end,
   SoftMarginCriterion = function() return nn.SoftMarginCriterion(), R(3, 4), torch.Tensor(3, 4):fill(1) end,
   SpatialClassNLLCriterion = function()
      return nn.SpatialClassNLLCriterion(), R(1, 3, 2, 2), torch.LongTensor({{{1, 2}, {3, 1}}})
   end,
   WeightedMSECriterion = function() return nn.WeightedMSECriterion(torch.rand(4)), R(3, 4), R(3, 4) end,
}

-- name -> function returning an object that is neither a module nor a criterion, and a
-- check(original, loaded)
local others = {
   StochasticGradient = function()
      local t = nn.StochasticGradient(nn.Linear(2, 1), nn.MSECriterion())
      t.learningRate = 0.25
      return t, function(a, b)
         assert.equals(0.25, b.learningRate)
         assert.equals('nn.Linear', torch.typename(b.module))
         assert.is_true(a.module.weight:equal(b.module.weight))
         assert.equals('nn.MSECriterion', torch.typename(b.criterion))
      end
   end,
}

local function flat(x, list)
   list = list or {}
   if torch.isTensor(x) then
      list[#list + 1] = x
   elseif type(x) == 'table' then
      for i = 1, #x do flat(x[i], list) end
   elseif type(x) == 'number' then
      list[#list + 1] = torch.Tensor({x})
   end
   return list
end

local function assert_same(a, b, what)
   local la, lb = flat(a), flat(b)
   assert.equals(#la, #lb, what .. ': different number of tensors')
   for i = 1, #la do
      assert.equals(la[i]:type(), lb[i]:type(), what)
      assert.same(la[i]:size():totable(), lb[i]:size():totable(), what)
      assert.is_true(la[i]:equal(lb[i]), what .. ' ' .. i .. ' differs after loading')
   end
end

local function copy(x)
   if torch.isTensor(x) then return x:clone() end
   if type(x) == 'table' then
      local r = {}
      for i = 1, #x do r[i] = copy(x[i]) end
      return r
   end
   return x
end

local function ones_like(x)
   if torch.isTensor(x) then return x:clone():fill(1) end
   local r = {}
   for i = 1, #x do r[i] = ones_like(x[i]) end
   return r
end

local function roundtrip(obj, format)
   if format == 'file' then
      local name = os.tmpname()
      torch.save(name, obj)
      local r = torch.load(name)
      os.remove(name)
      return r
   end
   return torch.deserialize(torch.serialize(obj, format), format)
end

local function classes()
   local names = {}
   for name, v in pairs(nn) do
      -- classes other specs define for their own tests (nn.TestXxx) are not part of nn
      if type(v) == 'table' and torch.getmetatable('nn.' .. name) == v and not name:match('^Test') then
         names[#names + 1] = name
      end
   end
   table.sort(names)
   return names
end

describe('every nn class survives save and load', function()
   it('has a constructor here for each registered class', function()
      local missing = {}
      for _, name in ipairs(classes()) do
         if not (abstract[name] or modules[name] or criterions[name] or others[name]) then
            missing[#missing + 1] = name
         end
      end
      assert.same({}, missing)
   end)

   for _, name in ipairs(classes()) do
      if modules[name] then
         it('nn.' .. name, function()
            torch.manualSeed(5)
            local m, input = modules[name]()
            m:evaluate() -- stochastic modules are deterministic then
            local out = copy(m:forward(input))
            local ws = m:parameters() or {}
            for i, format in ipairs({'binary', 'ascii', 'file'}) do
               local r = roundtrip(m, format)
               assert.equals(torch.typename(m), torch.typename(r))
               assert_same(ws, r:parameters() or {}, name .. ' parameters (' .. format .. ')')
               assert_same(out, r:forward(input), name .. ' output (' .. format .. ')')
               if i == 1 and #ws > 0 then
                  -- backward works after loading and fills the loaded gradients like the original's
                  m:zeroGradParameters()
                  r:zeroGradParameters()
                  local go = ones_like(out)
                  m:backward(input, go)
                  r:backward(input, go)
                  local _, g1 = m:parameters()
                  local _, g2 = r:parameters()
                  assert_same(g1, g2, name .. ' gradients')
               end
            end
         end)
      elseif criterions[name] then
         it('nn.' .. name, function()
            torch.manualSeed(5)
            local c, input, target = criterions[name]()
            local loss = c:forward(input, target)
            local r = roundtrip(c, 'binary')
            assert.equals('nn.' .. name, torch.typename(r))
            assert.equals(loss, r:forward(input, target))
            assert_same(c:backward(input, target), r:backward(input, target), name .. ' gradInput')
         end)
      elseif others[name] then
         it('nn.' .. name, function()
            local o, check = others[name]()
            local r = roundtrip(o, 'binary')
            assert.equals('nn.' .. name, torch.typename(r))
            check(o, r)
         end)
      end
   end
end)

describe('sharing between modules', function()
   it('clone(weight, bias) sharing survives', function()
      local a = nn.Linear(4, 3)
      local b = a:clone('weight', 'bias')
      local net = nn.Sequential():add(a):add(nn.Tanh()):add(nn.Linear(3, 3))
      local r = roundtrip({net = net, b = b}, 'binary')
      r.net:get(1).weight[1][1] = 42
      assert.equals(42, r.b.weight[1][1])
      r.b.bias:fill(7)
      assert.equals(7, r.net:get(1).bias[2])
   end)

   it('getParameters flattening survives: parameters still view one storage', function()
      local net = nn.Sequential():add(nn.Linear(4, 3)):add(nn.Linear(3, 2))
      local flatp, flatg = net:getParameters()
      local r = roundtrip({net = net, p = flatp, g = flatg}, 'binary')
      r.p:fill(0.5)
      assert.equals(0.5, r.net:get(2).bias[1])
      assert.equals(0.5, r.net:get(1).weight[3][4])
      r.net:get(2).weight:fill(-1)
      assert.equals(-1, r.p[r.p:nElement() - 2])
      -- training after loading still accumulates into the flat gradient
      r.g:zero()
      local x = torch.randn(2, 4)
      r.net:forward(x)
      r.net:backward(x, torch.ones(2, 2))
      assert.is_true(r.g:abs():sum() > 0)
      assert.equals(r.g:storage():data(), r.net:get(1).gradWeight:storage():data())
   end)

   it('a loaded model trains PyTorch style: loss:backward() fills gradWeight', function()
      local net = roundtrip(nn.Sequential():add(nn.Linear(4, 2)), 'binary')
      net:zeroGradParameters()
      local loss = nn.MSECriterion()(net(torch.randn(3, 4)), torch.zeros(3, 2))
      loss:backward()
      assert.is_true(net:get(1).gradWeight:abs():sum() > 0)
   end)

   it('an nn class name loads nn when it is not loaded yet', function()
      local name = os.tmpname()
      torch.save(name, nn.Sequential():add(nn.Linear(2, 3)))
      -- a fresh interpreter with only torch loaded
      local p = io.popen(string.format(
         [[luajit -e "require 'torch'; local m = torch.load('%s'); ]] ..
         [[io.write(torch.typename(m), ' ', tostring(package.loaded.nn ~= nil), ' ', m:forward(torch.ones(2)):nElement())" 2>&1]],
         name))
      local out = p:read('*a')
      p:close()
      os.remove(name)
      assert.equals('nn.Sequential true 3', out)
   end)
end)
