-- hello.lua -- the README's first script: build tensors, multiply matrices, print results.
--
--   build/tocha examples/hello.lua
--
-- Torch7 code runs unchanged: this is how the same lines looked under `th`.
require 'torch'
torch.setdefaulttensortype('torch.FloatTensor') -- Torch7's default is Double

local a = torch.Tensor({{1, 2, 3},
                        {4, 5, 6}})        -- 2x3
local b = torch.Tensor({{7, 8},
                        {9, 10},
                        {11, 12}})         -- 3x2
local c = torch.mm(a, b)                   -- 2x2: {{58, 64}, {139, 154}}
print(c)

local x = torch.ones(3)
print(a * x)                               -- matrix times vector: the row sums 6 and 15

c:mul(2):add(1)                            -- in place: 2c + 1
print('sum of 2c+1: ' .. c:sum())          -- 2*415 + 4 = 834
print('sum of c: ' .. (c:sum() - 4) / 2)
