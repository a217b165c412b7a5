-- linear_regression.lua -- the smallest training loop: fit y = 2x + 3 (plus noise) with
-- nn.Linear(1, 1), nn.MSECriterion and optim.sgd, Torch7 style.
--
--   tocha examples/linear_regression.lua
require 'torch'
require 'nn'
require 'optim'
torch.manualSeed(0)

local n = 256
local x = torch.rand(n, 1) * 4 - 2
local y = x * 2 + 3 + torch.randn(n, 1) * 0.1

local model = nn.Linear(1, 1)
local criterion = nn.MSECriterion()
local params, grads = model:getParameters()
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
