-- demo.lua -- the main job for now (`make demo`): builds tensors, multiplies matrices and
-- prints results, then fits a linear model by gradient descent written with tensor ops
-- (explicit gradients; autograd arrives with the next milestone).
require 'torch'
torch.setdefaulttensortype('torch.FloatTensor')
torch.manualSeed(42)

print('tocha ' .. torch.version .. ' -- tensors, matrix products, a least-squares fit')

local a = torch.range(1, 6):view(2, 3)
local b = torch.Tensor({{1, 0}, {0, 1}, {1, 1}})
print('a =')
print(a)
print('b =')
print(b)
print('a * b =')
print(a * b)

-- A timed 512x512 product
local m1, m2 = torch.rand(512, 512), torch.rand(512, 512)
local timer = torch.Timer()
local p = torch.mm(m1, m2)
local secs = timer:time().real
print(string.format('512x512 matrix product: %.2f ms, %.1f GFLOP/s, checksum %.4f',
   secs * 1e3, 2 * 512 ^ 3 / secs / 1e9, p:sum() / p:nElement()))

-- y = X w_true + noise; recover w by gradient descent on the mean squared error
local n, d = 1000, 5
local X = torch.randn(n, d)
local w_true = torch.Tensor({2, -1, 0.5, 3, -2}):view(d, 1)
local y = X * w_true + torch.randn(n, 1):mul(0.1)
local w = torch.zeros(d, 1)
local lr = 0.1
for step = 1, 100 do
   local err = X * w - y                          -- (n, 1)
   local loss = torch.pow(err, 2):mean()          -- (err:pow(2) would square err in place)
   local grad = (X:t() * err):mul(2 / n)          -- (d, 1)
   w:add(-lr, grad)
   if step == 1 or step % 20 == 0 then print(string.format('step %3d  mse %.5f', step, loss)) end
end
print('recovered w:')
print(w:view(d))
print(string.format('max |w - w_true| = %.4f', (w - w_true):abs():max()))
