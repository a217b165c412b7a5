-- control_flow.lua -- data-dependent control flow, trained eagerly or as one compiled graph.
-- Each sample takes one of two branches depending on its own values (x:mean() > 0.5), then
-- a data-dependent number of refinement steps (one per input value above 0.9, at most 3).
--
-- Eagerly (the default) this is just Lua: `if x:mean() > 0.5 then ... end` and a `for`
-- loop; autograd records only the path each sample took, so gradients are exact.
--
-- With --compiled the same model is written with tocha.cond and tocha.while_loop, and the
-- whole training step (forward, loss, backward, Adam update) is compiled by tocha.jit.step
-- into ONE graph: its cond/while nodes read the predicate and the trip count from each
-- run's data, and so do their gradients (a cond over the branches' gradients, a loop run
-- backward from the last iteration). Both modes draw the same data from the same seed and
-- print the same losses (up to float rounding).
--
--   tocha examples/control_flow.lua [--compiled] [-epochs 300] [-every 50]
require 'torch'
require 'nn'
require 'optim'
local tocha = require 'tocha'

local cmd = torch.CmdLine()
cmd:option('-compiled', false, 'tocha.cond / tocha.while_loop, training step compiled by tocha.jit.step')
cmd:option('-epochs', 300, 'training steps (16 samples each)')
cmd:option('-every', 50, 'print the loss every n steps')
local opt = cmd:parse(arg or {})
torch.manualSeed(0)

-- Target: samples with a high mean follow one linear map, the others another.
local d, batch = 8, 16
local A_true, B_true = torch.randn(d, 1), torch.randn(d, 1)
local function target(x) return x:mean() > 0.5 and x:view(1, d) * A_true or x:view(1, d) * B_true * -1 end

local high, low = nn.Linear(d, 1), nn.Linear(d, 1)
local refine = nn.Linear(1, 1)
local net = nn.Sequential():add(high):add(low):add(refine) -- holds the parameters
local criterion = nn.MSECriterion()
local optimizer = optim.Adam(net:parameters(), {lr = 0.02})

-- Eager: plain Lua control flow on tensor values.
local function sample_eager(x)
   local h
   if x:mean() > 0.5 then h = high(x:view(1, d)) else h = low(x:view(1, d)) end
   local steps = math.min(3, x:gt(0.9):sum())
   for _ = 1, steps do h = h + refine(h) * 0.1 end
   return h
end

-- Graph mode: the same decisions as tocha.cond / tocha.while_loop (a tensor predicate, a
-- trip count held in tensors), so a compiled graph makes them per run.
local function sample_graph(x)
   local h = tocha.cond(x:mean(1):gt(0.5), function(v) return high(v:view(1, d)) end,
                        function(v) return low(v:view(1, d)) end, x)
   local steps = x:gt(0.9):typeAs(x):sum(1):clamp(0, 3)
   local s = tocha.while_loop(function(st) return st.i:lt(steps) end,
                              function(st) return {i = st.i + 1, h = st.h + refine(st.h) * 0.1} end,
                              {i = torch.zeros(1), h = h})
   return s.h
end

-- The model over a batch (batch x d) -> (batch x 1), one decision per sample.
local function model(sample)
   local Model, parent = torch.class('nn.ControlFlowExample', 'nn.Module')
   function Model:parameters() return net:parameters() end
   function Model:updateOutput(X)
      local hs = {}
      for k = 1, X:size(1) do hs[k] = sample(X[k]) end
      self.output = torch.cat(hs, 1)
      return self.output
   end
   return Model()
end

local m = model(opt.compiled and sample_graph or sample_eager)
local step
if opt.compiled then
   step = tocha.jit.step(m, criterion, optimizer)
else
   step = function(X, Y)
      optimizer:zero_grad()
      local loss = criterion(m(X), Y)
      loss:backward()
      optimizer:step()
      return loss:item()
   end
end

for epoch = 1, opt.epochs do
   local X = torch.rand(batch, d)
   local Y = torch.cat((function()
      local ys = {}
      for k = 1, batch do ys[k] = target(X[k]) end
      return ys
   end)(), 1)
   local loss = step(X, Y)
   if epoch % opt.every == 0 then print(string.format('epoch %3d  loss %.6f', epoch, loss)) end
end
if opt.compiled then
   local st = step:stats()
   print(string.format('compiled: %d trace(s), %d graph run(s), %d eager step(s)', st.traces, st.hits,
                       st.eager_steps))
end
