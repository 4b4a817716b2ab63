"""The social-app legacy cut-over (issue 20, spec 000 §G): the assumed old schema (docs/legacy-social.md) and
its sample generator, `probe`, the resumable `backfill`, trigger-captured dual write applied by `sync` with a
difference log replayable by time window, `reconcile` and the `cutover` read switch."""
