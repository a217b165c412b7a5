-- linear_regression.lua -- the smallest training loop: fit y = 2x + 3 (plus noise) with
-- nn.Linear(1, 1), nn.MSECriterion and optim.sgd, Torch7 style.
--
-- With --compiled the model's forward and backward run as compiled graphs (model:compile(),
-- docs/jit_train.md); the loop is unchanged and prints the same losses (up to float rounding).
--
--   tocha examples/linear_regression.lua [--compiled]
require 'torch'
require 'nn'
require 'optim'

local cmd = torch.CmdLine()
cmd:option('--compiled', false, 'forward and backward as compiled graphs (model:compile())')
local opt = cmd:parse(arg or {})
torch.manualSeed(0)

local n = 256
local x = torch.rand(n, 1) * 4 - 2
local y = x * 2 + 3 + torch.randn(n, 1) * 0.1

local model = nn.Linear(1, 1)
local criterion = nn.MSECriterion()
local params, grads = model:getParameters()
if opt.compiled then model:compile() end
local config = {learningRate = 0.1}

local function feval()
   grads:zero()
   local loss = criterion:forward(model:forward(x), y)
   model:backward(x, criterion:backward(model.output, y))
   return loss, grads
end

for epoch = 1, 100 do
   local _, fx = optim.sgd(feval, params, config)
   if epoch % 20 == 0 then print(string.format('epoch %3d  loss %.5f', epoch, fx[1])) end
end
print(string.format('learned y = %.3f x + %.3f  (true: 2x + 3)', model.weight[1][1], model.bias[1]))
if opt.compiled then
   local st = model:compileStats()
   print(string.format('compiled: %d trace(s), %d graph run(s), %d eager call(s)', st.traces, st.hits, st.eager_calls))
end
