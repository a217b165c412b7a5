-- tests/lua/cuda_emu_spec.lua -- the backend's cuBLAS and cub paths against the CPU, run by
-- tests/lua/cuda_emu_child.lua over the CUDA emulator (build/tests/libtocha_cuda_emu.so,
-- docs/cuda.md), which `make` builds wherever the CUDA headers are. Without it the spec is
-- pending, saying so.
require 'torch'

local H = dofile('tests/lua/cuda_child_helper.lua')

local f = io.open(H.EMU, 'rb')
if f then f:close() end
local describe_emu = f and describe or function(name) pending(name .. ' (no ' .. H.EMU .. ': no CUDA headers)') end

describe_emu('cuBLAS and cub paths of the CUDA backend over the emulator', function()
   local got, out
   setup(function()
      local emu = H.emu
      H.emu = true
      got, out = H.run_child('tests/lua/cuda_emu_child.lua')
      H.emu = emu
   end)

   it('match the CPU: products over every layout and half type, long sorts, masked_select, nonzero', function()
      assert.are.equal('true', got.done, 'the child failed:\n' .. out)
      assert.are.equal('', got.failed)
      assert.are.equal('136', got.passes) -- every check ran
      assert.are.equal('0', got.fallbacks) -- all on the device (host fallback is off, too)
   end)
end)
