-- tests/lua/nn_cuda_spec.lua -- every nn module and criterion on a CUDA device, against the
-- CPU. The work runs in a child process (tests/lua/nn_cuda_child.lua) over the mock backend
-- (build/tests/libtocha_cuda_mock.so, 2 devices), since the CUDA library state is per
-- process, or, with TOCHA_TEST_EMU set, over the CUDA emulator (tests/emu); on a machine
-- with 2 GPUs it runs a second time over the real backend. For
-- each class of tests/lua/nn_catalog.lua the child builds the catalog
-- instance on the CPU, copies it to the device (float64 with :type('torch.CudaDoubleTensor'):
-- tolerance 1e-10; float32 with :cuda() against the CPU model after :float(): 1e-4), runs
-- forward, backward, updateGradInput + accGradParameters(scale) and the PyTorch-style tape
-- in training and evaluation mode, and compares outputs, gradInputs and parameter
-- gradients; every result must be on the device, of the device type. Then optim's
-- algorithms on model:getParameters() of a CUDA model against the same steps on the CPU.
-- A class that cannot run on CUDA must be listed in `not_on_cuda` with the reason.
-- Run from the repository root (tests/run.sh).
require 'torch'
require 'nn'
require 'nngraph' -- registers nn.gModule, a catalog class
local C = dofile('tests/lua/nn_catalog.lua')

local build = os.getenv('TOCHA_BUILD') or 'build'
local MOCK = build .. '/tests/libtocha_cuda_mock.so'
local CHILD = 'tests/lua/nn_cuda_child.lua'

-- Classes that legitimately cannot run on a CUDA device, with the reason. Empty: every
-- registered module and criterion runs there. (A class listed here is checked to fail on
-- the device, so the list cannot go stale.)
local not_on_cuda = {}

-- float64, float32 (:cuda()), and float64 with everything on the second device while the
-- first is selected (nothing may land on the selected device)
local passes = {'double', 'float', 'device2'}
local modes = {'training', 'evaluate'}
local optim_algos = {'sgd', 'nag', 'adam', 'adamw', 'adamax', 'adagrad', 'adadelta', 'rmsprop', 'rprop', 'asgd',
                     'cg', 'lbfgs'}

