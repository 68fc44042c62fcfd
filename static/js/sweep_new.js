// Sweep builder: the server draws the form, the YAML view and the plan preview, and htmx
// posts every edit (see templates/runs/sweep_new.html). What is left to the browser is to
// say so when an edit got no answer, instead of leaving a stale plan on the page.
(function () {
  "use strict";
  const form = document.getElementById("builder");
  if (!form) return;

  function unavailable(reason) {
    const note = document.createElement("p");
    note.className = "error";
    note.textContent = "Preview unavailable: " + reason;
    document.getElementById("plan-preview").replaceChildren(note);
  }

  form.addEventListener("htmx:responseError", function (event) {
    unavailable("HTTP " + event.detail.xhr.status);
  });
  form.addEventListener("htmx:sendError", function () { unavailable("the server did not answer"); });
})();
