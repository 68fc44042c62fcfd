// Sweep detail: points of each run by status, one stacked bar per run
// (window.sweeplabCharts.status, beside the comparison charts of charts.js).
(function () {
  "use strict";
  const source = document.getElementById("status-chart-data");
  const canvas = document.getElementById("status-chart");
  if (!source || !canvas || !window.Chart) return;
  const data = JSON.parse(source.textContent);
  // One colour per status, the same as the badges.
  const colours = {
    planned: "#b8bfc8", ok: "#1a7f37", failed: "#c62828", crashed: "#8e1b1b",
    timeout: "#b26a00", context_overflow: "#e0603a", skipped: "#6d5bb0", not_run: "#d5d9de",
  };
  window.sweeplabCharts.status = new Chart(canvas, {
    type: "bar",
    data: {
      labels: data.labels,
      datasets: data.datasets.map(function (d) {
        return { label: d.label, data: d.data, backgroundColor: colours[d.status] || "#999", status: d.status };
      }),
    },
    options: {
      indexAxis: "y",
      maintainAspectRatio: false,
      animation: false,
      plugins: {
        title: { display: true, text: "Points of each run by status" },
        legend: { position: "bottom" },
      },
      scales: {
        x: { stacked: true, title: { display: true, text: "points" }, ticks: { precision: 0 } },
        y: { stacked: true, ticks: { autoSkip: false, font: { size: 11 } } },
      },
    },
  });
})();
