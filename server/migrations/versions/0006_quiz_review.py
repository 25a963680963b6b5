"""quiz review: free-text answers waiting for a teacher, students' review requests, decisions

Revision ID: quiz_review
Revises: 0003_dashboard
Create Date: 2026-12-03 08:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'quiz_review'
down_revision = 'fair_queue'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('quiz_answer') as batch:
        batch.add_column(sa.Column('review_state', sa.String(length=12), nullable=True))
        batch.add_column(sa.Column('review_comment', sa.Text(), nullable=True))
        batch.add_column(sa.Column('auto_score', sa.Float(), nullable=True))
        batch.add_column(sa.Column('reviewed_by', sa.Integer(), sa.ForeignKey('user.id', name='fk_quiz_answer_reviewed_by'), nullable=True))
        batch.add_column(sa.Column('reviewed_at', sa.DateTime(), nullable=True))
        batch.create_index('ix_quiz_answer_review_state', ['review_state'])

    op.create_table('quiz_review_decision',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('course_id', sa.Integer(), sa.ForeignKey('course.id'), nullable=True),
    sa.Column('question_id', sa.String(length=160), nullable=False),
    sa.Column('group_key', sa.String(length=64), nullable=False),
    sa.Column('answer_text', sa.Text(), nullable=False),
    sa.Column('fraction', sa.Float(), nullable=False),
    sa.Column('rubric_reading', sa.JSON(), nullable=False),
    sa.Column('answers', sa.Integer(), nullable=False),
    sa.Column('decided_by', sa.Integer(), sa.ForeignKey('user.id'), nullable=False),
    sa.Column('decided_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'))
    op.create_index('ix_quiz_review_decision_course_id', 'quiz_review_decision', ['course_id'])
    op.create_index('ix_quiz_review_decision_question_id', 'quiz_review_decision', ['question_id'])


def downgrade():
    op.drop_index('ix_quiz_review_decision_question_id', table_name='quiz_review_decision')
    op.drop_index('ix_quiz_review_decision_course_id', table_name='quiz_review_decision')
    op.drop_table('quiz_review_decision')
    with op.batch_alter_table('quiz_answer') as batch:
        batch.drop_index('ix_quiz_answer_review_state')
        batch.drop_column('reviewed_at')
        batch.drop_column('reviewed_by')
        batch.drop_column('auto_score')
        batch.drop_column('review_comment')
        batch.drop_column('review_state')
