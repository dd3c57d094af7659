/* Copy buttons: <button data-copy="ID"> copies the text of the element with that id to the clipboard and says so
 * in the next .copy-status element (a live region). Where the Clipboard API is refused (an insecure origin), the
 * text is selected so that Ctrl+C copies it. No dependencies. */
(function () {
  "use strict";

  function status(button, text) {
    var region = button.parentElement && button.parentElement.querySelector(".copy-status");
    if (region) {
      region.textContent = text;
    }
  }

  function select(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (!button) {
      return;
    }
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) {
      return;
    }
    var text = source.textContent.trim();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () {
        status(button, "Copied.");
      }, function () {
        select(source);
        status(button, "Selected: press Ctrl+C (⌘C) to copy.");
      });
    } else {
      select(source);
      status(button, "Selected: press Ctrl+C (⌘C) to copy.");
    }
  });
})();
