-- torch/MemoryFile.lua -- torch.MemoryFile: a torch.File over a growable buffer in memory
-- (what torch.serialize / torch.deserialize use).
--
-- The buffer is FFI memory (`uint8_t[?]`, owned by the GC) whose capacity doubles as
-- writes pass its end; the whole content is File.lua's read window (self._p, self._pn
-- bytes, cursor self._pi), so reads never refill. storage() hands out a CharStorage copy
-- ending with a 0 byte, as Torch7's did, and torch.MemoryFile(storage) expects that 0.
-- torch._memory_file_of_string(str) reads a Lua string in place (no copy; read-only).
local torch = ...
local ffi = require 'ffi'

local File = torch._File
local fmt = string.format
local cu8p = File._cu8p

local MemoryFile = torch.class('torch.MemoryFile', 'torch.File')

local modes = {r = {true, false}, w = {false, true}, rw = {true, true}}

local function set_buffer(self, cap)
   local buf = ffi.new('uint8_t[?]', cap)
   if self._pn > 0 then ffi.copy(buf, self._p, self._pn) end
   self._buf, self._cap, self._p = buf, cap, buf
end

-- torch.MemoryFile([mode = 'rw']) or torch.MemoryFile(charStorage [, mode = 'rw']): the
-- storage's bytes (less its final 0) are the initial content, copied.
function MemoryFile:__init(a, b)
   local storage, mode
   if type(a) == 'string' or a == nil then
      mode = a or 'rw'
   else
      storage, mode = a, b or 'rw'
   end
   local rw = modes[mode]
   if rw == nil then error(fmt("torch.MemoryFile: file mode should be 'r', 'w' or 'rw', got %s", tostring(mode)), 3) end
   self:_setup('<memory>', rw[1], rw[2], false)
   self._buf, self._cap = nil, 0
   if storage ~= nil then
      if torch.typename(storage) ~= 'torch.CharStorage' then
         error('torch.MemoryFile: expected a torch.CharStorage or a mode, got ' .. torch.type(storage), 3)
      end
      local n = storage:size()
      if n == 0 or storage[n] ~= 0 then
         error('torch.MemoryFile: the CharStorage must end with a 0 byte (as storage() returns it)', 3)
      end
      set_buffer(self, math.max(n - 1, 64))
      ffi.copy(self._buf, torch._storage_ptr(storage), n - 1)
      self._pn = n - 1
   else
      set_buffer(self, 64)
   end
end

-- A read-only MemoryFile over the bytes of a Lua string, without copying them.
function torch._memory_file_of_string(str)
   local f = setmetatable({}, MemoryFile)
   f:_setup('<string>', true, false, false)
   f._str = str -- keeps the bytes alive
   f._p, f._pn, f._pi = ffi.cast(cu8p, str), #str, 0
   return f
end

function MemoryFile:_refill() return false end

function MemoryFile:_writeRaw(x, n)
   if type(x) == 'string' then n = #x end
   local need = self._pi + n
   if need > self._cap then
      local cap = self._cap * 2
      while cap < need do cap = cap * 2 end
      set_buffer(self, cap)
   end
   ffi.copy(self._buf + self._pi, x, n)
   self._pi = need
   if need > self._pn then self._pn = need end
end

function MemoryFile:_tell() return self._pi end
function MemoryFile:_seekTo(pos)
   if pos > self._pn then return nil, fmt('the file holds %d bytes', self._pn) end
   self._pi = pos
   return true
end
function MemoryFile:_seekEndRaw() self._pi = self._pn end
function MemoryFile:_length() return self._pn end
function MemoryFile:_flushRaw() end
function MemoryFile:_closeRaw() self._buf, self._str, self._cap = nil, nil, 0 end

-- The content as a new CharStorage of size()+1 bytes, the last one 0 (Torch7's layout).
function MemoryFile:storage()
   if self._closed then error('storage: attempt to use a closed file', 2) end
   local n = self._pn
   local s = torch.CharStorage(n + 1)
   local d = torch._storage_ptr(s)
   if n > 0 then ffi.copy(d, self._p, n) end
   d[n] = 0
   return s
end

-- The content as a Lua string (serialize's result).
function MemoryFile:_string()
   return ffi.string(self._p, self._pn)
end
