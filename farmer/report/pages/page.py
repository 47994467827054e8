"""The HTML report's style sheet and script, inlined into every page (nothing is fetched:
the page works from a CI artifact, offline). The script draws the timeline and the
parallelism on canvases from the page's embedded JSON and pages the table of every
computation, so a build of 10k computations costs a few hundred DOM nodes, not 10k."""

CSS = """
:root { --fg:#1d232b; --muted:#5d6875; --line:#d9dee4; --bg:#fff; --panel:#f5f7f9;
  --ran:#3b7dd8; --cached:#2e9e6b; --failed:#d64545; --skipped:#b0b7c0; --uptodate:#c9d3de;
  --critical:#f0a020; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  background: var(--bg); margin: 0; padding: 20px 28px 60px; max-width: 1400px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h1 .status { padding: 2px 10px; border-radius: 12px; font-size: 15px; vertical-align: 3px; color: #fff; }
.status.ok { background: var(--cached); } .status.failed, .status.interrupted { background: var(--failed); }
h2 { font-size: 17px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.meta { color: var(--muted); margin-bottom: 14px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 110px; }
.card b { display: block; font-size: 20px; }
.card span { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card.failed b { color: var(--failed); } .card.cached b { color: var(--cached); }
table { border-collapse: collapse; width: 100%; margin: 6px 0; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; word-break: break-all; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; color: #fff; white-space: nowrap; }
.badge.ran { background: var(--ran); } .badge.cached { background: var(--cached); }
.badge.failed { background: var(--failed); } .badge.skipped { background: var(--skipped); }
.badge.up-to-date { background: var(--uptodate); color: var(--fg); }
.crit { color: #9a5c00; font-weight: 600; }
.failure { border: 1px solid #efc2c2; border-left: 4px solid var(--failed); border-radius: 6px; margin: 10px 0; background: #fdf6f6; }
.failure h3 { margin: 0; padding: 8px 12px; font-size: 14px; font-family: ui-monospace, monospace; }
.failure .why { color: var(--failed); font-family: system-ui, sans-serif; font-weight: 600; }
pre { margin: 0; padding: 8px 12px; background: #1e242b; color: #e6e6e6; overflow: auto; max-height: 360px;
  font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; border-radius: 0 0 6px 6px; }
.chart { position: relative; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
canvas { display: block; width: 100%; }
#tip { position: fixed; pointer-events: none; background: #1e242b; color: #fff; padding: 6px 9px; border-radius: 5px;
  font-size: 12px; display: none; max-width: 520px; z-index: 10; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 6px 0; font-size: 12px; color: var(--muted); }
.legend i { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 5px; vertical-align: -1px; }
.two { display: grid; grid-template-columns: 1fr 1fr; gap: 24px; }
@media (max-width: 900px) { .two { grid-template-columns: 1fr; } }
.note { color: var(--muted); font-style: italic; }
.controls { display: flex; gap: 8px; align-items: center; margin: 6px 0; }
.controls input { flex: 1; padding: 5px 8px; border: 1px solid var(--line); border-radius: 5px; font: inherit; }
.controls select, .controls button { padding: 4px 8px; font: inherit; }
.bar { display: inline-block; height: 9px; background: var(--ran); border-radius: 2px; vertical-align: 0; }
.bar.pred { background: none; border: 1px solid var(--muted); }
"""

