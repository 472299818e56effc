// einc explain: navigation for the page (everything works without it; it only opens, filters, jumps).
(function () {
  "use strict";
  var steps = Array.prototype.slice.call(document.querySelectorAll(".step"));
  var navItems = Array.prototype.slice.call(document.querySelectorAll("#steplist li"));

  // Open every <details> around (and at) an element, then bring it into view.
  function reveal(el) {
    for (var node = el; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    el.scrollIntoView({ block: "start" });
  }
  function revealHash() {
    if (!location.hash) return;
    var el = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (el) reveal(el);
  }
  window.addEventListener("hashchange", revealHash);

  // Filter: by name, and "changed only".
  var filter = document.getElementById("filter");
  var changedOnly = document.getElementById("changed-only");
  function applyFilter() {
    var text = filter.value.trim().toLowerCase();
    var onlyChanged = changedOnly.checked;
    navItems.forEach(function (li) {
      var hide = (text && li.dataset.name.indexOf(text) < 0) || (onlyChanged && li.classList.contains("unchanged"));
      li.classList.toggle("hidden", !!hide);
    });
    steps.forEach(function (step) {
      var hide = (text && step.dataset.name.indexOf(text) < 0) || (onlyChanged && step.classList.contains("unchanged"));
      step.classList.toggle("hidden", !!hide);
    });
    document.querySelectorAll("details.group").forEach(function (group) {
      var visible = group.querySelectorAll(".step:not(.hidden)").length;
      group.classList.toggle("hidden", visible === 0);
    });
  }
  filter.addEventListener("input", applyFilter);
  changedOnly.addEventListener("change", applyFilter);

  function setAll(open) {
    document.querySelectorAll("details.step, details.group").forEach(function (d) { d.open = open; });
  }
  document.getElementById("expand").addEventListener("click", function () { setAll(true); });
  document.getElementById("collapse").addEventListener("click", function () { setAll(false); });

  // Keys: j / k next / previous changed step, b the first bad step.
  var changed = steps.filter(function (s) { return s.classList.contains("changed"); });
  var current = -1;
  document.addEventListener("keydown", function (event) {
    if (event.target && (event.target.tagName === "INPUT" || event.metaKey || event.ctrlKey || event.altKey)) return;
    if ((event.key === "j" || event.key === "k") && changed.length) {
      current = Math.max(0, Math.min(changed.length - 1, current + (event.key === "j" ? 1 : -1)));
      location.hash = changed[current].id;
    } else if (event.key === "b") {
      var bad = document.getElementById("first-bad");
      if (bad) location.hash = bad.getAttribute("href").slice(1);
    }
  });

  // The navigation follows the step in view.
  if ("IntersectionObserver" in window) {
    var byId = {};
    navItems.forEach(function (li) { byId[li.querySelector("a").getAttribute("href").slice(1)] = li; });
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        var li = byId[entry.target.id];
        if (li) li.classList.toggle("current", entry.isIntersecting);
      });
    });
    steps.forEach(function (step) { observer.observe(step); });
  }

  revealHash();
  document.documentElement.setAttribute("data-ready", String(steps.length));
})();
