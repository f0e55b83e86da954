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
  var picker = document.getElementById("strategy-picker");
  if (picker) {
    picker.addEventListener("change", function () {
      views.forEach(function (view) {
        view.signal(SIGNAL, picker.value).runAsync();
      });
    });
  }
})();
