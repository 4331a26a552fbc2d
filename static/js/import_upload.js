// The import upload: refuse a file over FAULTLINE_MAX_UPLOAD_MB before sending it
// (the server checks again), and say so next to the form.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var input = event.target;
    if (!input.matches || !input.matches(".import-form input[type=file]")) return;
    var form = input.form;
    var max = parseInt(form.dataset.maxBytes, 10);
    var error = form.querySelector("#import-error");
    var file = input.files && input.files[0];
    if (file && max && file.size > max) {
      input.setCustomValidity("Too large");
      error.textContent = "'" + file.name + "' is " + (file.size / 1048576).toFixed(1) +
        " MB; uploads are limited to " + form.dataset.maxMb + " MB.";
    } else {
      input.setCustomValidity("");
      error.textContent = "";
    }
  });
})();
