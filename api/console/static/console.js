// Live refresh of the overview, the one thing the console does with JavaScript. Every
// page works without it. Off unless the reader ticks the box; the choice is remembered.
(function () {
  var box = document.getElementById("live-refresh");
  if (!box) { return; }
  var seconds = parseInt(box.getAttribute("data-interval") || "10", 10);
  var timer = null;
  function arm() {
    if (timer) { clearTimeout(timer); timer = null; }
    if (box.checked) { timer = setTimeout(function () { window.location.reload(); }, seconds * 1000); }
  }
  box.checked = window.localStorage.getItem("citeledger-live") === "1";
  box.addEventListener("change", function () {
    window.localStorage.setItem("citeledger-live", box.checked ? "1" : "0");
    arm();
  });
  arm();
}());
