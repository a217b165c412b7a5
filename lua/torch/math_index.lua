-- torch/math_index.lua -- index ops with Torch7's 1-based indices: index indexCopy indexAdd
-- indexFill gather scatter maskedSelect maskedCopy maskedFill nonzero. Loaded by math.lua.
--
-- The C ops take 0-based int64 indices: every call converts the user's LongTensor (or Lua
-- table, for the index* family) into a new 0-based tensor (M.index0), so the user's tensor
-- is never modified. Results that are indices (nonzero) come back 1-based.
--   x:index(dim, idx) -> new        res:index(src, dim, idx)     torch.index([res,] src, dim, idx)
--   x:indexCopy(dim, idx, src)      x:indexAdd(dim, idx, src)    x:indexFill(dim, idx, value)
--   x:gather(dim, idx) -> new       res:gather(src, dim, idx)    torch.gather([res,] src, dim, idx)
--   x:scatter(dim, idx, src|value)  (in place)
--   x:maskedSelect(mask) -> new 1D  res:maskedSelect(src, mask)  torch.maskedSelect([res,] src, mask)
--   x:maskedCopy(mask, src)         x:maskedFill(mask, value)    (in place)
--   x:nonzero() -> (n, x:dim()) LongTensor of 1-based subscripts; res:nonzero(x)
-- The in-place ops are also torch.f(x, ...), modifying and returning x.
local torch = ...
local C = torch._C
local M = torch._math
local methods = torch._methods
local IN, P = torch._IN, torch._P
local isT, tp, describe = M.isT, M.tp, M.describe
local run_index, dim0, index0 = M.run_index, M.dim0, M.index0

-- An index tensor argument for gather/scatter (a LongTensor, as Torch7 required).
local function index_tensor(idx, name, level)
   if not isT(idx) then
      M.argerror(name, 'expected a LongTensor index, got ' .. describe(idx), level + 1)
   end
   local r = index0(idx, name, level + 1)
   return r
end

---------------------------------------------------------------------------------------------
-- index (index_select)
---------------------------------------------------------------------------------------------

local INDEX_SELECT = C.TC_OP_INDEX_SELECT

local function index_into(res, src, d, idx, level)
   local lv = level + 1
   local d0 = dim0(src, d, 'index', lv)
   local i0 = index0(idx, 'index', lv, src.p.device)
   IN[0], IN[1] = src.p, i0.p
   P.i[0] = d0
   local r = run_index(INDEX_SELECT, 2, res, 'index', lv)
   return r
end

M.def_res_first('index', index_into)

---------------------------------------------------------------------------------------------
-- indexCopy indexAdd indexFill: in place on self
---------------------------------------------------------------------------------------------

local function def_index_update(name, op)
   local function f(t, d, idx, src)
      local p = tp(t, name)
      local d0 = dim0(t, d, name, 2)
      local i0 = index0(idx, name, 2, p.device)
      IN[0], IN[1] = p, i0.p
      IN[2] = tp(src, name)
      P.i[0] = d0
      run_index(op, 3, t, name, 2)
      return t
   end
   methods[name] = f
   torch[name] = f
end
def_index_update('indexCopy', C.TC_OP_INDEX_COPY)
def_index_update('indexAdd', C.TC_OP_INDEX_ADD)

local function index_fill(t, d, idx, v)
   local p = tp(t, 'indexFill')
   local d0 = dim0(t, d, 'indexFill', 2)
   v = M.num(v, nil, 'indexFill', 'the value', 2) or M.argerror('indexFill', 'expected a value', 2)
   local i0 = index0(idx, 'indexFill', 2, p.device) -- runs an op: P is set after it
   IN[0], IN[1] = p, i0.p
   P.i[0] = d0
   P.s[0] = v
   run_index(C.TC_OP_INDEX_FILL, 2, t, 'indexFill', 2)
   return t
