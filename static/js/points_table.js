// Sweep detail: the points table, one page at a time from points-table.json (sorted and
// filtered in SQL by runs/points_table.py). Headers sort (aria-sort and an arrow show the
// order), the selects and the search box filter, a run row's "points" button shows that run
// only, and while the sweep runs the page reloads when sweep_live.js sees the counts change.
// A point that is not ok shows its status badge and reason, never a 0. Every text from the
// server is inserted with textContent.
(function () {
  "use strict";
  const root = document.getElementById("points-table");
  if (!root || !root.dataset.url) return;
  const REFRESH_MIN_MS = 2000; // the live poll's period: never reload more often
  const SEARCH_DEBOUNCE_MS = 300;
  // Columns in display order; "sort" is the server's column name (runs/points_table.py).
  const COLUMNS = [
    { sort: "run", label: "Configuration", cell: configCell },
    { sort: "workload", label: "Workload", cell: function (r) { return r.workload; } },
    { sort: "prompt_tokens", label: "Prompt tokens", num: true, cell: promptCell },
    { sort: "concurrency", label: "Concurrency", num: true, cell: function (r) { return String(r.concurrency); } },
    { sort: "status", label: "Status", cell: statusCell },
    { sort: "decode_tok_s", label: "Decode (tok/s)", metric: true, higher: true },
    { sort: "server_decode_tok_s", label: "Server's decode (tok/s)", metric: true, higher: true },
    { sort: "output_throughput", label: "Output (tok/s)", metric: true, higher: true },
    { sort: "median_ttft_ms", label: "TTFT median (ms)", metric: true },
    { sort: "p99_ttft_ms", label: "TTFT p99 (ms)", metric: true },
    { sort: "median_tpot_ms", label: "TPOT median (ms)", metric: true },
    { sort: "p99_itl_ms", label: "ITL p99 (ms)", metric: true },
    { sort: "median_e2el_ms", label: "E2E median (ms)", metric: true },
    { sort: "accept_length", label: "Accept length", metric: true, higher: true },
    { sort: "duration", label: "Duration (s)", metric: true },
  ];
  const FILTERS = ["status", "workload", "method", "tp", "run", "q", "per_page"];

  function field(name) {
    return root.querySelector('[data-field="' + name + '"]');
  }

  function el(tag, className, content) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (content !== undefined && content !== null) node.textContent = String(content);
    return node;
  }

  const form = field("points-filters");
  const head = field("points-head");
  const body = field("points-body");
  const stateLine = field("points-state");
  const pageLine = field("points-page");
  const prev = root.querySelector('[data-action="points-prev"]');
  const next = root.querySelector('[data-action="points-next"]');
  const state = { sort: "run", page: 1, status: "", workload: "", method: "", tp: "", run: "", q: "", per_page: "" };
  let pages = 1;
  let request = 0;
  let lastLoad = 0;
  let refreshTimer = null;

  // --- Cells ------------------------------------------------------------------------------

  function configCell(row) {
    const cell = document.createDocumentFragment();
    cell.appendChild(el("span", "muted", "#" + (row.run_position + 1) + " "));
    cell.appendChild(document.createTextNode(row.config));
    return cell;
  }

  function promptCell(row) {
    if (row.prompt_tokens === null) {
      return row.actual_prompt_tokens === null ? "its own" : "its own (" + row.actual_prompt_tokens + ")";
    }
    return String(row.prompt_tokens);
  }

  function statusCell(row) {
    const cell = document.createDocumentFragment();
    const badge = el("span", "badge p-" + row.status, row.status_display);
    badge.title = row.status;
    cell.appendChild(badge);
    if (row.reason) cell.appendChild(el("span", "reason", " " + row.reason));
    return cell;
  }

  function formatNumber(value) {
    if (value === null || value === undefined) return null;
    return Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(2);
  }

  function metricCell(row, column) {
    const text = formatNumber(row[column.sort]);
    if (text !== null) return text;
    // Not ok: the status column says why; an ok point without this metric has none.
    const dash = el("span", "muted", "—");
    dash.title = row.status === "ok" ? "not measured for this point" : row.status_display;
    return dash;
  }

  // --- Rendering --------------------------------------------------------------------------

  function renderHead() {
    const column = state.sort.replace(/^-/, "");
    const descending = state.sort.charAt(0) === "-";
    head.replaceChildren();
    COLUMNS.forEach(function (c) {
      const th = el("th", c.num || c.metric ? "num" : "");
      th.scope = "col";
      const active = c.sort === column;
      th.setAttribute("aria-sort", active ? (descending ? "descending" : "ascending") : "none");
      const button = el("button", "sort");
      button.type = "button";
      button.dataset.sort = c.sort;
      button.appendChild(document.createTextNode(c.label));
      const arrow = el("span", "sort-arrow", active ? (descending ? " ▼" : " ▲") : "");
      arrow.setAttribute("aria-hidden", "true");
      button.appendChild(arrow);
      th.appendChild(button);
      head.appendChild(th);
    });
  }

  function renderRows(rows) {
    body.replaceChildren();
    rows.forEach(function (row) {
      const tr = el("tr", "point-row");
      tr.dataset.pointId = row.id;
      tr.dataset.runId = row.run;
      tr.dataset.status = row.status;
      COLUMNS.forEach(function (c) {
        const td = el("td", c.num || c.metric ? "num" : "");
        const content = c.metric ? metricCell(row, c) : c.cell(row);
        if (typeof content === "string") td.textContent = content;
        else td.appendChild(content);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  function fillSelect(name, options) {
    const select = form.elements[name];
    if (!select) return;
    const current = state[name];
    select.replaceChildren(el("option", "", "all"));
    select.options[0].value = "";
    options.forEach(function (option) {
      const node = el("option", "", option.label);
      node.value = String(option.value);
      select.appendChild(node);
    });
    select.value = current; // kept when still present; otherwise "all" shows
    if (select.value !== String(current)) select.value = "";
  }

  function renderChoices(choices) {
    fillSelect("status", choices.statuses);
    fillSelect("workload", choices.workloads.map(function (w) { return { value: w, label: w }; }));
    fillSelect("method", choices.methods.map(function (m) { return { value: m, label: m }; }));
    fillSelect("tp", choices.tps.map(function (tp) { return { value: tp, label: "TP" + tp }; }));
    fillSelect("run", choices.runs.map(function (r) { return { value: r.id, label: "#" + (r.position + 1) + " " + r.label }; }));
  }

  function render(data) {
    pages = data.pages;
    state.page = data.page;
    state.sort = data.sort;
    renderHead();
    renderChoices(data.choices);
    renderRows(data.rows);
    const first = data.total ? (data.page - 1) * data.per_page + 1 : 0;
    const last = Math.min(data.total, data.page * data.per_page);
    stateLine.textContent = data.total
      ? "Points " + first + "–" + last + " of " + data.total + "."
      : "No points match these filters.";
    pageLine.textContent = "Page " + data.page + " of " + data.pages;
    prev.disabled = data.page <= 1;
    next.disabled = data.page >= data.pages;
    root.dataset.total = String(data.total);
    root.dataset.ready = "true";
  }

  // --- Loading ----------------------------------------------------------------------------

  function query() {
    const params = new URLSearchParams();
    Object.keys(state).forEach(function (key) {
      if (state[key] !== "" && state[key] !== null) params.set(key, String(state[key]));
    });
    return params.toString();
  }

  function load() {
    const mine = ++request;
    lastLoad = Date.now();
    root.setAttribute("aria-busy", "true");
    fetch(root.dataset.url + "?" + query(), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (data) {
          if (!response.ok) throw new Error(data.error || "HTTP " + response.status);
          return data;
        });
      })
      .then(function (data) {
        if (mine !== request) return; // a later load (another sort or filter) wins
        render(data);
      })
      .catch(function (error) {
        if (mine !== request) return;
        stateLine.textContent = "The points could not be loaded: " + error.message;
      })
      .finally(function () {
        if (mine === request) root.removeAttribute("aria-busy");
      });
  }

  // The live poll saw the counts move: reload, but not more often than every 2 s.
  function refreshSoon() {
    if (refreshTimer !== null) return;
    const wait = Math.max(0, REFRESH_MIN_MS - (Date.now() - lastLoad));
    refreshTimer = window.setTimeout(function () {
      refreshTimer = null;
      load();
    }, wait);
  }

  function reset(changes) {
    Object.assign(state, changes, { page: 1 });
    load();
  }

  // --- Events -----------------------------------------------------------------------------

  head.addEventListener("click", function (event) {
    const button = event.target.closest("button[data-sort]");
    if (!button) return;
    const column = button.dataset.sort;
    const current = state.sort.replace(/^-/, "");
    let sort;
    if (column === current) {
      sort = state.sort.charAt(0) === "-" ? column : "-" + column;
    } else {
      const spec = COLUMNS.find(function (c) { return c.sort === column; });
      sort = spec && spec.higher ? "-" + column : column; // speeds start with the fastest
    }
    reset({ sort: sort });
  });

  let searchTimer = null;
  form.addEventListener("input", function (event) {
    if (event.target.name !== "q") return;
    window.clearTimeout(searchTimer);
    searchTimer = window.setTimeout(function () { reset({ q: event.target.value.trim() }); }, SEARCH_DEBOUNCE_MS);
  });
  form.addEventListener("change", function (event) {
    const name = event.target.name;
    if (name && name !== "q" && FILTERS.indexOf(name) !== -1) {
      const changes = {};
      changes[name] = event.target.value;
      reset(changes);
    }
  });
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    window.clearTimeout(searchTimer);
    reset({ q: form.elements.q.value.trim() });
  });
  prev.addEventListener("click", function () {
    if (state.page > 1) { state.page -= 1; load(); }
  });
  next.addEventListener("click", function () {
    if (state.page < pages) { state.page += 1; load(); }
  });

  // A run row's "points" button: that run's points only.
  document.addEventListener("click", function (event) {
    const button = event.target.closest('[data-action="filter-points"]');
    if (!button) return;
    reset({ run: button.dataset.runId });
    root.scrollIntoView({ behavior: "smooth", block: "start" });
  });
  document.addEventListener("sweeplab:counts-changed", refreshSoon);

  renderHead();
  load();
})();
