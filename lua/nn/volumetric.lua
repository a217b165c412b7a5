-- nn/volumetric.lua -- Torch7's 3-D (volumetric) layers, composed from tocha's 2-D ops and
-- view ops so the autograd tape gives every backward (there is no 3-D kernel in core/):
--   VolumetricConvolution, VolumetricDilatedConvolution  ONE conv2d: the kT time taps are
--       stacked into the channel dim of (N*oT) frames (memory: kT copies of the input)
--   VolumetricFullConvolution     ONE conv_transpose2d with the kT taps as extra output
--       planes, then a 0/1 matrix product places each tap at its output time
--   VolumetricMaxPooling, VolumetricDilatedMaxPooling, VolumetricAveragePooling,
--   VolumetricFractionalMaxPooling  windows by unfold (a view) + max / sum over them
--       (memory: the window elements are copied once; fine for small kernels)
--   VolumetricMaxUnpooling, VolumetricReplicationPadding, VolumetricDropout
-- Torch7's argument order is time, width, height: (kT, kW, kH, dT, dW, dH, padT, padW,
-- padH). Inputs are (C, T, H, W) or (N, C, T, H, W). Max pooling `indices` are 1-based
-- positions in each T*H*W volume (Torch7 stored per-window offsets; only
-- VolumetricMaxUnpooling reads them).
local nn = ...
local torch = torch
local U = nn._layer_util -- loaded first by nn/init.lua

local describe = nn._describe
local zero_pad = nn._zeroPadDim
local unpack = unpack or table.unpack
local volumetric = {[4] = true, [5] = true}
local VOLUMETRIC = 'a 4D (C,T,H,W) or 5D (N,C,T,H,W)'

local positive = U.positive

local function as_batch(self, input, nIn) return U.as_batch(self, input, nIn, 3, volumetric, VOLUMETRIC) end

local function unbatch(y, batched)
   if batched then return y end
   return y:view(y:size(2), y:size(3), y:size(4), y:size(5))
end

-- positions start, start + step, ... (count of them) along dim, as a view or an index
local function strided(x, dim, start, step, count)
   if step == 1 then return x:narrow(dim, start, count) end
   local idx = torch.LongTensor(count)
   for i = 1, count do idx[i] = start + (i - 1) * step end
   return x:index(dim, idx)
end

---------------------------------------------------------------------------------------------
-- VolumetricConvolution(nInputPlane, nOutputPlane, kT, kW, kH, [dT], [dW], [dH], [padT],
-- [padW], [padH]); weight (nOut, nIn, kT, kH, kW), bias (nOut)
-- VolumetricDilatedConvolution(..., padH, dilationT, dilationW, dilationH)
---------------------------------------------------------------------------------------------
local VC, VCParent = torch.class('nn.VolumetricConvolution', 'nn.Module')

function VC:__init(nIn, nOut, kT, kW, kH, dT, dW, dH, padT, padW, padH)
   VCParent.__init(self)
   positive(self, nIn, nOut, kT, kW, kH, dT or 1, dW or 1, dH or 1)
   self.nInputPlane, self.nOutputPlane = nIn, nOut
   self.kT, self.kW, self.kH = kT, kW, kH
   self.dT, self.dW, self.dH = dT or 1, dW or 1, dH or 1
   self.padT, self.padW, self.padH = padT or 0, padW or 0, padH or 0
   self.weight = torch.Tensor(nOut, nIn, kT, kH, kW)
   self.bias = torch.Tensor(nOut)
   self.gradWeight = torch.Tensor(nOut, nIn, kT, kH, kW):zero()
   self.gradBias = torch.Tensor(nOut):zero()
   self:reset()
end

function VC:noBias()
   self.bias, self.gradBias = nil, nil
   return self
end

function VC:reset(stdv)
   if stdv then stdv = stdv * math.sqrt(3) else stdv = 1 / math.sqrt(self.kT * self.kW * self.kH * self.nInputPlane) end
   self.weight:uniform(-stdv, stdv)
   if self.bias then self.bias:uniform(-stdv, stdv) end
end

