"""release control: when students see a homework's or quiz's scores, and its audit log

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


def downgrade():
    with op.batch_alter_table('release_event', schema=None) as batch_op:
        batch_op.drop_index('ix_release_event_course_id')
    op.drop_table('release_event')
    with op.batch_alter_table('release_setting', schema=None) as batch_op:
        batch_op.drop_index('ix_release_setting_course_id')
    op.drop_table('release_setting')
