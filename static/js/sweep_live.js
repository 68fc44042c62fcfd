// Sweep page, the run drawer. The progress, the run rows and the points table are partials
// that htmx swaps in (templates/runs/partials/); a click (or Enter / Space) on a run row
// loads that run's drawer partial, which asks for itself again every 2 s while the sweep
// runs. After each swap this draws its GPU memory and power chart, writes its event times in
// the browser's time zone and scrolls its log to the end.
(function () {
  "use strict";
  const drawer = document.getElementById("run-drawer");
  if (!drawer || !window.htmx) return;
  const body = document.getElementById("run-drawer-body");
  const state = drawer.querySelector('[data-field="drawer-state"]');
  const GPU_COLOURS = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7e8c", "#57606a"];
  let openRunId = null;
  let telemetryChart = null;

  // The live swaps replace the rows: the open run's row is marked again after each.
  function markOpenRow() {
    document.querySelectorAll("tbody.run").forEach(function (row) {
      row.classList.toggle("selected", row.dataset.runId === openRunId);
    });
  }

  function drawTelemetry() {
    if (telemetryChart) telemetryChart.destroy();
    telemetryChart = null;
    const source = document.getElementById("drawer-telemetry-data");
    if (!source || !window.Chart) return;
    const gpus = JSON.parse(source.textContent).gpus;
    const totals = gpus.flatMap(function (gpu) { return gpu.memory_total_mib.filter(function (v) { return v !== null; }); });
    const memoryMax = totals.length ? Math.max.apply(null, totals) : undefined;
    const datasets = gpus.flatMap(function (gpu, i) {
      const colour = GPU_COLOURS[i % GPU_COLOURS.length];
      const line = function (name, label, axis, extra) {
        const data = gpu.t.map(function (t, j) { return { x: t, y: gpu[name][j] }; });
        return Object.assign({ label: "GPU " + gpu.index + " " + label, data: data, yAxisID: axis, borderColor: colour,
          backgroundColor: colour, borderWidth: 2, pointRadius: 0, spanGaps: false }, extra);
      };
      return [line("memory_used_mib", "memory used (MiB)", "memory", {}),
        line("power_w", "power (W)", "power", { borderWidth: 1.5, borderDash: [5, 3] })];
    });
    telemetryChart = new window.Chart(body.querySelector('[data-field="drawer-telemetry-canvas"]'), {
      type: "line",
      data: { datasets: datasets },
      options: {
        maintainAspectRatio: false,
        animation: false,
        parsing: { xAxisKey: "x", yAxisKey: "y" },
        interaction: { mode: "nearest", axis: "x", intersect: false },
        plugins: {
          title: { display: true, text: "GPU memory and power over the run" },
          legend: { position: "bottom", labels: { boxWidth: 12 } },
        },
        scales: {
          x: { type: "linear", title: { display: true, text: "time since the first sample (s)" } },
          memory: { type: "linear", position: "left", beginAtZero: true, max: memoryMax,
            title: { display: true, text: "memory used (MiB)" + (memoryMax ? ", top = total" : "") } },
          power: { type: "linear", position: "right", beginAtZero: true, grid: { drawOnChartArea: false },
            title: { display: true, text: "power (W), dashed" } },
        },
      },
    });
  }

  function openDrawer(row) {
    openRunId = row.dataset.runId;
    drawer.hidden = false;
    body.replaceChildren(); // its poller too: it asked for the previous run
    state.textContent = "Loading…";
    markOpenRow();
    window.htmx.ajax("GET", row.dataset.drawerUrl, { source: drawer, target: body });
  }

  function closeDrawer() {
    drawer.hidden = true;
    openRunId = null;
    body.replaceChildren();
    drawTelemetry(); // no data left: drops the chart
    markOpenRow();
  }

  drawer.addEventListener("htmx:beforeSwap", function (event) {
    if (drawer.hidden) event.detail.shouldSwap = false; // an answer that came after closing
  });
  drawer.addEventListener("htmx:afterSwap", function (event) {
    if (event.target !== body) return;
    state.textContent = "";
    body.querySelectorAll("time[datetime]").forEach(function (t) { t.textContent = new Date(t.dateTime).toLocaleTimeString(); });
    const log = body.querySelector("pre.log-tail");
    if (log) log.scrollTop = log.scrollHeight;
    drawTelemetry();
  });
  drawer.addEventListener("htmx:responseError", function (event) {
    state.textContent = "Could not load this run (HTTP " + event.detail.xhr.status + ").";
  });
  document.addEventListener("htmx:afterSettle", markOpenRow);

  document.addEventListener("click", function (event) {
    if (event.target.closest('[data-action="close-drawer"]')) return closeDrawer();
    const tr = event.target.closest("tr.run-row");
    if (!tr || event.target.closest("a, button, summary, form, input, label")) return;
    const row = tr.closest("tbody.run");
    if (row.dataset.runId === openRunId && !drawer.hidden) closeDrawer();
    else openDrawer(row);
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && !drawer.hidden) return closeDrawer();
    if ((event.key === "Enter" || event.key === " ") && event.target.matches && event.target.matches("tr.run-row")) {
      event.preventDefault();
      openDrawer(event.target.closest("tbody.run"));
    }
  });
})();
