-- tests/lua/cuda_spec.lua -- torch.cuda (lua/torch/cuda.lua): availability and device
-- count through libtocha's loader. Without a GPU (CI) isAvailable() is false with a reason;
-- with one it is true and devices are counted. Run from the repository root (tests/run.sh).
require 'torch'

-- The loader's reasons start with one of these (core/cuda_loader.c).
local function known_reason(why)
   for _, p in ipairs({'libtocha_cuda.so not found', 'cannot load ', 'no CUDA driver', 'no CUDA device',
                       'CUDA driver too old'}) do
      if why:sub(1, #p) == p then return true end
   end
   return why:find(' does not export ', 1, true) ~= nil or why:find(' has CUDA backend API version ', 1, true) ~= nil
end

describe('torch.cuda', function()
   it('answers isAvailable with a boolean, and a reason when false', function()
      local ok, why = torch.cuda.isAvailable()
      assert.is_boolean(ok)
      if ok then
         assert.is_nil(why)
         assert.is_true(torch.cuda.deviceCount() >= 1)
      else
         assert.is_string(why)
         assert.is_true(#why > 0)
         assert.is_true(known_reason(why), 'unexpected reason: ' .. why)
         assert.are.equal(0, torch.cuda.deviceCount())
      end
      -- the answer is stable (loaded once per process)
      local ok2, why2 = torch.cuda.isAvailable()
      assert.are.equal(ok, ok2)
      assert.are.equal(why, why2)
   end)

   it('has the cutorch name getDeviceCount', function()
      assert.are.equal(torch.cuda.deviceCount, torch.cuda.getDeviceCount)
      assert.is_number(torch.cuda.getDeviceCount())
   end)

   it('names a missing TOCHA_CUDA_LIB in the reason', function()
      -- a fresh process: the loader reads TOCHA_CUDA_LIB once, on first use
      local cmd = "TOCHA_CUDA_LIB=/nonexistent/libtocha_cuda.so luajit -e " ..
         "\"require 'torch'; local ok, why = torch.cuda.isAvailable(); " ..
         "io.write(tostring(ok), '|', why or '', '|', torch.cuda.deviceCount())\" 2>&1"
      local f = assert(io.popen(cmd))
      local out = f:read('*a')
      f:close()
      assert.are.equal('false|libtocha_cuda.so not found at TOCHA_CUDA_LIB=/nonexistent/libtocha_cuda.so: '
         .. 'No such file or directory|0', out)
   end)
end)
