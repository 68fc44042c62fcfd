// Compare page: matched points of two or more sweeps (or runs) as grouped horizontal bars for
// one metric. Data comes from json_script (runs/results/compare.py chart_data): a bar's fill says how
// it compares with the baseline (barColors, as the table's colours); a point without a value
// is a marker dataset at the axis baseline (kind "marker"), never a zero or an empty bar,
// and its tooltip shows its status and reason. The verdict is a significance test's
// (better / worse / same within noise / insufficient evidence); a value with an interval
// (xMin / xMax) has an error bar, a suspect one is hatched, an invalid one is a marker
// (compare.py sends it so) with its reasons; the tooltip gives the CI, n, the verdict's
// reason and p. window.sweeplabCharts.compare is the Chart.
(function () {
  "use strict";
  const source = document.getElementById("compare-chart-data");
  const canvas = document.getElementById("compare-chart");
  if (!source || !canvas || !window.Chart) return;
  const data = JSON.parse(source.textContent);

  function at(list, i) { return list && list[i] !== undefined ? list[i] : null; }
  const withIntervals = data.datasets.some(function (d) {
    return d.kind !== "marker" && (d.xMin || []).some(function (v) { return typeof v === "number"; });
  });

  const datasets = data.datasets.map(function (d) {
    const copy = Object.assign({}, d);
    if (d.kind === "marker") {
      copy.showLine = false;
      copy.order = -1; // drawn above the bars
      return copy;
    }
    // Each row's bar as {x, y, xMin, xMax} (an error bar where the value has an interval).
    copy.data = d.data.map(function (value, i) {
      const item = { y: data.labels[i], x: value };
      if (typeof at(d.xMin, i) === "number" && typeof at(d.xMax, i) === "number") {
        item.xMin = d.xMin[i];
        item.xMax = d.xMax[i];
      }
      return item;
    });
    if (withIntervals) {
      copy.type = "barWithErrorBars";
      copy.errorBarColor = copy.errorBarWhiskerColor = "#3a424c";
      copy.errorBarWhiskerSize = 10;
    }
    // Each bar filled by its verdict, hatched when suspect; the legend keeps the group's colour.
    copy.backgroundColor = function (ctx) {
      if (ctx.type !== "data") return d.backgroundColor;
      const fill = d.barColors[ctx.dataIndex];
      return at(d.validity, ctx.dataIndex) === "suspect" ? window.sweeplab.hatch(fill) : fill;
    };
    return copy;
  });

  function tooltipLabel(ctx) {
    const ds = ctx.dataset;
    if (ds.kind === "marker") {
      return [ctx.raw.group + ": " + ds.label, ctx.raw.reason].filter(Boolean);
    }
    const i = ctx.dataIndex;
    const src = data.datasets[ctx.datasetIndex];
    const pct = ds.pct[i];
    const diff = pct === null || pct === undefined ? "" : " (" + (pct > 0 ? "+" : "") + pct.toFixed(1) + "%, " + ds.verdict[i] + ")";
    const parts = [window.sweeplab.fmt(ctx.raw.x, data.unit) + diff];
    if (typeof ctx.raw.xMin === "number") parts.push("95 % CI " + window.sweeplab.fmt(ctx.raw.xMin) + "–" + window.sweeplab.fmt(ctx.raw.xMax));
    const n = at(src.n, i);
    if (n !== null) parts.push("n = " + n);
    const lines = [ds.label + ": " + parts.join(", ")];
    const why = at(src.verdictReason, i);
    const p = at(src.pValue, i);
    if (why) lines.push(why + (p !== null && why.indexOf("p =") < 0 ? " (p = " + p.toPrecision(2) + ")" : ""));
    if (at(src.validity, i) === "suspect") lines.push("suspect: " + (window.sweeplab.reasonLines(at(src.reasons, i)).join("; ") || "no reason stored"));
    const scale = at(src.simulated, i);
    if (scale) lines.push("simulated (model time, ×" + scale + ")");
    return lines;
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
    type: withIntervals ? "barWithErrorBars" : "bar",
    data: { labels: data.labels, datasets: datasets },
    options: {
      indexAxis: "y",
      maintainAspectRatio: false,
      animation: false,
      interaction: { mode: "nearest", intersect: true },
      parsing: { xAxisKey: "x", yAxisKey: "y" },
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
