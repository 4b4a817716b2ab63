// Uploads with a progress bar (issue 18): "My upload tasks" and a meeting's files page. In each block marked
// `data-uploads`, a form of class "upload" sends its file by XMLHttpRequest with the CSRF header, showing the
// upload's progress; the answer is the block re-read by the server, which replaces it. A file over the block's
// `data-max-bytes` is refused here before sending (the server refuses it too). A refusal is the console's error
// page: its sentence is shown in the block's message (`data-message`, an element's id). Without this script the
// forms post as they are.
"use strict";

(function () {
  function wire(list) {
    const message = document.getElementById(list.dataset.message || "upload-message");
    if (!message) { return; }

    function say(text) {
      message.textContent = text;
      message.hidden = !text;
    }

    function refusal(html) {
      const page = new DOMParser().parseFromString(html, "text/html");
      const error = page.getElementById("error");
      return error ? error.textContent.trim() : "";
    }

    list.addEventListener("submit", function (event) {
      const form = event.target;
      if (!(form instanceof HTMLFormElement) || !form.classList.contains("upload")) { return; }
      event.preventDefault();
      const file = form.querySelector('input[type="file"]');
      const progress = form.querySelector("progress");
      const button = form.querySelector('button[type="submit"]');
      if (!file || !file.files || file.files.length === 0) { return; }
      const maxBytes = Number(list.dataset.maxBytes || "0");
      if (maxBytes > 0 && file.files[0].size > maxBytes) {
        say(list.dataset.tooLarge || "");
        return;
      }
      const body = new FormData();
      form.querySelectorAll("select[name]").forEach(function (field) { body.append(field.name, field.value); });
      body.append("file", file.files[0]);
      const request = new XMLHttpRequest();
      request.open("POST", form.action);
      request.setRequestHeader("X-CSRF-Token", list.dataset.csrf || "");
      request.upload.addEventListener("progress", function (e) {
        if (e.lengthComputable && progress) { progress.value = Math.round((e.loaded / e.total) * 100); }
      });
      request.addEventListener("load", function () {
        if (request.status >= 200 && request.status < 300) {
          say("");
          const fresh = new DOMParser().parseFromString(request.responseText, "text/html");
          list.replaceChildren(...fresh.body.childNodes);
        } else {
          say(refusal(request.responseText) || String(request.status));
          if (button) { button.disabled = false; }
          if (progress) { progress.hidden = true; }
        }
      });
      request.addEventListener("error", function () {
        say(list.dataset.failed || "");
        if (button) { button.disabled = false; }
      });
      say("");
      if (button) { button.disabled = true; }
      if (progress) { progress.value = 0; progress.hidden = false; }
      request.send(body);
    });
  }

  document.querySelectorAll("[data-uploads]").forEach(wire);
})();
