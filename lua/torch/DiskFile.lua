-- torch/DiskFile.lua -- torch.DiskFile (a file on disk) and torch.PipeFile (a command's
-- stdin or stdout), the byte streams under torch.File's typed reads and writes.
--
-- Both sit on Lua's io handles (C stdio underneath), so nothing here is declared to the FFI
-- and no handle can leak past the GC. Reads fill a 64 KB window (a Lua string kept in
-- self._chunk, read through a pointer) that File.lua parses; large reads bypass it in
-- 16 MB pieces. Invariant: the handle's real position is self._winbase + self._pn (the end
-- of the window); the logical position is self._winbase + self._pi. C stdio needs a seek
-- between a read and a write on the same handle, so switching direction seeks.
local torch = ...
local ffi = require 'ffi'

local File = torch._File
local fmt, min = string.format, math.min
local cu8p = File._cu8p

local WINDOW = 65536
local PIECE = 16 * 1024 * 1024

local DiskFile = torch.class('torch.DiskFile', 'torch.File')

local modes = {r = {true, false}, w = {false, true}, rw = {true, true}}

local function open_handle(name, mode)
   if mode == 'r' then return io.open(name, 'rb') end
   if mode == 'w' then return io.open(name, 'wb') end
   local fh = io.open(name, 'r+b') -- rw: open, or create
   if fh then return fh end
   local created, err = io.open(name, 'wb')
   if not created then return nil, err end
   created:close()
   return io.open(name, 'r+b')
end

-- torch.DiskFile(name [, mode = 'r' | 'w' | 'rw'] [, quiet]): a quiet open that fails
-- returns nil (Torch7).
function DiskFile:__init(name, mode, quiet)
   if type(name) ~= 'string' then
      error('torch.DiskFile: expected a file name (string), got ' .. torch.type(name), 3)
   end
   mode = mode or 'r'
   local rw = modes[mode]
   if rw == nil then error(fmt("torch.DiskFile: file mode should be 'r', 'w' or 'rw', got %s", tostring(mode)), 3) end
   local fh, err = open_handle(name, mode)
   if not fh then
      if quiet then self._openFailed = true return end
      error(fmt("torch.DiskFile: cannot open '%s' in mode %s (%s)", name, mode, tostring(err)), 3)
   end
   self:_setup(name, rw[1], rw[2], quiet)
   self._fh = fh
   self._winbase = 0
   self._dir = nil -- 'r' or 'w': the last direction used on the handle
   self._len = fh:seek('end') or 0
   fh:seek('set', 0)
end

-- construction returning nil for a failed quiet open
local function quiet_constructor(cls)
   getmetatable(cls).__call = function(c, ...)
      local obj = setmetatable({}, c)
      obj:__init(...)
      if rawget(obj, '_openFailed') then return nil end
      return obj
   end
end
quiet_constructor(DiskFile)

function DiskFile:name() return self._name end

local function set_dir(self, dir)
   if self._dir ~= dir then
      if self._dir ~= nil then self._fh:seek('set', self._winbase + self._pi) end
      self._winbase = self._winbase + self._pi
      self._p, self._pn, self._pi, self._chunk = nil, 0, 0, nil
      self._dir = dir
   end
end

function DiskFile:_refill()
   set_dir(self, 'r')
   self._winbase = self._winbase + self._pn
   local chunk = self._fh:read(WINDOW)
   if chunk == nil or #chunk == 0 then
      self._p, self._pn, self._pi, self._chunk = nil, 0, 0, nil
      return false
   end
   self._chunk = chunk
   self._p, self._pn, self._pi = ffi.cast(cu8p, chunk), #chunk, 0
   return true
end

