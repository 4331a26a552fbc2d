// The import uploads (documents, traces): refuse a file over FAULTLINE_MAX_UPLOAD_MB before sending
// it (the server checks again), and say so in the form's alert. Every chosen file is checked.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var input = event.target;
    if (!input.matches || !input.matches(".import-form input[type=file]")) return;
    var form = input.form;
    var max = parseInt(form.dataset.maxBytes, 10);
    var error = form.querySelector("[role=alert]");
    var files = Array.prototype.slice.call(input.files || []);
    var big = files.filter(function (file) { return max && file.size > max; });
    var message = big.map(function (file) {
      return "'" + file.name + "' is " + (file.size / 1048576).toFixed(1) + " MB; uploads are limited to " +
        form.dataset.maxMb + " MB.";
    }).join(" ");
    input.setCustomValidity(message ? "Too large" : "");
    if (error) error.textContent = message;
  });
})();
