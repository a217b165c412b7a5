-- nn/pooling.lua -- Torch7's 2-D pooling modules on torch.max_pool2d / avg_pool2d /
-- adaptive_*_pool2d (C kernels with gradient rules), plus max unpooling and Lp pooling.
--
-- Torch7 argument order: (kW, kH, dW, dH, padW, padH); the ops take (h, w) pairs.
-- Input: (C, H, W) or (N, C, H, W). Max pooling keeps Torch7's `indices` field: 1-based
-- positions in each input plane (H*W), which SpatialMaxUnpooling reads.
local nn = ...
local torch = torch
local U = nn._layer_util

local spatial, SPATIAL = U.spatial, U.SPATIAL

-- Pooled size along one dim (Torch7/PyTorch rule: in ceil mode the last window must start
-- inside the input or its left padding).
local function pooled(n, k, d, pad, dil, ceil)
   local span = n + 2 * pad - dil * (k - 1) - 1
   local o
   if ceil then o = math.ceil(span / d) + 1 else o = math.floor(span / d) + 1 end
   if ceil and (o - 1) * d >= n + pad then o = o - 1 end
   return o
end

-- Checks kernel/stride/padding and that the output is not empty.
local function check_pool(self, input, dilW, dilH)
   U.check_input(self, input, spatial, SPATIAL)
   if self.kW < 1 or self.kH < 1 or self.dW < 1 or self.dH < 1 then
      U.raise(self, 'kernel %dx%d and stride %d,%d must be positive', self.kW, self.kH, self.dW,
              self.dH)
   end
   if self.padW * 2 > self.kW or self.padH * 2 > self.kH then
      U.raise(self, 'pad should be smaller than half of kernel size (kernel %dx%d, pad %d,%d)',
              self.kW, self.kH, self.padW, self.padH)
   end
   local d = input:dim()
   local oH = pooled(input:size(d - 1), self.kH, self.dH, self.padH, dilH, self.ceil_mode)
   local oW = pooled(input:size(d), self.kW, self.dW, self.padW, dilW, self.ceil_mode)
   if oH < 1 or oW < 1 then
      U.raise(self, 'input of size %s is too small for a %dx%d window (padding %d,%d): output ' ..
              'size %dx%d', U.describe(input), self.kW, self.kH, self.padW, self.padH, oW, oH)
   end
end

local function pool_string(self)
   local s = string.format('%s(%dx%d, %d,%d', torch.type(self), self.kW, self.kH, self.dW, self.dH)
   if (self.padW or self.padH) and (self.padW ~= 0 or self.padH ~= 0) then
      s = s .. ', ' .. self.padW .. ',' .. self.padH
   end
   return s
end

local function ceil(self) self.ceil_mode = true return self end
local function floor(self) self.ceil_mode = false return self end

---------------------------------------------------------------------------------------------
-- SpatialMaxPooling(kW, kH, [dW = kW], [dH = kH], [padW], [padH]); :ceil() / :floor()
---------------------------------------------------------------------------------------------

local MaxPool, MaxPoolParent = torch.class('nn.SpatialMaxPooling', 'nn.Module')

function MaxPool:__init(kW, kH, dW, dH, padW, padH)
   MaxPoolParent.__init(self)
   if type(kW) ~= 'number' or type(kH) ~= 'number' then
      U.raise(self, 'expected the kernel size (kW, kH), got %s, %s', type(kW), type(kH))
   end
   self.kW, self.kH = kW, kH
   self.dW, self.dH = dW or kW, dH or kH
   self.padW, self.padH = padW or 0, padH or 0
   self.ceil_mode = false
   self.indices = torch.LongTensor()
end

MaxPool.ceil, MaxPool.floor = ceil, floor

function MaxPool:updateOutput(input)
   self.padW, self.padH = self.padW or 0, self.padH or 0
   local dilW, dilH = self.dilationW or 1, self.dilationH or 1
   check_pool(self, input, dilW, dilH)
   local d = input:dim()
   self.iheight, self.iwidth = input:size(d - 1), input:size(d)
   self.output, self.indices = torch.max_pool2d(input, {self.kH, self.kW}, {self.dH, self.dW},
                                                {self.padH, self.padW}, {dilH, dilW},
                                                self.ceil_mode)
   return self.output
end

function MaxPool:__tostring__()
   return pool_string(self) .. ')'
end

function MaxPool:clearState()
   if self.indices then self.indices = torch.LongTensor() end
   return MaxPoolParent.clearState(self)
end

