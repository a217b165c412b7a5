-- tests/lua/cuda_stream_spec.lua -- torch.cuda streams, events, pinned memory, non_blocking
-- copies and CUDA graphs (lua/torch/cuda_stream.lua). Without CUDA the entry points raise
-- "CUDA unavailable" here; the rest runs in a child process (tests/lua/cuda_stream_child.lua)
-- over the mock backend (2 devices), whose graph capture records and replays the calls.
require 'torch'

local H = dofile('tests/lua/cuda_child_helper.lua')
local CHILD = 'tests/lua/cuda_stream_child.lua'

local at = H.at

describe('CUDA streams without CUDA', function()
   it('raise "CUDA unavailable" at the caller\'s line', function()
      local ok, why = torch.cuda.isAvailable()
      if ok then return end
      local okc, e = pcall(function() local s = torch.cuda.Stream() end)
      assert.is_false(okc)
      assert.are.equal(at('tests/lua/cuda_stream_spec.lua', 'local s = torch.cuda.Stream() end')
         .. 'torch.cuda.Stream: CUDA unavailable: ' .. why, e)
      assert.has_error(function() local e2 = torch.cuda.Event() end)
      assert.has_error(function() local g = torch.cuda.CUDAGraph() end)
      assert.has_error(function() local p = torch.FloatTensor(2):pin_memory() end)
      assert.is_false(torch.FloatTensor(2):is_pinned())
   end)
end)

describe('CUDA streams over the ' .. H.BACKEND, function()
   local got
   setup(function()
      local out
      got, out = H.run_child(CHILD)
      assert.are.equal('true', got.done, 'the child failed:\n' .. out)
   end)
   local function child_at(text) return at(CHILD, text) end

   it('makes streams current, in a function or until reset', function()
      assert.are.equal('0 true false', got.stream)
      assert.are.equal('true 2,4,6 false', got.stream_fn)
      assert.are.equal(child_at("error('boom')") .. 'boom false', got.stream_fn_error)
      assert.are.equal('true true', got.set_stream)
      assert.are.equal('true', got.query)
      assert.are.equal('true', got.default_again)
      assert.are.equal('1 ' .. child_at("cuda.Stream('x')") .. "torch.cuda.Stream: device must be an integer (0-based), got x",
         got.stream1)
   end)

   it('records, waits for and times events', function()
      assert.are.equal('true true', got.event)
      assert.is_truthy(got.event_no_timing:find(child_at('cuda.Event():elapsed_time(e1)'), 1, true))
      assert.is_truthy(got.event_no_timing:find('both events need timing', 1, true))
      assert.are.equal('true', got.record_event)
   end)

   it('pins host memory and copies from it without blocking', function()
      assert.are.equal('true false true 1,2,3,4', got.pinned)
      assert.are.equal('torch.CudaTensor 1,2,3,4 torch.CudaDoubleTensor dev2 1,3,2,4', got.non_blocking)
      assert.are.equal(child_at('d:pin_memory()') .. 'pin_memory: the tensor of size (2,2) is on cuda:0; only host '
         .. 'tensors are pinned', got.pin_device)
   end)

   it('captures a graph and replays it over new inputs', function()
      assert.are.equal('false', got.captured)
      assert.are.equal('2,2,8,8', got.replay)
      assert.are.equal('18,18,18,18', got.replay2)
      assert.are.equal(child_at('g:replay() end') .. 'CUDAGraph:replay: nothing captured', got.replay_reset)
      assert.are.equal('9,9,9,9', got.begin_end)
      assert.are.equal(child_at('g3:capture_end() end') .. 'CUDAGraph:capture_end: no capture in progress '
         .. '(capture_begin first)', got.end_twice)
   end)

   it('refuses what a graph cannot record, naming the op, and recovers', function()
      local while_ = 'while a CUDA graph is being captured on cuda:0'
      assert.is_truthy(got.refuse_item:find(child_at('local v = x[1]') .. 'copy: cannot copy device values to the host '
         .. while_, 1, true))
      if not H.emu then -- the mock has no sort kernel (the emulator runs the real one)
         assert.is_truthy(got.refuse_fallback:find('sort: cannot run on the host (the CUDA backend declined it: mock: '
            .. 'no CUDA kernel for op ', 1, true) and got.refuse_fallback:find(') ' .. while_, 1, true), got.refuse_fallback)
      end
      assert.is_truthy(got.refuse_random:find('uniform: cannot draw from a generator other than the default one '
         .. while_, 1, true))
      assert.is_truthy(got.refuse_sync:find('cuda synchronize: cannot wait for the device ' .. while_, 1, true))
      assert.are.equal('false true 6,6,6,6', got.after_refusals)
   end)
end)

