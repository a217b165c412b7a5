-- torch/random.lua -- Torch7's random API on libtocha's Philox generators: seed handling
-- (seed initialSeed manualSeed getRNGState setRNGState), torch.Generator objects, the number
-- draws (torch.random uniform normal exponential cauchy logNormal geometric bernoulli), the
-- in-place tensor methods (t:random uniform normal cauchy logNormal exponential geometric
-- bernoulli), and torch.rand randn randperm multinomial.
--
-- Generators. Every Lua state makes its own default torch.Generator at load time (seeded
-- from /dev/urandom), so two interpreters embedded in one process never share a stream and
-- the C process default is left to C callers. Torch7's calling forms take an optional
-- generator first: torch.uniform(gen, 0, 1), t:normal(gen, 0, 2), torch.rand(gen, 3, 4),
-- torch.manualSeed(gen, 42). A generator is not thread-safe; one per Lua state is.
--
-- Torch7 conventions kept here (the C op table is 0-based and PyTorch-like):
--  * t:random(b) gives integers in [1, b], t:random(a, b) in [a, b] (both ends included),
--    t:random() the type's full non-negative range; torch.random() a 32-bit unsigned integer.
--  * randperm and multinomial return 1-based indices; randperm is of the default tensor
--    type (Double) unless a result is given, multinomial a LongTensor.
--  * geometric(p): Torch7's p(i) = (1-p) p^(i-1), i >= 1, 0 < p < 1 (p is the chance of
--    another trial, so the mean is 1 / (1-p)); the C op takes the success chance 1 - p.
--  * logNormal(mean = 1, std = 2): exp of a normal with that mean and std (Torch7's final TH).
-- Seeds are integers below 2^53 when torch picks them, so initialSeed() is exact in Lua.
local torch = ...
local ffi = require 'ffi'
local bit = require 'bit'

local C = torch._C
local methods = torch._methods
local run, raise, clear_params, wrap = torch._run, torch._raise, torch._clear_params, torch._wrap
local IN, P = torch._IN, torch._P
local U = torch._tensor_util
local isT, describe = U.isT, U.describe
local floor, fmt, log, tan, pi = math.floor, string.format, math.log, math.tan, math.pi

local OP = {
   uniform = C.TC_OP_UNIFORM, normal = C.TC_OP_NORMAL, bernoulli = C.TC_OP_BERNOULLI,
   random = C.TC_OP_RANDOM, exponential = C.TC_OP_EXPONENTIAL, cauchy = C.TC_OP_CAUCHY,
   logNormal = C.TC_OP_LOG_NORMAL, geometric = C.TC_OP_GEOMETRIC, randperm = C.TC_OP_RANDPERM,
   multinomial = C.TC_OP_MULTINOMIAL,
}
local U8, I64 = C.TC_U8, C.TC_I64
local TWO53, TWO32 = 2 ^ 53, 2 ^ 32

---------------------------------------------------------------------------------------------
-- torch.Generator
---------------------------------------------------------------------------------------------

-- A fresh seed below 2^53: 53 bits of /dev/urandom, else the clock.
local function fresh_seed()
   local f = io.open('/dev/urandom', 'rb')
   if f then
      local b = f:read(7)
      f:close()
      if b and #b == 7 then
         local s = bit.band(b:byte(1), 0x1f) -- 5 + 6 * 8 = 53 bits
         for i = 2, 7 do s = s * 256 + b:byte(i) end
         return s
      end
   end
   return (os.time() * 1000003 + floor(os.clock() * 1e6)) % TWO53
end

local Generator = torch.class('torch.Generator', torch)
local outg = ffi.new('tc_generator*[1]')

-- torch.Generator(): a new generator, seeded like torch.seed().
function Generator:__init()
   if C.tc_generator_new(fresh_seed(), outg) ~= 0 then raise(3) end
   rawset(self, '_g', ffi.gc(outg[0], C.tc_generator_free))
end

function Generator:__tostring__()
   return fmt('torch.Generator (initial seed %.0f)', tonumber(C.tc_generator_initial_seed(self._g)))
end

local function is_gen(x) return type(x) == 'table' and getmetatable(x) == Generator end
torch._is_generator = is_gen

local default_gen = Generator()
torch._default_generator = default_gen
-- The tc_generator* ops should use for an optional generator argument (other modules that
-- draw random numbers, e.g. nn.Dropout, pass it in P.gen).
function torch._generator_ptr(g) return (g or default_gen)._g end

-- Splits an optional leading generator off the arguments: returns the C pointer.
local function gen_of(x)
   if is_gen(x) then return x._g, true end
   return default_gen._g, false
end

---------------------------------------------------------------------------------------------
-- Seeds and state
---------------------------------------------------------------------------------------------

-- Torch7 seeds were unsigned longs: an integer in [-2^63, 2^64), negatives taken modulo
-- 2^64; int64/uint64 cdata are taken as they are.
local function seed_value(name, n, level)
   if type(n) == 'cdata' and (ffi.istype('int64_t', n) or ffi.istype('uint64_t', n)) then
      return ffi.cast('uint64_t', n)
   end
   if type(n) ~= 'number' or n ~= floor(n) or n < -2 ^ 63 or n >= 2 ^ 64 then
      error(fmt('%s: expected an integer seed, got %s', name, type(n) == 'number' and tostring(n) or describe(n)),
            level + 1)
   end
   if n < 0 then return ffi.cast('uint64_t', ffi.cast('int64_t', n)) end
   return ffi.new('uint64_t', n)
end

-- torch.seed([gen]): reseeds from /dev/urandom and returns the seed.
function torch.seed(gen)
   if gen ~= nil and not is_gen(gen) then error('seed: expected a torch.Generator, got ' .. describe(gen), 2) end
   local s = fresh_seed()
   C.tc_generator_seed(gen_of(gen), s)
   return s
end

-- torch.manualSeed([gen,] n)
function torch.manualSeed(a, b)
   local g = gen_of(a)
   local n = is_gen(a) and b or a
   C.tc_generator_seed(g, seed_value('manualSeed', n, 2))
end

-- torch.initialSeed([gen]): the seed the generator was last seeded with.
function torch.initialSeed(gen)
   return tonumber(C.tc_generator_initial_seed((gen_of(gen))))
end

local state_size = tonumber(C.tc_generator_get_state(default_gen._g, nil, 0))

-- torch.getRNGState([gen]): the generator's state as a ByteTensor (a copy).
function torch.getRNGState(gen)
   local sz = ffi.new('int64_t[1]', state_size)
   local out = ffi.new('tc_tensor*[1]')
   if C.tc_tensor_new(U8, 1, sz, out) ~= 0 then raise(2) end
   local t = wrap(out[0])
   C.tc_generator_get_state(gen_of(gen), C.tc_tensor_data(t.p), state_size)
   return t
end

-- torch.setRNGState([gen,] state): restores a state from getRNGState; a state that was
-- cut, altered or made for another generator kind is refused.
function torch.setRNGState(a, b)
   local g = gen_of(a)
   local s = is_gen(a) and b or a
   if not isT(s) or s.p.dtype ~= U8 or s.p.device ~= 0 then
      error('setRNGState: expected a ByteTensor from getRNGState, got ' .. describe(s), 2)
   end
   if C.tc_tensor_is_contiguous(s.p) == 0 then error('setRNGState: the state tensor must be contiguous', 2) end
   if C.tc_generator_set_state(g, C.tc_tensor_data(s.p), C.tc_tensor_numel(s.p)) ~= 0 then raise(2) end
end

---------------------------------------------------------------------------------------------
-- Number draws: torch.random uniform normal exponential cauchy logNormal geometric bernoulli
---------------------------------------------------------------------------------------------

local function num(name, what, x, default, level)
   if x == nil then return default end
   if type(x) ~= 'number' then
      error(fmt('%s: expected a number for %s, got %s', name, what, describe(x)), level + 1)
   end
   return x
end

-- An exact uniform integer in [0, r), r <= 2^53: 53-bit draws, rejecting the top partial
-- block so every residue is equally likely.
local function below(g, r)
   local limit = TWO53 - TWO53 % r
   while true do
      local k = floor(C.tc_generator_uniform(g) * TWO53)
      if k < limit then return k % r end
   end
end

-- torch.random([gen,] [a [, b]]): Torch7's number form (a tensor first fills it instead).
function torch.random(a, b, c, d)
   if isT(a) then
      local r = methods.random(a, b, c, d)
      return r
   end
   local g, had = gen_of(a)
   if had then a, b = b, c end
   if a == nil then return floor(C.tc_generator_uniform(g) * TWO32) end
   if type(a) ~= 'number' or a ~= floor(a) then error('random: expected integer bounds, got ' .. describe(a), 2) end
   if b == nil then
      if a < 1 then error(fmt('random: upper bound must be strictly positive, got %d', a), 2) end
      if a > TWO53 then error('random: upper bound above 2^53', 2) end
      return 1 + below(g, a)
   end
   if type(b) ~= 'number' or b ~= floor(b) then error('random: expected integer bounds, got ' .. describe(b), 2) end
   if b < a then error(fmt('random: upper bound %d must be larger than lower bound %d', b, a), 2) end
   if b - a >= TWO53 then error('random: range wider than 2^53', 2) end
   return a + below(g, b - a + 1)
end

-- Each draw: its defaults, a check, and the formula on a uniform u in [0, 1) (or z ~ N(0,1)).
local function number_form(name, fn)
   return function(a, b, c, d)
      if isT(a) then
         local r = methods[name](a, b, c, d)
         return r
      end
      local g, had = gen_of(a)
      if had then a, b = b, c end
      local r = fn(g, a, b) -- not a tail call: fn's errors count this frame
      return r
   end
end

torch.uniform = number_form('uniform', function(g, a, b)
   a, b = num('uniform', 'a', a, 0, 3), num('uniform', 'b', b, 1, 3)
   if a > b then error(fmt('uniform: needs a <= b, got [%g, %g)', a, b), 3) end
   return a + (b - a) * C.tc_generator_uniform(g)
end)

torch.normal = number_form('normal', function(g, m, s)
   m, s = num('normal', 'mean', m, 0, 3), num('normal', 'std', s, 1, 3)
   if not (s >= 0) then error(fmt('normal: std must be >= 0, got %g', s), 3) end
   return m + s * C.tc_generator_normal(g)
end)

torch.exponential = number_form('exponential', function(g, l)
   l = num('exponential', 'lambda', l, 1, 3)
   if not (l > 0) then error(fmt('exponential: lambda must be positive, got %g', l), 3) end
   return -log(1 - C.tc_generator_uniform(g)) / l
end)

torch.cauchy = number_form('cauchy', function(g, m, s)
   m, s = num('cauchy', 'median', m, 0, 3), num('cauchy', 'sigma', s, 1, 3)
   if not (s > 0) then error(fmt('cauchy: sigma must be positive, got %g', s), 3) end
   return m + s * tan(pi * (C.tc_generator_uniform(g) - 0.5))
end)

torch.logNormal = number_form('logNormal', function(g, m, s)
   m, s = num('logNormal', 'mean', m, 1, 3), num('logNormal', 'std', s, 2, 3)
   if not (s >= 0) then error(fmt('logNormal: std must be >= 0, got %g', s), 3) end
   return math.exp(m + s * C.tc_generator_normal(g))
end)

local function need_p(name, p, open_top, level)
   if type(p) ~= 'number' then error(fmt('%s: expected a probability, got %s', name, describe(p)), level + 1) end
   if not (p > 0 and p < 1) and open_top then
      error(fmt('%s: p must be > 0 and < 1, got %g', name, p), level + 1)
   end
   if not (p >= 0 and p <= 1) then error(fmt('%s: p must be in [0, 1], got %g', name, p), level + 1) end
   return p
end

-- Torch7: i >= 1 with p(i) = (1-p) p^(i-1).
torch.geometric = number_form('geometric', function(g, p)
   p = need_p('geometric', p, true, 3)
   return floor(log(1 - C.tc_generator_uniform(g)) / log(p)) + 1
end)

torch.bernoulli = number_form('bernoulli', function(g, p)
   p = need_p('bernoulli', p == nil and 0.5 or p, false, 3)
   return C.tc_generator_uniform(g) < p and 1 or 0
end)

---------------------------------------------------------------------------------------------
-- In-place tensor methods
---------------------------------------------------------------------------------------------

-- Runs a fill op on t (nin inputs already in IN) with P set by the caller; the error, if
-- any, is raised at the user's line (two frames up from here).
local function fill(op, nin, t, g)
   -- Torch7 drew nothing (and checked nothing) for an empty tensor; the C dispatcher would
   -- give a dimensionless one a scalar's shape. randperm resizes, so it always runs.
   if op ~= OP.randperm and C.tc_tensor_numel(t.p) == 0 then return t end
   P.gen = g
   local _ = run(op, nin, t, 3)
   return t
end

local function need_self(name, t)
   if not isT(t) then error(fmt('%s: expected a tensor as self, got %s', name, describe(t)), 3) end
end

-- t:random([gen,] [a [, b]]): integers in [a, b] / [1, b] / the full non-negative range.
function methods.random(t, a, b, c)
   need_self('random', t)
   local g, had = gen_of(a)
   if had then a, b = b, c end
   clear_params()
   if a ~= nil then
      if type(a) ~= 'number' or a ~= floor(a) then error('random: expected integer bounds, got ' .. describe(a), 2) end
      if b == nil then
         if a < 1 then error(fmt('random: upper bound must be strictly positive, got %d', a), 2) end
         a, b = 1, a
      elseif type(b) ~= 'number' or b ~= floor(b) then
         error('random: expected integer bounds, got ' .. describe(b), 2)
      elseif b < a then
         error(fmt('random: upper bound %d must be larger than lower bound %d', b, a), 2)
      end
      P.s[0], P.s[1] = a, b + 1 -- C: [s0, s1)
   end
   fill(OP.random, 0, t, g)
   return t
end

-- Two-parameter fills with Torch7's defaults; the C op checks the values.
local function def_fill2(name, what1, d1, what2, d2)
   local op = OP[name]
   methods[name] = function(t, a, b, c)
      need_self(name, t)
      local g, had = gen_of(a)
      if had then a, b = b, c end
      a, b = num(name, what1, a, d1, 2), num(name, what2, b, d2, 2)
      clear_params()
      P.s[0], P.s[1] = a, b
      fill(op, 0, t, g)
      return t
   end
end
def_fill2('uniform', 'a', 0, 'b', 1)
def_fill2('normal', 'mean', 0, 'std', 1)
def_fill2('cauchy', 'median', 0, 'sigma', 1)
def_fill2('logNormal', 'mean', 1, 'std', 2)

function methods.exponential(t, a, b)
   need_self('exponential', t)
   local g, had = gen_of(a)
   if had then a = b end
   a = num('exponential', 'lambda', a, 1, 2)
   clear_params()
   P.s[0] = a
   fill(OP.exponential, 0, t, g)
   return t
end

-- t:geometric([gen,] p): Torch7's parameter (see the header); C draws with success 1 - p.
function methods.geometric(t, a, b)
   need_self('geometric', t)
   local g, had = gen_of(a)
   if had then a = b end
   local p = need_p('geometric', a, true, 2)
   clear_params()
   P.s[0] = 1 - p
   fill(OP.geometric, 0, t, g)
   return t
end

-- t:bernoulli([gen,] [p = 0.5]) or t:bernoulli([gen,] probs): probs (a tensor of values in
-- [0, 1]) broadcasts to t or has as many elements.
function methods.bernoulli(t, a, b)
   need_self('bernoulli', t)
   local g, had = gen_of(a)
   if had then a = b end
   clear_params()
   if isT(a) then
      IN[0] = a.p
   else
      IN[0] = nil
      P.s[0] = num('bernoulli', 'p', a, 0.5, 2)
   end
   fill(OP.bernoulli, 1, t, g)
   return t
end

---------------------------------------------------------------------------------------------
-- torch.rand randn randperm multinomial (and their method forms, self as the result)
---------------------------------------------------------------------------------------------

-- Unpacks Torch7's ([res,] [gen,] args... [, 'torch.TypeTensor']) into res, the generator
-- pointer, the default or named dtype, and the remaining arguments as a table.
local function split_args(name, ...)
   local args = {...}
   local n = select('#', ...)
   local i, res, dt = 1, nil, torch._default_dtype()
   if isT(args[1]) then res, i = args[1], 2 elseif args[1] == nil and n > 0 then i = 2 end
   local g, had = gen_of(args[i])
   if had then i = i + 1 end
   if type(args[n]) == 'string' and n >= i then
      dt = torch._dtype_of_name[args[n]]
      if dt == nil then error(fmt('%s: unknown tensor type %s', name, args[n]), 3) end
      n = n - 1
   end
   local rest = {}
   for k = i, n do rest[#rest + 1] = args[k] end
   return res, g, dt, rest
end

local function sized(name, res, dt, rest)
   if #rest > 9 then error(name .. ': more than 8 sizes given', 3) end
   local n = U.read_sizes(U.sizes_buf, name, 3, rest[1], rest[2], rest[3], rest[4], rest[5], rest[6], rest[7],
                          rest[8], rest[9])
   if res == nil then
      local r = U.new_sized(dt, n, U.sizes_buf, name, 3)
      return r
   end
   U.resize_to(res.p, n, U.sizes_buf, 3)
   return res
end

-- torch.rand([res,] [gen,] sizes...): uniform on [0, 1).
function torch.rand(...)
   local res, g, dt, rest = split_args('rand', ...)
   res = sized('rand', res, dt, rest)
   clear_params()
   P.s[1] = 1
   fill(OP.uniform, 0, res, g)
   return res
end

-- torch.randn([res,] [gen,] sizes...): standard normal.
function torch.randn(...)
   local res, g, dt, rest = split_args('randn', ...)
   res = sized('randn', res, dt, rest)
   clear_params()
   P.s[1] = 1
   fill(OP.normal, 0, res, g)
   return res
end

-- Largest n whose 1..n the dtype holds exactly.
local exact_max = {
   [C.TC_U8] = 255, [C.TC_I8] = 127, [C.TC_I16] = 32767, [C.TC_I32] = 2147483647,
   [C.TC_I64] = 2 ^ 63, [C.TC_F32] = 2 ^ 24, [C.TC_F64] = 2 ^ 53, [C.TC_F16] = 2048, [C.TC_BF16] = 256,
}

-- Adds 1 in place: C indices are 0-based, Torch7's 1-based.
local function plus_one(t)
   clear_params()
   IN[0] = t.p
   IN[1] = torch._scalar(t.p.dtype, 1)
   P.s[0] = 1
   local _ = run(C.TC_OP_ADD, 2, t, 3)
   return t
end

-- torch.randperm([res,] [gen,] n): a random permutation of 1..n.
function torch.randperm(...)
   local res, g, dt, rest = split_args('randperm', ...)
   local n = rest[1]
   if type(n) ~= 'number' or n ~= floor(n) or n < 0 then
      error('randperm: expected a non-negative integer n, got ' .. (type(n) == 'number' and tostring(n) or describe(n)), 2)
   end
   if rest[2] ~= nil then error('randperm: unexpected argument ' .. describe(rest[2]) .. ' after n', 2) end
   local rdt = res and res.p.dtype or dt
   if exact_max[rdt] and n > exact_max[rdt] then
      error(fmt('randperm: n = %d does not fit in a %s', n, torch._type_names[rdt]), 2)
   end
   if res == nil then
      local sz = ffi.new('int64_t[1]', 1)
      local out = ffi.new('tc_tensor*[1]')
      if C.tc_tensor_new(dt, 1, sz, out) ~= 0 then raise(2) end
      res = wrap(out[0])
   end
   clear_params()
   P.i[0] = n
   fill(OP.randperm, 0, res, g)
   plus_one(res)
   return res
end

-- torch.multinomial([res,] [gen,] probs, n [, replacement = false]): n category indices
-- (1-based, LongTensor) per row of probs (1-D or 2-D, non-negative, not all zero).
function torch.multinomial(...)
   local a, b, c = ...
   -- a leading tensor is the result only when the probabilities follow it (Torch7's cwrap
   -- told the forms apart by their argument types the same way)
   local res, g, _, rest
   if isT(a) and not (isT(b) or (is_gen(b) and isT(c))) then
      res, g, _, rest = split_args('multinomial', nil, ...)
   else
      res, g, _, rest = split_args('multinomial', ...)
   end
   local probs, n, repl = rest[1], rest[2], rest[3]
   if not isT(probs) then error('multinomial: expected a probability tensor, got ' .. describe(probs), 2) end
   if type(n) ~= 'number' or n ~= floor(n) then
      error('multinomial: expected an integer number of samples, got ' .. describe(n), 2)
   end
   if repl ~= nil and type(repl) ~= 'boolean' then
      error('multinomial: replacement must be a boolean, got ' .. describe(repl), 2)
   end
   clear_params()
   IN[0] = probs.p
   P.i[0], P.i[1] = n, repl and 1 or 0
   P.gen = g
   res = run(OP.multinomial, 1, res, 2)
   plus_one(res)
   return res
end

-- Method forms: self is the result (x:rand(3, 4), x:randperm(10), idx:multinomial(p, 5)).
function methods.rand(t, ...) local r = torch.rand(t, ...) return r end
function methods.randn(t, ...) local r = torch.randn(t, ...) return r end
function methods.randperm(t, ...) local r = torch.randperm(t, ...) return r end
function methods.multinomial(t, ...) local r = torch.multinomial(t, ...) return r end
