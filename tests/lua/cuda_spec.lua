-- tests/lua/cuda_spec.lua -- torch.cuda (lua/torch/cuda.lua): availability and device
-- count through libtocha's loader; device selection and the caching allocator's functions.
-- Without a GPU (CI) isAvailable() is false with a reason and the other functions raise it;
-- the allocator is then exercised end to end in a child process over the mock backend
-- (build/tests/libtocha_cuda_mock.so, tests/c/mock_cuda.c), and what a GPU the build has no
-- code for gets over the CUDA emulator (tests/emu). Run from the repository root
-- (tests/run.sh).
require 'torch'
local H = require 'cuda_child_helper'

-- The loader's reasons start with one of these (core/cuda_loader.c).
local function known_reason(why)
   for _, p in ipairs({'libtocha_cuda.so not found', 'cannot load ', 'no CUDA driver', 'no CUDA device',
                       'CUDA driver too old'}) do
      if why:sub(1, #p) == p then return true end
   end
   return why:find(' does not export ', 1, true) ~= nil or why:find(' has CUDA backend API version ', 1, true) ~= nil
end

local build = os.getenv('TOCHA_BUILD') or 'build'
local MOCK = build .. '/tests/libtocha_cuda_mock.so'

-- Runs `script` (a file or -e code) in a fresh luajit with the environment assignments env
-- prepended; returns its output.
local function child(env, script)
   local f = assert(io.popen(env .. ' luajit ' .. script .. ' 2>&1'))
   local out = f:read('*a')
   f:close()
   return out
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

   it('has the cutorch name getDeviceCount and the PyTorch names', function()
      assert.are.equal(torch.cuda.deviceCount, torch.cuda.getDeviceCount)
      assert.are.equal(torch.cuda.deviceCount, torch.cuda.device_count)
      assert.are.equal(torch.cuda.isAvailable, torch.cuda.is_available)
      assert.are.equal(torch.cuda.emptyCache, torch.cuda.empty_cache)
      assert.are.equal(torch.cuda.memoryStats, torch.cuda.memory_stats)
      assert.is_number(torch.cuda.getDeviceCount())
   end)

   it('names a missing TOCHA_CUDA_LIB in the reason', function()
      -- a fresh process: the loader reads TOCHA_CUDA_LIB once, on first use
      local out = child('TOCHA_CUDA_LIB=/nonexistent/libtocha_cuda.so',
         "-e \"require 'torch'; local ok, why = torch.cuda.isAvailable(); " ..
         "io.write(tostring(ok), '|', why or '', '|', torch.cuda.deviceCount())\"")
      assert.are.equal('false|libtocha_cuda.so not found at TOCHA_CUDA_LIB=/nonexistent/libtocha_cuda.so: '
         .. 'No such file or directory|0', out)
   end)

   it('raises "CUDA unavailable: <reason>" at the caller\'s line without a GPU', function()
      local ok, why = torch.cuda.isAvailable()
      local calls = {
         memory_stats = function() local r = torch.cuda.memory_stats(); return r end,
         memoryStats = function() local r = torch.cuda.memoryStats(0); return r end,
         memory_allocated = function() local r = torch.cuda.memory_allocated(); return r end,
         max_memory_allocated = function() local r = torch.cuda.max_memory_allocated(); return r end,
         memory_reserved = function() local r = torch.cuda.memory_reserved(); return r end,
         max_memory_reserved = function() local r = torch.cuda.max_memory_reserved(); return r end,
         reset_peak_memory_stats = function() torch.cuda.reset_peak_memory_stats() end,
         empty_cache = function() torch.cuda.empty_cache() end,
         emptyCache = function() torch.cuda.emptyCache() end,
         setDevice = function() torch.cuda.setDevice(1) end,
         getDevice = function() local r = torch.cuda.getDevice(); return r end,
         set_device = function() torch.cuda.set_device(0) end,
         current_device = function() local r = torch.cuda.current_device(); return r end,
         get_device_properties = function() local r = torch.cuda.get_device_properties(); return r end,
         get_device_name = function() local r = torch.cuda.get_device_name(0); return r end,
         get_device_capability = function() local r = torch.cuda.get_device_capability(); return r end,
         getDeviceProperties = function() local r = torch.cuda.getDeviceProperties(1); return r end,
      }
      for name, f in pairs(calls) do
         local okc, err = pcall(f)
         if ok then
            assert.is_true(okc, name .. ': ' .. tostring(err))
         else
            assert.is_false(okc, name .. ' did not raise')
            -- the camelCase aliases share the function: the message names the PyTorch name
            local shown = ({memoryStats = 'memory_stats', emptyCache = 'empty_cache'})[name] or name
            local want = 'cuda_spec.lua:%d+: torch%.cuda%.' .. shown .. ': CUDA unavailable: '
            assert.is_truthy(tostring(err):find(want), name .. ': ' .. tostring(err))
            assert.is_truthy(tostring(err):find(why, 1, true), name .. ': ' .. tostring(err))
         end
      end
      if ok then
         assert.is_number(torch.cuda.memory_allocated())
         assert.is_true(torch.cuda.memory_reserved() >= torch.cuda.memory_allocated())
      end
   end)

   it('reports a mock backend without devices as "no CUDA device"', function()
      local out = child('TOCHA_CUDA_LIB=' .. MOCK .. ' TOCHA_CUDA_MOCK_DEVICES=0',
         "-e \"require 'torch'; local ok, why = torch.cuda.isAvailable(); io.write(tostring(ok), '|', why)\"")
      assert.are.equal('false|no CUDA device (the driver is installed but reports none)', out)
   end)

   describe('over the CUDA emulator, on GPUs the build has code for and not (TOCHA_CUDA_EMU_CC)', function()
      local EMU = build .. '/tests/libtocha_cuda_emu.so'
      -- What make built the backend for (the Makefile's CUDA_SASS and CUDA_PTX), as the
      -- stamp it keeps says: "sass=90 ptx=75 <nvcc and its flags>".
      local sass, ptx
      local f = io.open(build .. '/cuda_targets')
      if f then
         local list
         list, ptx = f:read('*a'):match('^sass=(.-) ptx=(%d+)')
         f:close()
         sass = {}
         for a in (list or ''):gmatch('%d+') do sass[#sass + 1] = tonumber(a) end
         ptx = tonumber(ptx)
      end
      local have = io.open(EMU, 'rb')
      if have then have:close() end

      local function run(env)
         local out = child('TOCHA_CUDA_LIB=' .. EMU .. ' TOCHA_CUDA_EMU_DEVICES=2 TOCHA_CUDA_EMU_CAPACITY=64M '
            .. 'TOCHA_CUDA_EMU_LOG=/dev/null ' .. env, 'tests/lua/cuda_arch_child.lua')
         local got = {}
         for k, v in out:gmatch('([%w_]+)=([^\n]*)') do got[k] = v end
         assert.are.equal('true', got.done, 'the child failed:\n' .. out)
         return got
      end
      local function at(text) return H.at('tests/lua/cuda_arch_child.lua', text) end
      local function machine_code()
         local names = {}
         for i, a in ipairs(sass) do names[i] = 'sm_' .. a end
         return table.concat(names, ', ')
      end
      -- Whether the build has machine code for compute capability cc (major * 10 + minor).
      local function has_sass(cc)
         for _, a in ipairs(sass) do
            if math.floor(a / 10) == math.floor(cc / 10) and a % 10 <= cc % 10 then return true end
         end
         return false
      end

      it('refuses a GPU older than its PTX at the first use of each device, with what to build', function()
         if not (have and sass) then return pending('the CUDA emulator is not built here') end
         local got = run('TOCHA_CUDA_EMU_CC=5.0')
         assert.are.equal('true', got.available) -- the device is there; it cannot run our code
         assert.are.equal('5.0', got.capability)
         local why = "cannot run libtocha_cuda.so's kernels: it holds machine code for " .. machine_code()
            .. ' and PTX for compute capability ' .. math.floor(ptx / 10) .. '.' .. ptx % 10 .. ' and later; build '
            .. 'machine code for this GPU with make CUDA_SASS=50 (nvcc must support sm_50) '
            .. '(cudaErrorNoKernelImageForDevice)'
         local dev0 = 'cuda: device 0 (tocha CUDA emulator (host), compute capability 5.0) ' .. why
         assert.are.equal(at("H.put('to_device'") .. dev0, got.to_device)
         assert.are.equal(at("H.put('again'") .. dev0, got.again)
         assert.are.equal(at('torch.cuda.setDevice(2)') .. 'cuda: device 1 (tocha CUDA emulator (host), compute '
            .. 'capability 5.0) ' .. why, got.device1)
         assert.are.equal('4', got.cpu_survives)
         assert.are.equal('error', got.sum)
      end)

      it('runs through PTX on a GPU it has no machine code for, and names an old driver', function()
         if not (have and sass) then return pending('the CUDA emulator is not built here') end
         local cc = ptx
         while has_sass(cc) do cc = cc + 1 end -- the oldest GPU that needs the PTX
         local cc_env = 'TOCHA_CUDA_EMU_CC=' .. math.floor(cc / 10) .. '.' .. cc % 10
         local got = run(cc_env)
         assert.are.equal(math.floor(cc / 10) .. '.' .. cc % 10, got.capability)
         assert.are.equal('nil', got.to_device) -- no error
         assert.are.equal('12', got.sum)
         -- a driver older than the toolkit cannot compile the PTX
         got = run(cc_env .. ' TOCHA_CUDA_EMU_DRIVER=12.0')
         assert.is_truthy(got.to_device:find('compute capability ' .. math.floor(cc / 10) .. '.' .. cc % 10
            .. ") cannot run libtocha_cuda.so's kernels: it holds machine code for " .. machine_code() .. ' only, '
            .. 'and the driver (CUDA 12.0) is older than the toolkit that wrote its PTX (CUDA ', 1, true), got.to_device)
         assert.is_truthy(got.to_device:find('); update the driver, or build machine code for this GPU with make '
            .. 'CUDA_SASS=' .. cc .. ' (cudaErrorUnsupportedPtxVersion)', 1, true), got.to_device)
         assert.are.equal('error', got.sum)
         -- machine code needs no driver compile: the same old driver runs an H100's
         got = run('TOCHA_CUDA_EMU_CC=' .. math.floor(sass[1] / 10) .. '.' .. sass[1] % 10 .. ' TOCHA_CUDA_EMU_DRIVER=12.0')
         assert.are.equal('nil', got.to_device) -- no error
         assert.are.equal('12', got.sum)
      end)
   end)

   describe('over the mock backend (TOCHA_CUDA_LIB, 2 devices of 64 MB)', function()
      local got
      setup(function()
         local f = io.open(MOCK, 'rb')
         assert(f, MOCK .. ' is missing: build it with make ' .. MOCK)
         f:close()
         local out = child('TOCHA_CUDA_LIB=' .. MOCK .. ' TOCHA_CUDA_MOCK_DEVICES=2 TOCHA_CUDA_MOCK_CAPACITY=64M',
            'tests/lua/cuda_mock_child.lua')
         got = {}
         for k, v in out:gmatch('([%w_]+)=([^\n]*)') do got[k] = v end
         assert.are.equal('true', got.done, 'the child failed:\n' .. out)
      end)

      local MB = 2 ^ 20
      -- "tests/lua/cuda_mock_child.lua:<line>:" for the child's line that contains text:
      -- errors are raised at the line of the user's call.
      local function at(text) return H.at('tests/lua/cuda_mock_child.lua', text) end

      it('selects devices with cutorch (1-based) and PyTorch (0-based) numbers', function()
         assert.are.equal('true', got.available)
         assert.are.equal('2', got.count)
         assert.are.equal('1', got.getDevice)
         assert.are.equal('0', got.current_device)
         assert.are.equal('2', got.getDevice9)
         assert.are.equal('1', got.current_device9)
         assert.are.equal('1', got.getDevice10)
         assert.are.equal('512', got.allocated9_dev1) -- the default device is the selected one
         assert.are.equal('1024', got.allocated9_dev0)
      end)

      it('counts allocated and reserved bytes exactly', function()
         assert.are.equal(tostring(1024), got.allocated1)
         assert.are.equal(tostring(2 * MB), got.reserved1)
         assert.are.equal(tostring(1024 + 3 * MB), got.allocated2)
         assert.are.equal(tostring(22 * MB), got.reserved2)
         assert.are.equal(tostring(1024), got.allocated3)
         assert.are.equal(tostring(22 * MB), got.reserved3) -- freed memory stays cached
         assert.are.equal(tostring(52 * MB), got.reserved6)
         assert.are.equal(tostring(2 * MB), got.reserved7) -- emptyCache keeps what is in use
         assert.are.equal(tostring(1024 + 50 * MB), got.max_allocated7)
         assert.are.equal(tostring(52 * MB), got.max_reserved7)
         assert.are.equal(tostring(1024), got.max_allocated8) -- after reset_peak_memory_stats
      end)

      it('empties the cache and retries before reporting out of memory', function()
         assert.are.equal(tostring(52 * MB), got.reserved4) -- the 20 MB cached segment was returned
         assert.are.equal('1', got.retries4)
         assert.are.equal('1', got.ooms5)
         assert.are.equal('2', got.retries5)
         assert.are.equal(tostring(1024 + 50 * MB), got.allocated5) -- nothing lost
         assert.are.equal('6', got.cpu_survives)
         assert.are.equal('true', got.again)
         assert.are.equal(at('cuda._alloc(20 * MB); return p') .. 'cuda alloc: out of memory on device 0: cannot allocate '
            .. '20.00 MiB (20971520 bytes, as a 20.00 MiB segment) with 50.00 MiB allocated and 52.00 MiB reserved '
            .. 'on that device, after emptying the cache and retrying: mock cudaMalloc: out of memory (20971520 '
            .. 'bytes requested, 54525952 of 67108864 in use)', got.oom)
      end)

      it('refuses bad frees and devices with messages', function()
         assert.is_truthy(got.wrong_device_free:find('cuda_mock_child.lua:%d+: cuda free: pointer 0x%x+ belongs to '
            .. 'device 0, not device 1'), got.wrong_device_free)
         assert.is_truthy(got.double_free:find('cuda_mock_child.lua:%d+: cuda free: pointer 0x%x+ was not allocated '
            .. 'on device 0'), got.double_free)
         assert.are.equal(at('cuda.setDevice(3)') .. 'torch.cuda.setDevice: no device 3 (devices are 1..2, '
            .. 'as in cutorch)', got.setDevice3)
         assert.are.equal(at('cuda.set_device(5)') .. 'cuda set_device: no device 5 (2 devices)', got.set_device5)
         assert.are.equal(at('cuda.memory_stats(7)') .. 'cuda memory_stats: no device 7 (2 devices)',
            got.stats_bad_device)
      end)

      it('says what each device is (PyTorch and cutorch names)', function()
         local name = 'tocha mock CUDA device %d (host memory, 67108864 bytes)'
         assert.are.equal(name:format(1) .. '|9.0|67108864|1', got.props) -- the selected device
         assert.are.equal(name:format(0) .. '|9.0|67108864|1|32|1024|49152', got.props_cutorch) -- 1-based
         assert.are.equal(name:format(0), got.device_name)
         assert.are.equal('9.0', got.capability)
         assert.are.equal(at('cuda.get_device_properties(2)') .. 'cuda device_properties: no device 2 (2 devices)',
            got.props_bad_device)
         assert.are.equal(at('cuda.getDeviceProperties(0)') .. 'torch.cuda.getDeviceProperties: no device 0 '
            .. '(devices are 1..2, as in cutorch)', got.props_bad_cutorch)
      end)
   end)
end)

describe('the CUDA build (Makefile)', function()
   -- The nvcc command make would run for core/cuda/<name>.cu with the common flags replaced.
   local function compile_line(name)
      local f = assert(io.popen("make -s -n -W core/cuda/" .. name .. ".cu NVCCFLAGS='-O2 -Icore' BUILD=" .. build
         .. ' ' .. build .. '/core/cuda/' .. name .. '.o 2>&1'))
      local out = f:read('*a')
      f:close()
      for line in out:gmatch('[^\n]+') do
         if line:find('-c core/cuda/' .. name .. '.cu', 1, true) then return line end
      end
      error('no compile line for ' .. name .. '.cu in:\n' .. out)
   end

   it('keeps the flags of single files under make NVCCFLAGS=...', function()
      -- -fmad=false: the elementwise kernels and the optimizer steps give the CPU's bits
      for _, name in ipairs({'ew', 'optim'}) do
         local line = compile_line(name)
         assert.is_truthy(line:find('-O2 -Icore', 1, true), line)
         assert.is_truthy(line:find('-fmad=false', 1, true), line)
      end
      assert.is_truthy(compile_line('runtime'):find('-DTC_CUDA_SASS=', 1, true))
      -- PTX for compute capability 8.0: the tensor-core attention on GPUs without machine code
      assert.is_truthy(compile_line('attention_tc'):find('arch=compute_80,code=compute_80', 1, true))
      local other = compile_line('blas')
      assert.is_truthy(other:find('-O2 -Icore', 1, true), other)
      assert.is_falsy(other:find('-fmad', 1, true), other)
   end)
end)
