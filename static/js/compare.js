// Compare page: matched points of two or more sweeps (or runs) as grouped horizontal bars for
// one metric. Data comes from json_script (runs/results/compare.py chart_data): a bar's fill says how
// it compares with the baseline (barColors, as the table's colours); a point without a value
// is a marker dataset at the axis baseline (kind "marker"), never a zero or an empty bar,
// and its tooltip shows its status and reason. window.sweeplabCharts.compare is the Chart.
(function () {
  "use strict";
  const source = document.getElementById("compare-chart-data");
  const canvas = document.getElementById("compare-chart");
  if (!source || !canvas || !window.Chart) return;
  const data = JSON.parse(source.textContent);

  const datasets = data.datasets.map(function (d) {
    const copy = Object.assign({}, d);
    if (d.kind === "marker") {
      copy.showLine = false;
      copy.order = -1; // drawn above the bars
      return copy;
    }
    // Each bar filled by its verdict; the legend keeps the group's own colour.
    copy.backgroundColor = function (ctx) {
      return ctx.type === "data" ? d.barColors[ctx.dataIndex] : d.backgroundColor;
    };
    return copy;
  });

  function tooltipLabel(ctx) {
    const ds = ctx.dataset;
    if (ds.kind === "marker") {
      return [ctx.raw.group + ": " + ds.label, ctx.raw.reason].filter(Boolean);
    }
    const i = ctx.dataIndex;
    const pct = ds.pct[i];
    const diff = pct === null || pct === undefined ? "" : " (" + (pct > 0 ? "+" : "") + pct.toFixed(1) + "%, " + ds.verdict[i] + ")";
    return ds.label + ": " + window.sweeplab.fmt(ds.data[i], data.unit) + diff;
  }

  // A marker's row is its own y, not its index in the dataset.
  function tooltipTitle(items) {
    return items.map(function (item) {
      return item.dataset.kind === "marker" ? item.raw.y : item.label;
    }).filter(function (title, i, all) { return all.indexOf(title) === i; });
  }

  // A group's legend entry in its own colour, not the verdict colour of its first bar.
  function legendLabels(chart) {
    const items = window.Chart.defaults.plugins.legend.labels.generateLabels(chart);
    items.forEach(function (item) {
      const d = data.datasets[item.datasetIndex];
      if (d && d.kind === "value") {
        item.fillStyle = d.backgroundColor;
        item.strokeStyle = d.borderColor;
        item.pointStyle = "rect";
      }
    });
    return items;
  }

  const chart = new window.Chart(canvas, {
    type: "bar",
    data: { labels: data.labels, datasets: datasets },
    options: {
      indexAxis: "y",
      maintainAspectRatio: false,
      animation: false,
      interaction: { mode: "nearest", intersect: true },
      scales: {
        x: { type: "linear", beginAtZero: true, title: { display: true, text: data.x.label } },
        y: { type: "category", title: { display: true, text: data.y.label } },
      },
      plugins: {
        title: { display: true, text: data.title },
        legend: { position: "bottom", labels: { usePointStyle: true, boxWidth: 10, generateLabels: legendLabels } },
        tooltip: { callbacks: { title: tooltipTitle, label: tooltipLabel } },
      },
    },
  });
  window.sweeplabCharts.compare = chart;
})();
