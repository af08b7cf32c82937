/* Findings filters: show all, one class, or one property.  No dependencies, no network. */
(function () {
  "use strict";
  function apply(bar, list, filter) {
    bar.querySelectorAll("button[data-filter]").forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.getAttribute("data-filter") === filter));
    });
    list.querySelectorAll(".finding").forEach(function (card) {
      card.hidden = !(filter === "all" || card.dataset.klass === filter ||
                      card.dataset.property.split(" ").indexOf(filter) >= 0);
    });
  }
  document.querySelectorAll("[data-filters]").forEach(function (bar) {
    var list = document.getElementById(bar.getAttribute("data-filters"));
    if (!list) { return; }
    bar.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-filter]");
      if (button) { apply(bar, list, button.getAttribute("data-filter")); }
    });
  });
  /* Following a link to a finding that a filter hides shows every finding again. */
  function reveal() {
    var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (target && target.classList.contains("finding") && target.hidden) {
      var list = target.parentElement;
      var bar = document.querySelector('[data-filters="' + list.id + '"]');
      if (bar) { apply(bar, list, "all"); }
      target.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", reveal);
})();
