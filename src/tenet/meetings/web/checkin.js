// The check-in page the QR codes lead to (/meetingattendance/check-in/<id>?mode=online|offline[&code=...]; the
// offline code's address always carries its code, a rotating online code's the current one).
// It only calls the public JSON API: the rules (window, lateness, device limit, rate limit) live in the service.
// A random device id is kept in localStorage so one browser checks in one person per meeting; an access token
// (when a user signs in) stays in page memory only.
"use strict";

const API = "/api/v1";
const BASE = `${API}/meeting-attendance`;
const meetingId = decodeURIComponent(window.location.pathname.split("/").pop() || "");
const query = new URLSearchParams(window.location.search);
const mode = query.get("mode") === "online" ? "online" : "offline";
const code = query.get("code");
const DEVICE_KEY = "tenet.ma.device_id";

const MESSAGES = {
  CHECK_IN_WINDOW_CLOSED: "Check-in for this meeting is closed.",
  MEETING_CANCELLED: "This meeting was cancelled.",
  MEETING_NOT_FOUND: "This meeting does not exist (or was deleted). Check the code you scanned.",
  DEVICE_ALREADY_USED: "This device was already used to check someone else in to this meeting. " +
    "Each person checks in with their own phone.",
  CHECK_IN_MODE_DISABLED: "This kind of check-in is turned off for this meeting. Scan the code shown in the room.",
  CHECK_IN_CODE_REQUIRED: "Scan the code shown on the screen in the room.",
  CHECK_IN_CODE_INVALID: "This code is not valid. Scan the code shown on the screen again.",
  CHECK_IN_CODE_EXPIRED: "This code has expired: scan the screen again.",
  CHECK_IN_OFFLINE_CODE_REQUIRED: "This printed code is out of date. Scan the code shown in the room, " +
    "or ask the organizer for the current one.",
  CHECK_IN_OFFLINE_CODE_INVALID: "This is not the printed code of this meeting. Scan the code shown in the room.",
  GUEST_NAME_REQUIRED: "Please enter your name.",
  GUEST_CHECKIN_LIMIT_REACHED: "Too many check-ins from this network right now. Wait a minute and try again.",
  INVALID_CREDENTIALS: "Email or password is wrong.",
  RATE_LIMITED: "Too many attempts. Wait a little and try again.",
  VALIDATION_FAILED: "Please check what you entered (the email address in particular).",
};

let meeting = null;

function show(element, visible) { element.hidden = !visible; }

function say(text) {
  const box = document.getElementById("message");
  box.textContent = text;
  show(box, Boolean(text));
}

function deviceId() {
  let id = null;
  try { id = window.localStorage.getItem(DEVICE_KEY); } catch (_) { /* storage blocked: one id per page load */ }
  if (!id || !/^[A-Za-z0-9_-]{8,64}$/.test(id)) {
    id = (window.crypto && crypto.randomUUID) ? crypto.randomUUID()
      : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
    try { window.localStorage.setItem(DEVICE_KEY, id); } catch (_) { /* see above */ }
  }
  return id;
}

function localTime(iso, zone) {
  const options = { dateStyle: "full", timeStyle: "short" };
  const there = new Date(iso).toLocaleString(undefined, { ...options, timeZone: zone });
  const here = new Date(iso).toLocaleString(undefined, options);
  const mine = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return mine === zone ? `${there} (${zone})` : `${there} (${zone}) · ${here} your time`;
}

async function problem(response) {
  try {
    const body = await response.json();
    if (body.code === "CHECK_IN_WINDOW_NOT_OPEN" && meeting) {
      return { code: body.code, text: `Check-in opens at ${localTime(body.opens_at, meeting.timezone)}.` };
    }
    return { code: body.code, text: MESSAGES[body.code] || body.detail || `Request failed (${response.status}).` };
  } catch (_) {
    return { code: null, text: `Request failed (${response.status}).` };
  }
}