-- Large reads past an exhausted window, straight from the handle.
function DiskFile:_readDirect(dst, n)
   set_dir(self, 'r')
   self._winbase = self._winbase + self._pn
   self._p, self._pn, self._pi, self._chunk = nil, 0, 0, nil
   local got = 0
   while got < n do
      local piece = self._fh:read(min(PIECE, n - got))
      if piece == nil or #piece == 0 then break end
      ffi.copy(dst + got, piece, #piece)
      got = got + #piece
      self._winbase = self._winbase + #piece
   end
   return got
end

function DiskFile:_writeRaw(x, n)
   set_dir(self, 'w')
   local fh = self._fh
   local ok, err
   if type(x) == 'string' then
      n = #x
      ok, err = fh:write(x)
   else
      local p = ffi.cast(cu8p, x)
      local off = 0
      ok = true
      while ok and off < n do
         local k = min(PIECE, n - off)
         ok, err = fh:write(ffi.string(p + off, k))
         off = off + k
      end
   end
   if not ok then
      self._hasError = true
      error(fmt("write error on '%s': %s", tostring(self._name), tostring(err)), 0)
   end
   self._winbase = self._winbase + n
   if self._len ~= nil and self._winbase > self._len then self._len = self._winbase end
end

function DiskFile:_tell() return self._winbase + self._pi end

function DiskFile:_seekTo(pos)
   local ok, err = self._fh:seek('set', pos)
   if not ok then return nil, err end
   self._winbase, self._dir = pos, nil
   self._p, self._pn, self._pi, self._chunk = nil, 0, 0, nil
   return true
end

function DiskFile:_seekEndRaw()
   local pos = self._fh:seek('end')
   self._winbase, self._dir = pos, nil
   self._p, self._pn, self._pi, self._chunk = nil, 0, 0, nil
end

function DiskFile:_length() return self._len end
function DiskFile:_flushRaw() self._fh:flush() end
function DiskFile:_closeRaw()
   self._fh:close()
   self._fh = nil
   self._chunk = nil
end

-- Endianness of binary files (Torch7: native unless told otherwise).
function DiskFile:isLittleEndianCPU() return ffi.abi('le') end
function DiskFile:isBigEndianCPU() return ffi.abi('be') end
function DiskFile:nativeEndianEncoding() self._native = true return self end
function DiskFile:littleEndianEncoding() self._native = ffi.abi('le') return self end
function DiskFile:bigEndianEncoding() self._native = ffi.abi('be') return self end
function DiskFile:noBuffer()
   if self._closed then error('noBuffer: attempt to use a closed file', 2) end
   self._fh:setvbuf('no')
   return self
end

---------------------------------------------------------------------------------------------
-- PipeFile
---------------------------------------------------------------------------------------------

local PipeFile = torch.class('torch.PipeFile', 'torch.DiskFile')

-- torch.PipeFile(command [, mode = 'r' | 'w'] [, quiet]): reads the command's output or
-- writes its input. No seeking; lengths are unknown, so torch.load of a pipe cannot check
-- sizes against the end of the data before allocating.
function PipeFile:__init(cmd, mode, quiet)
   if type(cmd) ~= 'string' then
      error('torch.PipeFile: expected a command (string), got ' .. torch.type(cmd), 3)
   end
   mode = mode or 'r'
   if mode ~= 'r' and mode ~= 'w' then
      error(fmt("torch.PipeFile: file mode should be 'r' or 'w', got %s", tostring(mode)), 3)
   end
   local fh, err = io.popen(cmd, mode)
   if not fh then
      if quiet then self._openFailed = true return end
      error(fmt("torch.PipeFile: cannot run '%s' (%s)", cmd, tostring(err)), 3)
   end
   self:_setup(cmd, mode == 'r', mode == 'w', quiet)
   self._fh = fh
   self._winbase = 0
   self._dir = mode
   self._len = nil
end
quiet_constructor(PipeFile)

function PipeFile:_seekTo() return nil, 'a pipe cannot seek' end
function PipeFile:_seekEndRaw() error('seekEnd: a pipe cannot seek', 3) end
function PipeFile:_length() return nil end
