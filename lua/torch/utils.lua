-- torch/utils.lua -- Torch7's utility functions: torch.pointer, torch.version,
-- torch.setnumthreads / getnumthreads; and torch._fsync for durable saves. (torch.isStorage
-- and the storage type names come with storage.lua; torch.setdefaulttensortype with init.lua.)
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

-- Durability (torch.save, serialize.lua): the temporary file's bytes reach the disk before
-- the rename (fsync of the file), and the rename before torch.save returns (fsync of its
-- directory), so a crash or power cut leaves the previous file or the new one, never an
-- empty or half file under the name. Through libc's fopen/fileno/fsync: no open() flags,
-- whose values differ between architectures. torch.save looks torch._fsync up at each call
-- (tests replace it).
for _, decl in ipairs{'void *fopen(const char *path, const char *mode);', 'int fclose(void *f);',
                      'int fileno(void *f);', 'int fsync(int fd);'} do
   pcall(ffi.cdef, decl) -- fails harmlessly when already declared
end

-- Flushes path (a file or a directory) to the disk; true, or nil and the reason.
function torch._fsync(path)
   local f = ffi.C.fopen(path, 'rb')
   if f == nil then return nil, 'cannot open ' .. path .. ' to sync it (errno ' .. ffi.errno() .. ')' end
   local r = ffi.C.fsync(ffi.C.fileno(f))
   local e = ffi.errno()
   ffi.C.fclose(f)
   if r ~= 0 then return nil, 'fsync of ' .. path .. ' failed (errno ' .. e .. ')' end
   return true
end

-- The directory holding path ("." for a bare name).
function torch._directory_of(path)
   local d = path:match('^(.*)/[^/]*$')
   if d == nil then return '.' end
   return d == '' and '/' or d
end
