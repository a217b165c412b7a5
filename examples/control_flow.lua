-- control_flow.lua -- data-dependent control flow, trained eagerly. Each sample takes one
-- of two branches depending on its own values (`if x:mean() > 0.5 then ... end`); autograd
-- records only the path actually taken, so gradients are exact for every sample, and the
-- number of refinement steps even depends on the data. (A static graph could not express
-- this without cond/while ops; eager mode just runs Lua.)
--
--   tocha examples/control_flow.lua
require 'torch'
require 'nn'
require 'optim'
torch.manualSeed(0)

-- Target: samples with a high mean follow one linear map, the others another.
local d = 8
local A_true, B_true = torch.randn(d, 1), torch.randn(d, 1)
local function target(x) return x:mean() > 0.5 and x:view(1, d) * A_true or x:view(1, d) * B_true * -1 end

local high, low = nn.Linear(d, 1), nn.Linear(d, 1)
local refine = nn.Linear(1, 1)
local params = {}
for _, m in ipairs({high, low, refine}) do
   for _, p in ipairs(m:parameters()) do params[#params + 1] = p end
end
local optimizer = optim.Adam(params, {lr = 0.02})

local function model(x)
   local h
   if x:mean() > 0.5 then h = high(x:view(1, d)) else h = low(x:view(1, d)) end
   -- a data-dependent number of refinement steps: one per positive input value, at most 3
   local steps = math.min(3, x:gt(0.9):sum())
   for _ = 1, steps do h = h + refine(h) * 0.1 end
   return h
end

for epoch = 1, 300 do
   optimizer:zero_grad()
   local loss = 0
   for _ = 1, 16 do
      local x = torch.rand(d)
      local diff = model(x) - target(x)
      loss = loss + (diff * diff):sum() / 16
   end
   loss:backward()
   optimizer:step()
   if epoch % 50 == 0 then print(string.format('epoch %3d  loss %.5f', epoch, loss:item())) end
end
