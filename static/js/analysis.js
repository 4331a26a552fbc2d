// Analysis page: when a difference cell loads its sensitivity panel (htmx), mark that cell as the selected one.
document.addEventListener("htmx:beforeRequest", function (event) {
  var cell = event.target.closest && event.target.closest("table.diff td");
  if (!cell) return;
  document.querySelectorAll("table.diff td.selected").forEach(function (td) {
    td.classList.remove("selected");
    td.removeAttribute("aria-current");
  });
  cell.classList.add("selected");
  cell.setAttribute("aria-current", "true");
});
