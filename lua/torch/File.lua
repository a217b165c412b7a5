-- torch/File.lua -- torch.File, the base class of DiskFile, PipeFile and MemoryFile:
-- Torch7's typed reads and writes (Byte Char Short Int Long Float Double: one value, n
-- values into a new storage, or a storage's worth), binary and ascii encodings, quiet /
-- pedantic error handling, 1-based positions. The object format (writeObject /
-- readObject, the .t7 files) is serialize.lua's.
--
-- Encodings (Torch7's THFile): binary writes raw native little-endian elements (Long as 8
-- bytes unless longSize(4)); ascii writes Short/Int/Long as %d, Float as %.9g, Double as
-- %.17g (both round-trip exactly), Byte/Char as raw bytes, with one space between the
-- elements of a call and a newline after it ("auto spacing").
--
-- A subclass supplies the byte stream. Reads go through a byte window (self._p, a
-- `const uint8_t*`, with self._pn bytes and the cursor self._pi) that the subclass refills,
-- so ascii parsing costs no call into io per byte. Subclass hooks:
--   _refill() -> bool            next window at the current position (false at the end)
--   _readDirect(ptr, n) -> k     (optional) large reads past an exhausted window
--   _writeRaw(ptr | string, n)   n bytes at the current position
--   _tell() -> pos0, _seekTo(pos0), _seekEndRaw(), _length() -> bytes or nil (unknown)
--   _flushRaw(), _closeRaw()
local torch = ...
local ffi = require 'ffi'

local C = torch._C
local E = torch._elem
local fmt, floor, min = string.format, math.floor, math.min

local File = torch.class('torch.File')
torch._File = File

function File:__init()
   error('torch.File: an abstract class: open a torch.DiskFile, torch.MemoryFile or torch.PipeFile', 3)
end

-- Common state; called by the subclasses' constructors.
function File:_setup(name, readable, writable, quiet)
   self._name = name
   self._readable, self._writable = readable, writable
   self._binary, self._autoSpacing = false, true -- Torch7 files open in ascii mode
   self._quiet, self._hasError = quiet and true or false, false
   self._native, self._longSize = true, 0
   self._force = false -- referenced(false): every object written in full
   self._p, self._pn, self._pi = nil, 0, 0
   self._closed = false
end

---------------------------------------------------------------------------------------------
-- Checks and errors
---------------------------------------------------------------------------------------------

local function check_open(self, what, level)
   if self._closed then error(what .. ': attempt to use a closed file', level + 1) end
end
local function check_read(self, what, level)
   check_open(self, what, level + 1)
   if not self._readable then error(what .. ': attempt to read in a write-only file', level + 1) end
end
local function check_write(self, what, level)
   check_open(self, what, level + 1)
   if not self._writable then error(what .. ': attempt to write in a read-only file', level + 1) end
end
File._check_read, File._check_write = check_read, check_write

-- A failed read or write: pedantic files raise, quiet ones only set hasError().
local function fail(self, msg, level)
   self._hasError = true
   if not self._quiet then error(msg, level + 1) end
end

---------------------------------------------------------------------------------------------
-- The byte window
---------------------------------------------------------------------------------------------

local u8p = ffi.typeof('uint8_t*')
local cu8p = ffi.typeof('const uint8_t*')

-- Next byte (a number), or nil at the end.
local function getc(self)
   if self._pi >= self._pn and not self:_refill() then return nil end
   local c = self._p[self._pi]
   self._pi = self._pi + 1
   return c
end
-- Steps back over the byte getc just returned.
local function ungetc(self) self._pi = self._pi - 1 end

-- Copies up to n bytes to dst; returns how many there were.
local BIG = 65536
local function read_bytes(self, dst, n)
   dst = ffi.cast(u8p, dst)
   local got = 0
   while got < n do
      local avail = self._pn - self._pi
      if avail > 0 then
         local k = min(avail, n - got)
         ffi.copy(dst + got, self._p + self._pi, k)
         self._pi = self._pi + k
         got = got + k
      elseif n - got >= BIG and self._readDirect then
         got = got + self:_readDirect(dst + got, n - got)
         break
      elseif not self:_refill() then
         break
      end
   end
   return got
end

local function is_space(c) return c == 32 or (c >= 9 and c <= 13) end

-- The next whitespace-delimited token (at most 80 bytes; longer ones come back as '?'
-- so they fail to parse), or nil at the end.
local tokbuf = ffi.new('uint8_t[81]')
local function token(self)
   local c = getc(self)
   while c ~= nil and is_space(c) do c = getc(self) end
   if c == nil then return nil end
   local n = 0
   while c ~= nil and not is_space(c) do
      if n < 81 then tokbuf[n] = c end
      n = n + 1
      c = getc(self)
   end
   if c ~= nil then ungetc(self) end
   if n > 80 then return '?' end
   return ffi.string(tokbuf, n)
