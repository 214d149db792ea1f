"""An interactive head view in one self-contained HTML file (in the spirit of BertViz).

Tokens in two columns, a line from each query token (left) to each key token (right)
per selected head, its opacity the attention weight, one colour per head. A select picks
the layer, checkboxes the heads; hovering a left token keeps only its lines. Everything is
inline (data as JSON, script, style): the page works offline and loads nothing.
The URL fragment chooses the initial view: `#layer=2&heads=1,3` (1-based).
"""
import json
from typing import Sequence

import numpy as np

MIN_WEIGHT = 0.01  # lines below this weight are not drawn

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%(title)s</title>
<style>
body { font-family: sans-serif; margin: 16px; }
#controls { margin-bottom: 8px; }
#controls label { margin-right: 8px; }
text.token { font-size: 13px; cursor: default; }
text.token.dim { fill: #bbb; }
</style></head>
<body>
<h3 id="title">%(title)s</h3>
<div id="controls">Layer: <select id="layer"></select> <span id="heads"></span></div>
<div id="summary"></div>
<svg id="view" xmlns="http://www.w3.org/2000/svg"></svg>
<script id="data" type="application/json">%(data)s</script>
<script>
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                  "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"];
  const layers = data.attentions.length, heads = data.attentions[0].length;
  const n = data.tokens.length, rowH = 20, width = 420, leftX = 110, rightX = 310;
  const svgNS = "http://www.w3.org/2000/svg";
  const view = document.getElementById("view");
  view.setAttribute("width", width);
  view.setAttribute("height", rowH * n + 20);
  const state = {layer: 0, heads: new Set([...Array(heads).keys()]), focus: null};
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.has("layer")) state.layer = Math.min(layers, Math.max(1, +hash.get("layer"))) - 1;
  if (hash.has("heads")) state.heads = new Set(hash.get("heads").split(",").map(h => +h - 1)
                                               .filter(h => h >= 0 && h < heads));
  const select = document.getElementById("layer");
  for (let l = 0; l < layers; l++) {
    const option = document.createElement("option");
    option.value = l; option.textContent = l + 1; select.appendChild(option);
  }
  select.value = state.layer;
  select.onchange = () => { state.layer = +select.value; draw(); };
  const box = document.getElementById("heads");
  for (let h = 0; h < heads; h++) {
    const label = document.createElement("label");
    label.style.color = colors[h %% colors.length];
    const check = document.createElement("input");
    check.type = "checkbox"; check.className = "head-toggle"; check.dataset.head = h;
    check.checked = state.heads.has(h);
    check.onchange = () => { check.checked ? state.heads.add(h) : state.heads.delete(h); draw(); };
    label.appendChild(check); label.appendChild(document.createTextNode("head " + (h + 1)));
    box.appendChild(label);
  }
  function token(i, x, side) {
    const t = document.createElementNS(svgNS, "text");
    t.setAttribute("x", x); t.setAttribute("y", rowH * i + 20);
    t.setAttribute("text-anchor", side === "left" ? "end" : "start");
    t.setAttribute("class", "token " + side + "-token");
    t.dataset.index = i; t.textContent = data.tokens[i];
    if (side === "left") {
      t.onmouseenter = () => { state.focus = i; draw(); };
      t.onmouseleave = () => { state.focus = null; draw(); };
    }
    return t;
  }
  function draw() {
    view.textContent = "";
    let edges = 0;
    for (const h of [...state.heads].sort((a, b) => a - b)) {
      const rows = data.attentions[state.layer][h];
      for (let q = 0; q < n; q++) {
        if (state.focus !== null && q !== state.focus) continue;
        for (let k = 0; k < n; k++) {
          const w = rows[q][k];
          if (w < data.min_weight) continue;
          const line = document.createElementNS(svgNS, "line");
          line.setAttribute("x1", leftX + 5); line.setAttribute("y1", rowH * q + 15);
          line.setAttribute("x2", rightX - 5); line.setAttribute("y2", rowH * k + 15);
          line.setAttribute("stroke", colors[h %% colors.length]);
          line.setAttribute("stroke-width", 2); line.setAttribute("stroke-opacity", w);
          line.setAttribute("class", "edge");
          line.dataset.head = h; line.dataset.query = q; line.dataset.key = k;
          line.dataset.weight = w;
          view.appendChild(line); edges++;
        }
      }
    }
    for (let i = 0; i < n; i++) {
      view.appendChild(token(i, leftX, "left"));
      view.appendChild(token(i, rightX, "right"));
    }
    const shown = [...state.heads].sort((a, b) => a - b).map(h => h + 1).join(",");
    document.getElementById("summary").textContent =
        "layer " + (state.layer + 1) + "; heads " + (shown || "none") + "; " + edges + " lines";
  }
  draw();
})();
</script></body></html>
"""


def render(tokens: Sequence[str], attentions: np.ndarray, title: str = "Attention head view",
           min_weight: float = MIN_WEIGHT) -> str:
  """The page for one example: attentions [layers, heads, query, key] over `tokens`."""
  attentions = np.asarray(attentions, np.float64)
  if attentions.ndim != 4 or attentions.shape[-2:] != (len(tokens), len(tokens)):
    raise ValueError(f"attentions has shape {attentions.shape}; expected [layers, heads, "
                     f"{len(tokens)}, {len(tokens)}] for {len(tokens)} tokens.")
  data = {"tokens": list(tokens), "attentions": np.round(attentions, 4).tolist(),
          "min_weight": min_weight}
  payload = json.dumps(data).replace("</", "<\\/")
  safe_title = (title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
  return PAGE % {"title": safe_title, "data": payload}


def write(path: str, tokens: Sequence[str], attentions: np.ndarray, **kwargs) -> str:
  with open(path, "w", encoding="utf-8") as f:
    f.write(render(tokens, attentions, **kwargs))
  return path
