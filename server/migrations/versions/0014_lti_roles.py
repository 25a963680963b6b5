"""the role audit of LTI accounts (lti_role_change): every course role a launch or a roster sync set

Revision ID: lti_roles
Revises: hw2_provisional
Create Date: 2026-12-07 00:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'lti_roles'
down_revision = 'hw2_provisional'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'lti_role_change',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('course_id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('old', sa.String(length=20), nullable=True),
        sa.Column('new', sa.String(length=20), nullable=True),
        sa.Column('source', sa.String(length=20), nullable=False),
        sa.Column('at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['course_id'], ['course.id'], name='fk_lti_role_change_course'),
        sa.ForeignKeyConstraint(['user_id'], ['user.id'], name='fk_lti_role_change_user'),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('lti_role_change', schema=None) as batch_op:
        for col in ('course_id', 'user_id', 'at'):
            batch_op.create_index(f'ix_lti_role_change_{col}', [col])


def downgrade():
    op.drop_table('lti_role_change')
