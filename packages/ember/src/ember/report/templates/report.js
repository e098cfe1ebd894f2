// Filter frames by name/file; expand or collapse every <details>. No network, no libraries.
(function () {
  var filter = document.getElementById("frame-filter");
  filter.addEventListener("input", function () {
    var q = filter.value.toLowerCase();
    document.querySelectorAll(".frame, .frame-row").forEach(function (el) {
      var hay = (el.getAttribute("data-name") || "").toLowerCase();
      el.classList.toggle("hidden", q !== "" && hay.indexOf(q) < 0);
    });
  });
  function setAll(open) {
    document.querySelectorAll("details").forEach(function (d) { d.open = open; });
  }
  document.getElementById("expand-all").addEventListener("click", function () { setAll(true); });
  document.getElementById("collapse-all").addEventListener("click", function () { setAll(false); });
  document.body.setAttribute("data-ready", "yes");  // the script ran (the browser test reads it)
})();
