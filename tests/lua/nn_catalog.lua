-- tests/lua/nn_catalog.lua -- one small float64 instance of EVERY registered nn class, shared
-- by the specs that must cover all of nn (nn_serialize_spec: save/load round trip;
-- nn_gradcheck_all_spec: finite differences + the Torch7 contract). Those specs walk the
-- nn table and fail for a class that has no entry here, so a new module must be added.
--
--   local C = dofile('tests/lua/nn_catalog.lua')
--   local m, input, opts = C.modules.Linear()          -- module, input, checkModule options
--   local c, input, target, opts = C.criterions.MSECriterion()
--
-- Each entry is a function building a fresh float64 instance (call torch.manualSeed first
-- for reproducible values). The optional last result holds per-class options for
-- nn_helper's checkModule / checkCriterion, with the reason next to it: today only `seed`
-- for the stochastic modules (integer inputs such as indices and masks need none: only
-- float inputs are differentiated). Classes that cannot be checked by finite differences
-- are listed, with the reason, in nn_gradcheck_all_spec's `special`. Sizes are small:
-- the finite differences run two forwards per input and parameter element.
require 'nn'

local R = torch.randn
local function pair(a, b) return {R(a, b), R(a, b)} end
local function pos(...) return torch.rand(...):add(0.1) end
local function seq(...) return nn.Sequential():add(...) end
local function conv(nin, nout) return nn.SpatialConvolution(nin, nout, 3, 3) end

local abstract = {Module = true, Container = true, Criterion = true, RNNBase = true}

-- name -> function returning (module, input[, checkModule options])
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
   -- stochastic modules: checkModule reseeds before every forward, so each forward draws
   -- the same mask/noise and the finite differences see one fixed function
   Dropout = function() return nn.Dropout(0.5), R(3, 4), {seed = 11} end,
   ELU = function() return nn.ELU(), R(3, 4) end,
   Embedding = function() return nn.Embedding(10, 3), torch.LongTensor({1, 5, 2}) end,
   Euclidean = function() return nn.Euclidean(4, 2), R(3, 4) end,
   Exp = function() return nn.Exp(), R(3, 4) end,
   FlattenTable = function() return nn.FlattenTable(), {R(2), {R(3), R(1)}} end,
   GELU = function() return nn.GELU(), R(3, 4) end,
   GRU = function() return nn.GRU(4, 3), R(5, 2, 4) end,
   GatedLinearUnit = function() return nn.GatedLinearUnit(2), R(3, 4) end,
   GradientReversal = function() return nn.GradientReversal(0.5), R(3, 4) end,
   -- registered by require 'nngraph' (lua/nngraph): a residual graph, x + tanh(W x)
   gModule = function()
      require 'nngraph'
      local x = nn.Identity()()
      return nn.gModule({x}, {nn.CAddTable()({x, nn.Tanh()(nn.Linear(4, 4)(x))})}), R(3, 4)
   end,
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
   -- causal: its own softmax path (nn_attention_spec checks the plain one against PyTorch)
   MultiheadAttention = function() return nn.MultiheadAttention(4, 2, {causal = true}), R(3, 2, 4) end,
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
   RReLU = function() return nn.RReLU(), R(3, 4), {seed = 11} end, -- random slopes in training
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
   SpatialDropout = function() return nn.SpatialDropout(0.5), R(1, 2, 3, 3), {seed = 11} end,
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
   WhiteNoise = function() return nn.WhiteNoise(0, 0.1), R(3, 4), {seed = 11} end,
   -- the late Torch7 modules (lua/nn/torch7_extra.lua, torch7_spatial.lua, volumetric.lua)
   CAddTensorTable = function() return nn.CAddTensorTable(), {R(3), {R(3), R(3)}} end,
   Collapse = function() return nn.Collapse(2), R(2, 3, 4) end,
   Convert = function() return nn.Convert('bchw', 'bf'), R(2, 2, 2, 3) end,
   Decorator = function() return nn.Decorator(nn.Linear(4, 2)), R(3, 4) end,
   DontCast = function() return nn.DontCast(nn.Linear(4, 2), true), R(3, 4) end,
   FeatureLPPooling = function() return nn.FeatureLPPooling(2, 1, 2, true), pos(2, 4, 3) end,
   GPU = function() return nn.GPU(nn.Linear(4, 2), 1), R(3, 4) end,
   IndexLinear = function()
      local m = nn.IndexLinear(6, 3)
      m:reset()
      return m, {{torch.LongTensor({1, 5}), torch.LongTensor({2})}, {R(2), R(1)}}
   end,
   Kmeans = function() return nn.Kmeans(3, 4), R(6, 4) end,
   LinearWeightNorm = function() return nn.LinearWeightNorm(4, 3), R(3, 4) end,
   NaN = function() return nn.NaN(nn.Linear(4, 2), 1), R(3, 4) end,
   PartialLinear = function()
      return nn.PartialLinear(4, 5):setPartition(torch.LongTensor({1, 3, 4})), R(3, 4)
   end,
   PrintSize = function() return nn.PrintSize('nn_catalog'), R(1, 2) end, -- prints: keep it tiny
   Profile = function() return nn.Profile(nn.Linear(4, 2), 1e9), R(3, 4) end,
   SparseLinear = function() return nn.SparseLinear(6, 3), torch.Tensor({{1, 0.5}, {4, -1}, {6, 2}}) end,
   SpatialConvolutionLocal = function() return nn.SpatialConvolutionLocal(2, 2, 4, 4, 2, 2), R(1, 2, 4, 4) end,
   SpatialConvolutionMap = function()
      return nn.SpatialConvolutionMap(torch.Tensor({{1, 1}, {3, 1}, {2, 2}}), 2, 2), R(1, 3, 4, 4)
   end,
   -- random pooling regions (also at evaluation): fixed after the first forward, and saved
   SpatialFractionalMaxPooling = function()
      return nn.SpatialFractionalMaxPooling(2, 2, 3, 3):fixPoolingRegions(), R(1, 2, 5, 5)
   end,
   SpatialFullConvolutionMap = function() return nn.SpatialFullConvolutionMap(nn.tables.full(2, 2), 2, 2, 2, 1), R(1, 2, 3, 3) end,
   SpatialSubSampling = function() return nn.SpatialSubSampling(2, 2, 2, 1, 1), R(1, 2, 4, 4) end,
   TemporalDynamicKMaxPooling = function() return nn.TemporalDynamicKMaxPooling(2, 0.5), R(6, 3) end,
   TemporalRowConvolution = function() return nn.TemporalRowConvolution(3, 2), R(5, 3) end,
   VolumetricAveragePooling = function() return nn.VolumetricAveragePooling(2, 2, 2, 1, 1, 1), R(1, 2, 3, 3, 3) end,
   VolumetricConvolution = function() return nn.VolumetricConvolution(2, 2, 2, 2, 2), R(1, 2, 3, 3, 3) end,
   VolumetricDilatedConvolution = function()
      return nn.VolumetricDilatedConvolution(2, 2, 2, 2, 2, 1, 1, 1, 0, 0, 0, 2, 1, 1), R(1, 2, 4, 3, 3)
   end,
   VolumetricDilatedMaxPooling = function()
      return nn.VolumetricDilatedMaxPooling(2, 2, 2, 1, 1, 1, 0, 0, 0, 2, 1, 1), R(1, 2, 4, 3, 3)
   end,
   VolumetricDropout = function() return nn.VolumetricDropout(0.5), R(2, 2, 2, 2, 2), {seed = 11} end,
   VolumetricFractionalMaxPooling = function()
      return nn.VolumetricFractionalMaxPooling(2, 2, 2, 3, 2, 2):fixPoolingRegions(), R(1, 2, 5, 4, 4)
   end,
   VolumetricFullConvolution = function() return nn.VolumetricFullConvolution(2, 2, 2, 2, 2), R(1, 2, 2, 2, 2) end,
   VolumetricMaxPooling = function() return nn.VolumetricMaxPooling(2, 2, 2), R(1, 2, 4, 4, 4) end,
   VolumetricMaxUnpooling = function()
      local pool = nn.VolumetricMaxPooling(2, 2, 2)
      return seq(pool):add(nn.VolumetricMaxUnpooling(pool)), R(1, 2, 4, 4, 4)
   end,
   VolumetricReplicationPadding = function() return nn.VolumetricReplicationPadding(1, 1, 1, 1, 1, 1), R(1, 1, 2, 2, 2) end,
   ZeroGrad = function() return nn.ZeroGrad(), R(3, 4) end,
   ZipTable = function() return nn.ZipTable(), {{R(2), R(3)}, {R(2), R(3)}} end,
   ZipTableOneToMany = function() return nn.ZipTableOneToMany(), {R(2), {R(3), R(4)}} end,
}

