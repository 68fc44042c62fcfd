// Sweep builder: a form and a YAML view of one spec, and a live plan preview.
//
// The spec is plain data (`state`). The form edits it field by field; the YAML view edits
// its text. Every edit is sent to the plan-preview endpoint, which answers with the data
// parsed, the YAML text of it, the validation errors (each with its field path) and the
// plan. The form sends its data as JSON, so the server's answer carries the YAML the
// other view shows; keys the form does not know are kept as they are.
// Text is inserted with textContent only: nothing the user or the server writes is HTML.
(function () {
  "use strict";
  const form = document.getElementById("builder");
  const editor = document.getElementById("id_spec_yaml");
  const preview = document.getElementById("plan-preview");
  const errorList = document.getElementById("spec-errors");
  const formPanel = document.getElementById("spec-form");
  const yamlPanel = document.getElementById("yaml-panel");
  const editorInput = document.getElementById("id_editor");
  const jsonInput = document.getElementById("id_spec_json");
  if (!form || !editor || !preview || !formPanel) return;
  const boot = JSON.parse(document.getElementById("builder-data").textContent);
  const catalog = boot.catalog;
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  const FIELD_ORDER = ["name", "description", "host", "engine", "model", "tp", "methods", "workloads",
    "max_new_tokens", "concurrency", "requests_per_point", "warmup_requests", "exclude", "options"];
  const OPTION_FIELDS = [
    ["context_margin_tokens", "Context margin (tokens)"],
    ["retries", "Re-launches of a crashed run"],
    ["stall_timeout_s", "Stall timeout (s)"],
    ["first_token_timeout_s", "First-token timeout (s)"],
  ];

  let state = isObject(boot.data) ? boot.data : null;
  let mode = boot.editor === "yaml" || !state ? "yaml" : "form";
  let lastAnswer = null;
  let timer = null;
  let seq = 0;
  let yamlEditedSinceSync = false;

  // --- small helpers ------------------------------------------------------------------

  function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  // "1, 4, 8" -> [1, 4, 8]; anything that is not a list of integers goes as typed, so
  // the server's message names what is wrong with it.
  function parseList(text) {
    const t = text.trim();
    if (t === "") return [];
    const parts = t.split(/[\s,]+/).filter(Boolean);
    return parts.every(function (p) { return /^-?\d+$/.test(p); }) ? parts.map(Number) : t;
  }

  function listText(value) {
    if (Array.isArray(value)) return value.join(", ");
    return value === undefined || value === null ? "" : String(value);
  }

  function parseNumber(text) {
    const t = text.trim();
    if (t === "") return undefined;
    return /^-?\d+$/.test(t) ? Number(t) : t;
  }

  // "method=ddtree budget=64 tp=1" <-> {method: "ddtree", budget: 64, tp: 1}
  function ruleText(rule) {
    if (!isObject(rule)) return listText(rule);
    return Object.keys(rule).map(function (k) { return k + "=" + rule[k]; }).join(" ");
  }

  function parseRule(text) {
    const rule = {};
    text.trim().split(/[\s,]+/).filter(Boolean).forEach(function (part) {
      const i = part.indexOf("=");
      const key = i < 0 ? part : part.slice(0, i);
      const value = i < 0 ? "" : part.slice(i + 1);
      rule[key] = /^\d+$/.test(value) ? Number(value) : value;
    });
    return rule;
  }

  function ordered(data) {
    const out = {};
    FIELD_ORDER.forEach(function (k) { if (k in data) out[k] = data[k]; });
    Object.keys(data).forEach(function (k) { if (!(k in out)) out[k] = data[k]; });
    return out;
  }

  function setField(key, value) {
    if (value === undefined || (Array.isArray(value) && value.length === 0 && key === "exclude")) delete state[key];
    else state[key] = value;
  }

  function setOption(key, value) {
    const options = isObject(state.options) ? state.options : {};
    if (value === undefined) delete options[key];
    else options[key] = value;
    if (Object.keys(options).length) state.options = options;
    else delete state.options;
  }

  function byName(list, name) { return list.find(function (x) { return x.name === name; }); }

  // Methods and workloads as the form edits them: {name, params} / {name, prompt_tokens}.
  function methodEntry(item) {
    if (typeof item === "string") return { name: item, params: {} };
    if (isObject(item) && Object.keys(item).length === 1) {
      const name = Object.keys(item)[0];
      return { name: name, params: isObject(item[name]) ? Object.assign({}, item[name]) : {} };
    }
    return { raw: item };
  }

  function methodItem(entry) {
    if ("raw" in entry) return entry.raw;
    const params = {};
    Object.keys(entry.params).forEach(function (k) { if (entry.params[k] !== undefined) params[k] = entry.params[k]; });
    if (!Object.keys(params).length && !(catalog.method_params[entry.name] || []).length) return entry.name;
    const item = {};
    item[entry.name] = params;
    return item;
  }

  function workloadEntry(item) {
    if (typeof item === "string") return { name: item };
    if (isObject(item) && Object.keys(item).length === 1) {
      const name = Object.keys(item)[0];
      const body = isObject(item[name]) ? item[name] : {};
      return { name: name, prompt_tokens: body.prompt_tokens };
    }
    return { raw: item };
  }

  function workloadItem(entry) {
    if ("raw" in entry) return entry.raw;
    const kind = (byName(catalog.workloads, entry.name) || {}).kind;
    const lengths = entry.prompt_tokens;
    if (kind !== "synthetic" && (lengths === undefined || (Array.isArray(lengths) && !lengths.length))) return entry.name;
    const item = {};
    item[entry.name] = { prompt_tokens: lengths === undefined ? [] : lengths };
    return item;
  }

  function tpChoices(host, current) {
    const most = Math.max((host && host.gpu_count) || 1, 1);
    const sizes = new Set([most]);
    for (let n = 1; n <= most; n *= 2) sizes.add(n);
    (Array.isArray(current) ? current : []).forEach(function (n) { if (Number.isInteger(n)) sizes.add(n); });
    return Array.from(sizes).sort(function (a, b) { return a - b; });
  }

  // --- the form -----------------------------------------------------------------------

  function field(path, labelText, control, hint) {
    const wrap = el("div", null, "field");
    wrap.dataset.path = path;
    const label = el("label", labelText);
    if (control.id) label.htmlFor = control.id;
    wrap.append(label, control);
    if (hint) wrap.append(el("span", hint, "hint"));
    return wrap;
  }

  function textInput(id, value, onInput, attrs) {
    const input = el("input");
    input.type = "text";
    input.id = id;
    input.value = value === undefined || value === null ? "" : String(value);
    Object.assign(input, attrs || {});
    input.addEventListener("input", function () { onInput(input.value); changed(); });
    return input;
  }

  function select(id, options, value, onChange, allowBlank) {
    const node = el("select");
    node.id = id;
    const names = options.slice();
    if (value !== undefined && value !== null && value !== "" && names.indexOf(value) < 0) names.unshift(value);
    if (allowBlank || value === undefined || value === null || value === "") node.append(el("option", "— choose —"));
    if (node.options.length) node.options[0].value = "";
    names.forEach(function (name) {
      const opt = el("option", String(name));
      opt.value = String(name);
      node.append(opt);
    });
    node.value = value === undefined || value === null ? "" : String(value);
    node.addEventListener("change", function () { onChange(node.value); });
    return node;
  }

  function section(title, path) {
    const box = el("fieldset", null, "form-section");
    if (path) box.dataset.path = path;
    box.append(el("legend", title));
    return box;
  }

  function rowButton(text, onClick, cls) {
    const b = el("button", text, cls || "small");
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  function renderForm() {
    formPanel.replaceChildren();
    if (!state) {
      formPanel.append(el("p", "The YAML does not parse, so the form has nothing to show: fix it in the YAML view.", "error"));
      return;
    }
    const host = byName(catalog.hosts, state.host);
    const engine = byName(catalog.engines, state.engine);

    const basics = section("Sweep");
    basics.append(
      field("name", "Name", textInput("f-name", state.name, function (v) { setField("name", v); })),
      field("description", "Description", textInput("f-description", state.description, function (v) {
        setField("description", v === "" ? undefined : v);
      })),
    );
    const where = el("div", null, "field-row");
    where.append(
      field("host", "Host", select("f-host", catalog.hosts.map(function (h) { return h.name; }), state.host,
        function (v) { setField("host", v || undefined); renderForm(); changed(); }),
        host ? host.gpu_count + " × " + (host.gpu_model || "CPU") : ""),
      field("engine", "Engine", select("f-engine", catalog.engines.map(function (e) { return e.name; }), state.engine,
        function (v) { setField("engine", v || undefined); renderForm(); changed(); }),
        engine ? engine.kind : ""),
      field("model", "Model", select("f-model", catalog.models.map(function (m) { return m.name; }), state.model,
        function (v) { setField("model", v || undefined); renderForm(); changed(); }),
        (byName(catalog.models, state.model) || {}).context_length ? "context " + byName(catalog.models, state.model).context_length + " tokens" : ""),
    );
    basics.append(where);

    const tpBox = el("div", null, "checks");
    const currentTp = state.tp === undefined ? catalog.defaults.tp : state.tp;
    tpChoices(host, currentTp).forEach(function (n) {
      const label = el("label", null, "inline");
      const box = el("input");
      box.type = "checkbox";
      box.value = String(n);
      box.id = "f-tp-" + n;
      box.checked = Array.isArray(currentTp) && currentTp.indexOf(n) >= 0;
      box.addEventListener("change", function () {
        const chosen = Array.from(tpBox.querySelectorAll("input:checked")).map(function (b) { return Number(b.value); });
        setField("tp", chosen);
        changed();
      });
      label.append(box, " TP" + n);
      tpBox.append(label);
    });
    const tpField = el("div", null, "field");
    tpField.dataset.path = "tp";
    tpField.append(el("label", "Tensor-parallel sizes"), tpBox,
      el("span", host ? "up to the host's " + host.gpu_count + " GPU(s)" : "choose a host first", "hint"));
    basics.append(tpField);
    formPanel.append(basics);

    renderMethods(engine);
    renderWorkloads();
    renderLoad();
    renderExclusions();
    renderOptions();
    placeErrors(lastAnswer ? lastAnswer.errors || [] : boot.errors || []);
  }

  function renderMethods(engine) {
    const box = section("Methods", "methods");
    const entries = (Array.isArray(state.methods) ? state.methods : []).map(methodEntry);
    const offered = engine ? engine.methods : Object.keys(catalog.method_params);
    function write() { state.methods = entries.map(methodItem); }
    entries.forEach(function (entry, i) {
      const row = el("div", null, "form-row method-row");
      row.dataset.path = "methods[" + i + "]";
      if ("raw" in entry) {
        row.append(el("span", "methods[" + i + "] is not in a form the form can edit: edit it in the YAML view.", "error"));
        box.append(row);
        return;
      }
      const nameSelect = select("f-method-" + i, offered, entry.name, function (v) {
        entry.name = v;
        entry.params = {};
        (catalog.method_params[v] || []).forEach(function (p) { if (!p.swept && p.default !== null) entry.params[p.name] = p.default; });
        write(); renderForm(); changed();
      });
      nameSelect.setAttribute("aria-label", "Method " + (i + 1));
      row.append(nameSelect);
      (catalog.method_params[entry.name] || []).forEach(function (p) {
        const path = "methods[" + i + "]." + entry.name + "." + p.name;
        const input = textInput("f-method-" + i + "-" + p.name, p.swept ? listText(entry.params[p.name]) : entry.params[p.name],
          function (v) { entry.params[p.name] = p.swept ? parseList(v) : parseNumber(v); write(); },
          { placeholder: p.swept ? "e.g. 8, 12, 15" : String(p.default === null ? "" : p.default) });
        input.dataset.param = p.name;
        const wrap = field(path, p.name.replace(/_/g, " ") + (p.swept ? " (list)" : ""), input);
        wrap.classList.add("inline-field");
        row.append(wrap);
      });
      row.append(rowButton("Remove", function () { entries.splice(i, 1); write(); renderForm(); changed(); }));
      box.append(row);
    });
    box.append(rowButton("+ Add method", function () {
      entries.push({ name: offered[0] || "autoregressive", params: {} });
      write(); renderForm(); changed();
    }, "small add-method"));
    formPanel.append(box);
  }

  function renderWorkloads() {
    const box = section("Workloads", "workloads");
    const entries = (Array.isArray(state.workloads) ? state.workloads : []).map(workloadEntry);
    function write() { state.workloads = entries.map(workloadItem); }
    entries.forEach(function (entry, i) {
      const row = el("div", null, "form-row workload-row");
      row.dataset.path = "workloads[" + i + "]";
      if ("raw" in entry) {
        row.append(el("span", "workloads[" + i + "] is not in a form the form can edit: edit it in the YAML view.", "error"));
        box.append(row);
        return;
      }
      const nameSelect = select("f-workload-" + i, catalog.workloads.map(function (w) { return w.name; }), entry.name,
        function (v) { entry.name = v; entry.prompt_tokens = undefined; write(); renderForm(); changed(); });
      nameSelect.setAttribute("aria-label", "Workload " + (i + 1));
      row.append(nameSelect);
      const kind = (byName(catalog.workloads, entry.name) || {}).kind;
      if (kind === "synthetic" || entry.prompt_tokens !== undefined) {
        const input = textInput("f-workload-" + i + "-prompt_tokens", listText(entry.prompt_tokens),
          function (v) { entry.prompt_tokens = parseList(v); write(); }, { placeholder: "e.g. 1000, 4000, 16000" });
        const wrap = field("workloads[" + i + "]." + entry.name + ".prompt_tokens", "prompt tokens (list)", input);
        wrap.classList.add("inline-field");
        row.append(wrap);
      } else if (kind) {
        row.append(el("span", kind + " prompts", "hint"));
      }
      row.append(rowButton("Remove", function () { entries.splice(i, 1); write(); renderForm(); changed(); }));
      box.append(row);
    });
    box.append(rowButton("+ Add workload", function () {
      entries.push({ name: catalog.workloads.length ? catalog.workloads[0].name : "" });
      write(); renderForm(); changed();
    }, "small add-workload"));
    formPanel.append(box);
  }

  function renderLoad() {
    const box = section("Load");
    const row = el("div", null, "field-row");
    const d = catalog.defaults;
    row.append(
      field("concurrency", "Concurrency (list)", textInput("f-concurrency", listText(state.concurrency),
        function (v) { setField("concurrency", v.trim() === "" ? undefined : parseList(v)); },
        { placeholder: listText(d.concurrency) })),
      field("max_new_tokens", "Max new tokens", textInput("f-max_new_tokens", state.max_new_tokens,
        function (v) { setField("max_new_tokens", parseNumber(v)); }, { placeholder: String(d.max_new_tokens) })),
      field("requests_per_point", "Requests per point", textInput("f-requests_per_point", state.requests_per_point,
        function (v) { setField("requests_per_point", parseNumber(v)); }, { placeholder: String(d.requests_per_point) })),
      field("warmup_requests", "Warmup requests", textInput("f-warmup_requests", state.warmup_requests,
        function (v) { setField("warmup_requests", parseNumber(v)); }, { placeholder: String(d.warmup_requests) })),
    );
    box.append(row);
    formPanel.append(box);
  }

  function renderExclusions() {
    const box = section("Exclusions", "exclude");
    box.append(el("p", "Configurations not to run, as key=value pairs: method, tp and method parameters.", "hint"));
    const rules = Array.isArray(state.exclude) ? state.exclude.slice() : [];
    function write() { setField("exclude", rules.slice()); }
    rules.forEach(function (rule, i) {
      const row = el("div", null, "form-row");
      row.dataset.path = "exclude[" + i + "]";
      const input = textInput("f-exclude-" + i, ruleText(rule), function (v) { rules[i] = parseRule(v); write(); },
        { placeholder: "method=ddtree budget=64 tp=1" });
      input.setAttribute("aria-label", "Exclusion " + (i + 1));
      row.append(input, rowButton("Remove", function () { rules.splice(i, 1); write(); renderForm(); changed(); }));
      box.append(row);
    });
    box.append(rowButton("+ Add exclusion", function () { rules.push({}); write(); renderForm(); }, "small"));
    formPanel.append(box);
  }

  function renderOptions() {
    const box = section("Options", "options");
    const options = isObject(state.options) ? state.options : {};
    const defaults = catalog.defaults.options;
    const retry = options.retry_quarantined;
    const retryField = field("options.retry_quarantined", "Quarantined configurations",
      select("f-retry_quarantined", [], "", function () {}, false));
    const retrySelect = retryField.querySelector("select");
    retrySelect.replaceChildren();
    [["no", "skip them"], ["all", "retry them all"], ["some", "retry the ones ticked in the plan"]].forEach(function (o) {
      const opt = el("option", o[1]);
      opt.value = o[0];
      retrySelect.append(opt);
    });
    retrySelect.value = retry === true ? "all" : Array.isArray(retry) && retry.length ? "some" : "no";
    retrySelect.addEventListener("change", function () {
      if (retrySelect.value === "all") setOption("retry_quarantined", true);
      else if (retrySelect.value === "no") setOption("retry_quarantined", undefined);
      else setOption("retry_quarantined", Array.isArray(retry) ? retry : []);
      changed();
    });
    const row = el("div", null, "field-row");
    row.append(retryField);
    OPTION_FIELDS.forEach(function (o) {
      row.append(field("options." + o[0], o[1], textInput("f-option-" + o[0], options[o[0]],
        function (v) { setOption(o[0], parseNumber(v)); }, { placeholder: String(defaults[o[0]]) })));
    });
    box.append(row);
    formPanel.append(box);
  }

  // --- errors next to their fields ----------------------------------------------------

  function parentPath(path) {
    const m = path.match(/^(.*)(\.[^.\[\]]+|\[\d+\])$/);
    return m ? m[1] : "";
  }

  function placeErrors(errors) {
    formPanel.querySelectorAll(".field-error").forEach(function (n) { n.remove(); });
    formPanel.querySelectorAll(".has-error").forEach(function (n) { n.classList.remove("has-error"); });
    const unplaced = [];
    errors.forEach(function (e) {
      let path = e.path || "";
      let target = null;
      while (path && mode === "form") {
        target = formPanel.querySelector('[data-path="' + CSS.escape(path) + '"]');
        if (target) break;
        path = parentPath(path);
      }
      if (target) {
        target.classList.add("has-error");
        const note = el("p", null, "field-error");
        if (path !== e.path) note.append(el("code", e.path), " ");
        note.append(e.message);
        target.append(note);
      } else {
        unplaced.push(e);
      }
    });
    errorList.replaceChildren();
    unplaced.forEach(function (e) {
      const li = el("li");
      if (e.path) li.append(el("code", e.path), " ");
      li.append(e.message);
      errorList.append(li);
    });
  }

  // --- the plan preview ---------------------------------------------------------------

  function retryRules() {
    const options = state && isObject(state.options) ? state.options : {};
    return options.retry_quarantined;
  }

  function sameRule(a, b) {
    const ka = Object.keys(a), kb = Object.keys(b);
    return ka.length === kb.length && ka.every(function (k) { return a[k] === b[k]; });
  }

  // Tick "retry anyway" for one quarantined configuration: options.retry_quarantined
  // becomes the list of those ticked (true stays true only while every one is ticked).
  function toggleRetry(rule, retrying, quarantined) {
    if (!state) return;
    let list = retryRules();
    if (list === true) list = quarantined.map(function (q) { return q.rule; });
    list = Array.isArray(list) ? list.filter(function (r) { return !sameRule(r, rule); }) : [];
    if (retrying) list.push(rule);
    setOption("retry_quarantined", list.length ? list : undefined);
    if (mode === "form") renderForm();
    changed(true);
  }

  function render(data) {
    preview.replaceChildren();
    placeErrors(data.errors || []);
    if (!data.valid) {
      preview.append(el("p", data.parsed ? "Fix the errors to see the plan." : "The YAML does not parse: fix it to see the plan.", "error"));
      return;
    }
    const t = data.totals;
    preview.append(el("h2", t.runs + " runs, " + t.points + " points (" + t.skipped_points + " skipped)"));
    const estimate = el("p", null, "estimate");
    estimate.dataset.field = "estimate";
    estimate.textContent = data.estimate ? "Estimated duration: " + data.estimate.text + "."
      : "No estimate of the duration yet: no earlier sweep measured these points on this engine, model and GPU.";
    preview.append(estimate);
    (data.warnings || []).forEach(function (w) { preview.append(el("p", "warning: " + w, "warn")); });
    if (data.quarantined.length) {
      preview.append(el("h3", "Quarantined configurations"));
      const ul = el("ul", null, "quarantined");
      data.quarantined.forEach(function (q) {
        const li = el("li");
        const label = el("label", null, "inline");
        const box = el("input");
        box.type = "checkbox";
        box.checked = q.retrying;
        box.dataset.config = q.label;
        box.addEventListener("change", function () { toggleRetry(q.rule, box.checked, data.quarantined); });
        label.append(box, " retry anyway");
        li.append(el("strong", q.label), " — " + q.failure_kind + ": " + q.signature + " ",
          el("span", q.retrying ? "(will run)" : "(skipped)", q.retrying ? "warn" : "muted"), " ", label);
        ul.append(li);
      });
      preview.append(ul);
    }
    if (data.skips.length) {
      preview.append(el("h3", "Points skipped by the context cap"));
      const ul = el("ul");
      data.skips.forEach(function (s) {
        ul.append(el("li", s.point + " in " + s.runs + " run(s): " + s.reason));
      });
      preview.append(ul);
    }
    const table = el("table", null, "grid");
    const head = el("tr");
    ["#", "Configuration", "Status", "Points planned"].forEach(function (h) { head.append(el("th", h)); });
    table.append(el("thead"));
    table.tHead.append(head);
    const body = el("tbody");
    data.runs.forEach(function (r, i) {
      const tr = el("tr");
      tr.append(el("td", String(i + 1), "num"), el("td", r.label));
      const status = el("td");
      status.append(el("span", r.status, "badge r-" + r.status));
      if (r.reason) status.append(" ", el("span", r.reason, "reason"));
      tr.append(status, el("td", r.planned + " / " + r.points, "num"));
      body.append(tr);
    });
    table.append(body);
    preview.append(table);
  }

  // source "data": send the data (the form view, or a change made on the data such as a
  // retry tick) and take its YAML text back; "yaml": send the text and take the data back.
  function refresh(source) {
    const mine = ++seq;
    const sendData = source === "data" && state;
    const body = new URLSearchParams(sendData
      ? { editor: "form", spec_json: JSON.stringify(ordered(state)) }
      : { editor: "yaml", spec_yaml: editor.value });
    if (sendData) yamlEditedSinceSync = false;
    return fetch(form.dataset.previewUrl, {
      method: "POST",
      headers: { "X-CSRFToken": csrf, "Content-Type": "application/x-www-form-urlencoded" },
      body: body,
      credentials: "same-origin",
    })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (data) {
        if (mine !== seq) return;
        lastAnswer = data;
        if (sendData && data.parsed && !yamlEditedSinceSync) editor.value = data.spec_yaml;
        if (!sendData) state = data.parsed && isObject(data.data) ? data.data : null;
        render(data);
      })
      .catch(function (err) {
        if (mine === seq) preview.replaceChildren(el("p", "Preview unavailable: " + err.message, "error"));
      });
  }

  function changed(immediately) {
    syncHidden();
    clearTimeout(timer);
    timer = setTimeout(function () { refresh("data"); }, immediately ? 0 : 300);
  }

  function syncHidden() {
    editorInput.value = mode;
    jsonInput.value = mode === "form" && state ? JSON.stringify(ordered(state)) : "";
  }

  function showMode(next) {
    mode = next;
    formPanel.hidden = mode !== "form";
    yamlPanel.hidden = mode !== "yaml";
    document.querySelectorAll(".tabs [role=tab]").forEach(function (tab) {
      tab.setAttribute("aria-selected", String(tab.dataset.editor === mode));
    });
    syncHidden();
  }

  document.querySelectorAll(".tabs [role=tab]").forEach(function (tab) {
    tab.addEventListener("click", function () {
      const next = tab.dataset.editor;
      if (next === mode) return;
      clearTimeout(timer);
      if (next === "form") {
        // Parse the YAML as it is now; the form shows it once it parses.
        showMode("yaml");
        refresh("yaml").then(function () {
          if (!state) { errorList.prepend(el("li", "The YAML must parse before the form can show it.")); return; }
          showMode("form");
          renderForm();
          placeErrors(lastAnswer ? lastAnswer.errors || [] : []);
        });
      } else {
        showMode("yaml");
        if (state) refresh("data");  // the text of the data as the form left it
        else placeErrors(lastAnswer ? lastAnswer.errors || [] : []);
      }
    });
  });

  editor.addEventListener("input", function () {
    yamlEditedSinceSync = true;
    clearTimeout(timer);
    timer = setTimeout(function () { refresh("yaml"); }, 350);
  });

  form.addEventListener("submit", function () { clearTimeout(timer); syncHidden(); });

  // The page's text and data are the same spec: the first preview reads the text, which
  // keeps its comments until the form changes something.
  showMode(mode);
  if (mode === "form") renderForm();
  refresh("yaml").then(function () { if (mode === "form") renderForm(); });
})();
