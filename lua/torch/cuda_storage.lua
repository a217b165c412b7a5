-- torch/cuda_storage.lua -- cutorch's storages in device memory: torch.CudaStorage (float32)
-- and torch.CudaDoubleStorage, CudaHalfStorage, CudaBFloat16Storage, CudaByteStorage,
-- CudaCharStorage, CudaShortStorage, CudaIntStorage, CudaLongStorage, CudaBoolStorage.
--
-- A CUDA storage is a cdata `{ tc_tensor *p; double n; }` per dtype: p is an owned 1-dim
-- contiguous tensor over (a window of) a device tc_storage, n its size. As on the host,
-- t:storage() of a device tensor is one over the tensor's whole tc_storage, so writes
-- through either are seen by both, and tensors can be made over it
-- (torch.CudaTensor(storage, offset, sizes [, strides]), t:set(storage, ...)).
-- Its memory is never touched from Lua: fill and copy are ops on the device (copy also
-- from and to host storages and tensors), s[i] and totable/print copy values across (one
-- element at a time for s[i], as cutorch did), and s:data() raises. Unlike host storages
-- there is no inline form, and no memory-mapped or pointer constructor.
-- torch.isStorage and torch.typename know them; torch._storage_dtype (host storages only:
-- their pointer is read) does not -- torch._cuda_storage_dtype does.
local torch = ...
local ffi = require 'ffi'

local C = torch._C
local U = torch._tensor_util
local Handle = torch._Handle
local run, clear_params, IN, P = torch._run, torch._clear_params, torch._IN, torch._P
local raise = torch._raise
local fmt = string.format

local OP_COPY, OP_FILL, BOOL = C.TC_OP_COPY, C.TC_OP_FILL, C.TC_BOOL

local outp = ffi.new('tc_tensor*[1]')
local size1 = ffi.new('int64_t[1]')
local cur = ffi.new('int[1]')
local zeros = ffi.new('int64_t[1]')
local one = ffi.new('double[1]')

local shared = {}       -- the methods of every CUDA storage type
local storage_dt = {}   -- ctype id -> dtype
local storage_ct = {}   -- dtype -> ctype
local storage_name = {} -- dtype -> 'torch.CudaStorage'

-- dtype of a CUDA storage object, or nil for anything else.
local function cuda_storage_dtype(x)
   if type(x) ~= 'cdata' then return nil end
   return storage_dt[tonumber(ffi.typeof(x))]
end
torch._cuda_storage_dtype = cuda_storage_dtype
torch._cuda_storage_name = storage_name

local host_is_storage = torch.isStorage
function torch.isStorage(x) return host_is_storage(x) or cuda_storage_dtype(x) ~= nil end

local function release(s)
   if s.p ~= nil then
      C.tc_tensor_release(s.p)
      s.p = nil
   end
end

-- Points s at the owned 1-dim device tensor p (releasing what it had).
local function attach(s, p)
   local had = s.p ~= nil
   if had then C.tc_tensor_release(s.p) end
   s.p = p
   s.n = tonumber(p.ndim == 1 and p.size[0] or 0)
   if not had then ffi.gc(s, release) end
end

-- A new owned 1-dim tensor of n elements on device (contents uninitialised).
local function new_vector(device, dt, n, level)
   size1[0] = n
   if C.tc_tensor_new_on(device, dt, 1, size1, outp) ~= 0 then raise(level + 1) end
   return outp[0]
end

local function new_storage(device, dt, n, level)
   local s = storage_ct[dt]()
   attach(s, new_vector(device, dt, n, level + 1))
   return s
end

-- The CUDA storage viewing all of device tensor p's tc_storage (nil when p has none).
function torch._cuda_storage_of_tensor(p)
   local tcs = p.storage
   if tcs == nil then return nil end
   size1[0] = math.floor(tonumber(tcs.nbytes) / torch._elem.ELSIZE[p.dtype])
   if C.tc_tensor_new_view(tcs, p.dtype, 0, 1, size1, nil, outp) ~= 0 then raise(3) end
   local s = storage_ct[p.dtype]()
   attach(s, outp[0])
   return s
end

