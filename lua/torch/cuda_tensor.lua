-- torch/cuda_tensor.lua -- tensors on CUDA devices from Lua (cutorch's surface): the classes
-- torch.CudaTensor (float32), torch.CudaDoubleTensor, CudaHalfTensor, CudaBFloat16Tensor,
-- CudaByteTensor, CudaCharTensor, CudaShortTensor, CudaIntTensor, CudaLongTensor and
-- CudaBoolTensor; the conversions between types and devices (type, typeAs, float, double,
-- ..., cuda, cudaDouble, ...); the device queries (getDevice, get_device, isCuda, is_cuda);
-- and the storage-less geometry helpers nn uses to convert and flatten parameters on any
-- device.
--
-- A device tensor is an ordinary tensor handle whose tc_tensor has device ~= TC_CPU: ops
-- run on the device of their inputs (core/dispatch.c), and nothing here or elsewhere in
-- lua/torch reads its memory through a pointer (tensor.lua's data_ptr refuses; t[i], item,
-- print, totable, apply copy values across). Choices (docs/cuda.md has the list):
--  * t:cuda([device]) is cutorch's: the result is a torch.CudaTensor (float32), on device
--    (0-based, PyTorch's numbering) or the selected one; t:cudaDouble() etc. keep a type.
--  * t:float(), t:double(), ... of a device tensor are CPU tensors (cutorch's rule: the
--    Torch7 type names are host types).
--  * new CUDA tensors from torch.CudaTensor(...) go to the selected device
--    (torch.cuda.setDevice); x.new(...) of a device tensor to x's device.
--  * t:type('torch.CudaXTensor') of a CUDA tensor keeps its device; of a CPU tensor goes to
--    the selected device. t:typeAs(y) gives y's type on y's device.
--  * t:getDevice() is cutorch's 1-based device (0 for a CPU tensor); t:get_device() is
--    PyTorch's 0-based one (-1 for a CPU tensor).
-- Conventions as in tensor.lua (levels, no tail calls that raise, checks before changes).
local torch = ...
local ffi = require 'ffi'
local bit = require 'bit'

local C = torch._C
local methods = torch._methods
local U = torch._tensor_util
local wrap, raise = torch._wrap, torch._raise
local type_names, dtype_of_name = torch._type_names, torch._dtype_of_name
local cuda_type_names, cuda_dtype_of_name = torch._cuda_type_names, torch._cuda_dtype_of_name
local tensor_type_name = torch._tensor_type_name
local isT, describe, converted = U.isT, U.describe, U.converted
local fmt = string.format

local CPU, CUDA = C.TC_CPU, C.TC_CUDA
local F32, I64 = C.TC_F32, C.TC_I64

local outp = ffi.new('tc_tensor*[1]')
local cur = ffi.new('int[1]')
local devbuf = ffi.new('char[16]')

local function device_str(device) return ffi.string(C.tc_device_str(device, devbuf, 16)) end
torch._device_str = device_str

---------------------------------------------------------------------------------------------
-- Devices
---------------------------------------------------------------------------------------------

-- Raises "<name>: CUDA unavailable: <reason>" at level (tensor.lua's counting) without CUDA.
local function need_cuda(name, level)
   local ok, why = torch.cuda.isAvailable()
   if not ok then error(fmt('%s: CUDA unavailable: %s', name, why), level + 1) end
end

-- The device code of the selected CUDA device.
local function selected_device(name, level)
   need_cuda(name, level + 1)
   if C.tc_cuda_current_device(cur) ~= 0 then raise(level + 1) end
   return CUDA + cur[0]
end

-- The device code for an optional 0-based CUDA device number (nil: the selected device).
local function device_code(name, device, level)
   if device == nil then
      local dev = selected_device(name, level + 1)
      return dev
   end
   need_cuda(name, level + 1)
   if type(device) ~= 'number' or device % 1 ~= 0 then
      error(fmt('%s: device must be an integer (0-based), got %s', name, describe(device)), level + 1)
   end
   local n = tonumber(C.tc_cuda_device_count())
   if device < 0 or device >= n then
      error(fmt('%s: no device %d (%d device%s: 0..%d, numbered from 0)', name, device, n, n == 1 and '' or 's',
                n - 1), level + 1)
   end
   return CUDA + device
end

local run, clear_params, IN = torch._run, torch._clear_params, torch._IN
local TF_GRAD = U.TF_GRAD

-- A new contiguous tensor of dtype dt on device holding p's values (an empty tensor stays
-- empty). On the autograd tape when p requires grad and grad mode is on (PyTorch's .to()
-- and .cuda() are differentiable): the copy op into a fresh tensor there, whose gradient
-- rule brings the gradient back to p's device and dtype (core/autograd/rules_ew.c).
local function to(p, device, dt, level)
   if p.storage ~= nil and bit.band(p.flags, TF_GRAD) ~= 0 and C.tc_grad_enabled() ~= 0 then
      if C.tc_tensor_new_on(device, dt < 0 and p.dtype or dt, p.ndim, p.size, outp) ~= 0 then raise(level + 1) end
      local r = wrap(outp[0])
      clear_params()
      IN[0] = p
      local _ = run(C.TC_OP_COPY, 1, r, level + 1)
      return r
   end
   if C.tc_tensor_to(p, device, dt, outp) ~= 0 then raise(level + 1) end
   return wrap(outp[0])
end
U.to_device = to

---------------------------------------------------------------------------------------------
-- Construction: torch.CudaTensor(...) and x.new(...) of a device tensor
---------------------------------------------------------------------------------------------

local sizes_buf, strides_buf = U.sizes_buf, U.strides_buf

local function new_on(device, dt, n, level)
   if n == 0 or sizes_buf[0] == 0 then -- Torch7's empty rule: no sizes or a leading 0
      if C.tc_tensor_new_empty_on(device, dt, outp) ~= 0 then raise(level + 1) end
      return wrap(outp[0])
   end
   for k = 0, n - 1 do
      if sizes_buf[k] < 0 then
         local s = {}
         for j = 0, n - 1 do s[j + 1] = tostring(tonumber(sizes_buf[j])) end
         error(fmt('%s: negative size in %s', cuda_type_names[dt], table.concat(s, 'x')), level + 1)
      end
   end
   if C.tc_tensor_new_on(device, dt, n, sizes_buf, outp) ~= 0 then raise(level + 1) end
   return wrap(outp[0])
end

-- The constructor forms on a device: (), (sz1, ...), (LongStorage sizes), (tensor) -- a view
-- of a tensor of the same class on the same device --, and (table), built on the host and
-- copied over. Storages are host memory, so the storage forms are refused. device nil: the
-- selected one. Called from the entry points: the user is at level 3.
local function construct(dt, device, a, b, c, d, e, f, g, h, i)
   local name = cuda_type_names[dt]
   if device == nil then device = selected_device(name, 3) end
   local ta = type(a)
   if a == nil or ta == 'number' or (torch._storage_dtype(a) == I64 and b == nil) then
      local n = U.read_sizes(sizes_buf, name, 3, a, b, c, d, e, f, g, h, i)
      local t = new_on(device, dt, n, 3)
      return t
   elseif torch._storage_dtype(a) == I64 then
      error(name .. ': sizes with strides are not supported for CUDA tensors (make it contiguous and view it '
            .. 'with :transpose(), :narrow(), ...)', 3)
   elseif isT(a) then
      if a.p.dtype ~= dt or a.p.device ~= device then
         error(fmt('%s: cannot view a %s on %s (convert with :type(), :cuda() or :copy())', name, describe(a),
                   device_str(a.p.device)), 3)
      end
      if C.tc_tensor_alias(a.p, outp) ~= 0 then raise(3) end
      return wrap(outp[0])
   elseif ta == 'table' and getmetatable(a) == nil then
      -- built on the host; its errors (a ragged table...) re-raised at the user's line
      local ok, host = pcall(torch[type_names[dt]:match('^torch%.(.*)$')], a)
      if not ok then error((tostring(host):gsub('^[^\n]-:%d+: ', ''):gsub(type_names[dt], name, 1)), 3) end
      local t = to(host.p, device, -1, 3)
      return t
   elseif torch._cuda_storage_dtype(a) ~= nil then
      -- (CUDA storage [, offset [, sizes [, strides]]]): a view, on the storage's device
      if torch._cuda_storage_dtype(a) ~= dt then
         error(fmt('%s: expected a %s, got %s', name, (name:gsub('Tensor$', 'Storage')), torch.typename(a)), 3)
      end
      local tcs, off, nd = U.storage_geometry(dt, name, 3, a, b, c, d, e, f, g, h, i)
      if nd == 0 or sizes_buf[0] == 0 or tcs == nil then
         if C.tc_tensor_new_empty_on(a.p.device, dt, outp) ~= 0 then raise(3) end
         return wrap(outp[0])
      end
      if C.tc_tensor_new_view(tcs, dt, off, nd, sizes_buf, strides_buf, outp) ~= 0 then raise(3) end
      return wrap(outp[0])
   elseif torch._storage_dtype(a) ~= nil then
      error(fmt('%s: a %s is host memory and a CUDA tensor cannot view one; build a %s on it and move it '
                .. 'with :cuda() / :type(), or use a %s', name, torch.typename(a), type_names[dt],
                (name:gsub('Tensor$', 'Storage'))), 3)
   end
   error(fmt('%s: invalid arguments (%s): expected (), (tensor), (sz1, ...), (LongStorage sizes), (storage '
             .. '[, offset, sizes [, strides]]) or (table)', name, describe(a)), 3)
end

-- x.new for a device tensor (init.lua's __index): one constructor per (device, dtype).
local device_ctors = {}
function torch._device_new(p)
   local device, dt = p.device, p.dtype
   local per = device_ctors[device]
   if per == nil then
      per = {}
      device_ctors[device] = per
   end
   local ctor = per[dt]
   if ctor == nil then
      ctor = function(a, b, c, d, e, f, g, h, i)
         local t = construct(dt, device, a, b, c, d, e, f, g, h, i)
         return t
      end
      per[dt] = ctor
   end
   return ctor
end

for dt, name in pairs(cuda_type_names) do
   local short = name:match('^torch%.(.*)$')
   local function ctor(a, b, c, d, e, f, g, h, i)
      local t = construct(dt, nil, a, b, c, d, e, f, g, h, i)
      return t
   end
   local cls = setmetatable({new = ctor, __typename = name, _dtype = dt, _cuda = true}, {
      __call = function(_, a, b, c, d, e, f, g, h, i)
         local t = construct(dt, nil, a, b, c, d, e, f, g, h, i)
         return t
      end,
      __index = methods,
      __newindex = methods,
      __tostring = function() return name end,
   })
   torch[short] = cls
   torch._classes.register_builtin(name, nil, {
      constructor = cls,
      factory = function()
         local t = construct(dt, nil)
         return t
      end,
   })
   torch._classes.registry[name] = methods -- torch.getmetatable('torch.CudaTensor')
end

---------------------------------------------------------------------------------------------
-- Types and devices
---------------------------------------------------------------------------------------------

-- A copy of p on device as dt: non_blocking (PyTorch's) between the host and a device goes
-- through tc_tensor_to_async (cuda_stream.lua's torch._to_async: to the host a pinned result
-- filled on the current stream, not waited for; from pinned memory queued, not waited for;
-- from pageable memory synchronous); otherwise, or on autograd's tape, the ordinary copy.
-- Only `true` asks for it (a second argument of another kind, as a type cache some Torch7
-- code passes to :type, is ignored).
local function to_nb(p, device, dt, non_blocking, level)
   local r = non_blocking == true and torch._to_async(p, device, dt, level + 1) or to(p, device, dt, level + 1)
   return r
end

-- type([name [, non_blocking]]): the class name, or a tensor of class `name` (self when it
-- already is one). A host type name gives a CPU tensor; a CUDA one keeps a CUDA tensor's
-- device, else goes to the selected device. non_blocking as PyTorch's Tensor.type.
function methods.type(t, name, non_blocking)
   local p = t.p
   local cur_name = tensor_type_name(p)
   if name == nil then return cur_name end
   if name == cur_name then return t end
   local dt = dtype_of_name[name]
   if dt ~= nil then
      local r
      if p.device ~= CPU then r = to_nb(p, CPU, dt, non_blocking, 2) else r = converted(p, dt, 2) end
      return r
   end
   dt = cuda_dtype_of_name[name]
   if dt == nil then error(fmt("type: unknown tensor type '%s'", tostring(name)), 2) end
   local device = p.device
   if device == CPU then device = selected_device('type', 2) end
   local r = to_nb(p, device, dt, non_blocking, 2)
   return r
end

-- typeAs(other): other's type on other's device (self when both already match).
function methods.typeAs(t, other)
   local q = U.need_tensor('typeAs', other, '', 2)
   local p = t.p
   if q.dtype == p.dtype and q.device == p.device then return t end
   local r
   if q.device == p.device then r = converted(p, q.dtype, 2) else r = to(p, q.device, q.dtype, 2) end
   return r
end

-- float([non_blocking]), double(), ...: host tensors of that type (a CPU tensor of the type
-- is self). non_blocking (PyTorch's, for a device tensor): the result is pinned memory filled
-- by a copy queued on the current stream and not waited for -- synchronise the stream (or
-- torch.cuda.synchronize(), an event) before reading it.
local host_methods = {byte = 'Byte', char = 'Char', short = 'Short', int = 'Int', long = 'Long', float = 'Float',
                      double = 'Double', half = 'Half', bfloat16 = 'BFloat16', bool = 'Bool'}
for meth, short in pairs(host_methods) do
   local dt = dtype_of_name['torch.' .. short .. 'Tensor']
   methods[meth] = function(t, non_blocking)
      local p = t.p
      if p.device ~= CPU then
         local r = to_nb(p, CPU, dt, non_blocking, 2)
         return r
      end
      if p.dtype == dt then return t end
      local r = converted(p, dt, 2)
      return r
   end
end

-- real(): the default type (a host type).
function methods.real(t)
   local p, dt = t.p, torch._default_dtype()
   if p.device == CPU and p.dtype == dt then return t end
   local r
   if p.device ~= CPU then r = to(p, CPU, dt, 2) else r = converted(p, dt, 2) end
   return r
end

-- cuda([device [, non_blocking]]): a torch.CudaTensor (float32, cutorch's rule) on device
-- (0-based; nil: the selected one); self when it already is one there. cudaDouble([device])
-- etc. the same for the other types. non_blocking (PyTorch's): from pinned memory the copy
-- is queued on the current stream and not waited for (cuda_stream.lua).
local function def_cuda(meth, dt)
   methods[meth] = function(t, device, non_blocking)
      local dev = device_code(meth, device, 2)
      local p = t.p
      if p.device == dev and p.dtype == dt then return t end
      local r = to_nb(p, dev, dt, non_blocking, 2)
      return r
   end
end
def_cuda('cuda', F32)
for meth, short in pairs(host_methods) do
   if meth ~= 'float' then def_cuda('cuda' .. short, dtype_of_name['torch.' .. short .. 'Tensor']) end
end

-- cutorch: the tensor's device numbered from 1 (0: a CPU tensor).
function methods.getDevice(t) return t.p.device end
-- PyTorch: numbered from 0 (-1: a CPU tensor).
function methods.get_device(t) return t.p.device - 1 end
function methods.isCuda(t) return t.p.device ~= CPU end
-- PyTorch's attribute t.is_cuda (a field computed on access).
torch._field_get.is_cuda = function(t) return t.p.device ~= CPU end

---------------------------------------------------------------------------------------------
-- Geometry without Lua storages (nn's type conversion, clone and getParameters): storages
-- are host objects, so code that must work on any device re-points tensors at C level.
---------------------------------------------------------------------------------------------

local size1 = ffi.new('int64_t[1]')
local gsz, gst = ffi.new('int64_t[8]'), ffi.new('int64_t[8]')

-- A 1-dim tensor over the whole of t's C storage (nil when t has none).
function torch._whole_storage(t)
   local p = t.p
   local s = p.storage
   if s == nil then return nil end
   size1[0] = math.floor(tonumber(s.nbytes) / torch._elem.ELSIZE[p.dtype])
   if C.tc_tensor_new_view(s, p.dtype, 0, 1, size1, nil, outp) ~= 0 then raise(2) end
   return wrap(outp[0])
end

-- A tensor viewing base's C storage with t's geometry: offset (plus shift elements), sizes
-- and strides. base has t's dtype.
function torch._restride(base, t, shift)
   local p, b = t.p, base.p
   for k = 0, p.ndim - 1 do gsz[k], gst[k] = p.size[k], p.stride[k] end
   if C.tc_tensor_new_view(b.storage, b.dtype, p.offset + (shift or 0), p.ndim, gsz, gst, outp) ~= 0 then
      raise(2)
   end
   return wrap(outp[0])
end

-- Points t at base's C storage from element offset, keeping t's sizes and strides.
function torch._repoint(t, base, offset)
   local p = t.p
   for k = 0, p.ndim - 1 do gsz[k], gst[k] = p.size[k], p.stride[k] end
   if C.tc_tensor_set_storage(p, base.p.storage, offset, p.ndim, gsz, gst) ~= 0 then raise(2) end
   return t
end
