// History page: one series over time (runs/results/history.py). Regressions are red markers,
// excluded points (when shown) are grey. window.sweeplabCharts.history is the Chart.
(function () {
  "use strict";
  const root = document.getElementById("history-chart");
  if (!root || !root.dataset.url || !window.Chart) return;
  const toggle = document.getElementById("history-show-excluded");
  const summary = document.getElementById("history-summary");
  const GREY = "#9aa3ad";
  const LINE = "hsl(212, 78%, 45%)";
  const RED = "#d32f2f";

  function point(p) {
    return Object.assign({}, p, { x: Date.parse(p.x), y: p.y });
  }

  function datasets(data) {
    const timed = data.points.filter(function (p) { return p.x; });
    return [
      {
        label: data.metric.label,
        kind: "value",
        type: "line",
        data: timed.filter(function (p) { return !p.excluded; }).map(point),
        borderColor: LINE,
        backgroundColor: LINE,
        pointRadius: 3,
        tension: 0,
      },
      {
        label: "Regression",
        kind: "regression",
        type: "scatter",
        data: data.regressions.filter(function (p) { return p.x; }).map(point),
        borderColor: RED,
        backgroundColor: RED,
        pointStyle: "triangle",
        pointRadius: 8,
        order: -1,
      },
      {
        label: "Excluded",
        kind: "excluded",
        type: "scatter",
        data: timed.filter(function (p) { return p.excluded; }).map(point),
        borderColor: GREY,
        backgroundColor: "rgba(154, 163, 173, 0.45)",
        pointStyle: "crossRot",
        pointRadius: 6,
        hidden: !data.show_excluded,
      },
    ];
  }

  function tooltip(ctx) {
    const p = ctx.raw;
    const lines = [ctx.dataset.label + ": " + window.sweeplab.fmt(p.y)];
    lines.push("sweep #" + p.sweep + " " + (p.sweep_name || ""));
    if (p.engine_version) lines.push("engine " + p.engine_version);
    if (p.z !== undefined) lines.push(p.z === null ? "change " + (p.change * 100).toFixed(1) + " %" : "z = " + p.z.toFixed(2));
    if (p.excluded) lines.push("excluded: " + (p.exclude_reason || "no reason given"));
    if (p.baseline) lines.push("the baseline of this series");
    (p.curation || []).forEach(function (note) { lines.push(note); });
    return lines;
  }

  function draw(data) {
    root.textContent = "";
    const canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", data.metric.label + " over time");
    root.appendChild(canvas);
    const old = window.sweeplabCharts.history;
    if (old) old.destroy();
    window.sweeplabCharts.history = new Chart(canvas, {
      type: "line",
      data: { datasets: datasets(data) },
      options: {
        maintainAspectRatio: false,
        animation: false,
        parsing: { xAxisKey: "x", yAxisKey: "y" },
        interaction: { mode: "nearest", intersect: true },
        plugins: {
          title: { display: true, text: data.metric.label + " — " + data.method.name },
          legend: { position: "bottom", labels: { usePointStyle: true, boxWidth: 10 } },
          tooltip: { callbacks: { label: tooltip } },
        },
        scales: {
          x: {
            type: "linear",
            title: { display: true, text: "finished at" },
            ticks: { callback: function (v) { return new Date(v).toISOString().slice(0, 16).replace("T", " "); } },
          },
          y: { title: { display: true, text: data.metric.label }, beginAtZero: false },
        },
      },
    });
    if (summary) {
      summary.textContent = data.counts.points + " points, " + data.counts.excluded + " excluded, " +
        data.counts.regressions + " regression(s). " + data.method.description + ".";
    }
    root.dataset.ready = "true";
  }

  function load() {
    const url = new URL(root.dataset.url, window.location.href);
    if (toggle) {
      if (toggle.checked) url.searchParams.set("show_excluded", "1");
      else url.searchParams.delete("show_excluded");
    }
    window.sweeplab.getJSON(url)
      .then(function (data) {
        if (!data.points.length) {
          root.textContent = "";
          root.appendChild(window.sweeplab.el("p", "muted", "No ok points in this series."));
          return;
        }
        draw(data);
      })
      .catch(function (error) {
        root.textContent = "";
        root.appendChild(window.sweeplab.el("p", "error", "History could not be loaded: " + error.message));
      });
  }

  if (toggle) toggle.addEventListener("change", load);
  load();
})();
