"""Stable error codes of social collaboration. Values never change (ARCHITECTURE.md "Conventions").

404 for anything the caller may not know exists (other users' rows, items without `view`, private groups they
are not in); 403 when the caller sees the object but lacks the right. Extra problem members are ids, states and
roles, never names or content."""

from __future__ import annotations

from enum import StrEnum

from tenet.kernel.errors import DomainError, RateLimited


class SocialErrorCode(StrEnum):
    PROFILE_NOT_FOUND = "PROFILE_NOT_FOUND"
    USER_NOT_FOUND = "USER_NOT_FOUND"
    FRIENDSHIP_NOT_FOUND = "FRIENDSHIP_NOT_FOUND"
    GROUP_NOT_FOUND = "GROUP_NOT_FOUND"
    GROUP_MEMBER_NOT_FOUND = "GROUP_MEMBER_NOT_FOUND"
    GROUP_INVITATION_NOT_FOUND = "GROUP_INVITATION_NOT_FOUND"
    SCHEDULE_ITEM_NOT_FOUND = "SCHEDULE_ITEM_NOT_FOUND"
    SUBSCRIPTION_NOT_FOUND = "SUBSCRIPTION_NOT_FOUND"
    SUBSCRIPTION_SUBJECT_NOT_FOUND = "SUBSCRIPTION_SUBJECT_NOT_FOUND"
    INBOX_MESSAGE_NOT_FOUND = "INBOX_MESSAGE_NOT_FOUND"
    TODO_NOT_FOUND = "TODO_NOT_FOUND"
    AUTOMATION_NOT_FOUND = "AUTOMATION_NOT_FOUND"
    AUTOMATION_TARGET_NOT_FOUND = "AUTOMATION_TARGET_NOT_FOUND"
    CALENDAR_FEED_NOT_FOUND = "CALENDAR_FEED_NOT_FOUND"
    RECIPIENT_UNAVAILABLE = "RECIPIENT_UNAVAILABLE"
    FRIENDSHIP_ACTION_FORBIDDEN = "FRIENDSHIP_ACTION_FORBIDDEN"
    GROUP_ROLE_FORBIDDEN = "GROUP_ROLE_FORBIDDEN"
    INVITEE_NOT_FRIEND = "INVITEE_NOT_FRIEND"
    GROUP_REJOIN_NEEDS_INVITATION = "GROUP_REJOIN_NEEDS_INVITATION"
    NOT_GROUP_MEMBER = "NOT_GROUP_MEMBER"
    SCHEDULE_ITEM_PERMISSION_DENIED = "SCHEDULE_ITEM_PERMISSION_DENIED"
    PERMISSION_EXCEEDS_GRANTOR = "PERMISSION_EXCEEDS_GRANTOR"
    FRIEND_REQUEST_ALREADY_PENDING = "FRIEND_REQUEST_ALREADY_PENDING"
    ALREADY_FRIENDS = "ALREADY_FRIENDS"
    FRIENDSHIP_BLOCKED = "FRIENDSHIP_BLOCKED"
    FRIEND_REQUEST_COOLDOWN = "FRIEND_REQUEST_COOLDOWN"
    FRIENDSHIP_STATE_CONFLICT = "FRIENDSHIP_STATE_CONFLICT"
    GROUP_NOT_ACTIVE = "GROUP_NOT_ACTIVE"
    ALREADY_GROUP_MEMBER = "ALREADY_GROUP_MEMBER"
    GROUP_INVITATION_ALREADY_PENDING = "GROUP_INVITATION_ALREADY_PENDING"
    GROUP_CREATOR_CANNOT_LEAVE = "GROUP_CREATOR_CANNOT_LEAVE"
    GROUP_FULL = "GROUP_FULL"
    SUBSCRIPTION_EXISTS = "SUBSCRIPTION_EXISTS"
    CANNOT_SUBSCRIBE_OWNER = "CANNOT_SUBSCRIBE_OWNER"
    SUBSCRIPTION_STATE_CONFLICT = "SUBSCRIPTION_STATE_CONFLICT"
    INBOX_MESSAGE_ALREADY_ACTED = "INBOX_MESSAGE_ALREADY_ACTED"
    INBOX_MESSAGE_NOT_ACTIONABLE = "INBOX_MESSAGE_NOT_ACTIONABLE"
    INBOX_ACTION_REQUIRED = "INBOX_ACTION_REQUIRED"
    TODO_STATUS_TRANSITION_INVALID = "TODO_STATUS_TRANSITION_INVALID"
    AGENT_MIGRATING = "AGENT_MIGRATING"
    AUTOMATION_LIMIT_REACHED = "AUTOMATION_LIMIT_REACHED"
    AUTOMATION_STATE_CONFLICT = "AUTOMATION_STATE_CONFLICT"
    AUTOMATION_RUN_IN_PROGRESS = "AUTOMATION_RUN_IN_PROGRESS"
    SETTINGS_VERSION_OUTDATED = "SETTINGS_VERSION_OUTDATED"
    FRIEND_REQUEST_TO_SELF = "FRIEND_REQUEST_TO_SELF"
    SCHEDULE_ITEM_INVALID = "SCHEDULE_ITEM_INVALID"
    TIMEZONE_INVALID = "TIMEZONE_INVALID"
    RECURRENCE_RULE_INVALID = "RECURRENCE_RULE_INVALID"
    SCHEDULE_WINDOW_INVALID = "SCHEDULE_WINDOW_INVALID"
    PERMISSION_SET_INVALID = "PERMISSION_SET_INVALID"
    EXTRACT_LIMIT_EXCEEDED = "EXTRACT_LIMIT_EXCEEDED"
    AUTOMATION_INVALID = "AUTOMATION_INVALID"
    INBOX_WRITE_LIMIT_REACHED = "INBOX_WRITE_LIMIT_REACHED"
    GROUP_CREATION_LIMIT_REACHED = "GROUP_CREATION_LIMIT_REACHED"


class ProfileNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.PROFILE_NOT_FOUND, 'No such profile'


class UserNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.USER_NOT_FOUND, 'No such user'


class FriendshipNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.FRIENDSHIP_NOT_FOUND, 'No such friendship'


class GroupNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.GROUP_NOT_FOUND, 'No such group'


class GroupMemberNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.GROUP_MEMBER_NOT_FOUND, 'No current member with this user id'


class GroupInvitationNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.GROUP_INVITATION_NOT_FOUND, 'No such open group invitation'


class ScheduleItemNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.SCHEDULE_ITEM_NOT_FOUND, 'No such schedule item'


class SubscriptionNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.SUBSCRIPTION_NOT_FOUND, 'No such subscription'


class SubscriptionSubjectNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.SUBSCRIPTION_SUBJECT_NOT_FOUND, 'No such user or group to subscribe'


class InboxMessageNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.INBOX_MESSAGE_NOT_FOUND, 'No such inbox message'


class TodoNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.TODO_NOT_FOUND, 'No such todo'


class AutomationNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.AUTOMATION_NOT_FOUND, 'No such automation'


class AutomationTargetNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.AUTOMATION_TARGET_NOT_FOUND, 'No such automation target'


class CalendarFeedNotFound(DomainError):
    status, code, title = 404, SocialErrorCode.CALENDAR_FEED_NOT_FOUND, 'No such calendar feed'


class RecipientUnavailable(DomainError):
    status, code, title = 403, SocialErrorCode.RECIPIENT_UNAVAILABLE, 'This person does not accept this from you'


class FriendshipActionForbidden(DomainError):
    status, code, title = 403, SocialErrorCode.FRIENDSHIP_ACTION_FORBIDDEN, 'Only the other party may do this'


class GroupRoleForbidden(DomainError):
    status, code, title = 403, SocialErrorCode.GROUP_ROLE_FORBIDDEN, 'Your group role does not allow this'


class InviteeNotFriend(DomainError):
    status, code, title = 403, SocialErrorCode.INVITEE_NOT_FRIEND, 'Only friends can be invited to a group'


class GroupRejoinNeedsInvitation(DomainError):
    status, code, title = (
        403, SocialErrorCode.GROUP_REJOIN_NEEDS_INVITATION,
        'You were removed from this group: you can come back only by invitation',
    )


class NotGroupMember(DomainError):
    status, code, title = 403, SocialErrorCode.NOT_GROUP_MEMBER, 'Only a current member can share with this group'


class ScheduleItemPermissionDenied(DomainError):
    status, code, title = (
        403, SocialErrorCode.SCHEDULE_ITEM_PERMISSION_DENIED,
        'Your permission on this item does not allow this',
    )


class PermissionExceedsGrantor(DomainError):
    status, code, title = 403, SocialErrorCode.PERMISSION_EXCEEDS_GRANTOR, 'You cannot grant more than you hold'


class FriendRequestAlreadyPending(DomainError):
    status, code, title = (
        409, SocialErrorCode.FRIEND_REQUEST_ALREADY_PENDING,
        'A friend request between you is already pending',
    )


class AlreadyFriends(DomainError):
    status, code, title = 409, SocialErrorCode.ALREADY_FRIENDS, 'You are already friends'


class FriendshipBlocked(DomainError):
    status, code, title = 409, SocialErrorCode.FRIENDSHIP_BLOCKED, 'This friendship is blocked'


class FriendRequestCooldown(DomainError):
    status, code, title = (
        409, SocialErrorCode.FRIEND_REQUEST_COOLDOWN,
        'Your request was declined recently; try again later',
    )


class FriendshipStateConflict(DomainError):
    status, code, title = (
        409, SocialErrorCode.FRIENDSHIP_STATE_CONFLICT,
        'The friendship is not in a state that allows this',
    )


class GroupNotActive(DomainError):
    status, code, title = 409, SocialErrorCode.GROUP_NOT_ACTIVE, 'The group is archived'


