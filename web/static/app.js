// anima's only script: keep the conversation scrolled to the newest message, draw the Inner life charts (uPlot),
// and keep one card per tick on Thoughts.
// Everything else is htmx.
document.addEventListener("htmx:afterSwap", (event) => {
  const box = document.getElementById("conversation");
  if (box && box.contains(event.detail.target) || event.detail.target === box) box.scrollTop = box.scrollHeight;
});
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("conversation");
  if (box) box.scrollTop = box.scrollHeight;
});

// Inner life: draw the uPlot charts whose data the server embedded (<script type="application/json">).
const CHART_COLOURS = ["#1e88e5", "#e53935", "#43a047", "#fb8c00"];
function drawCharts() {
  if (typeof uPlot === "undefined") return;
  document.querySelectorAll("[data-chart]:not([data-drawn])").forEach((box) => {
    box.dataset.drawn = "1";
    const chart = JSON.parse(document.getElementById(box.dataset.chart).textContent);
    if (!chart.x.length) return;
    const series = chart.series.map((s, i) => ({
      label: s.label, stroke: CHART_COLOURS[i % CHART_COLOURS.length], spanGaps: true,
      width: s.points_only ? 0 : 1.5, points: { show: s.points_only || chart.x.length < 40, size: s.points_only ? 8 : 4 },
    }));
    new uPlot({ width: Math.max(280, box.clientWidth || 600), height: 220, series: [{}, ...series],
                axes: [{}, { label: chart.y_label }] }, [chart.x, ...chart.series.map((s) => s.values)], box);
  });
}
document.addEventListener("DOMContentLoaded", drawCharts);
document.addEventListener("htmx:afterSwap", drawCharts);

// Thoughts: a tick shown while it ran is replaced by its closed card when that arrives live (the newer one, on top).
document.addEventListener("htmx:sseMessage", () => {
  const seen = new Set();
  document.querySelectorAll("#ticks article.tick").forEach((card) => {
    if (seen.has(card.id)) card.remove(); else seen.add(card.id);
  });
});

// An error shows in #flash (htmx-config in base.html) until the human's next change succeeds.
document.addEventListener("htmx:afterRequest", (event) => {
  const flash = document.getElementById("flash");
  if (flash && event.detail.successful && event.detail.requestConfig && event.detail.requestConfig.verb !== "get") {
    flash.replaceChildren();
  }
});
