-- tests/lua/control_train_spec.lua -- training through graph-mode control flow: a model whose
-- per-sample branch (tocha.cond) and number of refinement steps (tocha.while_loop) depend on
-- the data, trained with its whole step compiled (tocha.jit.step: forward, backward through
-- the cond/while nodes, the optimizer update in ONE graph), must give the losses and the
-- parameters of the same model written with Lua `if`s and loops and trained eagerly, from
-- the same seeds (float64: 1e-10). Also examples/control_flow.lua, run eagerly and with
-- --compiled as the user would, printing the same losses.
require 'torch'
require 'nn'
require 'optim'
local tocha = require 'tocha'
local jit = tocha.jit

local root = os.getenv('TOCHA_HOME') or '.'
local build = os.getenv('TOCHA_BUILD') or (root .. '/build')

local function rel_close(a, b, tol) return math.abs(a - b) <= tol * math.max(1, math.abs(a), math.abs(b)) end

-- A per-sample model: a branch on the sample's mean, then up to 3 refinement steps (one per
-- value above 0.9). sample(net, x) for one sample x (d); graph = true writes the decisions
-- with tocha.cond / tocha.while_loop, else with Lua control flow.
local Net, parent = torch.class('nn.TestControlTrainNet', 'nn.Module')
function Net:__init(d, graph)
   parent.__init(self)
   self.d, self.graph = d, graph
   self.high, self.low, self.refine = nn.Linear(d, 2), nn.Linear(d, 2), nn.Linear(2, 2)
   self.modules = {self.high, self.low, self.refine}
end
function Net:parameters()
   local ws, gs = {}, {}
   for _, m in ipairs(self.modules) do
      local w, g = m:parameters()
      for i = 1, #w do ws[#ws + 1], gs[#gs + 1] = w[i], g[i] end
   end
   return ws, gs
end
function Net:sample(x)
   local d, high, low, refine = self.d, self.high, self.low, self.refine
   if not self.graph then
      local h
      if x:mean() > 0.5 then h = high(x:view(1, d)) else h = torch.tanh(low(x:view(1, d))) end
      for _ = 1, math.min(3, x:gt(0.9):sum()) do h = h + torch.tanh(refine(h)) * 0.5 end
      return h
   end
   local h = tocha.cond(x:mean(1):gt(0.5), function(v) return high(v:view(1, d)) end,
                        function(v) return torch.tanh(low(v:view(1, d))) end, x)
   local steps = x:gt(0.9):typeAs(x):sum(1):clamp(0, 3)
   return tocha.while_loop(function(s) return s[1]:lt(steps) end,
                           function(s) return {s[1] + 1, s[2] + torch.tanh(refine(s[2])) * 0.5} end,
                           {torch.zeros(1), h})[2]
end
function Net:updateOutput(X)
   local hs = {}
   for k = 1, X:size(1) do hs[k] = self:sample(X[k]) end
   self.output = torch.cat(hs, 1)
   return self.output
end

-- Trains `steps` steps from seed 11; returns the losses, the final parameters, the step.
local function train(graph, steps, make_opt)
   local saved = torch.getdefaulttensortype()
   torch.setdefaulttensortype('torch.DoubleTensor')
   torch.manualSeed(11)
   local net = nn.TestControlTrainNet(6, graph)
   local crit = nn.MSECriterion()
   local opt = make_opt(net:parameters())
   local step = graph and jit.step(net, crit, opt) or function(X, Y)
      opt:zero_grad()
      local l = crit(net(X), Y)
      l:backward()
      opt:step()
      return l:item()
   end
   local losses = {}
   for i = 1, steps do
      local X, Y = torch.rand(8, 6), torch.randn(8, 2)
      losses[i] = step(X, Y)
   end
   local ps = {}
   for i, p in ipairs(net:parameters()) do ps[i] = p:detach():clone() end
   torch.setdefaulttensortype(saved)
   return losses, ps, graph and step
end

