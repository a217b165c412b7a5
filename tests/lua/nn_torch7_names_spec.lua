-- tests/lua/nn_torch7_names_spec.lua -- how much of Torch7's nn tocha has, by class name.
-- The lists below are Torch7's nn module and criterion classes (torch/nn master's
-- init.lua, including the modules merged from dpnn in 2017; 160 modules here against the
-- "162" usually quoted, 25 criterions). The spec asserts that all 160 modules and all
-- 25 criterions exist in tocha's nn as working classes (built through
-- tests/lua/nn_catalog.lua, which nn_gradcheck_all_spec and nn_serialize_spec also use),
-- prints the missing module names, and requires every registered nn class to be either a
-- Torch7 name or one of tocha's listed additions, so the lists stay current.
require 'nn'
local C = dofile('tests/lua/nn_catalog.lua')

local torch7_modules = {
   -- containers
   'Sequential', 'Parallel', 'Concat', 'DepthConcat', 'Bottle', 'WeightNorm', 'Decorator',
   'DontCast', 'NaN', 'Profile', 'GPU',
   -- table layers and table arithmetic
   'ParallelTable', 'ConcatTable', 'MapTable', 'Identity', 'SplitTable', 'JoinTable',
   'SelectTable', 'NarrowTable', 'FlattenTable', 'MixtureTable', 'CriterionTable', 'ZipTable',
   'ZipTableOneToMany', 'Collapse', 'Convert', 'CAddTable', 'CSubTable', 'CMulTable',
   'CDivTable', 'CMaxTable', 'CMinTable', 'CAddTensorTable',
   -- distances and products
   'PairwiseDistance', 'CosineDistance', 'DotProduct', 'Euclidean', 'WeightedEuclidean',
   'Cosine', 'Kmeans', 'MM', 'MV',
   -- simple layers
   'Linear', 'LinearWeightNorm', 'Bilinear', 'PartialLinear', 'SparseLinear', 'IndexLinear',
   'LookupTable', 'Add', 'CAdd', 'Mul', 'CMul', 'MulConstant', 'AddConstant', 'Constant',
   'Copy', 'Narrow', 'Replicate', 'Reshape', 'View', 'Contiguous', 'Select', 'MaskedSelect',
   'Index', 'Squeeze', 'Unsqueeze', 'Transpose', 'Max', 'Min', 'Mean', 'Sum', 'Normalize',
   'Padding', 'L1Penalty', 'GradientReversal', 'Dropout', 'SpatialDropout',
   'VolumetricDropout', 'WhiteNoise', 'OneHot', 'PrintSize', 'ZeroGrad', 'PixelShuffle',
   -- transfer functions
   'Exp', 'Log', 'Abs', 'Power', 'Square', 'Sqrt', 'Clamp', 'HardTanh', 'HardShrink',
   'SoftShrink', 'Threshold', 'ReLU', 'ReLU6', 'PReLU', 'RReLU', 'CReLU', 'LeakyReLU', 'ELU',
   'Sigmoid', 'LogSigmoid', 'Tanh', 'TanhShrink', 'SoftPlus', 'SoftSign', 'SoftMax', 'SoftMin',
   'LogSoftMax', 'SpatialSoftMax', 'SpatialLogSoftMax', 'GatedLinearUnit', 'Maxout',
   -- normalization
   'BatchNormalization', 'SpatialBatchNormalization', 'VolumetricBatchNormalization',
   'LayerNormalization', 'SpatialCrossMapLRN', 'SpatialSubtractiveNormalization',
   'SpatialDivisiveNormalization', 'SpatialContrastiveNormalization',
   -- spatial convolution, pooling, padding, upsampling
   'SpatialConvolution', 'SpatialConvolutionMM', 'SpatialConvolutionLocal',
   'SpatialConvolutionMap', 'SpatialFullConvolution', 'SpatialFullConvolutionMap',
   'SpatialDilatedConvolution', 'SpatialDepthWiseConvolution', 'SpatialSubSampling',
   'SpatialMaxPooling', 'SpatialDilatedMaxPooling', 'SpatialAveragePooling',
   'SpatialAdaptiveMaxPooling', 'SpatialAdaptiveAveragePooling', 'SpatialFractionalMaxPooling',
   'SpatialLPPooling', 'SpatialMaxUnpooling', 'FeatureLPPooling', 'SpatialZeroPadding',
   'SpatialReflectionPadding', 'SpatialReplicationPadding', 'SpatialUpSamplingNearest',
   'SpatialUpSamplingBilinear',
   -- temporal
   'TemporalConvolution', 'TemporalSubSampling', 'TemporalMaxPooling',
   'TemporalDynamicKMaxPooling', 'TemporalRowConvolution',
   -- volumetric
   'VolumetricConvolution', 'VolumetricFullConvolution', 'VolumetricDilatedConvolution',
   'VolumetricMaxPooling', 'VolumetricDilatedMaxPooling', 'VolumetricFractionalMaxPooling',
   'VolumetricAveragePooling', 'VolumetricMaxUnpooling', 'VolumetricReplicationPadding',
}