end

-- Bytes left before the end, or nil when the stream cannot tell (pipes).
function File:_remaining()
   local len = self:_length()
   if len == nil then return nil end
   return len - self:_tell()
end

---------------------------------------------------------------------------------------------
-- Element kinds
---------------------------------------------------------------------------------------------

-- One entry per element encoding; `text(ptr, i)` formats element i for ascii, `parse(tok)`
-- returns the value to store or nil when tok is not one.
local function parse_int(lo, hi)
   return function(tok)
      local v = tonumber(tok)
      if v == nil or v % 1 ~= 0 or v < lo or v > hi then return nil end
      return v
   end
end
local function parse_float(tok) return tonumber(tok) end
-- int64 text, exactly (Lua numbers stop at 2^53)
local function parse_long(tok)
   local sign, digits = tok:match('^([+-]?)(%d+)$')
   if digits == nil or #digits > 19 then return nil end
   local v = 0LL
   for k = 1, #digits do v = v * 10 + (digits:byte(k) - 48) end
   if v < 0 then return nil end -- overflow
   return sign == '-' and -v or v
end
local function long_text(v) return (tostring(v):gsub('[UL]+$', '')) end

local GET, SET = E.GET, E.SET
local KIND = {}
local function kind(name, dt, ct, t)
   t.name, t.dt, t.ct = name, dt, ct
   t.size = ffi.sizeof(ct)
   t.ptr = ffi.typeof(ct .. '*')
   t.one = ffi.new(ct .. '[1]')
   KIND[name] = t
   return t
end
kind('Byte', C.TC_U8, 'uint8_t', {raw = true})
kind('Char', C.TC_I8, 'int8_t', {raw = true})
kind('Short', C.TC_I16, 'int16_t', {text = function(p, i) return fmt('%d', p[i]) end,
                                    parse = parse_int(-32768, 32767)})
kind('Int', C.TC_I32, 'int32_t', {text = function(p, i) return fmt('%d', p[i]) end,
                                  parse = parse_int(-2147483648, 2147483647)})
kind('Long', C.TC_I64, 'int64_t', {long = true, text = function(p, i) return long_text(p[i]) end,
                                   parse = parse_long})
-- floats are read with GET (tensor.lua): a NaN read plainly could become another Lua type
local get_f32, get_f64 = GET[C.TC_F32], GET[C.TC_F64]
kind('Float', C.TC_F32, 'float', {text = function(p, i) return fmt('%.9g', get_f32(p, i)) end, parse = parse_float,
                                  get = get_f32})
kind('Double', C.TC_F64, 'double', {text = function(p, i) return fmt('%.17g', get_f64(p, i)) end,
                                    parse = parse_float, get = get_f64})
-- storages Torch7 did not have (Half did exist late, raw 16 bits in binary files)
for _, h in ipairs({{'Half', C.TC_F16}, {'BFloat16', C.TC_BF16}}) do
   local get, set = GET[h[2]], SET[h[2]]
   kind(h[1], h[2], 'uint16_t', {text = function(p, i) return fmt('%.9g', get(p, i)) end, parse = parse_float,
                                 store = set})
end
kind('Bool', C.TC_BOOL, 'bool', {text = function(p, i) return p[i] and '1' or '0' end,
                                 parse = function(tok)
                                    if tok == '1' then return true elseif tok == '0' then return false end
                                 end})
local KIND_OF_DT = {}
for _, k in pairs(KIND) do KIND_OF_DT[k.dt] = k end
File._KIND, File._KIND_OF_DT = KIND, KIND_OF_DT

-- Reverses the bytes of each of n elements of `size` bytes at p (uint8_t*), in place.
local function reverse_elems(p, size, n)
   for b = 0, n - 1 do
      local base = b * size
      for i = 0, size / 2 - 1 do
         local x = p[base + i]
         p[base + i] = p[base + size - 1 - i]
         p[base + size - 1 - i] = x
      end
   end
end

