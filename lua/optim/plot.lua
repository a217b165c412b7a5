-- optim/plot.lua -- line plots for optim.Logger without gnuplot: the figure is laid out
-- once as a list of drawing primitives (lines, polylines, markers, bars, text), then
-- rendered either as SVG text or into an RGB pixel buffer (for optim/png.lua; text from
-- the 5x7 font in optim/font5x7.lua).
--
-- series: list of {name = string, y = {numbers}, style = '-' | '+' | '.' | '+-' | '~' | '|'}
-- opts: title, width (640), height (480), logscale (y axis in powers of ten).
local ffi = require 'ffi'
local bit = require 'bit'
local font = require 'optim.font5x7'

local M = {}

local PALETTE = {{31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {255, 127, 14},
                 {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127}}
local BLACK, GREY = {0, 0, 0}, {200, 200, 200}

-- Tick positions covering [lo, hi] with a 1-2-5 step, about n of them.
local function nice_ticks(lo, hi, n)
   if hi <= lo then hi = lo + 1 end
   local raw = (hi - lo) / n
   local mag = 10 ^ math.floor(math.log10(raw))
   local step = mag
   for _, m in ipairs {1, 2, 5, 10} do
      if m * mag >= raw then step = m * mag break end
   end
   local t = {}
   local v = math.floor(lo / step + 1e-9) * step -- first tick at or below lo
   local last = math.ceil(hi / step - 1e-9) * step
   while v <= last + step * 1e-9 do
      t[#t + 1] = math.abs(v) < step * 1e-9 and 0 or v
      v = v + step
   end
   return t
end
M.nice_ticks = nice_ticks

local function fmt(v)
   local s = string.format('%.4g', v)
   return s
end

-- The figure as primitives in pixel coordinates (y down).
function M.layout(series, opts)
   opts = opts or {}
   local W, H = opts.width or 640, opts.height or 480
   local L, R, T, B = 72, 20, 36, 44
   local pw, ph = W - L - R, H - T - B
   local log = opts.logscale
   local ymin, ymax, n = math.huge, -math.huge, 1
   for _, s in ipairs(series) do
      n = math.max(n, #s.y)
      for _, v in ipairs(s.y) do
         if type(v) == 'number' and v == v and (not log or v > 0) then
            local u = log and math.log10(v) or v
            ymin, ymax = math.min(ymin, u), math.max(ymax, u)
         end
      end
   end
   if ymin == math.huge then ymin, ymax = 0, 1 end
   if ymax - ymin < 1e-12 then ymin, ymax = ymin - 0.5, ymax + 0.5 end
   local yt
   if log then
      ymin, ymax = math.floor(ymin), math.ceil(ymax)
      if ymax == ymin then ymax = ymin + 1 end
      yt = {}
      local step = math.max(1, math.ceil((ymax - ymin) / 8))
      for e = ymin, ymax, step do yt[#yt + 1] = e end
   else
      yt = nice_ticks(ymin, ymax, 6)
      ymin, ymax = math.min(ymin, yt[1]), math.max(ymax, yt[#yt])
   end
   local xmin, xmax = 1, math.max(n, 2)
   local xt = nice_ticks(xmin, xmax, 8)
   local function px(x) return L + (x - xmin) / (xmax - xmin) * pw end
   local function py(v)
      local u = log and math.log10(v) or v
      return T + ph - (u - ymin) / (ymax - ymin) * ph
   end
   local P = {width = W, height = H}
   local function add(p) P[#P + 1] = p end
   -- grid, axes box, ticks and labels
   for _, v in ipairs(yt) do
      local y = T + ph - (v - ymin) / (ymax - ymin) * ph
      if y >= T - 0.5 and y <= T + ph + 0.5 then
         add {kind = 'line', x1 = L, y1 = y, x2 = L + pw, y2 = y, color = GREY, width = 1}
         add {kind = 'line', x1 = L - 5, y1 = y, x2 = L, y2 = y, color = BLACK, width = 1}
         add {kind = 'text', x = L - 8, y = y + 3, text = log and ('1e' .. v) or fmt(v),
              anchor = 'end', color = BLACK}
      end
   end
   for _, v in ipairs(xt) do
      if v >= xmin and v <= xmax then
         local x = px(v)
         add {kind = 'line', x1 = x, y1 = T + ph, x2 = x, y2 = T + ph + 5, color = BLACK, width = 1}
         add {kind = 'text', x = x, y = T + ph + 17, text = fmt(v), anchor = 'middle', color = BLACK}
      end
   end
   add {kind = 'rect', x = L, y = T, w = pw, h = ph, color = BLACK}
   if opts.title then
      add {kind = 'text', x = W / 2, y = T - 14, text = opts.title, anchor = 'middle',
           color = BLACK, scale = 2}
   end
   -- the series
   local legend = {}
   for i, s in ipairs(series) do
      local color = PALETTE[(i - 1) % #PALETTE + 1]
      local style = s.style or '-'
      local pts = {}
      for k, v in ipairs(s.y) do
         if type(v) == 'number' and v == v and (not log or v > 0) then
            pts[#pts + 1] = {px(k), py(v)}
         end
      end
      if style:find('[-~]') and #pts > 1 then
         add {kind = 'poly', points = pts, color = color, width = 2}
      end
      if style:find('%+') or style:find('%.') then
         for _, p in ipairs(pts) do
            add {kind = 'marker', x = p[1], y = p[2], shape = style:find('%+') and '+' or '.', color = color}
         end
      end
      if style:find('|') then
         local base = log and T + ph or math.min(math.max(py(0), T), T + ph)
         for _, p in ipairs(pts) do
            add {kind = 'line', x1 = p[1], y1 = base, x2 = p[1], y2 = p[2], color = color, width = 2}
         end
      end
      -- legend entry, top right inside the box, on a white panel
      local ly = T + 14 + (i - 1) * 14
      local add = function(p) legend[#legend + 1] = p end -- drawn over the series
      if i == 1 then
         add {kind = 'fill', x = L + pw - 156, y = T + 4, w = 152, h = #series * 14 + 6,
              color = {255, 255, 255}}
      end
      add {kind = 'line', x1 = L + pw - 150, y1 = ly - 3, x2 = L + pw - 126, y2 = ly - 3,
           color = color, width = 2}
      add {kind = 'text', x = L + pw - 120, y = ly, text = tostring(s.name), anchor = 'start', color = BLACK}
   end
   for _, p in ipairs(legend) do P[#P + 1] = p end
   return P
end

---------------------------------------------------------------------------------------------
-- SVG
---------------------------------------------------------------------------------------------

local function esc(s)
   return (tostring(s):gsub('&', '&amp;'):gsub('<', '&lt;'):gsub('>', '&gt;'):gsub('"', '&quot;'))
end
local function rgb(c) return string.format('rgb(%d,%d,%d)', c[1], c[2], c[3]) end
local function n2(v) return string.format('%.2f', v) end

function M.svg(P)
   local o = {string.format('<?xml version="1.0" encoding="UTF-8"?>\n' ..
      '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">',
      P.width, P.height, P.width, P.height),
      string.format('<rect x="0" y="0" width="%d" height="%d" fill="white"/>', P.width, P.height)}
   for _, p in ipairs(P) do
      if p.kind == 'line' then
         o[#o + 1] = string.format('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%d"/>',
            n2(p.x1), n2(p.y1), n2(p.x2), n2(p.y2), rgb(p.color), p.width)
      elseif p.kind == 'poly' then
         local pts = {}
         for i, q in ipairs(p.points) do pts[i] = n2(q[1]) .. ',' .. n2(q[2]) end
         o[#o + 1] = string.format('<polyline points="%s" fill="none" stroke="%s" stroke-width="%d"/>',
            table.concat(pts, ' '), rgb(p.color), p.width)
      elseif p.kind == 'fill' then
         o[#o + 1] = string.format('<rect x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="%s"/>',
            n2(p.x), n2(p.y), n2(p.w), n2(p.h), rgb(p.color), rgb(GREY))
      elseif p.kind == 'rect' then
         o[#o + 1] = string.format('<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="%s"/>',
            n2(p.x), n2(p.y), n2(p.w), n2(p.h), rgb(p.color))
      elseif p.kind == 'marker' then
         if p.shape == '+' then
            o[#o + 1] = string.format('<path d="M%s %sh6M%s %sv6" stroke="%s" stroke-width="1.5"/>',
               n2(p.x - 3), n2(p.y), n2(p.x), n2(p.y - 3), rgb(p.color))
         else
            o[#o + 1] = string.format('<circle cx="%s" cy="%s" r="1.5" fill="%s"/>', n2(p.x), n2(p.y), rgb(p.color))
         end
      elseif p.kind == 'text' then
         o[#o + 1] = string.format('<text x="%s" y="%s" font-family="sans-serif" font-size="%d" ' ..
            'text-anchor="%s" fill="%s">%s</text>', n2(p.x), n2(p.y), (p.scale or 1) * 11, p.anchor,
            rgb(p.color), esc(p.text))
      end
   end
   o[#o + 1] = '</svg>\n'
   return table.concat(o, '\n')
end

---------------------------------------------------------------------------------------------
-- Raster: an RGB byte buffer, white, drawn with Bresenham lines and the 5x7 font
---------------------------------------------------------------------------------------------

function M.raster(P)
   local W, H = P.width, P.height
   local buf = ffi.new('uint8_t[?]', W * H * 3)
   ffi.fill(buf, W * H * 3, 255)
   local function dot(x, y, c)
      x, y = math.floor(x + 0.5), math.floor(y + 0.5)
      if x < 0 or y < 0 or x >= W or y >= H then return end
      local i = (y * W + x) * 3
      buf[i], buf[i + 1], buf[i + 2] = c[1], c[2], c[3]
   end
   local function line(x1, y1, x2, y2, c, w)
      x1, y1, x2, y2 = math.floor(x1 + 0.5), math.floor(y1 + 0.5), math.floor(x2 + 0.5), math.floor(y2 + 0.5)
      local dx, dy = math.abs(x2 - x1), -math.abs(y2 - y1)
      local sx, sy = x1 < x2 and 1 or -1, y1 < y2 and 1 or -1
      local err = dx + dy
      while true do
         dot(x1, y1, c)
         if w > 1 then dot(x1 + 1, y1, c); dot(x1, y1 + 1, c); dot(x1 + 1, y1 + 1, c) end
         if x1 == x2 and y1 == y2 then break end
         local e2 = 2 * err
         if e2 >= dy then err = err + dy; x1 = x1 + sx end
         if e2 <= dx then err = err + dx; y1 = y1 + sy end
      end
   end
   local function text(x, y, s, anchor, c, scale)
      scale = scale or 1
      local w = #s * font.advance * scale - scale
      if anchor == 'middle' then x = x - w / 2 elseif anchor == 'end' then x = x - w end
      x, y = math.floor(x + 0.5), math.floor(y + 0.5) - font.height * scale
      for k = 1, #s do
         local g = font[s:byte(k)] or font[63] -- '?' for anything outside ASCII
         for r = 1, 7 do
            local bits = g[r]
            for col = 0, 4 do
               if bit.band(bits, bit.lshift(1, 4 - col)) ~= 0 then
                  for a = 0, scale - 1 do
                     for b = 0, scale - 1 do dot(x + col * scale + a, y + (r - 1) * scale + b, c) end
                  end
               end
            end
         end
         x = x + font.advance * scale
      end
   end
   for _, p in ipairs(P) do
      if p.kind == 'line' then
         line(p.x1, p.y1, p.x2, p.y2, p.color, p.width)
      elseif p.kind == 'poly' then
         for i = 2, #p.points do
            local a, b = p.points[i - 1], p.points[i]
            line(a[1], a[2], b[1], b[2], p.color, p.width)
         end
      elseif p.kind == 'fill' then
         for yy = math.floor(p.y), math.floor(p.y + p.h) do line(p.x, yy, p.x + p.w, yy, p.color, 1) end
         line(p.x, p.y, p.x + p.w, p.y, GREY, 1); line(p.x, p.y + p.h, p.x + p.w, p.y + p.h, GREY, 1)
         line(p.x, p.y, p.x, p.y + p.h, GREY, 1); line(p.x + p.w, p.y, p.x + p.w, p.y + p.h, GREY, 1)
      elseif p.kind == 'rect' then
         line(p.x, p.y, p.x + p.w, p.y, p.color, 1)
         line(p.x + p.w, p.y, p.x + p.w, p.y + p.h, p.color, 1)
         line(p.x + p.w, p.y + p.h, p.x, p.y + p.h, p.color, 1)
         line(p.x, p.y + p.h, p.x, p.y, p.color, 1)
      elseif p.kind == 'marker' then
         if p.shape == '+' then
            line(p.x - 3, p.y, p.x + 3, p.y, p.color, 1)
            line(p.x, p.y - 3, p.x, p.y + 3, p.color, 1)
         else
            line(p.x, p.y, p.x + 1, p.y + 1, p.color, 2)
         end
      elseif p.kind == 'text' then
         text(p.x, p.y, p.text, p.anchor, p.color, p.scale)
      end
   end
   return buf, W, H
end

return M
