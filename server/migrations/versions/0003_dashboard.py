"""dashboard: regrades, score overrides, manual cell scores, audit log, extensions

Revision ID: 0003_dashboard
Revises: 0002_quiz
Create Date: 2026-12-02 14:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = '0003_dashboard'
down_revision = '0002_quiz'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('regrade',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('batch', sa.String(length=40), nullable=False),
    sa.Column('submission_id', sa.Integer(), sa.ForeignKey('submission.id'), nullable=False),
    sa.Column('course_id', sa.Integer(), sa.ForeignKey('course.id'), nullable=False),
    sa.Column('assignment_id', sa.String(length=80), nullable=False),
    sa.Column('old_status', sa.String(length=20), nullable=False),
    sa.Column('old_score', sa.Float(), nullable=True),
    sa.Column('old_max_score', sa.Float(), nullable=True),
    sa.Column('requested_by', sa.Integer(), sa.ForeignKey('user.id'), nullable=False),
    sa.Column('requested_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'))
    op.create_index('ix_regrade_batch', 'regrade', ['batch'])
    op.create_index('ix_regrade_submission_id', 'regrade', ['submission_id'])
    op.create_index('ix_regrade_course_id', 'regrade', ['course_id'])

    op.create_table('score_override',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('course_id', sa.Integer(), sa.ForeignKey('course.id'), nullable=False),
    sa.Column('user_id', sa.Integer(), sa.ForeignKey('user.id'), nullable=False),
    sa.Column('item', sa.String(length=200), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('set_by', sa.Integer(), sa.ForeignKey('user.id'), nullable=False),
    sa.Column('set_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('course_id', 'user_id', 'item'))
    op.create_index('ix_score_override_course_id', 'score_override', ['course_id'])
    op.create_index('ix_score_override_user_id', 'score_override', ['user_id'])

    op.create_table('manual_cell_score',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('submission_id', sa.Integer(), sa.ForeignKey('submission.id'), nullable=False),
    sa.Column('cell_id', sa.String(length=120), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('max_points', sa.Float(), nullable=False),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.Column('graded_by', sa.Integer(), sa.ForeignKey('user.id'), nullable=False),
    sa.Column('graded_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('submission_id', 'cell_id'))
    op.create_index('ix_manual_cell_score_submission_id', 'manual_cell_score', ['submission_id'])

    op.create_table('audit_entry',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('course_id', sa.Integer(), sa.ForeignKey('course.id'), nullable=False),
    sa.Column('user_id', sa.Integer(), sa.ForeignKey('user.id'), nullable=False),
    sa.Column('target', sa.String(length=240), nullable=False),
    sa.Column('old', sa.Float(), nullable=True),
    sa.Column('new', sa.Float(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('actor_id', sa.Integer(), sa.ForeignKey('user.id'), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'))
    op.create_index('ix_audit_entry_course_id', 'audit_entry', ['course_id'])
    op.create_index('ix_audit_entry_at', 'audit_entry', ['at'])

    op.create_table('extension',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('course_assignment_id', sa.Integer(), sa.ForeignKey('course_assignment.id'), nullable=False),
    sa.Column('user_id', sa.Integer(), sa.ForeignKey('user.id'), nullable=False),
    sa.Column('deadline', sa.DateTime(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('granted_by', sa.Integer(), sa.ForeignKey('user.id'), nullable=False),
    sa.Column('granted_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('course_assignment_id', 'user_id'))
    op.create_index('ix_extension_course_assignment_id', 'extension', ['course_assignment_id'])
    op.create_index('ix_extension_user_id', 'extension', ['user_id'])

    # The gradebook groups submissions and attempts by (student, item); the index also covers
    # the columns it aggregates, so the scan never visits the table rows.
    op.create_index('ix_submission_gradebook', 'submission',
                    ['course_id', 'status', 'user_id', 'assignment_id', 'created_at', 'score', 'max_score'])
    op.create_index('ix_quiz_attempt_gradebook', 'quiz_attempt',
                    ['course_id', 'status', 'user_id', 'quiz_id', 'score', 'max_score', 'attempt_no'])


def downgrade():
    op.drop_index('ix_quiz_attempt_gradebook', 'quiz_attempt')
    op.drop_index('ix_submission_gradebook', 'submission')
    for table in ('extension', 'audit_entry', 'manual_cell_score', 'score_override', 'regrade'):
        op.drop_table(table)
