// Sweep detail: comparison charts (runs/results/charts.py sends Chart.js-ready datasets).
// Points without a measurement are marker datasets (kind "marker"), never zero bars; their
// tooltips show the point's reason. window.sweeplabCharts maps chart id -> Chart instance.
// The overview comes with the page; every other family is a <details> listing its charts,
// fetched when it is first opened: the whole family (?family=ID) when the server says
// at_once, else one <details> per chart, each fetched when opened (?chart=ID).
//
// The evidence of each value (charts.py's data items {y, yMin, yMax, validity, reasons, n,
// simulated}, plain numbers being values without evidence): a 95 % interval is an error bar
// (chartjs-chart-error-bars: barWithErrorBars / lineWithErrorBars); a suspect value is a
// hatched bar (a CanvasPattern of diagonal lines in the series colour) or a hollow point on
// a dashed line, its reasons in the tooltip; an invalid value is never a bar or a line
// point: it becomes a marker ("Invalid", at the axis baseline) with its reasons. With
// data-valid-only on the root (the page's ?valid_only=1) suspect and invalid values are
// left out. Tooltips read "34.10 tok/s, 95 % CI 33.20–35.00, n = 12".
//
// The drawing is shared (window.sweeplab.renderChart(chart, container, validOnly)) with the
// load curves and the Pareto view (load_charts.js, runs/results/load_charts.py), whose
// charts add: "annotations" (SLO limits and capacities: lines of chartjs-plugin-annotation,
// whose UMD build registers itself; without it, as on the run-selection page, none are drawn),
// scatter datasets (a suspect point hollow), a "front" dataset (a plain line through the
// Pareto front), and data items with "notes" (tooltip lines) and "reproduce" (command
// lines, in the tooltip and, once the point is clicked, in a box under the chart to copy).
(function () {
  "use strict";
  if (!window.Chart) return;
  const text = window.sweeplab.el;

  // The marker legend's entries that the drawn charts use (their markers' statuses, and
  // "Suspect" where an item is suspect), so that a page says only what it shows; none: no legend.
  function usedLegend(entries, charts, validOnly) {
    const used = {};
    charts.forEach(function (chart) {
      chart.datasets.forEach(function (d) {
        if (d.kind === "marker" && d.data.length) used[d.status] = true;
        else if (d.data) d.data.forEach(function (item) {
          if (item && typeof item === "object" && item.validity === "suspect") used.suspect = true;
          if (item && typeof item === "object" && item.validity === "invalid") used.invalid = true;
        });
      });
    });
    const out = entries.filter(function (e) { return used[e.status]; });
    if (!validOnly) {
      if (used.invalid && !out.some(function (e) { return e.status === "invalid"; })) out.push(INVALID_MARKER);
      if (used.suspect) out.push(SUSPECT_ENTRY);
    }
    return out;
  }

  function legendBox(entries) {
    const box = text("p", "chart-legend");
    box.appendChild(text("span", "muted", "Points without a value, drawn in the “no value” lane under each plot (hover for what each means): "));
    entries.forEach(function (entry) {
      const item = text("span", "chart-legend-item");
      item.dataset.status = entry.status;
      item.title = entry.meaning;
      const swatch = text("span", "chart-swatch");
      swatch.style.background = entry.color;
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(entry.label)); // its meaning on hover
      box.appendChild(item);
    });
    return box;
  }

  function unitOf(label) {
    const m = /\(([^)]*)\)\s*$/.exec(label || "");
    return m ? m[1] : "";
  }

  const INVALID_MARKER = { status: "invalid", label: "Invalid", color: "#6b1f7a", pointStyle: "star",
    meaning: "invalid measurement (its reasons in the tooltip): never a bar" };
  const SUSPECT_ENTRY = { status: "suspect", label: "Suspect", color: "#b26a00",
    meaning: "hatched bar or hollow point: measured, but a rule objected (reasons in the tooltip)" };

  const hatch = window.sweeplab.hatch;
  const reasonLines = window.sweeplab.reasonLines;

  function hasInterval(item) {
    return item && typeof item === "object" && typeof item.yMin === "number" && typeof item.yMax === "number";
  }

  // Value datasets with their items as objects ({x, y, ...evidence}); invalid items (and,
  // valid-only, suspect ones) taken out as null values; the invalid ones gathered as markers.
  // Markers are drawn in a lane of their own under the plot ("no value"), a row per
  // configuration, never on the value axis where they would read as values.
  function prepare(chart, validOnly) {
    const category = chart.x.type === "category";
    const invalid = [];
    const datasets = [];
    chart.datasets.forEach(function (d) {
      if (d.kind === "marker") {
        if (validOnly && d.status === "invalid") return;
        datasets.push(Object.assign({}, d, { showLine: false, order: -1 })); // above the bars and lines
        return;
      }
      if (d.kind === "front") { // a plain line behind the points it joins
        datasets.push(Object.assign({}, d, { showLine: true, fill: false, borderWidth: 2, pointRadius: 0,
          pointHitRadius: 0, order: 1 }));
        return;
      }
      const data = d.data.map(function (item, i) {
        const obj = item !== null && typeof item === "object" ? Object.assign({}, item) : { y: item };
        if (category && obj.x === undefined) obj.x = chart.labels[i];
        if (obj.y === null || obj.y === undefined) return obj;
        if (obj.validity === "invalid") {
          if (!validOnly) {
            invalid.push({ x: obj.x, y: 0, config: obj.config || d.label, status: "invalid",
              reason: reasonLines(obj.reasons).join("; ") || INVALID_MARKER.meaning });
          }
          return { x: obj.x, y: null, hidden: obj };
        }
        if (validOnly && obj.validity === "suspect") return { x: obj.x, y: null, hidden: obj };
        return obj;
      });
      datasets.push(Object.assign({}, d, { data: data }));
    });
    if (invalid.length) {
      datasets.push({ kind: "marker", type: "scatter", status: "invalid", label: INVALID_MARKER.label, data: invalid,
        pointStyle: INVALID_MARKER.pointStyle, pointRadius: 8, pointHoverRadius: 10, borderWidth: 2,
        backgroundColor: INVALID_MARKER.color, borderColor: INVALID_MARKER.color, showLine: false, order: -1 });
    }
    if (category && chart.type === "bar") return inSlots(chart, datasets);
    // A lane row per configuration that has a marker, in the order of the value datasets.
    const marked = new Set();
    datasets.forEach(function (d) {
      if (d.kind === "marker") d.data.forEach(function (item) { marked.add(item.series || item.config); });
    });
    const rows = [];
    datasets.forEach(function (d) {
      if (d.kind === "value" && marked.has(d.label) && rows.indexOf(d.label) < 0) rows.push(d.label);
    });
    marked.forEach(function (config) { if (rows.indexOf(config) < 0) rows.push(config); });
    const rowOf = {};
    rows.forEach(function (config, i) { rowOf[config] = i; });
    datasets.forEach(function (d) {
      if (d.kind !== "marker") { d.yAxisID = "y"; return; }
      d.yAxisID = "lane";
      d.pointRadius = 4;
      d.pointHoverRadius = 6;
      d.data = d.data.map(function (item) { return Object.assign({}, item, { y: rowOf[item.series || item.config] }); });
    });
    datasets.laneRows = rows.length;
    return datasets;
  }

  // The lane of a bar chart: a row per status, each marker under the slot its
  // configuration's bar takes in its category (Chart.js's grouped bars: categoryPercentage
  // 0.8, a slot per dataset; slotPlugin moves it there); so 25 configurations' skipped
  // points take one row, each where its missing bar would be. (A series hidden from the
  // legend frees its slot and the bars close up; the markers keep their places.)
  function inSlots(chart, datasets) {
    const values = datasets.filter(function (d) { return d.kind === "value"; }).map(function (d) { return d.label; });
    const statuses = [];
    datasets.forEach(function (d) {
      if (d.kind !== "marker") { d.yAxisID = "y"; return; }
      if (statuses.indexOf(d.status) < 0) statuses.push(d.status);
      d.yAxisID = "lane";
      d.pointRadius = 4;
      d.pointHoverRadius = 6;
      d.slots = values.length;
      const row = statuses.indexOf(d.status);
      d.data = d.data.map(function (item) {
        return Object.assign({}, item, { y: row, slot: values.indexOf(item.series || item.config) });
      });
    });
    datasets.laneRows = statuses.length;
    return datasets;
  }

  // Moves each slotted marker (inSlots) from its category's middle to its configuration's
  // bar slot, after every layout, so that hovering finds it where it is drawn.
  const slotPlugin = {
    id: "sweeplabSlots",
    afterDatasetUpdate: function (instance, args) {
      const d = instance.data.datasets[args.index];
      if (!d || d.kind !== "marker" || !d.slots) return;
      const x = instance.scales.x;
      const width = x.getPixelForValue(1) - x.getPixelForValue(0);
      args.meta.data.forEach(function (element, i) {
        const item = d.data[i];
        if (!item || item.slot < 0 || !isFinite(width)) return;
        element.x += width * (-0.4 + 0.8 * (item.slot + 0.5) / d.slots);
      });
    },
  };

  // How many lane rows a chart needs (the panels of a group share the largest).
  function laneRowsOf(chart, validOnly) { return prepare(chart, validOnly).laneRows; }

  // Whether a chart has anything to draw: a value or a marker.
  function drawable(chart) {
    return chart.datasets.some(function (d) {
      return d.kind === "marker" ? d.data.length > 0 : d.data.some(function (item) {
        const y = item !== null && typeof item === "object" ? item.y : item;
        return y !== null && y !== undefined;
      });
    });
  }

  // The lane under the plot: a pale band saying "no value", the markers in it.
  const lanePlugin = {
    id: "sweeplabLane",
    beforeDatasetsDraw: function (instance) {
      const lane = instance.scales.lane;
      if (!lane) return;
      const ctx = instance.ctx;
      const area = instance.chartArea;
      ctx.save();
      ctx.fillStyle = "#f1f3f5";
      ctx.fillRect(area.left, lane.top, area.right - area.left, lane.bottom - lane.top);
      ctx.fillStyle = "#57606a";
      ctx.font = "10px sans-serif";
      ctx.textBaseline = "top";
      ctx.fillText("no value (markers)", area.left + 4, lane.top + 2);
      ctx.restore();
    },
  };

  function isSuspect(ctx) {
    return ctx.type === "data" && ctx.raw && ctx.raw.validity === "suspect";
  }

  // Chart.js options of a value dataset: error bars where the chart has intervals, suspect
  // values hatched (bars) or hollow on a dashed line (lines).
  function style(d, withIntervals) {
    const colour = d.backgroundColor;
    if (d.kind === "front") return d;
    if (d.type === "scatter") { // a suspect point hollow, in the dataset's own point style
      const out = Object.assign({}, d, { showLine: false, pointRadius: 5, pointHoverRadius: 7, borderWidth: 1.5 });
      out.pointBackgroundColor = function (ctx) { return isSuspect(ctx) ? "#fff" : colour; };
      out.plainColor = colour;
      return out;
    }
    const line = d.type === "line";
    const out = line ? Object.assign({}, LINE_STYLE, d) : Object.assign({}, d);
    if (withIntervals) {
      out.type = line ? "lineWithErrorBars" : "barWithErrorBars";
      out.errorBarColor = "#3a424c";
      out.errorBarWhiskerColor = "#3a424c";
      out.errorBarLineWidth = 1.2;
      out.errorBarWhiskerSize = line ? 10 : 14;
    }
    if (line) {
      out.pointBackgroundColor = function (ctx) { return isSuspect(ctx) ? "#fff" : colour; };
      out.pointRadius = function (ctx) { return isSuspect(ctx) ? 5 : LINE_STYLE.pointRadius; };
      out.pointStyle = function (ctx) { return isSuspect(ctx) ? "rectRot" : "circle"; };
      out.segment = {
        borderDash: function (ctx) {
          const a = ctx.p0 && ctx.p0.$context && ctx.p0.$context.raw;
          const b = ctx.p1 && ctx.p1.$context && ctx.p1.$context.raw;
          return (a && a.validity === "suspect") || (b && b.validity === "suspect") ? [5, 4] : undefined;
        },
      };
    } else {
      out.backgroundColor = function (ctx) { return isSuspect(ctx) ? hatch(colour) : colour; };
      out.borderWidth = function (ctx) { return isSuspect(ctx) ? 1.5 : 0; };
    }
    if (d.sendBased) { // the same latency from the actual send: thin, dashed, triangles
      out.borderDash = [3, 3];
      out.borderWidth = 1.5;
      out.pointStyle = "triangle";
    }
    out.plainColor = colour; // the legend's swatch
    return out;
  }

  // "34.10 tok/s, 95 % CI 33.20–35.00, n = 12" and the evidence lines of a value.
  function describe(who, raw, unit) {
    const parts = [window.sweeplab.fmt(raw.y, unit)];
    if (hasInterval(raw)) parts.push("95 % CI " + window.sweeplab.fmt(raw.yMin) + "–" + window.sweeplab.fmt(raw.yMax));
    if (raw.n !== null && raw.n !== undefined) parts.push("n = " + raw.n);
    const lines = [who + ": " + parts.join(", ")];
    if (raw.validity === "suspect") {
      lines.push("suspect: " + (reasonLines(raw.reasons).join("; ") || "no reason stored"));
    }
    if (raw.simulated) lines.push("simulated (model time, ×" + raw.simulated + ")");
    (raw.notes || []).forEach(function (note) { lines.push(note); });
    if (raw.reproduce) {
      lines.push("reproduce (click the point to copy):");
      commandLines(raw.reproduce.loadtest).concat(commandLines(raw.reproduce.vllm)).forEach(function (l) {
        lines.push(l);
      });
    }
    if (raw.reproduceNote) lines.push(raw.reproduceNote);
    return lines;
  }

  // A command line cut before its options into lines of at most COMMAND_WIDTH characters,
  // so that a tooltip stays on the chart.
  const COMMAND_WIDTH = 96;
  function commandLines(line) {
    const lines = [];
    line.split(/ (?=--)/).forEach(function (part) {
      const last = lines.length - 1;
      if (last >= 0 && lines[last].length + 1 + part.length <= COMMAND_WIDTH) lines[last] += " " + part;
      else lines.push((last >= 0 ? "    " : "  ") + part);
    });
    return lines;
  }

  // SLO limits as dashed horizontal lines labelled at their start; capacities as dotted
  // vertical lines, their labels ("capacity <config>" over the load) staggered along them so
  // that neighbours do not overlap.
  const VERTICAL_LABEL_AT = ["start", "end", "center"];
  function annotationsOf(chart) {
    const out = {};
    let vertical = 0;
    (chart.annotations || []).forEach(function (a, i) {
      const along = a.axis === "x";
      const line = {
        type: "line", borderColor: a.color, borderWidth: 2, borderDash: a.kind === "slo" ? [6, 4] : [2, 3],
        label: { display: true, content: along ? a.label.split(": ") : a.label, color: a.color,
          backgroundColor: "rgba(255, 255, 255, 0.85)", font: { size: along ? 10 : 11 },
          position: along ? VERTICAL_LABEL_AT[vertical++ % VERTICAL_LABEL_AT.length] : "start" },
      };
      if (a.axis === "y") { line.yMin = a.value; line.yMax = a.value; } else { line.xMin = a.value; line.xMax = a.value; }
      out[a.kind + "-" + i] = line;
    });
    return out;
  }

  // The box under a chart that shows the clicked point's command lines, to copy.
  function reproduceBox(container) {
    const box = text("div", "reproduce");
    box.hidden = true;
    container.appendChild(box);
    return function (raw) {
      box.textContent = "";
      box.appendChild(text("p", "", raw.config + ", " + raw.load));
      [raw.reproduce && raw.reproduce.loadtest, raw.reproduce && raw.reproduce.vllm].forEach(function (line) {
        if (line) box.appendChild(text("pre", "", line));
      });
      if (raw.reproduceNote) box.appendChild(text("p", "muted", raw.reproduceNote));
      box.hidden = false;
    };
  }

  // "request rate: 4.00 req/s" over a numeric x axis; the category's name otherwise.
  function tooltipTitle(chart) {
    const name = chart.x.label.replace(/\s*\([^)]*\)\s*$/, "");
    const unit = unitOf(chart.x.label);
    return function (items) {
      return items.length ? name + ": " + window.sweeplab.fmt(items[0].parsed.x, unit) : "";
    };
  }

  function tooltipCallbacks(chart) {
    const callbacks = { label: tooltipLabel(chart) };
    if (chart.x.type !== "category") callbacks.title = tooltipTitle(chart);
    return callbacks;
  }

  function tooltipLabel(chart) {
    const unit = unitOf(chart.y.label);
    return function (ctx) {
      const ds = ctx.dataset;
      const raw = ctx.raw;
      if (ds.kind === "marker") {
        return [ds.label + ": " + raw.config, raw.reason || ""].filter(Boolean);
      }
      const obj = raw && typeof raw === "object" ? raw : { y: raw };
      return describe(obj.config || ds.label, obj, unit);
    };
  }

  const LINE_STYLE = { borderWidth: 2, pointRadius: 3, fill: false, spanGaps: false };
  const PLOT_PX = 228; // the value axis's share of a chart's height, in px (at least 220 drawn)
  const LANE_ROW_PX = 10;
  const FRAME_PX = { category: 94, linear: 80 }; // title and x axis: two-line ticks, or numbers

  // What a legend entry stands for: a configuration's method and parameter values (the
  // same entry in every TP panel), else the series' own label.
  function seriesKey(d, configs) {
    const identity = configs[d.label];
    return identity && identity.legend ? identity.legend.group + "\u0000" + identity.legend.item : d.label;
  }

  // The legend of a chart, or of a row of charts (a group's TP panels, the Pareto view's
  // workloads), in HTML under the plots (so that it never eats a plot): the configurations
  // grouped by method, a swatch per parameter value ("ddtree topk_cap=8 · budget ■8 ■12
  // ■15"), each once whatever the number of charts; other series (no configuration) a
  // swatch each. A click on an item hides or shows that series in every chart of the row.
  function seriesLegend(datasets, configs, onToggle, shared) {
    const box = text("div", "series-legend");
    box.dataset.field = "series-legend";
    const groups = [];
    const byGroup = {};
    const seen = {};
    datasets.forEach(function (d) {
      if (d.kind !== "value" && d.kind !== undefined) return;
      const series = seriesKey(d, configs);
      if (seen[series]) return;
      seen[series] = true;
      const identity = configs[d.label];
      const key = identity && identity.legend ? identity.legend.group : "";
      if (!(key in byGroup)) { byGroup[key] = []; groups.push(key); }
      byGroup[key].push({ dataset: d, series: series, item: identity && identity.legend ? identity.legend.item : d.label });
    });
    groups.forEach(function (key) {
      const row = text("span", "series-legend-group");
      if (key) row.appendChild(text("span", "series-legend-head", key));
      byGroup[key].forEach(function (entry) {
        const item = text("button", "series-legend-item");
        item.type = "button";
        // Its name in full; under a row of TP panels it stands for every TP.
        const name = shared && configs[entry.dataset.label] ? entry.dataset.label.replace(/ TP\d+(?= |$)/, "") : entry.dataset.label;
        item.title = name + " (click to hide or show)";
        item.dataset.series = entry.dataset.label;
        const swatch = text("span", "chart-swatch");
        swatch.style.background = entry.dataset.plainColor || entry.dataset.borderColor;
        item.appendChild(swatch);
        if (entry.item) item.appendChild(document.createTextNode(entry.item));
        item.addEventListener("click", function () {
          const hidden = item.classList.toggle("off");
          item.setAttribute("aria-pressed", hidden ? "true" : "false");
          onToggle(entry.series, hidden);
        });
        row.appendChild(item);
      });
      box.appendChild(row);
    });
    return box;
  }

  // Hides or shows one legend entry's series in each chart of ``instances``.
  function toggleSeries(instances, configs) {
    return function (series, hidden) {
      instances.forEach(function (other) {
        other.data.datasets.forEach(function (d, i) {
          if (seriesKey(d, configs) === series) other.setDatasetVisibility(i, !hidden);
        });
        other.update("none");
      });
    };
  }

  // "long-context 3000" as two lines ("3000" over "long-context") on the first category of
  // its workload, the prompt length alone after it: seven categories fit a third of a page.
  function tickLines(labels) {
    let previous = null;
    return labels.map(function (label) {
      const m = /^(.*?) (\d+)( c\d+)?$/.exec(label);
      if (!m) { previous = label; return label; }
      const lines = [m[2] + (m[3] || "")];
      if (m[1] !== previous) lines.push(m[1]);
      previous = m[1];
      return lines;
    });
  }

  // options: configs (config label -> identity, for the grouped legend), laneRows (the
  // lane's height in rows, shared by a group's panels), group (the charts of its row, which
  // it joins), sharedLegend (the row has one legend under it: none of its own).
  function render(chart, container, validOnly, options) {
    options = options || {};
    const reproducible = chart.datasets.some(function (d) {
      return d.data.some(function (item) { return item && (item.reproduce || item.reproduceNote); });
    });
    const holder = reproducible ? text("div", "chart-with-reproduce") : container;
    if (reproducible) container.appendChild(holder);
    const panel = text("div", "chart-box comparison-chart");
    panel.dataset.chart = chart.id;
    if (!drawable(chart)) {
      panel.classList.add("chart-empty");
      panel.appendChild(text("p", "chart-empty-title", chart.panel || chart.title));
      panel.appendChild(text("p", "muted", "Nothing to draw yet: no point of this chart has a value or a failure."));
      holder.appendChild(panel);
      return null;
    }
    const prepared = prepare(chart, validOnly);
    const laneRows = Math.max(prepared.laneRows, options.laneRows || 0);
    const plotBox = text("div", "chart-canvas");
    const frame = chart.x.type === "category" ? FRAME_PX.category : FRAME_PX.linear;
    plotBox.style.height = (frame + PLOT_PX + (laneRows ? laneRows * LANE_ROW_PX + 12 : 0)) + "px";
    const canvas = document.createElement("canvas");
    canvas.setAttribute("aria-label", chart.title);
    canvas.setAttribute("role", "img");
    plotBox.appendChild(canvas);
    panel.appendChild(plotBox);
    holder.appendChild(panel);
    const pin = reproducible ? reproduceBox(holder) : null;
    const category = chart.x.type === "category";
    const withIntervals = prepared.some(function (d) { return d.kind !== "marker" && d.data.some(hasInterval); });
    const datasets = prepared.map(function (d) { return d.kind === "marker" ? d : style(d, withIntervals); });
    let type = chart.type;
    if (withIntervals) type = chart.type === "line" ? "lineWithErrorBars" : "barWithErrorBars";
    const ticks = category ? tickLines(chart.labels) : null;
    const scales = {
      x: {
        type: chart.x.type,
        title: { display: true, text: chart.x.label },
        ticks: category ? { autoSkip: false, maxRotation: 0, font: { size: 11 },
          callback: function (value, index) { return ticks[index]; } } : {},
      },
      y: {
        type: chart.y.type || "linear",
        beginAtZero: chart.y.beginAtZero !== false,
        title: { display: true, text: chart.y.label },
      },
    };
    if (laneRows) { // the lane under the value axis: a stacked scale of its own (Chart.js stacks the first one lowest)
      const valueAxis = Object.assign({}, scales.y, { stack: "plot", stackWeight: PLOT_PX });
      delete scales.y;
      scales.lane = { type: "linear", position: "left", stack: "plot", stackWeight: laneRows * LANE_ROW_PX + 12,
        min: -0.8, max: laneRows - 0.2, reverse: true, grid: { display: false },
        ticks: { display: false }, title: { display: false } };
      scales.y = valueAxis;
    }
    if (!category && chart.x.type === "linear") scales.x.ticks = { precision: 0 };
    let legendBox = null;
    // The legend sits under the plot and is never wider than it: aligned to the plot area
    // at every layout (a resize included).
    const alignLegend = {
      id: "sweeplabAlignLegend",
      afterLayout: function (chartInstance) {
        if (!legendBox) return;
        const area = chartInstance.chartArea;
        legendBox.style.marginLeft = Math.round(area.left) + "px";
        legendBox.style.maxWidth = Math.floor(area.right - area.left) + "px";
      },
    };
    const instance = new Chart(canvas, {
      type: type,
      data: category ? { labels: chart.labels, datasets: datasets } : { datasets: datasets },
      plugins: [lanePlugin, slotPlugin, alignLegend],
      options: {
        maintainAspectRatio: false,
        animation: false,
        parsing: { xAxisKey: "x", yAxisKey: "y" },
        interaction: { mode: "nearest", intersect: true },
        plugins: {
          title: { display: true, text: chart.panel || chart.title },
          legend: { display: false },
          tooltip: {
            filter: function (item) { return item.dataset.kind !== "front"; },
            callbacks: tooltipCallbacks(chart),
          },
          annotation: { annotations: annotationsOf(chart) },
        },
        scales: scales,
        onClick: pin ? function (event, elements, chartInstance) {
          const hit = elements.map(function (e) { return chartInstance.data.datasets[e.datasetIndex].data[e.index]; })
            .find(function (raw) { return raw && (raw.reproduce || raw.reproduceNote); });
          if (hit) pin(hit);
        } : undefined,
      },
    });
    window.sweeplabCharts[chart.id] = instance;
    if (options.group) options.group.push(instance);
    if (options.sharedLegend) return instance;
    legendBox = seriesLegend(datasets, options.configs || {}, toggleSeries([instance], options.configs || {}));
    panel.appendChild(legendBox);
    alignLegend.afterLayout(instance);
    return instance;
  }

  // Charts in rows: the charts of one group (a chart's TP panels, or the accept-length
  // charts of each workload) side by side under the group's title, with one lane height.
  function renderAll(charts, container, validOnly, configs) {
    let i = 0;
    while (i < charts.length) {
      const group = charts[i].group || ""; // charts without a group share a row too
      let j = i;
      while (j < charts.length && (charts[j].group || "") === group) j++;
      const members = charts.slice(i, j);
      const section = text("div", "chart-group");
      section.dataset.group = group || charts[i].id;
      if (members.some(function (c) { return c.panel; })) {
        section.appendChild(text("h3", "chart-group-title", members[0].groupTitle));
      }
      const row = text("div", "chart-row");
      section.appendChild(row);
      container.appendChild(section);
      const laneRows = Math.max.apply(null, members.map(function (c) { return laneRowsOf(c, validOnly); }));
      const instances = [];
      const shared = members.length > 1; // one legend for the row, each series once
      members.forEach(function (chart) {
        render(chart, row, validOnly, { configs: configs, laneRows: laneRows, group: instances, sharedLegend: shared });
      });
      if (shared && instances.length) {
        const datasets = [].concat.apply([], instances.map(function (c) { return c.data.datasets; }));
        section.appendChild(seriesLegend(datasets, configs || {}, toggleSeries(instances, configs || {}), true));
      }
      i = j;
    }
  }

  function configsOf(data) {
    const out = {};
    (data.configs || []).forEach(function (c) { out[c.config] = c; });
    return out;
  }

  // Drops the Chart.js instances drawn inside an element (before it is drawn again).
  function destroyIn(element) {
    Object.keys(window.sweeplabCharts).forEach(function (id) {
      const instance = window.sweeplabCharts[id];
      if (instance && instance.canvas && element.contains(instance.canvas)) {
        instance.destroy();
        delete window.sweeplabCharts[id];
      }
    });
  }

  window.sweeplab.renderChart = render;
  window.sweeplab.renderCharts = renderAll;
  window.sweeplab.configsOf = configsOf;
  window.sweeplab.destroyChartsIn = destroyIn;
  window.sweeplab.chartLegend = legendBox;
  window.sweeplab.usedLegend = usedLegend;
  window.sweeplab.INVALID_MARKER = INVALID_MARKER;
  window.sweeplab.SUSPECT_ENTRY = SUSPECT_ENTRY;

  const root = document.getElementById("comparison-charts");
  if (!root || !root.dataset.url) return;
  const validOnly = root.dataset.validOnly === "true";

  function get(param, value) {
    const url = new URL(root.dataset.url, window.location.href);
    if (param) url.searchParams.set(param, value);
    return window.sweeplab.getJSON(url);
  }

  // The configurations of the last answer (config label -> identity), for the legends.
  let configs = {};

  // The charts of an answer that have nothing to draw, each with why (charts.py's "omitted").
  function omittedNote(omitted) {
    const note = text("p", "muted chart-omitted", "Not drawn: " + omitted.map(function (c) {
      return c.title + " (" + c.reason + ")";
    }).join("; ") + ".");
    note.dataset.field = "charts-omitted";
    return note;
  }

  // Fetch (param=value) into container when details is first opened; details gets
  // data-ready=true once its charts are drawn. Returns what draws it again (live), which
  // does nothing while it has not been opened.
  function onFirstOpen(details, container, param, value) {
    function load(again) {
      if (!again) container.appendChild(text("p", "muted", "Loading charts…"));
      return get(param, value)
        .then(function (data) {
          destroyIn(container);
          container.textContent = "";
          renderAll(data.charts, container, validOnly, configsOf(data));
          if (data.omitted && data.omitted.length) container.appendChild(omittedNote(data.omitted));
          details.dataset.ready = "true";
        })
        .catch(function (error) {
          container.textContent = "";
          container.appendChild(text("p", "error", "Charts could not be loaded: " + error.message));
          delete details.dataset.loading; // closing and opening again retries
        });
    }
    details.addEventListener("toggle", function () {
      if (!details.open || details.dataset.loading) return;
      details.dataset.loading = "true";
      load(false);
    });
    return function () { return details.dataset.ready ? load(true) : Promise.resolve(); };
  }

  let refreshOpen = []; // what draws each opened family (or chart) again

  function familyBox(family) {
    const details = text("details", "chart-family");
    details.dataset.family = family.id;
    const count = family.charts.length;
    details.appendChild(text("summary", "", family.title + " (" + count + (count === 1 ? " chart)" : " charts)")));
    const container = text("div", "chart-family-charts");
    details.appendChild(container);
    if (family.at_once) {
      refreshOpen.push(onFirstOpen(details, container, "family", family.id));
      return details;
    }
    // Too many to draw at once: a <details> per chart (a group of TP panels), fetched when opened.
    family.charts.forEach(function (entry) {
      const one = text("details", "chart-one");
      one.dataset.chart = entry.id;
      one.appendChild(text("summary", "", entry.title));
      const box = text("div", "chart-family-charts");
      one.appendChild(box);
      refreshOpen.push(onFirstOpen(one, box, "chart", entry.id));
      container.appendChild(one);
    });
    details.addEventListener("toggle", function () { if (details.open) details.dataset.ready = "true"; });
    return details;
  }

  const overview = text("div", "chart-overview");
  const familiesBox = text("div", "chart-families");
  let familyKey = null; // the families listed: drawn again only when they change

  // The overview drawn (again), the families listed (again when their list changed).
  function draw(data) {
    configs = configsOf(data);
    destroyIn(overview);
    overview.textContent = "";
    if (!data.charts.length && !data.families.length && !(data.omitted || []).length) {
      overview.appendChild(text("p", "muted", "No measured points yet."));
    } else {
      const legend = usedLegend(data.legend, data.charts, validOnly);
      if (legend.length) overview.appendChild(legendBox(legend));
      renderAll(data.charts, overview, validOnly, configs);
    }
    if (data.omitted && data.omitted.length) overview.appendChild(omittedNote(data.omitted));
    const key = JSON.stringify(data.families);
    if (key !== familyKey) {
      familyKey = key;
      destroyIn(familiesBox);
      familiesBox.textContent = "";
      refreshOpen = [];
      data.families.forEach(function (family) { familiesBox.appendChild(familyBox(family)); });
    }
  }

  let inFlight = null;
  let again = false;
  // Draws the charts again from a fresh answer: the page's live poll says when its points
  // changed ("points-changed"); one fetch at a time, the last change not lost.
  function refresh() {
    if (inFlight) { again = true; return; }
    inFlight = get()
      .then(function (data) {
        draw(data);
        return Promise.all(refreshOpen.map(function (redraw) { return redraw(); }));
      })
      .catch(function (error) {
        overview.textContent = "";
        overview.appendChild(text("p", "error", "Charts could not be loaded: " + error.message));
      })
      .then(function () {
        inFlight = null;
        root.dataset.version = String(Number(root.dataset.version || 0) + 1);
        if (again) { again = false; refresh(); }
      });
  }

  get()
    .then(function (data) {
      root.textContent = "";
      root.appendChild(overview);
      root.appendChild(familiesBox);
      draw(data);
      root.dataset.ready = "true";
      document.body.addEventListener("points-changed", refresh);
    })
    .catch(function (error) {
      root.textContent = "";
      root.appendChild(text("p", "error", "Charts could not be loaded: " + error.message));
    });
})();
