"""Social collaboration (spec 000): profiles and settings, agents, friendships, groups, schedule items and
subscriptions, the inbox, todos and automations, schema `social`."""
