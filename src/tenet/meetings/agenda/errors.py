"""Stable error codes of the meeting agenda (issue 11; spec §资料上传 names UPLOAD_TASK_NOT_OWNED,
ATTACHMENT_MIME_NOT_ALLOWED, ATTACHMENT_MIME_MISMATCH, ATTACHMENT_TOO_LARGE). Values never change."""

from __future__ import annotations

from enum import StrEnum

from tenet.kernel.errors import DomainError


class AgendaErrorCode(StrEnum):
    AGENDA_SECTION_NOT_FOUND = "AGENDA_SECTION_NOT_FOUND"
    AGENDA_ITEM_NOT_FOUND = "AGENDA_ITEM_NOT_FOUND"
    AGENDA_ORDER_MISMATCH = "AGENDA_ORDER_MISMATCH"
    PRESENTER_NOT_FOUND = "PRESENTER_NOT_FOUND"
    UPLOAD_TASK_NOT_FOUND = "UPLOAD_TASK_NOT_FOUND"
    UPLOAD_TASK_NOT_PENDING = "UPLOAD_TASK_NOT_PENDING"
    UPLOAD_TASK_ALREADY_PENDING = "UPLOAD_TASK_ALREADY_PENDING"
    UPLOAD_TASK_ASSIGNEE_INVALID = "UPLOAD_TASK_ASSIGNEE_INVALID"
    UPLOAD_TASK_NOT_OWNED = "UPLOAD_TASK_NOT_OWNED"
    ATTACHMENT_NOT_FOUND = "ATTACHMENT_NOT_FOUND"
    ATTACHMENT_NOT_OWN = "ATTACHMENT_NOT_OWN"
    ATTACHMENT_MIME_NOT_ALLOWED = "ATTACHMENT_MIME_NOT_ALLOWED"
    ATTACHMENT_MIME_MISMATCH = "ATTACHMENT_MIME_MISMATCH"
    ATTACHMENT_TOO_LARGE = "ATTACHMENT_TOO_LARGE"
    ATTACHMENT_UPLOAD_MALFORMED = "ATTACHMENT_UPLOAD_MALFORMED"
    ATTACHMENT_CATEGORY_INVALID = "ATTACHMENT_CATEGORY_INVALID"
    ATTACHMENT_NOT_DELETED = "ATTACHMENT_NOT_DELETED"
    ATTACHMENT_RESTORE_WINDOW_PASSED = "ATTACHMENT_RESTORE_WINDOW_PASSED"
    ATTACHMENT_PARENT_DELETED = "ATTACHMENT_PARENT_DELETED"
    RANGE_NOT_SATISFIABLE = "RANGE_NOT_SATISFIABLE"


class AgendaSectionNotFound(DomainError):
    status, code, title = 404, AgendaErrorCode.AGENDA_SECTION_NOT_FOUND, "No such agenda section"


class AgendaItemNotFound(DomainError):
    status, code, title = 404, AgendaErrorCode.AGENDA_ITEM_NOT_FOUND, "No such agenda item"


class AgendaOrderMismatch(DomainError):
    """MA-INV-21: a reorder names exactly the live rows; the problem carries the current ids."""

    status, code, title = 409, AgendaErrorCode.AGENDA_ORDER_MISMATCH, "The ids are not the current sections or items"


class PresenterNotFound(DomainError):
    status, code, title = 422, AgendaErrorCode.PRESENTER_NOT_FOUND, "The presenter is not an active account"


class UploadTaskNotFound(DomainError):
    status, code, title = 404, AgendaErrorCode.UPLOAD_TASK_NOT_FOUND, "No such upload task"


class UploadTaskNotPending(DomainError):
    status, code, title = 409, AgendaErrorCode.UPLOAD_TASK_NOT_PENDING, "The upload task is no longer pending"


class UploadTaskAlreadyPending(DomainError):
    status, code, title = (409, AgendaErrorCode.UPLOAD_TASK_ALREADY_PENDING,
                           "This person already has a pending upload task on this item")


class UploadTaskAssigneeInvalid(DomainError):
    status, code, title = (422, AgendaErrorCode.UPLOAD_TASK_ASSIGNEE_INVALID,
                           "Assignees must be active participants of the meeting")


class UploadTaskNotOwned(DomainError):
    status, code, title = (403, AgendaErrorCode.UPLOAD_TASK_NOT_OWNED,
                           "You have no upload task on this agenda item")


class AttachmentNotFound(DomainError):
    status, code, title = 404, AgendaErrorCode.ATTACHMENT_NOT_FOUND, "No such attachment"


class AttachmentNotOwn(DomainError):
    status, code, title = 403, AgendaErrorCode.ATTACHMENT_NOT_OWN, "Only the uploader or a manager may delete this"


class AttachmentMimeNotAllowed(DomainError):
    status, code, title = 415, AgendaErrorCode.ATTACHMENT_MIME_NOT_ALLOWED, "This file type is not accepted"


class AttachmentMimeMismatch(DomainError):
    status, code, title = (415, AgendaErrorCode.ATTACHMENT_MIME_MISMATCH,
                           "The file's content does not match its declared type")


class AttachmentTooLarge(DomainError):
    status, code, title = 413, AgendaErrorCode.ATTACHMENT_TOO_LARGE, "The file is larger than the upload limit"


class AttachmentUploadMalformed(DomainError):
    status, code, title = (400, AgendaErrorCode.ATTACHMENT_UPLOAD_MALFORMED,
                           "Send multipart/form-data with exactly one part named file")


class AttachmentCategoryInvalid(DomainError):
    status, code, title = 422, AgendaErrorCode.ATTACHMENT_CATEGORY_INVALID, "Category is MINUTES, MATERIAL or OTHER"


class AttachmentNotDeleted(DomainError):
    status, code, title = 409, AgendaErrorCode.ATTACHMENT_NOT_DELETED, "The attachment is not deleted"


class AttachmentRestoreWindowPassed(DomainError):
    status, code, title = (409, AgendaErrorCode.ATTACHMENT_RESTORE_WINDOW_PASSED,
                           "The attachment was deleted too long ago to restore")


class AttachmentParentDeleted(DomainError):
    status, code, title = (409, AgendaErrorCode.ATTACHMENT_PARENT_DELETED,
                           "The agenda item or meeting of this attachment is deleted")


class RangeNotSatisfiable(DomainError):
    status, code, title = 416, AgendaErrorCode.RANGE_NOT_SATISFIABLE, "The range is outside the file"
