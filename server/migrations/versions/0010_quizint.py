"""regrade counted score: a regrade remembers the score that counted before (the grader's plus
what teachers gave by hand), so its summary compares what the gradebook shows

Revision ID: quizint
Revises: similarity
Create Date: 2026-12-04 17:30:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'quizint'
down_revision = 'similarity'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('regrade', schema=None) as batch_op:
        batch_op.add_column(sa.Column('old_counted', sa.Float(), nullable=True))


def downgrade():
    with op.batch_alter_table('regrade', schema=None) as batch_op:
        batch_op.drop_column('old_counted')
