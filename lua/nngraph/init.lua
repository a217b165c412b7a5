-- nngraph/init.lua -- `require 'nngraph'`: Torch7's nngraph on tocha's nn.
--
--   local x = nn.Identity()()                       -- an input node
--   local h = nn.Tanh()(nn.Linear(10, 20)(x))       -- module(node) -> node
--   local y = nn.CAddTable()({h, x2})               -- module({nodes}) -> node over a table
--   local g = nn.gModule({x, x2}, {y})              -- an nn.Module running the graph
--   graph.dot(g.fg, 'title', 'file')                -- Graphviz text in file.dot
--
-- Calling a module with no argument, with a node or with a (nested) table of nodes makes a
-- node instead of running the module. `require 'nn'` alone keeps module(x) = forward:
-- this package installs the behaviour through nn._callHook (lua/nn/Module.lua), which sees
-- every module call first. Files: init.lua (nodes, the hook, annotateNodes), gmodule.lua
-- (nn.gModule), dot.lua (nngraph.Graph, graph.dot).
require 'nn'

-- One nngraph per Lua state (class names cannot be registered twice; busted clears
-- package.loaded between spec files), like nn.
do
   local first = debug.getregistry().tocha_nngraph
   if first ~= nil then
      _G.nngraph = first
      _G.graph = first._graph
      package.loaded.graph = first._graph
      nn._callHook = first._hook
      return first
   end
end

local torch = torch
local nngraph = {}
_G.nngraph = nngraph

local isTensor = torch.isTensor

---------------------------------------------------------------------------------------------
-- Errors and source locations
---------------------------------------------------------------------------------------------

local function in_library(src)
   return src:find('/lua/nn/', 1, true) or src:find('/lua/nngraph/', 1, true)
      or src:find('/lua/torch/', 1, true) or src:find('/lua/tocha/', 1, true) or src == '=[C]'
end

-- The stack level of the first frame outside the library (relative to the caller).
local function user_level()
   local level = 3
   while true do
      local info = debug.getinfo(level, 'S')
      if info == nil then return 1 end
      if not in_library(info.source) then return level - 1 end
      level = level + 1
   end
end

-- Raises 'nngraph: ' .. msg at the user's line.
local function raise(msg)
   error('nngraph: ' .. msg, user_level())
end
nngraph._raise = raise

-- "file.lua:12" of the user's line that is making a node (shown in error messages).
local function user_where()
   local level = 2
   while true do
      local info = debug.getinfo(level, 'Sl')
      if info == nil then return '?' end
      if not in_library(info.source) then
         return info.short_src .. ':' .. tostring(info.currentline)
      end
      level = level + 1
   end
end

---------------------------------------------------------------------------------------------
-- Nodes
---------------------------------------------------------------------------------------------