describe('compiled training through tocha.cond / tocha.while_loop', function()
   for _, case in ipairs({{'Adam', function(ps) return optim.Adam(ps, {lr = 0.05}) end},
                          {'SGD with momentum', function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.9}) end}}) do
      it('tocha.jit.step (' .. case[1] .. ') gives the eager Lua-control-flow losses and parameters', function()
         local le, pe = train(false, 12, case[2])
         local lc, pc, step = train(true, 12, case[2])
         for i = 1, #le do
            assert.is_true(rel_close(le[i], lc[i], 1e-10),
                           string.format('step %d: loss %.17g eager vs %.17g compiled', i, le[i], lc[i]))
         end
         for i = 1, #pe do
            local d = (pe[i] - pc[i]):abs():max()
            assert.is_true(d <= 1e-10, string.format('parameter %d differs by %g', i, d))
         end
         -- one graph ran every step after the warm-up and the trace: the decisions were made
         -- per run (8 samples x 12 steps take both branches and 0..3 refinements)
         local st = step:stats()
         assert.equals(1, st.traces)
         assert.equals(10, st.hits)
         local dump = step:graph():dump()
         assert.truthy(dump:find('= cond(', 1, true))
         assert.truthy(dump:find('= while_grad(', 1, true))
      end)
   end
end)

describe('model:compile() through tocha.cond / tocha.while_loop (Torch7 style)', function()
   it('forward and backward graphs give the eager Lua model\'s output, gradInput and gradients', function()
      local saved = torch.getdefaulttensortype()
      torch.setdefaulttensortype('torch.DoubleTensor')
      torch.manualSeed(12)
      local net, ref = nn.TestControlTrainNet(6, true), nn.TestControlTrainNet(6, false)
      local pn, gn = net:parameters()
      local pr, gr = ref:parameters()
      for i = 1, #pn do pr[i]:copy(pn[i]) end
      local notes, prev = {}, jit._note
      jit._note = function(msg) notes[#notes + 1] = msg end
      net:compile()
      local ok, err = pcall(function()
         for _ = 1, 4 do
            local X, G = torch.rand(8, 6), torch.randn(8, 2)
            net:zeroGradParameters()
            ref:zeroGradParameters()
            local o1, o2 = net:forward(X), ref:forward(X)
            local gi1, gi2 = net:backward(X, G), ref:backward(X, G)
            assert.is_true((o1 - o2):abs():max() <= 1e-12)
            assert.is_true((gi1 - gi2):abs():max() <= 1e-12)
            for i = 1, #gn do assert.is_true((gn[i] - gr[i]):abs():max() <= 1e-12, 'gradient ' .. i) end
         end
      end)
      jit._note = prev
      net:decompile()
      torch.setdefaulttensortype(saved)
      assert(ok, err)
      assert.equals(0, #notes, table.concat(notes, '\n')) -- no eager fallback
   end)
end)

describe('examples/control_flow.lua', function()
   local function run(flags)
      local cmd = string.format('cd %q && TOCHA_HOME=%q TOCHA_BUILD=%q %q examples/control_flow.lua %s 2>&1',
                                root, root, build, build .. '/tocha', flags)
      local p = assert(io.popen(cmd))
      local out = p:read('*a')
      p:close()
      local losses = {}
      for l in out:gmatch('loss (%S+)') do losses[#losses + 1] = tonumber(l) end
      return losses, out
   end

   it('--compiled prints the eager losses step by step', function()
      local le, oe = run('-epochs 30 -every 1')
      local lc, oc = run('--compiled -epochs 30 -every 1')
      assert.equals(30, #le, oe)
      assert.equals(30, #lc, oc)
      for i = 1, 30 do
         assert.is_true(math.abs(le[i] - lc[i]) <= 2e-6, string.format('epoch %d: %g eager vs %g compiled', i, le[i], lc[i]))
      end
      assert.truthy(oc:find('compiled: 1 trace(s), 28 graph run(s), 1 eager step(s)', 1, true), oc)
   end)
end)
