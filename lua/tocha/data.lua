-- tocha/data.lua -- `require 'tocha.data'` (also `tocha.data`): reading data sets and
-- iterating over them in batches.
--
--   data.readIDX(path)                 -> tensor (MNIST's format; raw or gzip)
--   data.readCSV(path[, opts])         -> (rows x cols) tensor; opts: delimiter, header
--                                         (lines to skip), type ('torch.FloatTensor'...)
--   data.mnist([dir])                  -> {train = {images, labels}, test = {...}}
--   data.TensorDataset(t1, t2, ...)    -> tensors sharing their first size
--   data.DataLoader(dataset, opts)     -> batches: loader:iter() yields one tensor per
--                                         field; opts batchSize, shuffle, dropLast,
--                                         collate, prefetch, seed, types, scale, shift
--
-- A TensorDataset with the default collate is batched in C on a background thread (see
-- core/data/loader.c), so the next batch is ready while the current step trains. Any
-- other dataset (an object with :size() and :get(i) returning a tuple of samples) is
-- batched in Lua through `collate`.
local ffi = require 'ffi'
local torch = require 'torch'
local C = torch._C

local data = {}

local function raise(level) error(ffi.string(C.tc_last_error()), level + 1) end
local outp = ffi.new('tc_tensor*[1]')

function data.readIDX(path)
   if type(path) ~= 'string' then error('data.readIDX: expected a file name, got ' .. type(path), 2) end
   if C.tc_idx_read(path, outp) ~= 0 then raise(2) end
   return torch._wrap(outp[0])
end

function data.readCSV(path, opts)
   if type(path) ~= 'string' then error('data.readCSV: expected a file name, got ' .. type(path), 2) end
   opts = opts or {}
   local delim = opts.delimiter or ','
   if type(delim) ~= 'string' or #delim ~= 1 then error('data.readCSV: delimiter must be one character', 2) end
   local tname = opts.type or torch.getdefaulttensortype()
   local dt = torch._dtype_of_name[tname]
   if dt ~= C.TC_F32 and dt ~= C.TC_F64 then
      error('data.readCSV: type must be torch.FloatTensor or torch.DoubleTensor, got ' .. tostring(tname), 2)
   end
   if C.tc_csv_read(path, delim:byte(), opts.header or 0, dt, outp) ~= 0 then raise(2) end
   return torch._wrap(outp[0])
end

-- MNIST from `dir` (default data/mnist, filled by examples/data/fetch_mnist.sh):
-- images ByteTensor (N, 28, 28), labels ByteTensor (N) with digits 0..9.
function data.mnist(dir)
   dir = dir or ((os.getenv('TOCHA_DATA') or 'data') .. '/mnist')
   local function set(prefix)
      local ok, images = pcall(data.readIDX, dir .. '/' .. prefix .. '-images-idx3-ubyte')
      if not ok then
         error('data.mnist: ' .. tostring(images) .. ' (run examples/data/fetch_mnist.sh to fetch MNIST)', 3)
      end
      return {images = images, labels = data.readIDX(dir .. '/' .. prefix .. '-labels-idx1-ubyte')}
   end
   return {train = set('train'), test = set('t10k')}
end

---------------------------------------------------------------------------------------------
-- Datasets
---------------------------------------------------------------------------------------------

local TensorDataset = {}
TensorDataset.__index = TensorDataset

function data.TensorDataset(...)
   local ts = {...}
   if #ts == 0 then error('data.TensorDataset: expected at least one tensor', 2) end
   for i, t in ipairs(ts) do
      if not torch.isTensor(t) or t:dim() < 1 then
         error('data.TensorDataset: argument ' .. i .. ' is not a tensor with at least one dimension', 2)
      end
      if t:size(1) ~= ts[1]:size(1) then
         error(string.format('data.TensorDataset: tensor %d has %d rows, tensor 1 has %d', i, t:size(1), ts[1]:size(1)), 2)
      end
   end
   return setmetatable({tensors = ts}, TensorDataset)
end

function TensorDataset:size() return self.tensors[1]:size(1) end

function TensorDataset:get(i)
   local out = {}
   for k, t in ipairs(self.tensors) do out[k] = t[i] end
   return unpack(out)
end

---------------------------------------------------------------------------------------------
-- Collation (the Lua path)
---------------------------------------------------------------------------------------------

-- Default collate: samples is a list of tuples; field k of the batch stacks field k of
-- every sample (tensors along a new first dim; numbers into a tensor).
function data.collate(samples)
   local nfields = #samples[1]
   local out = {}
   for k = 1, nfields do
      local first = samples[1][k]
      if torch.isTensor(first) then
         local parts = {}
         for i, s in ipairs(samples) do parts[i] = s[k]:view(1, unpack(s[k]:size():totable())) end
         if first:dim() == 0 then
            for i, s in ipairs(samples) do parts[i] = s[k]:view(1) end
         end
         out[k] = torch.cat(parts, 1)
      elseif type(first) == 'number' then
         local t = torch.Tensor(#samples)
         for i, s in ipairs(samples) do t[i] = s[k] end
         out[k] = t
      else
         error('data.collate: field ' .. k .. ' is a ' .. type(first) .. '; pass a collate function', 3)
      end
   end
   return out
end

---------------------------------------------------------------------------------------------
-- DataLoader
---------------------------------------------------------------------------------------------

local DataLoader = {}
DataLoader.__index = DataLoader

local loader_ctype = ffi.typeof('tc_loader*')
local function free_loader(p) C.tc_loader_free(p) end

function data.DataLoader(dataset, opts)
   opts = opts or {}
   if type(dataset) ~= 'table' or type(dataset.size) ~= 'function' then
      error('data.DataLoader: expected a dataset (an object with :size() and :get(i))', 2)
   end
   local bs = opts.batchSize or opts.batch_size or 1
   if type(bs) ~= 'number' or bs < 1 or bs % 1 ~= 0 then
      error('data.DataLoader: batchSize must be a positive integer, got ' .. tostring(bs), 2)
   end
   local self = setmetatable({
      dataset = dataset, batchSize = bs, shuffle = opts.shuffle or false,
      dropLast = opts.dropLast or opts.drop_last or false, collate = opts.collate,
      seed = opts.seed or math.floor(torch.uniform() * 2 ^ 31), epoch = 0,
   }, DataLoader)
   if getmetatable(dataset) == TensorDataset and not opts.collate then
      local ts = dataset.tensors
      local n = #ts
      local srcs = ffi.new('const tc_tensor*[?]', n)
      local dts = ffi.new('int32_t[?]', n)
      local scale, shift = ffi.new('double[?]', n), ffi.new('double[?]', n)
      for i = 1, n do
         srcs[i - 1] = ts[i].p
         local tn = opts.types and opts.types[i]
         dts[i - 1] = tn and (torch._dtype_of_name[tn] or error('data.DataLoader: unknown type ' .. tostring(tn), 2)) or -1
         scale[i - 1] = opts.scale and opts.scale[i] or 1
         shift[i - 1] = opts.shift and opts.shift[i] or 0
      end
      local cfg = ffi.new('tc_loader_config', {batch_size = bs, shuffle = self.shuffle and 1 or 0,
         drop_last = self.dropLast and 1 or 0, prefetch = opts.prefetch or 4, seed = self.seed})
      local lp = ffi.new('tc_loader*[1]')
      if C.tc_loader_new(srcs, n, dts, scale, shift, cfg, lp) ~= 0 then raise(2) end
      self._c = ffi.gc(ffi.cast(loader_ctype, lp[0]), free_loader)
      self._nfields = n
      self._outs = ffi.new('tc_tensor*[?]', n)
      self._done = ffi.new('int[1]')
      self._fresh = true -- the C loader starts its first epoch on creation
   end
   return self
end

-- Batches per epoch.
function DataLoader:size()
   if self._c then return tonumber(C.tc_loader_num_batches(self._c)) end
   local n = self.dataset:size()
   return self.dropLast and math.floor(n / self.batchSize) or math.ceil(n / self.batchSize)
end

-- One epoch: `for x, y in loader:iter() do ... end`.
function DataLoader:iter()
   self.epoch = self.epoch + 1
   if self._c then
      if not self._fresh then
         if C.tc_loader_reset(self._c) ~= 0 then raise(2) end
      end
      self._fresh = false
      local outs, done, nf = self._outs, self._done, self._nfields
      return function()
         if C.tc_loader_next(self._c, outs, done) ~= 0 then raise(2) end
         if done[0] ~= 0 then return nil end
         local res = {}
         for i = 1, nf do res[i] = torch._wrap(outs[i - 1]) end
         return unpack(res, 1, nf)
      end
   end
   local n = self.dataset:size()
   local order
   if self.shuffle then
      local g = torch.Generator()
      torch.manualSeed(g, self.seed + self.epoch)
      order = torch.randperm(g, n)
   end
   local nb, b = self:size(), 0
   local collate = self.collate or data.collate
   return function()
      b = b + 1
      if b > nb then return nil end
      local samples = {}
      for i = (b - 1) * self.batchSize + 1, math.min(b * self.batchSize, n) do
         local idx = order and order[i] or i
         samples[#samples + 1] = {self.dataset:get(idx)}
      end
      return unpack(collate(samples))
   end
end

return data
