// History page: one series over time (runs/results/history.py). Valid points are the line,
// with their 95 % intervals as error bars; suspect points are hatched, hollow and never
// joined to the line; invalid points are markers along the bottom (never values); regressions
// are red triangles; excluded points (when shown) are grey. Every tooltip says n, the
// interval, the verdict against the trailing window and the reasons.
// window.sweeplabCharts.history is the Chart.
(function () {
  "use strict";
  const root = document.getElementById("history-chart");
  if (!root || !root.dataset.url || !window.Chart) return;
  const toggle = document.getElementById("history-show-excluded");
  const validOnly = document.getElementById("history-valid-only");
  const summary = document.getElementById("history-summary");
  const GREY = "#9aa3ad";
  const LINE = "hsl(212, 78%, 45%)";
  const RED = "#d32f2f";

  const AMBER = "#b7791f";
  const PURPLE = "#6a1b9a";

  function point(p) {
    const out = Object.assign({}, p, { x: Date.parse(p.x), y: p.y });
    if (p.ci) { out.yMin = p.ci[0]; out.yMax = p.ci[1]; }
    return out;
  }

  function datasets(data) {
    const timed = data.points.filter(function (p) { return p.x; });
    const shown = timed.filter(function (p) { return !p.excluded; });
    const of = function (v) { return shown.filter(function (p) { return p.validity === v; }).map(point); };
    return [
      {
        label: data.metric.label,
        kind: "value",
        type: "lineWithErrorBars",
        data: of("valid"),
        borderColor: LINE,
        backgroundColor: LINE,
        errorBarColor: LINE,
        errorBarWhiskerColor: LINE,
        pointRadius: 3,
        tension: 0,
      },
      {
        label: "Suspect (not judged)",
        kind: "suspect",
        type: "scatterWithErrorBars",
        data: of("suspect"),
        borderColor: AMBER,
        backgroundColor: window.sweeplab.hatch(AMBER),
        errorBarColor: AMBER,
        errorBarWhiskerColor: AMBER,
        pointStyle: "rectRot",
        pointRadius: 7,
      },
      {
        label: "Invalid (no value drawn)",
        kind: "invalid",
        type: "scatter",
        yAxisID: "marker",
        data: shown.filter(function (p) { return p.validity !== "valid" && p.validity !== "suspect"; })
          .map(function (p) { return Object.assign(point(p), { value: p.y, y: 0.04 }); }),
        borderColor: PURPLE,
        backgroundColor: PURPLE,
        pointStyle: "star",
        pointRadius: 8,
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
    const fmt = window.sweeplab.fmt;
    const lines = [];
    if (p.validity === "invalid" || p.validity === "") {
      lines.push((p.validity || "not judged") + ": no value drawn");
    } else {
      let value = ctx.dataset.label + ": " + fmt(p.y);
      if (p.ci) value += ", 95 % CI " + fmt(p.ci[0]) + "–" + fmt(p.ci[1]);
      lines.push(value);
    }
    lines.push("n = " + (p.n === null || p.n === undefined ? "?" : p.n) + (p.validity ? ", " + p.validity : ""));
    window.sweeplab.reasonLines(p.validity_reasons).forEach(function (r) { lines.push(r); });
    if (p.simulated_time_scale) lines.push("simulated (model time, ×" + p.simulated_time_scale + ")");
    lines.push("sweep #" + p.sweep + " " + (p.sweep_name || ""));
    if (p.engine_version) lines.push("engine " + p.engine_version);
    if (p.verdict) {
      lines.push("against the trailing window: " + p.verdict + (p.verdict_reason ? " — " + p.verdict_reason : ""));
    } else if (p.verdict_reason) {
      lines.push(p.verdict_reason);
    }
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
          // Invalid points sit on this hidden axis, along the bottom: a marker, never a value.
          marker: { display: false, min: 0, max: 1 },
        },
      },
    });
    if (summary) {
      summary.textContent = data.counts.points + " points (" + data.counts.not_valid + " not valid, never judged), " +
        data.counts.excluded + " excluded, " + data.counts.regressions + " regression(s), " +
        data.counts.insufficient + " with insufficient data. " + data.method.description + ".";
    }
    root.dataset.ready = "true";
  }

  function load() {
    const url = new URL(root.dataset.url, window.location.href);
    if (toggle) {
      if (toggle.checked) url.searchParams.set("show_excluded", "1");
      else url.searchParams.delete("show_excluded");
    }
    if (validOnly) {
      if (validOnly.checked) url.searchParams.set("valid_only", "1");
      else url.searchParams.delete("valid_only");
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
  if (validOnly) validOnly.addEventListener("change", load);
  load();
})();
