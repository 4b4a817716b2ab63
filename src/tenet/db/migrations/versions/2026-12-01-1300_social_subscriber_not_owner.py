"""social: SOC-INV-11's "an item's owner is not subscribed to it" held by the database (a trigger on subscriptions,
and items' owner_id made immutable), so its detector reads the catalog instead of joining every subscription with
its item, which does not finish in the detector's 30 s at 20,000 accounts (docs/decisions.md, "Social at scale")

Revision ID: 8b4f2d6a1c07
Revises: 5e0a7c3d9b14
Create Date: 2026-12-01 13:00:00+00:00
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "8b4f2d6a1c07"
down_revision: str | Sequence[str] | None = "5e0a7c3d9b14"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The rows written before the trigger: the last full join. A violation stops the migration (fix the rows).
    op.execute("""
        DO $$
        DECLARE found uuid;
        BEGIN
          SELECT s.id INTO found FROM social.schedule_subscriptions s
            JOIN social.schedule_items i ON i.id = s.item_id
           WHERE s.subject_type = 'user' AND s.subscriber_id = i.owner_id LIMIT 1;
          IF found IS NOT NULL THEN
            RAISE EXCEPTION 'subscription % subscribes an item''s owner to it (SOC-INV-11): fix it first', found;
          END IF;
        END $$""")
    op.execute("""
        CREATE FUNCTION social.refuse_owner_subscription() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF EXISTS (SELECT 1 FROM social.schedule_items i WHERE i.id = NEW.item_id AND i.owner_id = NEW.subscriber_id)
          THEN
            RAISE EXCEPTION 'social.schedule_subscriptions %: the owner of item % cannot be subscribed to it',
                NEW.id, NEW.item_id
              USING ERRCODE = 'check_violation', CONSTRAINT = TG_NAME;
          END IF;
          RETURN NEW;
        END $$""")
    op.execute("""
        CREATE TRIGGER schedule_subscriptions_owner_not_subscribed
        BEFORE INSERT OR UPDATE OF item_id, subscriber_id, subject_type ON social.schedule_subscriptions
        FOR EACH ROW WHEN (NEW.subject_type = 'user') EXECUTE FUNCTION social.refuse_owner_subscription()""")
    op.execute("""
        CREATE FUNCTION social.refuse_owner_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION 'social.schedule_items %: owner_id never changes', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = TG_NAME;
        END $$""")
    op.execute("""
        CREATE TRIGGER schedule_items_owner_is_fixed
        BEFORE UPDATE OF owner_id ON social.schedule_items
        FOR EACH ROW WHEN (NEW.owner_id IS DISTINCT FROM OLD.owner_id) EXECUTE FUNCTION social.refuse_owner_change()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER schedule_items_owner_is_fixed ON social.schedule_items")
    op.execute("DROP FUNCTION social.refuse_owner_change()")
    op.execute("DROP TRIGGER schedule_subscriptions_owner_not_subscribed ON social.schedule_subscriptions")
    op.execute("DROP FUNCTION social.refuse_owner_subscription()")
