-- nn/padding.lua -- Torch7's spatial padding modules: zero (negative pads crop),
-- reflection and replication. Input (C, H, W) or (N, C, H, W); pads (left, right, top,
-- bottom) act on W (last dim) and H (the one before).
--
-- Zero padding is narrow + cat with zeros; reflection and replication are one index
-- (index_select) per padded dim with a precomputed index list, so the tape sees ordinary
-- differentiable ops (the gradient of index_select adds the reflected borders back).
local nn = ...
local torch = torch
local U = nn._layer_util

local spatial, SPATIAL = U.spatial, U.SPATIAL

local function init_pads(self, pad_l, pad_r, pad_t, pad_b)
   if type(pad_l) ~= 'number' then
      U.raise(self, 'expected padding sizes (pad_l, [pad_r, pad_t, pad_b]), got %s', type(pad_l))
   end
   self.pad_l = pad_l
   self.pad_r = pad_r or pad_l
   self.pad_t = pad_t or pad_l
   self.pad_b = pad_b or pad_l
end

local function pad_string(self)
   return string.format('%s(l=%d, r=%d, t=%d, b=%d)', torch.type(self), self.pad_l, self.pad_r,
                        self.pad_t, self.pad_b)
end

-- Checks the input and that the padded planes are not empty; returns H, W and the dims.
local function check(self, input)
   U.check_input(self, input, spatial, SPATIAL)
   local d = input:dim()
   local H, W = input:size(d - 1), input:size(d)
   local oH = H + self.pad_t + self.pad_b
   local oW = W + self.pad_l + self.pad_r
   if oH < 1 or oW < 1 then
      U.raise(self, 'input of size %s is too small for padding l=%d, r=%d, t=%d, b=%d ' ..
              '(output %dx%d)', U.describe(input), self.pad_l, self.pad_r, self.pad_t,
              self.pad_b, oH, oW)
   end
   return H, W, d - 1, d
end

---------------------------------------------------------------------------------------------
-- SpatialZeroPadding(pad_l, [pad_r], [pad_t], [pad_b])
---------------------------------------------------------------------------------------------

local Zero, ZeroParent = torch.class('nn.SpatialZeroPadding', 'nn.Module')

function Zero:__init(pad_l, pad_r, pad_t, pad_b)
   ZeroParent.__init(self)
   init_pads(self, pad_l, pad_r, pad_t, pad_b)
end

-- x padded (or cropped, negative pads) by before/after along dim
local function zero_pad(x, dim, before, after)
   if before < 0 then x = x:narrow(dim, 1 - before, x:size(dim) + before) end
   if after < 0 then x = x:narrow(dim, 1, x:size(dim) + after) end
   if before <= 0 and after <= 0 then return x end
   local parts = {}
   local s = U.sizes(x)
   if before > 0 then s[dim] = before; parts[#parts + 1] = U.zeros_like_type(x, s) end
   parts[#parts + 1] = x
   if after > 0 then s[dim] = after; parts[#parts + 1] = U.zeros_like_type(x, s) end
   return torch.cat(parts, dim)
end

function Zero:updateOutput(input)
   local _, _, hd, wd = check(self, input)
   local y = zero_pad(input, wd, self.pad_l, self.pad_r)
   y = zero_pad(y, hd, self.pad_t, self.pad_b)
   if rawequal(y, input) then y = y:clone() end
   self.output = y
   return y
end

Zero.__tostring__ = pad_string

---------------------------------------------------------------------------------------------
-- SpatialReflectionPadding / SpatialReplicationPadding(pad_l, pad_r, pad_t, pad_b)
---------------------------------------------------------------------------------------------

-- 1-based source indices for output positions -before .. n-1+after (0-based), by `map`.
local function index_list(n, before, after, map)
   local idx = {}
   for j = -before, n - 1 + after do idx[#idx + 1] = map(j, n) + 1 end
   return U.long(idx)
end

local function reflect(j, n)
   if j < 0 then return -j end
   if j >= n then return 2 * (n - 1) - j end
   return j
end

local function replicate(j, n)
   if j < 0 then return 0 end
   if j >= n then return n - 1 end
   return j
end

local function indexed_padding(name, map, check_extra)
   local C, parent = torch.class('nn.' .. name, 'nn.Module')
   function C:__init(pad_l, pad_r, pad_t, pad_b)
      parent.__init(self)
      init_pads(self, pad_l, pad_r, pad_t, pad_b)
   end
   function C:updateOutput(input)
      local H, W, hd, wd = check(self, input)
      if check_extra then check_extra(self, input, H, W) end
      local y = input
      if self.pad_l ~= 0 or self.pad_r ~= 0 then
         y = y:index(wd, index_list(W, self.pad_l, self.pad_r, map))
      end
      if self.pad_t ~= 0 or self.pad_b ~= 0 then
         y = y:index(hd, index_list(H, self.pad_t, self.pad_b, map))
      end
      if rawequal(y, input) then y = y:clone() end
      self.output = y
      return y
   end
   C.__tostring__ = pad_string
   return C
end

-- Reflection mirrors without repeating the border, so each pad must be < that dim's size.
indexed_padding('SpatialReflectionPadding', reflect, function(self, input, H, W)
   if self.pad_l >= W or self.pad_r >= W or self.pad_t >= H or self.pad_b >= H then
      U.raise(self, 'padding l=%d, r=%d, t=%d, b=%d must be smaller than the input planes ' ..
              '(input size %s)', self.pad_l, self.pad_r, self.pad_t, self.pad_b,
              U.describe(input))
   end
end)
indexed_padding('SpatialReplicationPadding', replicate)