local torch7_criterions = {
   'MSECriterion', 'SpatialAutoCropMSECriterion', 'SmoothL1Criterion', 'AbsCriterion',
   'DistKLDivCriterion', 'MarginCriterion', 'SoftMarginCriterion', 'ClassNLLCriterion',
   'SpatialClassNLLCriterion', 'CrossEntropyCriterion', 'ClassSimplexCriterion',
   'BCECriterion', 'MultiMarginCriterion', 'MultiLabelMarginCriterion',
   'MultiLabelSoftMarginCriterion', 'HingeEmbeddingCriterion', 'L1HingeEmbeddingCriterion',
   'CosineEmbeddingCriterion', 'DistanceRatioCriterion', 'MarginRankingCriterion', 'L1Cost',
   'WeightedMSECriterion', 'MultiCriterion', 'ParallelCriterion', 'ModuleCriterion',
}

-- Torch7 classes that are neither (abstract bases, the trainer)
-- (gModule is nngraph's, registered in nn by require 'nngraph')
local torch7_others = {'Module', 'Container', 'Criterion', 'StochasticGradient', 'gModule'}

-- tocha's additions (layers Torch7's nn lacked, the recurrent base class)
local tocha_extras = {
   'GELU', 'SiLU', 'RNN', 'LSTM', 'GRU', 'RNNBase', 'MultiheadAttention', 'LayerNorm',
   'Embedding', 'BCEWithLogitsCriterion',
}

local function set(list)
   local s = {}
   for _, v in ipairs(list) do s[v] = true end
   return s
end

local function registered(name)
   local v = rawget(nn, name)
   return type(v) == 'table' and torch.getmetatable('nn.' .. name) == v
end

