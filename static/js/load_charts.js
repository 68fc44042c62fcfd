// Sweep detail: the curves against load and the Pareto view (runs/results/load_charts.py sends
// them Chart.js-ready, drawn by charts.js's shared renderer with their SLO and capacity lines).
// Fetched once the page has loaded, and again when the live poll says the points changed
// ("points-changed"); #load-charts gets data-ready=true once they are drawn.
(function () {
  "use strict";
  const root = document.getElementById("load-charts");
  if (!root || !root.dataset.url || !window.Chart || !window.sweeplab.renderCharts) return;
  const text = window.sweeplab.el;
  const validOnly = root.dataset.validOnly === "true";
  let inFlight = false;
  let again = false;

  function draw(data) {
    window.sweeplab.destroyChartsIn(root);
    root.textContent = "";
    if (!data.charts.length) {
      root.appendChild(text("p", "muted", "No measured points yet."));
      return;
    }
    const legend = window.sweeplab.usedLegend(data.legend, data.charts, validOnly);
    if (legend.length) root.appendChild(window.sweeplab.chartLegend(legend));
    // Their series are a configuration's method and TP, not one configuration: a swatch each, by name.
    window.sweeplab.renderCharts(data.charts, root, validOnly, {});
  }

  function load() {
    if (inFlight) { again = true; return; }
    inFlight = true;
    window.sweeplab.getJSON(new URL(root.dataset.url, window.location.href))
      .then(function (data) {
        draw(data);
        root.dataset.ready = "true";
      })
      .catch(function (error) {
        root.textContent = "";
        root.appendChild(text("p", "error", "Charts could not be loaded: " + error.message));
      })
      .then(function () {
        inFlight = false;
        if (again) { again = false; load(); }
      });
  }

  load();
  document.body.addEventListener("points-changed", load);
})();
