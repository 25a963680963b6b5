"""annotation review requests: a student asks a teacher to look at an auto-graded annotation

Revision ID: annotation_review_requests
Revises: integrity_review
Create Date: 2026-12-03 15:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'annotation_review_requests'
down_revision = 'integrity_review'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'annotation_review_request',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('check_id', sa.String(length=120), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('comment', sa.Text(), nullable=False),
        sa.Column('auto_points', sa.Float(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('closed_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['submission_id'], ['submission.id'], name='fk_annotation_review_request_submission'),
        sa.ForeignKeyConstraint(['user_id'], ['user.id'], name='fk_annotation_review_request_user'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('submission_id', 'check_id', name='uq_annotation_review_request_submission_check'),
    )
    with op.batch_alter_table('annotation_review_request', schema=None) as batch_op:
        batch_op.create_index('ix_annotation_review_request_submission_id', ['submission_id'])
        batch_op.create_index('ix_annotation_review_request_user_id', ['user_id'])


def downgrade():
    with op.batch_alter_table('annotation_review_request', schema=None) as batch_op:
        batch_op.drop_index('ix_annotation_review_request_user_id')
        batch_op.drop_index('ix_annotation_review_request_submission_id')
    op.drop_table('annotation_review_request')
