"""similarity runs of a homework

Revision ID: similarity
Revises: annotation_review_requests
Create Date: 2026-12-04 17:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'similarity'
down_revision = 'annotation_review_requests'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'similarity_run',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('course_id', sa.Integer(), nullable=False),
        sa.Column('assignment_id', sa.String(length=80), nullable=False),
        sa.Column('status', sa.String(length=20), nullable=False),
        sa.Column('trigger', sa.String(length=20), nullable=False),
        sa.Column('requested_by', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('started_at', sa.DateTime(), nullable=True),
        sa.Column('finished_at', sa.DateTime(), nullable=True),
        sa.Column('job_id', sa.String(length=80), nullable=True),
        sa.Column('enqueue_gen', sa.Integer(), nullable=False),
        sa.Column('summary_json', sa.JSON(), nullable=True),
        sa.Column('result_json', sa.JSON(), nullable=True),
        sa.Column('error_detail', sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(['course_id'], ['course.id'], name='fk_similarity_run_course'),
        sa.ForeignKeyConstraint(['requested_by'], ['user.id'], name='fk_similarity_run_requested_by'),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('similarity_run', schema=None) as batch_op:
        batch_op.create_index('ix_similarity_run_course_id', ['course_id'])
        batch_op.create_index('ix_similarity_run_status', ['status'])


def downgrade():
    with op.batch_alter_table('similarity_run', schema=None) as batch_op:
        batch_op.drop_index('ix_similarity_run_status')
        batch_op.drop_index('ix_similarity_run_course_id')
    op.drop_table('similarity_run')
