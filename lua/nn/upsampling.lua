-- nn/upsampling.lua -- Torch7's spatial up-sampling: nearest neighbour, bilinear
-- (Torch7's align-corners grid) and PixelShuffle. Input (C, H, W) or (N, C, H, W).
--
-- Nearest is an index_select per spatial dim; bilinear is two matrix products with
-- interpolation matrices (oH x H and oW x W, at most two non-zeros per row), so the
-- forward is a handful of differentiable ops and the backward is their transposes.
local nn = ...
local torch = torch
local U = nn._layer_util

local spatial, SPATIAL = U.spatial, U.SPATIAL

local function check_scale(self, s)
   if type(s) ~= 'number' or s < 1 or s % 1 ~= 0 then
      U.raise(self, 'scale_factor must be an integer >= 1, got %s', tostring(s))
   end
end

---------------------------------------------------------------------------------------------
-- SpatialUpSamplingNearest(scale): (H, W) -> (H*scale, W*scale), y[i][j] = x[i/s][j/s]
---------------------------------------------------------------------------------------------

local Nearest, NearestParent = torch.class('nn.SpatialUpSamplingNearest', 'nn.Module')

function Nearest:__init(scale)
   NearestParent.__init(self)
   check_scale(self, scale)
   self.scale_factor = scale
end

local function repeat_index(n, s)
   local idx = {}
   for i = 0, n * s - 1 do idx[i + 1] = math.floor(i / s) + 1 end
   return U.long(idx)
end

function Nearest:updateOutput(input)
   U.check_input(self, input, spatial, SPATIAL)
   local d, s = input:dim(), self.scale_factor
   local y = input:index(d, repeat_index(input:size(d), s))
   y = y:index(d - 1, repeat_index(input:size(d - 1), s))
   self.output = y
   return y
end

function Nearest:__tostring__()
   return string.format('%s(%d)', torch.type(self), self.scale_factor)
end

---------------------------------------------------------------------------------------------
-- SpatialUpSamplingBilinear(scale | {oheight=, owidth=}): Torch7's output size
-- (H - 1) * scale + 1 for a scale, source coordinate i * (H - 1) / (oH - 1) (corners
-- aligned), linear weights between the two nearest input pixels.
---------------------------------------------------------------------------------------------

local Bilinear, BilinearParent = torch.class('nn.SpatialUpSamplingBilinear', 'nn.Module')

function Bilinear:__init(params)
   BilinearParent.__init(self)
   if type(params) == 'table' then
      if type(params.oheight) ~= 'number' or type(params.owidth) ~= 'number'
         or params.oheight < 1 or params.owidth < 1 then
         U.raise(self, 'expected a scale factor or {oheight=, owidth=} with positive sizes')
      end
      self.oheight, self.owidth = params.oheight, params.owidth
   else
      check_scale(self, params)
      self.scale_factor = params
   end
end

-- (out, n) interpolation matrix of type like x (made on the host, then moved to x's
-- device): row i mixes source pixels floor(c), +1.
local function interp_matrix(x, n, out)
   local m = torch.DoubleTensor(out, n):zero()
   local r = out > 1 and (n - 1) / (out - 1) or 0
   for i = 0, out - 1 do
      local c = r * i
      local i0 = math.floor(c)
      if i0 > n - 1 then i0 = n - 1 end
      local i1 = (i0 < n - 1) and i0 + 1 or i0
      local l1 = c - i0
      m[i + 1][i0 + 1] = m[i + 1][i0 + 1] + (1 - l1)
      m[i + 1][i1 + 1] = m[i + 1][i1 + 1] + l1
   end
   return U.as_like(m, x)
end

function Bilinear:updateOutput(input)
   U.check_input(self, input, spatial, SPATIAL)
   local d = input:dim()
   local H, W = input:size(d - 1), input:size(d)
   local oH, oW = self.oheight, self.owidth
   if self.scale_factor then
      oH = (H - 1) * self.scale_factor + 1
      oW = (W - 1) * self.scale_factor + 1
   end
   local B = input:nElement() / (H * W)
   local Ah = nn._no_grad(interp_matrix, input, H, oH)
   local Aw = nn._no_grad(interp_matrix, input, W, oW)
   -- (B*H, W) x (W, oW) -> (B, H, oW) -> (B, oW, H) -> (B*oW, H) x (H, oH) -> (B, oW, oH)
   local y = torch.mm(input:contiguous():view(B * H, W), Aw:t())
   y = y:view(B, H, oW):transpose(2, 3):contiguous():view(B * oW, H)
   y = torch.mm(y, Ah:t()):view(B, oW, oH):transpose(2, 3):contiguous()
   local sizes = U.sizes(input)
   sizes[d - 1], sizes[d] = oH, oW
   self.output = y:view(torch.LongStorage(sizes))
   return self.output
end

function Bilinear:__tostring__()
   if self.scale_factor then
      return string.format('%s(%d)', torch.type(self), self.scale_factor)
   end
   return string.format('%s(%dx%d)', torch.type(self), self.oheight, self.owidth)
end

---------------------------------------------------------------------------------------------
-- PixelShuffle(r): (N, C*r*r, H, W) -> (N, C, H*r, W*r),
--   y[n][c][h*r + i][w*r + j] = x[n][c*r*r + i*r + j][h][w]
---------------------------------------------------------------------------------------------

local PS, PSParent = torch.class('nn.PixelShuffle', 'nn.Module')

function PS:__init(upscaleFactor)
   PSParent.__init(self)
   check_scale(self, upscaleFactor)
   self.upscaleFactor = upscaleFactor
   self.upscaleFactorSquared = upscaleFactor * upscaleFactor
end

function PS:updateOutput(input)
   U.check_input(self, input, spatial, SPATIAL)
   local batched = input:dim() == 4
   local x = batched and input or input:view(1, input:size(1), input:size(2), input:size(3))
   local r, r2 = self.upscaleFactor, self.upscaleFactorSquared
   local N, Cr, H, W = x:size(1), x:size(2), x:size(3), x:size(4)
   if Cr % r2 ~= 0 then
      U.raise(self, 'the number of input planes (%d) must be divisible by upscaleFactor^2 = %d ' ..
              '(input size %s)', Cr, r2, U.describe(input))
   end
   local C = Cr / r2
   local y = x:contiguous():view(torch.LongStorage{N, C, r, r, H, W}):permute(1, 2, 5, 3, 6, 4)
      :contiguous():view(N, C, H * r, W * r)
   if not batched then y = y:view(C, H * r, W * r) end
   self.output = y
   return y
end