local function backend(title, env, needs_mock)
   describe('nn on a CUDA device (' .. title .. ')', function()
      local got
      setup(function()
         if needs_mock then
            local f = io.open(MOCK, 'rb')
            assert(f, MOCK .. ' is missing: build it with make ' .. MOCK)
            f:close()
         end
         local p = assert(io.popen(env .. 'luajit ' .. CHILD .. ' 2>&1'))
         local out = p:read('*a')
         p:close()
         got = {}
         for line in out:gmatch('[^\n]+') do
            local k, v = line:match('^([%w_.]+)=(.*)$')
            if k then got[k] = v:gsub('\\n', '\n') end
         end
         assert.are.equal('true', got.done, 'the child failed:\n' .. out)
      end)

      -- "<file>:<line>: " of the child's first line containing text (errors are raised at the
      -- line of the user's call)
      local function child_at(text)
         local n = 0
         for line in io.lines(CHILD) do
            n = n + 1
            if line:find(text, 1, true) then return CHILD .. ':' .. n .. ': ' end
         end
         error('no line with ' .. text)
      end

      -- "ok <error> <compared> <elements>" with at least one comparison and no device element
      -- crossing over one at a time (nn's device paths are tensor ops), else the child's
      -- complaint
      local function assert_ok(key, elems_allowed)
         local v = got[key]
         assert.is_truthy(v, key .. ': no result from the child')
         local err, n, elems = v:match('^ok (%S+) (%d+) (%d+)$')
         assert.is_truthy(err, key .. ': ' .. v)
         assert.is_true(tonumber(n) > 0, key .. ': nothing was compared')
         if not elems_allowed then
            assert.are.equal('0', elems, key .. ': device elements read or written one at a time from Lua')
         end
      end

      it('covers every registered module and criterion (or lists why not)', function()
         local missing = {}
         for _, name in ipairs(C.classes()) do
            if not (C.abstract[name] or C.modules[name] or C.criterions[name] or C.others[name] or not_on_cuda[name]) then
               missing[#missing + 1] = name
            end
         end
         assert.same({}, missing)
         for name, why in pairs(not_on_cuda) do
            assert.is_true(type(why) == 'string' and #why > 10, name .. ' is listed without a reason')
         end
      end)

      for _, name in ipairs(C.classes()) do
         if C.modules[name] then
            it('nn.' .. name .. ' runs on the device as on the CPU', function()
               for _, pass in ipairs(passes) do
                  for _, mode in ipairs(modes) do
                     local key = 'mod.' .. name .. '.' .. pass .. '.' .. mode
                     local pinned = (got[key] or ''):match('^pinned (.*)$')
                     if not_on_cuda[name] then
                        assert.is_falsy((got[key] or ''):match('^ok'), key .. ' runs: drop it from not_on_cuda')
                     elseif pass == 'device2' and pinned then -- a module placing itself (nn.GPU)
                        assert.is_true(#pinned > 10, key .. ' is pinned without a reason')
                     else
                        assert_ok(key)
                     end
                  end
               end
            end)
         elseif C.criterions[name] then
            it('nn.' .. name .. ' runs on the device as on the CPU', function()
               for _, pass in ipairs(passes) do
                  local key = 'crit.' .. name .. '.' .. pass
                  if not_on_cuda[name] then
                     assert.is_falsy((got[key] or ''):match('^ok'), key .. ' runs: drop it from not_on_cuda')
                  else
                     assert_ok(key)
                  end
               end
            end)
         end
      end

      it('trains with every optim algorithm on getParameters() of a CUDA model as on the CPU', function()
         for _, pass in ipairs(passes) do
            for _, algo in ipairs(optim_algos) do assert_ok('optim.' .. algo .. '.' .. pass) end
         end
         assert_ok('optim.class.Adam')
      end)

      it('runs nn.StochasticGradient on a CUDA model and dataset as on the CPU', function()
         assert_ok('other.StochasticGradient')
      end)

      it('spreads a model over two devices with nn.GPU (forward, backward, the tape)', function()
         assert_ok('gpu_module')
         assert.are.equal(child_at('m:getParameters() end') .. 'nn.Sequential:getParameters: parameters on cuda:0 and '
            .. 'cuda:1: one flat storage needs one device (nn.GPU spreads a model over devices; flatten each part)',
            got.gpu_flatten)
      end)

      it('records copies across devices on the tape, the gradient back on the source device', function()
         assert.are.equal('true torch.DoubleTensor 1,10,100', got.to_grad)
         assert.are.equal('torch.CudaDoubleTensor 1 3,4', got.to_grad_dev)
         assert.are.equal('false', got.to_nograd)
      end)

      it('runs nn.Jacobian on a CUDA module', function()
         assert.are.equal('torch.CudaDoubleTensor 1 true', got.jacobian)
      end)

      it('runs attention without the fused op after torch.backends.cuda.enable_flash_sdp(false)', function()
         -- fused: the result's tape node is AttentionBackward; MHA (which takes the same switch)
         -- gives the same numbers either way
         assert.are.equal('true fused composed false fused true', got.flash_sdp)
         assert.are.equal(child_at('enable_flash_sdp(1) end') ..
            'torch.backends.cuda.enable_flash_sdp: expected a boolean, got number', got.flash_sdp_bad)
      end)

      it('takes the composed path on the device for feature sizes past the CUDA kernels\' 128', function()
         -- E 128 (Ev 20) fused; E 136 (Ev 12) and MHA's 136-wide heads composed, equal to the
         -- CPU, and the fused op never ran on the host
         assert.are.equal('128 fused true, 136 composed true, host 0, mha composed host 0', got.wide_heads)
      end)

      it('has tril, triu, eye, range, linspace, logspace and histc on device tensors', function()
         assert.are.equal('true true true 1,0,0,4,5,0,7,8,9 1', got.tril)
         assert.are.equal('0,1,1,0,0,1,0,0,0 torch.CudaDoubleTensor', got.triu_grad)
         assert.are.equal('1,0,0,0,1,0 torch.CudaLongTensor', got.eye)
         assert.are.equal('2,5,8 0,0.5,1 1,10,100 torch.CudaTensor', got.range)
         assert.are.equal('1,2,1,0,1 torch.CudaTensor', got.histc)
      end)

      it("has cutorch's CUDA storages: fill, copy, elements, views, t:storage(), printing, saving", function()
         assert.are.equal('torch.CudaStorage true 4 4 1 7 2,2,7,2', got.storage)
         assert.are.equal('1,2,3,4 4', got.storage_copy)
         assert.are.equal('torch.CudaStorage 4 10 40', got.tensor_storage)
         assert.are.equal('10,5,5,5 10,5,5,5 1 5,5', got.storage_views)
         assert.are.equal('\n 3\n 4\n[torch.CudaLongStorage of size 2 (cuda:0)]\n', got.storage_print)
         assert.are.equal('6 4', got.storage_resize)
         assert.are.equal('torch.CudaStorage 42 torch.FloatStorage', got.storage_serialize) -- sharing kept
         assert.are.equal(child_at('local p = s:data()') .. 'data: the values of a torch.CudaStorage are in device '
            .. 'memory (cuda:0) and cannot be read or written from Lua directly; copy it to a host storage first '
            .. '(torch.FloatStorage(#s):copy(s))', got.storage_data)
         assert.are.equal(child_at('torch.CudaTensor(torch.CudaDoubleStorage(2))') .. 'torch.CudaTensor: expected a '
            .. 'torch.CudaStorage, got torch.CudaDoubleStorage', got.storage_bad)
      end)
   end)
end

if os.getenv('TOCHA_TEST_EMU') then -- tests/run.sh's pass over the CUDA emulator (tests/emu)
   backend('CUDA emulator, 2 devices', 'TOCHA_CUDA_LIB=' .. build .. '/tests/libtocha_cuda_emu.so '
           .. 'TOCHA_CUDA_EMU_DEVICES=2 TOCHA_CUDA_EMU_LOG=/dev/null ', false)
else
   backend('mock backend, 2 devices', 'TOCHA_CUDA_LIB=' .. MOCK .. ' TOCHA_CUDA_MOCK_DEVICES=2 TOCHA_CUDA_MOCK_CAPACITY=256M ',
           true)
end
-- a machine with 2 GPUs: the same checks over the real kernels (nn.GPU needs 2 devices);
-- not when this process itself runs over another backend ($TOCHA_CUDA_LIB)
if (os.getenv('TOCHA_CUDA_LIB') or '') == '' and torch.cuda.isAvailable() and torch.cuda.deviceCount() >= 2 then
   backend('the GPUs', '', false)
end
