// The agenda editor (issue 18): drag an item to a new place (in its section or into another one) and the new
// order is posted; the move up / move down forms are posted the same way, so the focus stays on the button that
// was pressed. The server answers the re-rendered list, which replaces the page's; a refusal answers the list too,
// with its sentence (someone else changed the agenda: here it is now). Without this script the forms post as they
// are and the page comes back.
"use strict";

(function () {
  const agenda = document.getElementById("agenda");
  if (!agenda) { return; }
  let dragged = null;
  let origin = null;

  function post(url, body, focusId) {
    return fetch(url, {
      method: "POST", body: body, credentials: "same-origin",
      headers: {"X-CSRF-Token": agenda.dataset.csrf || "", "X-Agenda-Fragment": "1"},
    }).then(function (response) {
      return response.text().then(function (html) {
        const contentType = response.headers.get("content-type") || "";
        if (!contentType.startsWith("text/html")) { throw new Error(String(response.status)); }
        const fresh = new DOMParser().parseFromString(html, "text/html");
        if (!fresh.getElementById("sections")) { throw new Error(String(response.status)); }
        agenda.replaceChildren(...fresh.body.childNodes);
        const again = focusId ? document.getElementById(focusId) : null;
        if (again) { again.focus(); }
      });
    }).catch(function () {
      const message = document.createElement("p");
      message.className = "error";
      message.setAttribute("role", "alert");
      message.id = "order-error";
      message.textContent = agenda.dataset.failed || "";
      agenda.prepend(message);
    });
  }

  // Keyboard (and mouse) moves: the button's form, by fetch.
  agenda.addEventListener("submit", function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("move")) { return; }
    event.preventDefault();
    const button = event.submitter;
    const body = new URLSearchParams(new FormData(form));
    if (button && button.name) { body.set(button.name, button.value); }
    post(form.action, body, button ? button.id : null);
  });

  function itemOf(node) {
    return node instanceof Element ? node.closest("li.agenda-item") : null;
  }

  function listOf(node) {
    return node instanceof Element ? node.closest("ol.agenda-items") : null;
  }

  agenda.addEventListener("dragstart", function (event) {
    const item = itemOf(event.target);
    if (!item || item.getAttribute("draggable") !== "true") { return; }
    dragged = item;
    origin = listOf(item);
    item.classList.add("dragging");
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", item.dataset.item || "");
  });

  agenda.addEventListener("dragover", function (event) {
    const list = listOf(event.target);
    if (!dragged || !list) { return; }
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    const over = itemOf(event.target);
    if (over && over !== dragged) {
      const box = over.getBoundingClientRect();
      const after = event.clientY > box.top + box.height / 2;
      list.insertBefore(dragged, after ? over.nextSibling : over);
    } else if (!over) {
      const empty = list.querySelector("li.empty");
      if (empty) { empty.remove(); }
      if (dragged.parentNode !== list) { list.appendChild(dragged); }
    }
  });

  agenda.addEventListener("drop", function (event) {
    const list = listOf(dragged);
    if (!dragged || !list) { return; }
    event.preventDefault();
    const body = new URLSearchParams();
    body.set("section_id", list.dataset.section || "");
    body.set("item_id", dragged.dataset.item || "");
    list.querySelectorAll("li.agenda-item").forEach(function (li) { body.append("ids", li.dataset.item || ""); });
    dragged.classList.remove("dragging");
    dragged = null;
    origin = null;
    post(agenda.dataset.orderUrl, body, null);
  });

  agenda.addEventListener("dragend", function () {
    if (dragged) {  // dropped outside a list: the server's order is shown again
      dragged.classList.remove("dragging");
      dragged = null;
      if (origin) {
        origin = null;
        window.location.reload();
      }
    }
  });
})();
