// Sweep detail: points of each run by status, one stacked bar per run
// (window.sweeplabCharts.status, beside the comparison charts of charts.js). Its data is
// #status-chart-data's data-chart, which the live partial sends again out of band while the
// sweep runs: the chart is updated in place each time it changed.
(function () {
  "use strict";
  const canvas = document.getElementById("status-chart");
  if (!document.getElementById("status-chart-data") || !canvas || !window.Chart) return;
  // One colour per status, the same as the badges.
  const colours = {
    planned: "#b8bfc8", ok: "#1a7f37", failed: "#c62828", crashed: "#8e1b1b",
    timeout: "#b26a00", context_overflow: "#e0603a", skipped: "#6d5bb0", not_run: "#d5d9de",
  };
  let shown = null;

  function datasetsOf(data) {
    return data.datasets.map(function (d) {
      return { label: d.label, data: d.data, backgroundColor: colours[d.status] || "#999", status: d.status };
    });
  }

  function current() {
    const source = document.getElementById("status-chart-data");
    return source ? source.dataset.chart : null;
  }

  shown = current();
  const data = JSON.parse(shown);
  const chart = new Chart(canvas, {
    type: "bar",
    data: { labels: data.labels, datasets: datasetsOf(data) },
    options: {
      indexAxis: "y",
      maintainAspectRatio: false,
      animation: false,
      plugins: {
        title: { display: true, text: "Points of each run by status" },
        legend: { position: "top", align: "end", labels: { boxWidth: 12 } },
      },
      scales: {
        x: { stacked: true, title: { display: true, text: "points" }, ticks: { precision: 0 } },
        y: { stacked: true, ticks: { autoSkip: false, font: { size: 11 } } },
      },
    },
  });
  window.sweeplabCharts.status = chart;

  document.addEventListener("htmx:afterSettle", function () {
    const now = current();
    if (!now || now === shown) return;
    shown = now;
    const next = JSON.parse(now);
    chart.data.labels = next.labels;
    chart.data.datasets = datasetsOf(next);
    chart.update("none");
  });
})();
