-- torch/math_conv.lua -- Torch7's signal functions conv2 xcorr2 conv3 xcorr3, composed
-- from views and products (no kernel of their own): the input is unfolded into patches
-- (a strided view, copied once to make it contiguous) and multiplied with the kernel.
-- 'V' (valid, the default) gives an output of size in - k + 1 per spatial dim; 'F' (full)
-- pads the input with k - 1 zeros on each side, giving in + k - 1. conv flips the kernel
-- (through a negative-stride view), xcorr does not. Loaded by math.lua.
--
-- With S spatial dims (2 or 3), the shapes Torch7 accepted:
--   x (D1..DS)      k (K1..KS)        -> (O1..OS)        one image, one kernel
--   x (p, D1..DS)   k (p, K1..KS)     -> (p, O1..OS)     each plane with its own kernel
--   x (p, D1..DS)   k (q, p, K1..KS)  -> (q, O1..OS)     sum over p (a matrix-vector product)
-- torch.conv2([res,] x, k [, 'V' or 'F']); x:conv2(k [, mode]) allocates as well.
local torch = ...
local C = torch._C
local M = torch._math
local methods = torch._methods
local IN, P = torch._IN, torch._P
local isT, tp, describe = M.isT, M.tp, M.describe
local run = M.run

local function unfold(t, d0, size, level)
   P.i[0], P.i[1], P.i[2] = d0, size, 1
   IN[0] = t.p
   local r = run(C.TC_OP_UNFOLD, 1, nil, level + 1)
   return r
end

local function permute(t, perm, level)
   P.nshape = #perm
   for i = 1, #perm do P.shape[i - 1] = perm[i] end
   IN[0] = t.p
   local r = run(C.TC_OP_PERMUTE, 1, nil, level + 1)
   return r
end

-- The kernel with its last S dims reversed (a contiguous copy).
local function flip(k, S, level)
   local kc = M.contiguous(k, level + 1)
   local p = kc.p
   local nd = p.ndim
   local sizes, strides, offset = M.sizes_of(kc), {}, tonumber(p.offset)
   for d = 0, nd - 1 do
      local st = tonumber(p.stride[d])
      if d >= nd - S then
         offset = offset + (sizes[d + 1] - 1) * st
         st = -st
      end
      strides[d + 1] = st
   end
   local r = M.copy_new(M.as_strided(kc, sizes, strides, offset, level + 1), -1, level + 1)
   return r
end

-- x padded with k - 1 zeros on each side of its last S dims.
local function pad_full(x, ks, S, level)
   local lv = level + 1
   local sizes = M.sizes_of(x)
   local nd = #sizes
   for i = 1, S do
      local d = nd - S + i
      sizes[d] = sizes[d] + 2 * (ks[i] - 1)
   end
   local padded = M.fill(M.new_tensor(x.p.dtype, sizes, lv), 0, lv)
   local inner = padded
   for i = 1, S do
      local d0 = nd - S + i - 1
      inner = M.narrow(inner, d0, ks[i] - 1, tonumber(x.p.size[d0]), lv)
   end
   M.copy_into(inner, x, lv)
   return padded
end

local function product(n)
   local r = 1
   for i = 1, #n do r = r * n[i] end
   return r
end

