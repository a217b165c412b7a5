-- ewchain.lua -- an 8-op elementwise chain on 16M floats, out-of-place as eager code
-- writes it; prints effective GB/s (bytes read + written by the 8 ops / time).
-- `ewchain.lua compiled`: the same function through tocha.jit.compile (one fused group).
local common = dofile(arg[0]:match('^(.*)/[^/]*$') .. '/common.lua')
local torch = common.setup()
local n = 16 * 1024 * 1024
local x = torch.FloatTensor(n):uniform(0.1, 1)
local function chain_of(x)
   local z = x * 1.5
   z = z + 0.5
   z = z:abs()
   z = z:sqrt()
   z = torch.cmul(z, x)
   z = z - 1
   z = z:tanh()
   z = z:exp()
   return z
end
local chain = function() return chain_of(x) end
if arg[1] == 'compiled' then
   local compiled = require('tocha').jit.compile(chain_of)
   chain = function() return compiled(x) end
end
-- bytes: 7 unary-like ops read n and write n floats; the cmul reads 2n
local bytes = (7 * 2 + 3) * n * 4
chain()
local best, reps = math.huge, 5
for _ = 1, reps do
   local t0 = common.now()
   local z = chain()
   local dt = common.now() - t0
   z:free()
   if dt < best then best = dt end
end
print(string.format('%.3f', bytes / best / 1e9))
