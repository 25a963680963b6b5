"""release control (when students see a homework's or quiz's scores, and its log) and regrade requests per check

Revision ID: lti
Revises: annotation_review_requests
Create Date: 2026-12-04 17:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'lti'
down_revision = 'annotation_review_requests'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'release_setting',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('course_id', sa.Integer(), nullable=False),
        sa.Column('item', sa.String(length=200), nullable=False),
        sa.Column('mode', sa.String(length=20), nullable=False),
        sa.Column('published_at', sa.DateTime(), nullable=True),
        sa.Column('published_by', sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(['course_id'], ['course.id'], name='fk_release_setting_course'),
        sa.ForeignKeyConstraint(['published_by'], ['user.id'], name='fk_release_setting_published_by'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('course_id', 'item', name='uq_release_setting_course_item'),
    )
    with op.batch_alter_table('release_setting', schema=None) as batch_op:
        batch_op.create_index('ix_release_setting_course_id', ['course_id'])
    op.create_table(
        'release_event',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('course_id', sa.Integer(), nullable=False),
        sa.Column('item', sa.String(length=200), nullable=False),
        sa.Column('action', sa.String(length=40), nullable=False),
        sa.Column('actor_id', sa.Integer(), nullable=False),
        sa.Column('at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['course_id'], ['course.id'], name='fk_release_event_course'),
        sa.ForeignKeyConstraint(['actor_id'], ['user.id'], name='fk_release_event_actor'),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('release_event', schema=None) as batch_op:
        batch_op.create_index('ix_release_event_course_id', ['course_id'])
    op.create_table(
        'regrade_request',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('course_id', sa.Integer(), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('check_id', sa.String(length=120), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('auto_points', sa.Float(), nullable=False),
        sa.Column('max_points', sa.Float(), nullable=False),
        sa.Column('state', sa.String(length=12), nullable=False),
        sa.Column('reply', sa.Text(), nullable=False),
        sa.Column('new_points', sa.Float(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('decided_by', sa.Integer(), nullable=True),
        sa.Column('decided_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['course_id'], ['course.id'], name='fk_regrade_request_course'),
        sa.ForeignKeyConstraint(['submission_id'], ['submission.id'], name='fk_regrade_request_submission'),
        sa.ForeignKeyConstraint(['user_id'], ['user.id'], name='fk_regrade_request_user'),
        sa.ForeignKeyConstraint(['decided_by'], ['user.id'], name='fk_regrade_request_decided_by'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('submission_id', 'check_id', name='uq_regrade_request_submission_check'),
    )
    with op.batch_alter_table('regrade_request', schema=None) as batch_op:
        batch_op.create_index('ix_regrade_request_course_id', ['course_id'])
        batch_op.create_index('ix_regrade_request_submission_id', ['submission_id'])
        batch_op.create_index('ix_regrade_request_user_id', ['user_id'])
        batch_op.create_index('ix_regrade_request_state', ['state'])


def downgrade():
    with op.batch_alter_table('regrade_request', schema=None) as batch_op:
        for name in ('state', 'user_id', 'submission_id', 'course_id'):
            batch_op.drop_index(f'ix_regrade_request_{name}')
    op.drop_table('regrade_request')
    with op.batch_alter_table('release_event', schema=None) as batch_op:
        batch_op.drop_index('ix_release_event_course_id')
    op.drop_table('release_event')
    with op.batch_alter_table('release_setting', schema=None) as batch_op:
        batch_op.drop_index('ix_release_setting_course_id')
    op.drop_table('release_setting')