describe('random ops in a CUDA graph over the ' .. H.BACKEND, function()
   local got
   setup(function()
      local out
      got, out = H.run_child('tests/lua/cuda_rngcap_child.lua')
      assert.are.equal('true', got.done, 'the child failed:\n' .. out)
   end)

   it('draw fresh numbers per replay, eager mode\'s numbers for the same seed', function()
      assert.are.equal('true', got.cpu_first)
      assert.are.equal('true', got.capture_leaves_generator)
      -- replay 1 = eager run 1, replay 2 = eager run 2, they differ, generator states equal
      assert.are.equal('true true true true true', got.uniform_normal)
   end)

   it('capture nn.Dropout\'s forward', function()
      assert.are.equal('true true true true', got.dropout)
   end)
end)

-- over the mock only: the child holds events back with the mock's hook (tc_cuda_mock_hold)
local describe_mock = H.emu and function(name) pending(name) end or describe
describe_mock('non_blocking copies to the host and record_stream over the mock backend', function()
   local got
   local CHILD_R = 'tests/lua/cuda_record_child.lua'
   setup(function()
      local out
      got, out = H.run_child(CHILD_R)
      assert.are.equal('true', got.done, 'the child failed:\n' .. out)
   end)

   it('copy to pinned host tensors, values right once the stream is synchronised', function()
      assert.are.equal('torch.FloatTensor true 1,2,3,4', got.nb_float)
      assert.are.equal('torch.DoubleTensor true 10,12,14', got.nb_double)
      assert.are.equal('torch.LongTensor true 1,3,2,4', got.nb_type)
      assert.are.equal('false false', got.blocking)
      assert.are.equal('true', got.host_self)
      assert.are.equal('torch.CudaDoubleTensor 1,2,3,4', got.nb_h2d)
   end)

   it('are refused while a graph is captured, with the capture\'s message', function()
      assert.are.equal(at(CHILD_R, 'local h = d:float(true)') .. 'to (non_blocking): cannot copy to the host while a '
         .. 'CUDA graph is being captured on cuda:0 (a graph cannot hand values to the host; copy after replaying)',
         got.nb_capture)
      assert.are.equal('false 1,2,3,4', got.nb_capture_after)
   end)

   it('record_stream keeps a block from reuse until the recorded stream is done', function()
      -- freed while `user` is held: still allocated; a new tensor gets another block; after
      -- synchronize the block is back
      assert.are.equal('true 4096 0', got.record)
      assert.are.equal(at(CHILD_R, 'torch.FloatTensor(2):record_stream()') .. 'record_stream: the tensor of size (2) is '
         .. 'on cpu; only CUDA tensors record streams (their memory comes from the caching allocator)', got.record_cpu)
      assert.are.equal(at(CHILD_R, "record_stream('s')") .. 'record_stream: expected a torch.cuda.Stream (or nil for '
         .. 'the current stream), got s', got.record_arg)
      assert.are.equal(at(CHILD_R, 'record_stream(cuda.Stream(1))') .. 'record_stream: the tensor of size (2) is on '
         .. 'cuda:0 but the stream belongs to cuda:1; record a stream of the tensor\'s device', got.record_dev)
   end)
end)
