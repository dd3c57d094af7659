/*
 * Rating page helpers (no inline scripts, so a strict Content-Security-Policy can be added later):
 *  - seconds on task: from when the item was first shown to submit (kept per assignment in sessionStorage,
 *    so a reload or a form error does not restart the clock);
 *  - seconds of audio played: media time actually played (seeks are not counted), also kept per assignment;
 *  - keys 1-5 pick a score when focus is not in a text field;
 *  - after htmx swaps in the next item, focus its heading and scroll to the top.
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

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || !/^[1-5]$/.test(event.key)) {
      return;
    }
    var target = event.target;
    if (target && (target.isContentEditable || /^(TEXTAREA|SELECT)$/.test(target.tagName) ||
        (target.tagName === "INPUT" && !/^(radio|checkbox)$/.test(target.type)))) {
      return;
    }
    var radio = document.querySelector("form[data-rating-form] input[name='score'][value='" + event.key + "']");
    if (radio) {
      radio.checked = true;
      radio.focus();
      event.preventDefault();
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
