/* turnrl pages: draw the figures of #report-data with the inlined plotly.js. */
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  for (const figure of DATA.figures) {
    const div = document.getElementById("fig-" + figure.key);
    if (div) {
      Plotly.newPlot(div, figure.figure.data, figure.figure.layout,
                     {displaylogo: false, responsive: true, displayModeBar: "hover"});
    }
  }
})();
