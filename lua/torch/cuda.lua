-- torch/cuda.lua -- torch.cuda: whether the CUDA backend can be used, and how many devices.
--
-- The backend is a separate library (libtocha_cuda.so) that libtocha loads on first use;
-- on a machine without it, or without a driver or a GPU, nothing fails: isAvailable()
-- returns false and the reason. Names follow cutorch where it had them
-- (cutorch.getDeviceCount); CUDA tensors come with the CUDA backend issue.
local ffi = require 'ffi'
local torch = ...
local C = torch._C

local cuda = torch.cuda or {}
torch.cuda = cuda

local REASON_CAP = 1024

-- true, or false and a one-line reason ("no CUDA driver (...)", "libtocha_cuda.so not
-- found (built without nvcc?): ...").
function cuda.isAvailable()
   local why = ffi.new('char[?]', REASON_CAP)
   if C.tc_cuda_available(why, REASON_CAP) ~= 0 then return true end
   return false, ffi.string(why)
end

-- Number of CUDA devices; 0 when CUDA is unavailable.
function cuda.deviceCount()
   return tonumber(C.tc_cuda_device_count())
end
cuda.getDeviceCount = cuda.deviceCount -- cutorch's name

return cuda