function VC:updateOutput(input)
   local x, batched = as_batch(self, input, self.nInputPlane)
   local dilT, dilW, dilH = self.dilationT or 1, self.dilationW or 1, self.dilationH or 1
   local N, C, T = x:size(1), x:size(2), x:size(3)
   local H, W = x:size(4), x:size(5)
   local function osize(n, k, d, pad, dil) return math.floor((n + 2 * pad - dil * (k - 1) - 1) / d) + 1 end
   local oT = osize(T, self.kT, self.dT, self.padT, dilT)
   local oH = osize(H, self.kH, self.dH, self.padH, dilH)
   local oW = osize(W, self.kW, self.dW, self.padW, dilW)
   if oT < 1 or oH < 1 or oW < 1 then
      U.raise(self, 'input of size %s is too small: a %dx%dx%d kernel gives output size %dx%dx%d',
              describe(input), self.kT, self.kH, self.kW, oT, oH, oW)
   end
   local nIn, nOut, kT = self.nInputPlane, self.nOutputPlane, self.kT
   x = zero_pad(x, 3, self.padT, self.padT)
   -- tap kt reads frames kt*dilT + t*dT: stack the taps as channels of (N*oT) frames
   local taps = {}
   for kt = 0, kT - 1 do taps[kt + 1] = strided(x, 3, 1 + kt * dilT, self.dT, oT) end
   local stacked = kT == 1 and taps[1] or torch.cat(taps, 2)            -- (N, kT*C, oT, H, W)
   local frames = stacked:transpose(2, 3):contiguous():view(N * oT, kT * C, H, W)
   local w = self.weight:view(nOut, nIn, kT, self.kH, self.kW):transpose(2, 3):contiguous()
      :view(nOut, kT * nIn, self.kH, self.kW)
   local y = torch.conv2d(frames, w, self.bias, {self.dH, self.dW}, {self.padH, self.padW},
                          {dilH, dilW}, 1)                               -- (N*oT, nOut, oH, oW)
   y = y:view(N, oT, nOut, oH, oW):transpose(2, 3)
   self.output = unbatch(y:contiguous(), batched)
   return self.output
end

function VC:__tostring__()
   local s = string.format('%s(%d -> %d, %dx%dx%d', torch.type(self), self.nInputPlane,
                           self.nOutputPlane, self.kT, self.kW, self.kH)
   if self.dT ~= 1 or self.dW ~= 1 or self.dH ~= 1 or self.padT ~= 0 or self.padW ~= 0 or self.padH ~= 0 then
      s = s .. string.format(', %d,%d,%d', self.dT, self.dW, self.dH)
   end
   if self.padT ~= 0 or self.padW ~= 0 or self.padH ~= 0 then
      s = s .. string.format(', %d,%d,%d', self.padT, self.padW, self.padH)
   end
   if self.dilationT then
      s = s .. string.format(', %d,%d,%d', self.dilationT, self.dilationW, self.dilationH)
   end
   return s .. (self.bias and ')' or ') without bias')
end

local VDC, VDCParent = torch.class('nn.VolumetricDilatedConvolution', 'nn.VolumetricConvolution')

function VDC:__init(nIn, nOut, kT, kW, kH, dT, dW, dH, padT, padW, padH, dilationT, dilationW, dilationH)
   VDCParent.__init(self, nIn, nOut, kT, kW, kH, dT, dW, dH, padT, padW, padH)
   self.dilationT, self.dilationW, self.dilationH = dilationT or 1, dilationW or 1, dilationH or 1
   positive(self, self.dilationT, self.dilationW, self.dilationH)
end

---------------------------------------------------------------------------------------------
-- VolumetricFullConvolution(nInputPlane, nOutputPlane, kT, kW, kH, [dT], [dW], [dH],
-- [padT], [padW], [padH], [adjT], [adjW], [adjH]): the transposed 3-D convolution;
-- weight (nIn, nOut, kT, kH, kW); output T' = (T - 1) dT - 2 padT + kT + adjT (same in H, W).
---------------------------------------------------------------------------------------------
local VFC, VFCParent = torch.class('nn.VolumetricFullConvolution', 'nn.Module')

