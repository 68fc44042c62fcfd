// Sweep detail, live: polls progress.json every 2 s while the sweep is not finished and
// updates the progress bar, the counts and each run row in place, and tells the points
// table (points_table.js, the "sweeplab:counts-changed" event) when the counts move; a click
// on a run row opens the run drawer (timeline, command, version, GPU memory and power, log
// tail). Every text coming from the server is inserted with textContent, never as HTML.
(function () {
  "use strict";
  const root = document.getElementById("sweep-live");
  if (!root) return;
  const POLL_MS = 2000;
  const FINISHED = ["done", "cancelled"];

  function field(scope, name) {
    return scope.querySelector('[data-field="' + name + '"]');
  }

  function setText(el, text) {
    if (el) el.textContent = text == null ? "" : String(text);
  }

  function badge(className, text, title) {
    const span = document.createElement("span");
    span.className = "badge " + className;
    span.textContent = text;
    if (title) span.title = title;
    return span;
  }

  function setBadge(el, prefix, status, label) {
    if (!el) return;
    el.className = "badge " + prefix + status;
    el.textContent = label;
  }

  // --- Progress -------------------------------------------------------------------------

  function renderProgress(data) {
    const p = data.progress;
    const text = p.done + " of " + p.to_measure + " points to measure are finished (" + p.pct + "%).";
    const bar = field(document, "progress-bar");
    if (bar) bar.style.width = p.pct + "%";
    const box = field(document, "progress");
    if (box) {
      box.title = p.done + " of " + p.to_measure + " points to measure are finished";
      box.setAttribute("aria-valuenow", String(p.pct));
    }
    setText(field(document, "progress-text"), text);
    setBadge(field(root, "sweep-status"), "s-", data.sweep.status, data.sweep.status_display);
    root.dataset.status = data.sweep.status;
    const cancel = field(root, "cancel-form");
    if (cancel && data.sweep.finished) cancel.hidden = true; // nothing left to cancel

    const legend = field(document, "legend");
    if (legend) {
      legend.replaceChildren();
      Object.keys(data.counts).forEach(function (status) {
        const label = (data.status_labels && data.status_labels[status]) || status;
        legend.appendChild(badge("p-" + status, label + ": " + data.counts[status]));
        legend.appendChild(document.createTextNode(" "));
      });
    }

    data.runs.forEach(function (run) {
      const row = document.querySelector('tbody[data-run-id="' + run.id + '"]');
      if (!row) return;
      setBadge(field(row, "status"), "r-", run.status, run.status_display);
      const points = field(row, "points");
      if (points) {
        points.replaceChildren();
        Object.keys(run.points.counts).forEach(function (status) {
          points.appendChild(badge("p-" + status, String(run.points.counts[status]), status));
        });
        const total = document.createElement("span");
        total.className = "muted";
        total.textContent = "/ " + run.points.total;
        points.appendChild(document.createTextNode(" "));
        points.appendChild(total);
      }
      const kind = field(row, "failure-kind");
      setText(kind, run.failure_kind_display || run.failure_kind);
      if (kind) kind.hidden = !run.failure_kind;
      setText(field(row, "reason"), run.reason);
    });
  }

  let refreshDrawer = function () {};
  let timer = null;
  let lastCounts = null;
  // Fired only on a change, so a sweep that sits still costs the points table nothing.
  function announceCounts(data) {
    const counts = JSON.stringify(data.runs.map(function (run) { return [run.id, run.points.counts]; }));
    if (lastCounts !== null && counts !== lastCounts) {
      document.dispatchEvent(new CustomEvent("sweeplab:counts-changed", { detail: data.counts }));
    }
    lastCounts = counts;
  }
  function poll() {
    timer = null;
    fetch(root.dataset.progressUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (data) {
        renderProgress(data);
        announceCounts(data);
        refreshDrawer(); // the open run's timeline and log tail move too
        if (!data.sweep.finished) schedule();
      })
      .catch(function () {
        schedule(); // a transient error (server restart, network): try again
      });
  }
  function schedule() {
    if (timer === null) timer = window.setTimeout(poll, POLL_MS);
  }
  if (root.dataset.progressUrl && FINISHED.indexOf(root.dataset.status) === -1) schedule();

  // --- Run drawer -----------------------------------------------------------------------

  const drawer = document.getElementById("run-drawer");
  if (!drawer) return;
  let openRunId = null;
  let request = 0;

  function orDash(value, suffix) {
    return value === null || value === undefined || value === "" ? "—" : String(value) + (suffix || "");
  }

  // --- GPU memory and power (one Chart.js chart, replaced when the drawer switches runs) ---

  const GPU_COLOURS = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7e8c", "#57606a"];
  let telemetryChart = null;
  let telemetryRunId = null;

  function dropTelemetryChart() {
    if (telemetryChart) telemetryChart.destroy();
    telemetryChart = null;
    telemetryRunId = null;
  }

  function telemetryDatasets(gpus) {
    const datasets = [];
    gpus.forEach(function (gpu, i) {
      const colour = GPU_COLOURS[i % GPU_COLOURS.length];
      const points = function (name) {
        return gpu.t.map(function (t, j) { return { x: t, y: gpu[name][j] }; });
      };
      datasets.push({
        label: "GPU " + gpu.index + " memory used (MiB)", data: points("memory_used_mib"), yAxisID: "memory",
        borderColor: colour, backgroundColor: colour, borderWidth: 2, pointRadius: 0, spanGaps: false,
      });
      datasets.push({
        label: "GPU " + gpu.index + " power (W)", data: points("power_w"), yAxisID: "power",
        borderColor: colour, backgroundColor: colour, borderWidth: 1.5, borderDash: [5, 3], pointRadius: 0,
        spanGaps: false,
      });
    });
    return datasets;
  }

  function renderTelemetry(runId, telemetry) {
    const box = field(drawer, "drawer-telemetry");
    const empty = field(drawer, "drawer-telemetry-empty");
    const note = field(drawer, "drawer-telemetry-note");
    const gpus = (telemetry && telemetry.gpus) || [];
    if (!box || !empty) return;
    if (!gpus.length || !window.Chart) {
      dropTelemetryChart();
      box.hidden = true;
      empty.hidden = false;
      setText(note, "");
      return;
    }
    empty.hidden = true;
    box.hidden = false;
    const totals = [];
    gpus.forEach(function (gpu) {
      gpu.memory_total_mib.forEach(function (v) { if (v !== null) totals.push(v); });
    });
    const memoryMax = totals.length ? Math.max.apply(null, totals) : undefined;
    const thinned = gpus.some(function (gpu) { return gpu.shown < gpu.samples; });
    setText(note, thinned
      ? "Every sample thinned to at most " + telemetry.max_samples_per_gpu + " per GPU, evenly spaced in time."
      : "");
    const datasets = telemetryDatasets(gpus);
    if (telemetryChart && telemetryRunId === runId) {
      // The same run, polled again: new data in the same chart (no flicker, no leak).
      telemetryChart.data.datasets = datasets;
      telemetryChart.options.scales.memory.max = memoryMax;
      telemetryChart.update("none");
      return;
    }
    dropTelemetryChart();
    telemetryRunId = runId;
    telemetryChart = new window.Chart(field(drawer, "drawer-telemetry-canvas"), {
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
          memory: {
            type: "linear", position: "left", beginAtZero: true, max: memoryMax,
            title: { display: true, text: "memory used (MiB)" + (memoryMax ? ", top = total" : "") },
          },
          power: {
            type: "linear", position: "right", beginAtZero: true, grid: { drawOnChartArea: false },
            title: { display: true, text: "power (W), dashed" },
          },
        },
      },
    });
  }

  function renderDrawer(data) {
    setText(field(drawer, "drawer-title"), "Run: " + data.run.label);
    const status = field(drawer, "drawer-status");
    if (status) status.replaceChildren(badge("r-" + data.run.status, data.run.status_display));
    setText(field(drawer, "drawer-version"), orDash(data.engine_version));
    setText(field(drawer, "drawer-context"), orDash(data.context_length, " tokens"));
    setText(field(drawer, "drawer-kv"), orDash(data.kv_capacity_tokens, " tokens"));

    const failure = field(drawer, "drawer-failure");
    const failed = Boolean(data.failure.kind || data.failure.cause);
    if (failure) failure.hidden = !failed;
    setText(field(drawer, "drawer-failure-kind"), data.failure.kind_display || data.failure.kind);
    setText(field(drawer, "drawer-failure-cause"), data.failure.cause);
    const failureLog = field(drawer, "drawer-failure-log");
    setText(failureLog, data.failure.log_lines.join("\n"));
    if (failureLog) failureLog.hidden = data.failure.log_lines.length === 0;

    setText(field(drawer, "drawer-argv"), data.command || "(not launched)");
    renderTelemetry(data.run.id, data.telemetry);

    const events = field(drawer, "drawer-events");
    if (events) {
      events.replaceChildren();
      data.events.forEach(function (e) {
        const li = document.createElement("li");
        li.className = "ev-" + e.kind;
        const at = document.createElement("time");
        at.dateTime = e.at;
        at.textContent = new Date(e.at).toLocaleTimeString();
        const kind = document.createElement("strong");
        kind.textContent = " " + e.kind_display;
        li.appendChild(at);
        li.appendChild(kind);
        if (e.message) li.appendChild(document.createTextNode(": " + e.message));
        events.appendChild(li);
      });
      if (!data.events.length) {
        const li = document.createElement("li");
        li.className = "muted";
        li.textContent = "no events yet";
        events.appendChild(li);
      }
    }

    const log = data.log;
    let note = log.message || "";
    if (log.available && log.lines.length) {
      note = (log.truncated ? "last " : "") + log.lines.length + " lines";
    }
    setText(field(drawer, "drawer-log-note"), note ? "(" + note + ")" : "");
    const tail = field(drawer, "drawer-log");
    setText(tail, log.lines.join("\n"));
    if (tail) {
      tail.hidden = log.lines.length === 0;
      tail.scrollTop = tail.scrollHeight;
    }
  }

  function openDrawer(row) {
    const url = row.dataset.drawerUrl;
    if (!url) return;
    openRunId = row.dataset.runId;
    document.querySelectorAll("tbody.run.selected").forEach(function (el) { el.classList.remove("selected"); });
    row.classList.add("selected");
    drawer.hidden = false;
    field(drawer, "drawer-body").hidden = true;
    setText(field(drawer, "drawer-state"), "Loading…");
    loadDrawer(url);
  }

  // Fetches and shows a run's drawer; a later call wins over an earlier one still loading.
  function loadDrawer(url) {
    const mine = ++request;
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (data) {
        if (mine !== request) return; // another run was opened meanwhile
        renderDrawer(data);
        setText(field(drawer, "drawer-state"), "");
        field(drawer, "drawer-body").hidden = false;
      })
      .catch(function (err) {
        if (mine !== request) return;
        setText(field(drawer, "drawer-state"), "Could not load this run (" + err.message + ").");
      });
  }

  refreshDrawer = function () {
    if (openRunId === null || drawer.hidden) return;
    const row = document.querySelector('tbody[data-run-id="' + openRunId + '"]');
    if (row) loadDrawer(row.dataset.drawerUrl);
  };

  function closeDrawer() {
    drawer.hidden = true;
    dropTelemetryChart();
    openRunId = null;
    request++;
    document.querySelectorAll("tbody.run.selected").forEach(function (el) { el.classList.remove("selected"); });
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest('[data-action="close-drawer"]')) {
      closeDrawer();
      return;
    }
    const tr = event.target.closest("tr.run-row");
    if (!tr || event.target.closest("a, button, summary, form, input, label")) return;
    const row = tr.closest("tbody.run");
    if (row && row.dataset.runId === openRunId && !drawer.hidden) closeDrawer();
    else if (row) openDrawer(row);
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && !drawer.hidden) {
      closeDrawer();
      return;
    }
    if ((event.key === "Enter" || event.key === " ") && event.target.matches && event.target.matches("tr.run-row")) {
      event.preventDefault();
      openDrawer(event.target.closest("tbody.run"));
    }
  });
})();
