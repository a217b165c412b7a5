-- models/resnet.lua -- ResNet-18/34/50/101/152 with torchvision's architecture (He et al.
-- 2016, "v1.5": in a bottleneck block the stride sits on the 3x3 convolution), built from
-- Torch7 nn modules the way fb.resnet.torch did: each block is
--   Sequential{ConcatTable{residual branch, shortcut}, CAddTable, ReLU}
-- Convolutions have no bias (batch normalization follows each one); the shortcut is an
-- Identity, or a 1x1 convolution + batch normalization where the shape changes.
-- Parameter counts equal torchvision's (resnet50: 25,557,032 with 1000 classes);
-- bench/gpu/pytorch/models.py is the same network in PyTorch.
--
--   local resnet = dofile('models/resnet.lua')
--   local model = resnet({depth = 50, classes = 1000})   -- input N x 3 x H x W (224 x 224)
--
-- opts: depth (50), classes (1000), width (64: the first stage's planes; smaller widths
-- give the same topology for quick tests), zeroInitResidual (false: torchvision's default).
-- Output: N x classes scores (no softmax: pair with nn.CrossEntropyCriterion).
-- Initialisation is torchvision's: convolutions He-normal (fan_out, ReLU gain), batch
-- normalization weight 1 and bias 0, the classifier PyTorch's nn.Linear default.
require 'nn'

local configs = {
   [18] = {block = 'basic', layers = {2, 2, 2, 2}},
   [34] = {block = 'basic', layers = {3, 4, 6, 3}},
   [50] = {block = 'bottleneck', layers = {3, 4, 6, 3}},
   [101] = {block = 'bottleneck', layers = {3, 4, 23, 3}},
   [152] = {block = 'bottleneck', layers = {3, 8, 36, 3}},
}

-- kxk convolution without bias, He-normal initialised (torchvision: kaiming_normal_,
-- mode fan_out, nonlinearity relu: std = sqrt(2 / (nOut * k * k))).
local function conv(nIn, nOut, k, stride, pad)
   local c = nn.SpatialConvolution(nIn, nOut, k, k, stride, stride, pad, pad):noBias()
   nn._no_grad(function() c.weight:normal(0, math.sqrt(2 / (nOut * k * k))) end)
   return c
end

local function bn(n, zero)
   local b = nn.SpatialBatchNormalization(n)
   nn._no_grad(function()
      b.weight:fill(zero and 0 or 1)
      b.bias:zero()
   end)
   return b
end

local function shortcut(nIn, nOut, stride)
   if stride == 1 and nIn == nOut then return nn.Identity() end
   return nn.Sequential():add(conv(nIn, nOut, 1, stride, 0)):add(bn(nOut))
end

local function residual(branch, short)
   return nn.Sequential()
      :add(nn.ConcatTable():add(branch):add(short))
      :add(nn.CAddTable())
      :add(nn.ReLU())
end

-- BasicBlock (expansion 1): 3x3 (stride) -> BN -> ReLU -> 3x3 -> BN, + shortcut, ReLU
local function basic(nIn, planes, stride, zero)
   local b = nn.Sequential()
      :add(conv(nIn, planes, 3, stride, 1)):add(bn(planes)):add(nn.ReLU())
      :add(conv(planes, planes, 3, 1, 1)):add(bn(planes, zero))
   return residual(b, shortcut(nIn, planes, stride)), planes
end

-- Bottleneck (expansion 4): 1x1 -> BN -> ReLU -> 3x3 (stride) -> BN -> ReLU -> 1x1 (x4)
-- -> BN, + shortcut, ReLU
local function bottleneck(nIn, planes, stride, zero)
   local out = planes * 4
   local b = nn.Sequential()
      :add(conv(nIn, planes, 1, 1, 0)):add(bn(planes)):add(nn.ReLU())
      :add(conv(planes, planes, 3, stride, 1)):add(bn(planes)):add(nn.ReLU())
      :add(conv(planes, out, 1, 1, 0)):add(bn(out, zero))
   return residual(b, shortcut(nIn, out, stride)), out
end

return function(opts)
   opts = opts or {}
   local depth = opts.depth or 50
   local cfg = configs[depth]
   if not cfg then error('models/resnet.lua: depth must be 18, 34, 50, 101 or 152, got ' .. tostring(depth), 2) end
   local classes, width = opts.classes or 1000, opts.width or 64
   local block = cfg.block == 'basic' and basic or bottleneck
   local model = nn.Sequential()
   model:add(conv(3, width, 7, 2, 3)):add(bn(width)):add(nn.ReLU())
   model:add(nn.SpatialMaxPooling(3, 3, 2, 2, 1, 1))
   local nIn = width
   for stage, count in ipairs(cfg.layers) do
      local planes = width * 2 ^ (stage - 1)
      for i = 1, count do
         local m
         m, nIn = block(nIn, planes, (stage > 1 and i == 1) and 2 or 1, opts.zeroInitResidual)
         model:add(m)
      end
   end
   model:add(nn.SpatialAdaptiveAveragePooling(1, 1))
   model:add(nn.View(nIn):setNumInputDims(3))
   model:add(nn.Linear(nIn, classes))
   return model
end
