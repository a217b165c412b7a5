-- torch/amp.lua -- mixed precision's Lua face: torch.autocast, a scope in which matrix
-- products and convolutions run in half precision and reductions in float32 (the casts
-- happen in the C dispatcher, core/autocast.c; docs/amp.md lists which op does what).
--
--   torch.autocast(function() ... end [, {dtype = 'bfloat16', enabled = true}])
--   local ac = torch.autocast.enter('float16') ... torch.autocast.exit(ac)
--
-- The state is per thread and restored on exit, also when the function raises (the
-- error is passed on). optim.GradScaler (lua/optim/GradScaler.lua) is the loss scaling
-- that float16 training needs.
local torch = ...
local ffi = require 'ffi'
local C = torch._C

local autocast = {}

local dtype_of = {
   float16 = C.TC_F16, half = C.TC_F16, ['torch.HalfTensor'] = C.TC_F16,
   bfloat16 = C.TC_BF16, bf16 = C.TC_BF16, ['torch.BFloat16Tensor'] = C.TC_BF16,
}
local name_of = {[C.TC_F16] = 'float16', [C.TC_BF16] = 'bfloat16'}
local class_names = {[C.TC_AUTOCAST_NONE] = 'none', [C.TC_AUTOCAST_LOWER] = 'lower',
                     [C.TC_AUTOCAST_FP32] = 'float32', [C.TC_AUTOCAST_PROMOTE] = 'promote'}

-- PyTorch's defaults: bfloat16 on the CPU, float16 on CUDA.
local function default_dtype(device_type, level)
   if device_type == 'cuda' then return C.TC_F16 end
   if device_type == 'cpu' or device_type == nil then return C.TC_BF16 end
   error("torch.autocast: device_type must be 'cpu' or 'cuda', got " .. tostring(device_type), level + 1)
end

-- opts: a dtype name, or {dtype=, enabled=, cache_enabled=, device_type=}.
local function parse(opts, level)
   level = level + 1
   if opts == nil then opts = {} end
   if type(opts) == 'string' then opts = {dtype = opts} end
   if type(opts) ~= 'table' then
      error('torch.autocast: options must be a dtype name or a table, got ' .. type(opts), level)
   end
   local dt
   if opts.dtype == nil then
      dt = default_dtype(opts.device_type, level)
   else
      dt = dtype_of[opts.dtype]
      if dt == nil then
         error("torch.autocast: dtype must be 'float16' or 'bfloat16', got " .. tostring(opts.dtype), level)
      end
   end
   local enabled = opts.enabled
   if enabled == nil then enabled = true end
   local cache = opts.cache_enabled
   if cache == nil then cache = true end
   return dt, enabled and 1 or 0, cache and 1 or 0
end

local prev_e, prev_d = ffi.new('int[1]'), ffi.new('int[1]')
local Token = {}
Token.__index = Token
Token.__tostring = function(t) return 'torch.autocast token (' .. (t.done and 'exited' or 'active') .. ')' end

-- ac = torch.autocast.enter([opts]): turns autocast on (or off: enabled = false) until
-- torch.autocast.exit(ac), which restores what was there before.
local function enter(opts, level) -- level: as error()'s, seen from enter
   local dt, on, cache = parse(opts, level)
   if C.tc_autocast_set(on, dt, prev_e, prev_d) ~= 0 then torch._raise(level) end
   local prev_cache = C.tc_autocast_set_cache_enabled(cache)
   return setmetatable({enabled = prev_e[0], dtype = prev_d[0], cache = prev_cache}, Token)
end
function autocast.enter(opts)
   local tok = enter(opts, 3) -- not a tail call: the error level counts this frame
   return tok
end

function autocast.exit(tok)
   if getmetatable(tok) ~= Token then
      error('torch.autocast.exit: expected the value torch.autocast.enter returned, got ' .. type(tok), 2)
   end
   if tok.done then error('torch.autocast.exit: this scope was already exited', 2) end
   tok.done = true
   C.tc_autocast_set_cache_enabled(tok.cache)
   if C.tc_autocast_set(tok.enabled, tok.dtype, nil, nil) ~= 0 then torch._raise(2) end
end

local unpack = unpack or table.unpack
local function pack(...) return {n = select('#', ...), ...} end

-- torch.autocast(fn[, opts]) (or (opts, fn)): fn() with autocast on; returns fn's results.
local function run(_, a, b)
   local fn, opts = a, b
   if type(a) ~= 'function' then fn, opts = b, a end
   if type(fn) ~= 'function' then
      error('torch.autocast: expected a function (and options), got ' .. type(a) .. ' and ' .. type(b), 2)
   end
   local tok = enter(opts, 3)
   local r = pack(pcall(fn))
   autocast.exit(tok)
   if not r[1] then error(r[2], 0) end
   return unpack(r, 2, r.n)
end

-- State and lists.
function autocast.is_enabled() return C.tc_autocast_enabled() ~= 0 end
function autocast.dtype() return name_of[C.tc_autocast_dtype()] end
-- 'lower' (half), 'float32', 'promote' or 'none' for an op name of ops.def ('mm', 'sum').
function autocast.policy(opname)
   local op = C.tc_op_lookup(opname)
   if op < 0 then error('torch.autocast.policy: no op named ' .. tostring(opname), 2) end
   return class_names[C.tc_autocast_policy(op)]
end
function autocast.clear_cache() C.tc_autocast_clear_cache() end
function autocast.cache_size() return C.tc_autocast_cache_size() end

torch.autocast = setmetatable(autocast, {__call = run})
torch.is_autocast_enabled = autocast.is_enabled
return autocast