function VFC:__init(nIn, nOut, kT, kW, kH, dT, dW, dH, padT, padW, padH, adjT, adjW, adjH)
   VFCParent.__init(self)
   positive(self, nIn, nOut, kT, kW, kH, dT or 1, dW or 1, dH or 1)
   self.nInputPlane, self.nOutputPlane = nIn, nOut
   self.kT, self.kW, self.kH = kT, kW, kH
   self.dT, self.dW, self.dH = dT or 1, dW or 1, dH or 1
   self.padT, self.padW, self.padH = padT or 0, padW or 0, padH or 0
   self.adjT, self.adjW, self.adjH = adjT or 0, adjW or 0, adjH or 0
   if self.adjT >= self.dT or self.adjW >= self.dW or self.adjH >= self.dH then
      U.raise(self, 'adjT, adjW, adjH must be smaller than dT, dW, dH (got adj %d,%d,%d, stride %d,%d,%d)',
              self.adjT, self.adjW, self.adjH, self.dT, self.dW, self.dH)
   end
   self.weight = torch.Tensor(nIn, nOut, kT, kH, kW)
   self.bias = torch.Tensor(nOut)
   self.gradWeight = torch.Tensor(nIn, nOut, kT, kH, kW):zero()
   self.gradBias = torch.Tensor(nOut):zero()
   self:reset()
end

VFC.noBias = VC.noBias
VFC.reset = VC.reset

function VFC:updateOutput(input)
   local x, batched = as_batch(self, input, self.nInputPlane)
   local N, T, H, W = x:size(1), x:size(3), x:size(4), x:size(5)
   local nIn, nOut, kT = self.nInputPlane, self.nOutputPlane, self.kT
   local oT = (T - 1) * self.dT - 2 * self.padT + kT + self.adjT
   local oH = (H - 1) * self.dH - 2 * self.padH + self.kH + self.adjH
   local oW = (W - 1) * self.dW - 2 * self.padW + self.kW + self.adjW
   if oT < 1 or oH < 1 or oW < 1 then
      U.raise(self, 'input of size %s gives an output of size %dx%dx%d (padding too large)',
              describe(input), oT, oH, oW)
   end
   -- every tap's spatial transposed convolution at once: (N*T, kT*nOut, oH, oW)
   local frames = x:transpose(2, 3):contiguous():view(N * T, nIn, H, W)
   local w = self.weight:view(nIn, nOut, kT, self.kH, self.kW):transpose(2, 3):contiguous()
      :view(nIn, kT * nOut, self.kH, self.kW)
   local y = torch.conv_transpose2d(frames, w, nil, {self.dH, self.dW}, {self.padH, self.padW},
                                    {self.adjH, self.adjW}, 1, 1)
   local rest = N * nOut * oH * oW
   -- rows (kt, t): tap kt of input frame t, which lands on output time t*dT + kt - padT
   y = y:view(N, T, kT, nOut, oH, oW):permute(3, 2, 1, 4, 5, 6):contiguous():view(kT * T, rest)
   local S = nn._no_grad(function() -- made on the host, moved to y's device
      local s = torch.DoubleTensor(oT, kT * T):zero()
      for kt = 0, kT - 1 do
         for t = 0, T - 1 do
            local o = t * self.dT + kt - self.padT
            if o >= 0 and o < oT then s[o + 1][kt * T + t + 1] = 1 end
         end
      end
      return U.as_like(s, y)
   end)
   local z = torch.mm(S, y):view(oT, N, nOut, oH, oW):permute(2, 3, 1, 4, 5)
   if self.bias then z = torch.add(z, self.bias:view(1, nOut, 1, 1, 1)) else z = z:contiguous() end
   self.output = unbatch(z, batched)
   return self.output
end

function VFC:__tostring__()
   return VC.__tostring__(self)
end

---------------------------------------------------------------------------------------------
-- Pooling windows
---------------------------------------------------------------------------------------------

-- pooled size along one dim (Torch7's rule; ceil mode keeps the last window starting
-- inside the input or its left padding)
local function pooled(n, k, d, pad, dil, ceil)
   local span = n + 2 * pad - dil * (k - 1) - 1
   local o = ceil and (math.ceil(span / d) + 1) or (math.floor(span / d) + 1)
   if ceil and (o - 1) * d >= n + pad then o = o - 1 end
   return o
