// The full-screen code display (/meetingattendance/display/<id>) for managers and the organizer. The SVG the API
// returns is parsed with DOMParser and inserted as nodes (no innerHTML, no inline script or style: the CSP holds).
// A rotating online code is fetched again when it expires.
"use strict";

const API = "/api/v1";
const BASE = `${API}/meeting-attendance`;
const meetingId = decodeURIComponent(window.location.pathname.split("/").pop() || "");
let token = null;

function say(text) {
  const box = document.getElementById("message");
  box.textContent = text;
  box.hidden = !text;
}

async function call(path) {
  const response = await fetch(`${BASE}${path}`, { headers: { Authorization: `Bearer ${token}` } });
  if (!response.ok) {
    let detail = `Request failed (${response.status}).`;
    try { detail = (await response.json()).detail || detail; } catch (_) { /* keep the status */ }
    throw new Error(detail);
  }
  return response.json();
}

function place(target, svgText, url) {
  const parsed = new DOMParser().parseFromString(svgText, "image/svg+xml").documentElement;
  const node = document.importNode(parsed, true);
  node.setAttribute("data-url", url);
  node.setAttribute("role", "img");
  target.replaceChildren(node);
}

async function refresh(mode) {
  const shown = await call(`/meetings/${encodeURIComponent(meetingId)}/display-code?mode=${mode}`);
  place(document.getElementById(`${mode}-code`), shown.svg, shown.url);
  if (shown.refresh_after_seconds) {
    window.setTimeout(() => refresh(mode).catch((error) => say(error.message)), shown.refresh_after_seconds * 1000);
  }
}

async function counts() {
  const meeting = await call(`/meetings/${encodeURIComponent(meetingId)}`);
  const summary = meeting.attendance_summary;
  if (summary) {
    document.getElementById("count").textContent =
      `Checked in: ${summary.present + summary.late} of ${summary.expected} expected` +
      ` · ${summary.guests} guests · ${summary.walk_ins} walk-ins`;
  }
  return meeting;
}

async function start() {
  const meeting = await counts();
  document.getElementById("title").textContent = meeting.title;
  document.getElementById("when").textContent = new Date(meeting.start_time).toLocaleString(undefined, {
    dateStyle: "full", timeStyle: "short", timeZone: meeting.timezone });
  document.getElementById("offline").hidden = !meeting.offline_checkin_enabled;
  await refresh("online");
  if (meeting.offline_checkin_enabled) await refresh("offline");
  document.getElementById("sign-in-panel").hidden = true;
  document.getElementById("codes").hidden = false;
  window.setInterval(() => counts().catch(() => {}), 10000);
}

document.getElementById("sign-in").addEventListener("submit", async (event) => {
  event.preventDefault();
  const response = await fetch(`${API}/auth/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "password", username: document.getElementById("sign-in-email").value,
                                password: document.getElementById("sign-in-password").value }),
  });
  if (!response.ok) {
    say("Email or password is wrong.");
    return;
  }
  token = (await response.json()).access_token;
  try {
    await start();
    say("");
  } catch (error) {
    say(error.message);
  }
});
