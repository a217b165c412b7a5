-- nn/convolution.lua -- Torch7's 2-D convolution modules on torch.conv2d /
-- torch.conv_transpose2d (C kernels: im2col + BLAS; their gradient rules give backward).
--
-- Torch7's constructor order is width before height: (nInputPlane, nOutputPlane, kW, kH,
-- dW, dH, padW, padH); the C ops take (h, w) pairs. Field shapes are Torch7's so old
-- models load unchanged:
--   SpatialConvolution, SpatialDilatedConvolution  weight (nOut, nIn, kH, kW)
--   SpatialConvolutionMM                            weight (nOut, nIn*kH*kW)
--   SpatialFullConvolution                          weight (nIn, nOut, kH, kW)
--   SpatialDepthWiseConvolution                     weight (mult, nIn*kH*kW), bias (mult, nIn)
-- and every forward views the weight as the op needs it (views are on the tape, so the
-- gradient lands in gradWeight with the field's own shape).
-- Input: (nIn, H, W) or (N, nIn, H, W).
local nn = ...
local torch = torch
local U = nn._layer_util

local spatial = U.spatial

-- Checks the input's planes and that the (dilated) kernel fits the padded input.
local function check_spatial(self, input, nIn, kW, kH, dW, dH, padW, padH, dilW, dilH)
   U.check_input(self, input, spatial, 'a 3D (nInputPlane,H,W) or 4D (N,nInputPlane,H,W)')
   local d = input:dim()
   if input:size(d - 2) ~= nIn then
      U.raise(self, 'expected %d input planes, got input of size %s', nIn, U.describe(input))
   end
   local H, W = input:size(d - 1), input:size(d)
   local oH = math.floor((H + 2 * padH - dilH * (kH - 1) - 1) / dH) + 1
   local oW = math.floor((W + 2 * padW - dilW * (kW - 1) - 1) / dW) + 1
   if oH < 1 or oW < 1 then
      U.raise(self, 'input of size %s is too small: a %dx%d kernel (dilation %d,%d, padding ' ..
              '%d,%d) gives output size %dx%d', U.describe(input), kH, kW, dilH, dilW, padH, padW,
              oH, oW)
   end
end

-- Torch7's init: U(-stdv, stdv), stdv = 1/sqrt(fan_in), or the caller's stdv * sqrt(3).
local function uniform_init(self, stdv, fanIn)
   if stdv then stdv = stdv * math.sqrt(3) else stdv = 1 / math.sqrt(fanIn) end
   nn._no_grad(function()
      self.weight:uniform(-stdv, stdv)
      if self.bias then self.bias:uniform(-stdv, stdv) end
   end)
end

-- "nn.SpatialConvolution(3 -> 16, 5x5, 1,1, 2,2)" as Torch7 prints it.
local function conv_string(self, nOut)
   local s = string.format('%s(%d -> %d, %dx%d', torch.type(self), self.nInputPlane,
                           nOut or self.nOutputPlane, self.kW, self.kH)
   if self.dW ~= 1 or self.dH ~= 1 or self.padW ~= 0 or self.padH ~= 0 then
      s = s .. string.format(', %d,%d', self.dW, self.dH)
   end
   if (self.padW or self.padH) and (self.padW ~= 0 or self.padH ~= 0) then
      s = s .. ', ' .. self.padW .. ',' .. self.padH
   end
   return s
end

local function close_string(self, s)
   if self.bias then return s .. ')' end
   return s .. ') without bias'
end

local function no_bias(self)
   self.bias = nil
   self.gradBias = nil
   return self
end

-- Torch7 files may carry `padding` instead of padW/padH.
local function back_compat(self)
   if self.padding then
      self.padW, self.padH = self.padding, self.padding
      self.padding = nil
   end
   self.padW = self.padW or 0
   self.padH = self.padH or 0
end

---------------------------------------------------------------------------------------------
-- SpatialConvolution(nIn, nOut, kW, kH, [dW], [dH], [padW], [padH])
--   y[n, o] = b[o] + sum_c x[n, c] (*) W[o, c]     (cross-correlation)
---------------------------------------------------------------------------------------------

local function conv_init(self, parent, nIn, nOut, kW, kH, dW, dH, padW, padH)
   parent.__init(self)
   for i, v in ipairs({nIn, nOut, kW, kH}) do
      if type(v) ~= 'number' or v < 1 or v % 1 ~= 0 then
         U.raise(self, 'argument #%d must be a positive integer, got %s', i, tostring(v))
      end
   end
   self.nInputPlane, self.nOutputPlane = nIn, nOut
   self.kW, self.kH = kW, kH
   self.dW, self.dH = dW or 1, dH or 1
   self.padW = padW or 0
   self.padH = padH or self.padW
end

local Conv, ConvParent = torch.class('nn.SpatialConvolution', 'nn.Module')

function Conv:__init(nIn, nOut, kW, kH, dW, dH, padW, padH)
   conv_init(self, ConvParent, nIn, nOut, kW, kH, dW, dH, padW, padH)
   self.weight = torch.Tensor(nOut, nIn, kH, kW)
   self.bias = torch.Tensor(nOut)
   self.gradWeight = torch.Tensor(nOut, nIn, kH, kW):zero()
   self.gradBias = torch.Tensor(nOut):zero()
   self:reset()
end

Conv.noBias = no_bias

function Conv:reset(stdv)
   uniform_init(self, stdv, self.kW * self.kH * self.nInputPlane)
end

-- The 4-D (nOut, nIn/groups, kH, kW) view of the weight, whatever shape the field has.
function Conv:_weight4d()
   local w = self.weight
   if w:dim() == 4 then return w end
   return w:view(self.nOutputPlane, -1, self.kH, self.kW)
end

function Conv:updateOutput(input)
   back_compat(self)
   local dilW, dilH = self.dilationW or 1, self.dilationH or 1
   check_spatial(self, input, self.nInputPlane, self.kW, self.kH, self.dW, self.dH, self.padW,
                 self.padH, dilW, dilH)
   self.output = torch.conv2d(input, self:_weight4d(), self.bias, {self.dH, self.dW},
                              {self.padH, self.padW}, {dilH, dilW}, 1)
   return self.output
end

function Conv:__tostring__()
   return close_string(self, conv_string(self))
end

function Conv:clearState()
   nn.utils.clear(self, 'finput', 'fgradInput', '_input', '_gradOutput')
   return ConvParent.clearState(self)
end

---------------------------------------------------------------------------------------------
-- SpatialConvolutionMM: the same layer with Torch7's MM weight layout (nOut, nIn*kH*kW)
---------------------------------------------------------------------------------------------

local ConvMM = torch.class('nn.SpatialConvolutionMM', 'nn.SpatialConvolution')

function ConvMM:__init(nIn, nOut, kW, kH, dW, dH, padW, padH)
   conv_init(self, ConvParent, nIn, nOut, kW, kH, dW, dH, padW, padH)
   self.weight = torch.Tensor(nOut, nIn * kH * kW)
   self.bias = torch.Tensor(nOut)
   self.gradWeight = torch.Tensor(nOut, nIn * kH * kW):zero()
   self.gradBias = torch.Tensor(nOut):zero()
   self:reset()
end

---------------------------------------------------------------------------------------------
-- SpatialDilatedConvolution(nIn, nOut, kW, kH, dW, dH, padW, padH, dilationW, dilationH)
---------------------------------------------------------------------------------------------

local Dilated, DilatedParent = torch.class('nn.SpatialDilatedConvolution', 'nn.SpatialConvolution')

function Dilated:__init(nIn, nOut, kW, kH, dW, dH, padW, padH, dilationW, dilationH)
   DilatedParent.__init(self, nIn, nOut, kW, kH, dW, dH, padW, padH)
   self.dilationW = dilationW or 1
   self.dilationH = dilationH or 1
end

function Dilated:__tostring__()
   local s = conv_string(self) .. ', ' .. self.dilationW .. ',' .. self.dilationH
   return close_string(self, s)
end

---------------------------------------------------------------------------------------------
-- SpatialFullConvolution(nIn, nOut, kW, kH, dW, dH, padW, padH, adjW, adjH): the
-- transposed convolution. Output size (H - 1) * dH - 2 padH + kH + adjH. The input may be
-- {x, target}: adj is then chosen so the output matches target's last two sizes.
---------------------------------------------------------------------------------------------

local Full, FullParent = torch.class('nn.SpatialFullConvolution', 'nn.Module')

function Full:__init(nIn, nOut, kW, kH, dW, dH, padW, padH, adjW, adjH)
   conv_init(self, FullParent, nIn, nOut, kW, kH, dW, dH, padW, padH)
   self.padH = padH or 0
   self.adjW, self.adjH = adjW or 0, adjH or 0
   if self.adjW > self.dW - 1 or self.adjH > self.dH - 1 then
      U.raise(self, 'adjW and adjH must be smaller than dW - 1 and dH - 1 respectively ' ..
              '(got adj %d,%d, stride %d,%d)', self.adjW, self.adjH, self.dW, self.dH)
   end
   self.weight = torch.Tensor(nIn, nOut, kH, kW)
   self.bias = torch.Tensor(nOut)
   self.gradWeight = torch.Tensor(nIn, nOut, kH, kW):zero()
   self.gradBias = torch.Tensor(nOut):zero()
   self:reset()
end

Full.noBias = no_bias

function Full:reset(stdv)
   uniform_init(self, stdv, self.kW * self.kH * self.nInputPlane)
end

local function calc_adj(target, k, pad, stride)
   return (target + 2 * pad - k) % stride
end

function Full:updateOutput(input)
   back_compat(self)
   local x, adjW, adjH = input, self.adjW, self.adjH
   if type(input) == 'table' and not torch.isTensor(input) then
      x = input[1]
      local t = input[2]
      if not torch.isTensor(t) or t:dim() < 2 then
         U.raise(self, 'expected {input, targetTensor}, got a %s as target', U.describe(t))
      end
      local tH, tW = t:size(t:dim() - 1), t:size(t:dim())
      adjW = calc_adj(tW, self.kW, self.padW, self.dW)
      adjH = calc_adj(tH, self.kH, self.padH, self.dH)
   end
   U.check_input(self, x, spatial, 'a 3D (nInputPlane,H,W) or 4D (N,nInputPlane,H,W)')
   local d = x:dim()
   if x:size(d - 2) ~= self.nInputPlane then
      U.raise(self, 'expected %d input planes, got input of size %s', self.nInputPlane,
              U.describe(x))
   end
   local oH = (x:size(d - 1) - 1) * self.dH - 2 * self.padH + self.kH + adjH
   local oW = (x:size(d) - 1) * self.dW - 2 * self.padW + self.kW + adjW
   if oH < 1 or oW < 1 then
      U.raise(self, 'input of size %s gives an output of size %dx%d (padding %d,%d too large)',
              U.describe(x), oH, oW, self.padH, self.padW)
   end
   local w = self.weight
   if w:dim() ~= 4 then w = w:view(self.nInputPlane, self.nOutputPlane, self.kH, self.kW) end
   self.output = torch.conv_transpose2d(x, w, self.bias, {self.dH, self.dW},
                                        {self.padH, self.padW}, {adjH, adjW}, 1, 1)
   return self.output
end

function Full:__tostring__()
   local s = conv_string(self)
   if (self.adjW or self.adjH) and (self.adjW ~= 0 or self.adjH ~= 0) then
      s = s .. ', ' .. self.adjW .. ',' .. self.adjH
   end
   return close_string(self, s)
end

function Full:clearState()
   nn.utils.clear(self, 'finput', 'fgradInput', '_input', '_gradOutput')
   return FullParent.clearState(self)
end

---------------------------------------------------------------------------------------------
-- SpatialDepthWiseConvolution(nInputPlane, depthwiseMultiplier, kW, kH, dW, dH, padW, padH):
-- each input plane i is convolved with `mult` kernels of its own; output plane i*mult + m
-- (0-based) uses weight[m][i] and bias[m][i]; nOutputPlane = nInputPlane * mult.
-- Runs as a grouped convolution (groups = nInputPlane).
---------------------------------------------------------------------------------------------

local DW, DWParent = torch.class('nn.SpatialDepthWiseConvolution', 'nn.Module')
DW.__version = 2

function DW:__init(nIn, mult, kW, kH, dW, dH, padW, padH)
   conv_init(self, DWParent, nIn, mult, kW, kH, dW, dH, padW, padH)
   self.depthwiseMultiplier = mult
   self.nOutputPlane = nIn * mult
   self.weight = torch.Tensor(mult, nIn * kH * kW)
   self.bias = torch.Tensor(mult, nIn)
   self.gradWeight = torch.Tensor(mult, nIn * kH * kW):zero()
   self.gradBias = torch.Tensor(mult, nIn):zero()
   self:reset()
end

DW.noBias = no_bias

function DW:reset(stdv)
   uniform_init(self, stdv, self.kW * self.kH * self.nInputPlane)
end

function DW:updateOutput(input)
   back_compat(self)
   local nIn, mult = self.nInputPlane, self.depthwiseMultiplier
   check_spatial(self, input, nIn, self.kW, self.kH, self.dW, self.dH, self.padW, self.padH, 1, 1)
   -- (mult, nIn, kH, kW) -> (nIn, mult, kH, kW) -> (nIn*mult, 1, kH, kW): group i's kernels
   local w = self.weight:view(mult, nIn, self.kH, self.kW):transpose(1, 2):contiguous()
      :view(nIn * mult, 1, self.kH, self.kW)
   local b = self.bias and self.bias:t():contiguous():view(nIn * mult) or nil
   self.output = torch.conv2d(input, w, b, {self.dH, self.dW}, {self.padH, self.padW}, 1, nIn)
   return self.output
end

-- Version 1 files stored the multiplier as nOutputPlane.
function DW:read(file, version)
   local var = file:readObject()
   for k, v in pairs(var) do self[k] = v end
   if version < 2 then
      self.depthwiseMultiplier = self.nOutputPlane
      self.nOutputPlane = self.depthwiseMultiplier * self.nInputPlane
   end
end

function DW:__tostring__()
   return close_string(self, conv_string(self, self.depthwiseMultiplier))
end

function DW:clearState()
   nn.utils.clear(self, 'finput', 'fgradInput', '_input', '_gradOutput')
   return DWParent.clearState(self)
end
