// Sweep builder: a live plan preview of the YAML being written. Text is inserted with
// textContent only, so nothing the user or the server writes is parsed as HTML.
(function () {
  "use strict";
  const form = document.getElementById("builder");
  const editor = document.getElementById("id_spec_yaml");
  const preview = document.getElementById("plan-preview");
  const errorList = document.getElementById("spec-errors");
  if (!form || !editor || !preview) return;
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  let timer = null;
  let seq = 0;

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function showErrors(errors) {
    errorList.replaceChildren();
    errors.forEach(function (e) {
      const li = el("li");
      if (e.path) li.append(el("code", e.path), " ");
      li.append(e.message);
      errorList.append(li);
    });
  }

  function render(data) {
    preview.replaceChildren();
    showErrors(data.errors || []);
    if (!data.valid) {
      preview.append(el("p", "Fix the errors to see the plan.", "error"));
      return;
    }
    const t = data.totals;
    preview.append(el("h2", t.runs + " runs, " + t.points + " points (" + t.skipped_points + " skipped)"));
    (data.warnings || []).forEach(function (w) { preview.append(el("p", "warning: " + w, "warn")); });
    if (data.quarantined.length) {
      preview.append(el("h3", "Quarantined configurations"));
      const ul = el("ul");
      data.quarantined.forEach(function (q) {
        const li = el("li");
        li.append(el("strong", q.label), " — " + q.failure_kind + ": " + q.signature +
          (q.retrying ? " (retrying: options.retry_quarantined is true)" : " (skipped)"));
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

  function refresh() {
    const mine = ++seq;
    const body = new URLSearchParams({ spec_yaml: editor.value });
    fetch(form.dataset.previewUrl, {
      method: "POST",
      headers: { "X-CSRFToken": csrf, "Content-Type": "application/x-www-form-urlencoded" },
      body: body,
      credentials: "same-origin",
    })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (data) { if (mine === seq) render(data); })
      .catch(function (err) {
        if (mine === seq) { preview.replaceChildren(el("p", "Preview unavailable: " + err.message, "error")); }
      });
  }

  editor.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(refresh, 350);
  });
  refresh();
})();
