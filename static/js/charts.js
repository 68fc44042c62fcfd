// Sweep detail: comparison charts (runs/results/charts.py sends Chart.js-ready datasets).
// Points without a measurement are marker datasets (kind "marker"), never zero bars; their
// tooltips show the point's reason. window.sweeplabCharts maps chart id -> Chart instance.
// The overview comes with the page; every other family is a <details> listing its charts,
// fetched when it is first opened: the whole family (?family=ID) when the server says
// at_once, else one <details> per chart, each fetched when opened (?chart=ID).
(function () {
  "use strict";
  const root = document.getElementById("comparison-charts");
  if (!root || !root.dataset.url || !window.Chart) return;
  const text = window.sweeplab.el;

  function legendBox(entries) {
    const box = text("p", "chart-legend");
    box.appendChild(text("span", "muted", "Markers: "));
    entries.forEach(function (entry) {
      const item = text("span", "chart-legend-item");
      item.dataset.status = entry.status;
      item.title = entry.meaning;
      const swatch = text("span", "chart-swatch");
      swatch.style.background = entry.color;
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(entry.label + ": " + entry.meaning));
      box.appendChild(item);
    });
    return box;
  }

  function unitOf(label) {
    const m = /\(([^)]*)\)\s*$/.exec(label || "");
    return m ? m[1] : "";
  }

  function tooltipLabel(chart) {
    const unit = unitOf(chart.y.label);
    return function (ctx) {
      const ds = ctx.dataset;
      const raw = ctx.raw;
      if (ds.kind === "marker") {
        return [ds.label + ": " + raw.config, raw.reason || ""].filter(Boolean);
      }
      const y = raw && typeof raw === "object" ? raw.y : raw;
      const who = raw && typeof raw === "object" && raw.config ? raw.config : ds.label;
      return who + ": " + window.sweeplab.fmt(y, unit);
    };
  }

  const LINE_STYLE = { borderWidth: 2, pointRadius: 3, fill: false, spanGaps: false };

  function render(chart, container) {
    const box = text("div", "chart-box comparison-chart");
    box.dataset.chart = chart.id;
    const canvas = document.createElement("canvas");
    canvas.setAttribute("aria-label", chart.title);
    canvas.setAttribute("role", "img");
    box.appendChild(canvas);
    container.appendChild(box);
    const category = chart.x.type === "category";
    const datasets = chart.datasets.map(function (d) {
      if (d.kind === "marker") {
        // drawn above the bars and lines
        return Object.assign({}, d, { showLine: false, order: -1 });
      }
      return d.type === "line" ? Object.assign({}, LINE_STYLE, d) : Object.assign({}, d);
    });
    const scales = {
      x: {
        type: chart.x.type,
        title: { display: true, text: chart.x.label },
        ticks: category ? { autoSkip: false, maxRotation: 45 } : {},
      },
      y: {
        type: chart.y.type || "linear",
        beginAtZero: chart.y.beginAtZero !== false,
        title: { display: true, text: chart.y.label },
      },
    };
    if (!category && chart.x.type === "linear") scales.x.ticks = { precision: 0 };
    window.sweeplabCharts[chart.id] = new Chart(canvas, {
      type: chart.type,
      data: category ? { labels: chart.labels, datasets: datasets } : { datasets: datasets },
      options: {
        maintainAspectRatio: false,
        animation: false,
        parsing: category ? undefined : { xAxisKey: "x", yAxisKey: "y" },
        interaction: { mode: "nearest", intersect: true },
        plugins: {
          title: { display: true, text: chart.title },
          legend: { position: "bottom", labels: { usePointStyle: true, boxWidth: 10 } },
          tooltip: { callbacks: { label: tooltipLabel(chart) } },
        },
        scales: scales,
      },
    });
  }

  function get(param, value) {
    const url = new URL(root.dataset.url, window.location.href);
    if (param) url.searchParams.set(param, value);
    return window.sweeplab.getJSON(url);
  }

  // Fetch (param=value) into container when details is first opened; details gets
  // data-ready=true once its charts are drawn.
  function onFirstOpen(details, container, param, value) {
    details.addEventListener("toggle", function () {
      if (!details.open || details.dataset.loading) return;
      details.dataset.loading = "true";
      container.appendChild(text("p", "muted", "Loading charts…"));
      get(param, value)
        .then(function (data) {
          container.textContent = "";
          data.charts.forEach(function (chart) { render(chart, container); });
          details.dataset.ready = "true";
        })
        .catch(function (error) {
          container.textContent = "";
          container.appendChild(text("p", "error", "Charts could not be loaded: " + error.message));
          delete details.dataset.loading; // closing and opening again retries
        });
    });
  }

  function familyBox(family) {
    const details = text("details", "chart-family");
    details.dataset.family = family.id;
    const count = family.charts.length;
    details.appendChild(text("summary", "", family.title + " (" + count + (count === 1 ? " chart)" : " charts)")));
    const container = text("div", "chart-family-charts");
    details.appendChild(container);
    if (family.at_once) {
      onFirstOpen(details, container, "family", family.id);
      return details;
    }
    // Too many to draw at once: a <details> per chart, fetched when opened.
    family.charts.forEach(function (entry) {
      const one = text("details", "chart-one");
      one.dataset.chart = entry.id;
      one.appendChild(text("summary", "", entry.title));
      const box = text("div", "chart-family-charts");
      one.appendChild(box);
      onFirstOpen(one, box, "chart", entry.id);
      container.appendChild(one);
    });
    details.addEventListener("toggle", function () { if (details.open) details.dataset.ready = "true"; });
    return details;
  }

  get()
    .then(function (data) {
      root.textContent = "";
      if (!data.charts.length && !data.families.length) {
        root.appendChild(text("p", "muted", "No measured points yet."));
        return;
      }
      root.appendChild(legendBox(data.legend));
      data.charts.forEach(function (chart) { render(chart, root); });
      data.families.forEach(function (family) { root.appendChild(familyBox(family)); });
      root.dataset.ready = "true";
    })
    .catch(function (error) {
      root.textContent = "";
      root.appendChild(text("p", "error", "Charts could not be loaded: " + error.message));
    });
})();