-- SpatialDilatedMaxPooling(kW, kH, dW, dH, padW, padH, dilationW, dilationH)
local DMaxPool, DMaxPoolParent = torch.class('nn.SpatialDilatedMaxPooling', 'nn.SpatialMaxPooling')

function DMaxPool:__init(kW, kH, dW, dH, padW, padH, dilationW, dilationH)
   DMaxPoolParent.__init(self, kW, kH, dW, dH, padW, padH)
   self.dilationW, self.dilationH = dilationW or 1, dilationH or 1
end

function DMaxPool:__tostring__()
   return pool_string(self) .. ', ' .. self.dilationW .. ',' .. self.dilationH .. ')'
end

---------------------------------------------------------------------------------------------
-- SpatialAveragePooling(kW, kH, [dW = 1], [dH = 1], [padW], [padH]); :ceil() / :floor(),
-- :setCountIncludePad() (Torch7's default: padded zeros count in the divisor) /
-- :setCountExcludePad(). A file with divide = false (old Torch7) gives window sums.
---------------------------------------------------------------------------------------------

local AvgPool, AvgPoolParent = torch.class('nn.SpatialAveragePooling', 'nn.Module')

function AvgPool:__init(kW, kH, dW, dH, padW, padH)
   AvgPoolParent.__init(self)
   if type(kW) ~= 'number' or type(kH) ~= 'number' then
      U.raise(self, 'expected the kernel size (kW, kH), got %s, %s', type(kW), type(kH))
   end
   self.kW, self.kH = kW, kH
   self.dW, self.dH = dW or 1, dH or 1
   self.padW, self.padH = padW or 0, padH or 0
   self.ceil_mode = false
   self.count_include_pad = true
   self.divide = true
end

AvgPool.ceil, AvgPool.floor = ceil, floor
function AvgPool:setCountIncludePad() self.count_include_pad = true return self end
function AvgPool:setCountExcludePad() self.count_include_pad = false return self end

function AvgPool:updateOutput(input)
   self.padW, self.padH = self.padW or 0, self.padH or 0
   if self.count_include_pad == nil then self.count_include_pad = true end
   check_pool(self, input, 1, 1)
   local y = torch.avg_pool2d(input, {self.kH, self.kW}, {self.dH, self.dW}, {self.padH, self.padW},
                              self.ceil_mode, self.count_include_pad)
   if self.divide == false then y = y * (self.kW * self.kH) end
   self.output = y
   return y
end

function AvgPool:__tostring__()
   return pool_string(self) .. ')'
end

---------------------------------------------------------------------------------------------
-- SpatialAdaptiveMaxPooling(W, H) / SpatialAdaptiveAveragePooling(W, H): output H x W
-- whatever the input size (Torch7: width first).
---------------------------------------------------------------------------------------------

local function adaptive(name, op, keep_indices)
   local C, parent = torch.class('nn.' .. name, 'nn.Module')
   function C:__init(W, H)
      parent.__init(self)
      if type(W) ~= 'number' or type(H) ~= 'number' or W < 1 or H < 1 then
         U.raise(self, 'expected positive output sizes (W, H), got %s, %s', tostring(W),
                 tostring(H))
      end
      self.W, self.H = W, H
      if keep_indices then self.indices = torch.LongTensor() end
   end
   function C:updateOutput(input)
      U.check_input(self, input, spatial, SPATIAL)
      local d = input:dim()
      if input:size(d - 1) < 1 or input:size(d) < 1 then
         U.raise(self, 'empty input planes (size %s)', U.describe(input))
      end
      if keep_indices then
         self.output, self.indices = op(input, {self.H, self.W})
      else
         self.output = op(input, {self.H, self.W})
      end
      return self.output
   end
   function C:__tostring__()
      return string.format('%s(%dx%d)', torch.type(self), self.W, self.H)
   end
   return C
end

adaptive('SpatialAdaptiveMaxPooling', function(...) return torch.adaptive_max_pool2d(...) end, true)
adaptive('SpatialAdaptiveAveragePooling', function(...) return torch.adaptive_avg_pool2d(...) end)

---------------------------------------------------------------------------------------------
-- SpatialMaxUnpooling(poolingModule): the inverse of a SpatialMaxPooling, from its
-- indices: each input value goes back to where its maximum came from, zeros elsewhere;
-- output size = the pooling module's last input size.
-- Written as a gather from [x, 0] with an inverse map (output position -> input position,
-- or the extra zero), so the tape sees one out-of-place, differentiable op.
---------------------------------------------------------------------------------------------

local Unpool, UnpoolParent = torch.class('nn.SpatialMaxUnpooling', 'nn.Module')

function Unpool:__init(poolingModule)
   UnpoolParent.__init(self)
   if torch.typename(poolingModule) ~= 'nn.SpatialMaxPooling' then
      U.raise(self, 'argument must be a nn.SpatialMaxPooling module, got %s',
              torch.typename(poolingModule) or type(poolingModule))
   end
   if poolingModule.kH ~= poolingModule.dH or poolingModule.kW ~= poolingModule.dW then
      U.raise(self, 'the pooling module must have kW == dW and kH == dH (got %dx%d, %d,%d)',
              poolingModule.kW, poolingModule.kH, poolingModule.dW, poolingModule.dH)
   end
   self.pooling = poolingModule
end

function Unpool:setParams()
   self.indices = self.pooling.indices
   self.oheight = self.pooling.iheight
   self.owidth = self.pooling.iwidth
end

function Unpool:updateOutput(input)
   U.check_input(self, input, spatial, SPATIAL)
   self:setParams()
   local idx = self.indices
   if self.oheight == nil or idx == nil or not idx:isSameSizeAs(input) then
      U.raise(self, 'input of size %s does not match the indices of the pooling module (%s); ' ..
              'run the pooling module forward first', U.describe(input),
              idx and U.describe(idx) or 'none')
   end
   local d = input:dim()
   local fd = d - 1                      -- the flattened plane dim
   local n_in = input:size(d - 1) * input:size(d)
   local n_out = self.oheight * self.owidth
   local function sizes(...)             -- the leading (batch, plane) sizes, then ...
      local s = {}
      for i = 1, d - 2 do s[i] = input:size(i) end
      for _, v in ipairs({...}) do s[#s + 1] = v end
      return torch.LongStorage(s)
   end
   -- inv[..., p] = the input position whose maximum came from output position p, or
   -- n_in + 1 (the appended zero)
   local inv = nn._no_grad(function()
      local idxf = idx:contiguous():view(sizes(n_in))
      local r = U.long_of(idx).new():resize(sizes(n_out)):fill(n_in + 1) -- on idx's device
      local ones = {}
      for i = 1, d - 2 do ones[i] = 1 end
      ones[#ones + 1] = n_in
      local pos = U.on_device_of(torch.range(1, n_in):long():view(torch.LongStorage(ones)), r)
      r:scatter(fd, U.long_of(idxf), pos:expandAs(idxf):contiguous())
      return r
   end)
   local xf = input:contiguous():view(sizes(n_in))
   local ext = torch.cat(xf, U.zeros_like_type(input, sizes(1):totable()), fd)
   self.output = torch.gather(ext, fd, inv):view(sizes(self.oheight, self.owidth))
   return self.output
end

function Unpool:__tostring__()
   return 'nn.SpatialMaxUnpooling associated to ' .. tostring(self.pooling)
end

---------------------------------------------------------------------------------------------
-- SpatialLPPooling(nInputPlane, pnorm, kW, kH, [dW = kW], [dH = kH]):
--   y = (sum over the window of x^p)^(1/p)      (Torch7: no abs, like its Power module)
---------------------------------------------------------------------------------------------

local LP, LPParent = torch.class('nn.SpatialLPPooling', 'nn.Module')

function LP:__init(nInputPlane, pnorm, kW, kH, dW, dH)
   LPParent.__init(self)
   if type(pnorm) ~= 'number' or pnorm <= 0 then
      U.raise(self, 'pnorm must be a positive number, got %s', tostring(pnorm))
   end
   self.nInputPlane, self.pnorm = nInputPlane, pnorm
   self.kW, self.kH = kW, kH
   self.dW, self.dH = dW or kW, dH or kH
   self.padW, self.padH = 0, 0
   self.ceil_mode = false
end

function LP:updateOutput(input)
   check_pool(self, input, 1, 1)
   local d = input:dim()
   if self.nInputPlane and input:size(d - 2) ~= self.nInputPlane then
      U.raise(self, 'expected %d input planes, got input of size %s', self.nInputPlane,
              U.describe(input))
   end
   local p = self.pnorm
   local xp = p == 2 and torch.cmul(input, input) or torch.pow(input, p)
   local s = torch.avg_pool2d(xp, {self.kH, self.kW}, {self.dH, self.dW}, 0, false, true)
      * (self.kW * self.kH)
   self.output = p == 2 and torch.sqrt(s) or torch.pow(s, 1 / p)
   return self.output
end

function LP:__tostring__()
   return string.format('%s(%d, %g, %dx%d, %d,%d)', torch.type(self), self.nInputPlane or 0,
                        self.pnorm, self.kW, self.kH, self.dW, self.dH)
end
