-- tests/lua/spec_util.lua -- helpers shared by the tensor specs. Load with
-- dofile('tests/lua/spec_util.lua') from the repository root (busted runs there).
local U = {}

-- f must raise an error containing text, located at the spec line that made the call.
function U.expect_error(text, f)
   -- plain error(): busted's assert lives in the spec's environment, not here
   local ok, e = pcall(f)
   if ok then error('expected an error containing: ' .. text, 2) end
   e = tostring(e)
   if not e:find(text, 1, true) then error('wrong message: ' .. e, 2) end
   if not e:match('_spec%.lua:%d+: ') then error('not raised at the caller line: ' .. e, 2) end
   return e
end

-- A DoubleTensor of the given sizes holding 1..n in row-major order.
function U.seq(...)
   local t = torch.DoubleTensor(...)
   local i = 0
   t:apply(function() i = i + 1 return i end)
   return t
end

return U