-- A CUDA storage on device holding host storage h's values (serialize.lua's loads).
function torch._cuda_storage_from_host(h, device)
   local s = new_storage(device, torch._storage_dtype(h), #h, 2)
   if #h > 0 then shared.copy(s, h) end
   return s
end

-- tc_storage*, 0-based element offset of element 1, and size: what a tensor viewing s uses
-- (tensor.lua's storage_geometry).
function torch._cuda_storage_view(s)
   local p = s.p
   return p.storage, tonumber(p.offset), s.n
end

-- The selected device's code (cutorch: new storages go there).
local function selected_device(name, level)
   local ok, why = torch.cuda.isAvailable()
   if not ok then error(fmt('%s: CUDA unavailable: %s', name, why), level + 1) end
   if C.tc_cuda_current_device(cur) ~= 0 then raise(level + 1) end
   return C.TC_CUDA + cur[0]
end

---------------------------------------------------------------------------------------------
-- Methods
---------------------------------------------------------------------------------------------

function shared.size(s) return s.n end
function shared.elementSize(s) return torch._elem.ELSIZE[cuda_storage_dtype(s)] end
-- cutorch: the device numbered from 1
function shared.getDevice(s) return s.p.device end

-- The storage's elements as a tensor handle for one op (not registered: borrowed).
local function borrowed(s) return Handle(s.p) end

function shared.fill(s, v)
   v = U.fill_value('fill', v, 2)
   if s.n == 0 then return s end
   P.s[0] = v
   local _ = run(OP_FILL, 0, borrowed(s), 2)
   return s
end

-- copy(src): src's elements (a storage of any type on any device, or a tensor) converted
-- into s; the element counts must match.
function shared.copy(s, src)
   local n, q = s.n, nil
   if cuda_storage_dtype(src) ~= nil then
      q = src.p
   elseif torch._storage_dtype(src) ~= nil then
      q = torch._storage_tensor(src)
   elseif U.isT(src) then
      q = src.p
   else
      error('copy: expected a storage or a tensor, got ' .. U.describe(src), 2)
   end
   local m = tonumber(C.tc_tensor_numel(q))
   if q.storage == nil then m = 0 end
   if m ~= n then
      error(fmt('copy: cannot copy %s of %d elements into a storage of %d', U.isT(src) and 'a tensor' or 'a storage',
                m, n), 2)
   end
   if n == 0 then return s end
   clear_params()
   IN[0] = q
   local _ = run(OP_COPY, 1, borrowed(s), 2)
   return s
end

-- resize(n): keeps the first min(old, n) elements (on the same device). NOTE: as for host
-- storages, tensors already viewing the old memory keep it.
function shared.resize(s, n)
   U.need_int('resize', 'size', n, 2)
   if n < 0 then error(fmt('resize: negative size %d', n), 2) end
   if n == s.n then return s end
   local dt = cuda_storage_dtype(s)
   local p = new_vector(s.p.device, dt, n, 2)
   local keep = math.min(n, s.n)
   if keep > 0 then
      local dst = Handle(p):narrow(1, 1, keep)
      clear_params()
      IN[0] = Handle(s.p):narrow(1, 1, keep).p
      local _ = run(OP_COPY, 1, dst, 2)
   end
   attach(s, p)
   return s
end

-- A host tensor holding the storage's values (one copy).
local function host_values(s)
   if s.n == 0 then return nil end
   return U.host_copy(s.p, 3)
end

function shared.totable(s)
   local h = host_values(s)
   if h == nil then return {} end
   return h:totable()
end

function shared.data(s)
   error(fmt('data: the values of a %s are in device memory (%s) and cannot be read or written from Lua '
             .. 'directly; copy it to a host storage first (torch.FloatStorage(#s):copy(s))',
             storage_name[cuda_storage_dtype(s)], torch._device_str(s.p.device)), 2)
end

-- Element i (1-based) crossing over through a 0-dim view (tc_tensor_get / set_value).
local function element(s, i, v, level)
   local p = s.p
   if C.tc_tensor_new_view(p.storage, p.dtype, p.offset + i - 1, 0, nil, nil, outp) ~= 0 then raise(level + 1) end
   local e = outp[0]
   local st
   if v == nil then st = C.tc_tensor_get(e, zeros, one) else st = C.tc_tensor_set_value(e, zeros, v) end
   C.tc_tensor_release(e)
   if st ~= 0 then raise(level + 1) end
   if v == nil and p.dtype == BOOL then return one[0] ~= 0 end
   return one[0]
end

local function tostring_storage(s)
   local dt = cuda_storage_dtype(s)
   local tail = fmt('[%s of size %d (%s)]\n', storage_name[dt], s.n, torch._device_str(s.p.device))
   local h = host_values(s)
   if h == nil then return '\n' .. tail end
   local text = torch._storage_tostring(torch._storage_of_tensor(h.p))
   return (text:gsub('%[torch%.[%w]+Storage of size %d+%]\n$', function() return tail end))
end

---------------------------------------------------------------------------------------------
-- Types and constructors
---------------------------------------------------------------------------------------------

local function index_error(s, k, level)
   error(fmt('%s: index %s is out of bounds for a storage of size %d', storage_name[cuda_storage_dtype(s)],
             tostring(k), s.n), level + 1)
end

-- Constructor forms (cutorch's): (), (n), (table) built on the host and copied over, and
-- (CUDA storage, offset [, size]) a view. New storages go to the selected device.
local function construct(dt, a, b, c)
   local name = storage_name[dt]
   if a == nil then
      local s = new_storage(selected_device(name, 3), dt, 0, 3)
      return s
   end
   local ta = type(a)
   if ta == 'number' then
      U.need_int(name, 'size', a, 3)
      if a < 0 then error(fmt('%s: negative size %d', name, a), 3) end
      if b ~= nil then error(name .. ': a storage in device memory cannot view a host pointer', 3) end
      local s = new_storage(selected_device(name, 3), dt, a, 3)
      return s
   elseif ta == 'table' and getmetatable(a) == nil then
      local host_name = torch._type_names[dt]:gsub('Tensor$', 'Storage')
      local ok, h = pcall(torch[host_name:match('^torch%.(.*)$')], a)
      if not ok then error((tostring(h):gsub('^[^\n]-:%d+: ', ''):gsub(host_name, name, 1)), 3) end
      local s = new_storage(selected_device(name, 3), dt, #a, 3)
      if #a > 0 then shared.copy(s, h) end
      return s
   elseif cuda_storage_dtype(a) ~= nil then
      if cuda_storage_dtype(a) ~= dt then error(fmt('%s: cannot view a %s', name, U.describe(a)), 3) end
      local off = b == nil and 1 or U.need_int(name, 'offset', b, 3)
      local n = a.n
      if off < 1 or off > n + 1 then
         error(fmt('%s: offset %d is out of bounds for a storage of size %d', name, off, n), 3)
      end
      local size = c == nil and n - off + 1 or U.need_int(name, 'size', c, 3)
      if size < 0 or off - 1 + size > n then
         error(fmt('%s: %d elements from offset %d do not fit a storage of size %d', name, size, off, n), 3)
      end
      local s = storage_ct[dt]()
      if a.p.storage == nil then
         attach(s, new_vector(a.p.device, dt, 0, 3))
         return s
      end
      size1[0] = size
      if C.tc_tensor_new_view(a.p.storage, dt, a.p.offset + off - 1, 1, size1, nil, outp) ~= 0 then raise(3) end
      attach(s, outp[0])
      return s
   elseif torch._storage_dtype(a) ~= nil then
      error(fmt('%s: cannot view a %s (host memory); make one of its size and :copy() it', name, U.describe(a)), 3)
   end
   error(fmt('%s: invalid arguments (%s): expected (), (size), (table) or (storage, offset, size)', name,
             U.describe(a)), 3)
end

for dt, tname in pairs(torch._cuda_type_names) do
   local short = tname:match('^torch%.(.*)Tensor$')
   local name = 'torch.' .. short .. 'Storage'
   local cname = 'tc_' .. short .. 'StorageObj'
   if not pcall(ffi.typeof, cname) then
      ffi.cdef(fmt('typedef struct %s { tc_tensor *p; double n; } %s;', cname, cname))
   end
   local M = {__typename = name}
   for k, f in pairs(shared) do M[k] = f end
   local ct = ffi.metatype(cname, {
      __index = function(s, k)
         if type(k) == 'number' then
            if k >= 1 and k <= s.n and k % 1 == 0 then return element(s, k, nil, 2) end
            index_error(s, k, 2)
         end
         return M[k]
      end,
      __newindex = function(s, k, v)
         if type(k) ~= 'number' then error(fmt("%s: cannot set field '%s'", name, tostring(k)), 2) end
         if k < 1 or k > s.n or k % 1 ~= 0 then index_error(s, k, 2) end
         if type(v) == 'boolean' then v = v and 1 or 0 end
         if type(v) ~= 'number' then error(fmt('%s: expected a number to store, got %s', name, U.describe(v)), 2) end
         element(s, k, v, 2)
      end,
      __len = function(s) return s.n end,
      __tostring = tostring_storage,
   })
   storage_ct[dt], storage_dt[tonumber(ct)], storage_name[dt] = ct, dt, name
   torch._storage_class(dt, short, M, construct, function()
      local s = construct(dt)
      return s
   end)
end

-- torch.typename / torch.type of a cdata: the CUDA storages too.
local host_typename = torch._classes.cdata_typename
if host_typename then
   torch._classes.set_cdata_typename(function(x)
      local dt = cuda_storage_dtype(x)
      if dt then return storage_name[dt] end
      return host_typename(x)
   end)
end
