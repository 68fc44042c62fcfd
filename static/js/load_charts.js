// Sweep detail: the curves against load and the Pareto view (runs/results/load_charts.py sends
// them Chart.js-ready, drawn by charts.js's shared renderer with their SLO and capacity lines).
// Fetched once the page has loaded; #load-charts gets data-ready=true once they are drawn.
(function () {
  "use strict";
  const root = document.getElementById("load-charts");
  if (!root || !root.dataset.url || !window.Chart || !window.sweeplab.renderChart) return;
  const text = window.sweeplab.el;
  const validOnly = root.dataset.validOnly === "true";

  window.sweeplab.getJSON(new URL(root.dataset.url, window.location.href))
    .then(function (data) {
      root.textContent = "";
      if (!data.charts.length) {
        root.appendChild(text("p", "muted", "No measured points yet."));
        return;
      }
      const legend = data.legend.slice();
      if (!validOnly) {
        if (!legend.some(function (e) { return e.status === "invalid"; })) legend.push(window.sweeplab.INVALID_MARKER);
        legend.push(window.sweeplab.SUSPECT_ENTRY);
      }
      root.appendChild(window.sweeplab.chartLegend(legend));
      data.charts.forEach(function (chart) { window.sweeplab.renderChart(chart, root, validOnly); });
      root.dataset.ready = "true";
    })
    .catch(function (error) {
      root.textContent = "";
      root.appendChild(text("p", "error", "Charts could not be loaded: " + error.message));
    });
})();