-- A node: one module applied to the outputs of its parent nodes.
--   data.module       the nn.Module
--   data.mapindex     the parent nodes, in first-use order (Torch7's field name)
--   data.template     nil: the module's input is the single parent's output; otherwise a
--                     nested table whose leaves are indices into mapindex (module({a, b}))
--   data.annotations  name, description, graphAttributes (node:annotate)
--   data.where        "file:line" where the node was made
local Node = torch.class('nngraph.Node')
nngraph.Node = Node

local next_id = 0

function Node:__init(module, parents, template, where)
   next_id = next_id + 1
   self.id = next_id
   self.data = {module = module, mapindex = parents or {}, template = template,
                annotations = {}, where = where or '?'}
end

-- (the class table is the metatable of its instances: one compare, as this runs on every
-- module call once nngraph is loaded)
local function is_node(x)
   return getmetatable(x) == Node
end
nngraph.isNode = is_node

-- "nn.Linear(10 -> 20)" (first line of the module's text) or the annotated name.
function Node:label()
   local a = self.data.annotations
   local m = self.data.module
   local text = m and tostring(m):match('^[^\n]*') or 'node'
   if a.name then return a.name .. ' (' .. text .. ')' end
   return text
end

function Node:__tostring__()
   return string.format('nngraph.Node %d: %s at %s', self.id, self:label(), self.data.where)
end

-- Torch7: node:annotate{name = 'h1', description = '...', graphAttributes = {color = 'red'}}
function Node:annotate(t)
   if type(t) ~= 'table' then raise('annotate: expected a table, got ' .. type(t)) end
   for k, v in pairs(t) do self.data.annotations[k] = v end
   return self
end

-- n nodes selecting the entries 1..n of this node's (table) output.
function Node:split(n)
   if type(n) ~= 'number' or n < 1 or n ~= math.floor(n) then
      raise('split: expected a positive number of outputs, got ' .. tostring(n))
   end
   local r = {}
   for i = 1, n do r[i] = nn.SelectTable(i)(self) end
   return unpack(r)
end

-- The parents (Torch7's graph.Node:parents is not a method; mapindex is the field).
function Node:parents()
   return self.data.mapindex
end

---------------------------------------------------------------------------------------------
-- module(...) on nodes: the hook
---------------------------------------------------------------------------------------------

-- Classifies a call argument: 'node' (a node), 'nodes' (a nested table whose leaves are all
-- nodes), or nil (anything else: run the module). A table mixing nodes and other values is
-- an error (the module can neither run nor make a node).
local function count_leaves(x, seen)
   local nodes, others = 0, 0
   seen = seen or {}
   if seen[x] then raise('a table of nodes contains itself') end
   seen[x] = true
   for _, v in pairs(x) do
      if is_node(v) then
         nodes = nodes + 1
      elseif type(v) == 'table' and getmetatable(v) == nil then
         local n, o = count_leaves(v, seen)
         nodes, others = nodes + n, others + o
      else
         others = others + 1
      end
   end
   return nodes, others
end

-- The template of a table of nodes: the same nesting with each node replaced by its index
-- in parents (appended on first use).
local function make_template(x, parents, index)
   local t = {}
   for k, v in pairs(x) do
      if is_node(v) then
         local i = index[v]
         if i == nil then
            parents[#parents + 1] = v
            i = #parents
            index[v] = i
         end
         t[k] = i
      else
         t[k] = make_template(v, parents, index)
      end
   end
   return t
end

local function hook(m, input, gradOutput)
   local kind
   if input == nil then
      if gradOutput ~= nil then return false end
      kind = 'input'
   elseif is_node(input) then
      kind = 'node'
   elseif type(input) == 'table' and getmetatable(input) == nil and not isTensor(input) then
      local nodes, others = count_leaves(input)
      if nodes == 0 then return false end
      if others > 0 then
         raise(string.format('%s called on a table mixing %d node(s) with %d other value(s): ' ..
                             'a graph node takes only nodes', nn._mname(m), nodes, others))
      end
      kind = 'nodes'
   else
      return false
   end
   if gradOutput ~= nil then
      raise(nn._mname(m) .. ' called on a node with a second argument: a graph node takes one ' ..
            'node or one table of nodes')
   end
   local where = user_where()
   if kind == 'input' then return true, Node(m, {}, nil, where) end
   if kind == 'node' then return true, Node(m, {input}, nil, where) end
   local parents = {}
   local template = make_template(input, parents, {})
   return true, Node(m, parents, template, where)
end
nngraph._hook = hook
nn._callHook = hook

-- Names every node held by a local variable of the caller after that variable (Torch7's
-- nngraph.annotateNodes), unless it already has a name.
function nngraph.annotateNodes()
   local i = 1
   while true do
      local name, v = debug.getlocal(2, i)
      if name == nil then break end
      if is_node(v) and v.data.annotations.name == nil then v.data.annotations.name = name end
      i = i + 1
   end
end

---------------------------------------------------------------------------------------------
-- The other files
---------------------------------------------------------------------------------------------

local function this_dir()
   local src = debug.getinfo(1, 'S').source
   return (src:sub(1, 1) == '@' and src:sub(2):match('^(.*)/[^/]*$')) or '.'
end
local dir = this_dir()
for _, name in ipairs({'dot', 'gmodule'}) do
   local chunk, err = loadfile(dir .. '/' .. name .. '.lua')
   if not chunk then error(err, 0) end
   chunk(nngraph)
end

_G.graph = nngraph._graph
package.loaded.graph = nngraph._graph
debug.getregistry().tocha_nngraph = nngraph
return nngraph
