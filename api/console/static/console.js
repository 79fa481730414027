// On a narrow screen the list filters fold behind their summary unless one is set: the
// rows (and the link that opens each) come first. Without JavaScript they stay open.
(function () {
  if (!window.matchMedia("(max-width: 700px)").matches) { return; }
  var folds = document.querySelectorAll("details.fold");
  for (var i = 0; i < folds.length; i++) {
    if (folds[i].getAttribute("data-active") !== "1") { folds[i].open = false; }
  }
  // A table wider than the screen scrolls inside itself: reachable by keyboard too.
  var tables = document.querySelectorAll("main table");
  for (var j = 0; j < tables.length; j++) {
    if (tables[j].scrollWidth > tables[j].clientWidth) { tables[j].setAttribute("tabindex", "0"); }
  }
}());
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
