-- torch/print.lua -- tostring of tensors and storages, in Torch7's format:
--   one format for all the values, chosen from their magnitudes: integers as %Nd,
--   mixed magnitudes as %11.4e, otherwise %N.4f, with a common scale line ("0.001 *")
--   when the largest magnitude is below 0.1 or at least 1e5; NaN anywhere gives %f;
--   1-dim: one value per line; 2-dim: rows, wrapped into "Columns a to b" blocks to fit
--   80 characters; more dims: "(i,j,.,.) = " matrices, the first index varying fastest;
--   a footer "[torch.DoubleTensor of size 2x3x4]" ("with no dimension" when empty).
-- tocha additions Torch7 could not have: a 0-dim tensor prints its value and
-- "[torch.DoubleTensor of size scalar]"; a tensor with a zero-size dim only its footer;
-- BoolTensor values print as 1 / 0.
-- A CUDA tensor prints its values (copied to the host) and its device in the footer:
-- "[torch.CudaTensor of size 2x3 (cuda:0)]" (cutorch's footer had no device).
local torch = ...
local ffi = require 'ffi'

local E, U = torch._elem, torch._tensor_util
local fmt, floor, ceil, abs, log10 = string.format, math.floor, math.ceil, math.abs, math.log10
local insert, concat = table.insert, table.concat

-- The format for values vals[1..n]: format string, scale (nil for none) and column width
-- (nil when a NaN is present: then nothing wraps).
local function value_format(vals, n)
   if n == 0 then return '', nil, 0 end
   local int_mode, mn, mx = true, math.huge, 0
   for i = 1, n do
      local v = vals[i]
      if v ~= v then return '%f', nil, nil end
      if int_mode and v ~= ceil(v) then int_mode = false end
      local a = abs(v)
      if a < mn then mn = a end
      if a > mx then mx = a end
   end
   local exp_min = mn ~= 0 and floor(log10(mn)) + 1 or 1
   local exp_max = mx ~= 0 and floor(log10(mx)) + 1 or 1
   if int_mode then
      if exp_max > 9 then return '%11.4e', nil, 11 end
      return '%' .. (exp_max + 1) .. 'd', nil, exp_max + 1
   end
   if exp_max - exp_min > 4 then
      local sz = (abs(exp_max) > 99 or abs(exp_min) > 99) and 12 or 11
      return '%' .. sz .. '.4e', nil, sz
   end
   if exp_max > 5 or exp_max < 0 then
      return '%7.4f', 10 ^ (exp_max - 1), 7
   end
   local sz = exp_max == 0 and 7 or exp_max + 6
   return '%' .. sz .. '.4f', nil, sz
end

-- The values of tensor p in row-major order, as Lua numbers.
local function gather(p)
   local n = U.numel(p)
   local vals = {}
   if n == 0 then return vals, 0 end
   local h -- a device tensor's values, copied to the host (kept alive while read)
   if p.device ~= 0 then
      h = U.host_copy(p, 3)
      p = h.p
   end
   local d, get, nxt = E.data_ptr(p, 'tostring(x) or print(x)'), E.GET[p.dtype], U.offsets(p)
   for i = 1, n do
      local v = get(d, nxt())
      if v == true then v = 1 elseif v == false then v = 0 end
      vals[i] = v
   end
   local _ = h
   return vals, n
end

-- Rows x cols values starting after vals[base], as Torch7's matrix printer lays them out.
local function print_matrix(out, vals, base, rows, cols, vf, scale, sz, indent)
   scale = scale or 1
   insert(out, indent)
   local per_line = sz and floor((80 - #indent) / (sz + 1)) or cols
   local first = 1
   while first <= cols do
      local last = math.min(first + per_line - 1, cols)
      if per_line < cols then
         if first ~= 1 then insert(out, '\n') end
         insert(out, 'Columns ' .. first .. ' to ' .. last .. '\n' .. indent)
      end
      if scale ~= 1 then insert(out, fmt('%g', scale) .. ' *\n ' .. indent) end
      for r = 1, rows do
         local row = base + (r - 1) * cols
         for c = first, last do
            insert(out, fmt(vf, vals[row + c] / scale))
            if c == last then
               insert(out, '\n')
               if r ~= rows then insert(out, scale ~= 1 and indent .. ' ' or indent) end
            else
               insert(out, ' ')
            end
         end
      end
      first = last + 1
   end
end

local devbuf = ffi.new('char[16]')
local function device_note(p)
   if p.device == 0 then return '' end
   return ' (' .. ffi.string(torch._C.tc_device_str(p.device, devbuf, 16)) .. ')'
end

local function footer(name, p)
   return '[' .. name .. ' of size ' .. U.size_str(p) .. device_note(p) .. ']\n'
end

local function tensor_tostring(t)
   local p = t.p
   local name = torch._tensor_type_name(p)
   if p.storage == nil then return '[' .. name .. ' with no dimension' .. device_note(p) .. ']\n' end
   local vals, n = gather(p)
   local nd = p.ndim
   if n == 0 then return footer(name, p) end
   local vf, scale, sz = value_format(vals, n)
   local out = {}
   if nd <= 1 then
      if scale then insert(out, fmt('%g', scale) .. ' *\n') end
      for i = 1, n do insert(out, fmt(vf, vals[i] / (scale or 1)) .. '\n') end
   elseif nd == 2 then
      print_matrix(out, vals, 0, tonumber(p.size[0]), tonumber(p.size[1]), vf, scale, sz, '')
   else
      local rows, cols = tonumber(p.size[nd - 2]), tonumber(p.size[nd - 1])
      local nslices = n / (rows * cols)
      -- slice s: index of each leading dim, the first varying fastest (Torch7's order)
      local strides, acc = {}, rows * cols
      for d = nd - 3, 0, -1 do
         strides[d] = acc
         acc = acc * tonumber(p.size[d])
      end
      for s = 0, nslices - 1 do
         local rest, base, head = s, 0, {}
         for d = 0, nd - 3 do
            local sd = tonumber(p.size[d])
            local i = rest % sd
            rest = (rest - i) / sd
            base = base + i * strides[d]
            head[d + 1] = (i + 1) .. ','
         end
         if s > 0 then insert(out, '\n') end
         insert(out, '(' .. concat(head) .. '.,.) = \n')
         print_matrix(out, vals, base, rows, cols, vf, scale, sz, ' ')
      end
   end
   insert(out, footer(name, p))
   return concat(out)
end
torch._tensor_mt.__tostring = tensor_tostring

-- Storages: a leading newline, one value per line, "[torch.LongStorage of size 2]".
function torch._storage_tostring(s)
   local n = s.n
   local dt = torch._storage_dtype(s)
   local get, d, vals = E.GET[dt], s.d, {}
   for i = 1, n do
      local v = get(d, i - 1)
      if v == true then v = 1 elseif v == false then v = 0 end
      vals[i] = v
   end
   local vf, scale = value_format(vals, n)
   local out = {'\n'}
   if scale then insert(out, fmt('%g', scale) .. ' *\n') end
   for i = 1, n do insert(out, fmt(vf, vals[i] / (scale or 1)) .. '\n') end
   insert(out, '[' .. torch._storage_name[dt] .. ' of size ' .. n .. ']\n')
   return concat(out)
end

torch._value_format = value_format
