-- tests/lua/cuda_tensor_spec.lua -- CUDA tensors from Lua (lua/torch/cuda_tensor.lua and the
-- device paths of index/print/tensor_apply/serialize, nn's model:cuda()). Without a GPU
-- (CI) the conversions raise "CUDA unavailable: <reason>" here; everything else runs in a
-- child process (tests/lua/cuda_tensor_child.lua) over the mock backend
-- (build/tests/libtocha_cuda_mock.so, 2 devices of 64 MB), since the CUDA library state is
-- per process. Run from the repository root (tests/run.sh).
require 'torch'
require 'nn'

local H = dofile('tests/lua/cuda_child_helper.lua')
local CHILD = 'tests/lua/cuda_tensor_child.lua'

-- "<file>:<line>: " of the first line of file containing text (errors are raised at the
-- line of the user's call).
local at = H.at
local function here(text) return at('tests/lua/cuda_tensor_spec.lua', text) end

describe('CUDA tensors without CUDA', function()
   local ok, why = torch.cuda.isAvailable()

   it('raise "CUDA unavailable: <reason>" at the caller\'s line and change nothing', function()
      if ok then return end -- a machine with a GPU: the child below covers it
      local t = torch.FloatTensor({1, 2})
      local calls = {
         {'cuda', function() local r = t:cuda() end, 'local r = t:cuda() end'},
         {'cudaDouble', function() local r = t:cudaDouble() end, 'local r = t:cudaDouble() end'},
         {'type', function() local r = t:type('torch.CudaTensor') end, "local r = t:type('torch.CudaTensor') end"},
         {'torch.CudaTensor', function() local r = torch.CudaTensor(2) end, 'local r = torch.CudaTensor(2) end'},
         {'torch.CudaLongTensor', function() local r = torch.CudaLongTensor({1}) end,
          'local r = torch.CudaLongTensor({1}) end'},
      }
      for _, c in ipairs(calls) do
         local okc, err = pcall(c[2])
         assert.is_false(okc, c[1])
         assert.are.equal(here(c[3]) .. c[1] .. ': CUDA unavailable: ' .. why, err)
      end
      assert.are.same({1, 2}, t:totable())
      assert.are.equal('torch.FloatTensor', t:type())
   end)

   it('refuses model:cuda() with the reason, the model unchanged', function()
      if ok then return end
      local m = nn.Sequential():add(nn.Linear(2, 2))
      local w = m:get(1).weight
      local okc, err = pcall(function() m:cuda() end)
      assert.is_false(okc)
      assert.are.equal(here('function() m:cuda() end') .. 'cuda: CUDA unavailable: ' .. why, err)
      assert.are.equal(w, m:get(1).weight)
      assert.are.equal('torch.DoubleTensor', m:type())
      local okt, errt = pcall(function() nn.MSECriterion():cuda() end)
      assert.is_false(okt)
      assert.is_truthy(errt:find('cuda: CUDA unavailable: ', 1, true))
   end)

   it('loads CUDA tensors only with map_location = "cpu"', function()
      if ok then return end
      -- a torch.CudaTensor of one element 4 over a torch.CudaStorage, as cutorch wrote it
      local function i32(v) return string.char(v % 256, math.floor(v / 256) % 256, 0, 0) end
      local function i64(v) return i32(v) .. '\0\0\0\0' end
      local function str(s) return i32(#s) .. s end
      local function obj(idx, name) return i32(4) .. i32(idx) .. str('V 1') .. str(name) end
      local bytes = obj(1, 'torch.CudaTensor') .. i32(1) .. i64(1) .. i64(1) .. i64(1) ..
                    obj(2, 'torch.CudaStorage') .. i64(1) .. string.char(0, 0, 128, 64) -- 4.0f
      local okc, err = pcall(function() local r = torch.deserialize(bytes) end)
      assert.is_false(okc)
      assert.are.equal(here('local r = torch.deserialize(bytes) end') .. 'torch.deserialize: cannot load a '
         .. 'torch.CudaTensor: CUDA unavailable: ' .. why .. " (pass {map_location = 'cpu'} to load CUDA tensors "
         .. 'as CPU tensors)', err)
      local t = torch.deserialize(bytes, {map_location = 'cpu'})
      assert.are.equal('torch.FloatTensor', t:type())
      assert.are.same({4}, t:totable())
   end)

   it('keeps torch.cuda.hostFallbacks and the backend switches usable', function()
      local n, per = torch.cuda.hostFallbacks()
      assert.is_number(n)
      assert.is_table(per)
      assert.is_boolean(torch.backends.cudnn.benchmark)
      assert.is_true(torch.backends.cuda.host_fallback)
      -- cudnn.enabled: on by default, kept without CUDA
      assert.is_true(torch.backends.cudnn.enabled)
      torch.backends.cudnn.enabled = false
      assert.is_false(torch.backends.cudnn.enabled)
      assert.are.equal(0, tonumber(torch._C.tc_cuda_get_flag(torch._C.TC_CUDA_FLAG_CUDNN)))
      torch.backends.cudnn.enabled = true
      assert.is_true(torch.backends.cudnn.enabled)
      assert.has_error(function() torch.backends.cuda.matmul.allow_tf32 = 'yes' end)
   end)
end)

describe('CUDA tensors over the ' .. H.BACKEND .. ' (2 devices of 64 MB)', function()
   local got
   setup(function()
      local out
      got, out = H.run_child(CHILD)
      assert.are.equal('true', got.done, 'the child failed:\n' .. out)
   end)
   local function child_at(text) return at(CHILD, text) end

   it('names the classes by dtype and device', function()
      local want = {}
      for _, c in ipairs({'Cuda', 'CudaDouble', 'CudaHalf', 'CudaBFloat16', 'CudaByte', 'CudaChar', 'CudaShort', 'CudaInt',
                          'CudaLong', 'CudaBool'}) do
         local n = 'torch.' .. c .. 'Tensor'
         want[#want + 1] = n .. '/' .. n .. '/' .. n .. '/true'
      end
      assert.are.equal(table.concat(want, ','), got.names)
      assert.are.equal('true true false', got.isTypeOf)
   end)

   it('constructs on the selected device, x.new on x\'s', function()
      assert.are.equal('2x3 dev1', got.ctor_sizes)
      assert.are.equal('0 0 torch.CudaTensor dev1', got.ctor_empty)
      assert.are.equal('1,2,3,4,5,6 torch.CudaTensor dev1', got.ctor_table)
      -- setDevice(2): new tensors on the second device, x.new stays there after set_device(0)
      assert.are.equal('2 1 new:2 torch.CudaTensor 2 after:1', got.selected)
      assert.are.equal('torch.CudaLongTensor 7,8', got.new_long)
      assert.are.equal(child_at('torch.CudaTensor({{1, 2}, {3}})') .. 'torch.CudaTensor: inconsistent table: '
         .. 'table[2] has 1 elements, expected 2', got.ctor_bad_table)
      assert.are.equal(child_at('torch.CudaTensor(torch.FloatStorage(3))') .. 'torch.CudaTensor: a torch.FloatStorage '
         .. 'is host memory and a CUDA tensor cannot view one; build a torch.FloatTensor on it and move it with :cuda() '
         .. '/ :type(), or use a torch.CudaStorage', got.ctor_storage)
   end)

   it('converts across types and devices with cutorch\'s rules', function()
      assert.are.equal('torch.CudaTensor 1.5,2.5,-3 dev1', got.cuda)      -- a DoubleTensor:cuda() is float32
      assert.are.equal('true true false', got.cuda_self)                   -- self when already there
      assert.are.equal('torch.CudaTensor dev2 1.5,2.5,-3', got.cuda1)     -- cuda(1): 0-based
      assert.are.equal('torch.FloatTensor 1.5,2.5,-3 torch.DoubleTensor torch.LongTensor 1,2,-3 torch.ByteTensor '
         .. 'torch.DoubleTensor', got.float)                               -- :float() etc. go to the host
      assert.are.equal('torch.FloatTensor torch.CudaTensor torch.CudaDoubleTensor dev2 true', got.type)
      assert.are.equal('torch.IntTensor torch.CudaTensor dev2 true', got.typeAs)
      assert.are.equal('torch.CudaDoubleTensor torch.CudaHalfTensor torch.CudaLongTensor torch.CudaByteTensor '
         .. 'torch.CudaIntTensor torch.CudaBFloat16Tensor 1,2,-3 2', got.cudaX)
      assert.are.equal('0 -1 false false 2 1 true true', got.device_query)
      assert.are.equal('1.5,2.5,-3 1.5,2.5,-3 dev1 7,8,9', got.copy)
   end)

   it('reads and writes values through host copies', function()
      assert.are.equal('20 6 4 2 torch.CudaTensor', got.reads)
      assert.are.equal('11,20,33 7,7,7,4,50,60', got.writes)
      assert.are.equal('number:3 boolean:true 5', got.read_types)
      assert.are.equal('2.5 135 60 22.5 3', got.item)
      assert.are.equal('true true false', got.compare)
      assert.are.equal('7,60 number', got.totable)
      assert.are.equal('3,10,22 2,4,6', got.apply)
   end)

   it('prints the values and the device', function()
      assert.are.equal(' 1  2\n 3  4\n[torch.CudaTensor of size 2x2 (cuda:0)]\n', got.tostring)
      assert.are.equal('[torch.CudaTensor with no dimension (cuda:0)]\n', got.tostring_empty)
      assert.are.equal(' 5\n[torch.CudaLongTensor of size 1 (cuda:1)]\n', got.tostring_dev1)
   end)

   it('refuses pointer access to device memory at the caller\'s line', function()
      local tail = ': the values of a torch.CudaTensor are in device memory (cuda:0) and cannot be read or written '
         .. 'from Lua directly; copy it to the host first (:float(), :double(), :type())'
      assert.are.equal(child_at('m:data() end') .. 'x:data()' .. tail, got.data)
      -- storages and tril/triu/eye work on the device (tests/lua/nn_cuda_spec.lua has more)
      assert.are.equal('torch.CudaStorage 6 50', got.storage)
      assert.are.equal('7,0,0,4,50,0 torch.CudaTensor 1,0,0,0,1,0', got.tril)
   end)

   it('saves CUDA tensors as cutorch did and loads them onto a device, sharing kept', function()
      assert.are.equal('true true true false', got.ser_names)
      assert.are.equal('torch.CudaTensor dev1 1,2,3,4 2,3 torch.CudaDoubleTensor dev1', got.load)
      assert.are.equal('20,3 true 2', got.load_shared) -- a[2] = 20 is b[1]: one device storage
      assert.are.equal('torch.FloatTensor 1,2,3,4 torch.DoubleTensor', got.load_cpu)
      assert.are.equal('2 2', got.load_dev1)
      assert.are.equal(child_at("map_location = 'cuda:7'") .. 'torch.deserialize: cannot load a torch.CudaTensor '
         .. 'onto cuda:7: no such device (2 devices)', got.load_bad_dev)
      assert.are.equal(child_at("map_location = 'gpu'") .. "torch.deserialize: opts.map_location must be 'cpu', "
         .. "'cuda' or 'cuda:N', got gpu", got.load_bad_opt)
      assert.are.equal('torch.CudaLongTensor 1,3,2,4', got.save_file)
   end)

   it('trains a model:cuda() exactly as on the CPU', function()
      assert.are.equal('torch.CudaTensor torch.CudaTensor torch.CudaTensor torch.CudaTensor', got.model_types)
      assert.are.equal('torch.CudaTensor dev1 75', got.model_flat) -- getParameters on the device
      assert.is_true(tonumber(got.model_diff) <= 1e-6, got.model_diff)
      local dl, drop = got.model_loss:match('^(%S+) (%S+)$')
      assert.is_true(tonumber(dl) <= 1e-6, got.model_loss)
      assert.is_true(tonumber(drop) > 0.1, got.model_loss) -- the 3 steps did lower the loss
      assert.are.equal('torch.CudaTensor dev1', got.model_out)
      local t, d = got.model_back:match('^(%S+) (%S+)$')
      assert.are.equal('torch.FloatTensor', t)
      assert.is_true(tonumber(d) <= 1e-6, got.model_back)
   end)

   it('keeps sharing through :cuda(), :float() and clone', function()
      assert.are.equal('torch.CudaTensor true 0.25,0.25 true', got.share)
      assert.are.equal('torch.FloatTensor true', got.share_back)
      assert.are.equal('torch.CudaTensor dev1 true true', got.clone)
   end)

   it('runs conv, batch norm, pooling, dropout and the criterions on the device', function()
      local t, d, lt, gw, idx = got.cnn:match('^(%S+) (%S+) (%S+) (%S+) (%S+)$')
      assert.are.equal('torch.CudaTensor', t)
      assert.is_true(tonumber(d) <= 1e-6, got.cnn)
      assert.are.equal('number', lt)
      assert.are.equal('torch.CudaTensor', gw)
      assert.are.equal('torch.CudaLongTensor', idx) -- the pooling indices moved with the model
      assert.is_true(tonumber(got.xent) <= 1e-6, got.xent)
   end)

   it('has synchronize, hostFallbacks, the backend switches and one seed', function()
      -- the mock has no sum kernel, so sum falls back to the host; the emulator runs them all
      assert.are.equal(H.emu and 'false false true' or 'true true true', got.fallbacks)
      assert.are.equal(child_at('cuda.synchronize(9)') .. 'cuda synchronize: no device 9 (2 devices)', got.sync_bad)
      assert.are.equal('false false true', got.flags0)
      assert.are.equal('true true 1 1', got.flags1)
      -- host_fallback = false: an op without a kernel fails (the mock has no sort kernel)
      assert.are.equal(H.emu and 'nil' or child_at('CudaTensor({3, 1, 2}):sort() end')
         .. 'mock: no CUDA kernel for op ' .. torch._C.TC_OP_SORT, got.no_fallback)
      assert.are.equal(child_at('benchmrk') .. 'torch.backends.cudnn has no field benchmrk', got.flag_typo)
      assert.are.equal(child_at('benchmark = 1') .. 'torch.backends.cudnn.benchmark: expected a boolean, got number',
         got.flag_value)
      assert.are.equal('true false 0 true 1', got.cudnn_enabled)
      assert.are.equal(child_at("enabled = 'no'") .. 'torch.backends.cudnn.enabled: expected a boolean, got string',
         got.cudnn_enabled_value)
      assert.are.equal('same', got.seed)
   end)

   it('raises bad input at the caller\'s line and changes nothing', function()
      assert.are.equal(child_at("y:add(torch.FloatTensor({1, 1, 1}))") .. 'add: input 2 of size (3) is on cpu but the '
         .. 'op runs on cuda:0; move it with :cuda() or :float()', got.mix)
      assert.are.equal(child_at('torch.cmul(torch.FloatTensor') .. 'mul: input 2 of size (3) is on cuda:0 but the op '
         .. 'runs on cpu; move it with :cuda() or :float()', got.mix_fn)
      assert.are.equal(child_at('y + torch.CudaTensor') .. 'add: input 2 of size (3) is on cuda:1 but the op runs on '
         .. 'cuda:0; move it with :cuda() or :float()', got.mix_dev)
      assert.are.equal(child_at('y:cuda(5)') .. 'cuda: no device 5 (2 devices: 0..1, numbered from 0)', got.bad_dev)
      assert.are.equal(child_at("y:cuda('x')") .. 'cuda: device must be an integer (0-based), got string',
         got.bad_dev_type)
      assert.are.equal(child_at('torch.CudaNopeTensor') .. "type: unknown tensor type 'torch.CudaNopeTensor'",
         got.bad_type)
      assert.are.equal('1,2,3 true', got.unchanged)
      assert.are.equal('6,7,8', got.scalar_ok)
      assert.are.equal(child_at('y[4]') .. 'index 4 is out of bounds for dim 1 of size 3', got.oob)
   end)
end)

describe('TOCHA_CUDA_FILL_UNINITIALIZED over the ' .. H.BACKEND, function()
   it('fills a reused block with 0xff bytes when set to 1, and leaves it alone otherwise', function()
      local got, out = H.run_child('tests/lua/cuda_fill_child.lua', 'TOCHA_CUDA_FILL_UNINITIALIZED=1')
      assert.are.same({'true', 'true', 'nan', '-1', '255', '150000'},
                      {got.done, got.reused, got.float, got.long, got.byte, got.sum}, out)
      got, out = H.run_child('tests/lua/cuda_fill_child.lua', 'TOCHA_CUDA_FILL_UNINITIALIZED=')
      assert.are.same({'true', 'true', '3'}, {got.done, got.reused, got.float}, out)
   end)
end)
