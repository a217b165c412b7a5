-- nngraph/dot.lua -- nngraph.Graph (a gModule's forward graph `fg` and backward graph `bg`)
-- and Torch7's `graph` package surface used with nngraph: graph.dot(g, title, file) writes
-- Graphviz text to file.dot (no svg: tocha does not run Graphviz), graph.todot(g, title)
-- returns it.
local nngraph = ...
local torch = torch

-- nodes: nngraph.Node list in execution order (forward) or reverse (backward); edges:
-- {from = i, to = j} over positions in nodes; inputs / outputs: positions of the graph's
-- inputs and outputs, in the gModule's order (drawn as Torch7's dummy input/output nodes).
local Graph = torch.class('nngraph.Graph')
nngraph.Graph = Graph

function Graph:__init(nodes, edges, inputs, outputs, backward)
   self.nodes, self.edges = nodes, edges
   self.inputs, self.outputs = inputs, outputs
   self.backward = backward or false
end

function Graph:size() return #self.nodes end
function Graph:topsort() return self.nodes end

-- Nodes without incoming / outgoing edges.
local function ends(g, side)
   local has = {}
   for _, e in ipairs(g.edges) do has[e[side]] = true end
   local r = {}
   for i, n in ipairs(g.nodes) do
      if not has[i] then r[#r + 1] = n end
   end
   return r
end
function Graph:roots() return ends(self, 'to') end
function Graph:leaves() return ends(self, 'from') end

function Graph:__tostring__()
   return string.format('nngraph.Graph (%s): %d nodes, %d edges', self.backward and 'backward' or 'forward',
                        #self.nodes, #self.edges)
end

---------------------------------------------------------------------------------------------
-- Graphviz text
---------------------------------------------------------------------------------------------

local function quote(s)
   return '"' .. tostring(s):gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n') .. '"'
end

local function node_text(n)
   local d = n.data
   local lines = {n:label()}
   if d.annotations.description then lines[#lines + 1] = tostring(d.annotations.description) end
   lines[#lines + 1] = d.where
   return table.concat(lines, '\n')
end

local function attrs(t)
   local keys = {}
   for k in pairs(t) do keys[#keys + 1] = k end
   table.sort(keys)
   local s = {}
   for _, k in ipairs(keys) do s[#s + 1] = k .. '=' .. quote(t[k]) end
   return table.concat(s, ', ')
end

-- Graphviz text of g (an nngraph.Graph or an nn.gModule, whose fg is drawn).
local function todot(g, title)
   if torch.isTypeOf(g, 'nn.gModule') then g = g.fg end
   if not torch.isTypeOf(g, 'nngraph.Graph') then
      nngraph._raise('graph.dot: expected a gModule graph (gmod.fg or gmod.bg), got ' ..
                     (torch.typename(g) or type(g)))
   end
   local out = {'digraph G {', '  labelloc="t";', '  label=' .. quote(title or 'nngraph') .. ';',
                '  node [shape=box, style=rounded];'}
   local function id(i) return 'n' .. i end
   for i, n in ipairs(g.nodes) do
      local a = {label = node_text(n)}
      for k, v in pairs(n.data.annotations.graphAttributes or {}) do a[k] = v end
      out[#out + 1] = '  ' .. id(i) .. ' [' .. attrs(a) .. '];'
   end
   -- Torch7's dummy nodes gathering the inputs and the outputs
   local src, dst = 'input', 'output'
   if g.backward then src, dst = 'output', 'input' end
   out[#out + 1] = '  input [shape=ellipse, label="input"];'
   out[#out + 1] = '  output [shape=ellipse, label="output"];'
   for k, i in ipairs(g.inputs) do
      local e = g.backward and (id(i) .. ' -> ' .. dst) or (src .. ' -> ' .. id(i))
      out[#out + 1] = '  ' .. e .. ' [label="' .. k .. '"];'
   end
   for k, i in ipairs(g.outputs) do
      local e = g.backward and (src .. ' -> ' .. id(i)) or (id(i) .. ' -> ' .. dst)
      out[#out + 1] = '  ' .. e .. ' [label="' .. k .. '"];'
   end
   for _, e in ipairs(g.edges) do
      out[#out + 1] = '  ' .. id(e.from) .. ' -> ' .. id(e.to) .. ';'
   end
   out[#out + 1] = '}'
   return table.concat(out, '\n') .. '\n'
end

local graph = {}
nngraph._graph = graph
graph.todot = todot

-- graph.dot(g, title[, file]): the Graphviz text; with file, also written to file .. '.dot'
-- (file may already end in .dot).
function graph.dot(g, title, file)
   local text = todot(g, title)
   if file ~= nil then
      if type(file) ~= 'string' then
         nngraph._raise('graph.dot: the file name must be a string, got ' .. type(file))
      end
      local path = file:match('%.dot$') and file or (file .. '.dot')
      local f, err = io.open(path, 'w')
      if not f then nngraph._raise('graph.dot: cannot write ' .. path .. ': ' .. tostring(err)) end
      f:write(text)
      f:close()
   end
   return text
end
