/*
 * Confirmation before destructive buttons (loaded by base.html): a form with data-confirm="…", or the submit button
 * pressed with data-confirm="…" (forms with several actions), asks window.confirm with that text; Cancel stops the
 * submit before htmx or the browser sends it. htmx elements use hx-confirm, which htmx asks itself. The question
 * says what happens and what is lost, so the answer is an informed one. No dependencies, no inline script.
 */
(function () {
  "use strict";

  // Capture phase on the document: runs before htmx's own submit handler on the form.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    var question = (button && button.getAttribute("data-confirm")) || (form && form.getAttribute("data-confirm"));
    if (question && !window.confirm(question)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
})();
