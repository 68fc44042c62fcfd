// Compare page: matched points of two or more sweeps (or runs) as grouped bars for one
// metric. Data comes from json_script (runs/compare.py chart_data). A point without a
// value is a gap (never a zero bar); the tooltip shows its status and reason as text.
(function () {
  "use strict";
  window.sweeplabCharts = window.sweeplabCharts || {};
  const source = document.getElementById("compare-chart-data");
  const canvas = document.getElementById("compare-chart");
  if (!source || !canvas || !window.Chart) return;
  const data = JSON.parse(source.textContent);

  function fmt(value) {
    if (value === null || value === undefined) return "no value";
    return Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(2);
  }

  const chart = new window.Chart(canvas, {
    type: "bar",
    data: {
      labels: data.labels,
      datasets: data.datasets.map(function (d) {
        return {
          label: d.label, data: d.data, backgroundColor: d.backgroundColor,
          borderColor: d.borderColor, borderWidth: d.borderWidth,
          status: d.status, reason: d.reason, pct: d.pct,
        };
      }),
    },
    options: {
      indexAxis: "y",
      maintainAspectRatio: false,
      animation: false,
      scales: {
        x: { beginAtZero: true, title: { display: true, text: data.metric + (data.higherIsBetter ? " (higher is better)" : " (lower is better)") } },
      },
      plugins: {
        tooltip: {
          callbacks: {
            label: function (ctx) {
              const ds = ctx.dataset;
              const i = ctx.dataIndex;
              if (ds.data[i] === null || ds.data[i] === undefined) {
                const status = ds.status[i] || "no point";
                return ds.label + ": " + status + (ds.reason[i] ? " — " + ds.reason[i] : "");
              }
              const pct = ds.pct[i];
              const diff = pct === null || pct === undefined ? "" : " (" + (pct > 0 ? "+" : "") + pct.toFixed(1) + "%)";
              return ds.label + ": " + fmt(ds.data[i]) + diff;
            },
          },
        },
      },
    },
  });
  window.sweeplabCharts.compare = chart;
})();
