// The VQS console's script: live charts (uPlot) and table filters.
// Data from the server is only ever set as text (textContent) or chart
// numbers; never as HTML. Loaded with `defer` from the console's own origin
// (the Content-Security-Policy allows no inline script).
"use strict";

(function () {
  var POLL_MS = 1500;

  function fetchJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); });
  }

  // Axis numbers in a few characters (1.2k, 3.4M), and a y axis as wide as its longest label:
  // a fixed width cut a rate or backlog of millions at the canvas's left edge.
  function compact(v) {
    var a = Math.abs(v), units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < units.length; i++) {
      if (a >= units[i][0]) { return (Math.round(v / units[i][0] * 10) / 10) + units[i][1]; }
    }
    return String(Math.round(v * 100) / 100);
  }

  function yAxisSize(u, values, axisIdx, cycleNum) {
    var axis = u.axes[axisIdx];
    if (cycleNum > 1) { return axis._size; }
    var longest = 0;
    u.ctx.font = axis.font[0];
    (values || []).forEach(function (v) { longest = Math.max(longest, u.ctx.measureText(String(v)).width); });
    return Math.ceil(axis.ticks.size + axis.gap + longest / (uPlot.pxRatio || 1)) + 8;
  }

  function makeChart(fig) {
    var label = fig.dataset.label || fig.dataset.series;
    var now = document.createElement("span");
    now.className = "now";
    var cap = fig.querySelector("figcaption");
    if (cap) { cap.appendChild(document.createTextNode(" ")); cap.appendChild(now); }
    var opts = {
      width: Math.max(240, fig.clientWidth - 8),
      height: 160,
      legend: { show: false },
      cursor: { show: true, drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.1)]; } } },
      axes: [{ space: 70 }, { size: yAxisSize, values: function (u, splits) { return splits.map(compact); } }],
      series: [{}, { label: label, stroke: "#2a6fdb", width: 2, fill: "rgba(42,111,219,0.12)" }]
    };
    var plot = new uPlot(opts, [[], []], fig);
    return { fig: fig, plot: plot, key: fig.dataset.series, now: now };
  }

  function startCharts() {
    if (typeof uPlot === "undefined") { return; }
    var bySrc = {};
    document.querySelectorAll("figure.chart[data-src]").forEach(function (fig) {
      var c = makeChart(fig);
      (bySrc[fig.dataset.src] = bySrc[fig.dataset.src] || []).push(c);
    });
    Object.keys(bySrc).forEach(function (src) {
      var charts = bySrc[src];
      function tick() {
        fetchJSON(src).then(function (d) {
          charts.forEach(function (c) {
            var ys = d[c.key] || [];
            c.plot.setData([d.t || [], ys]);
            var last = ys.length ? ys[ys.length - 1] : 0;
            c.now.textContent = "now: " + (Math.round(last * 10) / 10).toLocaleString("en-US");
            c.fig.dataset.last = String(last);
            c.fig.dataset.points = String(ys.length);
          });
        }).catch(function () { /* the next tick retries */ }).then(function () {
          setTimeout(tick, POLL_MS);
        });
      }
      tick();
    });
    window.addEventListener("resize", function () {
      Object.keys(bySrc).forEach(function (src) {
        bySrc[src].forEach(function (c) { c.plot.setSize({ width: Math.max(240, c.fig.clientWidth - 8), height: 160 }); });
      });
    });
  }

  function startFilters() {
    document.querySelectorAll("input.filter[data-filter]").forEach(function (input) {
      var table = document.querySelector(input.dataset.filter);
      if (!table) { return; }
      input.addEventListener("input", function () {
        var q = input.value.toLowerCase();
        table.querySelectorAll("tbody tr[data-name]").forEach(function (tr) {
          tr.hidden = q !== "" && tr.dataset.name.toLowerCase().indexOf(q) < 0;
        });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    startCharts();
    startFilters();
  });
})();