-- name -> function returning (criterion, input, target[, checkCriterion options])
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
   SpatialAutoCropMSECriterion = function()
      return nn.SpatialAutoCropMSECriterion(), R(2, 2, 2, 3), R(2, 2, 5, 4) -- target cropped to 2x3
   end,
   WeightedMSECriterion = function() return nn.WeightedMSECriterion(torch.rand(4)), R(3, 4), R(3, 4) end,
}

-- name -> function returning an object that is neither a module nor a criterion, and a
-- check(original, loaded) raising an error when the loaded copy differs (plain error():
-- busted's assert lives in the specs' environment, not in this file's)
local function expect(cond, what)
   if not cond then error('differs after loading: ' .. what, 2) end
end
local others = {
   StochasticGradient = function()
      local t = nn.StochasticGradient(nn.Linear(2, 1), nn.MSECriterion())
      t.learningRate = 0.25
      return t, function(a, b)
         expect(b.learningRate == 0.25, 'learningRate')
         expect(torch.typename(b.module) == 'nn.Linear', 'module')
         expect(a.module.weight:equal(b.module.weight), 'module weight')
         expect(torch.typename(b.criterion) == 'nn.MSECriterion', 'criterion')
      end
   end,
}

-- Every torch class registered in nn, sorted. Classes that specs define for their own
-- tests (nn.TestXxx) are not part of nn.
local function classes()
   local names = {}
   for name, v in pairs(nn) do
      if type(v) == 'table' and torch.getmetatable('nn.' .. name) == v and not name:match('^Test') then
         names[#names + 1] = name
      end
   end
   table.sort(names)
   return names
end

return {modules = modules, criterions = criterions, others = others, abstract = abstract, classes = classes}
