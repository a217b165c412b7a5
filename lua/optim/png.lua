-- optim/png.lua -- a small PNG encoder (8-bit RGB, no interlace) for optim.Logger's plots.
--
-- The image data is a zlib stream. When the system zlib can be loaded through the FFI
-- (libz is what libtocha links for gzip data files) it is deflate-compressed with
-- compress2; otherwise, or with opts.stored, it is written as "stored" (uncompressed)
-- deflate blocks, which every PNG reader accepts. CRC-32 and Adler-32 are computed here
-- either way, so the file never depends on zlib being present.
local ffi = require 'ffi'
local bit = require 'bit'
local band, bxor, rshift, lshift, bnot = bit.band, bit.bxor, bit.rshift, bit.lshift, bit.bnot

local M = {}

ffi.cdef [[
int compress2(uint8_t *dest, unsigned long *destLen, const uint8_t *source,
              unsigned long sourceLen, int level);
unsigned long compressBound(unsigned long sourceLen);
int uncompress(uint8_t *dest, unsigned long *destLen, const uint8_t *source,
               unsigned long sourceLen);
]]

-- The zlib library or nil (tried once).
local zlib_lib, zlib_tried
function M.zlib()
   if not zlib_tried then
      zlib_tried = true
      for _, name in ipairs {'z', 'libz.so.1', 'libz.so'} do
         local ok, lib = pcall(ffi.load, name)
         if ok and pcall(function() return lib.compress2 end) then zlib_lib = lib break end
      end
   end
   return zlib_lib
end

local crc_table = {}
for n = 0, 255 do
   local c = n
   for _ = 1, 8 do
      if band(c, 1) ~= 0 then c = bxor(0xEDB88320, rshift(c, 1)) else c = rshift(c, 1) end
   end
   crc_table[n] = c
end

-- CRC-32 (the PNG/zlib polynomial) of a Lua string, as an unsigned number.
function M.crc32(s)
   local c = bnot(0)
   for i = 1, #s do
      c = bxor(crc_table[band(bxor(c, s:byte(i)), 0xFF)], rshift(c, 8))
   end
   c = bnot(c)
   return c < 0 and c + 4294967296 or c
end

-- Adler-32 of n bytes at p (a uint8_t pointer).
local function adler32(p, n)
   local a, b = 1, 0
   local i = 0
   while i < n do
      local stop = math.min(n, i + 5552) -- no overflow before the modulo
      while i < stop do
         a = a + p[i]
         b = b + a
         i = i + 1
      end
      a, b = a % 65521, b % 65521
   end
   return b * 65536 + a
end

local function be32(v)
   return string.char(band(rshift(v, 24), 255), band(rshift(v, 16), 255),
                      band(rshift(v, 8), 255), band(v, 255))
end
M.be32 = be32

local function chunk(kind, data)
   return be32(#data) .. kind .. data .. be32(M.crc32(kind .. data))
end

-- zlib stream of n bytes at p made of stored deflate blocks (<= 65535 bytes each).
local function zlib_stored(p, n)
   local parts = {'\120\1'}
   local off = 0
   repeat
      local len = math.min(65535, n - off)
      local final = (off + len == n) and 1 or 0
      local nlen = 65535 - len
      parts[#parts + 1] = string.char(final, band(len, 255), rshift(len, 8), band(nlen, 255), rshift(nlen, 8))
      parts[#parts + 1] = ffi.string(p + off, len)
      off = off + len
   until off >= n
   parts[#parts + 1] = be32(adler32(p, n))
   return table.concat(parts)
end

local function zlib_deflate(lib, p, n)
   local cap = tonumber(lib.compressBound(n))
   local out = ffi.new('uint8_t[?]', cap)
   local len = ffi.new('unsigned long[1]', cap)
   if lib.compress2(out, len, p, n, 6) ~= 0 then return nil end
   return ffi.string(out, len[0])
end

-- PNG file contents for a width x height RGB image; rgb(x, y) -> r, g, b (0-based x, y)
-- or `pixels`, a uint8_t pointer to height rows of width*3 bytes.
-- opts.stored: never compress.
function M.encode(width, height, pixels, opts)
   opts = opts or {}
   local stride = 1 + 3 * width
   local n = stride * height
   local raw = ffi.new('uint8_t[?]', n)
   for y = 0, height - 1 do
      raw[y * stride] = 0 -- filter type None
      ffi.copy(raw + y * stride + 1, pixels + y * width * 3, width * 3)
   end
   local lib = not opts.stored and M.zlib() or nil
   local idat = lib and zlib_deflate(lib, raw, n) or zlib_stored(raw, n)
   local ihdr = be32(width) .. be32(height) .. string.char(8, 2, 0, 0, 0)
   return '\137PNG\r\n\26\n' .. chunk('IHDR', ihdr) .. chunk('IDAT', idat) .. chunk('IEND', '')
end

return M
