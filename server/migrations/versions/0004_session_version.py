"""session version: a per-user counter that logout and password changes bump to end sessions

Revision ID: 0004_session_version
Revises: 0003_dashboard
Create Date: 2026-12-03 08:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = '0004_session_version'
down_revision = '0003_dashboard'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('user') as batch_op:
        batch_op.add_column(sa.Column('session_version', sa.Integer(), nullable=False, server_default='0'))


def downgrade():
    with op.batch_alter_table('user') as batch_op:
        batch_op.drop_column('session_version')
