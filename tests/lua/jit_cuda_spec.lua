-- tests/lua/jit_cuda_spec.lua -- graph mode on a CUDA device from Lua (docs/jit.md, "Graph
-- mode on the GPU"): jit.compile'd functions with CUDA tensors, guards keyed on the device,
-- a compiled CUDA model, tocha.jit.step training a CUDA model, all against eager CPU results.
-- The body runs in a child process (tests/lua/jit_cuda_child.lua) over the mock backend
-- (build/tests/libtocha_cuda_mock.so, 2 devices), since the CUDA library state is per
-- process; the CUDA Graph captures of whole classification steps run in another child
-- (tests/lua/jit_cuda_graph_child.lua) over the mock with TOCHA_CUDA_MOCK_KERNELS=cpu (every
-- op through libtocha's CPU kernels, so nothing needs the host fallback). Run from the
-- repository root (tests/run.sh).
require 'torch'

local H = dofile('tests/lua/cuda_child_helper.lua')
local CHILD = 'tests/lua/jit_cuda_child.lua'

describe('graph mode on a CUDA device (' .. H.BACKEND .. ')', function()
   local got, out
   setup(function()
      got, out = H.run_child(CHILD)
   end)
   local function check(key, want)
      assert.are.equal(want, got[key], key .. ' (child output:\n' .. out .. ')')
   end

   it('runs jit.compile\'d functions of CUDA tensors on the device, matching the CPU', function()
      check('compile.type', 'torch.CudaDoubleTensor')
      check('compile.device', '0')
      check('compile.first', 'true')
      check('compile.diff', 'true')
      check('compile.view', 'true')
      check('compile.traces', '1')
      check('compile.hits', '1')
      check('compile.graph_device', '0')
      if H.emu then -- the emulator's NVRTC and driver (tests/emu/emu_driver.cc) run the generated kernel
         check('compile.kernels', 'true')
      else
         check('compile.unfused', 'true') -- the mock cannot run generated kernels: said and counted
      end
   end)

   it('fuses float16 nodes on the device into groups that give eager\'s bits', function()
      check('half.type', 'torch.CudaHalfTensor')
      check('half.same', 'true')
      check('half.groups', 'true')
      if H.emu then -- a generated kernel
         check('half.kernels', 'true')
      else -- member by member
         check('half.unfused', 'true')
      end
   end)

   it('keys guards on the device: CPU, cuda:0 and cuda:1 inputs trace separately', function()
      check('guard.traces', '3')
      check('guard.hits', '1')
      check('guard.devices', '-1,0,1,0')
      check('guard.same', 'true')
   end)

   it('compiles a CUDA model (model:compile) with the CPU model\'s outputs and gradients', function()
      check('module.match', 'true')
      check('module.type', 'torch.CudaDoubleTensor')
      check('module.graphs', 'true')
   end)

   it('trains a CUDA model with tocha.jit.step, losses and parameters as eager on the CPU', function()
      check('step.losses', 'true')
      check('step.params', 'true')
      check('step.param_type', 'torch.CudaDoubleTensor')
      check('step.traces', '1')
      check('step.graph_device', '0')
   end)

   it('replays a captured CUDA graph of the step (cuda_graph = true), as eager on the CPU', function()
      check('graph.losses', 'true') -- learning-rate schedule included
      check('graph.weight', 'true')
      check('graph.replays', '4')
   end)

   -- it needs an op without a device kernel (the mock's addmm): not over the emulator
   local it_mock = H.emu and pending or it
   it_mock('runs a step it cannot capture as a compiled graph (a note), or raises naming the node with strict', function()
      check('nocapture.losses', 'true')
      check('nocapture.replays', '0')
      check('strict.error', 'true')
      -- the mock has no addmm kernel (host fallback); cross-entropy's gather is captured
      assert.is_truthy(out:find('tocha.jit.step: the step cannot be captured as a CUDA graph (graph capture: addmm: ',
                                1, true))
   end)
end)

describe('CUDA Graph capture of whole training steps ('
         .. (H.emu and H.BACKEND or 'mock backend running CPU kernels') .. ')', function()
   local got, out
   setup(function()
      got, out = H.run_child('tests/lua/jit_cuda_graph_child.lua', 'TOCHA_CUDA_MOCK_KERNELS=cpu')
   end)
   local function check(key, want)
      assert.are.equal(want, got[key], key .. ' (child output:\n' .. out .. ')')
   end

   it('captures and replays tocha.jit.step of an MLP classifier (SGD + momentum, Adam), as eager on the CPU',
      function()
      for _, name in ipairs({'sgd', 'adam'}) do
         check(name .. '.losses', 'true')
         check(name .. '.losses_change', 'true')
         check(name .. '.params', 'true')
         check(name .. '.param_type', 'torch.CudaDoubleTensor')
         check(name .. '.replays', '8') -- 10 steps: 1 eager warm-up, 1 graph run + capture, 8 replays
      end
      check('step.fallbacks', '0') -- no op ran on the host (a capture would have refused it)
   end)

   it('model:compile{cuda_graph = true} replays its forward and backward graphs, as eager on the CPU', function()
      check('module.losses', 'true')
      check('module.params', 'true')
      check('module.replays', '16') -- 10 calls each: trace, warm-up run + capture, 8 replays
      check('module.static_output', 'true')
      check('module.fallbacks', '0')
   end)

   it('model:compile{cuda_graph = true, strict = true} captures dropout: a fresh mask at every replay', function()
      check('dropout.replays', '3')
      check('dropout.fresh', 'true')
   end)

   it('checks the indices of a captured index op at each replay: a bad one skips it, the next sync reports', function()
      check('index.replays', '20,0,40,0')
      check('index.bad', 'true')
      -- the mock skips the whole call; the real kernel (the emulator) skips the bad element only,
      -- as docs/cuda.md says: the valid index 2 still adds 10
      check('index.skipped', H.emu and '0,10,0,0' or '0,0,0,0')
      check('done', 'true')
   end)
end)
