"""homework 2's annotations waiting for a teacher, as rows (provisional_field): the gradebook counts
them when the course counts unconfirmed verdicts and marks them either way

Revision ID: hw2_provisional
Revises: freetext
Create Date: 2026-12-05 03:00:00

"""
from alembic import op
import sqlalchemy as sa


revision = 'hw2_provisional'
down_revision = 'freetext'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'provisional_field',
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('check_id', sa.String(length=120), nullable=False),
        sa.Column('provisional', sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(['submission_id'], ['submission.id'], name='fk_provisional_field_submission'),
        sa.PrimaryKeyConstraint('submission_id', 'check_id'),
    )
    # reports stored before this revision: their waiting annotations become rows too
    from server.scores.provisional_fields import rows_of

    bind = op.get_bind()
    sub = sa.table('submission', sa.column('id', sa.Integer), sa.column('report_json', sa.JSON),
                   sa.column('assignment_id', sa.String), sa.column('status', sa.String))
    table = sa.table('provisional_field', sa.column('submission_id', sa.Integer), sa.column('check_id', sa.String),
                     sa.column('provisional', sa.Float))
    found = bind.execute(sa.select(sub.c.id, sub.c.report_json).where(sub.c.assignment_id == 'config_annotation'))
    rows = [{"submission_id": sid, "check_id": cid, "provisional": pts}
            for sid, report in found for cid, pts in rows_of(report).items()]
    if rows:
        op.bulk_insert(table, rows)


def downgrade():
    op.drop_table('provisional_field')
