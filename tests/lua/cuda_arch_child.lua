-- tests/lua/cuda_arch_child.lua -- run by cuda_spec.lua over the CUDA emulator with
-- TOCHA_CUDA_EMU_CC (and TOCHA_CUDA_EMU_DRIVER) set: what a user sees on a GPU the build
-- has no code for, and on one it reaches through PTX. Prints key=value lines, then done=true.
require 'torch'
local H = require 'cuda_child_helper'

H.put('available', torch.cuda.isAvailable())
-- what the device is can be asked before (and whether or not) it runs our kernels
H.put('capability', table.concat({torch.cuda.get_device_capability(1)}, '.'))
local x = torch.Tensor({1, -2, 3})
H.put('to_device', H.err(function() local y = x:cuda(); H.put('y', y) end))
-- asked again: the refusal is not remembered as a success, nor does it stick to the CPU
H.put('again', H.err(function() local y = x:cuda(); H.put('y', y) end))
-- every device is asked (cutorch's 1-based number: device 1)
H.put('device1', H.err(function() torch.cuda.setDevice(2) end))
H.put('cpu_survives', (x * 2):sum())
-- where the device runs the kernels: an op on it gives the CPU's numbers
local ok, r = pcall(function() return (x:cuda():abs() * 2):float():sum() end)
H.put('sum', ok and r or 'error')
H.put('done', true)
