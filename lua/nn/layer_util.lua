-- nn/layer_util.lua -- small helpers shared by the layer files (transfer, normalization,
-- convolution, pooling, padding, upsampling): input checks that name the module, errors
-- raised at the user's line, and Torch7's "batch or not" dimension rules.
--
-- Loaded by init.lua before the layer files (kept in nn._layer_util); a second load
-- returns the first table.
local nn = ...
if nn._layer_util then return nn._layer_util end

local torch = torch
local isTensor = torch.isTensor
local U = {}

-- Class name of a module, for messages.
local mname = nn._mname
U.mname = mname

-- "2x3x4" for a tensor, its Lua type otherwise.
local unpack = unpack or table.unpack

function U.describe(x)
   if isTensor(x) then
      if x:dim() == 0 then return (x:nElement() == 0) and 'empty' or 'scalar' end
      local s = {}
      for d = 1, x:dim() do s[d] = tostring(x:size(d)) end
      return table.concat(s, 'x')
   end
   return type(x)
end

-- error("<module>: <message>") at the user's line (nn._raise: the first caller outside
-- the library, however deep containers nest the call).
function U.raise(self, fmt, ...)
   nn._raise(mname(self) .. ': ' .. string.format(fmt, ...))
end

-- check_input's dims and wording for the spatial layers' (C,H,W) or (N,C,H,W) inputs.
U.spatial = {[3] = true, [4] = true}
U.SPATIAL = 'a 3D (C,H,W) or 4D (N,C,H,W)'

-- input must be a floating-point tensor whose dim is in dims (a set: {[3]=true,[4]=true})
-- or any dim when dims is nil; returns input.
function U.check_input(self, input, dims, what)
   if not isTensor(input) then
      U.raise(self, 'expected a tensor input, got %s', type(input))
   end
   if not torch._is_float_dtype[input.p.dtype] then
      U.raise(self, 'expected a floating-point tensor, got %s', torch.type(input))
   end
   if dims and not dims[input:dim()] then
      U.raise(self, 'expected %s input, got size %s', what, U.describe(input))
   end
   return input
end

-- Constructor checks: every argument is a positive integer.
function U.positive(self, ...)
   for i, v in ipairs({...}) do
      if type(v) ~= 'number' or v < 1 or v % 1 ~= 0 then
         U.raise(self, 'argument #%d must be a positive integer, got %s', i, tostring(v))
      end
   end
end

-- The input of a layer over k trailing dims as a batch (N, C, d1..dk) and whether it came
-- batched: a (C, d1..dk) input gets N = 1. dims/what as for check_input; nIn: the
-- expected plane count C (nil: any).
function U.as_batch(self, input, nIn, k, dims, what)
   U.check_input(self, input, dims, what)
   local d = input:dim()
   if nIn and input:size(d - k) ~= nIn then
      U.raise(self, 'expected %d input planes, got input of size %s', nIn, U.describe(input))
   end
   if d == k + 1 then
      local sz = input:size():totable()
      table.insert(sz, 1, 1)
      return input:view(unpack(sz)), false
   end
   return input, true
end

-- x must be a table of inputs (not a tensor); what names it in the error.
function U.need_table(self, x, what)
   if type(x) ~= 'table' or isTensor(x) then
      U.raise(self, 'expected %s as input, got %s', what, U.describe(x))
   end
   return x
end

-- A new zero tensor of x's type with the given sizes (a table); requires no grad.
function U.zeros_like_type(x, sizes)
   local t = x.new()
   t:resize(torch.LongStorage(sizes))
   t:zero()
   return t
end

-- A LongTensor from a Lua list of 1-based indices.
function U.long(list)
   local t = torch.LongTensor(#list)
   for i = 1, #list do t[i] = list[i] end
   return t
end

-- Devices. A module follows its input's device: tensors it builds at run time from shapes
-- (positions, offsets, one-hot tables) are made on the host and moved next to the data, and
-- integer results stay on the device (t:long() of a CUDA tensor is a host tensor, cutorch's
-- rule, so it is not used for indices that feed ops).

-- t on x's device, its dtype kept (t itself when it is already there).
function U.on_device_of(t, x)
   local dev = x.p.device
   if t.p.device == dev then return t end
   return torch._tensor_util.to_device(t.p, dev, -1, 2)
end

-- t's values as int64 on t's own device (t itself when it already is).
function U.long_of(t)
   if t.p.dtype == torch._C.TC_I64 then return t end
   return t:type(t.p.device ~= 0 and 'torch.CudaLongTensor' or 'torch.LongTensor')
end

-- t (a host tensor built from shapes) with x's dtype on x's device: matrices of constants
-- are filled on the host, element by element, and cross over once.
function U.as_like(t, x)
   if t.p.device == x.p.device and t.p.dtype == x.p.dtype then return t end
   return torch._tensor_util.to_device(t.p, x.p.device, x.p.dtype, 2)
end

-- An empty tensor of typename's dtype (a host or a CUDA type name) on x's device.
function U.empty_on(x, typename)
   local dt = torch._dtype_of_name[typename] or torch._cuda_dtype_of_name[typename]
   local names = x.p.device ~= 0 and torch._cuda_type_names or torch._type_names
   return x.new():type(names[dt])
end

-- Sizes of a tensor as a Lua table.
function U.sizes(x)
   local s = {}
   for d = 1, x:dim() do s[d] = x:size(d) end
   return s
end

nn._layer_util = U
return U
