// Live fragments (the attendance board, the desk's queue) are replaced every few seconds by htmx
// (hx-swap="outerHTML"). Whoever is working in one must not feel it: a table scrolled sideways on a phone stays
// where it was, and the keyboard's focus stays on the same control (the scrolling region, a row's link) instead of
// falling back to the page. What was scrolled or focused is found again by its position in the fragment, since
// the fresh copy holds the same regions and controls in the same order.
(function () {
  "use strict";
  var FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]";
  var kept = null;

  function indexIn(list, element) {
    return Array.prototype.indexOf.call(list, element);
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!event.detail.shouldSwap || !target || !target.id || target.getAttribute("hx-swap") !== "outerHTML") {
      kept = null;
      return;
    }
    var active = document.activeElement;
    kept = {
      id: target.id,
      scroll: Array.prototype.map.call(target.querySelectorAll(".table-scroll"), function (region) {
        return [region.scrollLeft, region.scrollTop];
      }),
      focus: active && active !== target && target.contains(active)
        ? indexIn(target.querySelectorAll(FOCUSABLE), active) : -1
    };
  });

  document.addEventListener("htmx:afterSettle", function () {
    if (!kept) {
      return;
    }
    var fresh = document.getElementById(kept.id);
    var saved = kept;
    kept = null;
    if (!fresh) {
      return;
    }
    Array.prototype.forEach.call(fresh.querySelectorAll(".table-scroll"), function (region, i) {
      if (saved.scroll[i]) {
        region.scrollLeft = saved.scroll[i][0];
        region.scrollTop = saved.scroll[i][1];
      }
    });
    if (saved.focus >= 0) {
      var control = fresh.querySelectorAll(FOCUSABLE)[saved.focus];
      if (control && document.activeElement !== control) {
        control.focus({preventScroll: true});
      }
    }
  });
})();
