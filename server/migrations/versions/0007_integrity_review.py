"""integrity review: a submission whose grading raised integrity events waits for an instructor

Revision ID: integrity_review
Revises: 0003_dashboard
Create Date: 2026-12-03 08:30:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'integrity_review'
down_revision = 'quiz_review'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('submission', schema=None) as batch_op:
        batch_op.add_column(sa.Column('review_status', sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column('computed_score', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('review_reason', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('reviewed_by', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('reviewed_at', sa.DateTime(), nullable=True))
        batch_op.create_index('ix_submission_review_status', ['review_status'])
        batch_op.create_foreign_key('fk_submission_reviewed_by_user', 'user', ['reviewed_by'], ['id'])


def downgrade():
    with op.batch_alter_table('submission', schema=None) as batch_op:
        batch_op.drop_constraint('fk_submission_reviewed_by_user', type_='foreignkey')
        batch_op.drop_index('ix_submission_review_status')
        batch_op.drop_column('reviewed_at')
        batch_op.drop_column('reviewed_by')
        batch_op.drop_column('review_reason')
        batch_op.drop_column('computed_score')
        batch_op.drop_column('review_status')
