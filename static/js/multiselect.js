/* Searchable multi-select: turns <select multiple data-searchable="LALMs"> into a filter box and a list of
 * checkboxes that keep the select's options in step (the select stays in the form and is what gets posted).
 * Without JavaScript the plain multi-select list still works. No dependencies. */
(function () {
  "use strict";

  function enhance(select) {
    var noun = select.getAttribute("data-searchable") || "options";
    var wrapper = document.createElement("div");
    wrapper.className = "multiselect";

    var search = document.createElement("input");
    search.type = "search";
    search.id = select.id + "_search";
    search.className = "multiselect-search";
    search.placeholder = "Filter " + noun + "…";
    search.setAttribute("autocomplete", "off");

    var list = document.createElement("ul");
    list.className = "multiselect-options";
    list.id = select.id + "_options";
    search.setAttribute("aria-controls", list.id);

    var status = document.createElement("p");
    status.className = "multiselect-status";
    status.setAttribute("aria-live", "polite");

    var tools = document.createElement("div");
    tools.className = "multiselect-tools";
    var all = document.createElement("button");
    all.type = "button";
    all.className = "button-link";
    all.textContent = "Choose all shown";
    var none = document.createElement("button");
    none.type = "button";
    none.className = "button-link";
    none.textContent = "Clear";
    tools.appendChild(all);
    tools.appendChild(none);

    var boxes = [];
    Array.prototype.forEach.call(select.options, function (option, index) {
      var item = document.createElement("li");
      var label = document.createElement("label");
      var box = document.createElement("input");
      box.type = "checkbox";
      box.id = select.id + "_opt" + index;
      box.value = option.value;
      box.checked = option.selected;
      box.addEventListener("change", function () {
        option.selected = box.checked;
        update();
      });
      label.appendChild(box);
      label.appendChild(document.createTextNode(" " + option.text));
      item.appendChild(label);
      list.appendChild(item);
      boxes.push({ box: box, option: option, item: item, text: option.text.toLowerCase() });
    });

    function update() {
      var chosen = boxes.filter(function (b) { return b.box.checked; }).length;
      var shown = boxes.filter(function (b) { return !b.item.hidden; }).length;
      status.textContent = chosen + " of " + boxes.length + " " + noun + " chosen" +
        (shown < boxes.length ? " · " + shown + " shown" : "");
    }

    function setShown(checked) {
      boxes.forEach(function (b) {
        if (!b.item.hidden) {
          b.box.checked = checked;
          b.option.selected = checked;
        }
      });
      update();
    }

    search.addEventListener("input", function () {
      var needle = search.value.trim().toLowerCase();
      boxes.forEach(function (b) { b.item.hidden = needle !== "" && b.text.indexOf(needle) === -1; });
      update();
    });
    search.addEventListener("keydown", function (event) {
      if (event.key === "Enter") {  // Enter in the filter must not submit the form
        event.preventDefault();
        var first = boxes.filter(function (b) { return !b.item.hidden; })[0];
        if (first) first.box.focus();
      }
    });
    all.addEventListener("click", function () { setShown(true); });
    none.addEventListener("click", function () { setShown(false); });

    var fieldLabel = document.querySelector('label[for="' + select.id + '"]');
    if (fieldLabel) {
      fieldLabel.htmlFor = search.id;
      list.setAttribute("aria-label", fieldLabel.textContent.trim());
    }
    var described = select.getAttribute("aria-describedby");
    if (described) search.setAttribute("aria-describedby", described);

    select.hidden = true;
    select.setAttribute("aria-hidden", "true");
    select.tabIndex = -1;
    select.parentNode.insertBefore(wrapper, select);
    wrapper.appendChild(search);
    wrapper.appendChild(tools);
    wrapper.appendChild(list);
    wrapper.appendChild(status);
    wrapper.appendChild(select);
    update();
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("select[multiple][data-searchable]"), enhance);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