-- Writes n elements of kind K at ptr (typed K.ptr). Returns n.
local function write_elems(self, K, ptr, n)
   if n == 0 then return 0 end
   if self._binary then
      local size, bytes = K.size, n * K.size
      if K.long and self._longSize == 4 then
         local tmp = ffi.new('int32_t[?]', n)
         for i = 0, n - 1 do tmp[i] = ptr[i] end
         ptr, size, bytes = tmp, 4, n * 4
      end
      if not self._native and size > 1 then
         local tmp = ffi.new('uint8_t[?]', bytes)
         ffi.copy(tmp, ptr, bytes)
         reverse_elems(tmp, size, n)
         ptr = tmp
      end
      self:_writeRaw(ptr, bytes)
   else
      if K.raw then
         self:_writeRaw(ptr, n)
      else
         local sep = self._autoSpacing and ' ' or ''
         local text, parts, np = K.text, {}, 0
         for i = 0, n - 1 do
            np = np + 1
            parts[np] = text(ptr, i)
            if np == 4096 and i < n - 1 then
               self:_writeRaw(table.concat(parts, sep) .. sep)
               parts, np = {}, 0
            end
         end
         self:_writeRaw(table.concat(parts, sep))
      end
      if self._autoSpacing then self:_writeRaw('\n') end
   end
   return n
end
File._write_elems = write_elems

-- Reads up to n elements of kind K into ptr. Returns the count read and, when an ascii
-- token did not parse, the byte offset where it started.
local function read_elems(self, K, ptr, n)
   if n == 0 then return 0 end
   local cnt, badpos = 0, nil
   if self._binary then
      local size = K.size
      if K.long and self._longSize == 4 then
         local tmp = ffi.new('int32_t[?]', n)
         cnt = floor(read_bytes(self, tmp, n * 4) / 4)
         if not self._native then reverse_elems(ffi.cast(u8p, tmp), 4, cnt) end
         for i = 0, cnt - 1 do ptr[i] = tmp[i] end
      else
         cnt = floor(read_bytes(self, ptr, n * size) / size)
         if not self._native and size > 1 then reverse_elems(ffi.cast(u8p, ptr), size, cnt) end
      end
   else
      if K.raw then
         cnt = read_bytes(self, ptr, n)
      else
         local parse, store = K.parse, K.store
         for i = 0, n - 1 do
            local at = self:_tell()
            local tok = token(self)
            if tok == nil then break end
            local v = parse(tok)
            if v == nil then badpos = at break end
            if store then store(ptr, i, v) else ptr[i] = v end
            cnt = cnt + 1
         end
      end
      if self._autoSpacing and cnt == n then
         local c = getc(self)
         if c ~= nil and c ~= 10 then ungetc(self) end
      end
   end
   return cnt, badpos
end
File._read_elems = read_elems

---------------------------------------------------------------------------------------------
-- Typed reads and writes: readInt() / readInt(n) / readInt(storage), writeInt(v | storage)
---------------------------------------------------------------------------------------------

for _, name in ipairs({'Byte', 'Char', 'Short', 'Int', 'Long', 'Float', 'Double'}) do
   local K = KIND[name]
   local sname = 'torch.' .. name .. 'Storage'
   local wname, rname = 'write' .. name, 'read' .. name

   File[wname] = function(self, x)
      check_write(self, wname, 2)
      if type(x) == 'number' then
         if K.long or K.parse ~= parse_float then
            if x % 1 ~= 0 then error(fmt('%s: expected an integer, got %s', wname, tostring(x)), 2) end
         end
         K.one[0] = x
         return write_elems(self, K, K.one, 1)
      elseif torch._storage_dtype(x) == K.dt then
         return write_elems(self, K, ffi.cast(K.ptr, torch._storage_ptr(x)), x:size())
      end
      error(fmt('%s: expected a number or a %s, got %s', wname, sname, torch.type(x)), 2)
   end

   File[rname] = function(self, x)
      check_read(self, rname, 2)
      if x == nil then
         local cnt = read_elems(self, K, K.one, 1)
         if cnt < 1 then
            fail(self, rname .. ': read error: read 0 blocks instead of 1', 2)
            return 0
         end
         if K.get then return K.get(K.one, 0) end
         return K.long and tonumber(K.one[0]) or K.one[0]
      end
      local s, n
      if type(x) == 'number' then
         if x < 0 or x % 1 ~= 0 then error(fmt('%s: invalid number of elements %s', rname, tostring(x)), 2) end
         n = x
         s = torch[name .. 'Storage'](n)
      elseif torch._storage_dtype(x) == K.dt then
         s, n = x, x:size()
      else
         error(fmt('%s: expected nothing, a count or a %s, got %s', rname, sname, torch.type(x)), 2)
      end
      local cnt = read_elems(self, K, ffi.cast(K.ptr, torch._storage_ptr(s)), n)
      if type(x) ~= 'number' then torch._storage_written(s) end
      if cnt < n then fail(self, fmt('%s: read error: read %d blocks instead of %d', rname, cnt, n), 2) end
      if type(x) == 'number' then return s end
      return cnt
   end
end

