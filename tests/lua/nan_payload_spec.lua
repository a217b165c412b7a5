-- tests/lua/nan_payload_spec.lua -- NaNs with payloads read from tensor data and files.
-- LuaJIT does not canonicalise a NaN it reads from FFI memory, and a NaN whose payload fills
-- the top bits of the word reads as another Lua type (nil, or a string / table at an address
-- the bytes chose: a crash, or worse, from a hostile model file). Every read of float data
-- into Lua (GET in lua/torch/tensor.lua, tc_tensor_get / tc_tensor_item, the half
-- conversions, File's readFloat / readDouble, torch.load's numbers) gives such a NaN as Lua's
-- own NaN: a number. Each case below read as nil (or crashed) before.
require 'torch'
local ffi = require 'ffi'

-- float bit patterns: all ones (read as nil), a "string at NULL" tag, a "lightuserdata" tag,
-- and ordinary quiet / signalling NaNs
local F32 = {0xffffffff, 0xffffffd8, 0xffffffe0, 0x7fc00001, 0xff800001}
-- double bit patterns: string, table and function tags with an address, and a plain NaN
local F64 = {0xfffffffb00001000ULL, 0xfffffff400001000ULL, 0xfffffff700001000ULL, 0xfff0000000000001ULL}

local function is_nan(v) return type(v) == 'number' and v ~= v end

-- A new tensor of constructor `new` holding the raw bit patterns `bits` (as ctype words).
local function tensor_of_bits(new, ctype, bits)
   local t = new(#bits)
   local u = ffi.cast(ctype, t:data())
   for i, b in ipairs(bits) do u[i - 1] = b end
   return t
end
local function float_tensor() return tensor_of_bits(torch.FloatTensor, 'uint32_t*', F32) end
local function double_tensor() return tensor_of_bits(torch.DoubleTensor, 'uint64_t*', F64) end

describe('NaNs with payloads', function()
   it('read as NaN numbers from float and double tensors: t[i], t[{i, j}], storage, totable, apply', function()
      for _, t in ipairs({float_tensor(), double_tensor()}) do
         local n = t:nElement()
         for i = 1, n do
            assert.is_true(is_nan(t[i]), t:type() .. ' t[' .. i .. ']')
            assert.is_true(is_nan(t:storage()[i]), 'storage[' .. i .. ']')
            assert.is_true(is_nan(t:view(1, n)[{1, i}]), 't[{1, i}]')
         end
         for i, v in ipairs(t:totable()) do assert.is_true(is_nan(v), 'totable ' .. i) end
         local seen = 0
         t:clone():apply(function(v) assert.is_true(is_nan(v)); seen = seen + 1 end)
         assert.are.equal(n, seen)
         assert.is_true(tostring(t):find('nan', 1, true) ~= nil)
      end
   end)

   it('read as NaN numbers through reductions to numbers (tc_tensor_item) and 1-element reads', function()
      local f, d = float_tensor(), double_tensor()
      assert.is_true(is_nan(f:sum()))
      assert.is_true(is_nan(d:sum()))
      assert.is_true(is_nan(f:narrow(1, 1, 1):sum()))
      assert.is_true(is_nan(d[{{2}}]:sum()))
   end)

   it('read as NaN numbers from half and bfloat16 tensors', function()
      local bits = {['torch.HalfTensor'] = {0xffff, 0xfe01, 0x7c01}, ['torch.BFloat16Tensor'] = {0xffff, 0xff81, 0x7f81}}
      for ty, b in pairs(bits) do
         local t = torch.Tensor():type(ty):resize(3)
         local u = ffi.cast('uint16_t*', t:data())
         u[0], u[1], u[2] = b[1], b[2], b[3]
         for i = 1, 3 do assert.is_true(is_nan(t[i]), ty .. ' ' .. i) end
      end
   end)

   it('read as NaN numbers by File:readFloat / readDouble', function()
      local f = torch.MemoryFile()
      f:binary()
      f:writeFloat(float_tensor():storage())
      f:writeDouble(double_tensor():storage())
      f:seek(1)
      for i = 1, #F32 do assert.is_true(is_nan(f:readFloat()), 'readFloat ' .. i) end
      for i = 1, #F64 do assert.is_true(is_nan(f:readDouble()), 'readDouble ' .. i) end
      f:close()
   end)

   it('load as NaN numbers from a hostile file (torch.load of a number, of a storage)', function()
      local path = os.tmpname()
      for _, bits in ipairs(F64) do
         torch.save(path, 1.5)
         local fh = assert(io.open(path, 'rb'))
         local bytes = fh:read('*a')
         fh:close()
         -- the file is the type tag (int32) then the number (8 bytes, little-endian here)
         assert.are.equal(12, #bytes)
         local raw = ffi.new('uint64_t[1]', bits)
         fh = assert(io.open(path, 'wb'))
         fh:write(bytes:sub(1, 4), ffi.string(raw, 8))
         fh:close()
         assert.is_true(is_nan(torch.load(path)))
      end
      torch.save(path, double_tensor())
      local t = torch.load(path)
      for i = 1, #F64 do assert.is_true(is_nan(t[i])) end
      os.remove(path)
   end)

   it('leave ordinary values and infinities as they are', function()
      local t = torch.DoubleTensor({1.5, -0.0, math.huge, -math.huge, 0 / 0})
      assert.are.equal(1.5, t[1])
      assert.are.equal(-math.huge, 1 / t[2]) -- -0 stays -0
      assert.are.equal(math.huge, t[3])
      assert.are.equal(-math.huge, t[4])
      assert.is_true(is_nan(t[5]))
      local f = torch.FloatTensor({2.25, math.huge, -math.huge})
      assert.are.same({2.25, math.huge, -math.huge}, f:totable())
   end)
end)
