-- dispatch.lua MODE -- per-op overhead of a tiny (1-element) float add, in microseconds.
-- MODE inplace: x:add(y); outofplace: z = x + y.
local common = dofile(arg[0]:match('^(.*)/[^/]*$') .. '/common.lua')
local torch = common.setup()
local mode = arg[1] or 'inplace'
local x, y = torch.FloatTensor(1):fill(1), torch.FloatTensor(1):fill(2)
local n = 1000000
local function run()
   if mode == 'inplace' then
      for _ = 1, n do x:add(y) end
   else
      local z
      for _ = 1, n do z = x + y end
      return z
   end
end
run() -- warm-up (JIT traces)
local t0 = common.now()
run()
print(string.format('%.6f', (common.now() - t0) / n * 1e6))
