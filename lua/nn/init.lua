-- nn/init.lua -- `require 'nn'`: Torch7's neural-network package on tocha's autograd.
--
-- Creates the global `nn` and loads its files in a fixed order. Every file after the base
-- (Module, Criterion, Container) is optional: a file that does not exist yet is skipped, so
-- the package grows as its parts land. A file that exists but fails to load is an error.
--
-- The contract (see docs/nn.md): a module writes `updateOutput` with out-of-place tensor
-- ops; the autograd tape records it and nn.Module derives updateGradInput /
-- accGradParameters / backward from the tape. Parameters require grad and each one's
-- `.grad` is its Torch7 gradient tensor, so PyTorch-style `loss:backward()` fills
-- gradWeight.
require 'torch'

-- One nn per Lua state, like torch: busted clears package.loaded between spec files, and
-- class names cannot be registered twice.
do
   local first = debug.getregistry().tocha_nn
   if first ~= nil then
      _G.nn = first
      return first
   end
end

local nn = {}
_G.nn = nn

local function this_dir()
   local src = debug.getinfo(1, 'S').source
   return (src:sub(1, 1) == '@' and src:sub(2):match('^(.*)/[^/]*$')) or '.'
end
local dir = this_dir()

local parts = {
   'Module', 'Criterion', 'Container', 'utils', 'layer_util', 'Jacobian', 'containers', 'simple',
   'simple_math', 'table_layers', 'transfer', 'normalization', 'convolution', 'pooling', 'padding',
   'upsampling', 'temporal', 'recurrent', 'attention', 'criterions', 'criterions_more',
   'StochasticGradient', 'torch7_extra', 'torch7_linear', 'torch7_spatial', 'volumetric',
}
local required = {Module = true, Criterion = true, Container = true}

for _, name in ipairs(parts) do
   local path = dir .. '/' .. name .. '.lua'
   local f = io.open(path, 'r')
   if f then
      f:close()
      local chunk, err = loadfile(path)
      if not chunk then error(err, 0) end
      chunk(nn)
   elseif required[name] then
      error('nn: missing ' .. path, 0)
   end
end

debug.getregistry().tocha_nn = nn
return nn
