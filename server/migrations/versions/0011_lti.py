"""release control (when students see a homework's or quiz's scores, and its log), regrade requests per check, LTI 1.3 tables

Revision ID: lti
Revises: quizint
Create Date: 2026-12-04 17:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'lti'
down_revision = 'quizint'
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


    op.create_table(
        'lti_platform',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('issuer', sa.String(length=255), nullable=False),
        sa.Column('client_id', sa.String(length=255), nullable=False),
        sa.Column('auth_login_url', sa.String(length=500), nullable=False),
        sa.Column('auth_token_url', sa.String(length=500), nullable=False),
        sa.Column('key_set_url', sa.String(length=500), nullable=False),
        sa.Column('deployment_ids', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('issuer', 'client_id', name='uq_lti_platform_issuer_client'),
    )
    op.create_table(
        'lti_context',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('platform_id', sa.Integer(), nullable=False),
        sa.Column('context_id', sa.String(length=255), nullable=False),
        sa.Column('course_id', sa.Integer(), nullable=False),
        sa.Column('services', sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(['platform_id'], ['lti_platform.id'], name='fk_lti_context_platform'),
        sa.ForeignKeyConstraint(['course_id'], ['course.id'], name='fk_lti_context_course'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('platform_id', 'context_id', name='uq_lti_context_platform_context'),
    )
    op.create_table(
        'lti_user',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('platform_id', sa.Integer(), nullable=False),
        sa.Column('sub', sa.String(length=255), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['platform_id'], ['lti_platform.id'], name='fk_lti_user_platform'),
        sa.ForeignKeyConstraint(['user_id'], ['user.id'], name='fk_lti_user_user'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('platform_id', 'sub', name='uq_lti_user_platform_sub'),
    )
    op.create_table(
        'lti_nonce',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('issuer', sa.String(length=255), nullable=False),
        sa.Column('nonce', sa.String(length=255), nullable=False),
        sa.Column('used_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('issuer', 'nonce', name='uq_lti_nonce_issuer_nonce'),
    )
    op.create_table(
        'lti_line_item',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('context_id', sa.Integer(), nullable=False),
        sa.Column('item', sa.String(length=200), nullable=False),
        sa.Column('url', sa.String(length=500), nullable=False),
        sa.ForeignKeyConstraint(['context_id'], ['lti_context.id'], name='fk_lti_line_item_context'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('context_id', 'item', name='uq_lti_line_item_context_item'),
    )
    op.create_table(
        'lti_grade_sync',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('context_id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('item', sa.String(length=200), nullable=False),
        sa.Column('sent_score', sa.Float(), nullable=True),
        sa.Column('state', sa.String(length=12), nullable=False),
        sa.Column('tries', sa.Integer(), nullable=False),
        sa.Column('error', sa.Text(), nullable=False),
        sa.Column('updated_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['context_id'], ['lti_context.id'], name='fk_lti_grade_sync_context'),
        sa.ForeignKeyConstraint(['user_id'], ['user.id'], name='fk_lti_grade_sync_user'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('context_id', 'user_id', 'item', name='uq_lti_grade_sync_context_user_item'),
    )
    for table, cols in (('lti_line_item', ('context_id',)), ('lti_grade_sync', ('context_id', 'user_id', 'state')),
                        ('lti_context', ('platform_id', 'course_id')), ('lti_user', ('platform_id', 'user_id')),
                        ('lti_nonce', ('used_at',))):
        with op.batch_alter_table(table, schema=None) as batch_op:
            for col in cols:
                batch_op.create_index(f'ix_{table}_{col}', [col])


def downgrade():
    for table in ('lti_grade_sync', 'lti_line_item', 'lti_nonce', 'lti_user', 'lti_context', 'lti_platform'):
        op.drop_table(table)
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
