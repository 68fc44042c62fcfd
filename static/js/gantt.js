// Sweep detail: which GPUs each run held over time (runs/results/gantt.py), one row per
// GPU, one floating bar per lease; the runs told apart by colour, the GPUs a server ran on
// solid and those only held (an exclusive run holds the whole host) pale; each bar marked with
// its run's number, its configuration in the tooltip (a legend of 23 runs ate the plot). The
// live partial sends the section again: a new canvas is drawn again.
(function () {
  "use strict";
  if (!window.Chart) return;
  let drawn = null;

  // The run's number inside each bar wide enough for it.
  const runNumbers = {
    id: "ganttRunNumbers",
    afterDatasetsDraw: function (instance) {
      const ctx = instance.ctx;
      ctx.save();
      ctx.font = "10px sans-serif";
      ctx.fillStyle = "#fff";
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      instance.data.datasets.forEach(function (d, i) {
        instance.getDatasetMeta(i).data.forEach(function (bar, j) {
          const raw = d.data[j];
          const label = String(raw.bar.run);
          const length = Math.abs(bar.x - bar.base); // a horizontal bar runs from base to x
          if (length > ctx.measureText(label).width + 6) ctx.fillText(label, (bar.x + bar.base) / 2, bar.y);
        });
      });
      ctx.restore();
    },
  };

  function draw() {
  const canvas = document.getElementById("gantt-chart");
  if (!canvas || canvas === drawn) return;
  if (window.sweeplabCharts.gantt) window.sweeplabCharts.gantt.destroy();
  drawn = canvas;
  const gantt = JSON.parse(canvas.dataset.chart);
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
  window.sweeplabCharts.gantt = new Chart(canvas, {
    type: "bar",
    data: { labels: labels, datasets: datasets },
    plugins: [runNumbers],
    options: {
      indexAxis: "y",
      maintainAspectRatio: false,
      animation: false,
      parsing: { xAxisKey: "x", yAxisKey: "y" },
      plugins: {
        title: { display: true, text: "GPUs of " + gantt.host + " held by each run" },
        legend: { display: false },
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
  }

  draw();
  document.addEventListener("htmx:afterSettle", draw);
})();