end
methods.indexFill = index_fill
torch.indexFill = index_fill

---------------------------------------------------------------------------------------------
-- gather scatter
---------------------------------------------------------------------------------------------

local function gather_into(res, src, d, idx, level)
   local lv = level + 1
   local d0 = dim0(src, d, 'gather', lv)
   local i0 = index_tensor(idx, 'gather', lv)
   IN[0], IN[1] = src.p, i0.p
   P.i[0] = d0
   local r = run_index(C.TC_OP_GATHER, 2, res, 'gather', lv)
   return r
end

M.def_res_first('gather', gather_into)

local function scatter(t, d, idx, src)
   local p = tp(t, 'scatter')
   local d0 = dim0(t, d, 'scatter', 2)
   local i0 = index_tensor(idx, 'scatter', 2)
   IN[0], IN[1] = p, i0.p
   P.i[0] = d0
   if type(src) == 'number' then
      P.s[0] = src
      run_index(C.TC_OP_SCATTER_FILL, 2, t, 'scatter', 2)
   else
      IN[2] = tp(src, 'scatter')
      run_index(C.TC_OP_SCATTER, 3, t, 'scatter', 2)
   end
   return t
end
methods.scatter = scatter
torch.scatter = scatter

---------------------------------------------------------------------------------------------
-- maskedSelect maskedCopy maskedFill
---------------------------------------------------------------------------------------------

function methods.maskedSelect(t, a, b)
   local src, mask, res = t, a, nil
   if b ~= nil then src, mask, res = a, b, t end
   IN[0] = tp(src, 'maskedSelect')
   IN[1] = tp(mask, 'maskedSelect')
   local r = run_index(C.TC_OP_MASKED_SELECT, 2, res, 'maskedSelect', 2)
   return r
end

function torch.maskedSelect(a, b, c)
   local res, src, mask = nil, a, b
   if c ~= nil then
      tp(a, 'maskedSelect')
      res, src, mask = a, b, c
   end
   IN[0] = tp(src, 'maskedSelect')
   IN[1] = tp(mask, 'maskedSelect')
   local r = run_index(C.TC_OP_MASKED_SELECT, 2, res, 'maskedSelect', 2)
   return r
end

local function masked_copy(t, mask, src)
   IN[0] = tp(t, 'maskedCopy')
   IN[1] = tp(mask, 'maskedCopy')
   IN[2] = tp(src, 'maskedCopy')
   run_index(C.TC_OP_MASKED_COPY, 3, t, 'maskedCopy', 2)
   return t
end
methods.maskedCopy = masked_copy
torch.maskedCopy = masked_copy

local function masked_fill(t, mask, v)
   IN[0] = tp(t, 'maskedFill')
   IN[1] = tp(mask, 'maskedFill')
   if type(v) ~= 'number' then
      error('maskedFill: expected a number for the value, got ' .. describe(v), 2)
   end
   P.s[0] = v
   run_index(C.TC_OP_MASKED_FILL, 2, t, 'maskedFill', 2)
   return t
end
methods.maskedFill = masked_fill
torch.maskedFill = masked_fill

---------------------------------------------------------------------------------------------
-- nonzero
---------------------------------------------------------------------------------------------

local function nonzero_into(res, x, level)
   IN[0] = x.p
   local r = run_index(C.TC_OP_NONZERO, 1, res, 'nonzero', level + 1)
   M.to1based(r)
   return r
end

function methods.nonzero(t, a)
   local r
   if a ~= nil then
      r = nonzero_into(t, tp(a, 'nonzero') and a, 2)
   else
      r = nonzero_into(nil, t, 2)
   end
   return r
end

function torch.nonzero(a, b)
   local r
   tp(a, 'nonzero')
   if b ~= nil then
      r = nonzero_into(a, tp(b, 'nonzero') and b, 2)
   else
      r = nonzero_into(nil, a, 2)
   end
   return r
end
