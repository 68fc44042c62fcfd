// Sweep detail: which GPUs each run held over time (runs/results/gantt.py), one row per
// GPU, one floating bar per lease; the runs told apart by colour, the GPUs a server ran on
// solid and those only held (an exclusive run holds the whole host) pale.
(function () {
  "use strict";
  const source = document.getElementById("gantt-data");
  const canvas = document.getElementById("gantt-chart");
  if (!source || !canvas || !window.Chart) return;
  const gantt = JSON.parse(source.textContent);
  const palette = ["#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477", "#66aa00",
                   "#b82e2e", "#316395", "#994499", "#22aa99", "#aaaa11", "#6633cc", "#e67300", "#8b0707"];
  const runs = [];
  gantt.rows.forEach(function (row) {
    row.bars.forEach(function (bar) { if (runs.indexOf(bar.run) < 0) runs.push(bar.run); });
  });
  const labels = gantt.rows.map(function (row) { return row.label; });
  // One dataset per run: its bars on whichever GPU rows it held.
  const datasets = runs.map(function (runId, i) {
    const colour = palette[i % palette.length];
    const bars = [];
    let config = "";
    gantt.rows.forEach(function (row) {
      row.bars.forEach(function (bar) {
        if (bar.run !== runId) return;
        config = bar.config;
        bars.push({ x: [bar.start, bar.end], y: row.label, bar: bar });
      });
    });
    return {
      label: "run " + runId + ": " + config,
      data: bars,
      backgroundColor: bars.map(function (b) { return b.bar.used ? colour : colour + "40"; }),
      borderColor: colour,
      borderWidth: 1,
      borderSkipped: false,
      grouped: false,
    };
  });
  window.sweeplabCharts = window.sweeplabCharts || {};
  window.sweeplabCharts.gantt = new Chart(canvas, {
    type: "bar",
    data: { labels: labels, datasets: datasets },
    options: {
      indexAxis: "y",
      maintainAspectRatio: false,
      animation: false,
      parsing: { xAxisKey: "x", yAxisKey: "y" },
      plugins: {
        title: { display: true, text: "GPUs of " + gantt.host + " held by each run" },
        legend: { position: "bottom", labels: { boxWidth: 12, font: { size: 11 } } },
        tooltip: {
          callbacks: {
            label: function (ctx) {
              const bar = ctx.raw.bar;
              const how = bar.used ? "ran on it" : "held it (idle)";
              return "run " + bar.run + " " + bar.config + ": " + how + ", " + bar.start.toFixed(1) + "–" +
                bar.end.toFixed(1) + " s" + (bar.held ? " (still held)" : "");
            },
          },
        },
      },
      scales: {
        x: { type: "linear", min: 0, title: { display: true, text: "seconds since the first lease (wall time)" } },
        y: { ticks: { autoSkip: false, font: { size: 11 } } },
      },
    },
  });
})();
