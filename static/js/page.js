// What every page does, loaded by base.html: the pages carry no inline script (the
// Content-Security-Policy allows scripts from our own static files only), so a control
// that acts on its own says so in a data attribute.
(function () {
  "use strict";
  // A filter's <select data-submit-on-change> submits its form as soon as it changes.
  document.addEventListener("change", function (event) {
    const control = event.target;
    if (control instanceof HTMLElement && control.hasAttribute("data-submit-on-change") && control.form) {
      control.form.submit();
    }
  });
})();