-- a module class tocha has: registered, in the catalog, and the catalog's instance is (or
-- holds) an nn.Module of that class
local function has_module(name)
   if not registered(name) or C.modules[name] == nil then return false end
   torch.manualSeed(1)
   local m = C.modules[name]()
   return torch.isTypeOf(m, 'nn.Module') and
          (torch.typename(m) == 'nn.' .. name or #m:findModules('nn.' .. name) > 0)
end

local function has_criterion(name)
   if not registered(name) or C.criterions[name] == nil then return false end
   torch.manualSeed(1)
   local c = C.criterions[name]()
   return torch.isTypeOf(c, 'nn.Criterion') and torch.typename(c) == 'nn.' .. name
end

describe("Torch7's nn class names", function()
   it('lists 160 distinct modules and 25 distinct criterions', function()
      local all = {}
      for _, list in ipairs({torch7_modules, torch7_criterions, torch7_others, tocha_extras}) do
         for _, name in ipairs(list) do
            assert.is_nil(all[name], name .. ' is listed twice')
            all[name] = true
         end
      end
      assert.equals(160, #torch7_modules)
      assert.equals(25, #torch7_criterions)
   end)

   it('all 160 modules are in tocha (the missing ones are printed)', function()
      local present, missing = {}, {}
      for _, name in ipairs(torch7_modules) do
         if has_module(name) then present[#present + 1] = name else missing[#missing + 1] = name end
      end
      table.sort(missing)
      print(string.format("\nTorch7 nn modules in tocha: %d of %d. Missing (%d): %s", #present,
                          #torch7_modules, #missing, table.concat(missing, ' ')))
      assert.same({}, missing)
   end)

   it('all 25 criterions are in tocha', function()
      local missing = {}
      for _, name in ipairs(torch7_criterions) do
         if not has_criterion(name) then missing[#missing + 1] = name end
      end
      assert.same({}, missing)
   end)

   it("the issue's list is all present (containers, table layers, transfer functions, ...)", function()
      -- issue 3: "all containers and table layers, all transfer functions, Linear, ..."
      local required = {
         'Sequential', 'Parallel', 'Concat', 'DepthConcat', 'ConcatTable', 'ParallelTable', 'MapTable',
         'Bottle', 'WeightNorm', 'Identity', 'SplitTable', 'JoinTable', 'SelectTable', 'NarrowTable',
         'FlattenTable', 'MixtureTable', 'CriterionTable', 'CAddTable', 'CSubTable', 'CMulTable',
         'CDivTable', 'CMaxTable', 'CMinTable', 'PairwiseDistance', 'CosineDistance', 'DotProduct',
         'MM', 'MV', 'Exp', 'Log', 'Abs', 'Power', 'Square', 'Sqrt', 'Clamp', 'HardTanh', 'HardShrink',
         'SoftShrink', 'Threshold', 'ReLU', 'ReLU6', 'PReLU', 'RReLU', 'CReLU', 'LeakyReLU', 'ELU',
         'Sigmoid', 'LogSigmoid', 'Tanh', 'TanhShrink', 'SoftPlus', 'SoftSign', 'SoftMax', 'SoftMin',
         'LogSoftMax', 'SpatialSoftMax', 'SpatialLogSoftMax', 'GatedLinearUnit', 'Maxout', 'Linear',
         'Bilinear', 'LookupTable', 'SpatialConvolution', 'SpatialConvolutionMM',
         'SpatialFullConvolution', 'SpatialDilatedConvolution', 'SpatialMaxPooling',
         'SpatialAveragePooling', 'SpatialAdaptiveMaxPooling', 'SpatialAdaptiveAveragePooling',
         'SpatialDilatedMaxPooling', 'SpatialLPPooling', 'SpatialMaxUnpooling', 'TemporalConvolution',
         'TemporalMaxPooling', 'TemporalSubSampling', 'SpatialZeroPadding', 'SpatialReflectionPadding',
         'SpatialReplicationPadding', 'BatchNormalization', 'SpatialBatchNormalization', 'Dropout',
         'View', 'Reshape', 'Transpose', 'Narrow', 'Select', 'Squeeze', 'Unsqueeze',
         'RNN', 'LSTM', 'GRU', 'LayerNorm', 'GELU', 'SiLU', 'MultiheadAttention',
      }
      local missing = {}
      for _, name in ipairs(required) do
         if not has_module(name) then missing[#missing + 1] = name end
      end
      assert.same({}, missing)
   end)

   it('every registered nn class is a Torch7 name or a listed tocha addition', function()
      local known = set(torch7_modules)
      for _, list in ipairs({torch7_criterions, torch7_others, tocha_extras}) do
         for name in pairs(set(list)) do known[name] = true end
      end
      local unknown = {}
      for _, name in ipairs(C.classes()) do
         if not known[name] then unknown[#unknown + 1] = name end
      end
      assert.same({}, unknown)
      -- and the additions really exist
      for _, name in ipairs(tocha_extras) do
         assert.is_true(registered(name), name .. ' is listed as a tocha addition but not registered')
      end
   end)
end)
