-- torch/utils.lua -- Torch7's utility functions: torch.pointer, torch.version,
-- torch.setnumthreads / getnumthreads. (torch.isStorage and the storage type names come
-- with storage.lua; torch.setdefaulttensortype with init.lua.)
local torch = ...
local ffi = require 'ffi'

local C = torch._C
local U = torch._tensor_util

-- torch.pointer(obj): a number identifying obj's memory. Tensors: their header (two views
-- of one storage differ); storages: the tc_storage (every storage object over the same
-- memory agrees); other Lua values: their address.
function torch.pointer(obj)
   if U.isT(obj) then return tonumber(ffi.cast('intptr_t', obj.p)) end
   if torch._storage_dtype(obj) ~= nil then
      local _ = obj:data() -- an inline storage moves to C memory first
      return tonumber(ffi.cast('intptr_t', obj.p.storage))
   end
   if type(obj) == 'cdata' then return tonumber(ffi.cast('intptr_t', ffi.cast('void*', obj))) end
   local addr = tostring(obj):match('0x%x+')
   if addr == nil then error('torch.pointer: ' .. type(obj) .. ' values have no address', 2) end
   return tonumber(addr)
end

torch.version = ffi.string(C.tc_version())

function torch.setnumthreads(n)
   if type(n) ~= 'number' or n ~= math.floor(n) or n < 1 then
      error('torch.setnumthreads: expected a positive integer, got ' .. tostring(n), 2)
   end
   C.tc_set_num_threads(n)
end

function torch.getnumthreads() return C.tc_get_num_threads() end