-- Booleans travel as Ints (Torch7).
function File:writeBool(b)
   check_write(self, 'writeBool', 2)
   KIND.Int.one[0] = b and 1 or 0
   return write_elems(self, KIND.Int, KIND.Int.one, 1)
end
function File:readBool()
   check_read(self, 'readBool', 2)
   local cnt = read_elems(self, KIND.Int, KIND.Int.one, 1)
   if cnt < 1 then fail(self, 'readBool: read error: read 0 blocks instead of 1', 2) return false end
   return KIND.Int.one[0] == 1
end

-- writeString(s): the raw bytes, no length, no spacing (Torch7).
function File:writeString(s)
   check_write(self, 'writeString', 2)
   if type(s) ~= 'string' then error('writeString: expected a string, got ' .. torch.type(s), 2) end
   if #s > 0 then self:_writeRaw(s) end
   return #s
end

-- readString('*a') the rest; readString('*l') one line without its end; readString(n) n bytes.
function File:readString(format)
   check_read(self, 'readString', 2)
   format = format or '*a'
   if type(format) == 'number' then
      if format < 0 or format % 1 ~= 0 then error('readString: invalid byte count ' .. format, 2) end
      local buf = ffi.new('uint8_t[?]', math.max(format, 1))
      local got = read_bytes(self, buf, format)
      if got < format then fail(self, fmt('readString: read error: read %d bytes instead of %d', got, format), 2) end
      return ffi.string(buf, got)
   end
   if format:sub(1, 2) == '*a' then
      local parts = {}
      local buf = ffi.new('uint8_t[?]', BIG)
      while true do
         local got = read_bytes(self, buf, BIG)
         if got > 0 then parts[#parts + 1] = ffi.string(buf, got) end
         if got < BIG then break end
      end
      return table.concat(parts)
   elseif format:sub(1, 2) == '*l' then
      local parts, c = {}, getc(self)
      if c == nil then fail(self, 'readString: read error: end of file', 2) return '' end
      while c ~= nil and c ~= 10 do
         parts[#parts + 1] = string.char(c)
         c = getc(self)
      end
      return table.concat(parts)
   end
   error("readString: format must be '*a', '*l' or a byte count", 2)
end

---------------------------------------------------------------------------------------------
-- Modes and state
---------------------------------------------------------------------------------------------

function File:binary() check_open(self, 'binary', 2) self._binary = true return self end
function File:ascii() check_open(self, 'ascii', 2) self._binary = false return self end
function File:autoSpacing() self._autoSpacing = true return self end
function File:noAutoSpacing() self._autoSpacing = false return self end
function File:quiet() self._quiet = true return self end
function File:pedantic() self._quiet = false return self end
function File:clearError() self._hasError = false return self end
function File:hasError() return self._hasError end
function File:isQuiet() return self._quiet end
function File:isBinary() return self._binary end
function File:isAutoSpacing() return self._autoSpacing end
function File:isReadable() return self._readable and not self._closed end
function File:isWritable() return self._writable and not self._closed end
function File:isOpened() return not self._closed end

-- referenced(false): objects are written in full every time they occur (no shared
-- references; a cycle then cannot be written).
function File:referenced(ref)
   self._force = (ref == false)
   return self
end
function File:noReferences() return self:referenced(false) end
function File:isReferenced() return not self._force end

-- Long size in binary files: 0 (native, 8 here), 4 or 8 bytes.
function File:longSize(n)
   if n ~= 0 and n ~= 4 and n ~= 8 then error('longSize: expected 0, 4 or 8, got ' .. tostring(n), 2) end
   self._longSize = n
   return self
end

-- Positions count from 1 (Torch7).
function File:position()
   check_open(self, 'position', 2)
   return self:_tell() + 1
end
function File:seek(pos)
   check_open(self, 'seek', 2)
   if type(pos) ~= 'number' or pos < 1 or pos % 1 ~= 0 then
      error('seek: expected a position >= 1, got ' .. tostring(pos), 2)
   end
   local ok, err = self:_seekTo(pos - 1)
   if not ok then fail(self, fmt('seek: unable to seek to position %d%s', pos, err and (' (' .. err .. ')') or ''), 2) end
   return self
end
function File:seekEnd()
   check_open(self, 'seekEnd', 2)
   self:_seekEndRaw()
   return self
end
function File:synchronize()
   check_open(self, 'synchronize', 2)
   self:_flushRaw()
   return self
end
function File:close()
   check_open(self, 'close', 2)
   self:_closeRaw()
   self._closed = true
   self._p, self._pn, self._pi = nil, 0, 0
   return true
end

File._getc, File._ungetc, File._token, File._read_bytes, File._fail = getc, ungetc, token, read_bytes, fail
File._cu8p = cu8p