-- res (or a new tensor) = the S-dim convolution (flipped = true) or cross-correlation.
local function conv_into(name, S, flipped, res, x, k, mode, level)
   local lv = level + 1
   mode = mode or 'V'
   if mode ~= 'V' and mode ~= 'F' then
      M.argerror(name, "mode must be 'V' (valid) or 'F' (full), got " .. tostring(mode), lv)
   end
   local xd, kd = x.p.ndim, k.p.ndim
   local case
   if xd == S and kd == S then
      case = 'single'
   elseif xd == S + 1 and kd == S + 1 then
      case = 'planes'
   elseif xd == S + 1 and kd == S + 2 then
      case = 'sum'
   else
      M.argerror(name, string.format('expected a %dD or %dD input with a %dD, %dD or %dD kernel, got %s and %s',
                                     S, S + 1, S, S + 1, S + 2, M.size_str(x), M.size_str(k)), lv)
   end
   local ks, p = {}, 1
   for i = 1, S do ks[i] = tonumber(k.p.size[kd - S + i - 1]) end
   if case ~= 'single' then
      p = tonumber(x.p.size[0])
      local kp = tonumber(k.p.size[case == 'sum' and 1 or 0])
      if kp ~= p then
         M.argerror(name, 'input planes and kernel planes differ: ' .. M.size_str(x) .. ' and ' .. M.size_str(k), lv)
      end
   end
   if mode == 'F' then x = pad_full(x, ks, S, lv) end
   for i = 1, S do
      if tonumber(x.p.size[xd - S + i - 1]) < ks[i] then
         M.argerror(name, 'kernel ' .. M.size_str(k) .. ' larger than the input ' .. M.size_str(x), lv)
      end
   end
   if flipped then k = flip(k, S, lv) end
   -- patches: (p, O1..OS, K1..KS)
   local xv = x
   if case == 'single' then
      local s = {1}
      for i = 1, S do s[i + 1] = tonumber(x.p.size[i - 1]) end
      xv = M.view(M.contiguous(x, lv), s, lv)
   end
   local patches = xv
   for i = 1, S do patches = unfold(patches, i, ks[i], lv) end
   local os = {}
   for i = 1, S do os[i] = tonumber(patches.p.size[i]) end
   local O, K = product(os), product(ks)
   local out
   P.s[0], P.s[1] = 0, 1
   if case == 'sum' then
      -- (O1..OS, p, K1..KS) -> (O, p*K); kernel (q, p*K); out (q, O) = kernel * patches^T
      local perm = {}
      for i = 1, S do perm[i] = i end
      perm[S + 1] = 0
      for i = 1, S do perm[S + 1 + i] = S + i end
      local pm = M.view(M.copy_new(permute(patches, perm, lv), -1, lv), {O, p * K}, lv)
      local q = tonumber(k.p.size[0])
      local km = M.view(M.contiguous(k, lv), {q, p * K}, lv)
      local pt = M.transpose(pm, 0, 1, lv)
      IN[0], IN[1] = km.p, pt.p
      P.s[0], P.s[1] = 0, 1
      out = run(C.TC_OP_MM, 2, nil, lv)
      local s = {q}
      for i = 1, S do s[i + 1] = os[i] end
      out = M.view(out, s, lv)
   else
      -- (p, O, K) bmm kernel (p, K, 1) -> (p, O, 1)
      local pm = M.view(M.copy_new(patches, -1, lv), {p, O, K}, lv)
      local km = M.view(M.contiguous(k, lv), {p, K, 1}, lv)
      IN[0], IN[1] = pm.p, km.p
      P.s[0], P.s[1] = 0, 1
      out = run(C.TC_OP_BMM, 2, nil, lv)
      local s = {}
      if case == 'planes' then s[1] = p end
      for i = 1, S do s[#s + 1] = os[i] end
      out = M.view(out, s, lv)
   end
   if res == nil then return out end
   M.resize_as(res, out.p, lv)
   M.copy_into(res, out, lv)
   return res
end

local function def_conv(name, S, flipped)
   torch[name] = function(a, b, c, d)
      local r
      tp(a, name)
      tp(b, name)
      if isT(c) then
         r = conv_into(name, S, flipped, a, b, c, d, 2)
      else
         r = conv_into(name, S, flipped, nil, a, b, c, 2)
      end
      return r
   end
   methods[name] = function(t, a, b)
      if not isT(a) then error(name .. ': expected a kernel tensor, got ' .. describe(a), 2) end
      local r = conv_into(name, S, flipped, nil, t, a, b, 2)
      return r
   end
end
def_conv('conv2', 2, true)
def_conv('xcorr2', 2, false)
def_conv('conv3', 3, true)
def_conv('xcorr3', 3, false)
