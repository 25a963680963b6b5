"""fair queue: where a waiting submission stands in line, and which upload replaced it

Revision ID: fair_queue
Revises: 0003_dashboard
Create Date: 2026-12-03 07:50:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'fair_queue'
down_revision = '0004_session_version'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('submission') as batch:
        batch.add_column(sa.Column('queued_since', sa.DateTime(), nullable=True))
        batch.add_column(sa.Column('replaced_by', sa.Integer(), nullable=True))


def downgrade():
    with op.batch_alter_table('submission') as batch:
        batch.drop_column('replaced_by')
        batch.drop_column('queued_since')
