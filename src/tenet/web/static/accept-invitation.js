// The invitation page: sign in (or register), then POST /api/v1/invitations/accept with the mail's token.
// The access token stays in memory only; nothing is written to storage.
"use strict";

const API = "/api/v1";
const token = new URLSearchParams(window.location.search).get("token");

// What a person should read for each stable problem code (the API's detail is the fallback).
const MESSAGES = {
  INVALID_CREDENTIALS: "Email or password is wrong.",
  EMAIL_TAKEN: "An account with this email already exists: sign in instead.",
  PASSWORD_TOO_WEAK: "Choose a longer password (at least 10 characters).",
  INVITATION_TOKEN_INVALID: "This invitation link is no longer valid. It may have been replaced by a newer mail.",
  INVITATION_EXPIRED: "This invitation has expired. Ask for a new one.",
  INVITATION_REVOKED: "This invitation was withdrawn.",
  INVITATION_ALREADY_ACCEPTED: "This invitation has already been accepted.",
  INVITATION_EMAIL_MISMATCH: "This invitation was sent to another email address. Sign in with that address.",
  ALREADY_MEMBER: "You are already a member of this workspace.",
  WORKSPACE_NOT_ACTIVE: "This workspace is being deleted and no longer accepts members.",
  RATE_LIMITED: "Too many attempts. Wait a little and try again.",
};

function show(element, visible) { element.hidden = !visible; }

function say(text) {
  const box = document.getElementById("message");
  box.textContent = text;
  show(box, Boolean(text));
}

async function problemText(response) {
  try {
    const problem = await response.json();
    return MESSAGES[problem.code] || problem.detail || `Request failed (${response.status}).`;
  } catch (_) {
    return `Request failed (${response.status}).`;
  }
}

function invitationToken() {
  return token || document.getElementById("code").value.trim();
}

async function signIn(email, password) {
  const response = await fetch(`${API}/auth/token`, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "password", username: email, password }),
  });
  if (!response.ok) throw new Error(await problemText(response));
  return (await response.json()).access_token;
}

async function register(displayName, email, password) {
  const response = await fetch(`${API}/auth/register`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ email, password, display_name: displayName }),
  });
  if (!response.ok) throw new Error(await problemText(response));
}

async function accept(accessToken) {
  const response = await fetch(`${API}/invitations/accept`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${accessToken}` },
    body: JSON.stringify({ token: invitationToken() }),
  });
  if (!response.ok) throw new Error(await problemText(response));
  return response.json();
}

function finished(accepted) {
  for (const id of ["sign-in", "register", "show-register", "code-section", "intro"]) {
    show(document.getElementById(id), false);
  }
  say("");
  const { name, role } = accepted.workspace;
  document.getElementById("done-title").textContent = `You joined ${name} as ${role}.`;
  show(document.getElementById("done"), true);
}

async function run(form, steps) {
  const button = form.querySelector("button[type=submit]");
  if (!invitationToken()) { say("Enter the invitation code from your mail."); return; }
  button.disabled = true;
  say("");
  try {
    finished(await steps());
  } catch (error) {
    say(error.message);
  } finally {
    button.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  show(document.getElementById("code-section"), !token);

  document.getElementById("sign-in").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    run(form, async () => accept(await signIn(form.email.value.trim(), form.password.value)));
  });

  document.getElementById("show-register").addEventListener("click", () => {
    show(document.getElementById("register"), true);
    show(document.getElementById("sign-in"), false);
    show(document.getElementById("show-register"), false);
  });

  document.getElementById("register").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    run(form, async () => {
      const email = form.email.value.trim();
      await register(form.display_name.value.trim(), email, form.password.value);
      return accept(await signIn(email, form.password.value));
    });
  });
});
