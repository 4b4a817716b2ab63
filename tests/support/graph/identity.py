"""The Microsoft identity platform endpoints MSAL's confidential client calls for a tenant authority: OpenID
discovery, the v2.0 token endpoint (client credentials), and the instance-discovery endpoint (only reached when the
client points MSAL's `instance_discovery` at it; by default MSAL asks login.microsoftonline.com for a non-Microsoft
host, so the sync must pass `instance_discovery=False` for a custom GRAPH_AUTHORITY_URL)."""

from __future__ import annotations

import secrets
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import jwt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.support.graph.state import LoggedRequest, Token

if TYPE_CHECKING:
    from tests.support.graph.server import GraphEmulator

GRAPH_RESOURCE = "https://graph.microsoft.com"


def aad_error(status: int, error: str, code: int, message: str) -> JSONResponse:
    """The Microsoft identity platform's error body (OAuth2 error, AADSTS code and its text, trace ids)."""
    trace, correlation = str(uuid.uuid4()), str(uuid.uuid4())
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return JSONResponse({
        "error": error,
        "error_description": f"AADSTS{code}: {message} Trace ID: {trace} Correlation ID: {correlation} "
                             f"Timestamp: {stamp}",
        "error_codes": [code], "timestamp": stamp, "trace_id": trace, "correlation_id": correlation,
        "error_uri": f"https://login.microsoftonline.com/error?code={code}"}, status_code=status)


def _log(emulator: GraphEmulator, request: Request, route: str, body: Any = None) -> LoggedRequest:
    entry = LoggedRequest(api="identity", method=request.method, path=request.url.path, route=route,
                          query=dict(request.query_params), mailbox=None, prefer={},
                          client_request_id=request.headers.get("client-request-id"), request_id=str(uuid.uuid4()),
                          authorized=False, body=body)
    with emulator.state.lock:
        emulator.state.log.append(entry)
    return entry


def _known_tenant(emulator: GraphEmulator, tenant: str) -> bool:
    state = emulator.state
    return tenant.lower() in (state.tenant_id.lower(), state.tenant_domain.lower())


def openid_configuration(emulator: GraphEmulator, tenant: str) -> dict[str, Any]:
    base, tid = emulator.authority_url, emulator.state.tenant_id
    return {
        "token_endpoint": f"{base}/{tid}/oauth2/v2.0/token",
        "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
        "jwks_uri": f"{base}/{tid}/discovery/v2.0/keys", "response_modes_supported": ["query", "fragment",
                                                                                      "form_post"],
        "subject_types_supported": ["pairwise"], "id_token_signing_alg_values_supported": ["RS256"],
        "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
        "scopes_supported": ["openid", "profile", "email", "offline_access"],
        "issuer": f"{base}/{tid}/v2.0", "request_uri_parameter_supported": False,
        "userinfo_endpoint": f"{emulator.base_url}/oidc/userinfo",
        "authorization_endpoint": f"{base}/{tid}/oauth2/v2.0/authorize",
        "device_authorization_endpoint": f"{base}/{tid}/oauth2/v2.0/devicecode",
        "http_logout_supported": True, "frontchannel_logout_supported": True,
        "end_session_endpoint": f"{base}/{tid}/oauth2/v2.0/logout",
        "claims_supported": ["sub", "iss", "aud", "exp", "iat", "nbf", "tid", "ver"],
        "tenant_region_scope": "EU", "cloud_instance_name": "microsoftonline.com",
        "cloud_graph_host_name": "graph.windows.net", "msgraph_host": urlparse(emulator.base_url).netloc,
        "rbac_url": "https://pas.windows.net"}


async def discovery(request: Request) -> Response:
    emulator: GraphEmulator = request.app.state.emulator
    tenant = request.path_params["tenant"]
    entry = _log(emulator, request, "discovery")
    if not _known_tenant(emulator, tenant):
        response: Response = aad_error(400, "invalid_tenant", 90002, f"Tenant '{tenant}' not found. Check to make "
                                       "sure you have the correct tenant ID and are signing into the correct cloud.")
    else:
        response = JSONResponse(openid_configuration(emulator, tenant))
    entry.status, entry.ended = response.status_code, time.monotonic()
    return response


async def instance_discovery(request: Request) -> Response:
    emulator: GraphEmulator = request.app.state.emulator
    entry = _log(emulator, request, "instance_discovery")
    endpoint = urlparse(request.query_params.get("authorization_endpoint", ""))
    tenant = endpoint.path.strip("/").split("/")[0] or "common"
    host = urlparse(emulator.authority_url).netloc
    response = JSONResponse({
        "tenant_discovery_endpoint": f"{emulator.authority_url}/{tenant}/v2.0/.well-known/openid-configuration",
        "api-version": "1.1",
        "metadata": [{"preferred_network": host, "preferred_cache": host, "aliases": [host]}]})
    entry.status, entry.ended = 200, time.monotonic()
    return response


async def token(request: Request) -> Response:
    emulator: GraphEmulator = request.app.state.emulator
    form = dict(await request.form())
    tenant = request.path_params["tenant"]
    entry = _log(emulator, request, "token", {k: v for k, v in form.items() if k != "client_secret"})
    response = _token_response(emulator, tenant, form)
    entry.status, entry.ended = response.status_code, time.monotonic()
    return response


def _token_response(emulator: GraphEmulator, tenant: str, form: dict[str, Any]) -> Response:
    state = emulator.state
    fault = state.take_fault("token", None, "POST")
    if fault is not None:
        response = aad_error(fault.status, fault.code, 50196 if fault.status == 429 else 90033, fault.message)
        if fault.retry_after is not None:
            response.headers["Retry-After"] = str(fault.retry_after)
        return response
    if not _known_tenant(emulator, tenant):
        return aad_error(400, "invalid_request", 90002, f"Tenant '{tenant}' not found.")
    if form.get("grant_type") != "client_credentials":
        return aad_error(400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.")
    if form.get("client_id") != state.client_id:
        return aad_error(400, "unauthorized_client", 700016, f"Application with identifier '{form.get('client_id')}'"
                         f" was not found in the directory '{state.tenant_domain}'.")
    if form.get("client_secret") != state.client_secret:
        return aad_error(401, "invalid_client", 7000215, "Invalid client secret provided. Ensure the secret being "
                         "sent in the request is the client secret value, not the client secret ID, for a secret "
                         f"added to app '{state.client_id}'.")
    scope = str(form.get("scope", ""))
    if not scope.endswith("/.default") or " " in scope.strip():
        return aad_error(400, "invalid_scope", 1002012, f"The provided value for scope {scope} is not valid. "
                         "Client credential flows must have a scope value with /.default suffixed to the resource "
                         "identifier (application ID URI).")
    lifetime = state.settings.token_lifetime
    issued = int(time.time())
    claims = {"aud": scope.removesuffix("/.default"), "iss": f"https://sts.windows.net/{state.tenant_id}/",
              "iat": issued, "nbf": issued, "exp": issued + lifetime, "appid": state.client_id,
              "tid": state.tenant_id, "roles": ["Calendars.Read"], "oid": state.client_id,
              "uti": secrets.token_urlsafe(12), "ver": "1.0"}
    access_token = jwt.encode(claims, emulator.signing_key, algorithm="HS256")
    with state.lock:
        state.tokens[access_token] = Token(expires_at=issued + lifetime, scope=scope)
    return JSONResponse({"token_type": "Bearer", "expires_in": lifetime, "ext_expires_in": lifetime,
                         "access_token": access_token})
