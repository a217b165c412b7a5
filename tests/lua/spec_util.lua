-- tests/lua/spec_util.lua -- helpers shared by the specs. Load with
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

-- The whole content of a file (binary); a missing file is an error.
function U.read_file(path)
   local f = assert(io.open(path, 'rb'))
   local s = f:read('*a')
   f:close()
   return s
end

-- Writes bytes to path (binary), replacing the file.
function U.write_file(path, bytes)
   local f = assert(io.open(path, 'wb'))
   f:write(bytes)
   f:close()
end

-- A golden tensor {size={...}, data={...}} (tests/golden/gen_*.py output) as a new
-- DoubleTensor.
function U.golden(g)
   return torch.DoubleTensor(g.data):view(torch.LongStorage(g.size)):clone()
end

-- Raises at the spec line unless a and b have the same size and max |a - b| <= tol
-- (default 1e-9); `what` names the value compared.
function U.near(a, b, tol, what)
   tol = tol or 1e-9
   if not a:isSameSizeAs(b) then
      error(string.format('%s: size %s, expected %s', what or 'tensor', table.concat(a:size():totable(), 'x'),
                          table.concat(b:size():totable(), 'x')), 2)
   end
   local d = torch.no_grad(function() return (a - b):abs():max() end)
   if not (d <= tol) then
      error(string.format('%s: max diff %g > %g', what or 'tensor', d, tol), 2)
   end
end

return U
