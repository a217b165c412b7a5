-- torch/serialize.lua -- Torch7's object format (.t7): File:writeObject / File:readObject,
-- torch.save / torch.load, torch.serialize / torch.deserialize. Loads File.lua,
-- DiskFile.lua and MemoryFile.lua first.
--
-- The format (every number through the file's typed writes, so it is the same in binary
-- and ascii files): an Int type tag, then
--   nil 0: nothing          number 1: Double        boolean 5: Int 1 or 0
--   string 2: Int length, the bytes (Char)
--   table 3, torch object 4, function 8 (legacy 7): an Int reference index. An index met
--     before is a reference to that object (shared references and cycles round-trip);
--     a new object takes the next index and its content follows:
--     table: Int count, then count (key, value) objects;
--     torch object: the version string "V 1", the class name, then the class's own
--       write() output, or else a table object of its fields. Tensors write Int ndim, Long
--       sizes, Long strides, Long storageOffset (1-based) and their storage object (or
--       nil); storages write Long size and the raw elements;
--     function: Int length, string.dump bytes, a table object {{name=, value=}...} of its
--       upvalues (legacy 7: a list of the values; legacy tag 6 has no index).
-- References key on identity: tables and functions themselves, tensors by their C
-- header, storages by (C storage, offset, size, type), so two tensors viewing one storage
-- still share it after loading.
--
-- CUDA tensors (lua/torch/cuda_tensor.lua) are written as cutorch wrote them: class
-- torch.CudaTensor (torch.Cuda<Type>Tensor), storage torch.Cuda<Type>Storage, the values
-- copied to the host (no device number: cutorch's format has none). They load onto the
-- selected device, tensors that shared a storage sharing one device storage; without CUDA
-- loading one is an error naming its class unless opts {map_location = 'cpu'} (PyTorch's
-- name) asks for CPU tensors; map_location = 'cuda:N' loads onto device N. CUDA storages
-- (lua/torch/cuda_storage.lua) are written the same way and load by the same rule.
-- Loading never runs code from the data: function bytecode is refused unless the caller
-- passes {allowFunctions = true}. Every size is checked against the bytes left before
-- anything is allocated, classes are looked up by name (a class must be loaded, except
-- that "nn.*" loads nn), and anything malformed is a "corrupt ... at byte N" error.
-- Saving is atomic and durable: the data go to "<file>.tmp.<pid>", synced to the disk and
-- renamed over the file at the end, then the directory is synced (torch._fsync, utils.lua).
local torch = ...
local ffi = require 'ffi'

torch._load_part('File')
torch._load_part('DiskFile')
torch._load_part('MemoryFile')

local C = torch._C
local File = torch._File
local KIND, KIND_OF_DT = File._KIND, File._KIND_OF_DT
local write_elems, read_elems = File._write_elems, File._read_elems
local fmt, floor = string.format, math.floor
local type_names, dtype_of_name = torch._type_names, torch._dtype_of_name

local TYPE_NIL, TYPE_NUMBER, TYPE_STRING, TYPE_TABLE, TYPE_TORCH, TYPE_BOOLEAN = 0, 1, 2, 3, 4, 5
local TYPE_FUNCTION, LEGACY_TYPE_RECUR_FUNCTION, TYPE_RECUR_FUNCTION = 6, 7, 8
local MAX_DEPTH = 1000 -- objects nested in objects; far below LuaJIT's stack limit

local INT, LONG, DOUBLE, CHAR = KIND.Int, KIND.Long, KIND.Double, KIND.Char
local outp = ffi.new('tc_tensor*[1]')
local sizes_buf = ffi.new('int64_t[8]')
local strides_buf = ffi.new('int64_t[8]')

---------------------------------------------------------------------------------------------
-- Writing
---------------------------------------------------------------------------------------------

local function wint(f, v) INT.one[0] = v write_elems(f, INT, INT.one, 1) end
local function wlong(f, v) LONG.one[0] = v write_elems(f, LONG, LONG.one, 1) end
local function wdouble(f, v) DOUBLE.one[0] = v write_elems(f, DOUBLE, DOUBLE.one, 1) end
local function wstring(f, s)
   wint(f, #s)
   write_elems(f, CHAR, ffi.cast(CHAR.ptr, s), #s)
end

-- Per-file writer state: reference index by key, and the objects kept alive (keys of
-- tensors are addresses, which must not be reused while the file is open).
local function wstate(f)
   local st = f._wst
   if st == nil then
      st = {index = {}, keep = {}, n = 0, depth = 0, path = {}}
      f._wst = st
   end
   return st
end

local function path_text(st)
   local parts, path = {'<object>'}, st.path
   local n = #path
   local function add(k)
      parts[#parts + 1] = type(k) == 'string' and k:match('^[%a_][%w_]*$') and ('.' .. k)
                          or ('[' .. (type(k) == 'string' and fmt('%q', k) or tostring(k)) .. ']')
   end
   if n <= 12 then
      for i = 1, n do add(path[i]) end
   else -- a long path: its ends
      for i = 1, 4 do add(path[i]) end
      parts[#parts + 1] = '...'
      for i = n - 5, n do add(path[i]) end
   end
   return table.concat(parts)
end

local function unwritable(st, what)
   error(fmt('cannot serialize %s (at %s)', what, path_text(st)), 0)
end

local function type_index(x)
   local t = type(x)
   if t == 'nil' then return TYPE_NIL
   elseif t == 'number' then return TYPE_NUMBER
   elseif t == 'string' then return TYPE_STRING
   elseif t == 'boolean' then return TYPE_BOOLEAN
   end
   if torch.typename(x) ~= nil then return TYPE_TORCH end
   if t == 'table' then return TYPE_TABLE end
   if t == 'function' then return TYPE_RECUR_FUNCTION end
   return nil
end

-- Is x something writeObject accepts (not looking inside tables)?
function File:isWritableObject(x)
   local ti = type_index(x)
   if ti == TYPE_TORCH and type(x) == 'cdata' then
      return torch.isTensor(x) or torch.isStorage(x)
   end
   return ti ~= nil
end

local function addr(p) return tonumber(ffi.cast('uintptr_t', p)) end

-- Stands for a tensor's whole C storage while it is written (no Lua storage is made).
local PROXY = {}

local write_object

-- Writes a storage's header and elements (ptr: its element 0, n elements of dtype dt).
local function write_storage_body(f, dt, ptr, n)
   wlong(f, n)
   local K = KIND_OF_DT[dt]
   write_elems(f, K, ffi.cast(K.ptr, ptr), n)
end

-- The reference key and writer of a torch object: tensors and storages are cdata.
local function write_torch(f, st, obj, name)
   if torch.isTensor(obj) then
      local p = obj.p
      local nd = p.ndim
      wint(f, nd)
      if nd > 0 then
         write_elems(f, LONG, p.size, nd)
         write_elems(f, LONG, p.stride, nd)
      end
      wlong(f, tonumber(p.offset) + 1)
      local tcs = p.storage
      if tcs == nil then
         wint(f, TYPE_NIL)
         return
      end
      local dt = p.dtype
      local es = torch._elem.ELSIZE[dt]
      local n = floor(tonumber(tcs.nbytes) / es)
      -- the storage object: the whole C storage, keyed so every tensor on it shares one
      local proxy = {data = tcs.data, dt = dt, n = n, key = fmt('s%x:0:%d:%d', addr(tcs), n, dt)}
      if tcs.device ~= C.TC_CPU then
         -- device memory: its values are written from a host copy of the whole storage,
         -- which the proxy keeps alive (the writer keeps the proxy while the file is open)
         local whole = torch._whole_storage(obj)
         proxy.host = whole:type(torch._type_names[dt])
         proxy.data, proxy.cuda = C.tc_tensor_data(proxy.host.p), true
      end
      write_object(f, st, setmetatable(proxy, PROXY))
   elseif torch._cuda_storage_dtype(obj) ~= nil then
      -- a CUDA storage (cutorch's class name, from torch.typename): its values from a host copy
      local host = obj:size() > 0 and torch._tensor_util.host_copy(obj.p, 2) or nil
      write_storage_body(f, torch._cuda_storage_dtype(obj), host and C.tc_tensor_data(host.p), obj:size())
   elseif torch.isStorage(obj) then
      write_storage_body(f, torch._storage_dtype(obj), torch._storage_ptr(obj), obj:size())
   elseif type(obj) == 'table' then
      if type(obj.write) == 'function' then
         obj:write(f)
      else
         local var = {}
         for k, v in next, obj do var[k] = v end
         write_object(f, st, var)
      end
   else
      unwritable(st, 'a ' .. name)
   end
end

-- Reference keys: identity for tables and functions, addresses for C objects.
local function ref_key(x)
   if getmetatable(x) == PROXY then return x.key end
   if torch.isTensor(x) then return 't' .. addr(x.p) end
   if torch.isStorage(x) then
      local p = x.p
      if p == nil then return x end -- inline: only this object has the elements
      local tcs = p.storage
      if tcs == nil then return x end -- an empty CUDA storage
      return fmt('s%x:%d:%d:%d', addr(tcs), tonumber(p.offset), x:size(),
                 torch._storage_dtype(x) or torch._cuda_storage_dtype(x))
   end
   return x
end

write_object = function(f, st, x)
   local proxy = getmetatable(x) == PROXY
   local ti = proxy and TYPE_TORCH or type_index(x)
   if ti == nil then
      local t = type(x)
      unwritable(st, t == 'cdata' and 'a cdata value (' .. tostring(ffi.typeof(x)) .. ')' or ('a ' .. t))
   end
   wint(f, ti)
   if ti == TYPE_NIL then return end
   if ti == TYPE_NUMBER then wdouble(f, x) return end
   if ti == TYPE_BOOLEAN then wint(f, x and 1 or 0) return end
   if ti == TYPE_STRING then wstring(f, x) return end

   local key = ref_key(x)
   local idx = (not f._force) and st.index[key] or nil
   if idx then wint(f, idx) return end
   idx = st.n + 1
   st.n = idx
   if not f._force then
      st.index[key] = idx
      st.keep[idx] = x
   end
   wint(f, idx)
   st.depth = st.depth + 1
   if st.depth > MAX_DEPTH then
      unwritable(st, fmt('data nested deeper than %d levels%s', MAX_DEPTH,
                         f._force and ' (a cycle, written without references?)' or ''))
   end

   if proxy then
      local dt = x.dt
      wstring(f, 'V 1')
      wstring(f, ((x.cuda and torch._cuda_type_names or type_names)[dt]:gsub('Tensor$', 'Storage')))
      write_storage_body(f, dt, x.data, x.n)
   elseif ti == TYPE_TORCH then
      local name = torch.typename(x)
      -- the class's __version (inherited; Torch7's default 1), which read(file, version) sees
      local version = type(x) == 'table' and tonumber(x.__version) or 1
      wstring(f, 'V ' .. tostring(version))
      wstring(f, name)
      write_torch(f, st, x, name)
   elseif ti == TYPE_TABLE then
      local n = 0
      for _ in next, x do n = n + 1 end
      wint(f, n)
      local path = st.path
      for k, v in next, x do
         path[#path + 1] = k
         write_object(f, st, k)
         write_object(f, st, v)
         path[#path] = nil
      end
   else -- a function: bytecode and upvalues
      local ok, dumped = pcall(string.dump, x)
      if not ok then unwritable(st, 'a C function') end
      wstring(f, dumped)
      local ups, i = {}, 1
      while true do
         local name, value = debug.getupvalue(x, i)
         if name == nil then break end
         ups[i] = {name = name, value = value}
         i = i + 1
      end
      write_object(f, st, ups)
   end
   st.depth = st.depth - 1
end

-- Writes one object (references are shared with the file's earlier writeObject calls).
-- A class's write(file) method calls it again for its parts: those nested calls run
-- inside the outer one.
function File:writeObject(obj)
   File._check_write(self, 'writeObject', 2)
   local st = wstate(self)
   if st.active then return write_object(self, st, obj) end
   st.depth, st.path, st.active = 0, {}, true
   local ok, err = pcall(write_object, self, st, obj)
   st.active = false
   if not ok then error('writeObject: ' .. tostring(err), 2) end
end

---------------------------------------------------------------------------------------------
-- Reading
---------------------------------------------------------------------------------------------

local function corrupt(f, what, pos)
   error(fmt('corrupt data: %s at byte %d', what, pos or f:_tell()), 0)
end

-- Strict reads for object data: a short read is corrupt data, whatever quiet() says.
-- One integer of kind K (INT or LONG) and the byte position it started at.
local function rinteger(f, K, what)
   local at = f:_tell()
   local cnt, bad = read_elems(f, K, K.one, 1)
   if cnt < 1 then
      corrupt(f, bad and ('expected an integer (' .. what .. ')') or ('unexpected end of data reading ' .. what), bad or at)
   end
   return K.one[0], at
end
local function rint(f, what) return rinteger(f, INT, what) end
local function rlong(f, what) return rinteger(f, LONG, what) end

-- Checks that n items of `bytes` bytes each (binary; one byte each in ascii) can still
-- be in the data, before anything of that size is allocated.
local function check_room(f, n, bytes, what, at)
   local left = f:_remaining()
   local need = f._binary and n * bytes or n
   if left ~= nil and need > left then
      corrupt(f, fmt('%s claims %s elements but only %d bytes are left', what, tostring(n), left), at)
   end
   if left == nil and need > 2 ^ 31 then corrupt(f, fmt('%s claims %s elements', what, tostring(n)), at) end
end

local function rstring(f, what)
   local n, at = rint(f, what .. ' length')
   if n < 0 then corrupt(f, fmt('negative %s length %d', what, n), at) end
   check_room(f, n, 1, what, at)
   local buf = ffi.new('int8_t[?]', math.max(n, 1))
   if read_elems(f, CHAR, buf, n) < n then corrupt(f, 'unexpected end of data in ' .. what) end
   return ffi.string(buf, n)
end

local function rstate(f)
   local st = f._rst
   if st == nil then
      st = {objs = {}, n = 0, depth = 0}
      f._rst = st
   end
   return st
end

-- The dtype of a builtin tensor or storage class name, and whether it is a CUDA class.
local function builtin_dtype(name, suffix)
   local short = name:match('^torch%.(%w+)' .. suffix .. '$')
   if short == nil then return nil end
   local dt = dtype_of_name['torch.' .. short .. 'Tensor']
   if dt ~= nil then return dt, false end
   dt = torch._cuda_dtype_of_name['torch.' .. short .. 'Tensor']
   return dt, dt ~= nil
end

-- Where a CUDA tensor being read goes: a device code (0: the CPU) from the file's
-- map_location, else the selected device; without CUDA an error naming the class.
local function cuda_target(f, name)
   local ml = f._mapLocation
   if ml == 'cpu' then return C.TC_CPU end
   local ok, why = torch.cuda.isAvailable()
   if not ok then
      error(fmt("cannot load a %s: CUDA unavailable: %s (pass {map_location = 'cpu'} to load CUDA tensors "
                .. 'as CPU tensors)', name, why), 0)
   end
   local dev = ml and tonumber(ml:match('^cuda:(%d+)$'))
   if dev ~= nil then
      if dev >= torch.cuda.deviceCount() then
         error(fmt('cannot load a %s onto %s: no such device (%d devices)', name, ml, torch.cuda.deviceCount()), 0)
      end
      return C.TC_CUDA + dev
   end
   return C.TC_CUDA + torch.cuda.current_device()
end

-- The device copy of host tensor t (read from the file) on device: tensors that viewed one
-- storage view one device storage, the whole storage moved once (cached in the read state).
local function to_device(st, t, device)
   local p = t.p
   if p.device == device then return t end -- made over a CUDA storage read onto device
   if p.storage == nil then
      if C.tc_tensor_to(p, device, -1, outp) ~= 0 then error(ffi.string(C.tc_last_error()), 0) end
      return torch._wrap(outp[0])
   end
   st.dev = st.dev or {}
   local key = addr(p.storage) .. ':' .. device
   local whole = st.dev[key]
   if whole == nil then
      local host = torch._whole_storage(t)
      if C.tc_tensor_to(host.p, device, -1, outp) ~= 0 then error(ffi.string(C.tc_last_error()), 0) end
      whole = torch._wrap(outp[0])
      st.dev[key] = whole
      st.dev_keep = st.dev_keep or {}
      st.dev_keep[#st.dev_keep + 1] = host -- its address stays the key's while reading
   end
   return torch._restride(whole, t)
end

local function refuse_function(f, at)
   if not f._allowFunctions then
      corrupt(f, 'Lua function bytecode (refused: loading it would run code from the data; ' ..
              'pass opts {allowFunctions = true} to allow it)', at)
   end
end

local function load_function(f, dumped, at)
   local fn, err = load(dumped, '=(serialized function)', 'b')
   if fn == nil then corrupt(f, 'function bytecode that does not load (' .. tostring(err) .. ')', at) end
   return fn
end

local read_object

local function read_storage(f, st, dt, at)
   local n, nat = rlong(f, 'storage size')
   if n < 0 then corrupt(f, 'negative storage size ' .. tostring(n), nat) end
   local K = KIND_OF_DT[dt]
   check_room(f, tonumber(n), (K.long and f._longSize == 4) and 4 or K.size, 'a storage', nat)
   n = tonumber(n)
   local s = torch[type_names[dt]:match('^torch%.(.*)Tensor$') .. 'Storage'](n)
   local cnt, bad = read_elems(f, K, ffi.cast(K.ptr, torch._storage_ptr(s)), n)
   if cnt < n then
      corrupt(f, bad and 'a malformed storage element' or fmt('storage data end after %d of %d elements', cnt, n), bad)
   end
   return s
end

local function read_tensor(f, st, dt, at)
   local nd, ndat = rint(f, 'tensor dims')
   if nd < 0 or nd > 64 then corrupt(f, 'tensor with ' .. nd .. ' dims', ndat) end
   if nd > 8 then corrupt(f, fmt('a tensor with %d dims (tocha supports at most 8)', nd), ndat) end
   local cnt = read_elems(f, LONG, sizes_buf, nd)
   if cnt < nd then corrupt(f, 'unexpected end of data in tensor sizes') end
   cnt = read_elems(f, LONG, strides_buf, nd)
   if cnt < nd then corrupt(f, 'unexpected end of data in tensor strides') end
   local off, offat = rlong(f, 'tensor storage offset')
   off = tonumber(off)
   local numel, span = 1, 0
   for k = 0, nd - 1 do
      local sz, sd = tonumber(sizes_buf[k]), tonumber(strides_buf[k])
      if sz < 0 or sz > 2 ^ 50 or sd < 0 or sd > 2 ^ 50 then
         corrupt(f, fmt('tensor size %d / stride %d in dim %d', sz, sd, k + 1), ndat)
      end
      numel = numel * sz
      if sz > 0 then span = span + (sz - 1) * sd end
   end
   local sat = f:_tell()
   local s = read_object(f, st)
   -- a CUDA storage (read onto a device by read_torch) gives a tensor on its device
   local view = torch._storage_view
   if s ~= nil and torch._cuda_storage_dtype(s) == dt then view = torch._cuda_storage_view
   elseif s ~= nil and torch._storage_dtype(s) ~= dt then
      corrupt(f, fmt('a %s whose storage is a %s', type_names[dt], torch.type(s)), sat)
   end
   local tname = type_names[dt]:match('^torch%.(.*)$')
   if nd == 0 then
      -- Torch7's empty tensor; a tocha 0-dim (scalar) tensor has a storage holding it
      if s == nil or off < 1 or off > s:size() then return torch[tname]() end
      local tcs, base = view(s)
      if C.tc_tensor_new_view(tcs, dt, base + tonumber(off) - 1, 0, nil, nil, outp) ~= 0 then
         corrupt(f, 'tensor: ' .. ffi.string(C.tc_last_error()), at)
      end
      return torch._wrap(outp[0])
   end
   if s == nil then
      if numel > 0 then corrupt(f, fmt('a tensor of %d elements without a storage', numel), sat) end
      if C.tc_tensor_new(dt, nd, sizes_buf, outp) ~= 0 then corrupt(f, ffi.string(C.tc_last_error()), at) end
      return torch._wrap(outp[0])
   end
   if off < 1 or (numel > 0 and tonumber(off) - 1 + span >= s:size()) then
      corrupt(f, fmt('a tensor at storage offset %d spanning %d elements of a storage of %d',
                     off, span + 1, s:size()), offat)
   end
   local tcs, base = view(s)
   if tcs == nil then -- an empty CUDA storage: an empty tensor
      if C.tc_tensor_new(dt, nd, sizes_buf, outp) ~= 0 then corrupt(f, ffi.string(C.tc_last_error()), at) end
      return torch._wrap(outp[0])
   end
   if C.tc_tensor_new_view(tcs, dt, base + tonumber(off) - 1, nd, sizes_buf, strides_buf, outp) ~= 0 then
      corrupt(f, 'tensor: ' .. ffi.string(C.tc_last_error()), at)
   end
   return torch._wrap(outp[0])
end

-- The class `name`'s factory; "nn.*" classes load nn first.
local function class_factory(name)
   local factory = torch.factory(name)
   if factory == nil then
      local pkg = name:match('^(%w+)%.')
      if (pkg == 'nn' or pkg == 'optim' or pkg == 'nngraph') and package.loaded[pkg] == nil then
         pcall(require, pkg)
         factory = torch.factory(name)
      end
   end
   return factory
end

local function read_torch(f, st, idx, at)
   local version = rstring(f, 'class version')
   local vnum = tonumber(version:match('^V (.*)$') or '')
   local name
   if vnum == nil then -- written before Torch7 had versions: the name came first
      name, vnum = version, 0
   else
      name = rstring(f, 'class name')
   end
   if #name > 200 or not name:match('^[%a_][%w_%.]*$') then
      corrupt(f, fmt('bad class name %q', name:sub(1, 60)), at)
   end
   local dt, cuda = builtin_dtype(name, 'Tensor')
   if dt ~= nil then
      if not cuda then return read_tensor(f, st, dt, at) end
      local device = cuda_target(f, name)
      local t = read_tensor(f, st, dt, at)
      if device == C.TC_CPU then return t end
      return to_device(st, t, device)
   end
   local scuda
   dt, scuda = builtin_dtype(name, 'Storage')
   if dt ~= nil then
      local s = read_storage(f, st, dt, at)
      if not scuda then return s end
      -- cutorch's storage: onto the device its tensors go to (map_location's rule)
      local device = cuda_target(f, name)
      if device == C.TC_CPU then return s end
      return torch._cuda_storage_from_host(s, device)
   end
   local factory = class_factory(name)
   if factory == nil then
      corrupt(f, fmt("an object of unknown class '%s' (require the package that defines it first)", name), at)
   end
   local obj = factory()
   if type(obj) ~= 'table' then corrupt(f, fmt("an object of class '%s', which cannot be read", name), at) end
   st.objs[idx] = obj -- before its fields: they may refer back to it
   if type(obj.read) == 'function' then
      obj:read(f, vnum)
   else
      local vat = f:_tell()
      local var = read_object(f, st)
      if type(var) ~= 'table' then corrupt(f, fmt("fields of a '%s' that are not a table", name), vat) end
      for k, v in next, var do obj[k] = v end
   end
   return obj
end

read_object = function(f, st)
   local ti, at = rint(f, 'type tag')
   if ti == TYPE_NIL then return nil
   elseif ti == TYPE_NUMBER then
      local cnt, bad = read_elems(f, DOUBLE, DOUBLE.one, 1)
      if cnt < 1 then corrupt(f, bad and 'a malformed number' or 'unexpected end of data in a number', bad) end
      return DOUBLE.get(DOUBLE.one, 0) -- any NaN as Lua's own (File.lua, tensor.lua's GET)
   elseif ti == TYPE_BOOLEAN then
      local b, bat = rint(f, 'boolean')
      if b ~= 0 and b ~= 1 then corrupt(f, 'boolean value ' .. b, bat) end
      return b == 1
   elseif ti == TYPE_STRING then
      return rstring(f, 'string')
   elseif ti == TYPE_FUNCTION then -- legacy: no reference index
      refuse_function(f, at)
      local fn = load_function(f, rstring(f, 'function'), at)
      local ups = read_object(f, st)
      if type(ups) == 'table' then
         for i, v in ipairs(ups) do debug.setupvalue(fn, i, v) end
      end
      return fn
   elseif ti ~= TYPE_TABLE and ti ~= TYPE_TORCH and ti ~= TYPE_RECUR_FUNCTION and ti ~= LEGACY_TYPE_RECUR_FUNCTION then
      corrupt(f, 'unknown type tag ' .. ti, at)
   end

   local idx, iat = rint(f, 'reference index')
   if idx >= 1 and idx <= st.n then
      local obj = st.objs[idx]
      if obj == nil then corrupt(f, fmt('a reference to object %d while it is being read', idx), iat) end
      return obj
   end
   if idx ~= st.n + 1 then
      corrupt(f, fmt('reference index %d out of range (%d objects so far)', idx, st.n), iat)
   end
   st.n = idx
   st.depth = st.depth + 1
   if st.depth > MAX_DEPTH then corrupt(f, fmt('data nested deeper than %d levels', MAX_DEPTH), at) end
   local obj
   if ti == TYPE_TABLE then
      local n, nat = rint(f, 'table size')
      if n < 0 then corrupt(f, 'negative table size ' .. n, nat) end
      check_room(f, n, 8, 'a table', nat) -- each entry needs two type tags at least
      obj = {}
      st.objs[idx] = obj
      for _ = 1, n do
         local kat = f:_tell()
         local k = read_object(f, st)
         local v = read_object(f, st)
         if k == nil or k ~= k then corrupt(f, 'a table key that is nil or NaN', kat) end
         obj[k] = v
      end
   elseif ti == TYPE_TORCH then
      obj = read_torch(f, st, idx, at)
   else
      refuse_function(f, at)
      obj = load_function(f, rstring(f, 'function'), at)
      st.objs[idx] = obj
      local ups = read_object(f, st)
      if type(ups) == 'table' then
         for i, u in ipairs(ups) do
            if ti == TYPE_RECUR_FUNCTION then
               if type(u) ~= 'table' then corrupt(f, 'a malformed function upvalue', at) end
               u = u.name == '_ENV' and _G or u.value
            end
            debug.setupvalue(obj, i, u)
         end
      end
   end
   st.objs[idx] = obj
   st.depth = st.depth - 1
   return obj
end

-- What a file from another program looks like, for the error message.
local magics = {
   {'\137PNG', 'a PNG image'}, {'PK\3\4', 'a zip archive (a PyTorch .pt file?)'},
   {'\31\139', 'gzip data'}, {'\127ELF', 'an ELF executable'}, {'\128', 'a Python pickle'},
   {'\255\216\255', 'a JPEG image'}, {'GIF8', 'a GIF image'}, {'%PDF', 'a PDF document'},
   {'\147NUMPY', 'a NumPy array'}, {'\27Lua', 'Lua bytecode'}, {'\27LJ', 'LuaJIT bytecode'},
}
local function sniff(f)
   local here = f:_tell()
   if not f:_seekTo(0) then return nil end
   local buf = ffi.new('uint8_t[8]')
   local head = ffi.string(buf, File._read_bytes(f, buf, 8))
   f:_seekTo(here)
   for _, m in ipairs(magics) do
      if head:sub(1, #m[1]) == m[1] then return m[2] end
   end
   if f._binary and head:match('^%d+\n') then return "an ascii torch file: load it with format 'ascii'", true end
   if not f._binary and head:match('^[%z\1-\8]') then return "a binary torch file: load it with format 'binary'", true end
   return nil
end

-- Reads one object; a class's read(file) method reads its parts with nested readObject
-- calls, which run inside the outer one.
local function read_top(f)
   local st = rstate(f)
   if st.active then return read_object(f, st) end
   st.depth, st.active = 0, true
   local start = f:_tell()
   local ok, obj = pcall(read_object, f, st)
   st.active = false
   if not ok then
      local msg = tostring(obj)
      if start == 0 and msg:match('at byte 0$') then
         local what, torchfile = sniff(f)
         if torchfile then
            msg = 'wrong format (this is ' .. what .. '): ' .. msg
         else
            msg = 'not a torch serialized file' .. (what and (' (it looks like ' .. what .. ')') or '') .. ': ' .. msg
         end
      end
      error(msg, 0)
   end
   return obj
end

-- Reads one object; allowFunctions(true) first to accept function bytecode.
function File:readObject()
   File._check_read(self, 'readObject', 2)
   if self._rst and self._rst.active then return read_object(self, self._rst) end
   local ok, obj = pcall(read_top, self)
   if not ok then error('readObject: ' .. tostring(obj), 2) end
   return obj
end

-- Whether readObject may load Lua function bytecode (off: loading never runs code).
function File:allowFunctions(b)
   self._allowFunctions = (b ~= false)
   return self
end

---------------------------------------------------------------------------------------------
-- torch.save / load / serialize / deserialize
---------------------------------------------------------------------------------------------

local function set_format(f, format, what, level)
   if format == nil or format == 'binary' then f:binary()
   elseif format == 'ascii' then f:ascii()
   elseif format == 'b32' then f:binary() f:longSize(4)
   elseif format == 'b64' then f:binary() f:longSize(8)
   else
      error(fmt("%s: format must be 'binary', 'ascii', 'b32' or 'b64', got %s", what, tostring(format)), level + 1)
   end
end

local pid
do
   pcall(ffi.cdef, 'int getpid(void);') -- fails harmlessly when already declared
   local ok, v = pcall(function() return ffi.C.getpid() end)
   pid = ok and tonumber(v) or math.random(1, 1e9)
end

local formats = {binary = true, ascii = true, b32 = true, b64 = true}
local map_location -- below

local function check_format(format, what)
   if format ~= nil and not formats[format] then
      error(fmt("%s: format must be 'binary', 'ascii', 'b32' or 'b64', got %s", what, tostring(format)), 3)
   end
end

-- torch.save(filename, object [, format = 'binary' | 'ascii'] [, referenced = true])
function torch.save(filename, obj, format, referenced)
   if type(filename) ~= 'string' then
      error('torch.save: expected a file name (string), got ' .. torch.type(filename), 2)
   end
   check_format(format, 'torch.save')
   local tmp = filename .. '.tmp.' .. pid
   local f = torch.DiskFile(tmp, 'w', true)
   if f == nil then
      local _, err = io.open(tmp, 'wb')
      error(fmt("torch.save: cannot write '%s' (%s)", filename, tostring(err)), 2)
   end
   set_format(f, format, 'torch.save', 1)
   f:referenced(referenced ~= false)
   local st = wstate(f)
   st.active = true
   local ok, err = pcall(write_object, f, st, obj)
   if f._fh then
      local cok, cerr = pcall(f.close, f)
      if ok and not cok then ok, err = false, cerr end
   end
   if ok then
      local sok, serr = torch._fsync(tmp)
      if not sok then ok, err = false, serr end
   end
   if ok then
      local rok, rerr = os.rename(tmp, filename)
      if not rok then ok, err = false, 'cannot rename the temporary file: ' .. tostring(rerr) end
   end
   if not ok then
      os.remove(tmp)
      error(fmt('torch.save: %s: %s (the file was not changed)', filename, tostring(err)), 2)
   end
   -- best effort: some file systems refuse fsync on a directory, and the new file is in
   -- place either way (only its survival of a power cut in the next moments is at stake)
   torch._fsync(torch._directory_of(filename))
end

-- opts.map_location: nil, 'cpu', 'cuda' or 'cuda:N' (where CUDA tensors load), checked.
map_location = function(opts, what, level)
   local ml = opts ~= nil and opts.map_location or nil
   if ml == nil or ml == 'cpu' or ml == 'cuda' or (type(ml) == 'string' and ml:match('^cuda:%d+$')) then
      return ml
   end
   error(fmt("%s: opts.map_location must be 'cpu', 'cuda' or 'cuda:N', got %s", what, tostring(ml)), level + 1)
end

-- torch.load(filename [, format] [, referenced] [, opts]): format 'binary', 'ascii', 'b32'
-- or 'b64' (nil: binary or ascii, whichever the file is); opts {allowFunctions = false,
-- map_location = nil | 'cpu' | 'cuda' | 'cuda:N'}.
function torch.load(filename, format, referenced, opts)
   if type(format) == 'table' then opts, format = format, nil end
   if type(referenced) == 'table' then opts, referenced = referenced, nil end
   if type(filename) ~= 'string' then
      error('torch.load: expected a file name (string), got ' .. torch.type(filename), 2)
   end
   if opts ~= nil and type(opts) ~= 'table' then error('torch.load: opts must be a table', 2) end
   check_format(format, 'torch.load')
   local fh, oerr = io.open(filename, 'rb')
   if not fh then error(fmt("torch.load: cannot open '%s' (%s)", filename, tostring(oerr)), 2) end
   local first = fh:read(1)
   fh:close()
   local f = torch.DiskFile(filename, 'r')
   if format == nil and first ~= nil and first:match('^[%d%-]$') then format = 'ascii' end -- binary tags are 0..8
   set_format(f, format, 'torch.load', 1)
   f:referenced(referenced ~= false)
   f._allowFunctions = opts ~= nil and opts.allowFunctions and true or false
   f._mapLocation = map_location(opts, 'torch.load', 2)
   local ok, obj = pcall(read_top, f)
   f:close()
   if not ok then error(fmt('torch.load: %s: %s', filename, tostring(obj)), 2) end
   return obj
end

-- torch.serialize(object [, format = 'binary']) -> string
function torch.serialize(obj, format)
   check_format(format, 'torch.serialize')
   local f = torch.MemoryFile('w')
   set_format(f, format, 'torch.serialize', 2)
   local st = wstate(f)
   st.active = true
   local ok, err = pcall(write_object, f, st, obj)
   if not ok then error('torch.serialize: ' .. tostring(err), 2) end
   local s = f:_string()
   f:close()
   return s
end

-- torch.deserialize(string [, format = 'binary'] [, opts]) -> object
function torch.deserialize(str, format, opts)
   if type(format) == 'table' then opts, format = format, nil end
   if type(str) ~= 'string' then error('torch.deserialize: expected a string, got ' .. torch.type(str), 2) end
   check_format(format, 'torch.deserialize')
   local f = torch._memory_file_of_string(str)
   set_format(f, format, 'torch.deserialize', 2)
   f._allowFunctions = opts ~= nil and opts.allowFunctions and true or false
   f._mapLocation = map_location(opts, 'torch.deserialize', 2)
   local ok, obj = pcall(read_top, f)
   if not ok then error('torch.deserialize: ' .. tostring(obj), 2) end
   return obj
end
