/*
 * Rating page helpers (no inline scripts, so a strict Content-Security-Policy can be added later):
 *  - seconds on task: from when the item was first shown to submit (kept per assignment in sessionStorage,
 *    so a reload or a form error does not restart the clock);
 *  - seconds of audio played: media time actually played (seeks are not counted), also kept per assignment;
 *  - the keyboard: 1-5 score, q/a/r/u/e codes, space play/pause, Enter submit, s skip, c comment, ? keys;
 *  - after htmx swaps in the next item, focus its heading and scroll to the top;
 *  - a submit that fails (5xx, network error, timeout) says so, keeps the form and is retried once.
 */
(function () {
  "use strict";

  var store = window.sessionStorage;

  function key(assignment, what) {
    return "orca:" + assignment + ":" + what;
  }

  function read(assignment, what) {
    try {
      var value = parseFloat(store.getItem(key(assignment, what)));
      return isFinite(value) ? value : null;
    } catch (e) {
      return null;
    }
  }

  function write(assignment, what, value) {
    try {
      store.setItem(key(assignment, what), String(value));
    } catch (e) {
      /* storage full or disabled: timings are best effort */
    }
  }

  function forget(assignment) {
    try {
      store.removeItem(key(assignment, "shown"));
      store.removeItem(key(assignment, "played"));
    } catch (e) {
      /* ignore */
    }
  }

  function trackAudio(audio, assignment) {
    var last = null;
    audio.addEventListener("playing", function () {
      last = audio.currentTime;
    });
    audio.addEventListener("seeking", function () {
      last = null;
    });
    audio.addEventListener("seeked", function () {
      last = audio.paused ? null : audio.currentTime;
    });
    audio.addEventListener("timeupdate", function () {
      if (audio.paused || audio.seeking) {
        return;
      }
      var now = audio.currentTime;
      if (last !== null) {
        var delta = now - last;
        // timeupdate fires every 15-250 ms; anything larger is a jump, not playback.
        if (delta > 0 && delta < 2) {
          write(assignment, "played", (read(assignment, "played") || 0) + delta);
        }
      }
      last = now;
    });
    audio.addEventListener("pause", function () {
      last = null;
    });
  }

  function init(root) {
    var areas = [];
    if (root.matches && root.matches("#rating-area")) {
      areas.push(root);
    }
    if (root.querySelectorAll) {
      areas = areas.concat(Array.prototype.slice.call(root.querySelectorAll("#rating-area")));
    }
    areas.forEach(function (area) {
      if (area.dataset.jsReady) {
        return;
      }
      area.dataset.jsReady = "1";
      var assignment = area.dataset.assignment;
      if (!assignment) {
        return;
      }
      if (read(assignment, "shown") === null) {
        write(assignment, "shown", Date.now());
      }
      area.querySelectorAll("audio[data-track-playback]").forEach(function (audio) {
        trackAudio(audio, assignment);
      });
    });
  }

  // Capture phase: runs before htmx reads the form's values, and for plain (no-htmx) posts too.
  document.addEventListener(
    "submit",
    function (event) {
      var form = event.target;
      if (!form.matches || !form.matches("form[data-rating-form]")) {
        return;
      }
      var area = form.closest("#rating-area");
      var assignment = area && area.dataset.assignment;
      if (!assignment) {
        return;
      }
      var shown = read(assignment, "shown");
      if (shown !== null) {
        form.elements.seconds_on_task.value = ((Date.now() - shown) / 1000).toFixed(1);
      }
      var played = read(assignment, "played");
      form.elements.audio_seconds_played.value = (played || 0).toFixed(1);
    },
    true
  );

  // The server answered with another item: the old one's timings are no longer needed.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var area = document.getElementById("rating-area");
    var old = area && area.dataset.assignment;
    var xhr = event.detail && event.detail.xhr;
    if (old && xhr && xhr.responseText.indexOf('data-assignment="' + old + '"') === -1) {
      forget(old);
    }
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    if (!event.target || event.target.id !== "rating-area") {
      return;
    }
    var heading = document.getElementById("item-heading") || document.getElementById("done-heading");
    var error = document.querySelector("#rating-area [role='alert']");
    window.scrollTo(0, 0);
    if (error) {
      // Form errors: bring the first one into view instead of the heading.
      error.scrollIntoView({ block: "center" });
      var field = error.closest("fieldset, .field");
      var input = field && field.querySelector("input, textarea");
      if (input) {
        input.focus({ preventScroll: true });
      }
    } else if (heading) {
      heading.focus({ preventScroll: true });
    }
  });

  function isTextField(target) {
    return target && (target.isContentEditable || /^(TEXTAREA|SELECT)$/.test(target.tagName) ||
      (target.tagName === "INPUT" && !/^(radio|checkbox)$/.test(target.type)));
  }

  function toggleKeys() {
    var dialog = document.getElementById("keys-help");
    if (!dialog) {
      return;
    }
    if (dialog.open) {
      dialog.close();
    } else {
      dialog.showModal();
    }
  }

  function submitRating(form) {
    // requestSubmit fires the submit event, so htmx posts it (hx-sync drops a second press while one is in flight).
    // htmx.process is idempotent: it makes sure a form swapped in a moment ago is wired before the key is handled,
    // so a fast key press never falls back to a full-page POST.
    if (window.htmx) {
      window.htmx.process(form);
    }
    if (form.requestSubmit) {
      form.requestSubmit();
    } else {
      form.submit();
    }
  }

  /*
   * Keyboard-only rating: 1-5 score, q/a/r/u/e toggle codes, space play/pause, Enter submit, s skip, c comment,
   * ? shows the keys. Keys typed into text fields are left alone, except Ctrl/Cmd+Enter (submit) and Escape
   * (leave the field).
   */
  document.addEventListener("keydown", function (event) {
    var form = document.querySelector("form[data-rating-form]");
    var target = event.target;
    var dialog = document.getElementById("keys-help");
    if (dialog && dialog.open) {
      if (event.key === "?") {
        dialog.close();
        event.preventDefault();
      }
      return;
    }
    if (!form) {
      return;
    }
    if (isTextField(target)) {
      var skipForm = target.form && target.form.closest("#skip-panel") ? target.form : null;
      if (event.key === "Enter" && skipForm) {
        event.preventDefault();
        submitRating(skipForm);
      } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && form.contains(target)) {
        event.preventDefault();
        submitRating(form);
      } else if (event.key === "Escape") {
        target.blur();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    var key = event.key;
    if (/^[1-5]$/.test(key)) {
      var radio = form.querySelector("input[name='score'][value='" + key + "']");
      if (radio) {
        radio.checked = true;
        radio.focus();
        event.preventDefault();
      }
    } else if (/^[qarueQARUE]$/.test(key)) {
      var box = form.querySelector("input[name='codes'][value='" + key.toUpperCase() + "']");
      if (box) {
        box.checked = !box.checked;
        event.preventDefault();
      }
    } else if (key === " " || key === "Spacebar") {
      if (target && /^(BUTTON|A|SUMMARY)$/.test(target.tagName)) {
        return;
      }
      var audio = document.querySelector("#rating-area audio");
      if (audio) {
        if (audio.paused) {
          audio.play();
        } else {
          audio.pause();
        }
        event.preventDefault();
      }
    } else if (key === "Enter") {
      if (target && /^(BUTTON|A|SUMMARY)$/.test(target.tagName)) {
        return;
      }
      event.preventDefault();
      submitRating(form);
    } else if (key === "s" || key === "S") {
      var skip = document.getElementById("skip-panel");
      if (skip) {
        skip.open = true;
        var reason = skip.querySelector("input[name='reason']");
        if (reason) {
          reason.focus();
        }
        event.preventDefault();
      }
    } else if (key === "c" || key === "C") {
      var comment = form.querySelector("textarea[name='comment']");
      if (comment) {
        comment.focus();
        event.preventDefault();
      }
    } else if (key === "?") {
      toggleKeys();
      event.preventDefault();
    }
  });

  /*
   * A submit that failed (HTTP 5xx, network error, timeout): htmx swaps nothing, so the form keeps the score, codes
   * and comment. Say so where the annotator looks, and send it once more after the server's Retry-After (2 s when
   * there is none, 10 s at most). The retry is safe: the server keeps one rating per annotator and item, so a
   * retry after a response that was lost on the way returns the rating already saved instead of a second one.
   */
  var RETRY_DEFAULT_MS = 2000;
  var RETRY_MAX_MS = 10000;

  function showSubmitStatus(form, text) {
    var box = form.querySelector("[data-submit-status]");
    if (box) {
      box.textContent = text;
      box.hidden = false;
    }
  }

  function retryDelayMs(xhr) {
    var seconds = parseInt(xhr && xhr.getResponseHeader ? xhr.getResponseHeader("Retry-After") : "", 10);
    return isNaN(seconds) ? RETRY_DEFAULT_MS : Math.min(Math.max(seconds, 0) * 1000, RETRY_MAX_MS);
  }

  function submitFailed(event, kind) {
    var form = event.detail && event.detail.elt;
    if (!form || !form.matches || !form.matches("form[data-rating-form]")) {
      return;
    }
    var xhr = event.detail.xhr;
    var reason;
    if (kind === "status") {
      if (xhr.status < 500) {
        showSubmitStatus(form, "Your rating was not saved: the server answered " + xhr.status +
          ". Reload the page (you may have been logged out) and submit again.");
        return;
      }
      reason = xhr.status === 503 ? "the service is briefly unavailable" : "the server had an error (" + xhr.status + ")";
    } else if (kind === "timeout") {
      reason = "the server did not answer in time";
    } else {
      reason = "the connection failed";
    }
    if (form.dataset.retried === "1") {
      delete form.dataset.retried;
      showSubmitStatus(form, "Your rating is still not saved: " + reason + ". Your answers are kept here; " +
        "press Submit rating again in a moment.");
      return;
    }
    form.dataset.retried = "1";
    var delay = retryDelayMs(xhr);
    showSubmitStatus(form, "Your rating was not saved yet: " + reason + ". Your answers are kept; trying again in " +
      Math.round(delay / 1000) + " s…");
    window.setTimeout(function () {
      if (form.isConnected) {
        submitRating(form);
      }
    }, delay);
  }

  document.addEventListener("htmx:responseError", function (event) {
    submitFailed(event, "status");
  });
  document.addEventListener("htmx:sendError", function (event) {
    submitFailed(event, "network");
  });
  document.addEventListener("htmx:timeout", function (event) {
    submitFailed(event, "timeout");
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-show-keys]")) {
      toggleKeys();
    }
  });

  document.addEventListener("htmx:load", function (event) {
    init(event.target);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      init(document);
    });
  } else {
    init(document);
  }
})();
