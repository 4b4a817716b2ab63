from __future__ import annotations

from enum import StrEnum

from tenet.kernel.errors import DomainError, NotAuthenticated


class IamErrorCode(StrEnum):
    EMAIL_INVALID = "EMAIL_INVALID"
    EMAIL_TAKEN = "EMAIL_TAKEN"
    PASSWORD_TOO_WEAK = "PASSWORD_TOO_WEAK"
    INVALID_CREDENTIALS = "INVALID_CREDENTIALS"
    INVALID_CLIENT = "INVALID_CLIENT"
    UNSUPPORTED_GRANT_TYPE = "UNSUPPORTED_GRANT_TYPE"
    INVALID_REFRESH_TOKEN = "INVALID_REFRESH_TOKEN"
    REFRESH_TOKEN_EXPIRED = "REFRESH_TOKEN_EXPIRED"
    REFRESH_TOKEN_REUSED = "REFRESH_TOKEN_REUSED"
    UNKNOWN_ROLE = "UNKNOWN_ROLE"
    UNKNOWN_SCOPE = "UNKNOWN_SCOPE"
    USER_NOT_FOUND = "USER_NOT_FOUND"
    API_CLIENT_NOT_FOUND = "API_CLIENT_NOT_FOUND"
    LAST_ADMINISTRATOR = "LAST_ADMINISTRATOR"
    USER_STATE_CONFLICT = "USER_STATE_CONFLICT"
    ACCOUNT_NOT_ACTIVE = "ACCOUNT_NOT_ACTIVE"
    RESET_TOKEN_INVALID = "RESET_TOKEN_INVALID"


class EmailInvalid(DomainError):
    status, code, title = 422, IamErrorCode.EMAIL_INVALID, "The email address is not valid"


class EmailTaken(DomainError):
    status, code, title = 409, IamErrorCode.EMAIL_TAKEN, "An account with this email address already exists"


class PasswordTooWeak(DomainError):
    status, code, title = 422, IamErrorCode.PASSWORD_TOO_WEAK, "The password is too weak"


class InvalidCredentials(NotAuthenticated):
    code, title = IamErrorCode.INVALID_CREDENTIALS, "Email or password is wrong"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail, error="invalid_grant")  # RFC 6749 name, for OAuth2 client libraries


class InvalidClient(NotAuthenticated):
    code, title = IamErrorCode.INVALID_CLIENT, "Client id or secret is wrong"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail, error="invalid_client")


class UnsupportedGrantType(DomainError):
    status, code, title = 400, IamErrorCode.UNSUPPORTED_GRANT_TYPE, "Unsupported grant_type"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail, error="unsupported_grant_type")


class InvalidRefreshToken(NotAuthenticated):
    code, title = IamErrorCode.INVALID_REFRESH_TOKEN, "The refresh token is not valid"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail, error="invalid_grant")


class RefreshTokenExpired(InvalidRefreshToken):
    code, title = IamErrorCode.REFRESH_TOKEN_EXPIRED, "The refresh token has expired"


class RefreshTokenReused(InvalidRefreshToken):
    """A spent refresh token came back: someone holds a copy. The whole family is revoked, and that
    revocation must commit although the request fails."""

    code, title = IamErrorCode.REFRESH_TOKEN_REUSED, "Refresh token reuse detected; sign in again"
    commits_transaction = True


class UnknownRole(DomainError):
    status, code, title = 422, IamErrorCode.UNKNOWN_ROLE, "No such role"


class UnknownScope(DomainError):
    status, code, title = 422, IamErrorCode.UNKNOWN_SCOPE, "No such scope"


class UserNotFound(DomainError):
    status, code, title = 404, IamErrorCode.USER_NOT_FOUND, "No such user"


class ApiClientNotFound(DomainError):
    status, code, title = 404, IamErrorCode.API_CLIENT_NOT_FOUND, "No such API client"


class LastAdministrator(DomainError):
    status, code, title = 409, IamErrorCode.LAST_ADMINISTRATOR, "The last active Administrator must stay"


class UserStateConflict(DomainError):
    """The account is not in a state this change applies to (enabling an active account, say)."""

    status, code, title = 409, IamErrorCode.USER_STATE_CONFLICT, "The account is not in a state that allows this"


class AccountNotActive(DomainError):
    """A command needs an active account (to join a workspace, to receive ownership ...) and this one is
    disabled or deleted: decided under the account's row lock, so a concurrent deletion cannot slip in."""

    status, code, title = 409, IamErrorCode.ACCOUNT_NOT_ACTIVE, "The account is not active"


class ResetTokenInvalid(DomainError):
    """The password-reset link is unknown, used, expired, or its account is no longer active: one answer for all,
    so the link tells nothing about the account (tenet.iam.password_reset)."""

    status, code, title = 400, IamErrorCode.RESET_TOKEN_INVALID, "The password-reset link is not valid any more"
