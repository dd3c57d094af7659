/*
 * htmx errors, handled once for the whole site (loaded by base.html). htmx swaps nothing when the server answers
 * 4xx/5xx or cannot be reached, so without this a button that failed (e.g. "Test connection" while the task queue
 * is down: 503 "The work could not be queued") leaves the page as it was, and an old result reads as the new one.
 *
 * On htmx:responseError, htmx:sendError and htmx:timeout this shows the server's message where the answer would
 * have gone: an alert box in front of the request's target (inside it, first, for targets that collect results with
 * hx-swap="afterbegin"), or as a banner at the top of the page when the target is gone. The message is the error
 * page's summary ([data-error-summary] of templates/_error.html: heading, why, what to do), else its
 * [role=alert] text, a JSON {"detail", "advice"}, or the plain text of the answer. What the target still shows is
 * marked stale (class htmx-stale, and said so in the box) until a later request to it succeeds. A polling panel
 * that fails keeps one box, updated, and keeps polling through a 5xx or a dropped connection; a 4xx (the row is
 * gone, or no longer the user's) stops it.
 *
 * Elements inside [data-htmx-errors="own"] handle their errors themselves (the rating form: rating.js retries).
 * No dependencies; no inline script or style (a strict CSP can come).
 */
(function () {
  "use strict";

  var MAX_TEXT = 600;
  var boxes = new WeakMap();  // element that sent the request -> its error box

  function ownsErrors(elt) {
    return elt && elt.closest && elt.closest("[data-htmx-errors='own']");
  }

  function actionName(elt) {
    var button = elt;
    if (elt && elt.tagName === "FORM") {
      button = elt.querySelector("button[type='submit'], button:not([type]), input[type='submit']");
    }
    var text = button && (button.getAttribute("aria-label") || button.textContent || button.value || "");
    text = (text || "").replace(/\s+/g, " ").trim();
    return text.length > 60 ? text.slice(0, 57) + "…" : text;
  }

  function textOf(text) {
    text = (text || "").replace(/\s+/g, " ").trim();
    return text.length > MAX_TEXT ? text.slice(0, MAX_TEXT - 1) + "…" : text;
  }

  /* The nodes that say what the server answered: the error page's summary, or a paragraph of text. */
  function messageNodes(xhr) {
    var body = xhr && typeof xhr.responseText === "string" ? xhr.responseText : "";
    var type = (xhr && xhr.getResponseHeader && xhr.getResponseHeader("Content-Type")) || "";
    if (type.indexOf("json") !== -1) {
      try {
        var data = JSON.parse(body);
        var parts = [data.detail, data.advice].filter(function (p) { return typeof p === "string" && p; });
        if (parts.length) {
          return [paragraph(textOf(parts.join(" ")))];
        }
      } catch (e) {
        /* not JSON after all: fall through to the text */
      }
    }
    if (type.indexOf("html") !== -1 || /^\s*</.test(body)) {
      var doc = new DOMParser().parseFromString(body, "text/html");
      var summary = doc.querySelector("[data-error-summary]");
      if (summary) {
        // Our own error page, escaped by the server as any htmx swap is; ids and live regions are dropped so
        // the copy does not clash with the page around it.
        var nodes = Array.prototype.map.call(summary.children, function (child) {
          var copy = document.importNode(child, true);
          copy.removeAttribute("id");
          copy.removeAttribute("role");
          copy.querySelectorAll("[id]").forEach(function (el) { el.removeAttribute("id"); });
          if (/^H[1-6]$/.test(copy.tagName)) {  // headings of a page become plain strong text in a box
            var strong = document.createElement("p");
            strong.className = "htmx-error-title";
            strong.textContent = copy.textContent.trim();
            return strong;
          }
          return copy;
        });
        if (nodes.length) {
          return nodes;
        }
      }
      var alert = doc.querySelector("[role='alert']") || doc.querySelector("main") || doc.body;
      var text = alert ? textOf(alert.textContent) : "";
      return text ? [paragraph(text)] : [];
    }
    return body.trim() ? [paragraph(textOf(body))] : [];
  }

  function paragraph(text) {
    var p = document.createElement("p");
    p.textContent = text;
    return p;
  }

  function headline(elt, kind, xhr, polling) {
    var what = actionName(elt);
    var subject = polling ? "This panel could not be refreshed" : what ? "“" + what + "” did not work" :
      "The request did not work";
    if (kind === "network") {
      return subject + ": the server could not be reached (it is down, restarting, or the network failed).";
    }
    if (kind === "timeout") {
      return subject + ": the server did not answer in time.";
    }
    return subject + ": the server answered " + xhr.status + (xhr.statusText ? " " + xhr.statusText : "") + ".";
  }

  function where(detail) {
    var target = detail.target;
    var elt = detail.elt;
    if (!target || !target.isConnected) {
      return { banner: true };
    }
    var swap = (elt && elt.getAttribute && (elt.closest("[hx-swap]") || elt).getAttribute("hx-swap")) || "innerHTML";
    return { target: target, inside: /^(afterbegin|beforeend)/.test(swap) };
  }

  function banner() {
    var region = document.getElementById("htmx-error-banner");
    if (!region) {
      region = document.createElement("div");
      region.id = "htmx-error-banner";
      region.className = "htmx-error-banner";
      var main = document.getElementById("main") || document.body;
      main.insertBefore(region, main.firstChild);
    }
    return region;
  }

  function clear(elt) {
    var old = boxes.get(elt);
    if (old) {
      if (old.staleTarget) {
        old.staleTarget.classList.remove("htmx-stale");
        old.staleTarget.removeAttribute("data-stale-note");
      }
      old.remove();
      boxes.delete(elt);
    }
  }

  function show(event, kind) {
    var detail = event.detail || {};
    var elt = detail.elt;
    if (!elt || ownsErrors(elt)) {
      return;
    }
    var xhr = detail.xhr || {};
    var verb = (detail.requestConfig && detail.requestConfig.verb) || "";
    var polling = verb.toLowerCase() === "get" && /every\s/.test(elt.getAttribute("hx-trigger") || "");
    // A poll refused for good (403, 404, 410: the row is gone or no longer the user's) stops polling; a 5xx,
    // a timeout or a dropped connection may pass, so it keeps polling.
    var stopped = polling && kind === "status" && xhr.status >= 400 && xhr.status < 500;
    if (stopped) {
      elt.setAttribute("data-polling-stopped", "");
    }
    clear(elt);

    var box = document.createElement("div");
    box.className = "message message-error htmx-error";
    box.setAttribute("role", "alert");
    var title = document.createElement("p");
    title.className = "htmx-error-headline";
    title.textContent = headline(elt, kind, xhr, polling);
    box.appendChild(title);
    if (kind === "status") {
      messageNodes(xhr).forEach(function (node) { box.appendChild(node); });
    }

    var place = where(detail);
    var stale = document.createElement("p");
    stale.className = "htmx-error-stale";
    if (place.banner) {
      stale.textContent = "Nothing on this page was updated.";
      box.appendChild(stale);
    } else if (place.inside) {
      stale.textContent = "Nothing new was added: what is listed below is from before.";
      box.appendChild(stale);
    } else {
      stale.textContent = !polling ? "What is shown below is from before this request: it was not updated." :
        stopped ? "What the panel shows is from its last refresh; it stopped refreshing: reload the page." :
        "What the panel shows is from its last refresh; it keeps trying.";
      box.appendChild(stale);
      place.target.classList.add("htmx-stale");
      place.target.setAttribute("data-stale-note", "not updated");
      box.staleTarget = place.target;
    }
    if (!polling) {
      var dismiss = document.createElement("button");
      dismiss.type = "button";
      dismiss.className = "button-link htmx-error-dismiss";
      dismiss.textContent = "Dismiss";
      dismiss.addEventListener("click", function () { clear(elt); });
      box.appendChild(dismiss);
    }

    if (place.banner) {
      banner().appendChild(box);
    } else if (place.inside) {
      place.target.insertBefore(box, place.target.firstChild);
    } else {
      place.target.parentNode.insertBefore(box, place.target);
    }
    boxes.set(elt, box);
    if (!polling && box.scrollIntoView) {
      box.scrollIntoView({ block: "nearest" });
    }
  }

  document.addEventListener("htmx:responseError", function (event) { show(event, "status"); });
  document.addEventListener("htmx:sendError", function (event) { show(event, "network"); });
  document.addEventListener("htmx:timeout", function (event) { show(event, "timeout"); });
  // A later answer that worked: the error it replaces goes, and the target is current again.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (elt && elt.hasAttribute && elt.hasAttribute("data-polling-stopped")) {
      event.preventDefault();
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var detail = event.detail || {};
    if (detail.successful && detail.elt) {
      clear(detail.elt);
    }
  });
})();
