// Render every chart of the page from its JSON block, then wire the strategy selector.
(function () {
  "use strict";
  var OPTIONS = {
    renderer: "svg",
    actions: { export: true, source: false, compiled: false, editor: false },
  };
  var SIGNAL = "strategy_pick";
  var views = [];
  var blocks = document.querySelectorAll('script[type="application/json"][data-chart]');
  var jobs = Array.prototype.map.call(blocks, function (block) {
    var target = document.getElementById(block.getAttribute("data-chart"));
    return vegaEmbed(target, JSON.parse(block.textContent), OPTIONS)
      .then(function (result) {
        views.push(result.view);
      })
      .catch(function (error) {
        target.setAttribute("data-failed", "true");
        target.textContent = "This chart could not be drawn: " + error;
        console.error("chart " + target.id + " failed: " + error);
      });
  });
  Promise.all(jobs).then(function () {
    document.body.setAttribute("data-charts-done", String(views.length));
  });
  // Text written for one strategy (data-strategy) shows while that strategy is picked; a block
  // with no version for it keeps the all-strategies text.
  function showText(choice) {
    var groups = {};
    document.querySelectorAll("[data-strategy]").forEach(function (el) {
      var key = el.parentNode.id || el.parentNode.tagName;
      (groups[key] = groups[key] || []).push(el);
    });
    Object.keys(groups).forEach(function (key) {
      var items = groups[key];
      var has = items.some(function (el) { return el.getAttribute("data-strategy") === choice; });
      var wanted = has ? choice : "all";
      items.forEach(function (el) { el.hidden = el.getAttribute("data-strategy") !== wanted; });
    });
  }
  var picker = document.getElementById("strategy-picker");
  if (picker) {
    picker.addEventListener("change", function () {
      views.forEach(function (view) {
        view.signal(SIGNAL, picker.value).runAsync();
      });
      showText(picker.value);
    });
  }
})();
