-- gemm.lua [N] -- an N x N float matrix product (default 2048), GFLOP/s.
local common = dofile(arg[0]:match('^(.*)/[^/]*$') .. '/common.lua')
local torch = common.setup()
local n = tonumber(arg[1] or '2048')
local a, b = torch.FloatTensor(n, n):uniform(), torch.FloatTensor(n, n):uniform()
local c = torch.FloatTensor(n, n)
c:mm(a, b)
local best = math.huge
for _ = 1, 5 do
   local t0 = common.now()
   c:mm(a, b)
   local dt = common.now() - t0
   if dt < best then best = dt end
end
print(string.format('%.2f', 2 * n * n * n / best / 1e9))