function done(result) {
  let title;
  if (result.already_checked_in) {
    title = "You were already checked in.";
  } else if (result.status === "LATE") {
    const minutes = Math.max(1, Math.round((result.late_by_seconds || 0) / 60));
    title = `Checked in, ${minutes} min late.`;
  } else {
    title = "Checked in. Welcome!";
  }
  document.getElementById("done-title").textContent = title;
  const at = result.checked_in_at ? localTime(result.checked_in_at, meeting.timezone) : "";
  document.getElementById("done-detail").textContent = at ? `Recorded at ${at}.` : "";
  show(document.getElementById("done"), true);
  show(document.getElementById("guest"), false);
  show(document.getElementById("sign-in"), false);
  show(document.getElementById("show-sign-in"), false);
  say("");
}

async function post(url, body, token) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  return fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
}

async function submit(event, run) {
  event.preventDefault();
  const button = event.target.querySelector("button[type=submit]");
  button.disabled = true;
  try {
    await run();
  } catch (error) {
    say(error.message);
  } finally {
    button.disabled = false;
  }
}

async function guestCheckIn() {
  const value = (id) => document.getElementById(id).value.trim() || null;
  const body = { name: value("guest-name") || "", email: value("guest-email"), phone: value("guest-phone"),
                 organization: value("guest-organization"), device_id: deviceId(), mode };
  if (code) body.code = code;
  const response = await post(`${BASE}/public/meetings/${encodeURIComponent(meetingId)}/check-in`, body);
  if (!response.ok) throw new Error((await problem(response)).text);
  done(await response.json());
}

async function userCheckIn() {
  const tokenResponse = await fetch(`${API}/auth/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "password", username: document.getElementById("sign-in-email").value,
                                password: document.getElementById("sign-in-password").value }),
  });
  if (!tokenResponse.ok) throw new Error((await problem(tokenResponse)).text);
  const token = (await tokenResponse.json()).access_token;
  const body = { device_id: deviceId(), mode };
  if (code) body.code = code;
  const response = await post(`${BASE}/meetings/${encodeURIComponent(meetingId)}/check-in`, body, token);
  if (!response.ok) throw new Error((await problem(response)).text);
  done(await response.json());
}

async function load() {
  const response = await fetch(`${BASE}/public/meetings/${encodeURIComponent(meetingId)}`);
  if (!response.ok) {
    say((await problem(response)).text);
    return;
  }
  meeting = await response.json();
  document.getElementById("title").textContent = meeting.title;
  document.title = `Check in: ${meeting.title} · Tenet`;
  document.getElementById("when").textContent = localTime(meeting.start_time, meeting.timezone);
  document.getElementById("where").textContent = [meeting.location, meeting.city].filter(Boolean).join(", ");
  const windowText = document.getElementById("window");
  if (meeting.status === "CANCELLED") {
    windowText.textContent = MESSAGES.MEETING_CANCELLED;
    return;
  }
  const closes = new Date(meeting.check_in.closes_at);
  if (new Date() >= closes || (!meeting.check_in.open && new Date(meeting.check_in.opens_at) <= new Date())) {
    windowText.textContent = MESSAGES.CHECK_IN_WINDOW_CLOSED;
  } else if (!meeting.check_in.open) {
    windowText.textContent = `Check-in opens at ${localTime(meeting.check_in.opens_at, meeting.timezone)}.`;
  } else {
    windowText.textContent = `Check-in is open until ${localTime(meeting.check_in.closes_at, meeting.timezone)}. ` +
      `Arriving more than ${meeting.late_grace_minutes} min after the start counts as late.`;
  }
  show(document.getElementById("guest"), true);
  show(document.getElementById("show-sign-in"), true);
}

document.getElementById("guest").addEventListener("submit", (event) => submit(event, guestCheckIn));
document.getElementById("sign-in").addEventListener("submit", (event) => submit(event, userCheckIn));
document.getElementById("show-sign-in").addEventListener("click", () => {
  show(document.getElementById("sign-in"), true);
  show(document.getElementById("guest"), false);
  show(document.getElementById("show-sign-in"), false);
});
load();
