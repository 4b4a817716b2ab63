"""The Outlook sync through Microsoft Graph (spec 001 "Outlook 同步架构", issue 17; docs/design/outlook.md)."""
