-- tests/lua/jit_cuda_graph_child.lua -- run by jit_cuda_spec.lua in a fresh process over the
-- mock CUDA backend with TOCHA_CUDA_MOCK_KERNELS=cpu (tests/c/mock_cuda_cpu.c: every op
-- runs through libtocha's CPU kernels on the mock's host memory, so no op needs the host
-- fallback and whole training steps can be captured as CUDA graphs over the mock).
-- Observations, one key=value line each, all against the same steps eagerly on the CPU:
--   B. tocha.jit.step{cuda_graph = true} of an MLP classifier (Linear-ReLU-Linear-LogSoftMax,
--      ClassNLLCriterion) with SGD + momentum and with Adam: captured, replayed, losses and
--      parameters equal, and no host fallback anywhere;
--   C. model:compile{cuda_graph = true}: forward and backward graphs captured and replayed,
--      Torch7-style training (forward, backward, optimizer) equal to eager;
--   D. a captured index op run by a CPU kernel: a bad index put in its static index tensor
--      skips the call at replay and is reported at the next synchronize, as on a GPU.
require 'torch'
require 'nn'
local optim = require 'optim'
local tocha = require 'tocha'
torch.setdefaulttensortype('torch.DoubleTensor')

local H = require 'cuda_child_helper' -- put, err, diff: the children's shared printers
local put, diff = H.put, H.diff

local NIN, NH, NC, B, STEPS = 10, 16, 4, 8, 10
local xs, ys = {}, {}
torch.manualSeed(11)
for i = 1, STEPS do xs[i], ys[i] = torch.randn(B, NIN), torch.LongTensor(B):random(1, NC) end

local function mlp()
   torch.manualSeed(5)
   return nn.Sequential():add(nn.Linear(NIN, NH)):add(nn.ReLU()):add(nn.Linear(NH, NC)):add(nn.LogSoftMax())
end

local function params_diff(a, b)
   local pa, pb = a:parameters(), b:parameters()
   local m = 0
   for i = 1, #pa do m = math.max(m, diff(pa[i], pb[i])) end
   return m
end

-- B. a whole step captured
local function step_run(cuda, make_opt)
   local m, crit = mlp(), nn.ClassNLLCriterion()
   if cuda then m:type('torch.CudaDoubleTensor'); crit:type('torch.CudaDoubleTensor') end
   local opt = make_opt(m:parameters())
   local st = cuda and tocha.jit.step(m, crit, opt, {cuda_graph = true, strict = true})
   local out = {}
   for i = 1, STEPS do
      if st then
         out[i] = st(xs[i]:cudaDouble(), ys[i]:cudaLong())
      else
         opt:zero_grad()
         local l = crit(m(xs[i]), ys[i])
         l:backward()
         opt:step()
         out[i] = l:item()
      end
   end
   return out, m, st
end

local fb0 = torch.cuda.hostFallbacks()
for _, case in ipairs({
   {'sgd', function(p) return optim.SGD(p, {lr = 0.1, momentum = 0.9}) end},
   {'adam', function(p) return optim.Adam(p, {lr = 0.01}) end},
}) do
   local name, make = case[1], case[2]
   local le, me = step_run(false, make)
   local ok, lc, mc, st = pcall(step_run, true, make)
   if not ok then
      put(name .. '.error', lc)
   else
      local dl = 0
      for i = 1, STEPS do dl = math.max(dl, math.abs(le[i] - lc[i])) end
      put(name .. '.losses', dl < 1e-12)
      put(name .. '.losses_change', math.abs(le[1] - le[STEPS]) > 1e-3) -- it did train
      put(name .. '.params', params_diff(me, mc) < 1e-12)
      put(name .. '.param_type', mc:get(1).weight:type())
      -- warm-up step eager, the traced step runs the graph, then capture; the rest replay
      put(name .. '.replays', st:stats().replays)
   end
end
put('step.fallbacks', torch.cuda.hostFallbacks() - fb0)

-- C. model:compile{cuda_graph = true}: Torch7-style training of the same MLP
local function module_run(cuda)
   local m, crit = mlp(), nn.ClassNLLCriterion()
   if cuda then
      m:type('torch.CudaDoubleTensor'); crit:type('torch.CudaDoubleTensor')
      m:compile({cuda_graph = true, strict = true})
   end
   local opt = optim.SGD(m:parameters(), {lr = 0.1, momentum = 0.9})
   local out, outs_same = {}, true
   local first_out
   for i = 1, STEPS do
      local x, y = xs[i], ys[i]
      if cuda then x, y = x:cudaDouble(), y:cudaLong() end
      opt:zero_grad()
      local o = m:forward(x)
      if i == 3 then first_out = o end
      if i > 3 and o ~= first_out then outs_same = false end
      out[i] = crit:forward(o, y)
      m:backward(x, crit:backward(o, y))
      opt:step()
   end
   return out, m, outs_same
end
local fb1 = torch.cuda.hostFallbacks()
local le, me = module_run(false)
local ok, lc, mc, same = pcall(module_run, true)
if not ok then
   put('module.error', lc)
else
   local dl = 0
   for i = 1, STEPS do dl = math.max(dl, math.abs(le[i] - lc[i])) end
   put('module.losses', dl < 1e-12)
   put('module.params', params_diff(me, mc) < 1e-12)
   local s = mc:compileStats()
   -- calls 1: traced; 2: graph run (warm-up) then captured; 3..10 replay: 8 forward + 8 backward
   put('module.replays', s.replays)
   put('module.static_output', same) -- the output is the same static tensor at every replay
   put('module.fallbacks', torch.cuda.hostFallbacks() - fb1)
end

-- E. dropout in model:compile{cuda_graph = true, strict = true}: captured (no refusal), and
--    every replay draws a fresh mask from the generator torch.manualSeed seeds
do
   torch.manualSeed(3)
   local md = nn.Sequential():add(nn.Linear(6, 5)):add(nn.Dropout(0.5)):add(nn.Linear(5, 2)):cuda()
   md:compile{cuda_graph = true, strict = true}
   local xd, outs = torch.randn(4, 6):cuda(), {}
   for i = 1, 5 do outs[i] = md:forward(xd):double():clone() end
   put('dropout.replays', md:compileStats().replays) -- calls 3..5
   put('dropout.fresh', diff(outs[4], outs[5]) > 0 and diff(outs[3], outs[4]) > 0)
end

-- D. index_add (a CPU kernel here) in a CUDA graph: indices are checked at every replay
local function flat(t) return table.concat(t:double():totable(), ',') end
local dst, idx, src = torch.CudaDoubleTensor(4):zero(), torch.CudaLongTensor({1, 3}), torch.CudaDoubleTensor({10, 20})
local g = torch.cuda.CUDAGraph()
torch.cuda.graph(g, function() dst:indexAdd(1, idx, src) end)
dst:zero()
g:replay(); g:replay()
put('index.replays', flat(dst))
dst:zero()
idx:copy(torch.LongTensor({2, 9}))
g:replay()
local iok, ierr = pcall(torch.cuda.synchronize)
put('index.bad', not iok and tostring(ierr):find('index_add: index 8 is out of range for dim 0 of size 4 (found on ' ..
                                                 'the device during a CUDA graph replay', 1, true) ~= nil)
put('index.skipped', flat(dst))
put('done', true)
