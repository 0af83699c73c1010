/* A table wider than the text column scrolls sideways inside its own box (book.css); this marks the box that
   holds it, so that book.css can say so above the table. Marked when the page has loaded and again when the
   window changes size (a phone turned sideways may fit the table). */
(function () {
  function mark() {
    document.querySelectorAll("article table").forEach(function (table) {
      table.parentElement.classList.toggle("scrolls", table.scrollWidth > table.clientWidth + 1);
    });
  }
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
})();
