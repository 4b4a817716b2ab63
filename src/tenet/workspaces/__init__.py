"""Workspaces, members and email invitations (spec 002's worked example), schema `workspace`."""