end

-- x padded with `value` along dim (out of place)
local function const_pad(x, dim, before, after, value)
   if before == 0 and after == 0 then return x end
   local parts = {}
   local function filled(n)
      local s = x:size()
      s[dim] = n
      return x.new(s):fill(value)
   end
   if before > 0 then parts[#parts + 1] = filled(before) end
   parts[#parts + 1] = x
   if after > 0 then parts[#parts + 1] = filled(after) end
   return torch.cat(parts, dim)
end

-- The geometry of a 3-D pooling over (N, C, T, H, W): per dim (T, H, W) kernel, stride,
-- pad, dilation and output size; raises when the output would be empty.
local function geometry(self, x, input, dil)
   local g = {k = {self.kT, self.kH, self.kW}, d = {self.dT, self.dH, self.dW},
              pad = {self.padT or 0, self.padH or 0, self.padW or 0}, dil = dil or {1, 1, 1}, o = {}}
   for i = 1, 3 do
      if g.pad[i] * 2 > g.k[i] then
         U.raise(self, 'pad should be smaller than half of kernel size (kernel %dx%dx%d, pad %d,%d,%d)',
                 g.k[1], g.k[3], g.k[2], g.pad[1], g.pad[3], g.pad[2])
      end
      g.o[i] = pooled(x:size(i + 2), g.k[i], g.d[i], g.pad[i], g.dil[i], self.ceil_mode)
   end
   if g.o[1] < 1 or g.o[2] < 1 or g.o[3] < 1 then
      U.raise(self, 'input of size %s is too small for a %dx%dx%d window: output size %dx%dx%d',
              describe(input), g.k[1], g.k[2], g.k[3], g.o[1], g.o[2], g.o[3])
   end
   return g
end

-- Windows of x (N', C', T, H, W) padded with `value`: (N', C', oT, oH, oW, K), K = kT*kH*kW
local function windows(x, g, value)
   for i = 1, 3 do
      local dim, n = i + 2, x:size(i + 2)
      local span = g.dil[i] * (g.k[i] - 1) + 1
      local need = (g.o[i] - 1) * g.d[i] + span          -- covers the ceil-mode extra windows
      x = const_pad(x, dim, g.pad[i], math.max(0, need - n - g.pad[i]), value)
   end
   local w = x
   for i = 1, 3 do
      local span = g.dil[i] * (g.k[i] - 1) + 1
      w = w:unfold(i + 2, span, g.d[i]):narrow(i + 2, 1, g.o[i])
      if g.dil[i] > 1 then w = strided(w, w:dim(), 1, g.dil[i], g.k[i]) end
   end
   local s = {}
   for i = 1, 5 do s[i] = w:size(i) end
   s[6] = g.k[1] * g.k[2] * g.k[3]
   return w:contiguous():view(torch.LongStorage(s))
end

local function pool_string(self)
   local s = string.format('%s(%dx%dx%d, %d,%d,%d', torch.type(self), self.kT, self.kW, self.kH,
                           self.dT, self.dW, self.dH)
   if (self.padT or 0) ~= 0 or (self.padW or 0) ~= 0 or (self.padH or 0) ~= 0 then
      s = s .. string.format(', %d,%d,%d', self.padT, self.padW, self.padH)
   end
   return s
end

local function ceil(self) self.ceil_mode = true return self end
local function floor(self) self.ceil_mode = false return self end

local function pool_init(self, kT, kW, kH, dT, dW, dH, padT, padW, padH)
   positive(self, kT, kW, kH, dT or kT, dW or kW, dH or kH)
   self.kT, self.kW, self.kH = kT, kW, kH
   self.dT, self.dW, self.dH = dT or kT, dW or kW, dH or kH
   self.padT, self.padW, self.padH = padT or 0, padW or 0, padH or 0
   self.ceil_mode = false
end

---------------------------------------------------------------------------------------------
-- VolumetricMaxPooling(kT, kW, kH, [dT = kT], [dW = kW], [dH = kH], [padT], [padW], [padH])
-- VolumetricDilatedMaxPooling(kT, kW, kH, dT, dW, dH, padT, padW, padH, dilationT,
-- dilationW, dilationH); :ceil() / :floor()
---------------------------------------------------------------------------------------------
local VMP, VMPParent = torch.class('nn.VolumetricMaxPooling', 'nn.Module')

function VMP:__init(kT, kW, kH, dT, dW, dH, padT, padW, padH)
   VMPParent.__init(self)
   pool_init(self, kT, kW, kH, dT, dW, dH, padT, padW, padH)
   self.indices = torch.LongTensor()
end

VMP.ceil, VMP.floor = ceil, floor

function VMP:updateOutput(input)
   local x, batched = as_batch(self, input)
   local dil = {self.dilationT or 1, self.dilationH or 1, self.dilationW or 1}
   local g = geometry(self, x, input, dil)
   local N, C, T, H, W = x:size(1), x:size(2), x:size(3), x:size(4), x:size(5)
   self.itime, self.iheight, self.iwidth = T, H, W
   local y, arg = torch.max(windows(x, g, -math.huge), 6)
   local oT, oH, oW = g.o[1], g.o[2], g.o[3]
   -- each maximum's 1-based position in its T*H*W volume: the same windows over positions
   self.indices = nn._no_grad(function()
      local pos = windows(U.on_device_of(torch.range(1, T * H * W), x):view(1, 1, T, H, W), g, 0)
      return U.long_of(pos:expand(N, C, oT, oH, oW, pos:size(6)):gather(6, arg):view(N, C, oT, oH, oW))
   end)
   y = y:view(N, C, oT, oH, oW)
   if not batched then self.indices = self.indices:view(C, oT, oH, oW) end
   self.output = unbatch(y, batched)
   return self.output
end

function VMP:__tostring__()
   local s = pool_string(self)
   if self.dilationT then
      s = s .. string.format(', %d,%d,%d', self.dilationT, self.dilationW, self.dilationH)
   end
   return s .. ')'
end

function VMP:clearState()
   self.indices = torch.LongTensor()
   return VMPParent.clearState(self)
end

local VDMP, VDMPParent = torch.class('nn.VolumetricDilatedMaxPooling', 'nn.VolumetricMaxPooling')

function VDMP:__init(kT, kW, kH, dT, dW, dH, padT, padW, padH, dilationT, dilationW, dilationH)
   VDMPParent.__init(self, kT, kW, kH, dT, dW, dH, padT, padW, padH)
   self.dilationT, self.dilationW, self.dilationH = dilationT or 1, dilationW or 1, dilationH or 1
   positive(self, self.dilationT, self.dilationW, self.dilationH)
end

---------------------------------------------------------------------------------------------
-- VolumetricAveragePooling(kT, kW, kH, [dT = kT], [dW = kW], [dH = kH], [padT], [padW],
-- [padH]); :ceil() / :floor(), :setCountIncludePad() (the default: padded zeros count) /
-- :setCountExcludePad()
---------------------------------------------------------------------------------------------
local VAP, VAPParent = torch.class('nn.VolumetricAveragePooling', 'nn.Module')

function VAP:__init(kT, kW, kH, dT, dW, dH, padT, padW, padH)
   VAPParent.__init(self)
   pool_init(self, kT, kW, kH, dT, dW, dH, padT, padW, padH)
   self.count_include_pad = true
end

VAP.ceil, VAP.floor = ceil, floor
function VAP:setCountIncludePad() self.count_include_pad = true return self end
function VAP:setCountExcludePad() self.count_include_pad = false return self end

function VAP:updateOutput(input)
   local x, batched = as_batch(self, input)
   local g = geometry(self, x, input)
   local N, C, T, H, W = x:size(1), x:size(2), x:size(3), x:size(4), x:size(5)
   local sums = torch.sum(windows(x, g, 0), 6)
   -- divisor per output position: the window's elements inside the padded input
   -- (count_include_pad) or inside the input itself, counted over a mask
   local div = nn._no_grad(function()
      local mask = x.new(1, 1, T, H, W):fill(1)
      if self.count_include_pad then
         for i = 1, 3 do mask = const_pad(mask, i + 2, g.pad[i], g.pad[i], 1) end
         local g2 = {k = g.k, d = g.d, pad = {0, 0, 0}, dil = g.dil, o = g.o}
         return torch.sum(windows(mask, g2, 0), 6)
      end
      return torch.sum(windows(mask, g, 0), 6)
   end)
   local y = torch.cdiv(sums, div:expandAs(sums)):view(N, C, g.o[1], g.o[2], g.o[3])
   self.output = unbatch(y, batched)
   return self.output
end

function VAP:__tostring__()
   return pool_string(self) .. ')'
end

---------------------------------------------------------------------------------------------
-- VolumetricMaxUnpooling(poolingModule): puts each input value back where its maximum came
-- from in the given VolumetricMaxPooling's last forward (zeros elsewhere); output size =
-- that module's input size. A gather from [x, 0] with the inverse index map.
---------------------------------------------------------------------------------------------
local VMU, VMUParent = torch.class('nn.VolumetricMaxUnpooling', 'nn.Module')

function VMU:__init(poolingModule)
   VMUParent.__init(self)
   if not torch.isTypeOf(poolingModule, 'nn.VolumetricMaxPooling') then
      U.raise(self, 'argument must be a nn.VolumetricMaxPooling module, got %s',
              torch.typename(poolingModule) or type(poolingModule))
   end
   self.pooling = poolingModule
end

function VMU:setParams()
   self.indices = self.pooling.indices
   self.otime, self.oheight, self.owidth = self.pooling.itime, self.pooling.iheight, self.pooling.iwidth
end

function VMU:updateOutput(input)
   U.check_input(self, input, volumetric, VOLUMETRIC)
   self:setParams()
   local idx = self.indices
   if self.otime == nil or idx == nil or not idx:isSameSizeAs(input) then
      U.raise(self, 'input of size %s does not match the indices of the pooling module (%s); ' ..
              'run the pooling module forward first', describe(input), idx and describe(idx) or 'none')
   end
   local x = input
   local lead = {}
   for i = 1, x:dim() - 3 do lead[i] = x:size(i) end
   local nIn = x:size(x:dim() - 2) * x:size(x:dim() - 1) * x:size(x:dim())
   local nOut = self.otime * self.oheight * self.owidth
   local function sizes(...)
      local s = {unpack(lead)}
      for _, v in ipairs({...}) do s[#s + 1] = v end
      return torch.LongStorage(s)
   end
   local fd = #lead + 1
   local inv = nn._no_grad(function()
      local idxf = idx:contiguous():view(sizes(nIn))
      local r = U.long_of(idx).new():resize(sizes(nOut)):fill(nIn + 1) -- on idx's device
      local ones = {}
      for i = 1, #lead do ones[i] = 1 end
      ones[#ones + 1] = nIn
      local pos = U.on_device_of(torch.range(1, nIn):long():view(torch.LongStorage(ones)), r)
      r:scatter(fd, U.long_of(idxf), pos:expandAs(idxf):contiguous())
      return r
   end)
   local ext = torch.cat(x:contiguous():view(sizes(nIn)), U.zeros_like_type(x, sizes(1):totable()), fd)
   self.output = torch.gather(ext, fd, inv):view(sizes(self.otime, self.oheight, self.owidth))
   return self.output
end

function VMU:__tostring__()
   return 'nn.VolumetricMaxUnpooling associated to ' .. tostring(self.pooling)
end

---------------------------------------------------------------------------------------------
-- VolumetricReplicationPadding(pleft, [pright], [ptop], [pbottom], [pfront], [pback]):
-- pads W (left/right), H (top/bottom) and T (front/back) by repeating the border values.
---------------------------------------------------------------------------------------------
local VRP, VRPParent = torch.class('nn.VolumetricReplicationPadding', 'nn.Module')

function VRP:__init(pleft, pright, ptop, pbottom, pfront, pback)
   VRPParent.__init(self)
   if type(pleft) ~= 'number' then
      U.raise(self, 'expected padding sizes (pleft, [pright, ptop, pbottom, pfront, pback]), got %s', type(pleft))
   end
   self.pleft = pleft
   self.pright = pright or pleft
   self.ptop = ptop or pleft
   self.pbottom = pbottom or pleft
   self.pfront = pfront or pleft
   self.pback = pback or pleft
   for _, v in ipairs({self.pleft, self.pright, self.ptop, self.pbottom, self.pfront, self.pback}) do
      if v < 0 or v % 1 ~= 0 then U.raise(self, 'paddings must be non-negative integers, got %s', tostring(v)) end
   end
end

-- index list 1,1,...,1,2,...,n,n,...,n (before / after copies of the borders)
local function replicate(x, dim, before, after)
   if before == 0 and after == 0 then return x end
   local n = x:size(dim)
   local idx = torch.LongTensor(n + before + after)
   for i = 1, idx:size(1) do idx[i] = math.min(math.max(i - before, 1), n) end
   return x:index(dim, idx)
end

function VRP:updateOutput(input)
   U.check_input(self, input, volumetric, VOLUMETRIC)
   local d = input:dim()
   local y = replicate(input, d, self.pleft, self.pright)
   y = replicate(y, d - 1, self.ptop, self.pbottom)
   y = replicate(y, d - 2, self.pfront, self.pback)
   if y == input then y = input:clone() end
   self.output = y
   return y
end

function VRP:__tostring__()
   return string.format('%s(left=%d, right=%d, top=%d, bottom=%d, front=%d, back=%d)', torch.type(self),
                        self.pleft, self.pright, self.ptop, self.pbottom, self.pfront, self.pback)
end

---------------------------------------------------------------------------------------------
-- VolumetricDropout(p = 0.5, [stochasticInference]): drops whole (T, H, W) volumes; like
-- Torch7, no scaling in training and a (1 - p) scale at evaluation.
---------------------------------------------------------------------------------------------
local VD, VDParent = torch.class('nn.VolumetricDropout', 'nn.Module')

function VD:__init(p, stochasticInference)
   VDParent.__init(self)
   self.p = p or 0.5
   if type(self.p) ~= 'number' or self.p >= 1 or self.p < 0 then
      U.raise(self, 'p must be in [0, 1), got %s', tostring(self.p))
   end
   self.train = true
   self.stochastic_inference = stochasticInference or false
   self.noise = torch.Tensor()
end

function VD:updateOutput(input)
   U.check_input(self, input, volumetric, VOLUMETRIC)
   if self.train or self.stochastic_inference then
      local sz = input:size()
      for d = input:dim() - 2, input:dim() do sz[d] = 1 end
      self.noise = nn._no_grad(function() return input.new(sz):bernoulli(1 - self.p) end)
      self.output = torch.cmul(input, self.noise)
   else
      self.output = torch.mul(input, 1 - self.p)
   end
   return self.output
end

function VD:__tostring__()
   return string.format('%s(%f)', torch.type(self), self.p)
end

---------------------------------------------------------------------------------------------
-- VolumetricFractionalMaxPooling(poolSizeT, poolSizeW, poolSizeH, outT, outW, outH) or
-- (..., ratioT, ratioW, ratioH): SpatialFractionalMaxPooling in 3-D; randomSamples is
-- (N, C, 3) with one sample for T, W and H in that order.
---------------------------------------------------------------------------------------------
local VFMP, VFMPParent = torch.class('nn.VolumetricFractionalMaxPooling', 'nn.Module')

function VFMP:__init(poolSizeT, poolSizeW, poolSizeH, arg1, arg2, arg3)
   VFMPParent.__init(self)
   for _, v in ipairs({poolSizeT, poolSizeW, poolSizeH}) do
      if type(v) ~= 'number' or v < 2 then U.raise(self, 'pool sizes must be numbers >= 2, got %s', tostring(v)) end
   end
   for _, v in ipairs({arg1, arg2, arg3}) do
      if type(v) ~= 'number' then U.raise(self, 'expected output sizes or ratios, got %s', type(v)) end
   end
   self.poolSizeT, self.poolSizeW, self.poolSizeH = poolSizeT, poolSizeW, poolSizeH
   self.indices = torch.LongTensor()
   self.newRandomPool = false
   if arg1 >= 1 and arg2 >= 1 and arg3 >= 1 then
      self.outT, self.outW, self.outH = arg1, arg2, arg3
   else
      for _, v in ipairs({arg1, arg2, arg3}) do
         if not (v > 0 and v < 1) then U.raise(self, 'ratios must lie in (0, 1), got %g', v) end
      end
      self.ratioT, self.ratioW, self.ratioH = arg1, arg2, arg3
   end
end

VFMP.fixPoolingRegions = nn.SpatialFractionalMaxPooling.fixPoolingRegions
VFMP._samples = nn.SpatialFractionalMaxPooling._samples
VFMP.empty = nn.SpatialFractionalMaxPooling.empty

function VFMP:updateOutput(input)
   local x, batched = as_batch(self, input)
   local N, C, T, H, W = x:size(1), x:size(2), x:size(3), x:size(4), x:size(5)
   local oT, oW, oH = self.outT, self.outW, self.outH
   if self.ratioT then
      oT, oW, oH = math.floor(T * self.ratioT), math.floor(W * self.ratioW), math.floor(H * self.ratioH)
   end
   local pT, pW, pH = self.poolSizeT, self.poolSizeW, self.poolSizeH
   if oT < 1 or oW < 1 or oH < 1 or oT + pT - 1 > T or oH + pH - 1 > H or oW + pW - 1 > W then
      U.raise(self, 'input of size %s does not fit output %dx%dx%d with pool size %dx%dx%d',
              describe(input), oT, oH, oW, pT, pH, pW)
   end
   local samples = self:_samples(x, 3)
   if samples:isCuda() then samples = samples:double() end -- read on the host (SFMP's note)
   local intervals = nn._fractionalIntervals
   local idx = nn._no_grad(function()
      local ts, rs, cs = torch.LongTensor(N, C, oT), torch.LongTensor(N, C, oH), torch.LongTensor(N, C, oW)
      for n = 1, N do
         for c = 1, C do
            local st = intervals(samples[n][c][1], T, oT, pT)
            local sw = intervals(samples[n][c][2], W, oW, pW)
            local sh = intervals(samples[n][c][3], H, oH, pH)
            for i = 1, oT do ts[n][c][i] = st[i] end
            for i = 1, oH do rs[n][c][i] = sh[i] end
            for i = 1, oW do cs[n][c][i] = sw[i] end
         end
      end
      local dt = torch.range(0, pT - 1):long():view(1, 1, 1, 1, 1, pT, 1, 1)
      local di = torch.range(0, pH - 1):long():view(1, 1, 1, 1, 1, 1, pH, 1)
      local dj = torch.range(0, pW - 1):long():view(1, 1, 1, 1, 1, 1, 1, pW)
      local t = torch.add(ts:view(N, C, oT, 1, 1, 1, 1, 1), dt):mul(H * W)
      local r = torch.add(rs:view(N, C, 1, oH, 1, 1, 1, 1), di):mul(W)
      local c = torch.add(cs:view(N, C, 1, 1, oW, 1, 1, 1), dj)
      return U.on_device_of(torch.add(torch.add(t, r), c):view(N, C, -1):add(1), x)
   end)
   local K = pT * pH * pW
   local win = x:contiguous():view(N, C, T * H * W):gather(3, idx):view(N, C, oT, oH, oW, K)
   local y, arg = torch.max(win, 6)
   self.indices = nn._no_grad(function()
      return idx:view(N, C, oT, oH, oW, K):gather(6, arg):view(N, C, oT, oH, oW)
   end)
   if not batched then self.indices = self.indices:view(C, oT, oH, oW) end
   self.output = unbatch(y:view(N, C, oT, oH, oW), batched)
   return self.output
end

function VFMP:__tostring__()
   return string.format('%s(%s,%s,%s,%d,%d,%d)', torch.type(self), tostring(self.outT or self.ratioT),
                        tostring(self.outW or self.ratioW), tostring(self.outH or self.ratioH),
                        self.poolSizeT, self.poolSizeW, self.poolSizeH)
end
