"""free-text trust: teachers' decisions kept as labelled examples (reader_label) and the course's
choice to count unconfirmed verdicts (course.count_unconfirmed)

Revision ID: freetext
Revises: lti
Create Date: 2026-12-04 17:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'freetext'
down_revision = 'lti'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'reader_label',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('item', sa.String(length=200), nullable=False),
        sa.Column('answer_hash', sa.String(length=64), nullable=False),
        sa.Column('answer_text', sa.Text(), nullable=False),
        sa.Column('detail', sa.String(length=200), nullable=False),
        sa.Column('decided', sa.Float(), nullable=False),
        sa.Column('readings', sa.JSON(), nullable=False),
        sa.Column('how', sa.String(length=20), nullable=False),
        sa.Column('course_id', sa.Integer(), nullable=True),
        sa.Column('decided_by', sa.Integer(), nullable=True),
        sa.Column('decided_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['course_id'], ['course.id'], name='fk_reader_label_course'),
        sa.ForeignKeyConstraint(['decided_by'], ['user.id'], name='fk_reader_label_user'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('item', 'answer_hash', name='uq_reader_label_item_answer_hash'),
    )
    with op.batch_alter_table('reader_label', schema=None) as batch_op:
        batch_op.create_index('ix_reader_label_item', ['item'])
    with op.batch_alter_table('course', schema=None) as batch_op:
        batch_op.add_column(sa.Column('count_unconfirmed', sa.Boolean(), nullable=False, server_default='0'))


def downgrade():
    with op.batch_alter_table('course', schema=None) as batch_op:
        batch_op.drop_column('count_unconfirmed')
    with op.batch_alter_table('reader_label', schema=None) as batch_op:
        batch_op.drop_index('ix_reader_label_item')
    op.drop_table('reader_label')
