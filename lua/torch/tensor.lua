-- bring-up version (replaced by the full tensor.lua)
local torch = ...
local ffi = require 'ffi'
local C = torch._C
local methods, wrap, IN, P = torch._methods, torch._wrap, torch._IN, torch._P
local outp = ffi.new('tc_tensor*[1]')
local sizes = ffi.new('int64_t[8]')
for dt, name in pairs(torch._type_names) do
  local short = name:match('^torch%.(.*)$')
  torch[short] = setmetatable({dtype = dt}, {__call = function(cls, ...)
    local n = select('#', ...)
    for i = 1, n do sizes[i-1] = select(i, ...) end
    if C.tc_tensor_new(dt, n, sizes, outp) ~= 0 then torch._raise(2) end
    return wrap(outp[0])
  end})
end
function methods.dim(t) return t.p.ndim end
function methods.size(t, d) return tonumber(t.p.size[d-1]) end
function methods.fill(t, v)
  P.s[0] = v; torch._run(C.TC_OP_FILL, 0, t); return t
end
function methods.add(t, a, b)
  if b == nil then
    if type(a) == 'number' then IN[0] = t.p; IN[1] = torch._scalar(t.p.dtype, a); P.s[0] = 1; return torch._run(C.TC_OP_ADD, 2, t) end
    IN[0] = t.p; IN[1] = a.p; P.s[0] = 1; return torch._run(C.TC_OP_ADD, 2, t)
  end
  IN[0] = a.p; IN[1] = b.p; P.s[0] = 1; return torch._run(C.TC_OP_ADD, 2, t)
end
torch._tensor_mt.__add = function(a, b) IN[0] = a.p; IN[1] = b.p; P.s[0] = 1; return torch._run(C.TC_OP_ADD, 2, nil) end
function methods.item(t) return C.tc_tensor_item(t.p) end
