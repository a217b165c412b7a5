-- tests/lua/cuda_guard_child.lua -- run by tests/lua/cuda_emu_spec.lua over the CUDA emulator:
-- reads a CUDA tensor's first element from the host through its device pointer, the mistake
-- the emulator's guarded device memory (tests/emu/emu_memory.cc) exists to catch (it crashes
-- on a GPU). Prints before=... (device work and a copy back, which must work); then the read
-- kills the process with SIGSEGV, unless TOCHA_CUDA_EMU_GUARD=0, when it prints read=<value>
-- and done=true.
require 'torch'
local ffi = require 'ffi'
local H = dofile('tests/lua/cuda_child_helper.lua')

local x = torch.CudaTensor(4):fill(7)
H.put('before', table.concat(x:float():totable(), ','))
io.stdout:flush()
local device_pointer = ffi.cast('float *', torch._C.tc_tensor_data(x.p))
H.put('read', device_pointer[0])
H.put('done', true)
