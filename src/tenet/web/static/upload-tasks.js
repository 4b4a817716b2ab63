// "My upload tasks" (issue 18): each pending task's form uploads its file by XMLHttpRequest, showing the upload's
// progress; the answer is the task list re-read by the server, which replaces the page's. A refusal is the console's
// error page: its sentence is shown above the list. Without this script the forms post as they are.
"use strict";

(function () {
  const list = document.getElementById("tasks");
  const message = document.getElementById("upload-message");
  if (!list || !message) { return; }

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
    const body = new FormData();
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
})();
