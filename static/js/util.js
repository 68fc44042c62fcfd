// What the pages' scripts share (window.sweeplab): the one number formatter, an element
// builder that never parses HTML, a JSON fetch, the hatch of a suspect value, a verdict's
// reasons as lines, and the registry of Chart.js instances
// (window.sweeplabCharts, chart id -> Chart, which the browser tests read).
(function () {
  "use strict";
  window.sweeplabCharts = window.sweeplabCharts || {};

  // A measured value: no decimals from 100 up, two below, then its unit; "no value" when
  // missing. The num filter (runs/templatetags/sweeplab_format.py) writes tables the same way.
  function fmt(value, unit) {
    if (value === null || value === undefined) return "no value";
    const n = Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(2);
    return unit ? n + " " + unit : n;
  }

  // A new element with a class and a text (set as text, never as HTML).
  function el(tag, className, content) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (content !== undefined && content !== null) node.textContent = String(content);
    return node;
  }

  // GET a JSON endpoint; rejects with the server's {"error"} message, else the HTTP status.
  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().catch(function () { return {}; }).then(function (body) {
          if (!response.ok) throw new Error(body.error || "HTTP " + response.status);
          return body;
        });
      });
  }

  // A partial answers a bad parameter with a 400 whose (escaped) message it asks htmx to
  // show in place (HX-Retarget): swap it rather than drop it as an error.
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr.status === 400 && event.detail.xhr.getResponseHeader("HX-Retarget")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  // A suspect value's fill: diagonal lines in its colour over a pale wash of it (a
  // CanvasPattern, one per colour), so that it never looks like a clean bar.
  const patterns = {};
  function hatch(colour) {
    if (patterns[colour]) return patterns[colour];
    const tile = document.createElement("canvas");
    tile.width = tile.height = 8;
    const g = tile.getContext("2d");
    g.globalAlpha = 0.22;
    g.fillStyle = colour;
    g.fillRect(0, 0, 8, 8);
    g.globalAlpha = 1;
    g.strokeStyle = colour;
    g.lineWidth = 2;
    g.beginPath();
    g.moveTo(-2, 10); g.lineTo(10, -2);
    g.moveTo(-2, 2); g.lineTo(2, -2);
    g.moveTo(6, 10); g.lineTo(10, 6);
    g.stroke();
    patterns[colour] = g.createPattern(tile, "repeat");
    return patterns[colour];
  }

  // A point's verdict reasons as lines: a list of {code, message} or one text.
  function reasonLines(reasons) {
    if (!reasons) return [];
    if (typeof reasons === "string") return [reasons];
    return reasons.map(function (r) { return r && typeof r === "object" ? r.code + ": " + r.message : String(r); });
  }

  window.sweeplab = { fmt: fmt, el: el, getJSON: getJSON, hatch: hatch, reasonLines: reasonLines };
})();
