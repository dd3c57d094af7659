/* The completion page sends a participant back to the crowd platform after a visible countdown, which a "Stay on
 * this page" button stops (WCAG 2.2.1: a time limit the user can turn off; a <meta refresh> cannot be stopped).
 * Without JavaScript the link on the page does the same. */
(function () {
  "use strict";
  var box = document.querySelector(".completion-countdown");
  if (!box) {
    return;
  }
  var url = box.getAttribute("data-redirect-url");
  var left = parseInt(box.getAttribute("data-seconds"), 10) || 5;
  var shown = box.querySelector(".completion-seconds");
  box.hidden = false;
  var timer = window.setInterval(function () {
    left -= 1;
    if (left <= 0) {
      window.clearInterval(timer);
      window.location.assign(url);
      return;
    }
    shown.textContent = String(left);
  }, 1000);
  box.querySelector(".completion-stay").addEventListener("click", function () {
    window.clearInterval(timer);
    box.querySelector("[role=status]").textContent = "You stay on this page: use the button above when you are ready.";
    this.hidden = true;
  });
})();