class AlreadyGroupMember(DomainError):
    status, code, title = 409, SocialErrorCode.ALREADY_GROUP_MEMBER, 'This person is already a member of the group'


class GroupInvitationAlreadyPending(DomainError):
    status, code, title = (
        409, SocialErrorCode.GROUP_INVITATION_ALREADY_PENDING,
        'This person already has an open invitation to the group',
    )


class GroupCreatorCannotLeave(DomainError):
    status, code, title = (
        409, SocialErrorCode.GROUP_CREATOR_CANNOT_LEAVE,
        'The creator cannot leave or be removed: hand the group over or archive it',
    )


class GroupFull(DomainError):
    status, code, title = 409, SocialErrorCode.GROUP_FULL, 'The group has reached its member limit'


class SubscriptionExists(DomainError):
    status, code, title = (
        409, SocialErrorCode.SUBSCRIPTION_EXISTS,
        'This subject already has a subscription to the item',
    )


class CannotSubscribeOwner(DomainError):
    status, code, title = 409, SocialErrorCode.CANNOT_SUBSCRIBE_OWNER, 'The owner of an item cannot be subscribed to it'


class SubscriptionStateConflict(DomainError):
    status, code, title = (
        409, SocialErrorCode.SUBSCRIPTION_STATE_CONFLICT,
        'The subscription is not in a state that allows this',
    )


class InboxMessageAlreadyActed(DomainError):
    status, code, title = 409, SocialErrorCode.INBOX_MESSAGE_ALREADY_ACTED, 'The message was already answered'


class InboxMessageNotActionable(DomainError):
    status, code, title = (
        409, SocialErrorCode.INBOX_MESSAGE_NOT_ACTIONABLE,
        'This message cannot be accepted or rejected',
    )


class InboxActionRequired(DomainError):
    status, code, title = (
        409, SocialErrorCode.INBOX_ACTION_REQUIRED,
        'Accept or reject this message instead of dismissing it',
    )


class TodoStatusTransitionInvalid(DomainError):
    status, code, title = 409, SocialErrorCode.TODO_STATUS_TRANSITION_INVALID, 'The todo cannot move to this status'


class AgentMigrating(DomainError):
    status, code, title = 409, SocialErrorCode.AGENT_MIGRATING, 'The agent is being migrated; try again later'


class AutomationLimitReached(DomainError):
    status, code, title = (
        409, SocialErrorCode.AUTOMATION_LIMIT_REACHED,
        'You have reached the number of automations allowed',
    )


class AutomationStateConflict(DomainError):
    status, code, title = (
        409, SocialErrorCode.AUTOMATION_STATE_CONFLICT,
        'The automation is not in a state that allows this',
    )


class AutomationRunInProgress(DomainError):
    status, code, title = (
        409, SocialErrorCode.AUTOMATION_RUN_IN_PROGRESS,
        'A manual run of this automation is queued or running; wait until it has finished',
    )


class SettingsVersionOutdated(DomainError):
    status, code, title = 409, SocialErrorCode.SETTINGS_VERSION_OUTDATED, 'Your settings are being migrated; try again'


class FriendRequestToSelf(DomainError):
    status, code, title = 422, SocialErrorCode.FRIEND_REQUEST_TO_SELF, 'You cannot befriend yourself'


class ScheduleItemInvalid(DomainError):
    status, code, title = 422, SocialErrorCode.SCHEDULE_ITEM_INVALID, 'The schedule item is not valid'


class TimezoneInvalid(DomainError):
    status, code, title = 422, SocialErrorCode.TIMEZONE_INVALID, 'Not an IANA time zone this server knows'


class RecurrenceRuleInvalid(DomainError):
    status, code, title = 422, SocialErrorCode.RECURRENCE_RULE_INVALID, 'The recurrence rule is not valid'


class ScheduleWindowInvalid(DomainError):
    status, code, title = 422, SocialErrorCode.SCHEDULE_WINDOW_INVALID, 'The time window is not valid'


class PermissionSetInvalid(DomainError):
    status, code, title = (
        422, SocialErrorCode.PERMISSION_SET_INVALID,
        'A permission set must contain view and only view, invite, edit',
    )


class ExtractLimitExceeded(DomainError):
    status, code, title = 422, SocialErrorCode.EXTRACT_LIMIT_EXCEEDED, 'Too many todos would be extracted at once'


class AutomationInvalid(DomainError):
    status, code, title = 422, SocialErrorCode.AUTOMATION_INVALID, 'The automation is not valid'


class InboxWriteLimitReached(RateLimited):
    code, title = (
        SocialErrorCode.INBOX_WRITE_LIMIT_REACHED,
        'You have sent too many requests, invitations or offers lately',
    )


class GroupCreationLimitReached(RateLimited):
    code, title = SocialErrorCode.GROUP_CREATION_LIMIT_REACHED, 'You have created too many groups lately'