JS = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("farmer-data").textContent);
  // each computation: [id, task, status, reason, start, end, lane, predicted, critical, where]
  var ID = 0, TASK = 1, STATUS = 2, REASON = 3, START = 4, END = 5, LANE = 6, PRED = 7, CRIT = 8, WHERE = 9;
  var comps = data.computations;
  // world set-ups are drawn with the computations (each on the slot it held), not listed
  var timed = comps.filter(function (c) { return c[START] !== null && c[END] !== null; })
    .concat(data.setups || []);
  var wall = Math.max(data.wall_s || 0, timed.reduce(function (m, c) { return Math.max(m, c[END]); }, 0)) || 1;
  var lanes = timed.reduce(function (m, c) { return Math.max(m, c[LANE] + 1); }, 0);
  var color = data.colors;  // the tasks with the most time; the others are grey
  var tip = document.getElementById("tip");

  function fmt(s) { return s === null || s === undefined ? "\u2013" : (s < 10 ? s.toFixed(2) : s.toFixed(1)) + " s"; }
  function fill(c) {
    if (c[STATUS] === "failed") return "#d64545";
    if (c[STATUS] === "cached") return "#2e9e6b";
    return color[c[TASK]] || "#8a97a6";
  }
  function setup(canvas, height) {
    var ratio = window.devicePixelRatio || 1, width = canvas.parentNode.clientWidth - 2;
    canvas.width = width * ratio; canvas.height = height * ratio; canvas.style.height = height + "px";
    var ctx = canvas.getContext("2d"); ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    return { ctx: ctx, width: width };
  }
  var PAD_L = 48, PAD_R = 12;
  function axis(ctx, width, y) {
    ctx.fillStyle = "#5d6875"; ctx.strokeStyle = "#d9dee4"; ctx.font = "11px system-ui, sans-serif";
    var step = Math.pow(10, Math.floor(Math.log10(wall / 6)));
    if (wall / step > 12) step *= 5; else if (wall / step > 6) step *= 2;
    for (var t = 0; t <= wall + 1e-9; t += step) {
      var x = PAD_L + t / wall * (width - PAD_L - PAD_R);
      ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, y); ctx.stroke();
      if (x + 40 < width) ctx.fillText(+t.toFixed(3) + " s", x + 2, y + 12);
    }
  }

  var laneIndex = [];  // per lane, its computations by start: what the pointer is over
  function drawTimeline() {
    var canvas = document.getElementById("timeline");
    if (!canvas) return;
    var rowH = lanes > 40 ? Math.max(3, Math.floor(480 / lanes)) : 22;
    var s = setup(canvas, lanes * rowH + 20), ctx = s.ctx, width = s.width;
    var scale = (width - PAD_L - PAD_R) / wall;
    axis(ctx, width, lanes * rowH);
    laneIndex = [];
    for (var l = 0; l < lanes; l++) laneIndex.push([]);
    timed.forEach(function (c) { laneIndex[c[LANE]].push(c); });
    ctx.font = "11px system-ui, sans-serif";
    for (l = 0; l < lanes; l++) {
      ctx.fillStyle = "#5d6875";
      if (rowH >= 12) ctx.fillText("slot " + l, 4, l * rowH + rowH / 2 + 4);
      laneIndex[l].forEach(function (c) {
        var x = PAD_L + c[START] * scale, w = Math.max(1, (c[END] - c[START]) * scale), y = l * rowH + 1, h = rowH - 2;
        ctx.fillStyle = fill(c); ctx.fillRect(x, y, w, h);
        if (c[CRIT]) { ctx.strokeStyle = "#f0a020"; ctx.lineWidth = 2; ctx.strokeRect(x + 1, y + 1, Math.max(0, w - 2), h - 2); }
        if (w > 60 && rowH >= 16) {
          ctx.save(); ctx.beginPath(); ctx.rect(x, y, w, h); ctx.clip();
          ctx.fillStyle = "#fff"; ctx.fillText(c[ID], x + 4, y + h / 2 + 4); ctx.restore();
        }
      });
    }
    canvas.onmousemove = function (ev) {
      var r = canvas.getBoundingClientRect(), lane = Math.floor((ev.clientY - r.top) / rowH);
      var t = (ev.clientX - r.left - PAD_L) / scale, hit = null;
      (laneIndex[lane] || []).forEach(function (c) { if (c[START] <= t && t <= c[END]) hit = c; });
      if (!hit) { tip.style.display = "none"; return; }
      tip.textContent = hit[TASK] + " " + hit[ID] + " \u2014 " + hit[STATUS] + ", " + fmt(hit[END] - hit[START]) +
        (hit[PRED] !== null ? " (predicted " + fmt(hit[PRED]) + ")" : "") + (hit[CRIT] ? ", critical path" : "") +
        "; " + hit[REASON];
      tip.style.display = "block"; tip.style.left = (ev.clientX + 12) + "px"; tip.style.top = (ev.clientY + 12) + "px";
    };
    canvas.onmouseleave = function () { tip.style.display = "none"; };
  }

  function drawParallelism() {
    var canvas = document.getElementById("parallelism");
    if (!canvas) return;
    var events = [];
    timed.forEach(function (c) { events.push([c[START], 1]); events.push([c[END], -1]); });
    events.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
    var top = Math.max(data.jobs || 1, lanes, 1), height = 120, s = setup(canvas, height + 20), ctx = s.ctx, width = s.width;
    var scale = (width - PAD_L - PAD_R) / wall, yOf = function (n) { return height - n / top * (height - 8); };
    axis(ctx, width, height);
    ctx.fillStyle = "#5d6875"; ctx.fillText(top + "", 4, yOf(top) + 4); ctx.fillText("0", 4, height);
    ctx.setLineDash([4, 3]); ctx.strokeStyle = "#d64545"; ctx.beginPath();
    ctx.moveTo(PAD_L, yOf(data.jobs || 1)); ctx.lineTo(width - PAD_R, yOf(data.jobs || 1)); ctx.stroke(); ctx.setLineDash([]);
    ctx.fillStyle = "rgba(59,125,216,.35)"; ctx.strokeStyle = "#3b7dd8"; ctx.lineWidth = 1.5;
    ctx.beginPath(); ctx.moveTo(PAD_L, yOf(0));
    var running = 0;
    events.forEach(function (e) {
      var x = PAD_L + e[0] * scale;
      ctx.lineTo(x, yOf(running)); running += e[1]; ctx.lineTo(x, yOf(running));
    });
    ctx.lineTo(PAD_L + wall * scale, yOf(0)); ctx.closePath(); ctx.fill(); ctx.stroke();
  }

  // The table of every computation: filtered and paged, never all 10k rows at once.
  var PAGE = 100, page = 0, shown = comps;
  function cell(tr, text, cls) { var td = document.createElement("td"); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); return td; }
  function renderTable() {
    var body = document.getElementById("all-body");
    if (!body) return;
    body.textContent = "";
    shown.slice(page * PAGE, (page + 1) * PAGE).forEach(function (c) {
      var tr = document.createElement("tr");
      cell(tr, c[ID], "id" + (c[CRIT] ? " crit" : ""));
      cell(tr, c[TASK]);
      var b = document.createElement("span"); b.className = "badge " + c[STATUS]; b.textContent = c[STATUS];
      cell(tr, "").appendChild(b);
      cell(tr, c[REASON] + (c[WHERE] ? " (" + c[WHERE] + ")" : ""));
      cell(tr, c[START] === null ? "\u2013" : fmt(c[START]), "n");
      cell(tr, c[START] === null ? "\u2013" : fmt(c[END] - c[START]), "n");
      cell(tr, fmt(c[PRED]), "n");
      body.appendChild(tr);
    });
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    document.getElementById("all-count").textContent = shown.length + " of " + comps.length +
      " computations; page " + (page + 1) + " of " + pages;
    document.getElementById("all-prev").disabled = page === 0;
    document.getElementById("all-next").disabled = page + 1 >= pages;
  }
  function filterTable() {
    var q = document.getElementById("all-filter").value.toLowerCase(), st = document.getElementById("all-status").value;
    shown = comps.filter(function (c) {
      return (!st || c[STATUS] === st) && (!q || (c[ID] + " " + c[TASK] + " " + c[REASON]).toLowerCase().indexOf(q) >= 0);
    });
    page = 0; renderTable();
  }
  var filter = document.getElementById("all-filter");
  if (filter) {
    filter.addEventListener("input", filterTable);
    document.getElementById("all-status").addEventListener("change", filterTable);
    document.getElementById("all-prev").addEventListener("click", function () { page--; renderTable(); });
    document.getElementById("all-next").addEventListener("click", function () { page++; renderTable(); });
  }
  function draw() { drawTimeline(); drawParallelism(); }
  draw(); renderTable();
  var pending = null;
  window.addEventListener("resize", function () { clearTimeout(pending); pending = setTimeout(draw, 100); });
})();
"""
