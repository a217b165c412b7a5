-- tests/lua/cuda_fill_child.lua -- run by tests/lua/cuda_emu_spec.lua over the CUDA emulator
-- (and by cuda_tensor_spec.lua over the mock, or the emulator in its emulated pass),
-- with and without TOCHA_CUDA_FILL_UNINITIALIZED=1: frees a tensor of 3s, allocates ones of
-- the same size until the caching allocator hands back its block (reused=true), and prints
-- what the new, unwritten tensors hold: the old values without the variable, and with it
-- NaN for float, -1 for long and 255 for byte. Then a sum over a filled tensor, which must
-- not see the fill (its kernels' scratch is filled too, and written before it is read).
require 'torch'
local ffi = require 'ffi'
local H = dofile('tests/lua/cuda_child_helper.lua')

local function address(t) return tostring(ffi.cast('uintptr_t', torch._C.tc_tensor_data(t.p))) end

local old = torch.CudaTensor(256):fill(3)
local old_address = address(old)
old = nil
collectgarbage()
collectgarbage()
-- the old block comes back within a few allocations of its size (others freed at the same
-- collection, a fill's scalar say, may come first)
local new, held = nil, {}
for _ = 1, 4 do
   local t = torch.CudaTensor(256)
   if address(t) == old_address then new = t break end
   held[#held + 1] = t
end
H.put('reused', new ~= nil)
new = new or held[1]
local float = new:float()
H.put('float', float[1] ~= float[1] and 'nan' or float[1])
H.put('float_last', float[256] ~= float[256] and 'nan' or float[256])
H.put('long', torch.CudaLongTensor(3):long()[2])
H.put('byte', torch.CudaByteTensor(5):byte()[5])
H.put('sum', torch.CudaTensor(1000, 300):fill(0.5):sum())
H.put('done', true)
